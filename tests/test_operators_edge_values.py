"""Edge values through the engines: the id ``None``, NaN join keys on the
batched join, a start at ``MIN_TIME``, and engines that give no CHT.
Regressions found by a black-box acceptance tester (CHANGELOG.md,
Unreleased, Fixed); each fails without its fix, and each compares the
in-process engine with the reference evaluator or a hand-computed CHT."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from engine_support import Mean

from udm.host import (
    MIN_TIME,
    Cht,
    Cti,
    HoppingWindow,
    Host,
    Insert,
    SnapshotWindow,
    TumblingWindow,
    evaluate_by_key,
)
from udm.host.query import Stream
from udm.host.rows import NAN_KEY
from udm.sdk import aggregate


@pytest.mark.parametrize(
    "query",
    [
        lambda s: s.shift(1),
        lambda s: s.set_duration(3),
        lambda s: s.align(2),
        lambda s: s.finalize(2),
    ],
    ids=["shift", "set_duration", "align", "finalize"],
)
def test_the_id_none_is_an_id_like_any_other(query: Any) -> None:
    """``OutputIds`` took ``dict.get(None)``'s ``None`` for "the newest
    name is None" and deleted an entry that was not there (KeyError)."""
    q = query(Stream.from_events([Insert(None, 2, 5, 4), Insert("b", 3, 6, 5)]))
    assert q.to_cht(engine="host") == q.to_cht(engine="reference")
    assert q.to_cht(engine="host", consistency="strong") == q.to_cht(engine="reference")


def test_nan_join_keys_on_the_batched_join() -> None:
    """64 inserts a side take the batched join, which compares two NaN
    keys: ``NAN_KEY == NAN_KEY`` recursed through ``__ne__``."""
    nan = float("nan")

    def side(n: int) -> Stream:
        return Stream.from_events([Insert(i, i, i + 5, {"k": nan, "i": i}) for i in range(n)])

    q = side(64).join(side(64), on="k")
    got = q.to_cht(engine="host")
    assert got == q.to_cht(engine="reference")
    assert isinstance(got, dict) and list(got) == [NAN_KEY]  # one key
    # each event meets the events overlapping it: [i, i+5) and [j, j+5), |i - j| < 5
    assert len(got[NAN_KEY]) == sum(1 for i in range(64) for j in range(64) if abs(i - j) < 5)
    assert NAN_KEY == NAN_KEY and NAN_KEY != 1.0
    assert not NAN_KEY.__ne__(nan)  # the method under test
    assert math.isnan(NAN_KEY)


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_a_new_start_at_min_time_is_in_the_time_range(engine: str) -> None:
    s = Stream.from_cht([(MIN_TIME, 5, 1)])
    assert s.shift(0).to_cht(engine=engine) == Cht([(MIN_TIME, 5, 1)])
    q = s.alter_lifetime(start=lambda t: t, duration=lambda t, e: e - t)
    assert q.to_cht(engine=engine) == Cht([(MIN_TIME, 5, 1)])


def test_to_cht_on_the_streaming_engine_names_the_batch_engines() -> None:
    with pytest.raises(ValueError, match=r"runs continuously.*to_cht\(engine='spark'\)"):
        Stream.from_cht([(0, 5, 1)]).shift(1).to_cht(engine="streaming")


@aggregate
def count(values: list[Any]) -> int:
    """How many events a window holds."""
    return len(values)


@aggregate
def median(values: list[float]) -> float:
    """A non-incremental aggregate: the host's slice path."""
    return statistics.median(values)


@pytest.mark.parametrize(
    ("window", "udm"),
    [
        (TumblingWindow(5), count),
        (TumblingWindow(5), Mean),
        (HoppingWindow(10, 5), median),
        (SnapshotWindow(), count),
    ],
    ids=["tumbling", "tumbling-incremental", "hopping-median", "snapshot"],
)
@pytest.mark.parametrize("key", ["k", lambda p: (p["k"], 1)], ids=["field", "tuple"])
def test_every_nan_key_is_one_group_in_the_host_and_evaluate_by_key(
    window: Any, udm: Any, key: Any
) -> None:
    """Each NaN object hashes apart: ``evaluate_by_key`` and ``Host(key=)``
    made a group of each NaN event (black-box acceptance). Distinct NaN
    objects, keyed by a field or inside a tuple key, are one group, as the
    query API and Spark make them (docs/concepts.md, "Group keys")."""
    rows = [(i, i + 1, {"k": float("nan") if i % 2 else 1.5, "v": float(i)}) for i in range(40)]
    expected = evaluate_by_key(Cht(rows), key, window, udm, value="v")
    assert len(expected) == 2
    want = {(k[0] if isinstance(k, tuple) else k) is NAN_KEY for k in expected}
    assert want == {True, False}
    elements = [Insert(i, s, e, p) for i, (s, e, p) in enumerate(rows)] + [Cti(60)]
    for batch in (True, False):
        host = Host(window, udm, key=key, value="v")
        if batch:
            out = host.process_many(elements) + host.flush()
        else:
            out = [o for el in elements for o in host.process(el)] + host.flush()
        got: dict[Any, list[Any]] = {}
        for k, s, e, p in (
            (o.id.key, o.start, o.end, o.payload) for o in out if isinstance(o, Insert)
        ):
            got.setdefault(k, []).append((s, e, p))
        assert {k: Cht(v) for k, v in got.items()} == expected
