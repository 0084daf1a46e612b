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
from udm.host.rows import returns_is_struct
from udm.host.stream import Cti, ExternalCti, Insert
from udm.host.time import INFINITY
from udm.host.validation import CtiPolicy, StreamValidator

__all__ = [
    "PassOperator",
    "ValidateOperator",
    "element_columns",
    "ending",
    "raw_source",
    "read_by_rows",
    "rows_name_columns",
    "source_readers",
    "wrapped_payloads",
]


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


def raw_source(node: logical.PlanNode) -> logical.Source | None:
    """The ``from_events`` source with ExternalCTIs whose raw elements the
    Finalize ``node`` reads (through group keys, which commute with it), as
    the reference engine reads them: a bounded ``remember`` drops what
    arrives after its own forced CTIs, which only the raw arrival order
    decides. None for any other node (a Finalize that remembers everything
    gives the same CHT over the repaired stream, which every other reader
    of the source gets)."""
    if not isinstance(node, logical.FinalizeNode) or node.remember >= INFINITY:
        return None
    source = node.input
    while isinstance(source, logical.GroupNode):
        source = source.input
    if not isinstance(source, logical.Source) or source.elements is None:
        return None
    if not any(isinstance(e, ExternalCti) for e in source.elements):
        return None  # validated under its cti_policy first, as without a Finalize
    return source


def source_readers(plan: logical.PlanNode) -> tuple[set[int], set[int]]:
    """The ids of the sources some Finalize reads raw (:func:`raw_source`),
    and of the sources some other path reaches: those get the source's own
    repair. A source can be in both (``s.finalize(remember=...).union(s)``):
    then each reader gets its own stream, since the Finalize's reading of
    the raw stream must not leave the other branch unrepaired."""
    raw: set[int] = set()
    repaired: set[int] = set()
    seen: set[int] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        source = raw_source(node)
        if source is not None:
            raw.add(id(source))
            continue  # its groups and source are read raw by it, not repaired
        if isinstance(node, logical.Source):
            repaired.add(id(node))
        stack.extend(node.inputs)
    return raw, repaired


def rows_name_columns(node: logical.PlanNode) -> bool:
    """Whether ``node``'s columns are known only from its rows: a join's
    ``select=``, a window's undeclared results (``returns=`` not scalar),
    an operator the host does not know; the nodes that keep their input's
    columns, a union and a join without ``select=`` as their inputs."""
    kept = logical.columns_kept_from(node)
    if kept is not None:
        return rows_name_columns(kept)
    if isinstance(node, logical.Source | logical.SelectNode):
        return False
    if isinstance(node, logical.WindowOp):
        return not all(returns_is_struct(c.returns) is False for c in node.calls)
    if isinstance(node, logical.JoinNode) and node.select is None:
        return rows_name_columns(node.left) or rows_name_columns(node.right)
    if isinstance(node, logical.UnionNode):
        return any(rows_name_columns(p) for p in node.parts)
    return True


def read_by_rows(plan: logical.PlanNode) -> bool:
    """Whether some node of ``plan`` reads rows that may lack columns their
    stream has: a join's ``select=`` (a pair's dict names its own), or a
    union with a part whose columns only its rows show
    (:func:`rows_name_columns`; it fills only the columns it knows). The
    reference engine's tables have every column in every row (null where a
    row lacks one); a join reading such rows would suffix a name in one row
    and not in another. A union or a select at the root is filled in the
    output, and a window's rows all have its result columns: no run needed."""
    return any(
        (isinstance(child, logical.JoinNode) and child.select is not None)
        or (isinstance(child, logical.UnionNode) and any(rows_name_columns(p) for p in child.parts))
        for node in logical.walk(plan)
        for child in node.inputs
    )
