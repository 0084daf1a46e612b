"""The slice mode's CTI cleanup and UDM call (``udm.host.gridslicerun``,
issue 31): a visited key's final windows are dropped together, its events
retired in bulk (the id index forgets them by C-level passes when each id
still names its record, one by one otherwise: an id reused, or pruned by
an earlier CTI), and an argument-free ``@aggregate`` is called directly.
Checked exactly against feeding one element at a time and against the
reference evaluator over long streams (many ``LINGER`` periods), with
the id index holding only events a key still keeps."""

from __future__ import annotations

import random
import statistics
from typing import Any, ClassVar

import pytest

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    IntervalEvent,
    TumblingWindow,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.griddue import LINGER
from udm.host.gridslicerun import direct
from udm.host.stream import Element
from udm.sdk import Aggregate, aggregate, operator


@aggregate
def low_median(values: list[int]) -> int:
    """Non-incremental, no arguments: called directly by the loop."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@aggregate
def quantile(values: list[int], q: float = 0.5) -> int:
    """With an argument: through ``compute_result``, which passes it."""
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


@operator
def above_mean(values: list[int]) -> list[int]:
    """An operator: never called directly."""
    m = statistics.mean(values)
    return [v for v in values if v > m]


class Doubled(low_median):  # type: ignore[misc, valid-type]
    """A subclass with its own ``compute_result``: that one is called."""

    def compute_result(self, payloads: Any) -> Any:
        return 2 * super().compute_result(payloads)


def long_stream(seed: int, n: int, keys: int, reuse: int | None) -> list[Element]:
    """In-order point events over many hops, a CTI 3 ticks behind every
    10 events; with ``reuse``, event ids repeat every ``reuse`` events
    (the earlier event long expired). One key gets an event every tick:
    no CTI makes its windows due, so its events stay until its ``LINGER``
    visit, while the CTIs' amortized sweep of the id index (every record
    ending before the CTI) forgets the older ones first."""
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    for i in range(n):
        t += 1 if keys == 1 else rng.randint(0, 2)
        ident = i % reuse if reuse else i
        out.append(Insert(ident, t, t + 1, {"k": rng.randrange(keys), "v": rng.randint(0, 30)}))
        if i % 10 == 9:
            out.append(Cti(t - 3))
    return out


def reference(stream: list[Element], window: Any, udm: Any) -> dict[Any, Any]:
    """Inserts only: the CHT is the events themselves."""
    cht = [IntervalEvent(e.start, e.end, e.payload) for e in stream if isinstance(e, Insert)]
    return {k: c for k, c in evaluate_by_key(cht, "k", window, udm, value="v").items() if c}


def kept_records(host: Host) -> set[int]:
    fast = host._fast
    assert fast is not None
    return {id(r) for ks in fast.keys.values() if ks.events for r in ks.events.records}


@pytest.mark.parametrize("udm", [low_median, quantile(q=0.75), above_mean], ids=repr)
@pytest.mark.parametrize("window", [HoppingWindow(6, 2), TumblingWindow(4)], ids=repr)
@pytest.mark.parametrize("reuse", [None, 40, 300])
@pytest.mark.parametrize(("seed", "keys"), [(0, 1), (1, 4), (2, 4)])
def test_long_streams_forget_final_windows_and_events_in_bulk(
    udm: Any, window: Any, reuse: int | None, seed: int, keys: int
) -> None:
    stream = long_stream(seed, 2500, keys, reuse)
    one = Host(window, udm, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)]
    batched = Host(window, udm, key="k", value="v")
    fast = batched._fast
    assert fast is not None and fast.lazy
    got = batched.process_many(stream[:1200]) + batched.process_many(stream[1200:])
    assert got == expected
    # the id index holds no event its key retired (a reused id: its newest)
    assert {id(r) for r in fast.events.values()} <= kept_records(batched)
    # each key keeps about its open windows, the CTI lag and LINGER hops
    assert max(len(ks.wins) for ks in fast.keys.values()) <= 4 + LINGER + 3
    assert fast.reused == (reuse == 40)  # 300: retired before its id comes back
    got += batched.flush()
    assert got == expected + one.flush()
    assert output_cht_by_key(got) == reference(stream, window, udm)


def test_a_key_left_with_events_and_no_window_is_visited_when_they_end() -> None:
    """A key whose windows were all forgotten while it still keeps events
    (a CTI just behind them) is registered for when they end; a later CTI
    retires them, the id index forgets them, and the key, left with nothing,
    is dropped."""
    window = HoppingWindow(4, 2)
    host = Host(window, low_median, key="k", value="v")
    fast = host._fast
    assert fast is not None
    inserts = [Insert(i, 10 * i, 10 * i + 1, {"k": "a", "v": i}) for i in range(5)]
    inserts += [Insert(100 + i, 2 * i, 2 * i + 1, {"k": "b", "v": 7 * i}) for i in range(30, 40)]
    inserts.sort(key=lambda e: e.start)
    stream: list[Element] = list(inserts)
    out = host.process_many([*stream, Cti(79)])
    out += host.process_many([Cti(200)])
    assert "b" not in fast.keys  # retired (they end before the CTI), then the key dropped
    assert all(r[3] != "b" for r in fast.events.values())
    out += host.flush()
    assert output_cht_by_key(out) == reference(stream, window, low_median)


def test_the_loop_calls_an_argument_free_aggregate_directly() -> None:
    """``direct``: the decorated function for an ``@aggregate`` (or
    ``@operator``) without arguments; ``compute_result`` for one with
    arguments, a subclass with its own ``compute_result``, or a class that
    merely names a ``__wrapped__`` function; the results agree."""
    for decorated in (low_median, above_mean):
        plain = decorated()
        assert direct(plain, plain.compute_result) is decorated.__wrapped__

    class Named(Aggregate):
        __wrapped__ = staticmethod(low_median.__wrapped__)
        args: ClassVar[dict[str, Any]] = {}

        def compute_result(self, payloads: Any) -> Any:
            return -1

    for udm in (quantile(q=0.25), Doubled(), Named()):
        assert direct(udm, udm.compute_result) == udm.compute_result
    assert Doubled().compute_result([3, 1, 2]) == 4
    window = HoppingWindow(6, 2)
    stream = long_stream(7, 300, 2, None)
    out: list[Element] = []
    host = Host(window, Doubled, key="k", value="v")
    out = host.process_many(stream) + host.flush()
    doubled = {
        k: [IntervalEvent(e.start, e.end, 2 * e.payload) for e in c]
        for k, c in reference(stream, window, low_median).items()
    }
    assert output_cht_by_key(out) == doubled
