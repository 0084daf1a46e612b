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

from collections.abc import Callable

from udm.host.algebra import new_lifetime
from udm.host.errors import OperatorError
from udm.host.operators.base import Operator
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["AlterLifetimeOperator"]


class AlterLifetimeOperator(Operator):
    """See the module docstring."""

    name = "alter_lifetime"
    state_fields = ("emitted", "last_cti", "cti_mapped", "max_start", "max_mapped")

    def __init__(
        self,
        start: Callable[[int], int] | None,
        duration: Callable[[int, int], int] | None,
        name: str = "alter_lifetime",
    ) -> None:
        super().__init__(1)
        self.start_fn = start
        self.duration_fn = duration
        self.name = name
        self.last_cti = MIN_TIME
        self.cti_mapped = MIN_TIME
        self.max_start = MIN_TIME
        self.max_mapped = MIN_TIME

    def _start(self, start: int, element: object) -> int:
        mapped = start if self.start_fn is None else int(self.start_fn(start))
        if self.start_fn is None:
            return mapped
        if start >= self.last_cti and mapped < self.cti_mapped:
            raise OperatorError(
                self.name,
                f"the start function is not monotone: CTI {self.last_cti} maps to "
                f"{self.cti_mapped} but the later start {start} maps to {mapped}",
                element,
            )
        if start > self.max_start and mapped < self.max_mapped:
            raise OperatorError(
                self.name,
                f"the start function is not monotone: start {self.max_start} maps to "
                f"{self.max_mapped} but the later start {start} maps to {mapped}",
                element,
            )
        return mapped

    def _map(self, start: int, end: int, element: object) -> tuple[int, int]:
        self._start(start, element)
        return new_lifetime(start, end, self.start_fn, self.duration_fn, self.name, element)

    def on_insert(self, port: int, element: Insert) -> None:
        s, e = self._map(element.start, element.end, element)
        if element.start > self.max_start:
            self.max_start, self.max_mapped = element.start, s
        self.emit(Insert(element.id, s, e, element.payload))

    def on_retract(self, port: int, element: Retract) -> None:
        s, old_end = self._map(element.start, element.old_end, element)
        if element.is_full:
            self.emit(Retract(element.id, s, old_end, s))
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
        if new_end != old_end:
            self.emit(Retract(element.id, s, old_end, new_end))

    def on_cti(self, port: int, time: int) -> None:
        mapped = INFINITY if time >= INFINITY else self._start(time, Cti(time))
        self.last_cti = time
        if mapped > self.cti_mapped:
            self.cti_mapped = mapped
            self.emit(Cti(mapped))
