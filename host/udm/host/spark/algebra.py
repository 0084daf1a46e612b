"""The CEDR operators on Spark batch: union, lifetimes, joins, Finalize.

* **union**: ``unionByName`` of the event tables (a column one side lacks
  is null there).
* **alter_lifetime**: the shortcuts (``shift``, ``set_duration``,
  ``to_points``, ``clip_to``) are column expressions; other functions run
  in Python workers over Arrow batches, and the start function's
  monotonicity is checked over every pair of distinct starts (a sort).
* **join**: a range-bucketed interval join: each event is listed in every
  time bucket its lifetime touches (an open end stops at the last bucket
  any event starts in), the two sides join on the key columns and the
  bucket with the overlap condition, and a pair is kept only in the bucket
  where its intersection starts, so no pair is produced twice and no key
  is a cross product. The bucket width is the mean finite duration, from
  one aggregation over both sides. ``where=`` filters the joined rows in
  Python workers; ``select=`` builds their payloads there, typed from the
  values (as a ``.select`` UDF without a declared type).
* **left_anti_join**: both sides cogrouped by the key columns, each group
  answered by :func:`udm.host.algebra.anti_join_rows` in a worker.
* **finalize** with bounded memory: defined over a physical stream, which
  an in-memory source holds; computed on the driver as the reference does.

The Spark engine (:mod:`udm.host.spark.execute`) takes them from :data:`HANDLERS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host import plan as logical
from udm.host.algebra import anti_join_rows, joined_columns, new_lifetime, pair_udf
from udm.host.errors import OperatorError
from udm.host.plan import E_COL, S_COL, SCALAR_COL, PlanNode
from udm.host.rows import Layout
from udm.host.spark.frame import EventFrame, from_rows, map_in_arrow, quoted, sql_string
from udm.host.spark.join_select import select_pairs
from udm.host.spark.mixedtypes import check_join_keys, check_union_columns
from udm.host.spark.session import share_driver_python
from udm.host.spark.table import SparkRunner, SparkTable
from udm.host.spark.types import function_result_type
from udm.host.time import INFINITY, MIN_TIME
from udm.host.windowspec import IndexBound

__all__ = ["HANDLERS"]

_INF = f"{INFINITY}L"
_LEFT, _RIGHT = "__udm_l_", "__udm_r_"


def _dict_layout(columns: list[str]) -> Layout:
    return Layout(None, tuple((c, c) for c in columns))


# ------------------------------------------------------------------ union


def _union(engine: SparkRunner, node: PlanNode) -> SparkTable:
    assert isinstance(node, logical.UnionNode)
    tables = [engine.run(p) for p in node.parts]
    keys = {t.keys for t in tables}
    if len(keys) != 1:
        raise OperatorError("union", f"the streams have different key columns {sorted(keys)}")
    kinds = {t.frame.time for t in tables}
    if len(kinds) != 1:
        raise OperatorError(
            "union",
            f"the streams' times are of different kinds {sorted(kinds)}; convert one "
            "(timestamps or ticks) before the union",
        )
    scalar = all(t.scalar for t in tables)
    # a scalar part without events (``from_events([], key=...)``) has the
    # scalar column only so that a window over it can read one: no column
    # of the union's, as on the in-process engines
    placeholder = [
        not scalar and t.scalar and t.frame.blank and SCALAR_COL in t.frame.columns
        for t in tables
    ]
    parts = [
        t.frame.df.drop(SCALAR_COL) if drop else t.frame.df
        for t, drop in zip(tables, placeholder, strict=True)
    ]
    columns = list(
        dict.fromkeys(
            c
            for t, drop in zip(tables, placeholder, strict=True)
            for c in t.frame.columns
            if not (drop and c == SCALAR_COL)
        )
    )
    check_union_columns(parts, columns)  # before Spark coerces them
    df: DataFrame = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part, allowMissingColumns=True)
    frame = EventFrame(df, tables[0].frame.time, all(t.frame.points for t in tables))
    layout = Layout(SCALAR_COL, ()) if scalar else _dict_layout(frame.columns)
    return SparkTable(frame, keys.pop(), layout, scalar)


# -------------------------------------------------------------- lifetimes


def _shortcut(node: logical.AlterLifetimeNode) -> tuple[str, str] | None:
    """(start, end) SQL expressions of a shortcut, or None for a function."""
    s, e, d = quoted(S_COL), quoted(E_COL), node.amount
    if node.form == "shift":
        past = f"{e} >= {INFINITY - d}L" if d >= 0 else "false"
        end = (
            f"CASE WHEN {e} >= {_INF} THEN {_INF} "
            f"WHEN {past} THEN {_past_the_end(node, e)} ELSE {e} + ({d}L) END"
        )
        return _shifted_start(node), end
    if node.form == "set_duration" and d >= INFINITY:
        return s, _INF  # an infinite duration: every event never ends
    if node.form in ("set_duration", "to_points"):
        past = f"CASE WHEN {e} >= {_INF} THEN {_INF} ELSE {_past_the_end(node, s)} END"
        return s, f"CASE WHEN {s} >= {INFINITY - d}L THEN {past} ELSE {s} + ({d}L) END"
    if node.form == "clip_to":
        # never e - s (an open end minus a negative start overflows) nor
        # e - d (an end near the beginning of time): s + d, once it fits
        fits = f"CASE WHEN {s} >= {INFINITY - d}L THEN {e} "
        return s, fits + f"WHEN {e} > {s} + {d}L THEN {s} + {d}L ELSE {e} END"
    return None


def _shifted_start(node: logical.AlterLifetimeNode) -> str:
    """SQL of a shifted start, failing the query for a start the shift
    takes out of the time range ``[MIN_TIME, INFINITY)`` with the message
    of :func:`udm.host.algebra.mapped_start` (never Spark's overflow, nor
    a silent ``-2**63``). The bound is compared before adding, so the sum
    is only computed when it fits."""
    s, e, d = quoted(S_COL), quoted(E_COL), node.amount
    if d >= 0:
        bound = INFINITY - d  # s + d >= INFINITY <=> s >= bound
        out = "true" if bound < MIN_TIME else f"{s} >= {bound}L"
    else:
        bound = MIN_TIME - d  # s + d < MIN_TIME <=> s < bound
        out = "true" if bound > INFINITY else f"{s} < {bound}L"
    new_start = f"CAST(CAST({s} AS DECIMAL(20, 0)) + {d} AS STRING)"
    error = (
        f"raise_error(concat('udm.host.errors.OperatorError: ', {sql_string(node.describe())}, "
        f"' at (', CAST({s} AS STRING), ', ', CAST({e} AS STRING), '): the new start ', "
        f"{new_start}, ' is outside the time range'))"
    )
    return f"CASE WHEN {out} THEN {error} ELSE {s} + ({d}L) END"


def _past_the_end(node: logical.AlterLifetimeNode, base: str) -> str:
    """SQL failing the query for a finite event whose new end ``base +
    amount`` reaches the end of time, with the message of
    :func:`udm.host.algebra.new_lifetime` (an ``OperatorError`` again once
    :func:`udm.host.spark.errors.translate_error` reads it)."""
    s, e = quoted(S_COL), quoted(E_COL)
    new_end = f"CAST(CAST({base} AS DECIMAL(20, 0)) + {node.amount} AS STRING)"
    return (
        f"raise_error(concat('udm.host.errors.OperatorError: ', {sql_string(node.describe())}, "
        f"': the event [', CAST({s} AS STRING), ', ', CAST({e} AS STRING), ') would end at ', "
        f"{new_end}, ', at or past the end of time ({INFINITY}), which means it never ends; "
        "a finite event must stay finite'))"
    )


def _alter(engine: SparkRunner, node: PlanNode) -> SparkTable:
    assert isinstance(node, logical.AlterLifetimeNode)
    before = engine.run(node.input)
    frame = before.frame
    shortcut = _shortcut(node)
    payload = [quoted(c) for c in frame.columns]
    if shortcut is not None:
        start, end = shortcut
        df = frame.df.selectExpr(f"{start} AS {S_COL}", f"{end} AS {E_COL}", *payload)
    else:
        df = _alter_in_python(node, frame.df)
    points = frame.points and node.form in ("shift", "to_points")
    return SparkTable(EventFrame(df, frame.time, points), before.keys, before.layout, before.scalar)


def _alter_in_python(node: logical.AlterLifetimeNode, df: DataFrame) -> DataFrame:
    start_fn, duration_fn, name = node.start_fn, node.duration_fn, node.describe()
    if start_fn is not None:
        _check_monotone(df, start_fn, name)

    def mapped(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            starts = batch.column(S_COL).to_pylist()
            ends = batch.column(E_COL).to_pylist()
            new_s, new_e = [], []
            for s, e in zip(starts, ends, strict=True):
                ns, ne = new_lifetime(s, e, start_fn, duration_fn, name, (s, e))
                new_s.append(ns)
                new_e.append(ne)
            columns = [pa.array(new_s, pa.int64()), pa.array(new_e, pa.int64())]
            rest = [c for c in batch.schema.names if c not in (S_COL, E_COL)]
            columns += [batch.column(c) for c in rest]
            yield pa.RecordBatch.from_arrays(columns, names=[S_COL, E_COL, *rest])

    schema = T.StructType(
        [
            T.StructField(S_COL, T.LongType(), False),
            T.StructField(E_COL, T.LongType(), False),
            *[f for f in df.schema.fields if f.name not in (S_COL, E_COL)],
        ]
    )
    return map_in_arrow(df, mapped, schema)


def _check_monotone(df: DataFrame, start_fn: Any, name: str) -> None:
    """The start function over every distinct start, in order: it must
    not decrease (CEDR 4.2's first constraint)."""
    starts = [r[0] for r in df.select(S_COL).distinct().orderBy(S_COL).collect()]
    previous = None
    for s in starts:
        mapped = int(start_fn(s))
        if previous is not None and mapped < previous[1]:
            raise OperatorError(
                name,
                f"the start function is not monotone: start {previous[0]} maps to "
                f"{previous[1]} but the later start {s} maps to {mapped}",
            )
        previous = (s, mapped)


# ------------------------------------------------------------------- join


def _with_on(
    where: str, on: tuple[str, ...], left: SparkTable, right: SparkTable
) -> tuple[SparkTable, SparkTable]:
    """Both sides with every key column. A side without events may lack
    them (an in-memory stream without events has no columns): it gets
    them as null columns of the other side's type (else void), since no
    row of it can meet another, as the in-process engines check columns
    only against events. A side with events that lacks one is refused."""
    out = []
    for side, table, other in (("left", left, right), ("right", right, left)):
        missing = [k for k in on if k not in table.frame.columns]
        if not missing:
            out.append(table)
            continue
        df = table.frame.df
        if df.isStreaming or not df.isEmpty():  # a job only when a key column is missing
            raise OperatorError(
                where,
                f"the {side} stream has no column(s) {missing}; its columns: {table.frame.columns}",
            )
        types = {f.name: f.dataType for f in other.frame.df.schema.fields}
        for k in missing:
            df = df.withColumn(k, F.lit(None).cast(types.get(k, T.NullType())))
        out.append(dataclasses.replace(table, frame=table.frame.with_df(df)))
    return out[0], out[1]


#: at most this many buckets between the first and the last start: an
#: event explodes into one row per bucket it spans, so an open one (or one
#: far longer than the mean) must not span 2**63 of them
_MAX_BUCKETS = 1 << 20


def _bucket_width(left: DataFrame, right: DataFrame) -> tuple[int, int]:
    """(bucket width, last bucket any event starts in) over both sides: the
    mean finite duration, widened so that the starts span at most
    :data:`_MAX_BUCKETS` buckets. Durations and spans are taken as doubles:
    times at the ends of the tick range (``[MIN_TIME, 5)``) overflow a
    long's difference."""
    both = left.select(S_COL, E_COL).unionByName(right.select(S_COL, E_COL))
    s, e = F.col(S_COL).cast("double"), F.col(E_COL).cast("double")
    row = both.agg(
        F.max(S_COL).alias("last"),
        F.min(S_COL).alias("first"),
        F.avg(F.when(F.col(E_COL) < F.lit(INFINITY), e - s)).alias("mean"),
    ).collect()[0]
    if row["last"] is None:
        return 1, 0
    span = (float(row["last"]) - float(row["first"])) / _MAX_BUCKETS
    width = min(max(1, int(row["mean"] or 1), math.ceil(span)), INFINITY)
    return width, int(row["last"]) // width


def _floor_div(ticks: str, width: int) -> Column:
    """SQL ``floor(ticks / width)`` in exact long arithmetic, as Python's
    ``//`` (a double quotient rounds near the ends of the tick range, past
    the longs, failing the cast): the grid's own exact floor division
    (:meth:`~udm.host.windowspec.IndexBound.sql`)."""
    return F.expr(IndexBound(shift=0, step=width, add=0).sql(ticks))


def _bucketed(df: DataFrame, width: int, last: int, name: str) -> DataFrame:
    """Each event once per bucket its lifetime overlaps, up to the last
    bucket an event starts in (a pair starts at the later of the starts,
    in a bucket both events overlap)."""
    first = _floor_div(quoted(S_COL), width)
    upto = F.least(_floor_div(f"{quoted(E_COL)} - 1L", width), F.lit(last))
    return df.withColumn(name, F.explode(F.sequence(first, F.greatest(first, upto))))


def _join(engine: SparkRunner, node: PlanNode) -> SparkTable:
    assert isinstance(node, logical.JoinNode)
    left, right = _with_on(node.describe(), node.on, engine.run(node.left), engine.run(node.right))
    if left.frame.time != right.frame.time:
        raise OperatorError(
            node.describe(),
            f"the left stream's times are {left.frame.time} and the right's "
            f"{right.frame.time}; convert one (timestamps or ticks) before the join",
        )
    on = node.on
    check_join_keys(node.describe(), on, left.frame.df, right.frame.df)
    lcols = [c for c in left.frame.columns if c not in on]
    rcols = [c for c in right.frame.columns if c not in on]
    clash = set(lcols) & set(rcols)
    joined_columns(lcols, rcols, on, node.suffixes, node.describe())  # no name made twice
    width, last = _bucket_width(left.frame.df, right.frame.df)
    ldf = _bucketed(left.frame.df, width, last, "__udm_lb").select(
        *[F.col(quoted(c)).alias(_LEFT + c) for c in [S_COL, E_COL, *on, *lcols]], "__udm_lb"
    )
    rdf = _bucketed(right.frame.df, width, last, "__udm_rb").select(
        *[F.col(quoted(c)).alias(_RIGHT + c) for c in [S_COL, E_COL, *on, *rcols]], "__udm_rb"
    )
    ls, le, rs, re = (
        F.col(_LEFT + S_COL),
        F.col(_LEFT + E_COL),
        F.col(_RIGHT + S_COL),
        F.col(_RIGHT + E_COL),
    )
    start = F.greatest(ls, rs)
    ls_sql, rs_sql = quoted(_LEFT + S_COL), quoted(_RIGHT + S_COL)
    cond = [F.col("__udm_lb") == F.col("__udm_rb")]
    cond += [F.col(_LEFT + k).eqNullSafe(F.col(_RIGHT + k)) for k in on]
    joined = ldf.join(rdf, on=cond, how="inner").where(
        (start < F.least(le, re))
        & (_floor_div(f"greatest({ls_sql}, {rs_sql})", width) == F.col("__udm_lb"))
    )
    payloads = _pair_payloads(node, left, right, lcols, rcols)
    if node.where is not None:
        joined = _where_pairs(node, joined, payloads)
    if node.select is not None:
        joined = joined.withColumn(S_COL, start).withColumn(E_COL, F.least(le, re))
        df = _select_pairs(node, joined, payloads)
        frame = EventFrame(df, left.frame.time, False)
        return SparkTable(frame, on, _dict_layout(frame.columns), False)
    out = [start.alias(S_COL), F.least(le, re).alias(E_COL)]
    out += [F.col(_LEFT + k).alias(k) for k in on]
    out += [F.col(_LEFT + c).alias(c + node.suffixes[0] if c in clash else c) for c in lcols]
    out += [F.col(_RIGHT + c).alias(c + node.suffixes[1] if c in clash else c) for c in rcols]
    df = joined.select(*out)
    frame = EventFrame(df, left.frame.time, False)
    return SparkTable(frame, on, _dict_layout(frame.columns), False)


def _seen(scalar: bool, columns: list[str], row: Mapping[str, Any]) -> Any:
    return row[SCALAR_COL] if scalar else {c: row[c] for c in columns}


def _pair_payloads(
    node: logical.JoinNode, left: SparkTable, right: SparkTable, lcols: list[str], rcols: list[str]
) -> Callable[[Mapping[str, Any]], tuple[Any, Any]]:
    """What ``where``/``select`` receive for a joined row: each side's
    payload dict (``on`` columns included), or a scalar stream's value,
    as the reference engine gives them."""
    lnames = [*node.on, *lcols]
    rnames = [*node.on, *rcols]
    lscalar, rscalar = left.scalar, right.scalar

    def payloads(r: Mapping[str, Any]) -> tuple[Any, Any]:
        lp = {c: r[_LEFT + c] for c in lnames}
        rp = {c: r[_RIGHT + c] for c in rnames}
        return _seen(lscalar, lnames, lp), _seen(rscalar, rnames, rp)

    return payloads


def _where_pairs(
    node: logical.JoinNode,
    joined: DataFrame,
    payloads: Callable[[Mapping[str, Any]], tuple[Any, Any]],
) -> DataFrame:
    """The joined rows whose pair of ``payloads`` satisfies ``where(l, r)``."""
    assert node.where is not None
    predicate = pair_udf(node.where, "where", node.describe())

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            flags = [bool(predicate(*payloads(r))) for r in batch.to_pylist()]
            yield batch.filter(pa.array(flags, pa.bool_()))

    return map_in_arrow(joined, keep, joined.schema)


def _select_pairs(
    node: logical.JoinNode,
    joined: DataFrame,
    payloads: Callable[[Mapping[str, Any]], tuple[Any, Any]],
) -> DataFrame:
    """The joined rows with their payloads built by ``select(l, r)`` (see
    :mod:`udm.host.spark.join_select`)."""
    assert node.select is not None
    on, name = node.on, node.describe()
    with_on = joined.select("*", *[F.col(_LEFT + k).alias(k) for k in on])
    return select_pairs(
        with_on,
        pair_udf(node.select, "select", name),
        function_result_type(node.select),
        on,
        payloads,
        f"{name}: select",
    )


def _anti_join(engine: SparkRunner, node: PlanNode) -> SparkTable:
    assert isinstance(node, logical.AntiJoinNode)
    left, right = _with_on(node.describe(), node.on, engine.run(node.left), engine.run(node.right))
    on = node.on
    check_join_keys(node.describe(), on, left.frame.df, right.frame.df)
    where = None if node.where is None else pair_udf(node.where, "where", node.describe())
    lcols, rcols = left.frame.columns, right.frame.columns
    lscalar, rscalar = left.scalar, right.scalar
    schema = left.frame.df.schema
    names = [f.name for f in schema.fields]

    def rows_of(table: pa.Table) -> list[tuple[int, int, dict[str, Any]]]:
        out = []
        for r in table.to_pylist():
            s, e = r.pop(S_COL), r.pop(E_COL)
            r.pop("__udm_g", None)
            out.append((s, e, r))
        return out

    def per_key(lt: pa.Table, rt: pa.Table) -> pa.Table:
        def wrap(p: Mapping[str, Any], is_left: bool) -> Any:
            if is_left:
                return _seen(lscalar, lcols, p)
            return _seen(rscalar, rcols, p)

        pieces = anti_join_rows(rows_of(lt), rows_of(rt), on, where, wrap)
        records = [{S_COL: s, E_COL: e, **p} for s, e, p in pieces]
        arrow = pa.Table.from_pylist(records, schema=lt.schema) if records else lt.slice(0, 0)
        return arrow.select(names)

    lg, rg = left.frame.df, right.frame.df
    if not on:
        lg, rg = lg.withColumn("__udm_g", F.lit(0)), rg.withColumn("__udm_g", F.lit(0))
    by = list(on) or ["__udm_g"]
    share_driver_python(lg.sparkSession)  # PySpark reads the workers' interpreter here
    df = lg.groupBy(*by).cogroup(rg.groupBy(*by)).applyInArrow(per_key, schema)
    frame = EventFrame(df, left.frame.time, False)
    return SparkTable(frame, left.keys, left.layout, left.scalar)


# --------------------------------------------------------------- finalize


def _finalize(engine: SparkRunner, node: PlanNode) -> SparkTable:
    assert isinstance(node, logical.FinalizeNode)
    if node.remember >= INFINITY:
        return engine.run(node.input)
    from udm.host.engines import get_engine

    # bounded memory is defined over the physical stream of an in-memory
    # source: finalize it on the driver, as the reference engine does
    rows, _, metrics = get_engine("reference").collect(node)
    groups: list[logical.GroupNode] = []
    current = node.input
    while isinstance(current, logical.GroupNode):
        groups.append(current)
        current = current.input
    assert isinstance(current, logical.Source)
    frame = from_rows(engine.session(), rows, current.timestamps)
    engine.add_metrics(metrics)
    keys = groups[0].group_keys if groups else ()
    layout = Layout(SCALAR_COL, ()) if current.scalar else _dict_layout(frame.columns)
    return SparkTable(frame, keys, layout, current.scalar)


#: how the Spark engine runs each CEDR operator (``engine`` is the
#: :class:`~udm.host.spark.execute.SparkEngine` running the plan)
HANDLERS: dict[type[PlanNode], Callable[[SparkRunner, PlanNode], SparkTable]] = {
    logical.UnionNode: _union,
    logical.AlterLifetimeNode: _alter,
    logical.JoinNode: _join,
    logical.AntiJoinNode: _anti_join,
    logical.FinalizeNode: _finalize,
}
