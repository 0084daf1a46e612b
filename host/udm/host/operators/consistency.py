"""Align and Finalize (CEDR 4.5, 4.6): the two operators that set consistency.

Neither computes anything; together they place a query in CEDR's triangle
of consistency levels. **Align** controls blocking: it holds elements back
until they are ``blocking`` behind the latest start seen (application
time), or until a CTI makes them final, and merges a retraction into the
held element it changes, so what it releases carries fewer corrections.
With ``blocking`` at the end of time it releases only final events and
its output never retracts. **Finalize** controls memory and repairs
streams with ExternalCTIs; it lives in :mod:`udm.host.operators.finalize`
and is re-exported here.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedList

from udm.host.operators.base import Operator
from udm.host.operators.finalize import ORIGIN, FinalizeOperator, repair, repaired
from udm.host.operators.ids import OutputIds
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["ORIGIN", "AlignOperator", "FinalizeOperator", "repair", "repaired"]


class AlignOperator(Operator):
    """CEDR's Align with ``outputtime()`` = latest start seen - ``blocking``."""

    name = "align"
    state_fields = (
        "emitted",
        "latest_start",
        "output_time",
        "last_cti",
        "inserts",
        "retractions",
        "_by_start",
        "_seq",
        "ids",
    )

    def __init__(self, blocking: int, name: str = "align") -> None:
        super().__init__(1)
        self.blocking = blocking
        self.name = name
        self.latest_start = MIN_TIME
        self.output_time = MIN_TIME
        self.last_cti = MIN_TIME
        # held inserts: id -> [start, end, payload, seq]; held retractions
        # of released events: id -> [start, old_end, new_end, seq]. The seq
        # names the element's entry in _by_start, so an element dropped
        # while held (fully retracted, or retracted back where it was) takes
        # its entry with it: an id reused after a full retraction must not
        # find its predecessor's entry still queued under the same id.
        self.inserts: dict[Any, list[Any]] = {}
        self.retractions: dict[Any, list[Any]] = {}
        self._by_start = SortedList()  # (start, seq, id, is_insert)
        self._seq = 0
        # the output CTI waits for held elements, so an id the input's CTI
        # freed may still be live in the output: a later event is renamed
        self.ids = OutputIds()

    def set_state(self, state: dict[str, Any]) -> None:
        """As :meth:`Operator.set_state`; a state saved before held
        elements carried their seq gets it from its latest entry (stale
        entries of ids dropped while held are removed)."""
        super().set_state(state)
        latest: dict[tuple[Any, bool], int] = {}
        for _, seq, ident, insert in self._by_start:
            latest[(ident, insert)] = max(seq, latest.get((ident, insert), seq))
        for insert, kept in ((True, self.inserts), (False, self.retractions)):
            for ident, fields in kept.items():
                if len(fields) == 3:
                    fields.append(latest.get((ident, insert), 0))

        def live(entry: tuple[int, int, Any, bool]) -> bool:
            fields = (self.inserts if entry[3] else self.retractions).get(entry[2])
            return fields is not None and fields[3] == entry[1]

        self._by_start = SortedList(entry for entry in self._by_start if live(entry))

    def _hold(self, ident: Any, start: int, insert: bool) -> int:
        self._seq += 1
        self._by_start.add((start, self._seq, ident, insert))
        return self._seq

    def _drop(self, ident: Any, insert: bool) -> None:
        """Forget a held element that will never be released, with its entry."""
        held = (self.inserts if insert else self.retractions).pop(ident)
        self._by_start.discard((held[0], held[3], ident, insert))

    def on_insert(self, port: int, element: Insert) -> None:
        seq = self._hold(element.id, element.start, True)
        self.inserts[element.id] = [element.start, element.end, element.payload, seq]
        self.latest_start = max(self.latest_start, element.start)
        self._unblock()

    def on_retract(self, port: int, element: Retract) -> None:
        held = self.inserts.get(element.id)
        if held is not None:
            if element.is_full:
                self._drop(element.id, True)  # inserted and deleted: nothing to release
            else:
                held[1] = element.new_end
        else:
            pending = self.retractions.get(element.id)
            if pending is not None:
                pending[2] = element.new_end
                if pending[2] == pending[1]:
                    self._drop(element.id, False)  # back where it was
            else:
                seq = self._hold(element.id, element.start, False)
                self.retractions[element.id] = [
                    element.start,
                    element.old_end,
                    element.new_end,
                    seq,
                ]
        self._unblock()

    def _release(self, ident: Any, insert: bool) -> None:
        if insert:
            s, e, p, _ = self.inserts.pop(ident)
            self.emit(Insert(self.ids.insert(ident, e), s, e, p))
        else:
            s, old, new, _ = self.retractions.pop(ident)
            self.emit(Retract(self.ids.retract(ident, s, new), s, old, new))

    def _unblock(self) -> None:
        if self.blocking >= INFINITY:
            return
        self.output_time = max(self.output_time, self.latest_start - self.blocking)
        held = self._by_start
        while held and held[0][0] <= self.output_time:
            _, _, ident, insert = held.pop(0)
            if ident in (self.inserts if insert else self.retractions):
                self._release(ident, insert)

    def on_cti(self, port: int, time: int) -> None:
        # release what the CTI made final, in sync-time order: an event
        # ending exactly at the CTI may still be extended, so it waits
        final = []
        for _, seq, ident, insert in self._by_start:
            if insert:
                held = self.inserts.get(ident)
                if held is not None and (held[1] < time or time >= INFINITY):
                    final.append((held[0], seq, ident, True))
            else:
                pending = self.retractions.get(ident)
                if pending is not None and (pending[2] < time or time >= INFINITY):
                    final.append((min(pending[1], pending[2]), seq, ident, False))
        for _, _, ident, insert in sorted(final, key=lambda f: (f[0], f[1])):
            self._release(ident, insert)
        self._unblock()
        # the output CTI stays at the first element still held back
        new_cti = time
        for held in self.inserts.values():
            new_cti = min(new_cti, held[0])
        for pending in self.retractions.values():
            new_cti = min(new_cti, pending[1], pending[2])
        self._by_start = SortedList(
            entry
            for entry in self._by_start
            if entry[2] in (self.inserts if entry[3] else self.retractions)
        )
        if new_cti > self.last_cti:
            self.last_cti = new_cti
            self.ids.advance(new_cti)
            self.emit(Cti(new_cti))

    def state_size(self) -> int:
        return len(self.inserts) + len(self.retractions)
