"""AlterLifetime (CEDR 4.2): events mapped into a new lifetime.

The new start is ``f_s(start)`` and the new end ``f_s(start) + f_d(start,
end)``. An insert maps directly; a retraction maps the old and the new end
through the same functions, so a full retraction stays a full retraction
(even where the duration is a constant and would otherwise hide it), and a
retraction that leaves the new lifetime unchanged emits nothing. A CTI at
``t`` becomes a CTI at ``f_s(t)`` when that moves the output clock forward.

The paper's constraints are checked as elements pass, and a violation is
an :class:`~udm.host.errors.OperatorError` that leaves the operator as it
was: ``f_s`` must not decrease (checked against the latest CTI and the
latest start seen) and ``f_d`` must move with the end (a shrinking end
must not lengthen the duration, a growing one not shorten it).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from sortedcontainers import SortedDict

from udm.host.algebra import check_duration, mapped_start, new_lifetime
from udm.host.errors import OperatorError
from udm.host.operators.base import Operator
from udm.host.operators.ids import OutputIds
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["AlterLifetimeOperator"]


class AlterLifetimeOperator(Operator):
    """See the module docstring.

    Two things the paper leaves implicit are kept here: every start seen
    since the latest CTI with its mapping (so a start function that is not
    monotone is caught whatever the arrival order: each new start is
    checked against its neighbours), and the live events whose output end a
    retraction could still shorten (so the output CTI never passes an end
    a later retraction may set: with ``start = 2 * s``, an event ``[3, 10)``
    maps to ``[6, 13)``, and after a CTI at 8 its end can still move to 9,
    mapping to 12, below the CTI's own mapping 16).
    """

    name = "alter_lifetime"
    state_fields = ("emitted", "last_cti", "cti_mapped", "starts", "live", "ends", "seq", "ids")

    def __init__(
        self,
        start: Callable[[int], int] | None,
        duration: Callable[[int, int], int] | None,
        name: str = "alter_lifetime",
        holds_ends: bool = True,
    ) -> None:
        super().__init__(1)
        self.start_fn = start
        self.duration_fn = duration
        self.name = name
        # shift and constant durations can never end an output before the
        # CTI's mapping, so they need not track live events
        self.holds_ends = holds_ends
        self.last_cti = MIN_TIME
        self.cti_mapped = MIN_TIME
        self.starts = SortedDict()  # start -> its mapping, since the latest CTI
        self.live: dict[Any, tuple[int, int]] = {}  # id -> (start, end)
        # (end, arrival, id), for cleanup: the arrival number breaks ties of
        # ends, so ids (a str and a Reused, say) are never compared
        self.ends: list[tuple[int, int, Any]] = []
        self.seq = 0
        # a longer lifetime can keep an event live in the output after the
        # input's CTI freed its id for reuse: the later event is renamed
        self.ids = OutputIds()

    def _start(self, start: int, element: object) -> int:
        mapped = mapped_start(start, self.start_fn, self.name, element)
        if self.start_fn is not None:
            self._check_monotone(start, mapped, element)
        return mapped

    def _check_monotone(self, start: int, mapped: int, element: object) -> None:
        """Refuse a start mapped below an earlier start's mapping, or above
        a later one's (the starts kept since the latest CTI)."""
        starts = self.starts
        at = starts.bisect_left(start)
        before = starts.peekitem(at - 1) if at > 0 else None
        after = starts.peekitem(at) if at < len(starts) else None
        if after is not None and after[0] == start:
            after = starts.peekitem(at + 1) if at + 1 < len(starts) else None
        for neighbour, later in ((before, True), (after, False)):
            if neighbour is None:
                continue
            other, other_mapped = neighbour
            if (later and mapped < other_mapped) or (not later and mapped > other_mapped):
                first, second = ((other, other_mapped), (start, mapped))[:: 1 if later else -1]
                raise OperatorError(
                    self.name,
                    f"the start function is not monotone: start {first[0]} maps to "
                    f"{first[1]} but the later start {second[0]} maps to {second[1]}",
                    element,
                )

    def _remember(self, start: int, mapped: int) -> None:
        if self.start_fn is not None:
            self.starts[start] = mapped

    def _map(self, start: int, end: int, element: object) -> tuple[int, int]:
        self._start(start, element)
        return new_lifetime(start, end, self.start_fn, self.duration_fn, self.name, element)

    def on_insert(self, port: int, element: Insert) -> None:
        s, e = self._map(element.start, element.end, element)
        check_duration(element.start, element.end, self.duration_fn, self.name, element)
        self._remember(element.start, s)
        if self.holds_ends:
            self.live[element.id] = (element.start, element.end)
            self.seq += 1
            heapq.heappush(self.ends, (element.end, self.seq, element.id))
        self.emit(Insert(self.ids.insert(element.id, e), s, e, element.payload))

    def on_retract(self, port: int, element: Retract) -> None:
        s, old_end = self._map(element.start, element.old_end, element)
        if element.is_full:
            self.live.pop(element.id, None)
            self.emit(Retract(self.ids.retract(element.id, s, s), s, old_end, s))
            return
        _, new_end = self._map(element.start, element.new_end, element)
        shrinking = element.new_end < element.old_end
        if (shrinking and new_end > old_end) or (not shrinking and new_end < old_end):
            raise OperatorError(
                self.name,
                f"the duration moves against the end: the end going from {element.old_end} "
                f"to {element.new_end} takes the new end from {old_end} to {new_end}; a "
                "duration must not grow when an end shrinks",
                element,
            )
        if self.holds_ends and element.id in self.live:
            self.live[element.id] = (element.start, element.new_end)
            self.seq += 1
            heapq.heappush(self.ends, (element.new_end, self.seq, element.id))
        if new_end != old_end:
            self.emit(Retract(self.ids.retract(element.id, s, new_end), s, old_end, new_end))

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back a saved state; one saved before ties of ends were
        broken by arrival (``(end, id)`` pairs, no ``seq``) is numbered in
        its heap order, which keeps it a heap."""
        if "seq" not in state:
            ends = [(end, n, ident) for n, (end, ident) in enumerate(state["ends"])]
            state = {**state, "ends": ends, "seq": len(ends)}
        super().set_state(state)

    def _held(self, time: int) -> int:
        """The least output end a retraction after a CTI at ``time`` could
        still touch, over the live events (``INFINITY`` if none): a live
        event's end may move to any time from the CTI on (shrink or
        extend), and its output end with it, unless the duration does not
        depend on the end there (a ``clip_to`` long reached, say)."""
        low = INFINITY
        for start, _ in self.live.values():
            shortest = max(time, start + 1)
            _, e_min = new_lifetime(start, shortest, self.start_fn, self.duration_fn, self.name)
            _, e_max = new_lifetime(start, INFINITY, self.start_fn, self.duration_fn, self.name)
            if e_min != e_max:
                low = min(low, e_min)
        return low

    def _cti_start(self, time: int) -> tuple[int, int]:
        """The CTI's mapping: a CTI the start function maps past the end of
        time becomes the end of time (exact: any later element would map
        there too, and be refused), and one it maps before the beginning of
        time (``shift(-5)`` of ``Cti(MIN_TIME)``) becomes the beginning of
        time, the latest CTI there is that is not past the mapping (a later
        element mapped below it is refused as outside the time range),
        instead of failing the stream. Also the mapping itself, which later
        starts are checked against for monotony (a second CTI before the
        beginning of time maps below ``MIN_TIME`` too, not below the first)."""
        if self.start_fn is not None:
            raw = self.start_fn(time)
            if isinstance(raw, int) and not isinstance(raw, bool):
                if raw >= INFINITY:
                    return INFINITY, raw
                if raw < MIN_TIME:
                    self._check_monotone(time, raw, Cti(time))
                    return MIN_TIME, raw
        mapped = self._start(time, Cti(time))
        return mapped, mapped

    def on_cti(self, port: int, time: int) -> None:
        mapped, checked = (INFINITY, INFINITY) if time >= INFINITY else self._cti_start(time)
        self.last_cti = time
        # forget what the CTI made final: starts before it (but the last of
        # them, which still bounds later ones), events ending before it
        starts = self.starts
        cut = starts.bisect_left(time)
        for _ in range(max(0, cut - 1)):
            starts.popitem(0)
        if time < INFINITY:
            self._remember(time, checked)
        while self.ends and self.ends[0][0] < time:
            end, _, ident = heapq.heappop(self.ends)
            if self.live.get(ident, (0, None))[1] == end:
                del self.live[ident]
        if self.holds_ends and time < INFINITY:
            mapped = min(mapped, self._held(time))
        if mapped > self.cti_mapped:
            self.cti_mapped = mapped
            self.ids.advance(mapped)
            self.emit(Cti(mapped))
