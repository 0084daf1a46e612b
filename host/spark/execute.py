"""Running a :class:`~udm.host.query.Stream` plan on Spark.

Each plan node maps one event table to the next: UDF filters and
projections run in Python workers over Arrow batches (``mapInArrow``; the
UDF sees the same payload dicts as in the reference engine), Spark
Columns and SQL strings run natively, window operations go through
:mod:`udm.host.spark.windows` and :mod:`udm.host.spark.evaluate`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.errors import UdmInvocationError
from udm.host.query import (
    E_COL,
    S_COL,
    SCALAR_COL,
    GroupNode,
    InvalidEventError,
    Layout,
    Node,
    QueryMetrics,
    Row,
    SelectNode,
    WhereNode,
    WindowOp,
    _is_column,
    adapt_op,
    udf_of_payload,
)
from udm.host.spark.evaluate import _pickled_field, decode_pickled, evaluate_op, to_arrow_column
from udm.host.spark.frame import EventFrame, from_rows, map_in_arrow, normalize, output, q
from udm.host.spark.types import arrow_schema, from_returns, function_result_type, normalize_value

if TYPE_CHECKING:
    from udm.host.query import Stream

__all__ = ["LOGGER", "collect_rows", "run_spark", "source_frame", "to_output"]

#: At DEBUG, the Spark exception behind each udm error is logged here, and
#: Spark's task failure logs are not cut (udm.host.spark.errors)
LOGGER = logging.getLogger("udm.spark")


def _session(spark: SparkSession | None) -> SparkSession:
    if spark is not None:
        return spark
    active = SparkSession.getActiveSession()
    if active is None:
        raise RuntimeError(
            "no active SparkSession: pass spark= or create one (SparkSession.builder.getOrCreate())"
        )
    return active


def source_frame(
    stream: Stream, pushed: list[Node] | None = None, spark: SparkSession | None = None
) -> tuple[EventFrame, QueryMetrics]:
    """The normalized source table, with leading Spark-only nodes applied."""
    source = stream._source
    if source.df is not None:
        frame, metrics = normalize(source)
    else:
        assert source.rows is not None
        frame = from_rows(_session(spark), list(source.rows), source.timestamps)
        metrics = QueryMetrics(dict(source.dropped))
    keys: tuple[str, ...] = ()
    for node in pushed or []:
        frame, keys = apply_simple(frame, keys, node)
    return frame, metrics


def apply_simple(
    frame: EventFrame, keys: tuple[str, ...], node: Node, scalar: bool = False
) -> tuple[EventFrame, tuple[str, ...]]:
    if isinstance(node, GroupNode):
        missing = [k for k in node.keys if k not in frame.columns]
        if missing and not frame.columns:
            raise ValueError(
                f"key columns {missing}: the stream's in-memory source has no events, so "
                "Spark cannot know its columns; to_cht(engine='reference') gives the empty "
                "result, or build the stream from a DataFrame with a schema"
            )
        if missing:
            raise KeyError(f"key columns {missing} are not in the stream; columns: {frame.columns}")
        return frame, node.keys
    if isinstance(node, WhereNode):
        return frame.with_df(_where(frame, node.predicate, scalar)), keys
    if isinstance(node, SelectNode):
        return frame.with_df(_select(frame, keys, node, scalar)), keys
    raise TypeError(f"not a simple node: {node!r}")


def run_spark(
    stream: Stream, spark: SparkSession | None = None
) -> tuple[EventFrame, Layout, QueryMetrics]:
    """The output event table of a plan and how to read CHT payloads."""
    frame, metrics = source_frame(stream, spark=spark)
    keys: tuple[str, ...] = ()
    scalar = stream._source.scalar
    layout = (
        Layout(SCALAR_COL, ()) if scalar else Layout(None, tuple((c, c) for c in frame.columns))
    )
    for node in stream._nodes:
        if isinstance(node, WindowOp):
            frame, layout = evaluate_op(frame, keys, adapt_op(node, scalar))
            scalar = False
        else:
            frame, keys = apply_simple(frame, keys, node, scalar)
            if isinstance(node, SelectNode):
                layout = Layout(None, tuple((c, c) for c in frame.columns))
                scalar = False
    return frame, layout, metrics


def to_output(frame: EventFrame) -> DataFrame:
    return output(frame)


class SparkUdmInvocationError(UdmInvocationError):
    """A UDM failed inside a Spark worker; the message is the worker's."""

    def __init__(self, message: str) -> None:
        self.udm = message.split("'")[1] if message.count("'") >= 2 else ""
        self.window = None
        self.element = None
        RuntimeError.__init__(self, message)


def translate_error(exc: Exception) -> Exception | None:
    """The udm error behind a Spark exception (a UDM failure in a worker,
    an invalid row, a window error), without the JVM noise."""
    text = str(exc)
    m = re.search(r"udm\.host\.errors\.UdmInvocationError: (.*)", text)
    if m:
        return SparkUdmInvocationError(m.group(1).strip())
    m = re.search(r"(invalid event: .*?)(?: SQLSTATE: \w+)?$", text, re.S)
    if m:
        return InvalidEventError(m.group(1).strip())
    m = re.search(r"\[USER_RAISED_EXCEPTION\] (.*?)(?: SQLSTATE: \w+)?$", text, re.S)
    if m:
        return ValueError(m.group(1).strip())
    m = re.search(r"\n(\w*(?:Type|Value|Key)Error): (.*)", text)
    if m:
        name, message = m.group(1), m.group(2).strip()
        if name == "TypeError":  # a result of the wrong type: what udm raises in-process
            return TypeError(message)
        return ValueError(message if name == "ValueError" else f"{name}: {message}")
    return None


@contextmanager
def udm_errors() -> Iterator[None]:
    """Re-raise an error of a Spark action as the udm error behind it (see
    :func:`translate_error`); others pass unchanged."""
    from pyspark.errors import PySparkException

    try:
        yield
    except PySparkException as exc:
        translated = translate_error(exc)
        if translated is None:
            raise
        # kept, not chained: the chain would print Spark's text again
        translated.spark_error = exc  # type: ignore[attr-defined]
        LOGGER.debug("Spark error behind %s", type(translated).__name__, exc_info=exc)
        raise translated from None


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
    if _is_column(predicate):
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
    keep_cols = [F.col(q(c)) for c in keep] + [c for c in names if not isinstance(c, str)]
    native = [(n, e) for n, e, _ in node.named if _is_column(e)]
    udfs = [(n, e, r) for n, e, r in node.named if not _is_column(e)]
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
        fields.append(_pickled_field(name) if t is None else T.StructField(name, t, True))
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
                arrays.append(to_arrow_column(values, dtype, _const(f"select({labels[j]}=...)")))
            yield pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, *tmp])

    computed = map_in_arrow(df, project_batches, schema)
    pickled = [n for n, t in zip(tmp, types, strict=True) if t is None]
    if pickled:
        shown = {t: f"select({n}=...)" for t, (n, _, _) in zip(tmp, udfs, strict=True)}
        computed, _ = decode_pickled(computed, pickled, shown, keys)
    sel = [F.col(q(c)) for c in keep] + [c for c in names if not isinstance(c, str)]
    sel += [e.alias(n) for n, e in native]
    sel += [F.col(t).alias(n) for t, (n, _, _) in zip(tmp, udfs, strict=True)]
    return computed.select(*sel)
