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
from abc import abstractmethod
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from math import gcd
from typing import Any, ClassVar, Literal

from udm.host.errors import OpenEventError
from udm.host.time import (
    INFINITY,
    MIN_TIME,
    format_duration,
    format_ticks_duration,
    format_time,
    to_duration_ticks,
)
from udm.host.windowspec import IndexBound, WindowSpec, changed_span
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = [
    "CountByEndWindow",
    "CountByStartWindow",
    "CountWindow",
    "HoppingWindow",
    "SnapshotWindow",
    "TumblingWindow",
    "WindowSpec",
    "changed_span",
    "window_from_dict",
]


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
    sql_assignment: ClassVar[str] = "explode a generated array of window starts per event"

    def __init__(self, size: Any, hop: Any, offset: Any = 0) -> None:
        object.__setattr__(self, "size", _positive("size", size))
        object.__setattr__(self, "hop", _positive("hop", hop))
        object.__setattr__(self, "offset", to_duration_ticks(offset) % self.hop)

    # Window k is [k*hop + offset, k*hop + offset + size). The index
    # questions below are integer arithmetic only, so each takes Python
    # ints or numpy int64 arrays alike (elementwise), O(1) per element: the
    # host, the grid path, the Spark workers and (through IndexBound.sql)
    # Spark SQL share these definitions.

    @property
    def grid(self) -> HoppingWindow:
        """The spec itself: hopping and tumbling windows are the grid."""
        return self

    @cached_property
    def pane(self) -> int:
        """The width of the panes, gcd(size, hop): every window is a whole
        number of them, so a pane's partial state serves each window
        holding it ("No pane, no gain", Li et al.).

        >>> HoppingWindow(10, 4).pane
        2
        """
        return gcd(self.size, self.hop)

    @cached_property
    def pane_index(self) -> IndexBound:
        """The pane holding a time ``t``, ``floor((t - offset) / pane)``
        (pane ``i`` is ``[i*pane + offset, (i+1)*pane + offset)``; the
        windows holding it are ``index_range`` of its lifetime).

        >>> HoppingWindow(10, 4, offset=1).pane_index.at(-2)
        -2
        """
        return IndexBound(self.offset, self.pane, 0)

    def window_at(self, k: int) -> WindowDescriptor:
        """Window ``k``.

        >>> HoppingWindow(10, 5, offset=2).window_at(1)
        WindowDescriptor[7, 17)
        """
        start = k * self.hop + self.offset
        return WindowDescriptor(start, start + self.size)

    def start_of(self, k: Any) -> Any:
        """The start of window ``k`` (ints or numpy arrays).

        >>> import numpy as np
        >>> HoppingWindow(10, 5, offset=2).start_of(np.array([-1, 0, 3])).tolist()
        [-3, 2, 17]
        """
        return k * self.hop + self.offset

    def end_of(self, k: Any) -> Any:
        """The end of window ``k`` (ints or numpy arrays).

        >>> HoppingWindow(10, 5).end_of(0)
        10
        """
        return k * self.hop + self.offset + self.size

    def index_range(self, start: Any, end: Any) -> tuple[Any, Any]:
        """Inclusive range of k whose windows overlap ``[start, end)``:
        the windows an event's lifetime touches (Beam's ``assign``).

        >>> HoppingWindow(10, 5).index_range(7, 8)
        (0, 1)
        >>> import numpy as np
        >>> lo, hi = HoppingWindow(10, 5).index_range(np.array([0, 7]), np.array([1, 12]))
        >>> lo.tolist(), hi.tolist()
        ([-1, 0], [0, 2])
        """
        if start.__class__ is int and end.__class__ is int:
            # the bounds' formulas inlined: the host asks per event, and
            # Python ints cannot overflow (see IndexBound.at)
            hop, offset = self.hop, self.offset
            return (start - self.size - offset) // hop + 1, -((offset - end) // hop) - 1
        return self.first_index.at(start), self.last_index.at(end)

    @cached_property
    def first_index(self) -> IndexBound:
        """The first window an event starting at ``t`` touches:
        ``floor((t - size - offset) / hop) + 1``, the first ending after ``t``."""
        return IndexBound(self.size + self.offset, self.hop, 1)

    @cached_property
    def last_index(self) -> IndexBound:
        """The last window an event ending at ``t`` touches:
        ``ceil((t - offset) / hop) - 1``, the last starting before ``t``."""
        return IndexBound(self.offset, self.hop, -1, up=True)

    def index_range_sql(self, start: str, end: str) -> tuple[str, str]:
        """:meth:`index_range` in Spark SQL over the BIGINT expressions
        ``start`` and ``end``: the same :class:`IndexBound` formulas,
        exact over int64 (the Spark engine assigns grid windows with them).

        >>> "div 5L" in HoppingWindow(10, 5).index_range_sql("s", "e")[0]
        True
        """
        return self.first_index.sql(start), self.last_index.sql(end)

    def last_index_before(self, watermark: Any) -> Any:
        """The largest k whose window ends at or before ``watermark``: the
        last window final before a CTI at that time.

        >>> HoppingWindow(10, 5).last_index_before(14), HoppingWindow(10, 5).last_index_before(15)
        (0, 1)
        """
        return (watermark - self.size - self.offset) // self.hop

    def last_begun(self, time: Any) -> Any:
        """The largest k whose window has begun at ``time`` (starts at or
        before it).

        >>> HoppingWindow(10, 5).last_begun(4), HoppingWindow(10, 5).last_begun(5)
        (0, 1)
        """
        return (time - self.offset) // self.hop

    def first_open_start(self, cti: int) -> int:
        """The start of the first window a CTI at ``cti`` leaves open (the
        first ending after it).

        >>> HoppingWindow(10, 5).first_open_start(12)
        5
        """
        return int(self.start_of(self.last_index_before(cti) + 1))

    @cached_property
    def index_bounds(self) -> tuple[int, int]:
        """The indexes of the first and last windows strictly inside the
        tick range (starting after ``MIN_TIME``, ending before ``INFINITY``):
        a window from the beginning of time would hold an event from
        ``MIN_TIME``, which belongs to infinitely many, and one ending at
        ``INFINITY`` would read as an open event in every output."""
        first = -((self.offset - MIN_TIME - 1) // self.hop)  # ceil((MIN_TIME + 1 - offset) / hop)
        return first, (INFINITY - 1 - self.offset - self.size) // self.hop

    @cached_property
    def time_bounds(self) -> tuple[int, int]:
        """``(min_start, max_end)``: an event starting before ``min_start``, or
        ending after ``max_end`` (and before the end of time), overlaps a
        window outside the tick range, or starts at the beginning of time.
        Both lie in ``(MIN_TIME, INFINITY]``, so engines compare int64 times
        with them without overflow, and a ``start < min_start`` check alone
        refuses an event from ``MIN_TIME``.

        With gaps (``hop > size``) an event from ``MIN_TIME`` may overlap no
        window beyond the range's first ones (it starts in a gap), but it
        means "since forever", which the grid's windows before the range
        would hold: ``min_start`` is at least ``MIN_TIME + 1``, as for
        every grid (an event accepted there made every engine enumerate
        about 10**18 windows and hang).

        >>> HoppingWindow(3, 10).time_bounds[0] == MIN_TIME + 1
        True
        """
        first, last = self.index_bounds
        min_start = (first - 1) * self.hop + self.offset + self.size
        max_end = (last + 1) * self.hop + self.offset
        return max(min_start, MIN_TIME + 1), min(max_end, INFINITY)

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
            what = "some of them would begin at or before MIN_TIME or end at or after INFINITY"
        return (
            f"event [{start}, {end}) cannot be windowed by {self!r}: {what}. Grid windows "
            f"take events starting at or after {min_start} and ending by {max_end} (or open, "
            "at INFINITY); use snapshot or count windows for events at the ends of time"
        )

    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        if watermark >= INFINITY and any(e.end >= INFINITY for e in events):
            raise OpenEventError(
                f"{self.kind} windows over an event that never ends are infinitely many",
                "give a finite watermark (watermark= of evaluate(), or of a Stream's "
                "aggregate()/apply()) or end the event",
            )
        k_last = self.last_index_before(watermark) if watermark < INFINITY else None
        # range_problem's test with its bounds read once, not a call per
        # event (the reference evaluator's per-event passes are what grows
        # faster than the windows), and the call for an event that fails
        # it (for every event when a subclass has a range_problem of its own)
        own = type(self).range_problem is HoppingWindow.range_problem
        min_start, max_end = self.time_bounds if own else (INFINITY + 1, INFINITY)
        ks: set[int] = set()
        for e in events:
            start, end = e.start, e.end
            if start < min_start or max_end < end < INFINITY:
                problem = self.range_problem(start, end)
                if problem is not None:
                    raise ValueError(problem)
            lo, hi = self.index_range(start, end)
            if k_last is not None:
                hi = min(hi, k_last)
            ks.update(range(lo, hi + 1))
        return [self.window_at(k) for k in sorted(ks)]

    def describe(self, durations: bool = False) -> str:
        """Sizes in units for a query over datetimes
        (``HoppingWindow(size=1h, hop=15m)``); over ticks the ticks, with
        whole seconds or more also in units
        (``TumblingWindow(size=3600000000 (1h))``)."""
        shown = format_duration if durations else format_ticks_duration
        parts = [f"size={shown(self.size)}"]
        if type(self) is HoppingWindow:
            parts.append(f"hop={shown(self.hop)}")
        if self.offset:
            parts.append(f"offset={shown(self.offset)}")
        return f"{type(self).__name__}({', '.join(parts)})"

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
    sql_assignment: ClassVar[str] = (
        "distinct endpoints per key + lead() give windows; join events by endpoint rank"
    )

    def affected(
        self, old: tuple[int, int] | None, new: tuple[int, int] | None, sees_ends: bool
    ) -> list[tuple[int, int]]:
        """The changed span widened by a tick on each side: an endpoint
        added or removed there splits or merges the windows that touch it.

        >>> SnapshotWindow().affected(None, (3, 7), False)
        [(2, 8)]
        """
        lo, hi = changed_span(old, new, sees_ends)
        return [(lo - 1, hi + 1 if hi < INFINITY else hi)]

    def final_before(self, w_end: Any, cti: Any) -> Any:
        """A snapshot window ends at an endpoint: one ending exactly at the
        CTI may still be split by an event ending there, so only windows
        ending before it are final.

        >>> SnapshotWindow().final_before(10, 10), SnapshotWindow().final_before(9, 10)
        (False, True)
        """
        return w_end < cti

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

    def __repr__(self) -> str:
        return "SnapshotWindow()"


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"count window size must be an integer >= 1, got {value!r}")
    return int(value)  # a numpy integer too


@dataclass(frozen=True)
class CountWindow(WindowSpec):
    """Windows spanning ``count`` consecutive distinct event times of one
    :attr:`edge` (starts or ends): the two count kinds, which engines that
    number distinct times per key treat alike."""

    count: int
    #: which endpoint of the events the windows count
    edge: ClassVar[Literal["start", "end"]]
    default_output: ClassVar[str] = "point_end"

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _count(self.count))

    @abstractmethod
    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        """Every window of ``count`` consecutive distinct times ending at
        or before ``watermark``, by start."""


@dataclass(frozen=True)
class CountByStartWindow(CountWindow):
    """Windows spanning ``count`` consecutive distinct event start times.

    With distinct starts ``s_0 < s_1 < ...``, window i is
    ``[s_i, s_(i+count-1) + 1 tick)`` and holds the events whose start lies
    in it (StreamInsight's CountByStartTimeWindow). Events sharing a start
    time all belong, so a window may hold more than ``count`` events.
    """

    kind: ClassVar[str] = "count_by_start"
    edge: ClassVar[Literal["start", "end"]] = "start"
    members_by_start: ClassVar[bool] = True
    sql_assignment: ClassVar[str] = (
        "dense rank of distinct start times per key + lead(); join members by rank"
    )

    def holds(self, start: Any, end: Any, w_start: Any, w_end: Any) -> Any:
        """Members are the events starting in the window.

        >>> CountByStartWindow(2).holds(5, 9, 5, 8), CountByStartWindow(2).holds(4, 9, 5, 8)
        (True, False)
        """
        return (w_start <= start) & (start < w_end)

    def touching(
        self, w_starts: Sequence[int], w_ends: Sequence[int], start: int, end: int
    ) -> tuple[int, int]:
        """Windows starting at or before the event's start and ending after it.

        >>> CountByStartWindow(2).touching([0, 5], [6, 9], 5, 20)
        (0, 2)
        """
        return bisect_right(w_ends, start), bisect_right(w_starts, start)

    def affected(
        self, old: tuple[int, int] | None, new: tuple[int, int] | None, sees_ends: bool
    ) -> list[tuple[int, int]]:
        """The windows holding the event's start (its end moves no window).

        >>> CountByStartWindow(2).affected((3, 7), (3, 12), False)
        [(3, 4)]
        """
        ev = new if new is not None else old
        assert ev is not None
        return [(ev[0], ev[0] + 1)]

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


@dataclass(frozen=True)
class CountByEndWindow(CountWindow):
    """Windows spanning ``count`` consecutive distinct event end times.

    With distinct ends ``e_0 < e_1 < ...``, window i is
    ``[e_i - 1 tick, e_(i+count-1))`` and holds the events whose end lies in
    ``[e_i, e_(i+count-1)]``: the events whose last tick lies in the window.
    This mirrors :class:`CountByStartWindow` and keeps every member
    overlapping its window.
    """

    kind: ClassVar[str] = "count_by_end"
    edge: ClassVar[Literal["start", "end"]] = "end"
    final_waits_for_members: ClassVar[bool] = False
    sql_assignment: ClassVar[str] = (
        "dense rank of distinct end times per key + lead(); join members by rank"
    )

    def holds(self, start: Any, end: Any, w_start: Any, w_end: Any) -> Any:
        """Members are the events whose last tick lies in the window.

        >>> CountByEndWindow(2).holds(0, 8, 5, 8), CountByEndWindow(2).holds(0, 5, 5, 8)
        (True, False)
        """
        return (w_start < end) & (end <= w_end)

    def touching(
        self, w_starts: Sequence[int], w_ends: Sequence[int], start: int, end: int
    ) -> tuple[int, int]:
        """Windows starting before the event's end and ending at or after it.

        >>> CountByEndWindow(2).touching([4, 8], [9, 12], 0, 9)
        (0, 2)
        """
        return bisect_left(w_ends, end), bisect_left(w_starts, end)

    def affected(
        self, old: tuple[int, int] | None, new: tuple[int, int] | None, sees_ends: bool
    ) -> list[tuple[int, int]]:
        """The windows at the event's old and new end (its start moves none).

        >>> CountByEndWindow(2).affected((3, 7), (3, 12), False)
        [(6, 7), (11, 12)]
        """
        ends = sorted({ev[1] for ev in (old, new) if ev is not None})
        return [(e - 1, e) for e in ends]

    def final_before(self, w_end: Any, cti: Any) -> Any:
        """A window ending exactly at the CTI may still gain an event whose
        end moves to the CTI, so only windows ending before it are final.

        >>> CountByEndWindow(2).final_before(10, 10)
        False
        """
        return w_end < cti

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
