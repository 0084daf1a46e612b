"""The incremental host's per-window-kind strategies.

:class:`~udm.host.engine.Host` orchestrates elements, journaling, UDM calls
and output; everything it must know about a window kind's shape over the
live events of one key is asked of the strategy :func:`kind_for` finds for
its :class:`~udm.host.windows.WindowSpec` (as Beam's runners ask a
``WindowFn``): which windows exist in a time range (:meth:`WindowKind.derive`),
a window's members, the earliest start of a window a CTI leaves open, the
events a CTI lets the host forget, and the earliest output of windows that
do not exist yet. The pure time questions (membership, the windows a change
affects, finality before a CTI) are the spec's own.

A new window kind adds its spec class in :mod:`udm.host.windows` and one
strategy here, registered with :func:`register_kind`; the host does not
change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Generic, TypeVar

from udm.host.gridpath import GridPath
from udm.host.gridstate import eligible, refuse_open, slice_eligible
from udm.host.indexes import EventIndex, IndexedEvent
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.time import INFINITY, MIN_TIME
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    WindowSpec,
)
from udm.sdk.base import Udm

__all__ = [
    "CountByEndKind",
    "CountByStartKind",
    "GridKind",
    "SnapshotKind",
    "WindowKind",
    "grid_path",
    "kind_for",
    "register_kind",
]

S = TypeVar("S", bound=WindowSpec)


class WindowKind(Generic[S]):
    """How the host keeps windows of one kind over a key's live events.

    The defaults fit windows that an event's lifetime overlaps; a kind
    overrides what differs. Every method reads the key's
    :class:`~udm.host.indexes.EventIndex` and changes nothing.
    """

    #: Snapshot windows keep retired events' endpoints (see
    #: :meth:`EventIndex.retire`) so the windows around them keep their shape.
    keeps_endpoints: ClassVar[bool] = False

    def __init__(self, spec: S) -> None:
        self.spec = spec

    def derive(self, index: EventIndex, lo: int, hi: int, begun_by: int) -> list[tuple[int, int]]:
        """The windows ``(start, end)`` that exist for the current events
        and overlap ``[lo, hi)``, by start. Grid windows exist when some
        event overlaps them, but only those begun by ``begun_by`` (the
        watermark) are materialized."""
        raise NotImplementedError(f"the host does not know window {self.spec!r}")

    def members(self, index: EventIndex, start: int, end: int) -> list[IndexedEvent]:
        """The members of window ``[start, end)``: the events overlapping it."""
        return list(index.overlapping(start, end))

    def open_from(self, index: EventIndex, cti: int) -> int:
        """A lower bound (at most ``cti``) on the start of any window that a
        CTI at ``cti`` leaves open or that may still come into existence;
        existing windows aside (the host adds those)."""
        return cti

    def retired(self, index: EventIndex, lowest: int, cti: int) -> list[IndexedEvent]:
        """The events no open window can see once every window starting
        before ``lowest`` is final: those ending by then."""
        retire = []
        for ev in index.by_end:
            if ev.end >= lowest:
                break
            retire.append(ev)
        return retire

    def earliest_future(
        self, cti: int, policy: OutputPolicy, open_from: Callable[[], Iterable[int]]
    ) -> int:
        """The earliest output time (at most ``cti``) of windows that do not
        exist yet, for any key (``open_from`` yields, for every key, the
        earliest start of its open windows, existing or not: count windows
        yet to come may begin before the CTI)."""
        return cti

    def begun(self, index: EventIndex, m_old: int, m_new: int) -> list[tuple[int, int]]:
        """Windows that may need materializing because the watermark moved
        from ``m_old`` to ``m_new`` (the host skips those it has or has
        forgotten): none, except for grid windows, which begin without a
        new event."""
        return []

    def refuse_open(self, start: int, end: int, begun_by: int) -> None:
        """Refuse a new event ``[start, end)`` that never ends and would join
        infinitely many windows at once (:func:`~udm.host.gridstate.refuse_open`);
        only grid windows begin without an event, so only they refuse."""

    def close_problem(self, indexes: Iterable[EventIndex]) -> str | None:
        """Why a CTI at the end of time cannot close these windows, or None
        (the :class:`~udm.host.errors.OpenEventError`'s ``what``)."""
        return None

    def quiet(self, index: EventIndex, cti: int) -> bool:
        """Whether a key with these events, no open window and no start
        after ``cti`` has nothing for a later CTI to do (no window to begin,
        no event to retire, the same :meth:`open_from`) until an element
        of the key arrives: the host then leaves it out of CTIs. None of
        the kinds that retire every event such a key holds (it is dropped
        instead)."""
        return False

    def fast_path(self, **options: Any) -> GridPath | None:
        """A faster equivalent of the general path for this query, if the
        kind has one (see :class:`~udm.host.gridpath.GridPath`)."""
        return None


class GridKind(WindowKind[HoppingWindow]):
    """Hopping and tumbling windows: a fixed grid, windows by arithmetic."""

    def derive(self, index: EventIndex, lo: int, hi: int, begun_by: int) -> list[tuple[int, int]]:
        if hi <= lo:
            return []
        spec = self.spec
        k_lo, k_hi = spec.index_range(lo, hi)
        out = []
        for k in range(k_lo, min(k_hi, spec.last_begun(begun_by)) + 1):
            w_start = spec.start_of(k)
            w_end = w_start + spec.size
            if next(index.overlapping(w_start, w_end), None) is not None:
                out.append((w_start, w_end))
        return out

    def open_from(self, index: EventIndex, cti: int) -> int:
        return min(cti, self.spec.first_open_start(cti))

    def refuse_open(self, start: int, end: int, begun_by: int) -> None:
        spec = self.spec
        refuse_open(
            spec, start, end, spec.last_begun(begun_by) - spec.index_range(start, end)[0] + 1
        )

    def earliest_future(
        self, cti: int, policy: OutputPolicy, open_from: Callable[[], Iterable[int]]
    ) -> int:
        start = self.spec.first_open_start(cti)
        return min(cti, policy.earliest_output(start, start + self.spec.size))

    def begun(self, index: EventIndex, m_old: int, m_new: int) -> list[tuple[int, int]]:
        """Every window begun between the watermarks that a live event
        overlaps (at the end of time: up to the last finite end, as an
        event that never ends overlaps infinitely many)."""
        spec = self.spec
        if m_new >= INFINITY:
            m_new = max((ev.end for ev in index.by_end if ev.end < INFINITY), default=m_old)
        k_from, k_to = spec.last_begun(m_old) + 1, spec.last_begun(m_new)
        if k_to < k_from:
            return []
        lo = spec.start_of(k_from)
        hi = spec.start_of(k_to) + 1
        starts: set[int] = set()
        for ev in index.overlapping(lo, INFINITY):
            k_lo, k_hi = spec.index_range(ev.start, ev.end)
            refuse_open(spec, ev.start, ev.end, min(k_hi, k_to) - max(k_lo, k_from) + 1)
            starts.update(spec.start_of(k) for k in range(max(k_lo, k_from), min(k_hi, k_to) + 1))
        return [(s, s + spec.size) for s in sorted(starts) if s < hi]

    def close_problem(self, indexes: Iterable[EventIndex]) -> str | None:
        if any(index.by_end and index.by_end[-1].end >= INFINITY for index in indexes):
            return (
                f"cannot close {self.spec!r} at the end of time: an event that never ends "
                "overlaps infinitely many windows"
            )
        return None

    def fast_path(self, **options: Any) -> GridPath | None:
        return grid_path(self.spec, **options)


class SnapshotKind(WindowKind[SnapshotWindow]):
    """Snapshot windows: between consecutive endpoints, from endpoint counts."""

    keeps_endpoints = True

    def derive(self, index: EventIndex, lo: int, hi: int, begun_by: int) -> list[tuple[int, int]]:
        points = index.endpoints
        if hi <= lo or not points:
            return []
        i = max(points.bisect_right(lo) - 1, 0)
        keys = points.keys()
        out = []
        n = len(keys)
        while i + 1 < n:
            a, b = keys[i], keys[i + 1]
            if a >= hi:
                break
            if b > lo and next(index.overlapping(a, b), None) is not None:
                out.append((a, b))
            i += 1
        return out

    def earliest_future(
        self, cti: int, policy: OutputPolicy, open_from: Callable[[], Iterable[int]]
    ) -> int:
        # an end may still move to exactly the CTI, splitting a window
        # there: its point_end output can start a tick before it
        return cti - 1 if policy is OutputPolicy.POINT_END else cti


C = TypeVar("C", CountByStartWindow, CountByEndWindow)


class _CountKind(WindowKind[C]):
    """Count windows: spans of ``count`` distinct start (end) times."""

    #: count by start: windows of start times, else of end times
    by_start: ClassVar[bool]

    def _times(self, index: EventIndex) -> Any:
        return index.starts if self.by_start else index.ends

    def derive(self, index: EventIndex, lo: int, hi: int, begun_by: int) -> list[tuple[int, int]]:
        if hi <= lo:
            return []
        by_start = self.by_start
        times = self._times(index)
        keys = times.keys()
        n, c = len(keys), self.spec.count
        # window i spans times[i] .. times[i + c - 1]; it overlaps [lo, hi)
        # iff its last time is >= lo (start-based) / > lo (end-based) and
        # its first is < hi
        j = times.bisect_left(lo) if by_start else times.bisect_right(lo)
        i = max(j - c + 1, 0)
        out = []
        while i + c - 1 < n:
            first, last = keys[i], keys[i + c - 1]
            w = (first, last + 1) if by_start else (first - 1, last)
            if w[0] >= hi:
                break
            if w[1] > lo:
                out.append(w)
            i += 1
        return out

    def quiet(self, index: EventIndex, cti: int) -> bool:
        """The last ``count - 1`` times stay for good (see :meth:`open_from`):
        once every event ends by the CTI (and starts by it, which the host
        checks), a later CTI retires nothing more and :meth:`open_from`
        stays that first time (at most the CTI)."""
        return self.spec.count > 1 and (not index.by_end or index.by_end[-1].end <= cti)

    def open_from(self, index: EventIndex, cti: int) -> int:
        """The first of the last ``count - 1`` times may still open a window
        with times to come."""
        times = self._times(index)
        count = self.spec.count
        if count > 1 and times:
            first: int = times.keys()[max(len(times) - (count - 1), 0)]
            return min(cti, first if self.by_start else first - 1)
        return cti

    def earliest_future(
        self, cti: int, policy: OutputPolicy, open_from: Callable[[], Iterable[int]]
    ) -> int:
        # A count window that does not exist yet ends at a start (end) not
        # seen yet or moved, so at or after the CTI: under point_end its
        # output is at or after it; otherwise at its start, which may lie
        # before it.
        if policy is OutputPolicy.POINT_END:
            return cti
        return min([cti, *open_from()])


class CountByStartKind(_CountKind[CountByStartWindow]):
    """Count-by-start windows: a window's members are the events starting
    in it, found and retired by start in the event index."""

    by_start = True

    def members(self, index: EventIndex, start: int, end: int) -> list[IndexedEvent]:
        return list(index.starting_in(start, end))

    def retired(self, index: EventIndex, lowest: int, cti: int) -> list[IndexedEvent]:
        return list(index.starting_in(MIN_TIME, lowest))


class CountByEndKind(_CountKind[CountByEndWindow]):
    """Count-by-end windows: a window's members are the events ending in
    it, found by end in the event index."""

    by_start = False

    def members(self, index: EventIndex, start: int, end: int) -> list[IndexedEvent]:
        return list(index.ending_in(start, end))

    def retired(self, index: EventIndex, lowest: int, cti: int) -> list[IndexedEvent]:
        # an end at or after the CTI may still move into an open window
        return list(index.ending_in(MIN_TIME - 1, min(lowest, cti - 1)))

    def earliest_future(
        self, cti: int, policy: OutputPolicy, open_from: Callable[[], Iterable[int]]
    ) -> int:
        # an end may still move to exactly the CTI, ending a window there
        return min(super().earliest_future(cti, policy, open_from), cti - 1)


_KINDS: dict[type[WindowSpec], type[WindowKind[Any]]] = {}


def grid_path(
    window: HoppingWindow,
    *,
    udm: Udm,
    policy: OutputPolicy,
    clipping: InputClipping,
    **options: Any,
) -> GridPath | None:
    """The grid path for a query it computes exactly (states updated by
    ``add``/``remove`` when :func:`eligible`, else windows read as slices
    when :func:`slice_eligible`), or None: the general path runs it.
    ``options`` are the grid path's other arguments (``conservative``,
    ``key_fn``, ``value_fn``, ``label``, ``new_id``, ``return_ids``, ``keep_events``,
    ``fields``: see :class:`~udm.host.gridcore.GridCore`)."""
    invertible = eligible(window, udm, policy, clipping)
    if not (invertible or slice_eligible(window, udm, policy)):
        return None
    return GridPath(window, udm, policy, slices=not invertible, **options)


def register_kind(spec: type[WindowSpec], kind: type[WindowKind[Any]]) -> None:
    """Make the host run windows of ``spec`` (and its subclasses) with ``kind``."""
    _KINDS[spec] = kind


def kind_for(spec: WindowSpec) -> WindowKind[Any]:
    """The host's strategy for ``spec``: the one registered for its class or
    the nearest base class (tumbling windows are hopping windows).

    >>> from udm.host.windows import TumblingWindow
    >>> type(kind_for(TumblingWindow(10))).__name__
    'GridKind'
    """
    for cls in type(spec).__mro__:
        kind = _KINDS.get(cls)
        if kind is not None:
            return kind(spec)
    raise TypeError(f"the host does not know window {spec!r}")


register_kind(HoppingWindow, GridKind)
register_kind(SnapshotWindow, SnapshotKind)
register_kind(CountByStartWindow, CountByStartKind)
register_kind(CountByEndWindow, CountByEndKind)
