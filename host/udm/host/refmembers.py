"""The reference evaluator's window members, two ways, each exactly the
paper's belongs-to rule (``tests/test_reference_members.py`` and
``tests/test_reference_slices.py`` compare both with it literally).

* :func:`assign_members`: each event is offered only the windows it can
  belong to (found by bisection, or by its index range on a grid), for
  every window kind and UDM flavour.
* :func:`window_payloads`: a time-insensitive UDM under the overlap rule
  sees its members' payloads alone, so a window's input is a slice of its
  group's payloads sorted by start (:class:`EventColumns`): no event object
  and no member list per window. On a hopping or tumbling grid the windows
  are not listed either: :func:`grid_slices` walks the grid in order,
  moving the slice's two ends forward from one window to the next, and
  jumps over the windows between events. Its work is a few steps per
  window with members and per event, never a step per membership.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, islice
from operator import ge, sub
from typing import Any

from udm.host.invoke import ValueFn
from udm.host.time import INFINITY
from udm.host.windows import HoppingWindow, WindowSpec
from udm.sdk.events import IntervalEvent, WindowDescriptor
from udm.sdk.payloads import payload_key

__all__ = [
    "EventColumns",
    "assign_members",
    "grid_slices",
    "grid_windows",
    "overlap_rule",
    "window_payloads",
]


class EventColumns:
    """A group's events as three columns, in the group's order: start
    times, end times, and the payloads the UDM receives (mapped by the
    query's ``value``).

    :func:`~udm.host.reference.evaluate_by_key` fills them while it groups,
    reading each of the caller's events once, in the input's order, while
    it is in the cache: a key's events lie scattered among the other keys'
    (a thousand events apart in a 1M-event input of 1,000 keys), and every
    later read of them reached main memory (issue 31). A time-insensitive
    UDM's windows need nothing else."""

    __slots__ = ("ends", "starts", "values")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.values: list[Any] = []

    def compact(self) -> None:
        """Copy the times into int objects allocated together: the walk
        then reads a key's times from a few cache lines rather than from
        the caller's objects, scattered over the input (issue 31). Raises
        OverflowError for a time outside int64, which no window holds."""
        self.starts = array("q", self.starts).tolist()
        self.ends = array("q", self.ends).tolist()

    @classmethod
    def of(cls, events: Sequence[IntervalEvent[Any]], value_fn: ValueFn) -> EventColumns | None:
        """The columns of ``events`` (a list: it is read once per column),
        or None when ``value_fn`` fails on one of them."""
        columns = cls()
        columns.starts = [e.start for e in events]
        columns.ends = [e.end for e in events]
        try:
            if value_fn is None:
                columns.values = [e.payload for e in events]
            else:
                columns.values = [value_fn(e.payload) for e in events]
        except Exception:
            return None
        return columns

    def canonical(self) -> EventColumns:
        """The columns in a time-insensitive UDM's canonical order, by start,
        then payload (a subsequence of a stable sort is in the order its own
        stable sort gives, so every window's slice is in that order). Columns
        whose starts strictly increase (the usual input) are in it already:
        no sort, and no payload read for one."""
        starts, values = self.starts, self.values
        if not any(map(ge, starts, islice(starts, 1, None))):
            return self
        order = sorted(range(len(starts)), key=lambda i: (starts[i], payload_key(values[i])))
        out = EventColumns()
        out.starts = [starts[i] for i in order]
        out.ends = [self.ends[i] for i in order]
        out.values = [values[i] for i in order]
        return out

    def events(self) -> list[IntervalEvent[Any]]:
        """The columns as events, with the mapped payloads."""
        return list(map(IntervalEvent, self.starts, self.ends, self.values))


def window_payloads(
    window: WindowSpec, columns: EventColumns, watermark: int, emit_empty: bool
) -> Iterator[tuple[WindowDescriptor, list[Any]]]:
    """Each window of a time-insensitive UDM under the overlap rule, with its
    members' payloads in canonical order: the windows ``window.windows``
    defines (:func:`grid_windows` with ``emit_empty``), in order, the empty
    ones left out unless ``emit_empty``. ``columns`` are mapped and in
    canonical order (:meth:`EventColumns.canonical`).

    A window's members are the events that start before it ends and end
    after it starts. Sorted by start, those starting before it ends are a
    prefix; of these, the ones before the first whose running latest end
    (``reach``) passes the window's start all end by it. What lies between
    is the slice (found by :func:`grid_slices` on a grid, by two bisections
    over listed windows); it holds only members when every event is a
    point, and is filtered by end otherwise. Events longer than the
    shortest window would put many non-members in the slices: those take
    :func:`assign_members`."""
    starts, ends, values = columns.starts, columns.ends, columns.values
    if not starts:
        return
    longest = max(map(sub, ends, starts))
    points = longest == 1
    grid = window.grid
    if grid is not None and _walkable(window, grid, starts, ends) and longest <= grid.size:
        last = grid.last_index_before(watermark) if watermark < INFINITY else None
        for w_start, w_end, lo, hi in grid_slices(grid, starts, ends, last, emit_empty):
            chosen = values[lo:hi] if points else _ending_after(w_start, values, ends, lo, hi)
            yield WindowDescriptor(w_start, w_end), chosen
        return
    events = columns.events()
    if emit_empty and grid is not None:
        windows = grid_windows(grid, events, watermark)
    else:
        windows = window.windows(events, watermark)
    if windows and longest > min(w.end - w.start for w in windows):
        for w, found in zip(windows, assign_members(window, windows, events), strict=True):
            if found or emit_empty:
                yield w, [e.payload for e in found]
        return
    reach = list(accumulate(ends, max))
    for w in windows:
        lo, hi = bisect_right(reach, w.start), bisect_left(starts, w.end)
        if lo < hi or emit_empty:
            yield w, values[lo:hi] if points else _ending_after(w.start, values, ends, lo, hi)


def _ending_after(w_start: int, values: list[Any], ends: list[int], lo: int, hi: int) -> list[Any]:
    """The payloads of the slice ``lo:hi`` whose events end after
    ``w_start``: a window's members when not every event is a point."""
    return [v for v, end in zip(values[lo:hi], ends[lo:hi], strict=True) if end > w_start]


def grid_slices(
    grid: HoppingWindow, starts: list[int], ends: list[int], last: int | None, emit_empty: bool
) -> Iterator[tuple[int, int, int, int]]:
    """``(start, end, lo, hi)`` for each window of ``grid`` that holds one of
    the events (sorted by start, within the grid's time bounds), in order,
    up to window ``last`` (None: no bound): the windows
    :meth:`HoppingWindow.windows` lists. Its members are among the events
    ``lo:hi``, the first of them one (see :func:`window_payloads`). With
    ``emit_empty`` the empty windows between the first such window and the
    last (or window ``last``) come too, with an empty slice.

    The walk starts at the first window that ends after the first event
    starts. From one window to the next both ends of the slice only move
    forward, so they are moved, not searched for: the walk reads each
    event's times about twice in all, in order. A window whose slice is
    empty holds no event, and neither does any window before the first
    one holding the next event to start (``hi``): the events before it all
    ended by this window's start, so the walk jumps there. It stops when
    every event has ended by a window's start."""
    if not starts:
        return
    reach = list(accumulate(ends, max))  # reach[i]: the latest end of events 0..i
    n = len(starts)
    hop, size, offset = grid.hop, grid.size, grid.offset  # window k: HoppingWindow.window_at
    first_index = grid.first_index.at  # the first window ending after a time
    lo = hi = 0
    previous = None  # the last window with members
    k = first_index(starts[0])
    while last is None or k <= last:
        w_start = k * hop + offset
        w_end = w_start + size
        while lo < n and reach[lo] <= w_start:  # events before lo end by the window's start
            lo += 1
        if lo == n:
            break
        while hi < n and starts[hi] < w_end:  # events from hi on start at or after its end
            hi += 1
        if lo == hi:
            k = max(k + 1, first_index(starts[hi]))
            continue
        if emit_empty and previous is not None:
            for j in range(previous + 1, k):
                yield j * hop + offset, j * hop + offset + size, lo, lo
        yield w_start, w_end, lo, hi
        previous, k = k, k + 1
    if emit_empty and previous is not None and last is not None:
        for j in range(previous + 1, last + 1):
            yield j * hop + offset, j * hop + offset + size, n, n


#: what :func:`grid_slices` computes with, or checks against: a grid kind
#: that redefines one of them takes ``windows`` instead
_GRID_DEFINITIONS = (
    "windows",
    "index_range",
    "first_index",
    "window_at",
    "start_of",
    "end_of",
    "range_problem",
    "time_bounds",
    "last_index_before",
)


def _walkable(window: WindowSpec, grid: HoppingWindow, starts: list[int], ends: list[int]) -> bool:
    """Whether :func:`grid_slices` may walk ``window``'s windows of these
    events (sorted by start): a hopping or tumbling grid with
    :class:`HoppingWindow`'s definitions, and no event that
    ``windows`` refuses (outside the grid's time bounds, or open at the
    end of time: an error, which ``windows`` raises)."""
    kind = type(grid)
    if grid is not window or any(
        getattr(kind, name) is not getattr(HoppingWindow, name) for name in _GRID_DEFINITIONS
    ):
        return False
    min_start, max_end = grid.time_bounds
    latest = max(ends)
    return starts[0] >= min_start and latest <= max_end and latest < INFINITY


def grid_windows(
    window: HoppingWindow, events: Iterable[IntervalEvent[Any]], watermark: int
) -> list[WindowDescriptor]:
    """All grid windows from the first non-empty one to the last one that
    ends by the watermark (or the last non-empty one when the watermark is
    infinite): the windows ``emit_empty`` runs the UDM on."""
    nonempty = window.windows(list(events), watermark)
    if not nonempty:
        return []
    first = window.last_begun(nonempty[0].start)
    last = window.last_begun(nonempty[-1].start)
    if watermark < INFINITY:
        last = max(window.last_index_before(watermark), last)
    return [window.window_at(k) for k in range(first, last + 1)]


def assign_members(
    window: WindowSpec, windows: Sequence[WindowDescriptor], events: Sequence[IntervalEvent[Any]]
) -> list[list[IntervalEvent[Any]]]:
    """Each window's members (``window.belongs``), in the order of ``events``.

    Asking every event about every window costs windows x events; instead
    each event is offered only the windows it can belong to, found by
    bisection: every window kind's windows, listed by start, also have
    increasing ends, and an event belongs to a window only if the window
    starts before it ends (count by start: at or before its start) and ends
    after it starts (count by end: at or after its end). The belongs-to rule
    still decides, so the cost is the memberships plus a log per event.
    """
    starts = [w.start for w in windows]
    ends = [w.end for w in windows]
    members: list[list[IntervalEvent[Any]]] = [[] for _ in windows]
    belongs = window.belongs
    touching = window.touching
    if overlap_rule(window):
        # the touching windows are exactly the overlapping ones: no window
        # needs asking
        k0 = _grid_origin(window, windows)
        if k0 is not None:  # consecutive grid windows: positions are indexes
            index_range = window.grid.index_range  # type: ignore[union-attr]
            n = len(windows)
            for e in events:
                lo, hi = index_range(e.start, e.end)
                for i in range(max(lo - k0, 0), min(hi - k0 + 1, n)):
                    members[i].append(e)
            return members
        for e in events:
            lo, hi = touching(starts, ends, e.start, e.end)
            for i in range(lo, hi):
                members[i].append(e)
        return members
    for e in events:
        lo, hi = touching(starts, ends, e.start, e.end)
        for i in range(lo, hi):
            if belongs(e, windows[i]):
                members[i].append(e)
    return members


def _grid_origin(window: WindowSpec, windows: Sequence[WindowDescriptor]) -> int | None:
    """The index of the first of ``windows`` when they are consecutive
    windows of a hopping or tumbling grid (the usual case): an event's
    windows are then found by its index range, not by two bisections whose
    cost grows with the windows (a tenth of the time at a thousand windows
    a key). None otherwise (a grid kind of its own, a gap)."""
    grid = window.grid
    if not windows or grid is None or grid is not window:
        return None  # not a grid, or its windows are not the grid's own
    kind = type(grid)
    if kind.index_range is not HoppingWindow.index_range:
        return None
    if kind.window_at is not HoppingWindow.window_at:
        return None
    first: int = grid.last_begun(windows[0].start)
    if windows[0] != grid.window_at(first):
        return None
    start, hop = windows[0].start, grid.hop
    if [w.start for w in windows] != list(range(start, start + len(windows) * hop, hop)):
        return None
    if any(w.end - w.start != grid.size for w in windows):
        return None
    return first


def overlap_rule(window: WindowSpec) -> bool:
    """Whether ``window`` keeps the default membership rule, overlap, with
    the default :meth:`~udm.host.windows.WindowSpec.touching`: then every
    window ``touching`` finds holds the event (it finds those starting
    before the event ends and ending after it starts)."""
    kind = type(window)
    return (
        kind.belongs is WindowSpec.belongs
        and kind.holds is WindowSpec.holds
        and kind.touching is WindowSpec.touching
    )
