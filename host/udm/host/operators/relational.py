"""Stateless and nearly stateless operators: selection, projection, union.

Selection (CEDR 4.1) passes an insert whose payload satisfies the
predicate; since udm's retractions name events by id rather than carrying
their payload, it remembers which live events passed, and forgets them
once a CTI makes them final. Projection computes the new payload of an
insert and passes retractions as they are (ids and lifetimes unchanged).
Union tags each id with its input port, so ids stay unique, and emits the
least of its inputs' CTIs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from udm.host.operators.base import CtiTracker, Operator, PhysicalElement
from udm.host.operators.ids import OutputIds
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY

__all__ = ["ProjectOperator", "SelectOperator", "UnionOperator"]


class SelectOperator(Operator):
    """``where``: inserts whose payload satisfies ``predicate`` pass, and
    the retractions of the events that passed."""

    name = "where"
    state_fields = ("emitted", "passed", "_by_end", "_seq")

    def __init__(self, predicate: Callable[[Any], Any], name: str = "where") -> None:
        super().__init__(1)
        self.predicate = predicate
        self.name = name
        self.passed: dict[Any, int] = {}  # id -> current end
        self._by_end: list[tuple[int, int, Any]] = []  # (end, seq, id), lazily cleaned
        self._seq = 0

    def on_insert(self, port: int, element: Insert) -> None:
        if self.predicate(element.payload):
            self.passed[element.id] = element.end
            self._seq += 1
            heapq.heappush(self._by_end, (element.end, self._seq, element.id))
            self.emit(element)

    def on_retract(self, port: int, element: Retract) -> None:
        if element.id not in self.passed:
            return
        if element.is_full:
            del self.passed[element.id]
        else:
            self.passed[element.id] = element.new_end
            self._seq += 1
            heapq.heappush(self._by_end, (element.new_end, self._seq, element.id))
        self.emit(element)

    def on_cti(self, port: int, time: int) -> None:
        heap = self._by_end
        while heap and heap[0][0] < time:
            end, _, ident = heapq.heappop(heap)
            if self.passed.get(ident) == end:
                del self.passed[ident]  # final: no retraction can name it any more
        self.emit(Cti(time))

    def state_size(self) -> int:
        return len(self.passed)


class ProjectOperator(Operator):
    """``select``: each insert's payload becomes ``project(payload)``."""

    name = "select"

    def __init__(self, project: Callable[[Mapping[str, Any]], Any]) -> None:
        super().__init__(1)
        self.project = project

    def on_insert(self, port: int, element: Insert) -> None:
        self.emit(Insert(element.id, element.start, element.end, self.project(element.payload)))

    def on_retract(self, port: int, element: Retract) -> None:
        self.emit(element)

    def on_cti(self, port: int, time: int) -> None:
        self.emit(Cti(time))


class UnionOperator(Operator):
    """Bag union of several streams; payload columns an input lacks are null.

    ``columns``: the columns known before running (every input's that is
    known); an input whose columns only its rows show (a window's results
    of undeclared type, a join's ``select``) adds its own as it runs, and
    the engine fills the rest in the output.

    An output id is ``(port, id)``. The output CTI is the least of the
    inputs', so an input may reuse an id (its own CTI passed the earlier
    event's end) that is still live in the output: the later event is
    then named :class:`~udm.host.operators.ids.Reused` ``((port, id), n)``.
    """

    name = "union"
    state_fields = ("emitted", "ctis", "ids")

    def __init__(self, ports: int, columns: Sequence[str] | None = None) -> None:
        super().__init__(ports)
        self.columns = list(columns) if columns is not None else None
        self.ctis = CtiTracker(ports)
        self.ids = OutputIds()

    def on_insert(self, port: int, element: Insert) -> None:
        payload = element.payload
        if self.columns is not None and isinstance(payload, Mapping):
            # the columns known before running first (null where this input
            # lacks them), then any others this payload has
            padded = dict.fromkeys(self.columns)
            padded.update(payload)
            payload = padded
        name = self.ids.insert((port, element.id), element.end)
        self.emit(Insert(name, element.start, element.end, payload))

    def on_retract(self, port: int, element: Retract) -> None:
        name = self.ids.retract((port, element.id), element.start, element.new_end)
        self.emit(Retract(name, element.start, element.old_end, element.new_end))

    def on_cti(self, port: int, time: int) -> None:
        low = self.ctis.advance(port, time, self.emit)
        if low is not None:
            self.ids.advance(low)

    def attach(self) -> int:
        port = super().attach()
        self.ctis.latest.append(self.ctis.output)
        return port


def final_cti(element: PhysicalElement) -> bool:
    """Whether ``element`` ends a stream (a CTI at the end of time)."""
    return isinstance(element, Cti) and element.time >= INFINITY
