"""Shared by the in-process tests of Spark's worker functions (grid and
endpoint windows): rows (key, start, end, value) as the worker's Arrow
input, its output rows as a CHT per key, and the reference's answer."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from udm.host import Cht, IntervalEvent, WindowDescriptor, evaluate_by_key
from udm.host.plan import E_COL, S_COL
from udm.sdk import IncrementalAggregate, TimeSensitiveOperator

Row = tuple[str | None, int, int, float]


def worker_table(rows: list[Row]) -> pa.Table:
    """Rows (key, start, end, value) as the worker's Arrow input."""
    keys, starts, ends, values = (list(c) for c in zip(*rows, strict=True)) if rows else ([],) * 4
    return pa.table(
        {
            "key": pa.array(keys, pa.string()),
            S_COL: pa.array(starts, pa.int64()),
            E_COL: pa.array(ends, pa.int64()),
            "v": pa.array(values, pa.float64()),
        }
    )


def by_key(rows: list[dict[str, Any]], column: str) -> dict[Any, Cht]:
    """The worker's output rows of one result column, as a CHT per key."""
    out: dict[Any, list[tuple[int, int, Any]]] = {}
    for r in rows:
        out.setdefault(r["key"], []).append((r[S_COL], r[E_COL], r[column]))
    return {k: Cht(v) for k, v in out.items()}


def reference(rows: list[Row], window: Any, udm: Any, **options: Any) -> dict[Any, Cht]:
    """The reference evaluator's non-empty CHTs per key over the rows."""
    cht = Cht(IntervalEvent(s, e, {"key": k, "v": v}) for k, s, e, v in rows)
    got = evaluate_by_key(cht, "key", window, udm, value="v", **options)
    return {k: v for k, v in got.items() if len(v)}


class Rises(TimeSensitiveOperator):
    """A time-sensitive operator: a point for each payload above the one
    before it, at the later event's start."""

    def compute_result(
        self, events: Sequence[IntervalEvent[float]], window: WindowDescriptor
    ) -> list[IntervalEvent[float]]:
        return [
            IntervalEvent(b.start, b.start + 1, b.payload)
            for a, b in itertools.pairwise(events)
            if b.payload > a.payload
        ]


class SumCount(IncrementalAggregate):
    """A mean with a vectorized form; counts how its windows were folded."""

    calls: ClassVar[Counter[str]] = Counter()

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def add_many(self, state: tuple[float, int], values: Sequence[float]) -> tuple[float, int]:
        SumCount.calls["add_many"] += 1
        return (state[0] + sum(values), state[1] + len(values))

    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        SumCount.calls["add_segments"] += 1
        sums = np.add.reduceat(values, bounds[:-1]).tolist()
        return list(zip(sums, np.diff(bounds).tolist(), strict=True))

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class MergeableSumCount(SumCount):
    """:class:`SumCount` with ``merge``, so partial states apply to it."""

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])
