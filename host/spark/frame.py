"""Event tables in Spark: input rows normalized to int64 tick lifetimes.

Every stage of a Spark query works on an :class:`EventFrame`: a DataFrame
whose first two columns are the lifetime in ticks (``__udm_s``,
``__udm_e``; :data:`~udm.host.INFINITY` for an event that never ends),
followed by the payload columns (key columns included). The time kind of
the source decides how ``start``/``end`` are shown again at the output.

Invalid rows (null or unparsable times, an end not after the start) either
fail the query with ``raise_error`` naming the column and showing the row
(lazily, as part of the query itself: no extra pass over the data) or are
dropped and counted by an ``Observation`` (``on_invalid="drop"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.query import (
    E_COL,
    S_COL,
    QueryMetrics,
    Row,
    Source,
    reason_end_of_time,
    reason_no_end,
    reason_null,
    reason_order,
    reason_unparsable,
)
from udm.host.time import INFINITY

__all__ = ["EventFrame", "TimeKind", "from_rows", "normalize", "output", "q"]

TimeKind = Literal["long", "timestamp", "timestamp_ntz"]
_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


def _inf() -> Column:
    return F.lit(INFINITY).cast("long")


def q(name: str) -> str:
    """A column name quoted for SQL expressions."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class EventFrame:
    """A normalized event table and how to show its times."""

    df: DataFrame
    time: TimeKind

    @property
    def columns(self) -> list[str]:
        """Payload columns (everything but the lifetime)."""
        return [c for c in self.df.columns if c not in (S_COL, E_COL)]

    def with_df(self, df: DataFrame) -> EventFrame:
        return EventFrame(df, self.time)


def _ticks(name: str, dtype: T.DataType) -> tuple[Column, Column | None, TimeKind]:
    """(ticks, parse-failed flag or None, time kind) of a time column."""
    c = F.col(name)
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(c), None, "timestamp"
    if isinstance(dtype, T.TimestampNTZType):
        return F.expr(f"timestampdiff(MICROSECOND, {_EPOCH_NTZ}, {q(name)})"), None, "timestamp_ntz"
    if isinstance(dtype, T.DateType):
        return F.unix_date(c).cast("long") * F.lit(86_400_000_000), None, "timestamp"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return c.cast("long"), None, "long"
    if isinstance(dtype, T.StringType):
        parsed = F.try_to_timestamp(c)
        return F.unix_micros(parsed), c.isNotNull() & parsed.isNull(), "timestamp"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; event times must be timestamps, "
        "dates, integer ticks (microseconds since 1970-01-01 UTC) or ISO 8601 strings"
    )


def normalize(source: Source) -> tuple[EventFrame, QueryMetrics]:
    """The event table of a DataFrame source, with its invalid-row policy."""
    df: DataFrame = source.df
    schema = {f.name: f.dataType for f in df.schema.fields}
    start = source.start
    s_ticks, s_bad, kind = _ticks(start, schema[start])
    checks: list[tuple[Column, str]] = [(F.col(start).isNull(), reason_null(start))]
    if s_bad is not None:
        checks.append((s_bad, reason_unparsable(start)))
    end = source.end
    if end is None:
        checks.append((s_ticks >= _inf(), reason_end_of_time(start)))
        e_ticks = F.when(s_ticks >= _inf(), _inf()).otherwise(s_ticks + F.lit(1))
    else:
        raw_e, e_bad, e_kind = _ticks(end, schema[end])
        if (e_kind == "long") != (kind == "long"):
            raise TypeError(
                f"start column {start!r} ({schema[start].simpleString()}) and end column "
                f"{end!r} ({schema[end].simpleString()}) must both be times or both be ticks"
            )
        if source.shape == "edge":
            e_ticks = F.coalesce(raw_e, _inf())
        else:
            checks.append((F.col(end).isNull(), reason_no_end(end)))
            e_ticks = raw_e
        if e_bad is not None:
            checks.append((e_bad, reason_unparsable(end)))
        checks.append((e_ticks <= s_ticks, reason_order(start, end)))
    problem: Column = F.lit(None).cast("string")
    for cond, reason in reversed(checks):
        problem = F.when(cond, F.lit(reason)).otherwise(problem)
    payload = [c for c in df.columns if c not in (start, end)]
    metrics = QueryMetrics({})
    if source.on_invalid == "drop":
        obs = Observation()
        reasons = list(dict.fromkeys(r for _, r in checks))
        prob = "__udm_problem"
        tagged = df.withColumn(prob, problem)
        tagged = tagged.observe(
            obs, *[F.sum(F.when(F.col(prob) == r, 1).otherwise(0)).alias(r) for r in reasons]
        )
        metrics = QueryMetrics(observation=obs)
        out = tagged.where(F.col(prob).isNull()).select(
            s_ticks.alias(S_COL), e_ticks.alias(E_COL), *[F.col(q(c)) for c in payload]
        )
    else:
        row_json = F.to_json(
            F.struct(*[F.col(q(c)) for c in df.columns]), {"ignoreNullFields": "false"}
        )
        message = F.concat(
            F.lit("invalid event: "),
            problem,
            F.lit("; row: "),
            F.coalesce(row_json, F.lit("?")),
            F.lit(
                ". Fix the data, or pass on_invalid='drop' to drop such rows and count them "
                "(stream.metrics.invalid_rows())"
            ),
        )
        guarded = F.when(problem.isNotNull(), F.raise_error(message)).otherwise(s_ticks)
        out = df.select(
            guarded.cast("long").alias(S_COL),
            e_ticks.cast("long").alias(E_COL),
            *[F.col(q(c)) for c in payload],
        )
    return EventFrame(out, kind), metrics


def from_rows(spark: SparkSession, rows: list[Row], timestamps: bool) -> EventFrame:
    """An event table from in-memory rows (Arrow infers payload types)."""
    import pyarrow as pa

    records = [{S_COL: s, E_COL: e, **p} for s, e, p in rows]
    if records:
        table = pa.Table.from_pylist(records)
    else:
        table = pa.table({S_COL: pa.array([], pa.int64()), E_COL: pa.array([], pa.int64())})
    df = spark.createDataFrame(table)
    return EventFrame(df, "timestamp" if timestamps else "long")


def output(frame: EventFrame) -> DataFrame:
    """The user-facing table: ``start``, ``end`` in the source's time type
    (an infinite end is null for timestamps), then the payload columns."""
    payload = frame.columns
    clash = [c for c in payload if c in ("start", "end")]
    if clash:
        raise ValueError(
            f"payload columns {clash} clash with the output's start/end columns; "
            "rename them (select()) before running"
        )
    s, e = F.col(S_COL), F.col(E_COL)
    start: Any
    end: Any
    if frame.time == "long":
        start, end = s, e
    elif frame.time == "timestamp":
        start = F.timestamp_micros(s)
        end = F.when(e >= _inf(), F.lit(None)).otherwise(F.timestamp_micros(e))
    else:
        start = F.expr(f"timestampadd(MICROSECOND, {S_COL}, {_EPOCH_NTZ})")
        end = F.when(e >= _inf(), F.lit(None)).otherwise(
            F.expr(f"timestampadd(MICROSECOND, {E_COL}, {_EPOCH_NTZ})")
        )
    return frame.df.select(start.alias("start"), end.alias("end"), *[F.col(q(c)) for c in payload])
