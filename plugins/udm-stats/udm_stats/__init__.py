"""udm-stats: statistical UDMs, registered as ``stats.<name>``.

Every UDM reads scalar payloads directly; for mapping payloads (a row's
columns) pass ``field="column"``. Windows are never empty for the host
unless ``emit_empty=True``; on an empty window the aggregates here return
``None``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from udm.sdk import (
    INFINITY,
    IncrementalAggregate,
    IntervalEvent,
    TimeSensitiveIncrementalAggregate,
    WindowDescriptor,
    aggregate,
    function,
    hookimpl,
    operator,
    pick,
)

__all__ = [
    "DistinctCount",
    "Max",
    "Mean",
    "Min",
    "TimeWeightedAverage",
    "Variance",
    "ewma",
    "median",
    "quantile",
    "top_k",
    "udm_udms",
]

__version__ = "0.1.0"


def _values(payloads: Sequence[Any], field: str | None) -> list[Any]:
    return [pick(p, field) for p in payloads]


# ------------------------------------------------------------ order statistics


@aggregate
def median(payloads: Sequence[Any], field: str | None = None) -> Any:
    """The median, as :func:`statistics.median`: the middle value, or the
    mean of the two middle values for an even count.

    Example: ``median`` of 1, 5, 2, 8 is 3.5.
    """
    values = _values(payloads, field)
    return statistics.median(values) if values else None


@aggregate
def quantile(
    payloads: Sequence[Any], q: float = 0.5, method: str = "exclusive", field: str | None = None
) -> Any:
    """The ``q``-quantile (0 < q < 1), as :func:`statistics.quantiles`.

    For ``q = i/n`` it is ``statistics.quantiles(values, n=n, method=method)[i-1]``:
    ``method="exclusive"`` (Python's default, R type 6, which may extrapolate
    beyond the data for small samples) or ``"inclusive"`` (R type 7, numpy's
    default ``linear``, always within the data). A single value is its own
    quantile. Example: ``quantile(q=0.25)`` of 1, 2, 3, 4 is 1.25 (exclusive)
    or 1.75 (inclusive).
    """
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 < q < 1:
        raise ValueError(f"quantile q must be a number strictly between 0 and 1, got {q!r}")
    if method not in ("exclusive", "inclusive"):
        raise ValueError(f"quantile method must be 'exclusive' or 'inclusive', got {method!r}")
    data = sorted(_values(payloads, field))
    if not data:
        return None
    ld = len(data)
    if ld == 1:
        return data[0]
    frac = Fraction(q).limit_denominator(1_000_000)
    i, n = frac.numerator, frac.denominator
    # The arithmetic of statistics.quantiles, for the one cut point i/n.
    if method == "inclusive":
        j, delta = divmod(i * (ld - 1), n)
        return (data[j] * (n - delta) + data[j + 1] * delta) / n
    m = ld + 1
    j = max(1, min(ld - 1, i * m // n))
    delta = i * m - j * n
    return (data[j - 1] * (n - delta) + data[j] * delta) / n


@operator(order_insensitive=False)
def top_k(payloads: Sequence[Any], k: int = 3, field: str | None = None) -> list[Any]:
    """The ``k`` payloads with the largest values, largest first, one output
    event each. Ties keep the window's canonical order (earlier start
    first), so which of several equal values make the cut is deterministic.
    That makes the operator order-sensitive: with ``field=``, two payloads
    tying on the field differ, and the earlier one is output.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k needs a positive integer k, got {k!r}")
    values = _values(payloads, field)
    # sorted() is stable even with reverse=True: equal values keep their order.
    ranked = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    return [payloads[i] for i in ranked[:k]]


@aggregate(order_insensitive=False)
def ewma(payloads: Sequence[Any], alpha: float = 0.5, field: str | None = None) -> Any:
    """Exponentially weighted moving average over the window's events in
    canonical (start time) order: ``s = x0``, then ``s = alpha*x + (1-alpha)*s``.

    Order-sensitive (``order_insensitive=False``): the host must not
    reorder or partially aggregate it.
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"ewma alpha must be in (0, 1], got {alpha!r}")
    values = _values(payloads, field)
    if not values:
        return None
    s = values[0]
    for x in values[1:]:
        s = alpha * x + (1 - alpha) * s
    return s


# ------------------------------------------------------------ incremental


class Mean(IncrementalAggregate):
    """The arithmetic mean; incremental, invertible and mergeable, so the
    host updates it per event and can aggregate partially."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], payload: Any) -> tuple[float, int]:
        return (state[0] + pick(payload, self.field), state[1] + 1)

    def remove(self, state: tuple[float, int], payload: Any) -> tuple[float, int]:
        return (state[0] - pick(payload, self.field), state[1] - 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float | None:
        return state[0] / state[1] if state[1] else None


class Variance(IncrementalAggregate):
    """Variance with ``ddof`` delta degrees of freedom: ``ddof=0`` (default)
    is the population variance (:func:`statistics.pvariance`), ``ddof=1``
    the sample variance (:func:`statistics.variance`). ``None`` when the
    window has ``ddof`` or fewer values.

    Welford's update with its exact inverse for ``remove`` and Chan's
    formula for ``merge``: invertible and mergeable.
    """

    def __init__(self, ddof: int = 0, field: str | None = None) -> None:
        if ddof not in (0, 1):
            raise ValueError(f"variance ddof must be 0 (population) or 1 (sample), got {ddof!r}")
        self.ddof = ddof
        self.field = field

    def initial_state(self) -> tuple[int, float, float]:
        return (0, 0.0, 0.0)

    def add(self, state: tuple[int, float, float], payload: Any) -> tuple[int, float, float]:
        n, mean, m2 = state
        x = pick(payload, self.field)
        n += 1
        delta = x - mean
        mean += delta / n
        return (n, mean, m2 + delta * (x - mean))

    def remove(self, state: tuple[int, float, float], payload: Any) -> tuple[int, float, float]:
        n, mean, m2 = state
        x = pick(payload, self.field)
        if n <= 1:
            return (0, 0.0, 0.0)
        new_mean = (n * mean - x) / (n - 1)
        return (n - 1, new_mean, max(0.0, m2 - (x - new_mean) * (x - mean)))

    def merge(
        self, a: tuple[int, float, float], b: tuple[int, float, float]
    ) -> tuple[int, float, float]:
        if a[0] == 0:
            return b
        if b[0] == 0:
            return a
        n = a[0] + b[0]
        delta = b[1] - a[1]
        mean = a[1] + delta * b[0] / n
        return (n, mean, a[2] + b[2] + delta * delta * a[0] * b[0] / n)

    def result(self, state: tuple[int, float, float]) -> float | None:
        n, _, m2 = state
        return m2 / (n - self.ddof) if n > self.ddof else None


class DistinctCount(IncrementalAggregate):
    """The number of distinct values (payloads must be hashable); a
    multiset of counts makes it invertible and mergeable."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> dict[Any, int]:
        return {}

    def add(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        x = pick(payload, self.field)
        state[x] = state.get(x, 0) + 1
        return state

    def remove(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        x = pick(payload, self.field)
        left = state[x] - 1
        if left:
            state[x] = left
        else:
            del state[x]
        return state

    def merge(self, a: dict[Any, int], b: dict[Any, int]) -> dict[Any, int]:
        out = dict(a)
        for x, c in b.items():
            out[x] = out.get(x, 0) + c
        return out

    def result(self, state: dict[Any, int]) -> int:
        return len(state)


class _Extreme(IncrementalAggregate):
    """Shared min/max: add and merge only. Not invertible (a removed
    extreme cannot be undone from the state), so the host recomputes a
    window from its events when one leaves."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> Any:
        return None

    def _better(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def add(self, state: Any, payload: Any) -> Any:
        x = pick(payload, self.field)
        return x if state is None else self._better(state, x)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else self._better(a, b)

    def result(self, state: Any) -> Any:
        return state


class Min(_Extreme):
    """The smallest value (incremental, mergeable, not invertible)."""

    def _better(self, a: Any, b: Any) -> Any:
        return min(a, b)


class Max(_Extreme):
    """The largest value (incremental, mergeable, not invertible)."""

    def _better(self, a: Any, b: Any) -> Any:
        return max(a, b)


class TimeWeightedAverage(TimeSensitiveIncrementalAggregate):
    """``sum(value * (end - start)) / sum(end - start)`` over the lifetimes
    the UDM receives: with input clipping those are the clipped lifetimes,
    so clipping changes the result (the paper's time-weighted average).

    An event that never ends has infinite weight: clip it (``input_clipping=
    "right"`` or ``"full"``) or the UDM raises. ``None`` when the total
    duration is zero.
    """

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def _weight(self, event: IntervalEvent[Any]) -> int:
        if event.end == INFINITY:
            raise ValueError(
                f"time_weighted_average got an event [{event.start}, inf) that never ends; "
                "use input_clipping='right' or 'full' so lifetimes are finite"
            )
        return event.end - event.start

    def add(
        self, state: tuple[float, int], event: IntervalEvent[Any], window: WindowDescriptor
    ) -> tuple[float, int]:
        w = self._weight(event)
        return (state[0] + pick(event.payload, self.field) * w, state[1] + w)

    def remove(
        self, state: tuple[float, int], event: IntervalEvent[Any], window: WindowDescriptor
    ) -> tuple[float, int]:
        w = self._weight(event)
        return (state[0] - pick(event.payload, self.field) * w, state[1] - w)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int], window: WindowDescriptor) -> float | None:
        return state[0] / state[1] if state[1] else None


@function
def zscore(x: float, mean: float, stdev: float) -> float:
    """``(x - mean) / stdev``, for filters and projections (NaN if stdev is 0)."""
    return (x - mean) / stdev if stdev else math.nan


@hookimpl
def udm_udms() -> list[Any]:
    """The library's UDMs, registered as ``stats.<name>``."""
    return [
        median,
        quantile,
        Mean,
        Variance,
        top_k,
        DistinctCount,
        TimeWeightedAverage,
        ewma,
        Min,
        Max,
        zscore,
    ]
