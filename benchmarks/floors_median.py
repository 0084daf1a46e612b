"""Floors of the hopping median case (``host.hopping_median``): plain
Python over the same elements as the host, measured in the same process.

``floor_hopping_median`` is the target's baseline (a bisect slice of each
key's sorted values per window, ``statistics.median``);
``minimal_hopping_median`` is what any host with this one's contract must
at least do (the UDM's call and an output ``Insert`` per window, the
record a retraction needs per event), to show what the 5x target means.
``floor_events_median`` is the same bisect loop over a CHT's events, for
the reference evaluator's case (``host.reference_linear``): how much
faster than the data plain linear Python grows on the machine.
"""

from __future__ import annotations

from typing import Any

from udm.host import Insert


def floor_hopping_median(elements: list[Any], size: int, hop: int) -> int:
    """The floor: over the same elements (CTIs skipped), per key the times
    and values in time order; each window's values are a bisect slice,
    passed to ``statistics.median``."""
    import bisect
    import statistics

    by_key: dict[Any, tuple[list[int], list[float]]] = {}
    for el in elements:
        if type(el) is not Insert:
            continue
        p = el.payload
        ts = by_key.get(p["k"])
        if ts is None:
            ts = by_key[p["k"]] = ([], [])
        ts[0].append(el.start)
        ts[1].append(p["v"])
    n = 0
    for times, values in by_key.values():
        first = (times[0] - size) // hop + 1
        last = times[-1] // hop
        for j in range(first, last + 1):
            lo = bisect.bisect_left(times, j * hop)
            hi = bisect.bisect_left(times, j * hop + size)
            if hi > lo:
                statistics.median(values[lo:hi])
                n += 1
    return n


def floor_events_median(
    events: list[Any], size: int, hop: int
) -> dict[Any, list[tuple[int, float]]]:
    """The bisect-slice median loop over point events in time order (a
    CHT's events, payloads ``{"k": key, "v": value}``): per key the times
    and values, each window's values a slice, ``statistics.median``. Each
    key's (window start, median) pairs are kept, as the reference keeps its
    output CHT, and the collector is paused, as the reference pauses it, so
    the time at 1M / at 100k events is what the machine makes of linear
    work of the same shape: the target's yardstick."""
    import gc
    import statistics
    from bisect import bisect_left

    collecting = gc.isenabled()
    gc.disable()
    try:
        by_key: dict[Any, tuple[list[int], list[float]]] = {}
        for e in events:
            p = e.payload
            ts = by_key.get(p["k"])
            if ts is None:
                ts = by_key[p["k"]] = ([], [])
            ts[0].append(e.start)
            ts[1].append(p["v"])
        out: dict[Any, list[tuple[int, float]]] = {}
        for key, (times, values) in by_key.items():
            medians = out[key] = []
            for j in range((times[0] - size) // hop + 1, times[-1] // hop + 1):
                lo = bisect_left(times, j * hop)
                hi = bisect_left(times, j * hop + size)
                if hi > lo:
                    medians.append((j * hop, statistics.median(values[lo:hi])))
        return out
    finally:
        if collecting:
            gc.enable()


def minimal_hopping_median(elements: list[Any], udm: Any, size: int, hop: int) -> int:
    """What the hopping median's 5x target means: a lower bound for any host
    with this one's contract over the same elements (CTIs skipped). Per
    event the append of its time and value to its key's lists and the
    record a retraction needs (id -> [start, end, value, key]); per window,
    once a key's event passes its end (the rest at the end), the UDM's
    ``compute_result`` on its bisect slice and one output ``Insert`` with
    its id. No validation, watermark, output order, CTI, cleanup or error
    handling; the garbage collector paused, as the host pauses it."""
    import gc
    from bisect import bisect_left

    from udm.host import OutputId
    from udm.host.stream import insert_of

    compute = udm().compute_result
    by_key: dict[Any, tuple[list[int], list[Any], list[int]]] = {}
    events: dict[Any, list[Any]] = {}
    out: list[Any] = []
    n = 0

    def emit(key: Any, times: list[int], values: list[Any], j: int) -> None:
        nonlocal n
        lo = bisect_left(times, j * hop)
        hi = bisect_left(times, j * hop + size)
        if hi > lo:
            start = j * hop
            out.append(
                insert_of(
                    tuple.__new__(OutputId, (key, n)), start, start + size, compute(values[lo:hi])
                )
            )
            n += 1

    collecting = gc.isenabled()
    gc.disable()
    try:
        for el in elements:
            if type(el) is not Insert:
                continue
            p = el.payload
            key, value, start = p["k"], p["v"], el.start
            entry = by_key.get(key)
            if entry is None:
                entry = by_key[key] = ([], [], [(start - size) // hop + 1])
            times, values, nxt = entry
            last = (start - size) // hop  # the last window ending by this start
            while nxt[0] <= last:
                emit(key, times, values, nxt[0])
                nxt[0] += 1
            times.append(start)
            values.append(value)
            events[el.id] = [start, el.end, value, key]
        for key, (times, values, nxt) in by_key.items():
            for j in range(nxt[0], times[-1] // hop + 1):
                emit(key, times, values, j)
    finally:
        if collecting:
            gc.enable()
    return len(out)
