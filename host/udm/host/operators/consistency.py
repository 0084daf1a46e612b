"""Align and Finalize (CEDR 4.5, 4.6): the two operators that set consistency.

Neither computes anything; together they place a query in CEDR's triangle
of consistency levels. **Align** controls blocking: it holds elements back
until they are ``blocking`` behind the latest start seen (application
time), or until a CTI makes them final, and merges a retraction into the
held element it changes, so what it releases carries fewer corrections.
With ``blocking`` at the end of time it releases only final events and
its output never retracts. **Finalize** controls memory: with a finite
``remember`` it issues CTIs ``remember`` behind the latest sync time seen,
so the stateful operators after it forget, and drops (and counts) what
arrives behind those CTIs. It also turns ExternalCTIs, which may arrive
before the elements they count, into in-order CTIs, and repairs retraction
chains that arrive out of order or before their insert.

udm's retractions name events by id, so the paper's payload-matched
structures become dictionaries by id; the algorithms are otherwise the
paper's, but for one choice where the paper is silent: an ExternalCTI
says nothing about the time before its start, so Finalize issues a CTI
over a completed ExternalCTI only once completed ExternalCTIs (or earlier
CTIs) cover every time from :data:`ORIGIN` up to it, without a gap.
The paper's ``CTILifetimes.First()`` check alone would issue a CTI at 9
after ``[5, 9]`` completes while ``[0, 4]`` has not even arrived.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict, SortedList

from udm.host.errors import OperatorError
from udm.host.operators.base import Operator
from udm.host.operators.ids import OutputIds
from udm.host.stream import Cti, ExternalCti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["ORIGIN", "AlignOperator", "FinalizeOperator", "repaired"]

#: where Finalize takes the time ExternalCTIs cover to begin (tick 0, as in
#: the paper's example): its first CTI from ExternalCTIs needs completed
#: ones covering every time from here (or from an earlier start) to its end
ORIGIN = 0


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


class FinalizeOperator(Operator):
    """CEDR's Finalize with ``finalizetime()`` = latest sync time - ``remember``."""

    name = "finalize"
    state_fields = (
        "emitted",
        "last_cti",
        "latest_sync",
        "dropped",
        "live",
        "links",
        "received",
        "intervals",
        "seen",
        "cti_cause",
        "complete",
        "known",
        "ids",
    )

    def __init__(self, remember: int, name: str = "finalize") -> None:
        super().__init__(1)
        self.remember = remember
        self.name = name
        self.last_cti = MIN_TIME
        self.latest_sync = MIN_TIME
        self.dropped = 0
        self.live: dict[Any, tuple[int, int]] = {}  # released id -> (start, end)
        self.links: dict[Any, dict[int, int]] = {}  # broken chains: id -> {old: new}
        self.received = SortedList()  # sync times of elements at or after last_cti
        self.intervals = SortedDict()  # ExternalCti start -> [end, expected, received]
        # every ExternalCti received, by start: a completed one leaves
        # ``intervals`` but a later one must still not overlap it (one per
        # ExternalCTI, far fewer than the elements they count)
        self.seen = SortedDict()
        # what issued last_cti, for the message of an element that arrives behind it
        self.cti_cause = ""
        # completed ExternalCTIs (start -> end) a gap still separates from
        # ``known``: their CTI waits until the time before them is complete
        self.complete = SortedDict()
        # every sync time before this is complete (ExternalCTIs or CTIs)
        self.known = ORIGIN
        # a bounded Finalize that drops a late retraction keeps the event
        # live in its output; if the input then reuses its id (valid there:
        # the input retracted it), the new event is renamed Reused(id, n)
        self.ids = OutputIds()

    def set_state(self, state: dict[str, Any]) -> None:
        """As :meth:`Operator.set_state`; a state saved before ``seen`` and
        ``cti_cause`` existed gets them empty (earlier ExternalCTIs are then
        not checked for overlap), one saved before ``known`` existed takes
        it from its last CTI (everything up to a CTI from an ExternalCTI's
        end is complete, only what is before a received CTI)."""
        last = state.get("last_cti", MIN_TIME)
        known = ORIGIN if last == MIN_TIME else last
        if state.get("cti_cause", "") not in ("", "it received") and last != MIN_TIME:
            known = last + 1
        defaults: dict[str, Any] = {"seen": SortedDict(), "cti_cause": "", "complete": SortedDict()}
        if "ids" not in state:
            defaults["ids"] = _ids_of(state.get("live", {}), last)
        super().set_state({**defaults, "known": max(known, ORIGIN), **state})

    # -------------------------------------------------------------- CTIs

    def _update_cti(self, time: int, cause: str) -> None:
        if time <= self.last_cti:
            return
        self.last_cti = time
        self.cti_cause = cause
        self.known = max(self.known, time)
        self.emit(Cti(time))
        self.ids.advance(time)
        # forget what the CTI made final
        del self.received[: self.received.bisect_left(time)]
        while self.intervals and self.intervals.peekitem(0)[1][0] < time:
            self.intervals.popitem(0)
        while self.complete and self.complete.peekitem(0)[1] < time:
            self.complete.popitem(0)
        for ident, (_, end) in list(self.live.items()):
            if end < time:
                del self.live[ident]
        for ident, links in list(self.links.items()):
            for old, new in list(links.items()):
                if min(old, new) < time:
                    del links[old]
                    self.dropped += 1
            if not links:
                del self.links[ident]

    def _check_interval(self, start: int) -> None:
        """Move the ExternalCTI at ``start`` to ``complete`` once all it
        counted arrived, and issue the CTIs that completes."""
        end, expected, got = self.intervals[start]
        if got < expected:
            return
        del self.intervals[start]
        self.complete[start] = end
        self._advance()

    def _advance(self) -> None:
        """A CTI at the end of each completed ExternalCTI that no gap
        separates from ``known`` (the paper is silent on gaps: a CTI over
        time no ExternalCTI covers yet would turn away its elements)."""
        start = None
        while self.complete and self.complete.peekitem(0)[0] <= self.known:
            start, end = self.complete.popitem(0)
            self.known = max(self.known, end + 1)
        if start is not None:  # one CTI, at the end of the last one it covers
            done = self.seen.get(start)
            self._update_cti(
                end,
                f"once every element {done!r} counted had arrived"
                if done is not None
                else "from its ExternalCTIs",
            )

    def _count(self, sync: int) -> None:
        """Count an element in the ExternalCTI holding its sync time, if any
        (one already complete, waiting for the time before it, has no room)."""
        at = self.intervals.bisect_right(sync) - 1
        if at >= 0 and sync <= self.intervals.peekitem(at)[1][0]:
            start, entry = self.intervals.peekitem(at)
            entry[2] += 1
            end, expected, got = entry
        else:
            at = self.complete.bisect_right(sync) - 1
            if at < 0 or sync > self.complete.peekitem(at)[1]:
                return
            start, end = self.complete.peekitem(at)
            expected = self.seen[start].count
            got = expected + 1
        if got > expected:
            raise OperatorError(
                self.name,
                f"more elements arrived with sync times in [{start}, {end}] than "
                f"its ExternalCti counted ({expected})",
            )
        self._check_interval(start)

    def _receive(self, sync: int) -> None:
        self.received.add(sync)
        self.latest_sync = max(self.latest_sync, sync)
        self._count(sync)
        if self.remember < INFINITY:
            self._update_cti(
                self.latest_sync - self.remember,
                f"{self.remember} behind the latest sync time {self.latest_sync} (remember=)",
            )
            self._advance()

    def on_external_cti(self, port: int, element: ExternalCti) -> None:
        s, e = element.start, element.end
        seen = self.seen
        at = seen.bisect_right(s) - 1
        other = seen.peekitem(at)[1] if at >= 0 and seen.peekitem(at)[1].end >= s else None
        nxt = seen.bisect_right(s)
        if other is None and nxt < len(seen) and seen.peekitem(nxt)[0] <= e:
            other = seen.peekitem(nxt)[1]
        if other is not None:
            raise OperatorError(
                self.name,
                f"ExternalCTIs must not overlap: it overlaps the earlier {other!r}",
                element,
            )
        seen[s] = element
        if e <= self.last_cti:
            return  # about time already final
        got = self.received.bisect_right(e) - self.received.bisect_left(s)
        if got > element.count:
            raise OperatorError(
                self.name,
                f"its count {element.count} is below the {got} elements already received with "
                f"sync times in [{s}, {e}]",
                element,
            )
        self.intervals[s] = [e, element.count, got]
        self._check_interval(s)

    def on_cti(self, port: int, time: int) -> None:
        self._update_cti(time, "it received")
        self._advance()

    # ----------------------------------------------------------- elements

    def _late(self, sync: int, element: Any) -> bool:
        if sync >= self.last_cti:
            return False
        if self.remember < INFINITY:
            self.dropped += 1
            return True
        if self.cti_cause == "it received":
            why = (
                f"it arrives after a CTI at {self.last_cti} in its input (a late element): "
                "elements must not arrive behind a CTI"
            )
        elif sync < ORIGIN:
            why = (
                f"it arrives after the CTI at {self.last_cti} that Finalize issued "
                f"{self.cti_cause}, and its sync time ({sync}) is before time {ORIGIN}, "
                "where Finalize takes ExternalCTIs to begin: an ExternalCTI starting "
                "at or before its sync time must count it"
            )
        else:
            why = (
                f"it arrives after the CTI at {self.last_cti} that Finalize issued "
                f"{self.cti_cause}: an ExternalCTI whose interval holds its sync time "
                f"({sync}) must count it"
            )
        raise OperatorError(self.name, why, element)

    def on_insert(self, port: int, element: Insert) -> None:
        if self._late(element.start, element):
            return
        end = element.end
        links = self.links.get(element.id)
        if links:
            while end in links:
                end = links.pop(end)
            if not links:
                del self.links[element.id]
        if end > element.start:
            self.live[element.id] = (element.start, end)
            name = self.ids.insert(element.id, end)
            self.emit(Insert(name, element.start, end, element.payload))
        self._receive(element.start)

    def on_retract(self, port: int, element: Retract) -> None:
        if self._late(element.sync_time, element):
            return
        current = self.live.get(element.id)
        if current is not None and current[1] == element.old_end:
            self._apply(element.id, current[0], element.old_end, element.new_end)
        else:
            self.links.setdefault(element.id, {})[element.old_end] = element.new_end
        self._receive(element.sync_time)

    def _apply(self, ident: Any, start: int, old: int, new: int) -> None:
        links = self.links.get(ident)
        if links:  # later links of the chain that arrived first
            while new in links:
                new = links.pop(new)
            if not links:
                del self.links[ident]
        if new == old:
            return
        self.emit(Retract(self.ids.retract(ident, start, new), start, old, new))
        if new == start:
            self.live.pop(ident, None)
        else:
            self.live[ident] = (start, new)

    def state_size(self) -> int:
        return len(self.live) + sum(len(v) for v in self.links.values()) + len(self.received)


def _ids_of(live: dict[Any, tuple[int, int]], cti: int) -> OutputIds:
    """The output ids of a Finalize state saved before they were kept: its
    released events still live, under their own ids."""
    ids = OutputIds()
    ids.advance(cti)
    for ident, (_, end) in live.items():
        ids.insert(ident, end)
    return ids


def repaired(elements: Any) -> list[Any]:
    """A physical stream with ExternalCTIs as Finalize (remembering
    everything) makes it: retraction chains in order, CTIs in place of
    the ExternalCTIs. Its CHT is the stream's meaning."""
    from udm.host.operators.base import Collector

    finalize = FinalizeOperator(INFINITY)
    sink = Collector()
    finalize.connect(sink)
    for element in elements:
        finalize.push(0, element)
    return sink.elements
