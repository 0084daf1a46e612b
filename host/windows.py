"""Window specifications: how the time axis is divided into windows.

An event belongs to every window its lifetime overlaps; count windows add a
restriction (see :class:`CountByStartWindow`, :class:`CountByEndWindow`).
The functions here define windows and membership literally over a finite
set of events: the reference evaluator uses them as the definition, the
incremental host must agree with them.

A window is *emitted* once the watermark has passed its end
(``window.end <= watermark``): before that, events still to come may change
it (the paper's invariant: output exists for every non-empty window that
does not overlap ``[m, inf)``).
"""

from __future__ import annotations

import inspect
import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any, ClassVar

from udm.host.time import INFINITY, MIN_TIME, format_duration, format_time, to_duration_ticks
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = [
    "CountByEndWindow",
    "CountByStartWindow",
    "HoppingWindow",
    "SnapshotWindow",
    "TumblingWindow",
    "WindowSpec",
    "window_from_dict",
]


class WindowSpec(ABC):
    """A window kind with its parameters."""

    kind: ClassVar[str]
    #: Grid windows (hopping, tumbling) exist independently of the events.
    is_grid: ClassVar[bool] = False

    @abstractmethod
    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        """Every non-empty window ending at or before ``watermark``, by start."""

    @abstractmethod
    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        """Whether ``event`` is a member of ``window``."""

    def members(
        self, window: WindowDescriptor, events: Sequence[IntervalEvent[Any]]
    ) -> list[IntervalEvent[Any]]:
        return [e for e in events if self.belongs(e, window)]

    def describe(self, durations: bool = False) -> str:
        """The spec as its repr, or with ``durations`` (for queries over
        datetimes) its sizes in units: ``HoppingWindow(size=1h, hop=15m)``."""
        if not durations or not isinstance(self, HoppingWindow):
            return repr(self)
        parts = [f"size={format_duration(self.size)}"]
        if type(self) is HoppingWindow:
            parts.append(f"hop={format_duration(self.hop)}")
        if self.offset:
            parts.append(f"offset={format_duration(self.offset)}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _positive(name: str, value: Any) -> int:
    ticks = to_duration_ticks(value)
    if ticks <= 0:
        raise ValueError(f"window {name} must be a positive duration, got {value!r}")
    return ticks


@dataclass(frozen=True, init=False)
class HoppingWindow(WindowSpec):
    """Windows ``[k*hop + offset, k*hop + offset + size)`` for every integer k.

    ``hop < size`` overlaps windows, ``hop > size`` leaves gaps. Durations are
    ticks or ``timedelta``.
    """

    size: int
    hop: int
    offset: int = 0
    kind: ClassVar[str] = "hopping"
    is_grid: ClassVar[bool] = True

    def __init__(self, size: Any, hop: Any, offset: Any = 0) -> None:
        object.__setattr__(self, "size", _positive("size", size))
        object.__setattr__(self, "hop", _positive("hop", hop))
        object.__setattr__(self, "offset", to_duration_ticks(offset) % self.hop)

    def window_at(self, k: int) -> WindowDescriptor:
        start = k * self.hop + self.offset
        return WindowDescriptor(start, start + self.size)

    def index_range(self, start: int, end: int) -> tuple[int, int]:
        """Inclusive range of k whose windows overlap ``[start, end)``."""
        k_min = (start - self.size - self.offset) // self.hop + 1
        k_max = -((self.offset - end) // self.hop) - 1  # ceil((end - offset)/hop) - 1
        return k_min, k_max

    def last_index_before(self, watermark: int) -> int:
        """The largest k whose window ends at or before ``watermark``."""
        return (watermark - self.size - self.offset) // self.hop

    @cached_property
    def index_bounds(self) -> tuple[int, int]:
        """The indexes of the first and last windows inside the tick range
        (starting at or after ``MIN_TIME``, ending by ``INFINITY``)."""
        first = -((self.offset - MIN_TIME) // self.hop)  # ceil((MIN_TIME - offset) / hop)
        return first, (INFINITY - self.offset - self.size) // self.hop

    @cached_property
    def time_bounds(self) -> tuple[int, int]:
        """``(min_start, max_end)``: an event starting before ``min_start``, or
        ending after ``max_end`` (and before the end of time), overlaps a
        window outside the tick range. Both lie in ``[MIN_TIME, INFINITY]``,
        so engines compare int64 times with them without overflow."""
        first, last = self.index_bounds
        min_start = (first - 1) * self.hop + self.offset + self.size
        max_end = (last + 1) * self.hop + self.offset
        return max(min_start, MIN_TIME), min(max_end, INFINITY)

    def range_problem(self, start: int, end: int) -> str | None:
        """Why an event ``[start, end)`` cannot be windowed, or None.

        Grid windows exist at every hop, so an event starting at the
        beginning of time overlaps infinitely many, and one within a window
        of either end of the tick range overlaps a window whose lifetime
        int64 ticks cannot hold. Every engine refuses such an event instead
        of wrapping, clamping or dropping the window (docs/concepts.md)."""
        min_start, max_end = self.time_bounds
        if start >= min_start and (end <= max_end or end >= INFINITY):
            return None
        return self.range_message(format_time(start), format_time(end), start <= MIN_TIME)

    def range_message(self, start: str, end: str, from_min: bool) -> str:
        """:meth:`range_problem`'s text for an event whose times are given as
        text (the Spark engine passes SQL placeholders)."""
        min_start, max_end = self.time_bounds
        if from_min:
            what = "it starts at the beginning of time (MIN_TIME), so infinitely many hold it"
        else:
            what = "some of them would begin before MIN_TIME or end after INFINITY"
        return (
            f"event [{start}, {end}) cannot be windowed by {self!r}: {what}. Grid windows "
            f"take events starting at or after {min_start} and ending by {max_end} (or open, "
            "at INFINITY); use snapshot or count windows for events at the ends of time"
        )

    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        if watermark >= INFINITY and any(e.end >= INFINITY for e in events):
            raise ValueError(
                f"{self.kind} windows over an event that never ends are infinitely many; "
                "give a finite watermark (a final CTI) or end the event"
            )
        k_last = self.last_index_before(watermark) if watermark < INFINITY else None
        ks: set[int] = set()
        for e in events:
            problem = self.range_problem(e.start, e.end)
            if problem is not None:
                raise ValueError(problem)
            lo, hi = self.index_range(e.start, e.end)
            if k_last is not None:
                hi = min(hi, k_last)
            ks.update(range(lo, hi + 1))
        return [self.window_at(k) for k in sorted(ks)]

    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        return event.start < window.end and window.start < event.end

    def __repr__(self) -> str:
        off = f", offset={self.offset}" if self.offset else ""
        return f"HoppingWindow(size={self.size}, hop={self.hop}{off})"


@dataclass(frozen=True, init=False, repr=False)
class TumblingWindow(HoppingWindow):
    """Gapless, non-overlapping windows: a hopping window with hop == size."""

    kind: ClassVar[str] = "tumbling"

    def __init__(self, size: Any, offset: Any = 0) -> None:
        super().__init__(size, size, offset)

    def __repr__(self) -> str:
        off = f", offset={self.offset}" if self.offset else ""
        return f"TumblingWindow(size={self.size}{off})"


@dataclass(frozen=True)
class SnapshotWindow(WindowSpec):
    """A window between every two consecutive distinct event endpoints (start
    or end): the maximal intervals in which the set of live events does not
    change. Only windows that some event overlaps exist."""

    kind: ClassVar[str] = "snapshot"

    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        # a window between consecutive points holds an event iff some event
        # started at or before its start and ends after it: a running count
        # of starts minus ends, so the cost is a sort, not windows x events
        delta: dict[int, int] = {}
        for e in events:
            delta[e.start] = delta.get(e.start, 0) + 1
            delta[e.end] = delta.get(e.end, 0) - 1
        points = sorted(delta)
        out = []
        live = 0
        for a, b in pairwise(points):
            live += delta[a]
            if b > watermark:
                break
            if live > 0:
                out.append(WindowDescriptor(a, b))
        return out

    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        return event.start < window.end and window.start < event.end

    def __repr__(self) -> str:
        return "SnapshotWindow()"


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"count window size must be an integer >= 1, got {value!r}")
    return int(value)  # a numpy integer too


@dataclass(frozen=True)
class CountByStartWindow(WindowSpec):
    """Windows spanning ``count`` consecutive distinct event start times.

    With distinct starts ``s_0 < s_1 < ...``, window i is
    ``[s_i, s_(i+count-1) + 1 tick)`` and holds the events whose start lies
    in it (StreamInsight's CountByStartTimeWindow). Events sharing a start
    time all belong, so a window may hold more than ``count`` events.
    """

    count: int
    kind: ClassVar[str] = "count_by_start"

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _count(self.count))

    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        starts = sorted({e.start for e in events})
        n = self.count
        out = []
        for i in range(len(starts) - n + 1):
            w = WindowDescriptor(starts[i], starts[i + n - 1] + 1)
            if w.end <= watermark:
                out.append(w)
        return out

    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        return window.start <= event.start < window.end


@dataclass(frozen=True)
class CountByEndWindow(WindowSpec):
    """Windows spanning ``count`` consecutive distinct event end times.

    With distinct ends ``e_0 < e_1 < ...``, window i is
    ``[e_i - 1 tick, e_(i+count-1))`` and holds the events whose end lies in
    ``[e_i, e_(i+count-1)]``: the events whose last tick lies in the window.
    This mirrors :class:`CountByStartWindow` and keeps every member
    overlapping its window.
    """

    count: int
    kind: ClassVar[str] = "count_by_end"

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _count(self.count))

    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        ends = sorted({e.end for e in events})
        n = self.count
        out = []
        for i in range(len(ends) - n + 1):
            w = WindowDescriptor(ends[i] - 1, ends[i + n - 1])
            if w.end <= watermark:
                out.append(w)
        return out

    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        return window.start < event.end <= window.end


def window_from_dict(spec: dict[str, Any]) -> WindowSpec:
    """Build a window from a mapping such as ``{"kind": "hopping", "size": 10,
    "hop": 5}`` (the fixture and query-file format)."""
    spec = dict(spec)
    kind = spec.pop("kind", None)
    builders: dict[str, type[WindowSpec]] = {
        "hopping": HoppingWindow,
        "tumbling": TumblingWindow,
        "snapshot": SnapshotWindow,
        "count_by_start": CountByStartWindow,
        "count_by_end": CountByEndWindow,
    }
    if kind not in builders:
        raise ValueError(f"unknown window kind {kind!r}; use one of: {', '.join(builders)}")
    builder = builders[kind]
    params = inspect.signature(builder).parameters
    takes = ", ".join(params)
    extra = [k for k in spec if k not in params]
    if extra:
        raise ValueError(
            f"a {kind} window takes {takes or 'no parameters'}, not {', '.join(extra)}"
        )
    missing = [n for n, p in params.items() if p.default is p.empty and n not in spec]
    if missing:
        raise ValueError(f"a {kind} window needs {', '.join(map(repr, missing))} ({takes})")
    return builder(**spec)


def describe_window(w: WindowDescriptor | IntervalEvent[Any]) -> str:
    """``[start, end)`` of a window (or an event's lifetime), ends of time as
    ``-inf``/``inf``."""
    return f"[{format_time(w.start)}, {format_time(w.end)})"


def of_key(key: Sequence[Any]) -> str:
    """`` of key 'a'`` (one key column) or `` of key ('a', 1)`` (several) for
    messages that name a window of one group; empty without keys."""
    if not key:
        return ""
    return f" of key {key[0]!r}" if len(key) == 1 else f" of key {tuple(key)!r}"
