"""The host engine: a plan compiled into a graph of physical operators.

Each plan node becomes one physical operator (:mod:`udm.host.operators`),
connected as the plan is; a node read by several others is compiled once
and its output multicast. Sources are physical streams: a
``Stream.from_events`` source is its elements in arrival order (validated
under its CTI policy, or first repaired by a Finalize when it carries
ExternalCTIs), in-memory rows are inserts in start order; every source
ends with a CTI at the end of time, so every window closes. Several
sources are interleaved run by run: each hands the graph its elements up to
and including its next CTI (at most :data:`RUN_LIMIT`), through
``push_batch``, so that an operator with a batched path (the join) can take
a run at once; the others take it element by element.

``consistency`` (as ``Stream.with_consistency``) puts a Finalize and an
Align after every source; at ``"strong"`` (an Align blocking until CTIs
on every path to a source, however the query wrote it) the window and
anti-join operators are also conservative (they emit only what CTIs made
final), so the output never retracts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from udm.host import plan as logical
from udm.host.algebra import join_payload, joined_columns, pair_udf, side_key
from udm.host.cht import derive_cht
from udm.host.engine import Consistency
from udm.host.engines import EngineResult
from udm.host.engines.entrypoints import (
    PassOperator,
    ValidateOperator,
    element_columns,
    ending,
    raw_source,
    read_by_rows,
    source_readers,
    wrapped_payloads,
)
from udm.host.errors import STREAM_CLOSE_ADVICE, OpenEventError, OperatorError
from udm.host.metrics import QueryMetrics
from udm.host.operators.base import Collector, Operator, PhysicalElement
from udm.host.operators.batch import runs
from udm.host.operators.consistency import AlignOperator, FinalizeOperator
from udm.host.operators.finalize import LATE, UNMATCHED
from udm.host.operators.join import AntiJoinOperator, JoinOperator
from udm.host.operators.lifetime import AlterLifetimeOperator
from udm.host.operators.relational import ProjectOperator, SelectOperator, UnionOperator
from udm.host.operators.window import WindowOperator
from udm.host.plan import (
    SCALAR_COL,
    PlanNode,
    Row,
    consistency_levels,
    sources,
    strongly_aligned,
    walk,
    with_consistency,
)
from udm.host.rows import (
    Layout,
    adapt_op,
    op_layout,
    result_columns,
    returns_is_struct,
    udf_of_payload,
)
from udm.host.stream import ExternalCti, Insert
from udm.host.time import INFINITY

__all__ = ["RUN_LIMIT", "HostEngine", "register_handler"]

#: the most elements a source hands the graph at once (a run also ends at
#: each CTI): bounds what a run holds when a source has few CTIs
RUN_LIMIT = 4096


@dataclass(frozen=True)
class LiveParts:
    """A graph compiled for feeding from outside: its output, its sources'
    entry points (in :func:`udm.host.plan.sources` order), every operator
    (entries first: the snapshot's order) and its Finalizes (their drops)."""

    sink: Collector
    entries: list[ValidateOperator]
    operators: list[Operator]
    finalizers: list[FinalizeOperator]


class HostEngine:
    """Runs a plan in-process, run by run (see the module docstring)."""

    name = "host"

    def __init__(self, consistency: Any = None) -> None:
        self.consistency = consistency
        self.metrics = QueryMetrics({})
        self._ops: dict[int, Operator] = {}
        self._scalar: dict[int, bool] = {}
        self._columns: dict[int, list[str] | None] = {}
        #: a first run's: a select join's output (its columns are its live
        #: rows'); the columns it found of nodes only rows name (``_run``)
        self._select_out: dict[int, Collector] = {}
        self._preset: dict[int, list[str]] | None = None
        #: nodes whose payloads are shaped as their (first) input's
        self._same: set[int] = set()
        self._feeds: list[tuple[Operator, Iterator[PhysicalElement]]] = []
        self._finalizers: list[FinalizeOperator] = []
        self._windows: dict[int, WindowOperator] = {}
        self._drops: dict[str, int] = {}
        # live: sources are entry points fed from outside (LiveGraph), with
        # this CTI policy, rather than feeds the engine drains itself
        self._live_policy: str | None = None
        self._entries: dict[int, ValidateOperator] = {}
        self._raw: set[int] = set()
        self._repaired: set[int] = set()
        #: a source's raw elements, for the Finalizes that read them (raw_source)
        self._raw_heads: dict[int, Operator] = {}

    # ------------------------------------------------------------ running

    def _leveled(self, plan: PlanNode) -> PlanNode:
        if self.consistency is None:
            return plan
        return with_consistency(plan, *consistency_levels(self.consistency))

    def _compile_plan(self, plan: PlanNode, leveled: bool = False) -> tuple[PlanNode, Collector]:
        plan = plan if leveled else self._leveled(plan)
        # a source with ExternalCTIs that a bounded Finalize reads gives it
        # its raw elements, as the reference engine does, and its other
        # readers the source's own repair (source_readers); one without them
        # is still validated under its own cti_policy first (drop/adjust
        # apply before any consistency level, as they do without one)
        self._raw, self._repaired = source_readers(plan)
        self._raw_heads = {}
        sink = Collector()
        self.compile(plan).connect(sink)
        return plan, sink

    def compile_live(self, plan: PlanNode, cti_policy: str) -> LiveParts:
        """``plan``'s graph with its sources as entry points fed from
        outside (:class:`~udm.host.engines.livegraph.LiveGraph`), each
        validated under ``cti_policy``, rather than feeds this engine drains."""
        self._live_policy = cti_policy
        _, sink = self._compile_plan(plan)
        entries = [self._entries[id(src)] for src in sources(plan)]
        return LiveParts(sink, entries, [*entries, *self._ops.values()], self._finalizers)

    def _run(self, plan: PlanNode) -> tuple[PlanNode, list[PhysicalElement]]:
        plan = self._leveled(plan)
        if self._preset is None and read_by_rows(plan):
            # a join's select= or a window's undeclared results name columns
            # row by row, but a union or join reading them names them per
            # stream, as the reference engine's tables have them: a first run
            # finds them (each UDF and UDM runs twice)
            probe = HostEngine()
            probe._preset = {}
            probe._run(plan)
            self._preset = {
                id(n): probe._final_columns(n)
                for n in walk(plan)
                if probe._columns.get(id(n)) is None and not probe._scalar.get(id(n))
            }
        plan, sink = self._compile_plan(plan, leveled=True)
        # a run at a time (up to a CTI), so an operator with a batched path
        # (the join) gets runs; sources take turns, run by run
        feeds = [(target, runs(elements, RUN_LIMIT)) for target, elements in self._feeds]
        try:
            while feeds:
                alive = []
                for target, chunks in feeds:
                    run = next(chunks, None)
                    if run is not None:
                        target.push_batch(0, run)
                        alive.append((target, chunks))
                feeds = alive
        except OpenEventError as exc:  # the CTI at the end of time was ours, not the caller's
            raise OpenEventError(exc.what, STREAM_CLOSE_ADVICE) from None
        dropped: dict[str, int] = dict(self._drops)
        # the Finalizes here count what they discard (a source's own count
        # of unmatched retractions, its CHT's, is left out in _source)
        for reason, n in (
            (LATE, sum(f.dropped for f in self._finalizers)),
            (UNMATCHED, sum(f.unmatched for f in self._finalizers)),
        ):
            if n:
                dropped[reason] = dropped.get(reason, 0) + n
        self.metrics = QueryMetrics(dropped)
        return plan, sink.elements

    def events(self, plan: PlanNode) -> list[Any]:
        """The output physical stream, payloads read as ``to_cht`` reads them."""
        plan, elements = self._run(plan)
        layout = self._layout(plan, [el.payload for el in elements if type(el) is Insert])
        out: list[Any] = []
        for el in elements:
            if type(el) is Insert:
                out.append(Insert(el.id, el.start, el.end, layout.payload(el.payload)))
            else:
                out.append(el)
        return out

    def collect(self, plan: PlanNode) -> EngineResult:
        """The output rows of ``plan`` (its output stream's CHT)."""
        plan, elements = self._run(plan)
        cht, _ = derive_cht(e for e in elements if not isinstance(e, ExternalCti))
        rows: list[Row] = [(ev.start, ev.end, ev.payload) for ev in cht]
        layout = self._layout(plan, [p for _, _, p in rows])
        return EngineResult(rows, layout, self.metrics)

    def _layout(self, plan: PlanNode, payloads: Sequence[Mapping[str, Any]]) -> Layout:
        # the plan's columns whatever rows it gave, then any only rows show
        known = [] if self._scalar.get(id(plan)) else self._final_columns(plan)
        columns = list(dict.fromkeys([*known, *(c for p in payloads for c in p)]))
        for p in payloads:  # a field some rows lack is null there, as in a table
            for c in columns:
                if c not in p:
                    p[c] = None  # type: ignore[index]
        # a window's results read as it gives them through the operators that
        # keep its rows' columns (as the reference and Spark engines read them)
        op = plan
        while (kept := logical.columns_kept_from(op)) is not None:
            op = kept
        if isinstance(op, logical.WindowOp):
            window = self._windows[id(op)]
            cols = result_columns(op, window.struct_fields())
            return op_layout(op, cols)
        if self._scalar.get(id(plan)):
            return Layout(SCALAR_COL, ())
        return Layout(None, tuple((c, c) for c in columns))

    def _final_columns(self, node: PlanNode) -> list[str]:
        """After a run: the columns ``node``'s output has even without rows,
        as the reference engine's table has them (a join's ``select``
        names its own row by row: ``on`` and the names its rows had)."""
        if isinstance(node, logical.WindowOp):
            cols = result_columns(node, self._windows[id(node)].struct_fields())
            return [*node.input.keys(), *(c for c, _, _ in cols)]
        if isinstance(node, logical.UnionNode):
            return list(dict.fromkeys(c for p in node.parts for c in self._final_columns(p)))
        if isinstance(node, logical.JoinNode):
            if (out := self._select_out.get(id(node))) is not None:
                cht, _ = derive_cht(e for e in out.elements if not isinstance(e, ExternalCti))
                return list(dict.fromkeys([*node.on, *(c for ev in cht for c in ev.payload)]))
            if node.select is not None:  # the rows show the columns at the root
                return list((self._preset or {}).get(id(node), node.on))
            left, right = self._final_columns(node.left), self._final_columns(node.right)
            return joined_columns(left, right, node.on, node.suffixes, node.describe())
        if isinstance(node, logical.AntiJoinNode) or id(node) in self._same:
            return self._final_columns(node.inputs[0])
        return self._columns.get(id(node)) or []

    # ---------------------------------------------------------- compiling

    def compile(self, node: PlanNode) -> Operator:
        """The operator whose output is ``node``'s (compiled once)."""
        found = self._ops.get(id(node))
        if found is None:
            handler = _HANDLERS.get(type(node))
            if handler is None:
                raise TypeError(f"the host engine cannot run {type(node).__name__} nodes")
            for child in node.inputs:  # inputs first: a node reads their shapes
                self.compile(child)
            found = self._ops[id(node)] = handler(self, node)
            if self._columns.get(id(node)) is None:  # a first run's, if one found them
                self._columns[id(node)] = (self._preset or {}).get(id(node))
        return found

    def _input(self, node: PlanNode, i: int = 0) -> Operator:
        return self.compile(node.inputs[i])

    def _scalar_of(self, node: PlanNode) -> bool:
        return self._scalar.get(id(node), False)

    def _same_shape(self, node: PlanNode, op: Operator) -> Operator:
        """Record that ``node`` keeps its input's payload shape."""
        self._scalar[id(node)] = self._scalar_of(node.inputs[0])
        self._columns[id(node)] = self._columns.get(id(node.inputs[0]))
        self._same.add(id(node))
        return op

    def _chain(self, node: PlanNode, op: Operator) -> Operator:
        self._input(node).connect(op)
        return op

    def unary(self, node: PlanNode, op: Operator) -> Operator:
        """Wire ``op`` as ``node``'s operator, fed by ``node``'s one input,
        its payloads shaped as that input's: what a handler registered for
        a unary operator that changes lifetimes or elements, not payload
        columns, returns (:func:`register_handler`)."""
        return self._same_shape(node, self._chain(node, op))

    def _source(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.Source)
        head = PassOperator()
        self._scalar[id(node)] = node.scalar
        for reason, n in node.dropped:
            if reason != UNMATCHED:  # the graph's own Finalize counts them
                self._drops[reason] = self._drops.get(reason, 0) + n
        if self._live_policy is not None:
            entry = ValidateOperator(self._live_policy)
            entry.connect(head)
            self._entries[id(node)] = entry
            self._columns[id(node)] = None
            return head
        if node.elements is not None:
            external = any(isinstance(e, ExternalCti) for e in node.elements)
            elements = ending(wrapped_payloads(node.elements, node.scalar))
            self._columns[id(node)] = element_columns(node)
            if id(node) in self._raw and id(node) not in self._repaired:
                self._raw_heads[id(node)] = head  # its Finalizes repair and validate
                self._feeds.append((head, elements))
                return head
            if external:
                repair = FinalizeOperator(INFINITY, "finalize (ExternalCTIs)")
                self._finalizers.append(repair)
                first: Operator = repair
            else:
                first = ValidateOperator(node.cti_policy)
            first.connect(head)
            if id(node) in self._raw:
                # read raw by a Finalize and repaired by the others: each its own stream
                split, raw = PassOperator(), PassOperator()
                split.connect(raw)
                split.connect(first)
                self._raw_heads[id(node)] = raw
                first = split
            self._feeds.append((first, elements))
            return head
        rows = self._rows_of(node)
        self._columns[id(node)] = list(dict.fromkeys(c for _, _, p in rows for c in p))
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        elements = ending(Insert(i, rows[i][0], rows[i][1], rows[i][2]) for i in order)
        self._feeds.append((head, elements))
        return head

    def _rows_of(self, node: logical.Source) -> list[Row]:
        if node.df is None:
            assert node.rows is not None
            return list(node.rows)
        from udm.host.engines import get_engine

        # a DataFrame source: Spark reads it, as the reference engine does
        rows, _, metrics = get_engine("reference").collect(node)
        for reason, n in (metrics.invalid_rows() or {}).items():
            self._drops[reason] = self._drops.get(reason, 0) + n
        return rows

    def _group(self, node: PlanNode) -> Operator:
        return self._same_shape(node, self._input(node))

    def _where(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.WhereNode)
        _python_only(node.predicate, node)
        pred = udf_of_payload(node.predicate, self._scalar_of(node.input), "where()")
        return self._same_shape(node, self._chain(node, SelectOperator(pred)))

    def _select(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.SelectNode)
        scalar = self._scalar_of(node.input)
        for c in node.columns:
            if not isinstance(c, str):
                _python_only(c, node)
        names = [c for c in node.columns if isinstance(c, str)]
        keep = list(dict.fromkeys([*node.input.keys(), *names]))
        fns = []
        for n, e, _ in node.named:
            _python_only(e, node)
            fns.append((n, udf_of_payload(e, scalar, f"select({n}=...)")))

        def project(p: Mapping[str, Any]) -> dict[str, Any]:
            try:
                q = {c: p[c] for c in keep}
            except KeyError as exc:
                raise KeyError(
                    f"select(): column {exc.args[0]!r} is not in the stream; payload {p!r:.200}"
                ) from None
            for n, fn in fns:
                q[n] = fn(p)
            return q

        self._scalar[id(node)] = False
        self._columns[id(node)] = list(dict.fromkeys([*keep, *(n for n, _ in fns)]))
        return self._chain(node, ProjectOperator(project))

    def _window(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.WindowOp)
        if node.emit_empty:
            raise OperatorError(
                node.describe().splitlines()[0],
                "emit_empty is not available on the incremental engine (it runs only "
                "non-empty windows); use engine='reference' or 'spark'",
            )
        if node.watermark < INFINITY:
            raise OperatorError(
                node.describe().splitlines()[0],
                "watermark= bounds a batch query; the incremental engine's time is its "
                "CTIs: drop watermark= (events that never end need a CTI to close windows)",
            )
        op = adapt_op(node, self._scalar_of(node.input))
        mode = Consistency.CONSERVATIVE if strongly_aligned(node) else Consistency.SPECULATIVE
        window = WindowOperator(op, node.input.keys(), mode)
        self._windows[id(node)] = window
        self._scalar[id(node)] = False
        # results declared scalar: one column per call, known before any row
        scalars = all(returns_is_struct(c.returns) is False for c in node.calls)
        named = [*node.input.keys(), *(c.name for c in node.calls)]
        self._columns[id(node)] = named if scalars else None
        return self._chain(node, window)

    def _alter(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.AlterLifetimeNode)
        # shift and constant durations never end an output before the CTI maps
        holds = node.form not in ("shift", "set_duration", "to_points")
        op = AlterLifetimeOperator(node.start_fn, node.duration_fn, node.describe(), holds)
        return self._same_shape(node, self._chain(node, op))

    def _align(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.AlignNode)
        return self._same_shape(node, self._chain(node, AlignOperator(node.blocking)))

    def _finalize(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.FinalizeNode)
        op = FinalizeOperator(node.remember, node.describe())
        self._finalizers.append(op)
        source = raw_source(node)
        if source is not None and id(source) in self._raw_heads:
            # the source's raw elements, not the repaired stream its other readers get
            self._raw_heads[id(source)].connect(op)
            return self._same_shape(node, op)
        return self._same_shape(node, self._chain(node, op))

    def _union(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.UnionNode)
        parts = [self.compile(p) for p in node.parts]
        cols = [self._columns.get(id(p)) for p in node.parts]
        known = list(dict.fromkeys(c for part in cols for c in part or []))
        columns = known if all(c is not None for c in cols) else None
        union = UnionOperator(len(parts), known or None)
        for port, part in enumerate(parts):
            part.connect(union, port)
        self._scalar[id(node)] = all(self._scalar_of(p) for p in node.parts)
        self._columns[id(node)] = columns
        return union

    def _sides(
        self, node: logical.JoinNode | logical.AntiJoinNode
    ) -> tuple[Callable[..., Any], ...]:
        on, name = node.on, node.describe()
        sl, sr = self._scalar_of(node.left), self._scalar_of(node.right)
        key_left, key_right = side_key(on, "left", name), side_key(on, "right", name)

        def see_left(p: Mapping[str, Any]) -> Any:
            return p[SCALAR_COL] if sl else p

        def see_right(p: Mapping[str, Any]) -> Any:
            return p[SCALAR_COL] if sr else p

        return key_left, key_right, see_left, see_right

    def _join(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.JoinNode)
        key_left, key_right, see_left, see_right = self._sides(node)
        on, suffixes, name = node.on, node.suffixes, node.describe()
        where = None if node.where is None else pair_udf(node.where, "where", name)
        select = None if node.select is None else pair_udf(node.select, "select", name)

        preset = (self._preset or {}).get(id(node))  # the columns a first run found (_run)
        padding = dict.fromkeys(preset or ())
        # each side's columns, when known: a row lacking one of its stream's
        # columns (in-memory rows may) has it null, so that a name both
        # streams have is suffixed in every row, as in the reference's tables
        lc, rc = self._columns.get(id(node.left)), self._columns.get(id(node.right))

        def combine(lp: Mapping[str, Any], rp: Mapping[str, Any]) -> Any:
            if select is None:
                if lc is not None and len(lp) < len(lc):
                    lp = {c: lp.get(c) for c in lc}
                if rc is not None and len(rp) < len(rc):
                    rp = {c: rp.get(c) for c in rc}
                return join_payload(lp, rp, on, suffixes)
            out = {**{k: lp[k] for k in on}, **dict(select(see_left(lp), see_right(rp)))}
            return {**padding, **out} if padding else out  # a column a row lacks is null

        predicate = None
        if where is not None:

            def predicate(lp: Any, rp: Any) -> Any:
                return where(see_left(lp), see_right(rp))

        join = JoinOperator(key_left, key_right, combine, predicate, name)
        if select is not None and self._preset == {}:  # a first run: its rows' columns
            join.connect(out := Collector())
            self._select_out[id(node)] = out
        self.compile(node.left).connect(join, 0)
        self.compile(node.right).connect(join, 1)
        joined = None
        if select is None and lc is not None and rc is not None:
            # known: a name made twice is refused before running; a union fills them
            joined = joined_columns(lc, rc, on, suffixes, name)
        self._scalar[id(node)] = False
        self._columns[id(node)] = preset if select is not None else joined
        return join

    def _anti_join(self, node: PlanNode) -> Operator:
        assert isinstance(node, logical.AntiJoinNode)
        key_left, key_right, see_left, see_right = self._sides(node)
        name = node.describe()
        where = None if node.where is None else pair_udf(node.where, "where", name)
        predicate = None
        if where is not None:

            def predicate(lp: Any, rp: Any) -> Any:
                return where(see_left(lp), see_right(rp))

        strong = strongly_aligned(node)  # "strong", however it was written
        anti = AntiJoinOperator(key_left, key_right, predicate, strong, name)
        self.compile(node.left).connect(anti, 0)
        self.compile(node.right).connect(anti, 1)
        self._scalar[id(node)] = self._scalar_of(node.left)
        self._columns[id(node)] = self._columns.get(id(node.left))
        return anti


def _python_only(expr: Any, node: PlanNode) -> None:
    from udm.host.plan import is_column

    if isinstance(expr, str) or is_column(expr):
        raise TypeError(
            f"{node.describe()}: a Spark expression, which the incremental engine cannot run; "
            "use a UDF, or engine='reference' or 'spark'"
        )


_HANDLERS: dict[type[PlanNode], Callable[[HostEngine, PlanNode], Operator]] = {
    logical.Source: HostEngine._source,
    logical.GroupNode: HostEngine._group,
    logical.WhereNode: HostEngine._where,
    logical.SelectNode: HostEngine._select,
    logical.WindowOp: HostEngine._window,
    logical.AlterLifetimeNode: HostEngine._alter,
    logical.AlignNode: HostEngine._align,
    logical.FinalizeNode: HostEngine._finalize,
    logical.UnionNode: HostEngine._union,
    logical.JoinNode: HostEngine._join,
    logical.AntiJoinNode: HostEngine._anti_join,
}


def register_handler(
    node_class: type[PlanNode], handler: Callable[[HostEngine, PlanNode], Operator]
) -> None:
    """How the host engine compiles nodes of ``node_class`` into a physical
    operator: an operator added by another module or distribution registers
    it here (a unary one returns ``engine.unary(node, MyOperator(...))``),
    beside its reference and Spark implementations."""
    _HANDLERS[node_class] = handler
