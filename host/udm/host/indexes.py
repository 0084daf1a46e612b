"""The host's event index: the live events of one key.

The paper keeps an EventIndex (events by end, then start) and a WindowIndex
(windows by start with their endpoint and event counts). Here the event
index is two sorted lists over the live events of one key, and each window
kind (:mod:`udm.host.kinds`) derives the windows overlapping a time range
from them:
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
from udm.sdk.events import IntervalEvent

__all__ = ["EventIndex", "IndexedEvent"]


@dataclass(slots=True)
class IndexedEvent:
    """A live event of one key. ``seq`` breaks ties in the indexes."""

    id: Hashable
    start: int
    end: int
    payload: Any
    seq: int

    def event(self) -> IntervalEvent[Any]:
        """The event as UDMs receive it: lifetime and payload, without the
        index's bookkeeping."""
        return IntervalEvent(self.start, self.end, self.payload)


def _by_end(e: IndexedEvent) -> tuple[int, int, int]:
    return (e.end, e.start, e.seq)


def _by_start(e: IndexedEvent) -> tuple[int, int, int]:
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
        self.by_id: dict[Hashable, IndexedEvent] = {}
        self.by_end: SortedKeyList = SortedKeyList(key=_by_end)
        self.by_start: SortedKeyList = SortedKeyList(key=_by_start)
        self.endpoints: SortedDict = SortedDict()  # time -> number of starts and ends there
        self.starts: SortedDict = SortedDict()  # start -> number of events starting there
        self.ends: SortedDict = SortedDict()  # end -> number of events ending there

    def __len__(self) -> int:
        return len(self.by_start)

    def _unlink(self, ev: IndexedEvent) -> None:
        # an expired event whose id was reused is no longer found by id
        if self.by_id.get(ev.id) is ev:
            del self.by_id[ev.id]

    def add(self, ev: IndexedEvent) -> None:
        """Index a live event by id, start, end and endpoint, so window members
        and snapshot boundaries are found without a scan."""
        self.by_id[ev.id] = ev
        self.by_end.add(ev)
        self.by_start.add(ev)
        _bump(self.endpoints, ev.start, 1)
        _bump(self.endpoints, ev.end, 1)
        _bump(self.starts, ev.start, 1)
        _bump(self.ends, ev.end, 1)

    def remove(self, ev: IndexedEvent) -> None:
        """Forget a live event in every index (a retraction, or the event
        expired)."""
        self._unlink(ev)
        self.by_end.remove(ev)
        self.by_start.remove(ev)
        _bump(self.endpoints, ev.start, -1)
        _bump(self.endpoints, ev.end, -1)
        _bump(self.starts, ev.start, -1)
        _bump(self.ends, ev.end, -1)

    def retire(self, ev: IndexedEvent, keep_endpoints: bool) -> None:
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

    def overlapping(self, lo: int, hi: int) -> Iterator[IndexedEvent]:
        """Events whose lifetime overlaps ``[lo, hi)``."""
        for ev in self.by_end.irange_key(min_key=(lo + 1, -INFINITY - 1, -1)):
            if ev.start < hi:
                yield ev

    def starting_in(self, lo: int, hi: int) -> Iterator[IndexedEvent]:
        """Events with ``lo <= start < hi``."""
        return iter(
            self.by_start.irange_key(
                min_key=(lo, -INFINITY - 1, -1),
                max_key=(hi, -INFINITY - 1, -1),
                inclusive=(True, False),
            )
        )

    def ending_in(self, lo: int, hi: int) -> Iterator[IndexedEvent]:
        """Events with ``lo < end <= hi``."""
        return iter(
            self.by_end.irange_key(
                min_key=(lo + 1, -INFINITY - 1, -1),
                max_key=(hi + 1, -INFINITY - 1, -1),
                inclusive=(True, False),
            )
        )
