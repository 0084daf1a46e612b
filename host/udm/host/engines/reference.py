"""The reference engine: every plan node over whole canonical history tables.

Each node maps its inputs' CHT rows to its output's, by the papers'
definitions: window operations through :func:`udm.host.evaluate` per group,
the CEDR operators through :mod:`udm.host.algebra`. Align and Finalize
with unbounded memory do not change a CHT; Finalize with a bounded
``remember`` is defined over the physical stream it receives (what arrives
after its forced CTIs is dropped), so a source given as a physical stream
is finalized before its CHT is derived. This is the oracle every other
engine is checked against; it is meant for small data.

Spark Columns and SQL strings in ``where``/``select`` need Spark: at the
head of a DataFrame source they run there before the rows are collected;
after a UDF or a window, Spark evaluates them over the rows computed here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from udm.host import plan as logical
from udm.host.algebra import (
    alter_lifetime,
    anti_join_rows,
    join_rows,
    joined_columns,
    pair_udf,
    union_rows,
)
from udm.host.cht import derive_cht
from udm.host.engines import EngineResult, get_engine
from udm.host.errors import OperatorError
from udm.host.metrics import QueryMetrics
from udm.host.operators.finalize import LATE, UNMATCHED
from udm.host.plan import SCALAR_COL, PlanNode, Row, is_column, sources
from udm.host.reference import evaluate
from udm.host.rows import (
    Layout,
    adapt_op,
    check_output_names,
    key_of,
    normalize_value,
    op_layout,
    result_columns,
    struct_fields,
    udf_of_payload,
)
from udm.host.stream import Cti, ExternalCti
from udm.host.time import INFINITY
from udm.host.validation import validate
from udm.sdk.events import IntervalEvent

__all__ = ["ReferenceEngine", "Table", "finalize_elements", "register_handler", "spark_only"]


@dataclass
class Table:
    """A node's output as the reference engine holds it."""

    rows: list[Row]
    columns: list[str]
    layout: Layout
    keys: tuple[str, ...]
    scalar: bool

    def payloads_as_given(self) -> Callable[[Mapping[str, Any], bool], Any]:
        """What a join's ``where``/``select`` receive: the scalar of a
        scalar stream, else the payload dict."""
        return _seen(self.scalar)


def _seen(scalar: bool) -> Callable[[Mapping[str, Any], bool], Any]:
    return (lambda p, _l: p[SCALAR_COL]) if scalar else (lambda p, _l: p)


def spark_only(node: PlanNode) -> bool:
    """Whether a ``where``/``select`` needs Spark (a Column or SQL string)."""
    if isinstance(node, logical.WhereNode):
        return isinstance(node.predicate, str) or is_column(node.predicate)
    if isinstance(node, logical.SelectNode):
        return any(is_column(c) for c in node.columns) or any(
            is_column(e) for _, e, _ in node.named
        )
    return False


class ReferenceEngine:
    """Runs a plan in-process over whole CHTs (see the module docstring)."""

    name = "reference"

    def __init__(self, **options: Any) -> None:
        if options:
            raise TypeError(f"the reference engine takes no options, got {sorted(options)}")
        self._memo: dict[int, Table] = {}
        self._metrics: dict[str, int] = {}
        self._spark: Any = None

    def collect(self, plan: PlanNode) -> EngineResult:
        """The output rows of ``plan``."""
        self._memo.clear()
        self._metrics = {}
        for src in sources(plan):
            if src.df is not None and self._spark is None:
                self._spark = src.df.sparkSession
        table = self.run(plan)
        return EngineResult(table.rows, table.layout, QueryMetrics(self._metrics))

    def run(self, node: PlanNode) -> Table:
        """The output table of ``node`` (each node runs once per collect)."""
        found = self._memo.get(id(node))
        if found is None:
            found = self._pushed(node) or self._dispatch(node)
            self._memo[id(node)] = found
        return found

    def _dispatch(self, node: PlanNode) -> Table:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise TypeError(f"the reference engine cannot run {type(node).__name__} nodes")
        return handler(self, node)

    def _count(self, dropped: Mapping[str, int]) -> None:
        for reason, n in dropped.items():
            self._metrics[reason] = self._metrics.get(reason, 0) + n

    # ------------------------------------------------------------ sources

    def _source(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.Source)
        if node.df is not None:
            return self._spark_prefix(node, [])
        assert node.rows is not None
        self._count(dict(node.dropped))
        rows = list(node.rows)
        columns = list(dict.fromkeys([*node.columns, *(c for _, _, p in rows for c in p)]))
        if any(len(p) != len(columns) for _, _, p in rows):
            # dict payloads are rows of a table: a field some lack is null
            # there, as in a DataFrame
            rows = [(s, e, {c: p.get(c) for c in columns}) for s, e, p in rows]
        layout = (
            Layout(SCALAR_COL, ()) if node.scalar else Layout(None, tuple((c, c) for c in columns))
        )
        return Table(rows, columns, layout, (), node.scalar)

    def _pushed(self, node: PlanNode) -> Table | None:
        """A Spark where/select at the head of a DataFrame source (group
        keys aside: a filter commutes with them) runs in Spark."""
        if not spark_only(node):
            return None
        chain: list[PlanNode] = []
        current = node
        while not isinstance(current, logical.Source):
            if len(current.inputs) != 1:
                return None
            chain.append(current)
            current = current.inputs[0]
        if current.df is None:
            return None
        chain.reverse()
        grouped = False
        for n in chain:
            if isinstance(n, logical.GroupNode):
                grouped = True
            elif not (spark_only(n) and (not grouped or isinstance(n, logical.WhereNode))):
                return None
        table = self._spark_prefix(
            current, [n for n in chain if not isinstance(n, logical.GroupNode)]
        )
        for n in chain:
            if isinstance(n, logical.GroupNode):
                table = self._group_of(table, n)
        return table

    def _spark_prefix(self, source: logical.Source, pushed: list[PlanNode]) -> Table:
        spark: Any = get_engine("spark")  # a DataFrame source is read by Spark
        rows, columns, metrics = spark.source_rows(source, pushed)
        self._count(metrics.invalid_rows(wait=True) or {})
        return Table(rows, columns, Layout(None, tuple((c, c) for c in columns)), (), False)

    # ------------------------------------------------------ unary nodes

    def _group(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.GroupNode)
        return self._group_of(self.run(node.input), node)

    @staticmethod
    def _group_of(table: Table, node: logical.GroupNode) -> Table:
        missing = [k for k in node.group_keys if k not in table.columns]
        if missing and table.rows:  # no rows: nothing to group, no columns to know
            raise KeyError(f"key columns {missing} are not in the stream; columns: {table.columns}")
        return dataclasses.replace(table, keys=node.group_keys)

    def _where(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.WhereNode)
        table = self.run(node.input)
        if spark_only(node) and self._spark is not None and not table.scalar:
            return self._spark_step(node, table)
        pred = udf_of_payload(_python_udf(node.predicate, "where"), table.scalar, "where()")
        return dataclasses.replace(table, rows=[r for r in table.rows if pred(r[2])])

    def _select(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.SelectNode)
        table = self.run(node.input)
        if spark_only(node) and self._spark is not None and not table.scalar:
            return self._spark_step(node, table)
        rows, columns = _select_rows(table.rows, table.columns, table.keys, node, table.scalar)
        return Table(rows, columns, Layout(None, tuple((c, c) for c in columns)), table.keys, False)

    def _window(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.WindowOp)
        table = self.run(node.input)
        rows, columns, layout = _window_rows(
            table.rows, table.columns, table.keys, adapt_op(node, table.scalar)
        )
        return Table(rows, columns, layout, table.keys, False)

    def _alter(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.AlterLifetimeNode)
        table = self.run(node.input)
        rows = alter_lifetime(table.rows, node.start_fn, node.duration_fn, node.describe())
        return dataclasses.replace(table, rows=rows)

    def _align(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.AlignNode)
        return self.run(node.input)  # Align never changes a CHT (CEDR 4.5)

    def _finalize(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.FinalizeNode)
        if node.remember >= INFINITY:
            return self.run(node.input)
        source = node.input
        groups: list[logical.GroupNode] = []
        while isinstance(source, logical.GroupNode):  # grouping commutes with finalize
            groups.append(source)
            source = source.input
        if not (isinstance(source, logical.Source) and source.elements is not None):
            raise OperatorError(
                node.describe(),
                "a finalize with a bounded remember= is defined over a physical stream "
                "(what arrives after its forced CTIs is dropped), so the reference engine "
                "needs it directly on a Stream.from_events source (group keys aside)",
            )
        given: Sequence[Any] = source.elements
        if not any(isinstance(e, ExternalCti) for e in given):
            # the source's cti_policy applies first, as without a Finalize
            given = list(validate(given, source.cti_policy))
        elements, dropped = finalize_elements(given, node.remember)
        cht, _ = derive_cht(elements, cti_policy=source.cti_policy)
        self._count({LATE: dropped} if dropped else {})
        # this Finalize, not the source's repair, decides what matched nothing
        kept = tuple((reason, n) for reason, n in source.dropped if reason != UNMATCHED)
        base = self._source(dataclasses.replace(source, dropped=kept))
        rows = [(e.start, e.end, _payload_row(e.payload, base.scalar)) for e in cht]
        columns = list(dict.fromkeys([*base.columns, *(c for _, _, p in rows for c in p)]))
        layout = base.layout if base.scalar else Layout(None, tuple((c, c) for c in columns))
        table = Table(rows, columns, layout, (), base.scalar)
        for group in reversed(groups):
            table = self._group_of(table, group)
        return table

    # ------------------------------------------------------ n-ary nodes

    def _union(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.UnionNode)
        tables = [self.run(p) for p in node.parts]
        keys = {t.keys for t in tables}
        if len(keys) != 1:
            raise OperatorError("union", f"the streams have different key columns {sorted(keys)}")
        columns = list(dict.fromkeys(c for t in tables for c in t.columns))
        scalar = all(t.scalar for t in tables)
        rows = union_rows([t.rows for t in tables], columns)
        layout = Layout(SCALAR_COL, ()) if scalar else Layout(None, tuple((c, c) for c in columns))
        return Table(rows, columns, layout, keys.pop(), scalar)

    def _join_sides(
        self, node: logical.JoinNode | logical.AntiJoinNode
    ) -> tuple[Table, Table, Callable[[Mapping[str, Any], bool], Any]]:
        """The two inputs of a join or anti-join, checked to share the ``on``
        columns, and what its ``where``/``select`` see of a row of either
        side (the scalar of a scalar stream, else the payload dict)."""
        left, right = self.run(node.left), self.run(node.right)
        _check_on(node.describe(), node.on, left, right)
        seen_l, seen_r = _seen(left.scalar), _seen(right.scalar)

        def wrap(p: Mapping[str, Any], is_left: bool) -> Any:
            return seen_l(p, True) if is_left else seen_r(p, False)

        return left, right, wrap

    def _join(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.JoinNode)
        left, right, wrap = self._join_sides(node)
        name = node.describe()
        where = None if node.where is None else pair_udf(node.where, "where", name)
        select = None if node.select is None else pair_udf(node.select, "select", name)
        columns: list[str] = []
        if node.select is None:  # a name collision is refused before any row, as on Spark
            columns = joined_columns(left.columns, right.columns, node.on, node.suffixes, name)
        rows = join_rows(left.rows, right.rows, node.on, where, select, node.suffixes, wrap)
        if node.select is not None:
            columns = list(dict.fromkeys([*node.on, *(c for _, _, p in rows for c in p)]))
            rows = [(s, e, {c: p.get(c) for c in columns}) for s, e, p in rows]
        return Table(rows, columns, Layout(None, tuple((c, c) for c in columns)), node.on, False)

    def _anti_join(self, node: PlanNode) -> Table:
        assert isinstance(node, logical.AntiJoinNode)
        left, right, wrap = self._join_sides(node)
        where = None if node.where is None else pair_udf(node.where, "where", node.describe())
        rows = anti_join_rows(left.rows, right.rows, node.on, where, wrap)
        return dataclasses.replace(left, rows=rows)

    # ------------------------------------------------- Spark expressions

    def _spark_step(self, node: PlanNode, table: Table) -> Table:
        """A Spark ``where`` or ``select`` over in-process rows (after a
        window or a UDF): Spark evaluates it over the rows computed here,
        as the Spark engine would."""
        spark: Any = get_engine("spark")
        rows, columns = spark.spark_rows(self._spark, table.rows, node, table.keys)
        if isinstance(node, logical.WhereNode):
            return dataclasses.replace(table, rows=rows)
        layout = Layout(None, tuple((c, c) for c in columns))
        return Table(rows, columns, layout, table.keys, False)


_HANDLERS: dict[type[PlanNode], Callable[[ReferenceEngine, PlanNode], Table]] = {
    logical.Source: ReferenceEngine._source,
    logical.GroupNode: ReferenceEngine._group,
    logical.WhereNode: ReferenceEngine._where,
    logical.SelectNode: ReferenceEngine._select,
    logical.WindowOp: ReferenceEngine._window,
    logical.AlterLifetimeNode: ReferenceEngine._alter,
    logical.AlignNode: ReferenceEngine._align,
    logical.FinalizeNode: ReferenceEngine._finalize,
    logical.UnionNode: ReferenceEngine._union,
    logical.JoinNode: ReferenceEngine._join,
    logical.AntiJoinNode: ReferenceEngine._anti_join,
}


def _payload_row(payload: Any, scalar: bool) -> dict[str, Any]:
    if scalar or not isinstance(payload, Mapping):
        return {SCALAR_COL: payload}
    return {str(k): v for k, v in payload.items()}


def finalize_elements(elements: Sequence[Any], remember: int) -> tuple[list[Any], int]:
    """Finalize over a physical stream (CEDR 4.6, ``finalizetime()`` = the
    latest sync time seen minus ``remember``): the stream Finalize emits,
    and how many elements it dropped as late. Finalize with bounded memory
    is defined by what it forgets, so this runs the operator itself."""
    from udm.host.operators.base import Collector
    from udm.host.operators.finalize import FinalizeOperator

    op = FinalizeOperator(remember)
    sink = Collector()
    op.connect(sink)
    for element in elements:
        op.push(0, element)
    op.push(0, Cti(INFINITY))
    return sink.elements, op.dropped


def _check_on(where: str, on: Sequence[str], left: Table, right: Table) -> None:
    for side, table in (("left", left), ("right", right)):
        missing = [k for k in on if k not in table.columns]
        if missing and table.rows:
            raise OperatorError(
                where, f"the {side} stream has no column(s) {missing}; its columns: {table.columns}"
            )


def _python_udf(expr: Any, where: str) -> Callable[[Any], Any]:
    if isinstance(expr, str) or is_column(expr):
        raise TypeError(
            f"{where}({expr}) is a Spark expression, which the reference engine runs in "
            "Spark, but this stream has no Spark session (it was not built from a "
            "DataFrame); run on Spark (to_cht(engine='spark')) or use a UDF"
        )
    fn: Callable[[Any], Any] = expr
    return fn


def _select_rows(
    rows: list[Row], columns: list[str], keys: Sequence[str], node: logical.SelectNode, scalar: bool
) -> tuple[list[Row], list[str]]:
    names = [c for c in node.columns if isinstance(c, str)]
    if len(names) != len(node.columns):
        _python_udf(next(c for c in node.columns if not isinstance(c, str)), "select")
    missing = [c for c in names if c not in columns]
    if missing and rows:
        raise KeyError(f"select(): columns {missing} are not in the stream; columns: {columns}")
    keep = list(dict.fromkeys([*keys, *names]))
    fns = [
        (n, udf_of_payload(_python_udf(e, "select"), scalar, f"select({n}=...)"))
        for n, e, _ in node.named
    ]
    out_cols = list(dict.fromkeys([*keep, *(n for n, _ in fns)]))
    out = []
    for s, e, p in rows:
        q = {c: p[c] for c in keep}
        for n, fn in fns:
            q[n] = fn(p)
        out.append((s, e, q))
    return out, out_cols


def _window_rows(
    rows: list[Row], columns: list[str], keys: tuple[str, ...], op: logical.WindowOp
) -> tuple[list[Row], list[str], Layout]:
    for c in op.calls:
        missing = [col for col in (c.columns() or []) if col not in columns]
        if missing and rows:
            raise KeyError(
                f"value column(s) {missing} of {c.name!r} are not in the stream; columns: {columns}"
            )
    groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
    values: dict[Hashable, tuple[Any, ...]] = {}  # the key columns as written
    for s, e, p in rows:
        group = key_of(p, keys)
        if group not in groups:
            groups[group], values[group] = [], tuple(p[k] for k in keys)
        groups[group].append(IntervalEvent(s, e, p))
    # per group, per call: output events
    outputs: list[tuple[tuple[Any, ...], list[list[IntervalEvent[Any]]]]] = []
    for group, events in groups.items():
        key = values[group]
        per_call = [
            list(
                evaluate(
                    events,
                    op.window,
                    c.udm,
                    input_clipping=op.clipping,
                    output_policy=op.policy,
                    value=c.value_fn,
                    watermark=op.watermark,
                    emit_empty=op.emit_empty,
                )
            )
            for c in op.calls
        ]
        outputs.append((key, per_call))
    structs = [
        struct_fields(c, [ev.payload for _, pc in outputs for ev in pc[i]])
        for i, c in enumerate(op.calls)
    ]
    cols = result_columns(op, structs)
    check_output_names(keys, op, cols)
    out_rows: list[Row] = []
    for key, per_call in outputs:
        base = dict(zip(keys, key, strict=True))
        if op.kind == "operator":
            events_rows = [[ev] for ev in per_call[0]]
        else:
            events_rows = [list(evs) for evs in zip(*per_call, strict=True)]
        for evs in events_rows:
            first = evs[0]
            payload = dict(base)
            for ev, c, fields in zip(evs, op.calls, structs, strict=True):
                value = normalize_value(ev.payload)
                if fields is None:
                    payload[c.name] = value
                else:
                    for f in fields:
                        col = f"{c.name}_{f}" if op.multi else f
                        payload[col] = None if value is None else value.get(f)
            out_rows.append((first.start, first.end, payload))
    out_columns = [*keys, *(c for c, _, _ in cols)]
    return out_rows, out_columns, op_layout(op, cols)


def register_handler(
    node_class: type[PlanNode],
    handler: Callable[[ReferenceEngine, PlanNode], Table],
) -> None:
    """How the reference engine evaluates nodes of ``node_class``: an
    operator added by another module or distribution registers its
    definition over CHTs here (``engine.run(node.input)`` gives the input's
    :class:`Table`), beside its host and Spark implementations."""
    _HANDLERS[node_class] = handler
