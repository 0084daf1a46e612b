"""The fluent query API: streams of events, windows, UDMs and temporal operators.

A :class:`Stream` is a lazy query plan over events with lifetimes::

    Stream.from_dataframe(df, start="ts", key="sensor")     # point events
          .where(lambda p: p["temp"] is not None)            # UDF filter
          .hopping_window(size=timedelta(minutes=10), hop=timedelta(minutes=5))
          .aggregate("stats.median", value="temp")           # a UDA by name
          .to_dataframe()                                     # start, end, sensor, median

Each event is a lifetime ``[start, end)`` and a payload: the row's columns
other than its time columns (key columns included). Group keys
(``key=`` or :meth:`Stream.group_apply`) split the stream into groups with
their own windows, as StreamInsight's group-and-apply. A window operation
(:meth:`WindowedStream.aggregate`, :meth:`WindowedStream.apply`) yields a
new stream whose payload columns are the key columns and the results, so
queries chain; streams combine with :meth:`Stream.union`,
:meth:`Stream.join` and :meth:`Stream.left_anti_join`, and lifetimes change
with :meth:`Stream.alter_lifetime` and its shortcuts (CEDR's operators).

The methods only build a plan (:mod:`udm.host.plan`); engines run it
(:mod:`udm.host.engines`): ``to_cht(engine=...)`` with ``"reference"`` (the
oracle), ``"host"`` (the incremental in-process operator graph, also
:meth:`Stream.to_events`) or ``"spark"``, ``to_dataframe()`` on Spark and
``to_stream()`` on Structured Streaming. This module never imports pyspark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from udm.host.algebra import at_most, constant_duration, positive_duration, shifted_by
from udm.host.errors import InvalidEventError, OperatorError
from udm.host.metrics import QueryMetrics
from udm.host.plan import (
    AggSpec,
    AlignNode,
    AlterLifetimeNode,
    AntiJoinNode,
    FinalizeNode,
    GroupNode,
    JoinNode,
    JoinPredicate,
    JoinProjection,
    OnInvalid,
    OnNullKey,
    PlanNode,
    SelectNode,
    Shape,
    Source,
    UnionNode,
    WhereNode,
    agg,
    consistency_levels,
    is_column,
    non_negative_duration,
    rewrite_sources,
    with_consistency,
)
from udm.host.registry import register_udm
from udm.host.rows import UdfError
from udm.host.running import RunnableStream
from udm.host.sources import dataframe_source, elements_source, rows_source
from udm.host.stream import Element, ExternalCti
from udm.host.time import INFINITY, to_duration_ticks
from udm.host.validation import CtiPolicy
from udm.host.windowed import WindowedStream
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    WindowSpec,
)
from udm.sdk.events import IntervalEvent

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "AggSpec",
    "InvalidEventError",
    "OperatorError",
    "QueryMetrics",
    "Stream",
    "UdfError",
    "WindowedStream",
    "agg",
    "consistency_levels",
    "register_udm",
]


def _keys(key: str | Sequence[str] | None) -> tuple[str, ...]:
    if key is None:
        return ()
    if isinstance(key, str):
        return (key,)
    keys = tuple(key)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"group keys must be column names, got {key!r}")
    return keys


_NEEDS_WINDOW = (
    "{method}() runs a UDM once per window: window the stream first, e.g. "
    "stream.tumbling_window(size).{method}(...), or hopping_window, snapshot_window, "
    "count_window, window(spec)"
)


class Stream(RunnableStream):
    """A lazy query over events; every method returns a new stream. The
    methods that run it (``to_cht``, ``to_dataframe``, ...) and its
    ``metrics`` come from :class:`~udm.host.running.RunnableStream`."""

    # ------------------------------------------------------------ sources

    @classmethod
    def from_dataframe(
        cls,
        df: DataFrame,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a Spark DataFrame, one per row.

        Args:
            df: the rows; time columns are timestamps, timestamp_ntz, dates,
                integer ticks or ISO strings.
            start: the start column.
            end: the end column (``None``: point events ``[start, start+1)``).
            key: group key column(s), as :meth:`group_apply`.
            shape: ``point`` (no end column), ``interval`` (end required) or
                ``edge`` (a null end means the event has not ended).
                Default: ``point`` without ``end``, else ``interval``.
            on_invalid: ``raise`` (default) fails on the first row with a
                null or unparsable time or an end not after its start, naming
                the column and showing the row; ``drop`` drops and counts them
                (see :attr:`metrics`).
            on_null_key: a row whose ``key`` column is null: ``raise``
                (default) fails naming the column and showing the row;
                ``drop`` drops and counts it (as ``on_invalid="drop"``,
                reason ``key 'k' is null``); ``keep`` keeps it, its events a
                group of their own with a null key (as Spark's ``groupBy``).
        """
        source = dataframe_source(df, start, end, _keys(key), shape, on_invalid, on_null_key)
        stream = cls(source)
        return stream.group_apply(*_keys(key)) if key is not None else stream

    @classmethod
    def from_cht(
        cls,
        events: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
        key: str | Sequence[str] | None = None,
        on_invalid: OnInvalid = "raise",
        timestamps: bool | None = None,
    ) -> Stream:
        """Events held in memory: ``IntervalEvent`` or ``(start, end, payload)``.

        Dict payloads give one column per field; any other payload is one
        column named ``value`` (and comes back unchanged from ``to_cht``).
        Times are int ticks or datetimes (``datetime``, ``date``, ISO
        strings). ``timestamps`` says whether :meth:`to_dataframe` returns
        timestamps (and ``explain``/``plot`` show datetimes); by default it
        does when the first event's start is a datetime, so datetimes in
        give datetimes out, as from a DataFrame.
        """
        source = rows_source(events, on_invalid, timestamps)
        stream = cls(source)
        stream.metrics = QueryMetrics(dict(source.dropped))
        if key is None:
            return stream
        rows = source.rows or ()
        columns = list(dict.fromkeys(c for _, _, p in rows for c in p))
        missing = [k for k in _keys(key) if k not in columns]
        if rows and missing:  # (no events: nothing to check against)
            raise KeyError(f"key columns {missing} are not in the events; columns: {columns}")
        return stream.group_apply(*_keys(key))

    @classmethod
    def from_pandas(
        cls,
        df: Any,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a pandas DataFrame, one per row, held in memory and
        run in-process (no Spark): the arguments and checks of
        :meth:`from_dataframe`. For small data; :meth:`to_pandas` gives the
        output as a DataFrame (see :mod:`udm.host.tables`)."""
        from udm.host.tables import from_table

        return from_table(cls, df, start, end, key, shape, on_invalid, on_null_key)

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a pyarrow Table or RecordBatch, as :meth:`from_pandas`."""
        from udm.host.tables import from_table

        return from_table(cls, table, start, end, key, shape, on_invalid, on_null_key)

    @classmethod
    def from_events(
        cls,
        elements: Iterable[Element | ExternalCti],
        key: str | Sequence[str] | None = None,
        cti_policy: CtiPolicy | str = CtiPolicy.RAISE,
        timestamps: bool = False,
    ) -> Stream:
        """Events of a physical stream (inserts, retractions, CTIs).

        The reference and Spark engines read its CHT; the incremental
        engine (``engine="host"``, :meth:`to_events`) consumes the elements
        in arrival order, speculation and retractions included. Its times
        are ticks; ``timestamps=True`` makes :meth:`to_dataframe` return
        timestamps."""
        source = elements_source(elements, cti_policy, timestamps)
        out = cls(source)
        out.metrics = QueryMetrics(dict(source.dropped))
        return out.group_apply(*_keys(key)) if key is not None else out

    # ---------------------------------------------------------- operators

    def _with(self, node: PlanNode) -> Stream:
        return type(self)(node)

    def where(self, predicate: Any) -> Stream:
        """Keep the events whose payload satisfies ``predicate``: a UDF
        (``@function`` or any callable of the payload dict), a Spark Column
        or a SQL expression string (Spark Columns and SQL run only on Spark,
        or in a reference run as long as they come before any UDF)."""
        if not (callable(predicate) or isinstance(predicate, str) or is_column(predicate)):
            raise TypeError(f"where() needs a UDF, a Column or a SQL string, got {predicate!r}")
        return self._with(WhereNode(self.plan, predicate))

    def select(self, *columns: Any, **named: Any) -> Stream:
        """Project the payload: keep the named columns, and compute new ones.

        ``select("temp", f=fahrenheit, hi=(lambda p: p["temp"] > 30, "boolean"))``:
        positional arguments are column names (or Spark Columns); keyword
        arguments are UDFs of the payload dict (or Columns), optionally as
        ``(udf, returns)`` to give the Spark type. Key columns always stay;
        the lifetime is unchanged.
        """
        entries = []
        clash = [name for name in named if name in self.keys]
        if clash:
            raise ValueError(
                f"select({clash[0]}=...): {clash[0]!r} is a key column of the stream, and key "
                "columns stay as they are (each group's windows are the group's); name the "
                "new column otherwise, or regroup with group_apply() on it"
            )
        for name, expr in named.items():
            returns = None
            if isinstance(expr, tuple):
                if len(expr) != 2:
                    raise TypeError(f"select({name}=...) takes a UDF or (udf, returns)")
                expr, returns = expr
            if not (callable(expr) or is_column(expr)):
                raise TypeError(f"select({name}=...) needs a UDF or a Column, got {expr!r}")
            entries.append((name, expr, returns))
        for c in columns:
            if not (isinstance(c, str) or is_column(c)):
                raise TypeError(f"select() positional arguments are column names, got {c!r}")
        return self._with(SelectNode(self.plan, tuple(columns), tuple(entries)))

    def group_apply(self, *keys: str) -> Stream:
        """Split the stream by key columns: each group gets its own windows,
        and window results carry the key columns. The grouping stays until
        the next ``group_apply``, which replaces it (as a Group&Apply after
        another's results regroups them): group by several columns at once
        with ``group_apply("site", "sensor")``."""
        ks = _keys(list(keys))
        return self._with(GroupNode(self.plan, ks, self.keys))

    def aggregate(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Not on a stream: UDAs run per window, so window the stream first
        (``stream.tumbling_window(size).aggregate(...)``)."""
        raise TypeError(_NEEDS_WINDOW.format(method="aggregate"))

    def apply(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Not on a stream: UDOs run per window, so window the stream first
        (``stream.snapshot_window().apply(...)``)."""
        raise TypeError(_NEEDS_WINDOW.format(method="apply"))

    # ------------------------------------------------- temporal operators

    def union(self, *others: Stream) -> Stream:
        """Bag union with other streams of the same key columns: every
        event of every stream (columns one lacks are null there)."""
        parts = [self, *others]
        for other in others:
            if not isinstance(other, Stream):
                raise TypeError(f"union() takes streams, got {other!r}")
        keys = {p.keys for p in parts}
        if len(keys) != 1:
            raise OperatorError(
                "union",
                f"the streams have different key columns {sorted(keys)}; group them alike "
                "(group_apply) before the union",
            )
        return self._with(UnionNode(tuple(p.plan for p in parts)))

    def join(
        self,
        other: Stream,
        on: str | Sequence[str] | None = None,
        where: JoinPredicate | None = None,
        select: JoinProjection | None = None,
        suffixes: tuple[str, str] = ("_left", "_right"),
    ) -> Stream:
        """Temporal equijoin (CEDR): an event for every pair of this
        stream's and ``other``'s events with equal ``on`` columns whose
        lifetimes overlap (and ``where(left, right)`` true), over the
        intersection of the two lifetimes.

        Args:
            on: the key columns to match (default: the streams' group keys,
                which must then be the same); the output is grouped by them.
                ``on=()`` pairs every two overlapping events.
            where: a predicate of the two payloads (dicts, or the values of
                scalar streams).
            select: the output payload from the two payloads (a dict);
                by default both payloads' columns, the ``on`` columns
                once, a name in both suffixed with ``suffixes``.
        """
        on_keys = self._join_keys(other, on, "join")
        _check_callable(where, "join(where=...)")
        _check_callable(select, "join(select=...)")
        if len(suffixes) != 2 or suffixes[0] == suffixes[1]:
            raise ValueError(f"suffixes= are two different strings, got {suffixes!r}")
        pair = (str(suffixes[0]), str(suffixes[1]))
        return self._with(JoinNode(self.plan, other.plan, on_keys, where, select, pair))

    def left_anti_join(
        self,
        other: Stream,
        on: str | Sequence[str] | None = None,
        where: JoinPredicate | None = None,
    ) -> Stream:
        """Left anti-semijoin: what remains of each event's lifetime after
        removing the times at which a matching ``other`` event (equal ``on``
        columns, ``where(left, right)`` true) is live. StreamInsight's way
        to detect absence: readings with no heartbeat, orders without a
        payment."""
        on_keys = self._join_keys(other, on, "left_anti_join")
        _check_callable(where, "left_anti_join(where=...)")
        return self._with(AntiJoinNode(self.plan, other.plan, on_keys, where))

    def _join_keys(self, other: Stream, on: Any, operator: str) -> tuple[str, ...]:
        if not isinstance(other, Stream):
            raise TypeError(f"{operator}() takes a Stream, got {other!r}")
        if on is None:
            if self.keys != other.keys:
                raise OperatorError(
                    operator,
                    f"the streams' keys differ ({list(self.keys)} and {list(other.keys)}); "
                    "group both by the same columns, or say which to match with on=",
                )
            return self.keys
        return _keys(on)

    def alter_lifetime(
        self,
        start: Callable[[int], int] | None = None,
        duration: Callable[[int, int], int] | Any = None,
    ) -> Stream:
        """AlterLifetime (CEDR): each event's new start is ``start(s)`` and
        its new duration ``duration(s, e)`` (or a constant duration).

        The paper's constraints are checked as events pass: ``start`` must
        not decrease as the start grows and may depend on the start only
        (so CTIs map to CTIs); ``duration`` must not grow when the end
        shrinks (so a retraction stays a retraction). A full retraction
        stays a full retraction; without ``duration`` an event that never
        ends still never ends.
        """
        _check_callable(start, "alter_lifetime(start=...)")
        if duration is not None and not callable(duration):
            d = positive_duration(duration, "alter_lifetime(duration=...)")
            return self._with(
                AlterLifetimeNode(
                    self.plan, start, constant_duration(d), "custom" if start else "set_duration", d
                )
            )
        return self._with(AlterLifetimeNode(self.plan, start, duration))

    def shift(self, by: Any) -> Stream:
        """Move every lifetime by ``by`` (a duration; negative moves earlier)."""
        d = to_duration_ticks(by)
        return self._with(AlterLifetimeNode(self.plan, shifted_by(d), None, "shift", d))

    def set_duration(self, duration: Any) -> Stream:
        """Give every event the lifetime ``[start, start + duration)``: point
        events become intervals, so a snapshot aggregate over the result is
        a sliding window of that size (CEDR's W = AlterLifetime(Vs, wl)).
        ``INFINITY``: every event never ends (CEDR's ``Π(Vs, ∞)``)."""
        d = positive_duration(duration, "set_duration()")
        return self._with(
            AlterLifetimeNode(self.plan, None, constant_duration(d), "set_duration", d)
        )

    def to_points(self) -> Stream:
        """Every event becomes a point event at its start."""
        return self._with(AlterLifetimeNode(self.plan, None, constant_duration(1), "to_points", 1))

    def clip_to(self, max_duration: Any) -> Stream:
        """Cut lifetimes longer than ``max_duration`` to it (Trill's
        ``ClipEventDuration``); shorter ones are unchanged."""
        d = positive_duration(max_duration, "clip_to()")
        return self._with(AlterLifetimeNode(self.plan, None, at_most(d), "clip_to", d))

    def align(self, blocking: Any = INFINITY) -> Stream:
        """Align (CEDR): hold elements until the latest start seen is
        ``blocking`` past them, or a CTI passes them (``INFINITY``, the
        default: until CTIs), combining retractions with what they change.
        Fewer retractions downstream, at the price of latency."""
        return self._with(
            AlignNode(self.plan, non_negative_duration(blocking, "align(blocking=...)"))
        )

    def finalize(self, remember: Any = INFINITY) -> Stream:
        """Finalize (CEDR): ExternalCTIs become in-order CTIs and broken
        retraction chains are repaired; with a finite ``remember``, a CTI
        follows ``remember`` behind the latest time seen, so state is
        bounded and input later than that is dropped and counted."""
        return self._with(
            FinalizeNode(self.plan, non_negative_duration(remember, "finalize(remember=...)"))
        )

    def with_consistency(self, level: Any) -> Stream:
        """The same query at a consistency level (CEDR's triangle): a
        Finalize and an Align after every source. ``"strong"``: block until
        CTIs and remember everything (no retractions out); ``"middle"``: no
        blocking, remember everything (speculative output, corrected by
        retractions); ``"weak"``: no blocking, remember ``remember`` (a
        duration; late input dropped and counted); or ``(blocking,
        remember)`` durations."""
        blocking, remember = consistency_levels(level)
        return type(self)(with_consistency(self.plan, blocking, remember))

    def window(self, spec: WindowSpec) -> WindowedStream:
        """Window the stream by any :class:`~udm.host.WindowSpec`."""
        if not isinstance(spec, WindowSpec):
            raise TypeError(f"window() needs a udm.host WindowSpec, got {spec!r}")
        return WindowedStream(self, spec)

    def hopping_window(self, size: Any, hop: Any, offset: Any = 0) -> WindowedStream:
        """Windows ``[k*hop + offset, k*hop + offset + size)``; durations are
        int ticks or ``timedelta``."""
        return self.window(HoppingWindow(size, hop, offset))

    def tumbling_window(self, size: Any, offset: Any = 0) -> WindowedStream:
        """Gapless windows of ``size`` (a hopping window with hop = size)."""
        return self.window(TumblingWindow(size, offset))

    def snapshot_window(self) -> WindowedStream:
        """A window between every two consecutive event endpoints."""
        return self.window(SnapshotWindow())

    def count_window(self, n: int, by: Literal["start", "end"] = "start") -> WindowedStream:
        """Windows over ``n`` consecutive distinct start (or end) times."""
        if by == "start":
            return self.window(CountByStartWindow(n))
        if by == "end":
            return self.window(CountByEndWindow(n))
        raise ValueError(f"count_window(by=...) is 'start' or 'end', not {by!r}")

    # ------------------------------------------------------- looking at it

    def explain(self) -> str:
        """A readable plan: sources, operations, and how Spark runs them."""
        from udm.host.explain import explain_plan

        return explain_plan(self.plan, self.source.datetimes())

    def sample(self, rows: int = 200, where: str | None = None) -> Stream:
        """The same query over the first ``rows`` source rows by start time
        (of each source), after ``where`` (a Spark SQL condition such as
        ``"sensor = 's1'"``): a small sample for :meth:`plot` and quick
        checks. Windows near the sample's end miss the rows after it."""
        if rows < 1:
            raise ValueError(f"sample(rows={rows}) needs at least one row")

        def first_rows(src: Source) -> PlanNode:
            if src.df is None:
                assert src.rows is not None
                return dataclasses.replace(src, rows=src.rows[:rows], elements=None)
            df = src.df if where is None else src.df.where(where)
            return dataclasses.replace(src, df=df.orderBy(src.start).limit(rows))

        return type(self)(rewrite_sources(self.plan, first_rows))

    def plot(
        self,
        path: str | Path | None = None,
        *,
        key: Any = None,
        title: str | None = None,
        max_events: int = 400,
    ) -> Any:
        """Draw a timeline of a small sample: the input events of the last
        window operation, its windows and its output events, for one group.

        Runs the reference evaluator in-process, so keep the sample small
        (``max_events`` bounds what is drawn). ``key`` picks the group (the
        first in sort order by default; a tuple for several key columns).
        Returns the matplotlib figure; ``path`` also saves it (PNG/SVG/PDF).
        """
        from udm.host.explain import plot_stream

        return plot_stream(self, path, key=key, title=title, max_events=max_events)


# ------------------------------------------------------------ helpers


def _check_callable(fn: Any, where: str) -> None:
    if fn is not None and not callable(fn):
        raise TypeError(f"{where} takes a function, got {fn!r}")
