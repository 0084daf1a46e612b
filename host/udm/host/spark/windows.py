"""Window assignment in Spark: one row per (event, window it belongs to).

* Hopping/tumbling: each event's window indexes ``k`` are an integer range
  computed with exact int64 arithmetic (floor division via ``pmod``); a
  generated ``sequence`` of them is exploded.
* Snapshot: the distinct endpoints (starts and ends) of each key, numbered
  by ``row_number`` and paired with the next one by ``lead``, are the
  windows; an event spans the windows between the ranks of its start and
  end, joined back to their bounds.
* Count by start/end: distinct start (end) times numbered per key; window i
  spans ranks ``i .. i+n-1`` (its bounds from ``lead(t, n-1)``); an event of
  rank r belongs to windows ``r-n+1 .. r``.

The result has the window bounds ``__udm_ws``/``__udm_we`` and the
window's ordinal ``__udm_wo`` (consecutive windows of a key have nearby
ordinals, which lets evaluation batch them) next to the event's columns;
only windows that end by the watermark are kept, exactly
as :meth:`udm.host.WindowSpec.windows` does. Hopping windows over an event
that never ends fail (infinitely many windows) unless a finite watermark
is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from udm.host.plan import E_COL, S_COL
from udm.host.spark.frame import quoted, sql_string
from udm.host.time import INFINITY, MIN_TIME
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    WindowSpec,
)

__all__ = ["ASSIGNERS", "MARK", "WINDOW_END", "WINDOW_ORDINAL", "WINDOW_START", "assign_windows"]

#: the window's start and end (ticks), columns of the assigned rows
WINDOW_START = "__udm_ws"
WINDOW_END = "__udm_we"
#: the window's ordinal within its key (grid index k, or endpoint/time rank)
WINDOW_ORDINAL = "__udm_wo"
#: marks the placeholder rows of empty windows (emit_empty)
MARK = "__udm_mark"
#: a hopping window's grid index k (its start is k * hop + offset)
_GRID_INDEX = "__udm_k"
#: an event time (an endpoint, or the count window's start/end column)
_TIME = "__udm_t"
#: the time that closes the window opened at _TIME: the next endpoint
#: (snapshot), or the time n - 1 distinct times later (count)
_LATER_TIME = "__udm_tn"
#: the rank of _TIME among its key's distinct times (the window ordinal)
_RANK = "__udm_i"


def _key_cols(keys: tuple[str, ...], prefix: str) -> list[Column]:
    return [F.col(quoted(k)).alias(f"{prefix}{i}") for i, k in enumerate(keys)]


def _key_match(df: DataFrame, other: DataFrame, keys: tuple[str, ...], prefix: str) -> list[Column]:
    return [df[quoted(k)].eqNullSafe(other[f"{prefix}{i}"]) for i, k in enumerate(keys)]


def assign_windows(
    df: DataFrame,
    keys: tuple[str, ...],
    window: WindowSpec,
    watermark: int = INFINITY,
    emit_empty: bool = False,
) -> DataFrame:
    """Rows of ``df`` (an event table) paired with each window they belong to."""
    grid = window.grid
    if grid is not None:  # assigned with the watermark
        return _hopping(df, keys, grid, watermark, emit_empty)
    if emit_empty:
        raise ValueError(f"emit_empty applies to hopping and tumbling windows, not {window!r}")
    assign = next((ASSIGNERS[c] for c in type(window).__mro__ if c in ASSIGNERS), None)
    if assign is None:
        raise TypeError(f"the Spark engine does not know window {window!r}")
    out = assign(df, keys, window)
    if watermark < INFINITY:
        out = out.where(F.col(WINDOW_END) <= F.lit(watermark))
    return out


#: Spark SQL window assignment of the kinds whose windows events define, by
#: spec class (a new kind registers its own): the event table's rows paired
#: with each window (columns WINDOW_START, WINDOW_END, WINDOW_ORDINAL) they belong to.
ASSIGNERS: dict[type[WindowSpec], Callable[[DataFrame, tuple[str, ...], Any], DataFrame]] = {
    SnapshotWindow: lambda df, keys, w: _snapshot(df, keys),
    CountByStartWindow: lambda df, keys, w: _count(df, keys, S_COL, w.count, by_end=False),
    CountByEndWindow: lambda df, keys, w: _count(df, keys, E_COL, w.count, by_end=True),
}


def never_ends_message(w: HoppingWindow) -> tuple[str, str]:
    """The error for an event that never ends under an infinite watermark:
    the text before and after the event's start tick."""
    return (
        f"{w!r} windows over an event that never ends are infinitely many (event starting at tick ",
        "); pass watermark= (the time up to which windows are complete) "
        "to aggregate()/apply(), or end the event",
    )


def hopping_range(w: HoppingWindow, watermark: int) -> tuple[Column, Column]:
    """The inclusive range of window indexes ``k`` holding each event; an
    event that never ends fails the query unless the watermark is finite.
    The index formulas are the grid's own (:meth:`HoppingWindow.index_range_sql`,
    which :meth:`HoppingWindow.index_range` shares)."""
    # an event outside the grid's time bounds fails the query (as it does in
    # the host) before its window arithmetic could overflow int64
    min_start, max_end = w.time_bounds
    mark = "\x00"
    texts = [w.range_message(mark, mark, from_min).split(mark) for from_min in (True, False)]
    # times as format_time shows them: -inf and inf for the ends of time
    start_text = f"CASE WHEN {S_COL} <= {MIN_TIME}L THEN '-inf' ELSE CAST({S_COL} AS STRING) END"
    end_text = f"CASE WHEN {E_COL} >= {INFINITY}L THEN 'inf' ELSE CAST({E_COL} AS STRING) END"
    messages = [
        f"concat({sql_string(a)}, {start_text}, {sql_string(b)}, {end_text}, {sql_string(c)})"
        for a, b, c in texts
    ]
    # windows must end by the watermark, so an end beyond it counts as the
    # watermark (the index arithmetic itself cannot overflow)
    end = f"least({E_COL}, {watermark}L)" if watermark < INFINITY else E_COL
    first, last = w.index_range_sql(S_COL, end)
    k_min = F.expr(
        f"CASE WHEN {S_COL} < {min_start}L OR ({E_COL} < {INFINITY}L AND {E_COL} > {max_end}L) "
        f"THEN raise_error(CASE WHEN {S_COL} <= {MIN_TIME}L THEN {messages[0]} "
        f"ELSE {messages[1]} END) "
        f"ELSE {first} END"
    )
    k_max = F.expr(last)
    if watermark < INFINITY:
        return k_min, F.least(k_max, F.lit(w.last_index_before(watermark)))
    before, after = never_ends_message(w)
    fail = F.raise_error(F.concat(F.lit(before), F.col(S_COL).cast("string"), F.lit(after)))
    return k_min, F.when(F.col(E_COL) >= F.lit(INFINITY), fail).otherwise(k_max)


def _hopping(
    df: DataFrame, keys: tuple[str, ...], w: HoppingWindow, watermark: int, emit_empty: bool
) -> DataFrame:
    size, hop, offset = w.size, w.hop, w.offset
    k_min, k_max = hopping_range(w, watermark)
    k_last = w.last_index_before(watermark) if watermark < INFINITY else None
    ranged = df.select("*", k_min.alias("__udm_kmin"), k_max.alias("__udm_kmax")).where(
        F.col("__udm_kmin") <= F.col("__udm_kmax")
    )
    exploded = ranged.select(
        *[F.col(quoted(c)) for c in df.columns],
        F.explode(F.sequence(F.col("__udm_kmin"), F.col("__udm_kmax"))).alias(_GRID_INDEX),
    )
    if emit_empty:
        exploded = exploded.withColumn(MARK, F.lit(False))
        bounds = exploded.groupBy(*[F.col(quoted(k)) for k in keys]).agg(
            F.min(_GRID_INDEX).alias("__udm_first"), F.max(_GRID_INDEX).alias("__udm_last")
        )
        last = F.col("__udm_last")
        if k_last is not None:
            last = F.greatest(last, F.lit(k_last))
        markers = bounds.select(
            *[F.col(quoted(k)) for k in keys],
            F.explode(F.sequence(F.col("__udm_first"), last)).alias(_GRID_INDEX),
            F.lit(True).alias(MARK),
        )
        exploded = exploded.unionByName(markers, allowMissingColumns=True)
    start = F.col(_GRID_INDEX) * F.lit(hop) + F.lit(offset)
    return (
        exploded.withColumn(WINDOW_START, start)
        .withColumn(WINDOW_END, start + F.lit(size))
        .withColumnRenamed(_GRID_INDEX, WINDOW_ORDINAL)
    )


def _snapshot(df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    kp = "__udm_pk"
    points = (
        df.select(*_key_cols(keys, kp), F.col(S_COL).alias(_TIME))
        .union(df.select(*_key_cols(keys, kp), F.col(E_COL).alias(_TIME)))
        .distinct()
    )
    order = Window.partitionBy(*[f"{kp}{i}" for i in range(len(keys))]).orderBy(_TIME)
    points = points.select(
        "*",
        (F.row_number().over(order) - 1).alias(_RANK),
        F.lead(_TIME).over(order).alias(_LATER_TIME),
    )
    starts = points.select(*[f"{kp}{i}" for i in range(len(keys))], F.col(_TIME), F.col(_RANK))
    ends = starts.select(
        *[F.col(f"{kp}{i}").alias(f"__udm_qk{i}") for i in range(len(keys))],
        F.col(_TIME).alias("__udm_te"),
        F.col(_RANK).alias("__udm_ie"),
    )
    cols = [F.col(quoted(c)) for c in df.columns]
    with_start = df.join(
        starts, [*_key_match(df, starts, keys, kp), df[S_COL] == starts[_TIME]]
    ).select(*[df[quoted(c)] for c in df.columns], starts[_RANK].alias("__udm_is"))
    with_end = with_start.join(
        ends,
        [*_key_match(with_start, ends, keys, "__udm_qk"), with_start[E_COL] == ends["__udm_te"]],
    ).select(*[with_start[quoted(c)] for c in [*df.columns, "__udm_is"]], ends["__udm_ie"])
    spanned = with_end.select(
        *cols, F.explode(F.sequence(F.col("__udm_is"), F.col("__udm_ie") - 1)).alias(_RANK)
    )
    key_names = [f"{kp}{i}" for i in range(len(keys))]
    start, end = F.col(_TIME), F.col(_LATER_TIME)
    return _with_windows(df, keys, spanned, points, key_names, start, end)


def _count(df: DataFrame, keys: tuple[str, ...], time_col: str, n: int, by_end: bool) -> DataFrame:
    kp = "__udm_dk"
    key_names = [f"{kp}{i}" for i in range(len(keys))]
    distinct = df.select(*_key_cols(keys, kp), F.col(time_col).alias(_TIME)).distinct()
    order = Window.partitionBy(*key_names).orderBy(_TIME)
    last = F.col(_TIME) if n == 1 else F.lead(_TIME, n - 1).over(order)
    ranked = distinct.select(
        "*", (F.row_number().over(order) - 1).alias(_RANK), last.alias(_LATER_TIME)
    )
    with_rank = df.join(
        ranked, [*_key_match(df, ranked, keys, kp), df[time_col] == ranked[_TIME]]
    ).select(*[df[quoted(c)] for c in df.columns], ranked[_RANK].alias("__udm_r"))
    lo = F.greatest(F.col("__udm_r") - F.lit(n - 1), F.lit(0))
    spanned = with_rank.select(
        *[F.col(quoted(c)) for c in df.columns],
        F.explode(F.sequence(lo, F.col("__udm_r"))).alias(_RANK),
    )
    if by_end:
        ws, we = F.col(_TIME) - F.lit(1), F.col(_LATER_TIME)
    else:
        ws, we = F.col(_TIME), F.col(_LATER_TIME) + F.lit(1)
    return _with_windows(df, keys, spanned, ranked, key_names, ws, we)


def _with_windows(
    df: DataFrame,
    keys: tuple[str, ...],
    spanned: DataFrame,
    ranked: DataFrame,
    key_names: list[str],
    start: Column,
    end: Column,
) -> DataFrame:
    """The rows of ``spanned`` (each event row of ``df`` once per window
    rank it belongs to, in column _RANK) with their window's start, end
    and ordinal. ``ranked`` has one row per distinct time of a key (key
    columns ``key_names``, _RANK, _LATER_TIME): a window opens there
    unless _LATER_TIME is null; ``start`` and ``end`` are its bounds."""
    wins = ranked.where(F.col(_LATER_TIME).isNotNull()).select(
        *[F.col(k).alias(f"__udm_wk{i}") for i, k in enumerate(key_names)],
        F.col(_RANK).alias("__udm_wi"),
        start.alias(WINDOW_START),
        end.alias(WINDOW_END),
    )
    joined = spanned.join(
        wins, [*_key_match(spanned, wins, keys, "__udm_wk"), spanned[_RANK] == wins["__udm_wi"]]
    )
    return joined.select(
        *[spanned[quoted(c)] for c in df.columns],
        wins[WINDOW_START],
        wins[WINDOW_END],
        spanned[_RANK].alias(WINDOW_ORDINAL),
    )
