"""Edge values through the engines: the id ``None``, NaN join keys on the
batched join, a start at ``MIN_TIME``, and engines that give no CHT.
Regressions found by a black-box acceptance tester (CHANGELOG.md,
Unreleased, Fixed); each fails without its fix, and each compares the
in-process engine with the reference evaluator or a hand-computed CHT."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from typing import Any

import numpy as np
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
    output_cht_by_key,
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


#: NaN makers: numpy's (a pandas or numpy column's keys) and a mixture
#: with Python's, all of which must be one key
NANS: dict[str, Any] = {
    "float64": lambda i: np.float64("nan"),
    "float32": lambda i: np.float32("nan"),
    "float16": lambda i: np.float16("nan"),
    "mixed": lambda i: [float("nan"), np.float64("nan"), np.float32("nan")][i % 3],
}


@pytest.mark.parametrize("nan", list(NANS))
@pytest.mark.parametrize(
    ("window", "udm"),
    [(TumblingWindow(5), Mean), (HoppingWindow(10, 5), median), (SnapshotWindow(), count)],
    ids=["tumbling-incremental", "hopping-median", "snapshot"],
)
@pytest.mark.parametrize("key", ["k", lambda p: (p["k"], 1)], ids=["field", "tuple"])
def test_numpy_nan_keys_are_one_group(window: Any, udm: Any, key: Any, nan: str) -> None:
    """``type(key) in NORMALIZED`` missed ``numpy.float64`` (a float
    subclass) and ``nan_free`` missed ``numpy.float32`` (no float at all):
    each numpy NaN made a group of its own in ``evaluate_by_key`` and on
    every host path (black-box acceptance bb4 #5). The expected groups are
    the reference's over Python NaNs, which are one key (tested above)."""
    make = NANS[nan]
    rows = [(i, i + 1, {"k": make(i) if i % 2 else 1.5, "v": float(i)}) for i in range(40)]
    plain = [(s, e, {**p, "k": float("nan") if i % 2 else 1.5}) for i, (s, e, p) in enumerate(rows)]
    expected = evaluate_by_key(Cht(plain), key, window, udm, value="v")
    assert len(expected) == 2
    assert evaluate_by_key(Cht(rows), key, window, udm, value="v") == expected
    elements = [Insert(i, s, e, p) for i, (s, e, p) in enumerate(rows)] + [Cti(60)]
    for fast_path in (True, False):
        for feed in ("process", "list", "generator", "inserts"):
            host = Host(window, udm, key=key, value="v", fast_path=fast_path)
            if feed == "process":
                out = [o for el in elements for o in host.process(el)]
            elif feed == "list":
                out = host.process_many(elements)
            elif feed == "generator":
                out = host.process_many(iter(elements))
            else:
                ids, starts, ends, payloads = zip(
                    *((i, *r) for i, r in enumerate(rows)), strict=True
                )
                out = host.process_inserts(ids, starts, ends, payloads) + host.process(Cti(60))
            got = output_cht_by_key(out + host.flush())
            assert got == expected, (fast_path, feed)


def _run(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (numpy not yet loaded)."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


PRELUDE = (
    "import sys\n"
    "from udm.host import Host, Insert, TumblingWindow, output_cht_by_key\n"
    "from udm.host.rows import NORMALIZED\n"
    "from udm.sdk import aggregate\n"
    "assert 'numpy' not in sys.modules\n"
    "count = aggregate(len)\n"
)


def test_numpy_loaded_after_the_host_was_made() -> None:
    """udm does not import numpy: the host learns numpy's float types when
    it takes elements, so a host made before numpy was loaded (pandas read
    after it) still makes its NaNs one key."""
    code = PRELUDE + (
        "host = Host(TumblingWindow(10), count, key='k')\n"
        "import numpy as np\n"
        "assert np.float32 not in NORMALIZED\n"
        "nans = [Insert(i, i, i + 1, {'k': np.float32('nan')}) for i in range(3)]\n"
        "out = [o for e in nans for o in host.process(e)]\n"
        "print(output_cht_by_key(out + host.flush()))\n"
    )
    assert _run(code) == "{nan: Cht([0, 10) 3)}\n"


def test_the_query_engines_make_numpy_nans_one_key_unprompted() -> None:
    """The query API groups rows with ``key_of``, which no host entry point
    precedes: ``nan_free`` learns numpy's float types from the first numpy
    value it meets (the reference engine made three groups of float32 NaNs
    while no host had run)."""
    code = PRELUDE + (
        "import numpy as np\n"
        "from udm.host.query import Stream\n"
        "rows = [(i, i + 1, {'k': np.float32('nan')}) for i in range(3)]\n"
        "q = Stream.from_cht(rows, key='k').tumbling_window(10).aggregate(count)\n"
        "print(q.to_cht(engine='reference'))\n"
        "print(q.to_cht(engine='host'))\n"
    )
    assert _run(code) == "{nan: Cht([0, 10) 3)}\n" * 2
