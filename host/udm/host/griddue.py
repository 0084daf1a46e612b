"""The grid path's due heap: which keys a CTI visits.

A CTI visits only the keys with something due (a window ending at or
before it, events to retire, long events whose windows begin), found in a
heap of due times with one bucket of keys per time, so that a CTI costs
what it makes final, not the number of keys (issue 31). A key with no
window and no data left is dropped (:meth:`DueKeys._spent`).
:class:`DueKeys` is a base class of :class:`~udm.host.gridcore.GridCore`,
whose attributes it declares for the type checker.
"""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush

from udm.host.gridoperator import OperatorWindows
from udm.host.gridstate import NEVER, GridKey, forget_retired
from udm.host.time import INFINITY

__all__ = ["LINGER", "DueKeys"]

#: how many hops a key's final windows may wait to be forgotten (slice mode): a CTI
#: visits a key with steady events once every LINGER hops (a visit's fixed cost dominates)
LINGER = 32


class DueKeys(OperatorWindows):
    """The due heap of :class:`~udm.host.gridcore.GridCore` (declared
    attributes are the core's)."""

    _due_times: list[int]
    _due_buckets: dict[int, list[GridKey]]
    _long_keys: set[Hashable]
    lazy: bool
    reused: bool

    def _push(self, ks: GridKey, due: int) -> None:
        """Register ``ks`` as due at time ``due`` (an earlier window end)."""
        ks.due = due
        bucket = self._due_buckets.get(due)
        if bucket is None:
            self._due_buckets[due] = [ks]
            heappush(self._due_times, due)
        else:
            bucket.append(ks)

    def _due_keys(self, c: int, k_final: int | None) -> list[GridKey]:
        """The keys CTI ``c`` has work for: those with a window ending at or
        before it (to emit or finalize and forget), from the due heap, and
        those with long events (windows begin for them); at the end of time
        every key. A key with nothing due is not visited: the windows it
        has not emitted end after ``c``, and it has none the CTI could make
        final, so its only change would be its emitted index, which stays
        behind (no window lies between: none ends at or before the CTI)."""
        if k_final is None:
            self._due_times, self._due_buckets = [], {}
            return list(self.keys.values())
        visit: dict[int, GridKey] = {}  # by order of arrival (unique per key)
        times, buckets = self._due_times, self._due_buckets
        keys = self.keys
        while times and times[0] <= c:
            due = heappop(times)
            for ks in buckets.pop(due):
                # (a key pushed again since is in a later bucket too)
                if ks.due == due and keys.get(ks.key) is ks:
                    ks.due = NEVER
                    visit[ks.order] = ks
        for key in list(self._long_keys):
            holder = keys.get(key)
            if holder is None or not holder.long:
                self._long_keys.discard(key)
            else:
                visit[holder.order] = holder
        # in the keys' order of arrival, as a pass over all keys would: the
        # outputs' order (and ids) then survive a snapshot and restore
        return [visit[order] for order in sorted(visit)]

    def _register(self, ks: GridKey) -> None:
        """Register ``ks`` (which has windows) after a visit, in the slice
        mode with speculative output, where an in-order insert emits the
        windows it makes due itself: due when its first window not emitted
        yet ends (a CTI must emit it then) or ``LINGER`` hops after its
        earliest window ends, whichever is first. Its final windows then
        wait a few CTIs to be forgotten together, and a CTI visits a key
        that keeps receiving events every few hops rather than at each
        (:meth:`live_outputs` leaves them out meanwhile)."""
        wins, hop = ks.wins, self.hop
        ks.forget = due = min(wins) * hop + self.offset + self.size + LINGER * hop
        e = ks.emitted_k
        nxt = e + 1 if e is not None and e + 1 in wins else None
        if nxt is None:
            nxt = min((k for k in wins if e is None or k > e), default=None)
        if nxt is not None and nxt * hop + self.offset + self.size < due:
            due = nxt * hop + self.offset + self.size
        self._push(ks, due)

    def _spent(self, ks: GridKey, c: int) -> None:
        """``ks`` has no window left after CTI ``c``: drop it unless it holds
        events that reach windows not begun (or, in the slice mode, events
        not retired), so that memory holds the keys with data between CTIs,
        not every key ever seen. A later event of the key starts at or after
        the CTI, so a fresh state answers it as this one would once the
        key's watermark is the CTI (its emitted index then lies before every
        window such an event reaches); a key whose latest start lies beyond
        the CTI (its events fully retracted) is visited again when a CTI
        reaches it. In the invertible mode an event of the key may still
        live between windows (a hopping gap) or end exactly at the CTI: a
        retraction extending it finds no key and starts a fresh one
        (:meth:`retract`)."""
        if ks.long or (ks.events is not None and ks.events.records):
            return
        if ks.events is not None and self.hop > self.size:
            # slice mode over windows with gaps: keys holding only events in
            # a gap have no window to be visited by, so a batch and single
            # elements would drop a key at different CTIs, and a key that
            # comes back would get another place in the CTIs' visiting order
            # (output order and ids would differ between them): kept
            return
        if ks.max_start > c:
            self._push(ks, ks.max_start)
        elif self.keys.get(ks.key) is ks:
            del self.keys[ks.key]

    def _reschedule(self, ks: GridKey, bound: int) -> None:
        """After a CTI visit: retire the key's sorted events that end before
        ``bound`` and register it again by its earliest window's end (or,
        with no window left, when its remaining events can retire)."""
        kev = ks.events
        # retired in bulk, once half can go (or no window is left), not at
        # every visit; those kept end before every open window's slice
        if kev is not None and kev.records and kev.retirable(bound, not ks.wins):
            forget_retired(self.events, kev, bound, self.reused)
        if ks.wins and self.lazy:
            self._register(ks)
        elif ks.wins:
            # HoppingWindow.end_of inlined: once per key a CTI visits
            self._push(ks, min(ks.wins) * self.hop + self.offset + self.size)
        elif kev is not None and kev.records:
            end = kev.min_end()
            if end is not None and end < INFINITY:
                self._push(ks, end + 1)
        else:
            self._spent(ks, self.cti)
