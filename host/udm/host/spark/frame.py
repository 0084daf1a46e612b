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

import dataclasses
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.metrics import ROWS, QueryMetrics
from udm.host.plan import E_COL, S_COL, Row, Source, WindowOp
from udm.host.rows import (
    SUB_MICROSECOND,
    reason_end_of_time,
    reason_no_end,
    reason_null,
    reason_order,
    reason_sub_microsecond,
    reason_unparsable,
)
from udm.host.spark.rowtypes import arrow_table
from udm.host.spark.session import share_driver_python
from udm.host.spark.types import TIME_META
from udm.host.time import INFINITY, MIN_TIME

__all__ = [
    "EventFrame",
    "TimeKind",
    "WindowJob",
    "apply_in_arrow",
    "from_rows",
    "map_in_arrow",
    "normalize",
    "ntz_ticks",
    "ntz_time",
    "output",
    "quoted",
    "show_time",
    "sql_string",
    "sub_microsecond_check",
]

TimeKind = Literal["long", "timestamp", "timestamp_ntz"]
_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


_INF = f"{INFINITY}L"
_MIN = f"{MIN_TIME}L"


def show_time(col: str, kind: TimeKind, end_of_time: int = INFINITY) -> Column:
    """A ticks column as the input showed times: ticks as they are, else a
    timestamp (``timestamp_ntz``: the wall time in UTC, whatever the session
    time zone), null from ``end_of_time`` on (the end of time)."""
    c = F.col(col)
    if kind == "long":
        return c
    shown = F.timestamp_micros(c) if kind == "timestamp" else F.expr(ntz_time(quoted(col)))
    return F.when(c >= F.lit(end_of_time), F.lit(None)).otherwise(shown)


def ntz_ticks(sql: str) -> str:
    """SQL: the ticks of a ``timestamp_ntz`` expression, its wall time read
    as UTC (``unix_micros`` of a cast would read it in the session zone)."""
    return f"timestampdiff(MICROSECOND, {_EPOCH_NTZ}, {sql})"


def ntz_time(ticks: str) -> str:
    """SQL: a ticks expression as the ``timestamp_ntz`` of that wall time
    in UTC (the inverse of :func:`ntz_ticks`)."""
    return f"timestampadd(MICROSECOND, {ticks}, {_EPOCH_NTZ})"


def quoted(name: str) -> str:
    """A column name quoted for SQL expressions (and ``F.col``): a name with
    dots, spaces or backticks is one column, not a struct path."""
    return "`" + name.replace("`", "``") + "`"


#: the former name of :func:`quoted`, still read by the window modules
#: another change is reworking (grid, evaluate, members, algebra)


def sql_string(text: str) -> str:
    """A SQL string literal of ``text`` (Spark's backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class WindowJob:
    """One window operation as each of its Spark routes (grid, endpoints,
    windows assigned in Spark) receives it: the event rows and group keys,
    the operation and the payload columns its calls read, and the shape
    of its result rows (key fields, the Spark schema and its Arrow form),
    which :func:`udm.host.spark.windowop.evaluate_op` works out once."""

    frame: EventFrame
    keys: tuple[str, ...]
    op: WindowOp
    needed: list[str]
    key_fields: list[T.StructField]
    out_schema: T.StructType
    pa_schema: pa.Schema

    @property
    def df(self) -> DataFrame:
        """The event rows as a DataFrame (routes that project them further
        use ``frame.select``: one DataFrame step, not two)."""
        return self.frame.df


@dataclass(frozen=True)
class Projection:
    """A projection of ``base`` not yet handed to Spark: ``columns`` are
    (name, SQL expression over ``base``) pairs, in output order.

    Every DataFrame step of a classic session is analysed in the JVM when
    it is made (tens of milliseconds each while the JVM is cold), so a
    step that only renames or drops columns is better composed with the
    next one: the source's projection with a window operation's choice of
    input columns, a window's result names with the output's times.
    ``fields``: payload columns passed through unchanged, with their Spark
    fields (known on the Python side, no schema round trip); ``marked``:
    the columns carrying :data:`~udm.host.spark.types.TIME_META`, when
    known (None: ask Spark)."""

    base: DataFrame
    columns: tuple[tuple[str, str], ...]
    fields: tuple[T.StructField, ...] = ()
    marked: frozenset[str] | None = None

    def sql(self, name: str) -> str:
        """The SQL expression of column ``name``, over ``base``."""
        return dict(self.columns)[name]

    def select(self, names: Sequence[str]) -> DataFrame:
        """``base`` projected to ``names`` (columns of this projection) in
        one DataFrame step."""
        of = dict(self.columns)
        return self.base.selectExpr(*[_aliased(of[n], n) for n in names])


def _aliased(sql: str, name: str) -> str:
    """``sql AS name``, or just the column when ``sql`` is that column."""
    q = quoted(name)
    return q if sql == q else f"{sql} AS {q}"


class EventFrame:
    """A normalized event table and how to show its times.

    ``table``: the DataFrame, or a :class:`Projection` of one that becomes
    a DataFrame only when something reads :attr:`df` (a window operation
    or the output may compose it with their own step instead)."""

    __slots__ = ("_df", "blank", "points", "projection", "time")

    def __init__(self, table: DataFrame | Projection, time: TimeKind, points: bool = False) -> None:
        self.time: TimeKind = time
        # an in-memory source without events or known columns: a column a
        # query names is null (type void), as the in-process engines, which
        # check columns only against events, accept it (set by from_rows)
        self.blank = False
        # every event is a point [s, s + 1): a worker can derive the end from
        # the start instead of receiving it (a quarter less data for a point source)
        self.points = points
        self.projection = table if isinstance(table, Projection) else None
        self._df: DataFrame | None = None if isinstance(table, Projection) else table

    @property
    def df(self) -> DataFrame:
        """The event table as a DataFrame (a pending projection applied once)."""
        if self._df is None:
            assert self.projection is not None
            self._df = self.projection.select([n for n, _ in self.projection.columns])
        return self._df

    @property
    def names(self) -> list[str]:
        """Every column, the lifetime first (from the pending projection
        when there is one: no schema round trip)."""
        if self.projection is not None:
            return [n for n, _ in self.projection.columns]
        return list(self.df.columns)

    @property
    def columns(self) -> list[str]:
        """Payload columns (everything but the lifetime)."""
        return [c for c in self.names if c not in (S_COL, E_COL)]

    def field(self, name: str) -> T.StructField:
        """The Spark field of payload column ``name`` (Python-side when the
        projection passed it through unchanged)."""
        if self.projection is not None:
            for f in self.projection.fields:
                if f.name == name:
                    return f
        return next(f for f in self.df.schema.fields if f.name == name)

    def select(self, names: Sequence[str]) -> DataFrame:
        """The table projected to ``names`` in one DataFrame step (composed
        with a pending projection)."""
        if self.projection is not None:
            return self.projection.select(names)
        return self.df.selectExpr(*[quoted(c) for c in names])

    def with_df(self, df: DataFrame) -> EventFrame:
        """The same events, filtered or projected (lifetimes unchanged)."""
        return EventFrame(df, self.time, self.points)

    def with_nulls(self, names: Sequence[str]) -> EventFrame:
        """A blank frame with null (void) columns ``names`` added: the
        columns a query names over an in-memory source without events."""
        df = self.df
        for c in names:
            df = df.withColumn(c, F.lit(None))
        out = EventFrame(df, self.time, self.points)
        out.blank = True
        return out


def _ticks(name: str, dtype: T.DataType) -> tuple[str, str | None, TimeKind]:
    """(ticks, parse-failed flag or None, time kind) of a time column, as
    SQL expressions: planning a projection from strings takes one call
    into the JVM, from Column objects one per function and literal."""
    c = quoted(name)
    if isinstance(dtype, T.TimestampType):
        return f"unix_micros({c})", None, "timestamp"
    if isinstance(dtype, T.TimestampNTZType):
        return ntz_ticks(c), None, "timestamp_ntz"
    if isinstance(dtype, T.DateType):
        return f"(CAST(unix_date({c}) AS BIGINT) * 86400000000L)", None, "timestamp"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return f"CAST({c} AS BIGINT)", None, "long"
    if isinstance(dtype, T.StringType):
        parsed = f"try_to_timestamp({c})"
        return f"unix_micros({parsed})", f"({c} IS NOT NULL AND {parsed} IS NULL)", "timestamp"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; event times must be timestamps, "
        "dates, integer ticks (microseconds since 1970-01-01 UTC) or ISO 8601 strings"
    )



@dataclass(frozen=True)
class Checks:
    """A source's row checks as SQL: ``(condition, reason)`` pairs, the
    ones that fail the query and the ones whose rows are dropped and
    counted, and the lifetime in ticks."""

    raising: list[tuple[str, str]]
    dropping: list[tuple[str, str]]
    s_ticks: str
    e_ticks: str
    kind: TimeKind

    @staticmethod
    def problem(checks: list[tuple[str, str]]) -> str:
        """SQL naming the first check a row fails, else null."""
        if not checks:
            return "CAST(NULL AS STRING)"
        whens = " ".join(f"WHEN {cond} THEN {sql_string(reason)}" for cond, reason in checks)
        return f"CASE {whens} ELSE CAST(NULL AS STRING) END"


def reason_null_key(col: str) -> str:
    """Why a row with a null key column ``col`` is invalid (as ``on_null_key``
    reports it)."""
    return f"key {col!r} is null"


def source_checks(source: Source) -> Checks:
    """The checks of a DataFrame source's rows: times (``on_invalid``) and
    keys (``on_null_key``)."""
    df: DataFrame = source.df
    schema = {f.name: f.dataType for f in df.schema.fields}
    start = source.start
    s_ticks, s_bad, kind = _ticks(start, schema[start])
    checks: list[tuple[str, str]] = [(f"{quoted(start)} IS NULL", reason_null(start))]
    if s_bad is not None:
        checks += [sub_microsecond_check(start), (s_bad, reason_unparsable(start))]
    if kind == "long":  # -2**63 is a long but no time (to_ticks refuses it)
        checks.append((f"{s_ticks} < {_MIN}", reason_unparsable(start)))
    end = source.end
    if end is None:
        checks.append((f"{s_ticks} >= {_INF}", reason_end_of_time(start)))
        e_ticks = f"CASE WHEN {s_ticks} >= {_INF} THEN {_INF} ELSE {s_ticks} + 1L END"
    else:
        raw_e, e_bad, e_kind = _ticks(end, schema[end])
        if (e_kind == "long") != (kind == "long"):
            raise TypeError(
                f"start column {start!r} ({schema[start].simpleString()}) and end column "
                f"{end!r} ({schema[end].simpleString()}) must both be times or both be ticks"
            )
        if source.shape == "edge":
            e_ticks = f"coalesce({raw_e}, {_INF})"
        else:
            checks.append((f"{quoted(end)} IS NULL", reason_no_end(end)))
            e_ticks = raw_e
        if e_bad is not None:
            checks += [sub_microsecond_check(end), (e_bad, reason_unparsable(end))]
        if e_kind == "long":
            checks.append((f"{raw_e} < {_MIN}", reason_unparsable(end)))
        checks.append((f"{e_ticks} <= {s_ticks}", reason_order(start, end)))
    on_null_key = source.on_null_key
    keys = [(f"{quoted(k)} IS NULL", reason_null_key(k)) for k in source.key_columns]
    raising = (checks if source.on_invalid == "raise" else []) + (
        keys if on_null_key == "raise" else []
    )
    dropping = (checks if source.on_invalid == "drop" else []) + (
        keys if on_null_key == "drop" else []
    )
    return Checks(raising, dropping, s_ticks, e_ticks, kind)


def sub_microsecond_check(name: str) -> tuple[str, str]:
    """The check of a string time column for digits below a microsecond,
    which Spark's parser would drop silently (``to_ticks`` refuses them
    in-process): a nonzero digit after the sixth of the fraction."""
    # time.finer_than_a_tick's rule in SQL
    cond = f"{quoted(name)} RLIKE ':[0-9]{{2}}[.,][0-9]{{6}}[0-9]*[1-9]'"
    return cond, reason_sub_microsecond(name)


def _raise_hint(raising: list[tuple[str, str]]) -> str:
    """SQL: the advice after an invalid row, for the check of ``raising``
    (a source's :class:`Checks` ``raising``) it failed."""
    invalid = (
        ". Fix the data, or pass on_invalid='drop' to drop such rows and count them "
        "(stream.metrics.invalid_rows())"
    )
    null_key = (
        ". Fix the data, or pass on_null_key='drop' to drop such rows and count them, or "
        "on_null_key='keep' to keep them as a group of their own"
    )
    keys = [cond for cond, reason in raising if reason.startswith("key ")]
    fine = [cond for cond, reason in raising if SUB_MICROSECOND in reason]
    if fine:  # dropping would lose every such row: say how to round them
        rounding = (
            ". Fix the data: round the times to microseconds (at most six fraction digits) "
            "where the strings are made; dropping the rows would lose every such event"
        )
        rest = _raise_hint([c for c in raising if c[0] not in fine])
        return f"CASE WHEN {' OR '.join(fine)} THEN {sql_string(rounding)} ELSE {rest} END"
    if not keys:
        return sql_string(invalid)
    time_problem = Checks.problem([c for c in raising if not c[1].startswith("key ")])
    return (
        f"CASE WHEN ({time_problem}) IS NULL THEN {sql_string(null_key)} "
        f"ELSE {sql_string(invalid)} END"
    )


#: the raising validity filter of a source DataFrame, by its SQL: a
#: classic session analyses a DataFrame step in the JVM as it is made, and
#: this expression (a CASE naming the failed check, the row as JSON,
#: ``raise_error``) is the costliest step of a planned query (about 20 ms
#: of JVM CPU each time, several hundred the first time in a process); a
#: query planned again over the same DataFrame (a dashboard, a notebook
#: cell run again, a benchmark's repeats) reuses it, as the planner's
#: sample of the input is reused (:mod:`udm.host.spark.keysample`)
_CHECKED: weakref.WeakKeyDictionary[DataFrame, dict[str, DataFrame]] = (
    weakref.WeakKeyDictionary()
)


def _checked(df: DataFrame, condition: str) -> DataFrame:
    """``df.where(condition)``, made once per DataFrame and condition (a
    DataFrame is an immutable plan, and a raising filter has no state of
    its own, unlike a dropping one's ``Observation``)."""
    try:
        made = _CHECKED.setdefault(df, {})
    except TypeError:  # not weakly referable: a new step every time
        return df.where(condition)
    found = made.get(condition)
    if found is None:
        found = made[condition] = df.where(condition)
    return found


def normalize(source: Source, quiet: bool = False) -> tuple[EventFrame, QueryMetrics]:
    """The event table of a DataFrame source, with its invalid-row and
    null-key policies; ``quiet``: invalid rows are skipped, neither raised
    nor counted (the planner's sample of the input, which must not fire
    the query's checks or its ``Observation``)."""
    df: DataFrame = source.df
    checks = source_checks(source)
    if quiet:
        checks = dataclasses.replace(checks, raising=[], dropping=checks.raising + checks.dropping)
    s_ticks, e_ticks = checks.s_ticks, checks.e_ticks
    payload = [c for c in df.columns if c not in (source.start, source.end)]
    metrics = QueryMetrics({})
    if checks.raising:
        fields = ", ".join(quoted(c) for c in df.columns)
        row_json = f"to_json(struct({fields}), map('ignoreNullFields', 'false'))"
        problem = Checks.problem(checks.raising)
        message = (
            f"concat('invalid event: ', {problem}, '; row: ', coalesce({row_json}, '?'), "
            f"{_raise_hint(checks.raising)})"
        )
        # a filter, not a guard on the start column: an action that reads no
        # time column (count(), a payload-only select) would prune that
        # column and its check with it, letting invalid rows through
        df = _checked(
            df, f"CASE WHEN ({problem}) IS NOT NULL THEN raise_error({message}) ELSE true END"
        )
    if checks.dropping and quiet:
        df = df.where(f"{Checks.problem(checks.dropping)} IS NULL")
    elif checks.dropping:
        obs = Observation()
        reasons = list(dict.fromkeys(r for _, r in checks.dropping))
        prob = "__udm_problem"
        tagged = df.selectExpr("*", f"{Checks.problem(checks.dropping)} AS {prob}")
        tagged = tagged.observe(
            obs,
            *[
                F.expr(f"sum(CASE WHEN {prob} = {sql_string(r)} THEN 1 ELSE 0 END) AS {quoted(r)}")
                for r in reasons
            ],
            F.count(F.lit(1)).alias(ROWS)  # every row a dropping source read,
        )
        metrics = QueryMetrics(observation=obs)
        # the projection below leaves the problem column out (no drop step)
        df = tagged.where(f"{prob} IS NULL")
    source_fields = {f.name: f for f in source.df.schema.fields}
    out = Projection(
        df,
        (
            (S_COL, f"CAST({s_ticks} AS BIGINT)"),
            (E_COL, f"CAST({e_ticks} AS BIGINT)"),
            *[(c, quoted(c)) for c in payload],
        ),
        tuple(source_fields[c] for c in payload),
        frozenset(c for c in payload if source_fields[c].metadata.get(TIME_META)),
    )
    return EventFrame(out, checks.kind, points=source.end is None), metrics


def from_rows(
    spark: SparkSession, rows: list[Row], timestamps: bool, columns: Sequence[str] = ()
) -> EventFrame:
    """An event table from in-memory rows (Arrow infers payload types);
    ``columns`` the source knows beyond the rows' (its inserts were all
    retracted) are null columns, as the in-process engines have them.

    A table without rows is blank whatever columns it knows: the
    in-process engines check a column a query names only against events,
    so a stream without any (``from_events([Cti(5)], key="k")``, whose
    only known column is the scalar ``value``) lacks none either."""
    records = [{S_COL: s, E_COL: e, **p} for s, e, p in rows]
    if records:
        table = arrow_table(records)  # a mixed column: a TypeError naming it
    else:
        table = pa.table({S_COL: pa.array([], pa.int64()), E_COL: pa.array([], pa.int64())})
    for c in columns:
        if c not in table.column_names:
            table = table.append_column(c, pa.nulls(table.num_rows))
    df = spark.createDataFrame(table)
    frame = EventFrame(df, "timestamp" if timestamps else "long")
    frame.blank = not records
    return frame


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
    proj = frame.projection
    if proj is not None and proj.marked is not None:
        # composed with the pending projection: one DataFrame step
        of = dict(proj.columns)
        base, marked = proj.base, proj.marked
    else:
        of = {c: quoted(c) for c in frame.names}
        base = frame.df
        # result fields declared Ticks (a time) are shown as the stream shows
        # its times, not as raw ticks beside timestamp start/end columns
        marked = frozenset(f.name for f in base.schema.fields if f.metadata.get(TIME_META))

    def ticks(c: str) -> str:
        sql = of[c]
        return sql if sql == quoted(c) or sql == c else f"({sql})"

    start = _time_sql(ticks(S_COL), frame.time, ends=False)
    end = _time_sql(ticks(E_COL), frame.time, ends=True)
    shown = [
        f"{_time_sql(ticks(c), frame.time, ends=True)} AS {quoted(c)}"
        if c in marked
        else _aliased(of[c], c)
        for c in payload
    ]
    return base.selectExpr(f"{start} AS `start`", f"{end} AS `end`", *shown)


def _time_sql(ticks: str, kind: TimeKind, ends: bool) -> str:
    """SQL showing a ticks expression as ``kind`` shows times; for an end
    (or a time field), the end of time is null."""
    if kind == "long":
        return ticks
    shown = f"timestamp_micros({ticks})" if kind == "timestamp" else ntz_time(ticks)
    return f"CASE WHEN {ticks} >= {_INF} THEN NULL ELSE {shown} END" if ends else shown


# ---------------------------------------------------- Arrow UDFs, any names


def _addressable(name: str) -> bool:
    return "." not in name and "`" not in name


def _renamed(
    df: DataFrame, known: Sequence[str] | None = None
) -> tuple[DataFrame, list[str], dict[str, str]]:
    """``df`` with columns PySpark's Arrow UDFs can address, its original
    names (``known``: the caller's, no schema round trip), and each
    original name's new one.

    ``mapInArrow`` and ``applyInArrow`` pass their input columns as
    ``df[name]``, which reads a dot as a struct field and rejects a
    backtick; such columns travel under positional names instead and get
    their own names back in the worker.
    """
    names = list(known) if known is not None else df.columns
    new = [n if _addressable(n) else f"__udm_c{i}" for i, n in enumerate(names)]
    if new == names:
        return df, names, {}
    return df.toDF(*new), names, dict(zip(names, new, strict=True))


def _restoring(
    names: list[str], fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def restored(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return fn(b.rename_columns(names) for b in batches)

    return restored


def map_in_arrow(
    df: DataFrame,
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    schema: T.StructType | str,
    names: Sequence[str] | None = None,
) -> DataFrame:
    """``df.mapInArrow(fn, schema)`` for any column names (``names``:
    ``df``'s columns when the caller knows them, saving a schema round
    trip through py4j)."""
    share_driver_python(df.sparkSession)
    safe, names, renamed = _renamed(df, names)
    return safe.mapInArrow(_restoring(names, fn) if renamed else fn, schema)


def apply_in_arrow(
    df: DataFrame,
    keys: list[str],
    extra: list[Column],
    fn: Callable[[Any, Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    schema: T.StructType,
) -> DataFrame:
    """``df.groupBy(keys + extra).applyInArrow(fn, schema)`` for any column
    names (``extra``: grouping expressions over addressable columns)."""
    share_driver_python(df.sparkSession)
    safe, names, renamed = _renamed(df)
    by = [safe[quoted(renamed.get(k, k))] for k in keys] + extra
    if not renamed:
        return safe.groupBy(*by).applyInArrow(fn, schema)

    def restored(
        key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        return fn(key, (b.rename_columns(names) for b in batches))

    return safe.groupBy(*by).applyInArrow(restored, schema)
