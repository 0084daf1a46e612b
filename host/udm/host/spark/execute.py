"""Running a :class:`~udm.host.query.Stream` plan on Spark.

Each plan node maps one event table to the next: UDF filters and
projections run in Python workers over Arrow batches (``mapInArrow``; the
UDF sees the same payload dicts as in the reference engine), Spark
Columns and SQL strings run natively, window operations go through
:mod:`udm.host.spark.windows` and :mod:`udm.host.spark.evaluate`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.engines import EngineResult
from udm.host.metrics import QueryMetrics
from udm.host.plan import (
    E_COL,
    S_COL,
    SCALAR_COL,
    AlignNode,
    GroupNode,
    PlanNode,
    Row,
    SelectNode,
    Source,
    WhereNode,
    WindowOp,
    detached,
    is_column,
    sources,
)
from udm.host.rows import Layout, adapt_op, udf_of_payload
from udm.host.spark import evaluate as spark_evaluate  # tests patch tracking_persisted there
from udm.host.spark.algebra import HANDLERS as CEDR_HANDLERS
from udm.host.spark.arrowio import pickled_field, to_arrow_column
from udm.host.spark.decode import decode_pickled
from udm.host.spark.errors import running, udm_errors, udm_frame
from udm.host.spark.frame import EventFrame, from_rows, map_in_arrow, normalize, output, quoted
from udm.host.spark.keysample import head_of, narrow_chain, sample_frame, summarize
from udm.host.spark.session import share_driver_python
from udm.host.spark.table import SparkTable
from udm.host.spark.types import (
    SELECT_TYPE_HINT,
    arrow_schema,
    from_returns,
    function_result_type,
    normalize_value,
)
from udm.host.spark.windowop import evaluate_op
from udm.host.strategy import PartialChoice, choose_partial, partial_is_open

if TYPE_CHECKING:
    from udm.host.query import Stream

__all__ = [
    "SparkEngine",
    "SparkTable",
    "apply_simple",
    "collect_rows",
    "register_handler",
    "source_frame",
    "source_rows",
    "spark_rows",
    "to_output",
]


def _session(spark: SparkSession | None) -> SparkSession:
    if spark is not None:
        return spark
    active = SparkSession.getActiveSession()
    if active is None:
        raise RuntimeError(
            "no active SparkSession: pass spark= or create one (SparkSession.builder.getOrCreate())"
        )
    return active


def _active_of(plan: PlanNode) -> SparkSession | None:
    """The session a plan runs in: its first DataFrame source's, else the
    active one (None before any session exists)."""
    df = next((s.df for s in sources(plan) if s.df is not None), None)
    return df.sparkSession if df is not None else SparkSession.getActiveSession()


def source_frame(
    source: Source,
    pushed: list[PlanNode] | None = None,
    spark: SparkSession | None = None,
    quiet: bool = False,
) -> tuple[EventFrame, QueryMetrics]:
    """The normalized source table, with leading Spark-only nodes applied;
    ``quiet``: invalid rows skipped, not raised or counted (a sample)."""
    if source.df is not None:
        frame, metrics = normalize(source, quiet)
    else:
        assert source.rows is not None
        frame = from_rows(_session(spark), list(source.rows), source.timestamps, _columns(source))
        metrics = QueryMetrics(dict(source.dropped))
    keys: tuple[str, ...] = ()
    for node in pushed or []:
        frame, keys = apply_simple(frame, keys, node)
    return frame, metrics


def _columns(source: Source) -> tuple[str, ...]:
    """The columns an in-memory source has even without events: its
    inserts' (all retracted, maybe), and a scalar stream's ``value`` (a
    ``from_events`` stream with no insert at all is scalar, and a window's
    UDM reads that column, which an empty table must still have)."""
    if source.scalar and SCALAR_COL not in source.columns:
        return (*source.columns, SCALAR_COL)
    return source.columns


def apply_simple(
    frame: EventFrame, keys: tuple[str, ...], node: PlanNode, scalar: bool = False
) -> tuple[EventFrame, tuple[str, ...]]:
    """A group, where or select node over an event table."""
    if isinstance(node, GroupNode):
        missing = [k for k in node.group_keys if k not in frame.columns]
        if missing and frame.blank:  # no events: the in-process engines' empty result
            return frame.with_nulls(missing), node.group_keys
        if missing:
            raise KeyError(f"key columns {missing} are not in the stream; columns: {frame.columns}")
        return frame, node.group_keys
    if isinstance(node, WhereNode):
        return frame.with_df(_where(frame, node.predicate, scalar)), keys
    if isinstance(node, SelectNode):
        return frame.with_df(_select(frame, keys, node, scalar)), keys
    raise TypeError(f"not a simple node: {node!r}")


class SparkEngine:
    """Runs a plan as Spark batch jobs; each node maps an event table to
    the next (dispatching on the node's class), a node read twice is
    computed once in the plan Spark optimizes."""

    name = "spark"

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.spark = spark
        self._memo: dict[int, SparkTable] = {}
        self._metrics: list[QueryMetrics] = []
        #: the partial-states choice of each window operation planned, by id
        self.choices: dict[int, PartialChoice] = {}

    def session(self) -> SparkSession:
        """The session to create tables in: ``spark=``, else the active one."""
        return _session(self.spark)

    def add_metrics(self, metrics: QueryMetrics) -> None:
        """Count what a node dropped in the run's metrics."""
        self._metrics.append(metrics)

    def source_rows(
        self, source: Source, pushed: list[PlanNode]
    ) -> tuple[list[Row], list[str], QueryMetrics]:
        """See :func:`source_rows`."""
        return source_rows(source, pushed)

    def spark_rows(
        self, spark: Any, rows: list[Row], node: PlanNode, keys: tuple[str, ...]
    ) -> tuple[list[Row], list[str]]:
        """See :func:`spark_rows`."""
        return spark_rows(spark, rows, node, keys)

    def table(self, plan: PlanNode) -> tuple[SparkTable, QueryMetrics]:
        """The output table of ``plan`` and the metrics of its sources."""
        self._memo.clear()
        self.choices.clear()
        self._metrics = []
        # every engine="spark" run (to_cht, to_dataframe, explain) starts here:
        # a local session's Python workers get the driver's interpreter before
        # any node wraps a Python function, whichever node that is
        session = self.spark or _active_of(plan)
        if session is not None:
            share_driver_python(session)
        out = self.run(plan)
        return out, QueryMetrics.combined(self._metrics)

    def collect(self, plan: PlanNode) -> EngineResult:
        """The output rows of ``plan`` on the driver (for ``to_cht``)."""
        # udm's errors; an invalid row's count and first rows; no task logs
        with running(_first_source(plan)):
            with spark_evaluate.tracking_persisted() as cached:
                out, metrics = self.table(plan)
            try:
                rows = collect_rows(out.frame)
            finally:
                spark_evaluate.release(cached)
        return EngineResult(rows, out.layout, metrics)

    def to_dataframe(self, stream: Stream) -> DataFrame:
        """``Stream.to_dataframe``: the output as a DataFrame."""
        source = _first_source(stream.plan)
        with spark_evaluate.tracking_persisted() as cached, running(source):
            out, metrics = self.table(stream.plan)
        stream.metrics = metrics
        # results typed from their values are cached while the output lives;
        # its actions raise udm's errors (udm_frame), as to_cht does
        return udm_frame(spark_evaluate.released_with(output(out.frame), cached), source)

    def run(self, node: PlanNode) -> SparkTable:
        """The output table of ``node``."""
        found = self._memo.get(id(node))
        if found is None:
            handler = _HANDLERS.get(type(node))
            if handler is None:
                raise TypeError(f"the Spark engine cannot run {type(node).__name__} nodes")
            found = handler(self, node)
            self._memo[id(node)] = found
        return found

    def _source(self, node: PlanNode) -> SparkTable:
        assert isinstance(node, Source)
        frame, metrics = source_frame(node, spark=self.spark)
        self._metrics.append(metrics)
        layout = (
            Layout(SCALAR_COL, ())
            if node.scalar
            else Layout(None, tuple((c, c) for c in frame.columns))
        )
        return SparkTable(frame, (), layout, node.scalar)

    def _simple(self, node: PlanNode) -> SparkTable:
        before = self.run(node.inputs[0])
        frame, keys = apply_simple(before.frame, before.keys, node, before.scalar)
        if isinstance(node, SelectNode):
            layout = Layout(None, tuple((c, c) for c in frame.columns))
            return SparkTable(frame, keys, layout, False)
        return SparkTable(frame, keys, before.layout, before.scalar)

    def _window(self, node: PlanNode) -> SparkTable:
        assert isinstance(node, WindowOp)
        before = self.run(node.input)
        op = detached(adapt_op(node, before.scalar))
        choice = self.partial_choice(node)
        op = dataclasses.replace(op, partial=choice.partial)
        frame, layout = evaluate_op(before.frame, before.keys, op)
        return SparkTable(frame, before.keys, layout, False)

    def partial_choice(self, node: WindowOp) -> PartialChoice:
        """Whether ``node`` runs with partial states, and why: from a
        sample of its input's head when the choice is open and the input
        is a source followed by narrow steps (:mod:`udm.host.spark.keysample`).
        Also what ``explain`` shows."""
        found = self.choices.get(id(node))
        if found is not None:
            return found
        chain = narrow_chain(node.input) if partial_is_open(node) else None
        if chain is None:
            unsampled = "the input is computed by a shuffle, not sampled"
            choice = choose_partial(node, None, unsampled)
        else:
            source = chain[0]
            assert isinstance(source, Source)
            keys = node.input.keys()
            with udm_errors():
                head = head_of(source, chain[1:], keys, lambda: self._head(chain, keys))
            choice = choose_partial(node, summarize(head, keys, node))
        self.choices[id(node)] = choice
        return choice

    def _head(self, chain: list[PlanNode], keys: tuple[str, ...]) -> pa.Table:
        """The sampled head of a narrow chain's output (keys and starts)."""
        source = chain[0]
        assert isinstance(source, Source)
        frame, _ = source_frame(source, spark=self.spark, quiet=True)
        got: tuple[str, ...] = ()
        scalar = source.scalar
        for step in chain[1:]:
            frame, got = apply_simple(frame, got, step, scalar)
            scalar = scalar and not isinstance(step, SelectNode)
        return sample_frame(frame.df, keys)

    def _pass(self, node: PlanNode) -> SparkTable:
        return self.run(node.inputs[0])


def _first_source(plan: PlanNode) -> Source:
    """The source whose rows error messages show (the first of a join's)."""
    return sources(plan)[0]


_HANDLERS: dict[type[PlanNode], Callable[[SparkEngine, PlanNode], SparkTable]] = {
    Source: SparkEngine._source,
    GroupNode: SparkEngine._simple,
    WhereNode: SparkEngine._simple,
    SelectNode: SparkEngine._simple,
    WindowOp: SparkEngine._window,
    AlignNode: SparkEngine._pass,  # Align never changes a CHT
    **CEDR_HANDLERS,
}


def register_handler(
    node_class: type[PlanNode], handler: Callable[[SparkEngine, PlanNode], SparkTable]
) -> None:
    """How the Spark engine runs nodes of ``node_class`` (an operator added
    by another distribution registers its Spark implementation here)."""
    _HANDLERS[node_class] = handler


def source_rows(
    source: Source, pushed: list[PlanNode]
) -> tuple[list[Row], list[str], QueryMetrics]:
    """The rows of a DataFrame source after leading Spark where/select
    nodes, on the driver: how the in-process engines read DataFrames."""
    frame, metrics = source_frame(source, pushed)
    rows = collect_rows(frame)
    return rows, [c for c in frame.df.columns if c not in (S_COL, E_COL)], metrics


def spark_rows(
    spark: Any, rows: list[Row], node: PlanNode, keys: tuple[str, ...]
) -> tuple[list[Row], list[str]]:
    """A Spark where/select over in-process rows (the reference engine's,
    after a window or a UDF), computed by Spark; for a filter each row
    comes back exactly as it went in."""
    tagged = [(s, e, {**p, _ROW_COL: i}) for i, (s, e, p) in enumerate(rows)]
    source = rows if isinstance(node, SelectNode) else tagged
    try:
        table = from_rows(spark, source, False)
    except (TypeError, ValueError) as exc:  # pyarrow's: mixed or unknown types
        raise TypeError(
            f"{node.describe()}: the reference engine runs Spark expressions after a window "
            f"or a UDF in Spark, which cannot take these rows as a table ({exc}); use a UDF "
            "or run on Spark (to_cht(engine='spark'))"
        ) from None
    frame, _ = apply_simple(table, keys, node)
    if isinstance(node, WhereNode):
        kept = {p[_ROW_COL] for _, _, p in collect_rows(frame)}
        return [r for i, r in enumerate(rows) if i in kept], []
    return collect_rows(frame), frame.columns


#: the row number a Spark filter over in-process rows reports back
_ROW_COL = "__udm_row"


def to_output(frame: EventFrame) -> DataFrame:
    """The user-facing DataFrame of an event table."""
    return output(frame)


def collect_rows(frame: EventFrame) -> list[Row]:
    """The event table on the driver, payloads as Arrow gives them to UDMs.
    Errors raised in Spark are re-raised as the udm errors behind them."""
    from udm.host.spark.errors import quiet_task_failures

    quiet_task_failures(frame.df.sparkSession)  # the error is raised: not also logged
    with udm_errors():
        table = frame.df.toArrow()
    starts = table.column(S_COL).to_pylist()
    ends = table.column(E_COL).to_pylist()
    payload = table.select([c for c in table.column_names if c not in (S_COL, E_COL)]).to_pylist()
    return list(zip(starts, ends, payload, strict=True))


# --------------------------------------------------------------- UDF nodes


def _where(frame: EventFrame, predicate: Any, scalar: bool) -> DataFrame:
    df = frame.df
    if isinstance(predicate, str):
        return df.where(F.expr(predicate))
    if is_column(predicate):
        return df.where(predicate)
    payload = frame.columns
    fn = udf_of_payload(predicate, scalar, "where()")

    def filter_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.select(payload).to_pylist()
            yield batch.filter(pa.array([bool(fn(r)) for r in rows], pa.bool_()))

    return map_in_arrow(df, filter_batches, df.schema)


def _const(label: str) -> Callable[[int], str]:
    return lambda i: label


def _select(frame: EventFrame, keys: tuple[str, ...], node: SelectNode, scalar: bool) -> DataFrame:
    df = frame.df
    columns = frame.columns
    names: list[Any] = []
    for c in node.columns:
        if isinstance(c, str):
            if c not in columns:
                raise KeyError(f"select(): column {c!r} is not in the stream; columns: {columns}")
            names.append(c)
        else:
            names.append(c)
    keep: list[Any] = [
        S_COL,
        E_COL,
        *dict.fromkeys([*keys, *[n for n in names if isinstance(n, str)]]),
    ]
    keep_cols = [F.col(quoted(c)) for c in keep] + [c for c in names if not isinstance(c, str)]
    native = [(n, e) for n, e, _ in node.named if is_column(e)]
    udfs = [(n, e, r) for n, e, r in node.named if not is_column(e)]
    out = df.select(*keep_cols, *[e.alias(n) for n, e in native]) if not udfs else df
    if not udfs:
        return out
    # UDF columns: computed in a mapInArrow over the whole payload, then projected
    types: list[T.DataType | None] = [
        from_returns(r) if r is not None else function_result_type(e) for _, e, r in udfs
    ]
    tmp = [f"__udm_f{i}" for i in range(len(udfs))]
    fields = list(df.schema.fields)
    for name, t in zip(tmp, types, strict=True):
        fields.append(pickled_field(name) if t is None else T.StructField(name, t, True))
    schema = T.StructType(fields)
    new_types = [f.type for f in arrow_schema(T.StructType(fields[len(df.schema.fields) :]))]
    pickled_flags = [t is None for t in types]
    fns = [udf_of_payload(e, scalar, f"select({n}=...)") for n, e, _ in udfs]
    labels = [n for n, _, _ in udfs]

    def project_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.select(columns).to_pylist()
            arrays = list(batch.columns)
            for j, fn in enumerate(fns):
                values = [normalize_value(fn(r)) for r in rows]
                dtype = None if pickled_flags[j] else new_types[j]
                label = _const(f"select({labels[j]}=...)")
                arrays.append(to_arrow_column(values, dtype, label, SELECT_TYPE_HINT))
            yield pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, *tmp])

    computed = map_in_arrow(df, project_batches, schema)
    pickled = [n for n, t in zip(tmp, types, strict=True) if t is None]
    if pickled:
        shown = {t: f"select({n}=...)" for t, (n, _, _) in zip(tmp, udfs, strict=True)}
        computed, _ = decode_pickled(computed, pickled, shown, keys, SELECT_TYPE_HINT)
    sel = [F.col(quoted(c)) for c in keep] + [c for c in names if not isinstance(c, str)]
    sel += [e.alias(n) for n, e in native]
    sel += [F.col(t).alias(n) for t, (n, _, _) in zip(tmp, udfs, strict=True)]
    return computed.select(*sel)
