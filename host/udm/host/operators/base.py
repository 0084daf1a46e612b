"""Physical operators: the nodes of the incremental, push-based operator graph.

A physical operator consumes physical streams (inserts, retractions, CTIs)
on numbered input ports and produces one physical stream, which it pushes
to every operator connected to its output (a multicast when there are
several). Each operator implements the CEDR paper's algorithm for its
logical operator: its output stream's CHT is the logical operator applied
to its inputs' CHTs, whatever the arrival order, and it frees state at
CTIs once no later element can need it.

The graph is built for what comes next as well:

* ports are numbered and may be added or removed while the graph runs
  (:meth:`Operator.attach` / :meth:`Operator.detach`), as LMerge's inputs
  attach and detach;
* :meth:`Operator.feedback` travels upstream, against the data, so that a
  consumer can tell its producers that time before ``t`` no longer
  matters (LMerge's fast-forward signal); by default an operator passes it
  on to its inputs;
* elements are pushed by direct calls, which suits acyclic plans; a cyclic
  plan (FFP's loops) closes its loop with a queued edge, so a loop never
  recurses.

Element ids: every operator emits ids unique within its output stream;
operators that combine streams derive them from their inputs' (a join's
output is ``(left id, right id)``, a union's ``(port, id)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from udm.host.errors import OperatorError
from udm.host.stream import Cti, Element, ExternalCti, Insert, Retract
from udm.host.time import MIN_TIME

__all__ = ["Collector", "Operator", "PhysicalElement"]

#: What flows on an edge of the graph.
PhysicalElement = Element | ExternalCti


class Operator:
    """Base of every physical operator.

    Subclasses implement :meth:`on_insert`, :meth:`on_retract` and
    :meth:`on_cti` for their input ports, and call :meth:`emit` with their
    output. ``name`` is how errors and ``explain`` name the operator.
    """

    name = "operator"
    #: the attributes holding the operator's state: what :meth:`get_state`
    #: saves and :meth:`set_state` puts back (wiring and functions are the
    #: query's, rebuilt by compiling it again)
    state_fields: tuple[str, ...] = ("emitted",)

    def __init__(self, inputs: int = 1) -> None:
        self.ports = inputs
        self.downstream: list[tuple[Operator, int]] = []
        self.upstream: dict[int, Operator] = {}
        self.emitted = 0

    # ------------------------------------------------------------- wiring

    def connect(self, consumer: Operator, port: int = 0) -> None:
        """Push this operator's output into ``consumer``'s input ``port``."""
        if not 0 <= port < consumer.ports:
            raise ValueError(f"{consumer.name} has no input port {port}")
        self.downstream.append((consumer, port))
        consumer.upstream[port] = self

    def attach(self) -> int:
        """Add an input port; returns its number (LMerge-style operators)."""
        self.ports += 1
        return self.ports - 1

    def detach(self, port: int) -> None:
        """Stop reading ``port``: its producer no longer feeds this operator."""
        producer = self.upstream.pop(port, None)
        if producer is not None:
            producer.downstream = [(c, p) for c, p in producer.downstream if (c, p) != (self, port)]

    def feedback(self, time: int) -> None:
        """Time before ``time`` no longer matters downstream: pass it on to
        the producers (an operator that can skip work overrides this)."""
        for producer in self.upstream.values():
            producer.feedback(time)

    # ------------------------------------------------------------ flowing

    def emit(self, element: PhysicalElement) -> None:
        """Push one output element to every consumer."""
        self.emitted += 1
        for consumer, port in self.downstream:
            consumer.push(port, element)

    def emit_batch(self, elements: Sequence[PhysicalElement]) -> None:
        """Push a run of output elements (e.g. an
        :class:`~udm.host.operators.batch.InsertBatch`) to every consumer,
        which takes it whole (:meth:`push_batch`)."""
        self.emitted += len(elements)
        for consumer, port in self.downstream:
            consumer.push_batch(port, elements)

    def push_batch(self, port: int, elements: Sequence[PhysicalElement]) -> None:
        """Consume a run of elements arriving on ``port``: by default one by
        one; an operator with a vectorized algorithm overrides this (its
        output must mean what pushing them one by one would)."""
        push = self.push
        for element in elements:
            push(port, element)

    def push(self, port: int, element: PhysicalElement) -> None:
        """Consume one element arriving on ``port``."""
        kind = type(element)
        if kind is Insert:
            self.on_insert(port, element)  # type: ignore[arg-type]
        elif kind is Retract:
            self.on_retract(port, element)  # type: ignore[arg-type]
        elif kind is Cti:
            self.on_cti(port, element.time)  # type: ignore[union-attr]
        elif kind is ExternalCti:
            self.on_external_cti(port, element)  # type: ignore[arg-type]
        else:
            raise OperatorError(self.name, f"not a stream element: {element!r}")

    def on_insert(self, port: int, element: Insert) -> None:
        """Consume an insert arriving on ``port``; every operator says what an insert does to its
        state and output (:meth:`push` dispatches here)."""
        raise NotImplementedError

    def on_retract(self, port: int, element: Retract) -> None:
        """Consume a retraction (a shortened or removed lifetime) arriving on ``port``: speculative
        output computed from the old lifetime must be corrected."""
        raise NotImplementedError

    def on_cti(self, port: int, time: int) -> None:
        """Consume a CTI at ``time`` on ``port``: nothing earlier changes on that input any more,
        so state before it may be finalized and dropped."""
        raise NotImplementedError

    def on_external_cti(self, port: int, element: ExternalCti) -> None:
        """ExternalCTIs are Finalize's (CEDR): other operators pass them on."""
        self.emit(element)

    def state_size(self) -> int:
        """How many events the operator holds (for tests and benchmarks)."""
        return 0

    # -------------------------------------------------------------- state

    def get_state(self) -> dict[str, Any]:
        """The operator's state as plain, picklable data (a streaming
        query saves it between micro-batches; see
        :class:`udm.host.engines.livegraph.LiveGraph`)."""
        return {f: getattr(self, f) for f in self.state_fields}

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back a :meth:`get_state` of an operator compiled from the
        same query, replacing this one's state."""
        missing = [f for f in self.state_fields if f not in state]
        if missing:
            raise ValueError(f"{self.name}: the saved state lacks {missing}")
        for f in self.state_fields:
            setattr(self, f, state[f])


class Collector(Operator):
    """The end of a graph: keeps every element it receives, in order."""

    name = "output"

    def __init__(self) -> None:
        super().__init__(1)
        self.elements: list[PhysicalElement] = []

    def push(self, port: int, element: PhysicalElement) -> None:
        self.elements.append(element)

    def push_batch(self, port: int, elements: Sequence[PhysicalElement]) -> None:
        self.elements.extend(elements)


class CtiTracker:
    """The output CTI of an operator with several inputs: the least of the
    inputs' latest CTIs, emitted only when it advances."""

    def __init__(self, ports: int) -> None:
        self.latest = [MIN_TIME] * ports
        self.output = MIN_TIME

    def advance(self, port: int, time: int, emit: Callable[[Any], None]) -> int | None:
        """Record ``time`` on ``port``; emit and return the new output CTI
        if it moved forward, else ``None``."""
        if time > self.latest[port]:
            self.latest[port] = time
        low = min(self.latest)
        if low > self.output:
            self.output = low
            emit(Cti(low))
            return low
        return None
