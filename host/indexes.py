"""The host's indexes: live events and per-kind window derivation.

The paper keeps an EventIndex (events by end, then start) and a WindowIndex
(windows by start with their endpoint and event counts). Here the event
index is two sorted lists over the live events of one key, and each window
kind knows how to derive the windows overlapping a time range from them:
grid windows from arithmetic, snapshot windows from the endpoint counts,
count windows from the distinct start or end counts. Windows are therefore
never stored wrongly: the engine derives them before and after each change
and keeps per-window state only for the windows that exist.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict, SortedKeyList

from udm.host.time import INFINITY
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    WindowSpec,
)
from udm.sdk.events import IntervalEvent

__all__ = ["EventIndex", "LiveEv", "derive_windows"]


@dataclass(slots=True)
class LiveEv:
    """A live event of one key. ``seq`` breaks ties in the indexes."""

    id: Hashable
    start: int
    end: int
    payload: Any
    seq: int

    def event(self) -> IntervalEvent[Any]:
        return IntervalEvent(self.start, self.end, self.payload)


def _by_end(e: LiveEv) -> tuple[int, int, int]:
    return (e.end, e.start, e.seq)


def _by_start(e: LiveEv) -> tuple[int, int, int]:
    return (e.start, e.end, e.seq)


def _bump(counts: Any, t: int, delta: int) -> None:
    if delta < 0 and t not in counts:  # an endpoint already pruned
        return
    n = counts.get(t, 0) + delta
    if n:
        counts[t] = n
    else:
        del counts[t]


class EventIndex:
    """Live events of one key, by end then start (the paper's EventIndex)
    and by start, with the endpoint counts that shape snapshot and count
    windows (the paper's W.#endpts)."""

    def __init__(self) -> None:
        self.by_id: dict[Hashable, LiveEv] = {}
        self.by_end: SortedKeyList = SortedKeyList(key=_by_end)
        self.by_start: SortedKeyList = SortedKeyList(key=_by_start)
        self.endpoints: SortedDict = SortedDict()  # time -> number of starts and ends there
        self.starts: SortedDict = SortedDict()  # start -> number of events starting there
        self.ends: SortedDict = SortedDict()  # end -> number of events ending there

    def __len__(self) -> int:
        return len(self.by_start)

    def _unlink(self, ev: LiveEv) -> None:
        # an expired event whose id was reused is no longer found by id
        if self.by_id.get(ev.id) is ev:
            del self.by_id[ev.id]

    def add(self, ev: LiveEv) -> None:
        self.by_id[ev.id] = ev
        self.by_end.add(ev)
        self.by_start.add(ev)
        _bump(self.endpoints, ev.start, 1)
        _bump(self.endpoints, ev.end, 1)
        _bump(self.starts, ev.start, 1)
        _bump(self.ends, ev.end, 1)

    def remove(self, ev: LiveEv) -> None:
        self._unlink(ev)
        self.by_end.remove(ev)
        self.by_start.remove(ev)
        _bump(self.endpoints, ev.start, -1)
        _bump(self.endpoints, ev.end, -1)
        _bump(self.starts, ev.start, -1)
        _bump(self.ends, ev.end, -1)

    def retire(self, ev: LiveEv, keep_endpoints: bool) -> None:
        """Forget an event that can no longer affect an open window. Snapshot
        windows keep its endpoints (as ghosts) so the shapes of the windows
        around it do not change; :meth:`prune_endpoints` drops them later."""
        self._unlink(ev)
        self.by_end.remove(ev)
        self.by_start.remove(ev)
        if not keep_endpoints:
            _bump(self.endpoints, ev.start, -1)
            _bump(self.endpoints, ev.end, -1)
        _bump(self.starts, ev.start, -1)
        _bump(self.ends, ev.end, -1)

    def prune_endpoints(self, before: int) -> None:
        """Drop endpoints (live or ghost) strictly before ``before``: no open
        window starts there."""
        points = self.endpoints
        while points and points.peekitem(0)[0] < before:
            points.popitem(0)

    def overlapping(self, lo: int, hi: int) -> Iterator[LiveEv]:
        """Events whose lifetime overlaps ``[lo, hi)``."""
        for ev in self.by_end.irange_key(min_key=(lo + 1, -INFINITY - 1, -1)):
            if ev.start < hi:
                yield ev

    def starting_in(self, lo: int, hi: int) -> Iterator[LiveEv]:
        """Events with ``lo <= start < hi``."""
        return iter(
            self.by_start.irange_key(
                min_key=(lo, -INFINITY - 1, -1),
                max_key=(hi, -INFINITY - 1, -1),
                inclusive=(True, False),
            )
        )

    def ending_in(self, lo: int, hi: int) -> Iterator[LiveEv]:
        """Events with ``lo < end <= hi``."""
        return iter(
            self.by_end.irange_key(
                min_key=(lo + 1, -INFINITY - 1, -1),
                max_key=(hi + 1, -INFINITY - 1, -1),
                inclusive=(True, False),
            )
        )

    def members(self, spec: WindowSpec, start: int, end: int) -> list[LiveEv]:
        """The members of window ``[start, end)`` under ``spec``."""
        if isinstance(spec, CountByStartWindow):
            return list(self.starting_in(start, end))
        if isinstance(spec, CountByEndWindow):
            return list(self.ending_in(start, end))
        return list(self.overlapping(start, end))


def derive_windows(
    spec: WindowSpec, index: EventIndex, lo: int, hi: int, begun_by: int
) -> list[tuple[int, int]]:
    """The windows ``(start, end)`` that exist for the current events and
    overlap ``[lo, hi)``, by start.

    Grid windows exist when some event overlaps them, but only windows that
    have begun by ``begun_by`` (the watermark) are materialized: an event
    that never ends overlaps infinitely many grid windows.
    """
    if hi <= lo:
        return []
    if isinstance(spec, HoppingWindow):
        k_lo, k_hi = spec.index_range(lo, hi)
        k_begun = (begun_by - spec.offset) // spec.hop
        out = []
        for k in range(k_lo, min(k_hi, k_begun) + 1):
            w_start = k * spec.hop + spec.offset
            w_end = w_start + spec.size
            if next(index.overlapping(w_start, w_end), None) is not None:
                out.append((w_start, w_end))
        return out
    if isinstance(spec, SnapshotWindow):
        points = index.endpoints
        if not points:
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
    if isinstance(spec, CountByStartWindow | CountByEndWindow):
        by_start = isinstance(spec, CountByStartWindow)
        times = index.starts if by_start else index.ends
        keys = times.keys()
        n, c = len(keys), spec.count
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
    raise TypeError(f"unsupported window spec {spec!r}")
