"""The demo's user-defined modules, written with udm.sdk only (no Spark here).

Kept in their own module so Spark's Python workers can import them
(``examples/demo.py`` ships this file with ``SparkContext.addPyFile``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from udm.sdk import (
    IntervalEvent,
    TimeSensitiveAggregate,
    TimeSensitiveOperator,
    WindowDescriptor,
    aggregate,
)


@aggregate
def median(values: Sequence[float]) -> float:
    """The median reading: robust to the sensors' occasional spikes, unlike the mean."""
    return statistics.median(values)


class TimeWeightedAverage(TimeSensitiveAggregate):
    """Each reading weighs as long as it is valid inside the window (run it with
    full input clipping), so a reading that held for a minute counts six times
    as much as one replaced after ten seconds."""

    def compute_result(
        self, events: Sequence[IntervalEvent[float]], window: WindowDescriptor
    ) -> float:
        weight = sum(e.end - e.start for e in events)
        return sum(e.payload * (e.end - e.start) for e in events) / weight


class Overheating(TimeSensitiveOperator):
    """A pattern with hysteresis: an alarm starts at the first reading above
    ``high`` and ends at the first later reading below ``low``, so noise around
    one threshold does not make the alarm flap. One output event per alarm,
    with the alarm's lifetime (an alarm still on at the window's end ends there)
    and its peak temperature and number of readings."""

    def __init__(self, high: float = 30.0, low: float = 28.0) -> None:
        if low >= high:
            raise ValueError(f"Overheating needs low < high, got low={low}, high={high}")
        self.high = high
        self.low = low

    def compute_result(
        self, events: Sequence[IntervalEvent[float]], window: WindowDescriptor
    ) -> list[IntervalEvent[dict[str, Any]]]:
        alarms: list[IntervalEvent[dict[str, Any]]] = []
        since: int | None = None
        peak = 0.0
        count = 0
        for e in events:  # canonical order: by start time
            if since is None:
                if e.payload > self.high:
                    since, peak, count = e.start, e.payload, 1
            elif e.payload < self.low:
                alarms.append(IntervalEvent(since, e.start, {"peak": peak, "readings": count}))
                since = None
            else:
                peak, count = max(peak, e.payload), count + 1
        if since is not None:
            alarms.append(IntervalEvent(since, window.end, {"peak": peak, "readings": count}))
        return alarms
