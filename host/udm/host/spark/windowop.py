"""A window operation's Spark plan, on the driver.

:func:`evaluate_op` checks the calls against the stream, lays out the
output table and routes the operation (:func:`~udm.host.strategy.spark_route`)
to the worker that assigns its windows: grid windows to
:mod:`udm.host.spark.grid`, snapshot and count windows to
:mod:`udm.host.spark.endpoints`, or windows assigned in Spark SQL to the
group functions of :mod:`udm.host.spark.evaluate`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.plan import E_COL, S_COL, WindowOp
from udm.host.rows import Layout, check_output_names, op_layout, result_columns
from udm.host.spark import evaluate as spark_evaluate  # BUCKET read at call time (tests set it)
from udm.host.spark.arrowio import (
    STATE,
    arrow_schema_with_marks,
    call_type,
    pickled_field,
    result_col,
)
from udm.host.spark.decode import decode_pickled
from udm.host.spark.endpoints import endpoint_results
from udm.host.spark.evaluate import make_group_fn, make_merge_fn, make_partial_fn
from udm.host.spark.frame import (
    EventFrame,
    Projection,
    WindowJob,
    apply_in_arrow,
    map_in_arrow,
    quoted,
)
from udm.host.spark.grid import grid_results
from udm.host.spark.types import (
    TIME_META,
    accepts,
    declared_time_result,
    expected_value_type,
)
from udm.host.spark.windows import MARK, WINDOW_END, WINDOW_ORDINAL, WINDOW_START, assign_windows
from udm.host.strategy import spark_route, use_partial

__all__ = ["evaluate_op"]


def _assigned_results(job: WindowJob) -> DataFrame:
    """Result rows of windows assigned in Spark (snapshot, count, and grid
    windows with ``emit_empty``): one row per (event, window) pair, grouped
    by key and bucket of window ordinals."""
    df, keys, op, needed, pa_schema = job.df, job.keys, job.op, job.needed, job.pa_schema
    assigned = assign_windows(df, keys, op.window, op.watermark, op.emit_empty)
    has_mark = op.emit_empty
    extra = [MARK] if has_mark else []
    assigned = assigned.selectExpr(
        *[
            quoted(c)
            for c in dict.fromkeys(
                [*keys, WINDOW_START, WINDOW_END, WINDOW_ORDINAL, S_COL, E_COL, *extra, *needed]
            )
        ]
    )
    # one Python call evaluates up to BUCKET consecutive windows of a key
    bucket = F.expr(f"{WINDOW_ORDINAL} div {spark_evaluate.BUCKET}").alias("__udm_bucket")
    if use_partial(op):
        part_schema = T.StructType(
            [
                *job.key_fields,
                T.StructField(WINDOW_START, T.LongType(), False),
                T.StructField(WINDOW_END, T.LongType(), False),
                T.StructField(WINDOW_ORDINAL, T.LongType(), False),
                T.StructField(STATE, T.BinaryType(), False),
            ]
        )
        partial = map_in_arrow(
            assigned, make_partial_fn(op, list(keys), needed, has_mark), part_schema
        )
        return apply_in_arrow(
            partial, list(keys), [bucket], make_merge_fn(op, len(keys), pa_schema), job.out_schema
        )
    return apply_in_arrow(
        assigned,
        list(keys),
        [bucket],
        make_group_fn(op, len(keys), needed, pa_schema, has_mark),
        job.out_schema,
    )


def evaluate_op(
    frame: EventFrame, keys: tuple[str, ...], op: WindowOp
) -> tuple[EventFrame, Layout]:
    """The output event table of a window operation."""
    payload = frame.columns
    for c in op.calls:
        missing = [col for col in (c.columns() or []) if col not in payload]
        if missing and frame.blank:  # no events: the in-process engines' empty result
            frame, payload = frame.with_nulls(missing), [*payload, *missing]
        elif missing:
            raise KeyError(
                f"value column(s) {missing} of {c.name!r} are not in the stream; columns: {payload}"
            )
    types = [call_type(c) for c in op.calls]
    schema_of = {c: frame.field(c) for c in dict.fromkeys([*keys, *_values(op)])}
    for c in op.calls:
        expected = expected_value_type(c.udm) if isinstance(c.value, str) else None
        if expected is not None and isinstance(c.value, str):
            column = schema_of[c.value].dataType
            if not accepts(expected, column):
                raise TypeError(
                    f"UDM {c.udm.name!r} takes {expected.__name__} values, but column "
                    f"{c.value!r} is {column.simpleString()}; cast the column (e.g. "
                    f"df.withColumn({c.value!r}, F.col({c.value!r}).cast('double'))) "
                    "or pass another value="
                )
    whole = any(c.columns() is None for c in op.calls)
    needed = (
        payload
        if whole
        else list(dict.fromkeys([*keys, *(col for c in op.calls for col in (c.columns() or []))]))
    )
    out_fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        *[T.StructField(k, schema_of[k].dataType, True) for k in keys],
    ]
    for i, (t, c) in enumerate(zip(types, op.calls, strict=True)):
        # an aggregate declared -> Ticks: its column is a time (frame.output)
        time = c.returns is None and declared_time_result(c.udm)
        meta = {TIME_META: True} if time and isinstance(t, T.LongType) else None
        out_fields.append(
            pickled_field(result_col(i))
            if t is None
            else T.StructField(result_col(i), t, True, metadata=meta)
        )
    out_schema = T.StructType(out_fields)
    pa_schema = arrow_schema_with_marks(out_schema)
    key_fields = [T.StructField(k, schema_of[k].dataType, True) for k in keys]
    job = WindowJob(frame, keys, op, needed, key_fields, out_schema, pa_schema)
    route = spark_route(op)
    if route == "grid":
        result = grid_results(job, points=frame.points)
    elif route == "endpoints":
        result = endpoint_results(job)
    else:
        result = _assigned_results(job)
    pickled = [result_col(i) for i, t in enumerate(types) if t is None]
    if pickled:
        labels = {result_col(i): f"UDM {c.udm.name!r}" for i, c in enumerate(op.calls)}
        result, inferred = decode_pickled(result, pickled, labels, keys)
        types = [inferred.get(result_col(i), t) for i, t in enumerate(types)]
    structs = [list(t.fieldNames()) if isinstance(t, T.StructType) else None for t in types]
    cols = result_columns(op, structs)
    check_output_names(keys, op, cols)
    index = {c.name: i for i, c in enumerate(op.calls)}
    select = [(S_COL, S_COL), (E_COL, E_COL), *[(k, quoted(k)) for k in keys]]
    for col, call_name, field in cols:
        src = result_col(index[call_name])
        select.append((col, src if field is None else f"{src}.{quoted(field)}"))
    # the output's time columns are composed with these names (one step)
    # when which columns are times is known here: direct result columns
    # keep their field's mark; struct fields and decoded columns: ask Spark
    marks = {f.name for f in out_schema.fields if f.metadata.get(TIME_META)}
    nested = any(_nested_marks(f.dataType) for f in out_schema.fields)
    marked = (
        None
        if pickled or nested
        else frozenset(
            col for col, call, field in cols if field is None and result_col(index[call]) in marks
        )
    )
    projection = Projection(result, tuple(select), marked=marked)
    return EventFrame(projection, frame.time), op_layout(op, cols)


def _values(op: WindowOp) -> list[str]:
    """The value columns the calls read by name (their types are checked)."""
    return [c.value for c in op.calls if isinstance(c.value, str)]


def _nested_marks(t: T.DataType) -> bool:
    """Whether a struct (or array or map of them) marks a field as a time."""
    if isinstance(t, T.StructType):
        return any(f.metadata.get(TIME_META) or _nested_marks(f.dataType) for f in t.fields)
    if isinstance(t, T.ArrayType):
        return _nested_marks(t.elementType)
    if isinstance(t, T.MapType):
        return _nested_marks(t.keyType) or _nested_marks(t.valueType)
    return False
