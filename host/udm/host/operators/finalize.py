"""Finalize (CEDR 4.6): ExternalCTIs to in-order CTIs, broken chains repaired.

Finalize controls memory: with a finite ``remember`` it issues CTIs
``remember`` behind the latest sync time seen, so the stateful operators
after it forget, and drops (and counts) what arrives behind those CTIs. It
also turns ExternalCTIs, which may arrive before the elements they count,
into in-order CTIs, and repairs retraction chains that arrive out of order
or before their insert.

udm's retractions name events by id, so the paper's payload-matched
structures become dictionaries by id; the algorithms are otherwise the
paper's, but for two choices where the paper is silent or wrong:

* an ExternalCTI says nothing about the time before its start, so Finalize
  issues a CTI over a completed ExternalCTI only once completed ExternalCTIs
  (or earlier CTIs) cover every time from :data:`ORIGIN` up to it, without a
  gap. The paper's ``CTILifetimes.First()`` check alone would issue a CTI at
  9 after ``[5, 9]`` completes while ``[0, 4]`` has not even arrived.
* a broken retraction (one whose predecessor has not arrived) holds the
  output CTI at its sync time until its chain connects. The paper's
  ``CleanState`` purges broken retractions behind a CTI from an
  ExternalCTI, although the predecessor may still arrive (its own sync time
  can be later): ``7 -> 4`` (sync 4) completing ``4 -> 2`` (sync 2) after
  ``[0, 3]`` completed would change time 2, behind the CTI at 3, and the
  paper would drop ``4 -> 2``, changing the stream's meaning with no memory
  bound asked for. A broken retraction is discarded only once no element
  that could connect it may still arrive (every element ending where it
  begins has a sync time at or before that end), and counted as
  :data:`UNMATCHED` (a retraction of an event that never was, or of a
  lifetime the event never had); a bounded Finalize counts it
  :data:`LATE`, as it cannot tell it from one whose predecessor it
  dropped as late or forgot.

The CTI that Finalize's input has earned (from its CTIs, its completed
ExternalCTIs or ``remember``) is ``input_cti``: what arrives behind it is
late. The CTI it emits, ``last_cti``, is ``input_cti`` held back by broken
chains. A CTI forced by a finite ``remember`` is not held: it drops the
broken retractions behind it as late, as it drops late elements.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict, SortedList

from udm.host.errors import OperatorError
from udm.host.operators.base import Operator
from udm.host.operators.ids import OutputIds
from udm.host.stream import Cti, ExternalCti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["LATE", "ORIGIN", "UNMATCHED", "FinalizeOperator", "repair", "repaired"]

#: where Finalize takes the time ExternalCTIs cover to begin (tick 0, as in
#: the paper's example): its first CTI from ExternalCTIs needs completed
#: ones covering every time from here (or from an earlier start) to its end
ORIGIN = 0

#: the metrics reason of elements a bounded Finalize drops behind its CTIs
LATE = "late for finalize"

#: the metrics reason of broken retractions Finalize discards because no
#: element that could connect them can still arrive
UNMATCHED = "unmatched retraction (finalize)"


class FinalizeOperator(Operator):
    """CEDR's Finalize with ``finalizetime()`` = latest sync time - ``remember``."""

    name = "finalize"
    state_fields = (
        "emitted",
        "last_cti",
        "input_cti",
        "latest_sync",
        "dropped",
        "unmatched",
        "live",
        "links",
        "starts",
        "pending",
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
        self.last_cti = MIN_TIME  # the last CTI emitted
        self.input_cti = MIN_TIME  # the CTI the input earned: behind it is late
        self.latest_sync = MIN_TIME
        self.dropped = 0  # late elements a bounded Finalize dropped
        self.unmatched = 0  # broken retractions no element can connect any more
        self.live: dict[Any, tuple[int, int]] = {}  # released id -> (start, end)
        self.links: dict[Any, dict[int, int]] = {}  # broken chains: id -> {old: new}
        self.starts: dict[Any, int] = {}  # id with links -> its event's start
        # the sync time min(old, new) of every link: the output CTI stays at
        # the first, which the link changes once its chain connects
        self.pending = SortedList()
        self.received = SortedList()  # sync times of elements at or after input_cti
        self.intervals = SortedDict()  # ExternalCti start -> [end, expected, received]
        # every ExternalCti received, by start: a completed one leaves
        # ``intervals`` but a later one must still not overlap it (one per
        # ExternalCTI, far fewer than the elements they count)
        self.seen = SortedDict()
        # what issued input_cti, for the message of an element that arrives behind it
        self.cti_cause = ""
        # completed ExternalCTIs (start -> end) a gap still separates from
        # ``known``: their CTI waits until the time before them is complete
        self.complete = SortedDict()
        # every sync time before this is complete (ExternalCTIs or CTIs)
        self.known = ORIGIN
        # ``known`` when links were last checked for ones nothing can connect
        self._checked = MIN_TIME
        # a bounded Finalize that drops a late retraction keeps the event
        # live in its output; if the input then reuses its id (valid there:
        # the input retracted it), the new event is renamed Reused(id, n)
        self.ids = OutputIds()

    def set_state(self, state: dict[str, Any]) -> None:
        """As :meth:`Operator.set_state`; a state saved before ``seen`` and
        ``cti_cause`` existed gets them empty (earlier ExternalCTIs are then
        not checked for overlap), one saved before ``known`` existed takes
        it from its last CTI (everything up to a CTI from an ExternalCTI's
        end is complete, only what is before a received CTI), and one saved
        before CTIs waited for broken chains has its input's CTI at its
        output's and ``pending`` made from its links (their events' starts
        unknown: such a link is discarded only once its own time is complete)."""
        last = state.get("last_cti", MIN_TIME)
        known = ORIGIN if last == MIN_TIME else last
        if state.get("cti_cause", "") not in ("", "it received") and last != MIN_TIME:
            known = last + 1
        links = state.get("links", {})
        defaults: dict[str, Any] = {
            "seen": SortedDict(),
            "cti_cause": "",
            "complete": SortedDict(),
            "input_cti": last,
            "unmatched": 0,
            "starts": {},
            "pending": SortedList(min(o, n) for chain in links.values() for o, n in chain.items()),
        }
        if "ids" not in state:
            defaults["ids"] = _ids_of(state.get("live", {}), last)
        super().set_state({**defaults, "known": max(known, ORIGIN), **state})
        self._checked = MIN_TIME

    # -------------------------------------------------------------- CTIs

    def _update_cti(self, time: int, cause: str, forced: bool = False) -> None:
        """The input earned a CTI at ``time`` (``forced``: by ``remember``)."""
        if time > self.input_cti:
            self.input_cti = time
            self.cti_cause = cause
            self.known = max(self.known, time)
            # forget what the CTI made final
            del self.received[: self.received.bisect_left(time)]
            while self.intervals and self.intervals.peekitem(0)[1][0] < time:
                self.intervals.popitem(0)
            while self.complete and self.complete.peekitem(0)[1] < time:
                self.complete.popitem(0)
            for ident, (_, end) in list(self.live.items()):
                if end < time:
                    del self.live[ident]
            if forced:  # a bounded memory: broken chains behind it are late
                for ident, links in list(self.links.items()):
                    for old, new in list(links.items()):
                        if min(old, new) < time:
                            self._unlink(ident, old)
                            self.dropped += 1
        self._discard_unmatched()
        self._emit_cti()

    def _emit_cti(self) -> None:
        """Emit ``input_cti``, held back at the earliest sync time of a
        broken retraction (which changes that time once its chain connects)."""
        time = self.input_cti
        if self.pending:
            time = min(time, self.pending[0])
        if time > self.last_cti:
            self.last_cti = time
            self.emit(Cti(time))
            self.ids.advance(time)

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
                forced=True,
            )
            self._advance()
        self._emit_cti()  # an element that connected a chain may free the CTI

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
        if e <= self.input_cti:
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

    # ------------------------------------------------------ broken chains

    def _link(self, ident: Any, start: int, old: int, new: int) -> None:
        """Keep a broken retraction ``old -> new`` of ``ident`` until its
        predecessor (an element ending at ``old``) arrives."""
        links = self.links.setdefault(ident, {})
        if old in links:  # the input retracted the same lifetime twice: the later wins
            self._unlink(ident, old)
            links = self.links.setdefault(ident, {})
        links[old] = new
        self.starts[ident] = start
        self.pending.add(min(old, new))

    def _unlink(self, ident: Any, old: int) -> int:
        """Remove ``ident``'s link from ``old``; its new end."""
        links = self.links[ident]
        new = links.pop(old)
        self.pending.remove(min(old, new))
        if not links:
            del self.links[ident]
            self.starts.pop(ident, None)
        return new

    def _follow(self, ident: Any, end: int) -> int:
        """The end ``end`` becomes once the broken links from it apply."""
        while ident in self.links and end in self.links[ident]:
            end = self._unlink(ident, end)
        return end

    def _discard_unmatched(self) -> None:
        """Discard (and count) broken retractions no element can connect
        any more, once ``known`` has moved since the last look."""
        if not self.links or self.known <= self._checked:
            return
        self._checked = self.known
        for ident in list(self.links):
            self._discard_unmatched_of(ident)

    def _discard_unmatched_of(self, ident: Any) -> None:
        """Every element that could still connect one of ``ident``'s links
        has a sync time at or after ``known``: an insert (sync time its
        start) or a retraction ending at the link's old end (sync time at or
        before that end). So a link is dead if the event is live with an end
        before ``known`` (its next retraction would be late), if it is not
        live and starts before ``known`` (its insert would be late), or if
        no link or end still to come reaches its old end."""
        links = self.links[ident]
        known = self.known
        live = self.live.get(ident)
        start = self.starts.get(ident)
        if (live is not None and live[1] < known) or (
            live is None and start is not None and start < known
        ):
            alive: set[int] = set()
        else:  # reachable from an end an element still to come may end at
            alive = {old for old in links if old >= known}
            todo = list(alive)
            while todo:
                new = links[todo.pop()]
                if new in links and new not in alive:
                    alive.add(new)
                    todo.append(new)
        for old in [o for o in links if o not in alive]:
            self._unlink(ident, old)
            if self.remember < INFINITY:
                self.dropped += 1  # most likely its predecessor was late: it forgot
            else:
                self.unmatched += 1

    # ----------------------------------------------------------- elements

    def _late(self, sync: int, element: Any) -> bool:
        if sync >= self.input_cti:
            return False
        if self.remember < INFINITY:
            self.dropped += 1
            return True
        if self.cti_cause == "it received":
            why = (
                f"it arrives after a CTI at {self.input_cti} in its input (a late element): "
                "elements must not arrive behind a CTI"
            )
        elif sync < ORIGIN:
            why = (
                f"it arrives after the CTI at {self.input_cti} that Finalize issued "
                f"{self.cti_cause}, and its sync time ({sync}) is before time {ORIGIN}, "
                "where Finalize takes ExternalCTIs to begin: an ExternalCTI starting "
                "at or before its sync time must count it"
            )
        else:
            why = (
                f"it arrives after the CTI at {self.input_cti} that Finalize issued "
                f"{self.cti_cause}: an ExternalCTI whose interval holds its sync time "
                f"({sync}) must count it"
            )
        raise OperatorError(self.name, why, element)

    def on_insert(self, port: int, element: Insert) -> None:
        if self._late(element.start, element):
            return
        end = self._follow(element.id, element.end)
        if end > element.start:
            self.live[element.id] = (element.start, end)
            name = self.ids.insert(element.id, end)
            self.emit(Insert(name, element.start, end, element.payload))
        if element.id in self.links:  # links the insert did not reach
            self._discard_unmatched_of(element.id)
        self._receive(element.start)

    def on_retract(self, port: int, element: Retract) -> None:
        if self._late(element.sync_time, element):
            return
        current = self.live.get(element.id)
        if current is not None and current[1] == element.old_end:
            self._apply(element.id, current[0], element.old_end, element.new_end)
        else:
            self._link(element.id, element.start, element.old_end, element.new_end)
            self._discard_unmatched_of(element.id)
        self._receive(element.sync_time)

    def _apply(self, ident: Any, start: int, old: int, new: int) -> None:
        new = self._follow(ident, new)  # later links of the chain that arrived first
        if new == old:
            return
        self.emit(Retract(self.ids.retract(ident, start, new), start, old, new))
        if new == start:
            self.live.pop(ident, None)
        else:
            self.live[ident] = (start, new)

    def state_size(self) -> int:
        return len(self.live) + len(self.pending) + len(self.received)


def _ids_of(live: dict[Any, tuple[int, int]], cti: int) -> OutputIds:
    """The output ids of a Finalize state saved before they were kept: its
    released events still live, under their own ids."""
    ids = OutputIds()
    ids.advance(cti)
    for ident, (_, end) in live.items():
        ids.insert(ident, end)
    return ids


def repair(elements: Any) -> tuple[list[Any], int]:
    """A physical stream with ExternalCTIs as Finalize (remembering
    everything) makes it: retraction chains in order, CTIs in place of the
    ExternalCTIs; and how many broken retractions nothing connected by the
    end of the stream (:data:`UNMATCHED`). Its CHT is the stream's meaning."""
    from udm.host.operators.base import Collector

    finalize = FinalizeOperator(INFINITY)
    sink = Collector()
    finalize.connect(sink)
    last = None
    for element in elements:
        finalize.push(0, element)
        last = element
    if not (isinstance(last, Cti) and last.time >= INFINITY):
        # the end of the stream: what is still broken never connects
        finalize.push(0, Cti(INFINITY))
        if sink.elements and sink.elements[-1] == Cti(INFINITY):
            sink.elements.pop()
    return sink.elements, finalize.unmatched


def repaired(elements: Any) -> list[Any]:
    """The stream :func:`repair` makes."""
    return repair(elements)[0]
