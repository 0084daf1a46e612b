"""udm-patterns: time-sensitive pattern operators, registered as ``patterns.<name>``.

Each operator receives a window's events in the host's canonical order (by
start time) and outputs one event per match, timestamped with the match's own
lifetime; the default output policy clips it to the window. For mapping
payloads (a row's columns) pass ``field="column"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypedDict

from udm.sdk import (
    IntervalEvent,
    Properties,
    Ticks,
    TimeSensitiveOperator,
    WindowDescriptor,
    function,
    hookimpl,
    pick,
)

__all__ = [
    "Alarm",
    "DoubleBottom",
    "FollowedBy",
    "Match",
    "ThresholdCrossing",
    "W",
    "between",
    "pct_change",
    "udm_udms",
]

__version__ = "0.1.0"

# Patterns read events in time order, so ties in start time are broken by the
# host's canonical order: declared order-sensitive.
_PATTERN = Properties(order_insensitive=False)


# ------------------------------------------------------------ threshold crossing


class Alarm(TypedDict):
    """Payload of a :class:`ThresholdCrossing` output."""

    peak: float
    readings: int


def _check_number(udm: str, name: str, value: Any) -> None:
    """Refuse a parameter that is not a real number (or is NaN) when the UDM
    is created, not when a window first meets it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError(f"{udm} needs {name}= a number, got {value!r}")


class ThresholdCrossing(TimeSensitiveOperator):
    """Intervals during which a value is high, with hysteresis.

    An interval starts at the first event whose value is above ``high`` and
    ends at the start of the first later event whose value is below ``low``;
    values between ``low`` and ``high`` keep the current state, so noise around
    one threshold does not make the output flap. An interval still open at the
    end of the window ends at the window's end; one that began before the
    window (an event overlapping it from the left) starts at the window's
    start. Payload: the peak value and the number of events in the interval.

    Example: with ``high=30, low=28``, values 29, 31, 29, 32, 27, 31 at times
    0..5 in window [0, 10) give [1, 4) with peak 32 over 3 readings, and
    [5, 10) with peak 31 over 1 reading.
    """

    properties = _PATTERN
    name = "threshold_crossing"

    def __init__(self, high: float, low: float | None = None, field: str | None = None) -> None:
        _check_number("threshold_crossing", "high", high)
        if low is not None:
            _check_number("threshold_crossing", "low", low)
        low = high if low is None else low
        if low > high:
            raise ValueError(f"threshold_crossing needs low <= high, got low={low}, high={high}")
        self.high = high
        self.low = low
        self.field = field

    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> list[IntervalEvent[Alarm]]:
        out: list[IntervalEvent[Alarm]] = []
        since: int | None = None
        peak = 0.0
        count = 0
        for e in events:
            value = pick(e.payload, self.field)
            if since is None:
                if value > self.high:
                    since, peak, count = e.start, value, 1
            elif value < self.low:
                # events that began before the window can end an interval there:
                # report only the part inside the window
                start = max(since, window.start)
                if e.start > start:
                    out.append(IntervalEvent(start, e.start, {"peak": peak, "readings": count}))
                since = None
            else:
                peak, count = max(peak, value), count + 1
        if since is not None:
            start = max(since, window.start)
            out.append(IntervalEvent(start, window.end, {"peak": peak, "readings": count}))
        return out


# ------------------------------------------------------------ followed by


class Match(TypedDict):
    """Payload of a :class:`FollowedBy` output: the matched events' lifetimes."""

    first_start: Ticks
    first_end: Ticks
    then_start: Ticks
    then_end: Ticks


Predicate = Callable[[Any], bool] | Mapping[str, Any] | Any


def _predicate(spec: Predicate, field: str | None, what: str) -> Callable[[Any], bool]:
    """A payload test from a callable, a mapping of field values, or a value."""
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if isinstance(spec, Mapping):
        wanted = dict(spec)
        if not wanted:
            raise ValueError(f"{what}={spec!r}: give at least one field to match")

        def fields_match(payload: Any) -> bool:
            if not isinstance(payload, Mapping):
                raise TypeError(
                    f"{what}={wanted!r} matches fields, but payload {payload!r} is not a mapping"
                )
            return all(payload.get(k) == v for k, v in wanted.items())

        return fields_match
    return lambda payload: bool(pick(payload, field) == spec)


class FollowedBy(TimeSensitiveOperator):
    """ "A followed by B within ``within``": for each event matching ``first``,
    the earliest later event matching ``then`` that starts at most ``within``
    ticks after it (relaxed contiguity, as Flink's ``followedBy``: events in
    between are skipped). "Later" means a strictly later start.

    ``first`` and ``then`` are each a predicate on the payload, a mapping of
    field values (``{"kind": "login"}``), or a value compared with the payload
    (or with its ``field``). Each A yields at most one match; one B may
    complete several As. Output: an event with lifetime
    ``[A.start, max(A.end, B.end))`` (A may outlast B) whose payload carries
    both matched lifetimes.

    Example: A at 1, B at 3 and B at 5, ``within=3``: one match, [1, 4) with
    first [1, 2) and then [3, 4).
    """

    # The match's lifetime can start before the window (A overlapping it from
    # the left) or end after it (B overlapping its end) without clipping.
    properties = Properties(order_insensitive=False, output_within_window=False)
    name = "followed_by"

    def __init__(
        self,
        first: Predicate,
        then: Predicate,
        within: int | timedelta,
        field: str | None = None,
    ) -> None:
        if isinstance(within, timedelta):
            within = within // timedelta(microseconds=1)  # 1 tick = 1 microsecond
        if not isinstance(within, int) or isinstance(within, bool) or within < 1:
            raise ValueError(
                f"followed_by needs within= a positive duration (ticks or timedelta), "
                f"got {within!r}"
            )
        self.first = _predicate(first, field, "first")
        self.then = _predicate(then, field, "then")
        self.within = within

    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> list[IntervalEvent[Match]]:
        ordered = sorted(events, key=lambda e: e.start)  # stable: canonical ties kept
        bs = [e for e in ordered if self.then(e.payload)]
        out: list[IntervalEvent[Match]] = []
        j = 0
        for a in ordered:
            if not self.first(a.payload):
                continue
            while j < len(bs) and bs[j].start <= a.start:
                j += 1  # As come in start order, so earlier Bs never match later As
            if j < len(bs) and bs[j].start - a.start <= self.within:
                b = bs[j]
                match: Match = {
                    "first_start": a.start,
                    "first_end": a.end,
                    "then_start": b.start,
                    "then_end": b.end,
                }
                out.append(IntervalEvent(a.start, max(a.end, b.end), match))
        return out


# ------------------------------------------------------------ double bottom


class W(TypedDict):
    """Payload of a :class:`DoubleBottom` output."""

    first_bottom: float
    peak: float
    second_bottom: float
    breakout: float
    first_bottom_at: Ticks
    second_bottom_at: Ticks


def _turning_points(values: Sequence[float]) -> list[tuple[int, str]]:
    """Alternating local maxima and minima of a series, plateaus collapsed to
    their first point; the first point counts as an extremum, the last not."""
    runs = [i for i in range(len(values)) if i == 0 or values[i] != values[i - 1]]
    points: list[tuple[int, str]] = []
    for p, i in enumerate(runs[:-1]):
        nxt = values[runs[p + 1]]
        if p == 0:
            points.append((i, "max" if nxt < values[i] else "min"))
            continue
        prev = values[runs[p - 1]]
        if prev < values[i] > nxt:
            points.append((i, "max"))
        elif prev > values[i] < nxt:
            points.append((i, "min"))
    return points


class DoubleBottom(TimeSensitiveOperator):
    """The W-shaped chart pattern: a decline to a first bottom, a rebound to a
    peak, a second decline to a bottom within ``tolerance`` of the first, and
    a breakout: the first later price above the peak, with no price below the
    second bottom before it.

    Precisely, over the window's prices in time order (plateaus collapsed):
    turning points H > B1 < M > B2 (H a local maximum or the first price) with
    ``|B2 - B1| <= tolerance * max(|B1|, |B2|)`` and
    ``M - max(B1, B2) >= min_rebound * max(|B1|, |B2|)``, then a breakout price
    above M. Each match is output with the lifetime ``[H.start, breakout.end)``
    and the next search starts at the breakout.

    Example: prices 10, 8, 9.5, 8.1, 10 at times 0..4 (``tolerance=0.05``): one
    W, [0, 5) with bottoms 8 and 8.1, peak 9.5 and breakout 10.
    """

    # [H.start, breakout.end) can start before the window or end after it
    properties = Properties(order_insensitive=False, output_within_window=False)
    name = "double_bottom"

    def __init__(
        self, tolerance: float = 0.03, min_rebound: float = 0.0, field: str | None = None
    ) -> None:
        _check_number("double_bottom", "tolerance", tolerance)
        _check_number("double_bottom", "min_rebound", min_rebound)
        if tolerance < 0 or min_rebound < 0:
            raise ValueError(
                f"double_bottom needs tolerance >= 0 and min_rebound >= 0, got "
                f"tolerance={tolerance}, min_rebound={min_rebound}"
            )
        self.tolerance = tolerance
        self.min_rebound = min_rebound
        self.field = field

    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> list[IntervalEvent[W]]:
        ordered = sorted(events, key=lambda e: e.start)
        prices = [pick(e.payload, self.field) for e in ordered]
        points = _turning_points(prices)
        out: list[IntervalEvent[W]] = []
        p = 0
        while p + 3 < len(points):
            (h, kh), (b1, _), (m, _), (b2, _) = points[p : p + 4]
            if kh != "max":
                p += 1
                continue
            low1, peak, low2 = prices[b1], prices[m], prices[b2]
            scale = max(abs(low1), abs(low2))
            shaped = (
                abs(low2 - low1) <= self.tolerance * scale
                and peak - max(low1, low2) >= self.min_rebound * scale
            )
            breakout = self._breakout(prices, b2, peak) if shaped else None
            if breakout is None:
                p += 2  # the next candidate starts at the next maximum
                continue
            out.append(
                IntervalEvent(
                    ordered[h].start,
                    ordered[breakout].end,
                    {
                        "first_bottom": low1,
                        "peak": peak,
                        "second_bottom": low2,
                        "breakout": prices[breakout],
                        "first_bottom_at": ordered[b1].start,
                        "second_bottom_at": ordered[b2].start,
                    },
                )
            )
            while p < len(points) and points[p][0] < breakout:
                p += 1
        return out

    @staticmethod
    def _breakout(prices: Sequence[float], bottom: int, peak: float) -> int | None:
        for k in range(bottom + 1, len(prices)):
            if prices[k] < prices[bottom]:
                return None
            if prices[k] > peak:
                return k
        return None


# ------------------------------------------------------------ UDFs


@function
def pct_change(old: float, new: float) -> float:
    """Relative change from ``old`` to ``new`` (``(new - old) / old``); an
    error for ``old == 0`` names the value instead of dividing by zero."""
    if old == 0:
        raise ZeroDivisionError(f"pct_change from old={old!r}: the relative change is undefined")
    return (new - old) / old


@function
def between(x: float, low: float, high: float) -> bool:
    """``low <= x <= high``, for filters."""
    return low <= x <= high


@hookimpl
def udm_udms() -> list[Any]:
    """The library's UDMs, registered as ``patterns.<name>``."""
    return [FollowedBy, DoubleBottom, ThresholdCrossing, pct_change, between]
