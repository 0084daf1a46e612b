"""Where a source's elements enter the host engine's graph of operators:
its validator (the source's CTI policy applied before the graph), the
entry point every reader of the source connects to, and the shaping of a
physical stream's elements (payloads as columns, a CTI at the end of time).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from udm.host import plan as logical
from udm.host.operators.base import Operator, PhysicalElement
from udm.host.plan import SCALAR_COL
from udm.host.stream import Cti, Insert
from udm.host.time import INFINITY
from udm.host.validation import CtiPolicy, StreamValidator

__all__ = ["PassOperator", "ValidateOperator", "element_columns", "ending", "wrapped_payloads"]


class ValidateOperator(Operator):
    """A source's validator: its CTI policy applied before the graph. It
    forgets the events CTIs have passed (:meth:`StreamValidator.prune`,
    amortized, after each element), so a long-running graph's state is
    bounded by the data between CTIs, not by the stream's length."""

    name = "source"
    state_fields = ("emitted", "validator")

    def __init__(self, policy: str) -> None:
        super().__init__(1)
        self.validator = StreamValidator(cti_policy=CtiPolicy.parse(policy))

    def push(self, port: int, element: PhysicalElement) -> None:
        validator = self.validator
        checked = validator.check(element)  # type: ignore[arg-type]
        validator.prune()  # amortized: a length test but when the live set doubled
        if checked is not None:
            self.emit(checked)

    def push_batch(self, port: int, elements: Sequence[PhysicalElement]) -> None:
        check = self.validator.check
        checked = [c for c in map(check, elements) if c is not None]  # type: ignore[arg-type]
        self.validator.prune()
        if checked:
            self.emit_batch(checked)

    def get_state(self) -> dict[str, Any]:
        """The state, the validator pruned first (``force``): a snapshot
        holds only the events a retraction can still reach."""
        self.validator.prune(force=True)
        return super().get_state()

    def state_size(self) -> int:
        """The live events the validator remembers (pruned at CTIs)."""
        return len(self.validator.live)


class PassOperator(Operator):
    """Where a source's elements enter the graph."""

    name = "source"

    def push(self, port: int, element: PhysicalElement) -> None:
        self.emit(element)

    def push_batch(self, port: int, elements: Sequence[PhysicalElement]) -> None:
        self.emit_batch(elements)


def wrapped_payloads(elements: Sequence[Any], scalar: bool) -> Iterator[Any]:
    """A physical stream's elements with payloads as the graph reads them:
    a dict with string column names, a plain value as the scalar column."""
    for el in elements:
        if type(el) is Insert:
            payload = el.payload
            if scalar or not isinstance(payload, Mapping):
                payload = {SCALAR_COL: payload}
            else:
                payload = {str(k): v for k, v in payload.items()}
            yield Insert(el.id, el.start, el.end, payload)
        else:
            yield el


def element_columns(node: logical.Source) -> list[str]:
    """The payload columns of a physical stream's inserts (a union fills
    the ones an input lacks with nulls)."""
    assert node.elements is not None
    columns: dict[str, None] = {}
    for el in node.elements:
        if type(el) is not Insert:
            continue
        if node.scalar or not isinstance(el.payload, Mapping):
            return [SCALAR_COL]
        columns.update(dict.fromkeys(str(k) for k in el.payload))
    return list(columns)


def ending(elements: Iterator[Any] | Any) -> Iterator[Any]:
    """The elements, then a CTI at the end of time (unless they end with one)."""
    last = None
    for el in elements:
        last = el
        yield el
    if not (type(last) is Cti and last.time >= INFINITY):
        yield Cti(INFINITY)
