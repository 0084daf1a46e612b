"""Late events and retractions right after the slice mode's cleanup
(``udm.host.gridslicerun``, issue 31): a late point at the CTI lands in a
key's oldest open window, and a retraction of a point just after the CTI
re-emits its windows, once CTIs made windows final and a key's events
older than its open windows retirable. Checked exactly against one
element at a time and against the reference evaluator on the final CHT:
a cleanup that forgot an event or a window an open window still needs
(at a CTI's visit or as a key's inserts move it on) fails here."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    IntervalEvent,
    Retract,
    TumblingWindow,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.stream import Element
from udm.sdk import aggregate


@aggregate
def low_median(values: list[int]) -> int:
    """Non-incremental: windows are read as slices of the key's events."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@aggregate
def spread(values: list[int]) -> tuple[int, int, int]:
    """Every member counts: a window missing one event reads differently."""
    return (len(values), sum(values), max(values))


def final_cht(stream: list[Element]) -> list[IntervalEvent[Any]]:
    """The events as the stream leaves them: retractions shorten or remove."""
    live: dict[Any, list[Any]] = {}
    for e in stream:
        if isinstance(e, Insert):
            live[e.id] = [e.start, e.end, e.payload]
        elif isinstance(e, Retract):
            if e.new_end == e.start:
                del live[e.id]
            else:
                live[e.id][1] = e.new_end
    return [IntervalEvent(s, t, p) for s, t, p in live.values()]


def stream_with_stragglers(seed: int, batches: int, keys: int, window: Any) -> list[list[Element]]:
    """Batches of in-order points over ``keys`` keys (values distinct, so a
    missing member changes a result), each ending with a CTI a few ticks
    behind; the next batch opens with late points at and just after that
    CTI (in the oldest open window, whose older members a wrong cleanup
    would have dropped) and retractions of live points that end after it
    (full ones, and one lengthened to reach later windows)."""
    rng = random.Random(seed)
    out: list[list[Element]] = []
    live: list[Insert] = []
    t, ident, cti = 0, 0, 0
    for _ in range(batches):
        batch: list[Element] = []
        for _ in range(rng.randint(0, 3)):  # late points, at the CTI or just after
            start = cti + rng.randint(0, 2)
            e = Insert(ident, start, start + 1, {"k": rng.randrange(keys), "v": 1000 + ident})
            ident += 1
            batch.append(e)
            live.append(e)
        for _ in range(rng.randint(0, 2)):  # retractions of points still live
            mine = [e for e in live if e.start >= cti]
            if not mine:
                break
            e = mine[rng.randrange(len(mine))]
            live.remove(e)
            new_end = e.start if rng.random() < 0.7 else e.start + window.size
            batch.append(Retract(e.id, e.start, e.end, new_end, e.payload))
        for _ in range(rng.randint(5, 40)):
            t += rng.randint(0, 2)
            e = Insert(ident, t, t + 1, {"k": rng.randrange(keys), "v": ident})
            ident += 1
            batch.append(e)
            live.append(e)
        cti = max(cti, t - rng.randint(0, 4))
        batch.append(Cti(cti))
        live = [e for e in live if e.end > cti]
        out.append(batch)
    return out


@pytest.mark.parametrize("udm", [low_median, spread], ids=repr)
@pytest.mark.parametrize(
    "window", [HoppingWindow(6, 2), HoppingWindow(10, 3), TumblingWindow(4)], ids=repr
)
@pytest.mark.parametrize(("seed", "keys"), [(0, 1), (1, 3), (2, 3), (3, 8)])
def test_late_points_and_retractions_right_after_the_cleanup(
    udm: Any, window: Any, seed: int, keys: int
) -> None:
    batches = stream_with_stragglers(seed, 120, keys, window)
    stream = [e for b in batches for e in b]
    one = Host(window, udm, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    host = Host(window, udm, key="k", value="v")
    fast = host._fast
    assert fast is not None and fast.lazy
    got: list[Element] = []
    for b in batches:
        got += host.process_many(b)
    got += host.flush()
    assert got == expected
    reference = evaluate_by_key(final_cht(stream), "k", window, udm, value="v")
    assert output_cht_by_key(got) == {k: c for k, c in reference.items() if c}


def test_a_late_point_and_a_retraction_after_a_cti_behind_every_key() -> None:
    """In-order points over three keys, one CTI well behind them (no key is
    due at it, so its windows final there wait to be forgotten), then one
    point a key: a late point at the CTI and the full retraction of a
    point just after it re-emit exactly the windows the reference gives,
    the late one in key 0's oldest open window."""
    window = HoppingWindow(6, 2)
    host = Host(window, spread, key="k", value="v")
    stream: list[Element] = [Insert(t, t, t + 1, {"k": t % 3, "v": t}) for t in range(60)]
    stream.append(Cti(50))  # final: windows up to [44, 50); the oldest open one [46, 52)
    stream += [Insert(t, t, t + 1, {"k": t % 3, "v": t}) for t in (60, 61, 62)]
    out = host.process_many(stream)
    late = Insert(100, 50, 51, {"k": 0, "v": -5})  # in [46, 52), [48, 54), [50, 56)
    gone = Retract(50, 50, 51, 50, {"k": 2, "v": 50})
    tail = [late, gone, Cti(70)]
    out += host.process_many(tail) + host.flush()
    reference = evaluate_by_key(final_cht(stream + tail), "k", window, spread, value="v")
    got = output_cht_by_key(out)
    assert got == {k: c for k, c in reference.items() if c}
    # key 0's oldest open window [46, 52) holds 48, 51 and the late point
    assert IntervalEvent(46, 52, (3, 48 + 51 - 5, 51)) in got[0]
