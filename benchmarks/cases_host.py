"""Benchmarks of the incremental host (issue: incremental host).

Each case returns a dict of measurements; ``run.py`` runs every case in a
fresh subprocess so peak RSS belongs to that case alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

from udm.host import Cti, Host, Insert, Retract, SnapshotWindow, TumblingWindow
from udm.sdk import Aggregate, IncrementalAggregate


class Sum(IncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        return state


class Mean(IncrementalAggregate):
    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] + payload, state[1] + 1)

    def remove(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] - payload, state[1] - 1)

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class MeanRecompute(Aggregate):
    """The same mean, non-incremental: every affected window is re-evaluated."""

    def compute_result(self, payloads: list[float]) -> float:
        return sum(payloads) / len(payloads)


class RecomputeEveryAffectedWindow(Host):
    """The paper's non-incremental algorithm as the baseline: every window an
    element affects is re-evaluated from its events at once (the host itself
    is lazier and only evaluates windows it is about to emit)."""

    active = False  # off while warming up to the steady state

    def _delta(self, ks: Any, start: int, old: Any, new: Any) -> None:
        super()._delta(ks, start, old, new)
        if self.active:
            self._compute(ks, start)

    def _rebuild(self, ks: Any, start: int, end: int) -> None:
        super()._rebuild(ks, start, end)
        if self.active:
            self._compute(ks, start)


def point_stream(n: int, cti_every: int = 1000) -> Iterator[Any]:
    for i in range(n):
        yield Insert(i, i, i + 1, i % 10)
        if i % cti_every == cti_every - 1:
            yield Cti(i - 10)


def plain_loop(n: int, size: int) -> float:
    """The floor: a Python loop summing into a dict by window."""
    t0 = time.perf_counter()
    sums: dict[int, int] = {}
    for i in range(n):
        k = i // size
        sums[k] = sums.get(k, 0) + i % 10
    return time.perf_counter() - t0


def throughput(n: int = 1_000_000) -> dict[str, Any]:
    """In-order point events, tumbling windows, incremental sum."""
    host = Host(TumblingWindow(100), Sum)
    elements = list(point_stream(n))
    t0 = time.perf_counter()
    outputs = host.process_many(elements)
    seconds = time.perf_counter() - t0
    floor = plain_loop(n, 100)
    return {
        "events": n,
        "outputs": len(outputs),
        "seconds": seconds,
        "events_per_s": n / seconds,
        "floor_events_per_s": n / floor,
        "ratio_to_plain_loop": seconds / floor,
    }


def scaling(n: int) -> dict[str, Any]:
    """A stream generated lazily and fed in chunks of 10,000 elements (CTI
    every 1,000 events): memory is the host's own plus one chunk, so peak RSS
    shows whether cleanup bounds it."""
    host = Host(TumblingWindow(100), Sum)
    outputs = 0
    chunk: list[Any] = []
    t0 = time.perf_counter()
    for element in point_stream(n):
        chunk.append(element)
        if len(chunk) == 10_000:
            outputs += len(host.process_many(chunk))
            chunk = []
    outputs += len(host.process_many(chunk))
    seconds = time.perf_counter() - t0
    return {
        "events": n,
        "outputs": outputs,
        "seconds": seconds,
        "events_per_s": n / seconds,
        "live_events_at_end": host.memory_size[0],
        "open_windows_at_end": host.memory_size[1],
    }


def snapshot_stream(n: int, length: int, seed: int = 7) -> list[Any]:
    """Events of ``length`` ticks, one per tick, so snapshot windows hold
    about ``length`` events; 20% arrive late (up to 50 ticks), 10% of the
    elements shorten an earlier event."""
    rng = random.Random(seed)
    out: list[Any] = []
    live: list[tuple[int, int, int]] = []
    cti = 0
    for i in range(n):
        t = i
        start = t - rng.randint(1, 50) if rng.random() < 0.2 else t
        start = max(start, cti)
        end = start + length + rng.randint(-length // 10, length // 10)
        out.append(Insert(i, start, end, float(i % 17)))
        live.append((i, start, end))
        if rng.random() < 0.1 and len(live) > 10:
            j = rng.randrange(len(live) - 10, len(live))
            ident, s, e = live[j]
            new_end = max(s + 1, e - rng.randint(1, length // 2), cti)
            if new_end < e:
                out.append(Retract(ident, s, e, new_end))
                live[j] = (ident, s, new_end)
        if i % 200 == 199:
            cti = t - length - 100
            out.append(Cti(cti))
    return out


def snapshot_incremental_vs_recompute(
    length: int = 1700, warmup: int = 2000, measured: int = 4
) -> dict[str, Any]:
    """Both hosts are brought to the steady state (windows holding about
    ``length`` events) untimed, then timed over the same next elements."""
    elements = snapshot_stream(warmup + measured, length)
    split = next(i for i, e in enumerate(elements) if getattr(e, "id", -1) == warmup)
    head, tail = elements[:split], elements[split:]
    incremental = Host(SnapshotWindow(), Mean)
    incremental.process_many(head)
    t0 = time.perf_counter()
    out_inc = incremental.process_many(tail)
    t_inc = time.perf_counter() - t0
    recompute = RecomputeEveryAffectedWindow(SnapshotWindow(), MeanRecompute)
    recompute.process_many(head)
    recompute.active = True
    t0 = time.perf_counter()
    out_rec = recompute.process_many(tail)
    t_rec = time.perf_counter() - t0
    sizes = [w.n_events for ks in incremental.keys.values() for w in ks.wins.values()]
    return {
        "measured_elements": len(tail),
        "mean_events_per_window": sum(sizes) / max(len(sizes), 1),
        "outputs": len(out_inc),
        "same_output_count": len(out_inc) == len(out_rec),
        "incremental_seconds": t_inc,
        "recompute_seconds": t_rec,
        "speedup": t_rec / t_inc,
    }


CASES = {
    "host.throughput_1M": lambda: throughput(1_000_000),
    "host.scaling_1M": lambda: scaling(1_000_000),
    "host.scaling_10M": lambda: scaling(10_000_000),
    "host.snapshot_incremental": snapshot_incremental_vs_recompute,
}
