"""Running a query: the half of :class:`~udm.host.query.Stream` that hands
its plan to an engine and keeps what the run measured.

:class:`RunnableStream` holds a plan and runs it: ``to_cht`` (any engine,
by name), ``to_events`` (the incremental host), ``to_dataframe`` (Spark
batch), ``to_stream`` (Structured Streaming), ``to_arrow``/``to_pandas``
(in-process), and the :attr:`~RunnableStream.metrics` of the latest run.
:class:`~udm.host.query.Stream` adds the methods that build plans, so
building and running stay apart: nothing here knows a plan node's kind,
and engines are found by name (:func:`udm.host.engines.get_engine`), so
this module imports no engine and never imports pyspark.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from udm.host.cht import Cht
from udm.host.engines import get_engine
from udm.host.metrics import QueryMetrics
from udm.host.plan import PlanNode, Source, sources
from udm.host.rows import rows_to_cht
from udm.host.stream import Element

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["RunnableStream"]


class RunnableStream:
    """A query plan and the ways to run it; :class:`~udm.host.query.Stream`
    is the class users meet (it adds the methods that build plans)."""

    def __init__(self, plan: PlanNode) -> None:
        if not isinstance(plan, PlanNode):
            raise TypeError(f"a Stream wraps a udm.host.plan node, got {plan!r}")
        self.plan = plan
        self._metrics: QueryMetrics | None = None

    @property
    def source(self) -> Source:
        """The stream's first source (its only one unless it joins or unions)."""
        return sources(self.plan)[0]

    @property
    def metrics(self) -> QueryMetrics:
        """Metrics (rows dropped by ``on_invalid="drop"``, by reason) of the
        latest run (``to_dataframe``/``to_cht``) of this stream, else of the
        latest run of any query built on the same source: the stream where
        ``on_invalid`` was passed reports what the query run from it dropped."""
        if self._metrics is not None:
            return self._metrics
        latest = self.source.latest
        return latest[0] if latest else QueryMetrics({})

    @metrics.setter
    def metrics(self, value: QueryMetrics) -> None:
        self._metrics = value
        for src in sources(self.plan):
            src.latest[:] = [value]

    @property
    def keys(self) -> tuple[str, ...]:
        """The group key columns."""
        return self.plan.keys()

    def runs_in_process(self) -> bool:
        """Whether the stream's events are in memory (``from_cht``,
        ``from_pandas``, ``from_arrow``, ``from_events``): it runs without Spark."""
        return all(src.df is None for src in sources(self.plan))

    def to_arrow(self) -> Any:
        """Run in-process and return the output as a pyarrow Table with the
        columns of :meth:`to_dataframe` (see :func:`udm.host.tables.to_arrow`)."""
        from udm.host.tables import to_arrow

        return to_arrow(self)

    def to_pandas(self) -> Any:
        """Run in-process and return the output as a pandas DataFrame with the
        columns of :meth:`to_dataframe`.

        An integer column with nulls becomes pandas' nullable ``Int64`` (or
        ``UInt64``, ...) rather than float64, which would change integers
        beyond 2**53 and turn the others into floats; other columns convert
        as pyarrow converts them."""
        from udm.host.tables import pandas_frame

        return pandas_frame(self.to_arrow())

    def to_dataframe(self, spark: SparkSession | None = None) -> DataFrame:
        """Run on Spark. Columns: ``start``, ``end`` (timestamps when the
        input times were timestamps or dates, else int64 ticks; an end at the
        end of time is null for timestamps), the key columns, then the payload
        columns: for a window operation its results, struct results flattened
        into one column per field."""
        self._batch_only("to_dataframe")
        runner: Any = get_engine("spark", spark=spark)
        frame: DataFrame = runner.to_dataframe(self)
        return frame

    def _batch_only(self, method: str) -> None:
        for src in sources(self.plan):
            if src.df is not None and src.df.isStreaming:
                raise ValueError(
                    f"{method}() runs a batch query, and this stream's source is a streaming "
                    "DataFrame (spark.readStream): call to_stream() for the output changelog "
                    "and start it with udm.host.spark.streaming.start_stream (docs/streaming.md)"
                )

    def to_stream(self, **options: Any) -> DataFrame:
        """Run continuously: the output changelog of this query over streaming
        DataFrame sources (spark.readStream), as a streaming DataFrame;
        ``options`` are those of
        :func:`udm.host.spark.streaming.stream_changelog` (``advance``,
        ``cti_policy``, ``seq``, ``consistency``...). A single window
        operation runs the incremental host per key; any other query runs its
        operator graph per key (:mod:`udm.host.spark.graphstream`). Start it
        with :func:`udm.host.spark.streaming.start_stream`."""
        runner: Any = get_engine("streaming")
        frame: DataFrame = runner.to_stream(self, **options)
        return frame

    def to_cht(
        self, engine: str = "auto", spark: Any = None, **options: Any
    ) -> Cht | dict[Hashable, Cht]:
        """Run and return the output CHT: a :class:`Cht` without group keys,
        else ``{key: Cht}`` (a tuple key for several key columns), as
        :func:`udm.host.evaluate_by_key` (but without keys that have no
        output). After a window operation, and the operators that keep its
        rows' columns (where, lifetime changes, align, finalize, a left
        anti-join), a payload is the result itself (one UDM; a struct result
        as the dict of its columns) or a dict of result columns; otherwise it
        is the dict of all payload columns.

        ``engine`` names an engine (:func:`udm.host.engines.engine_names`):
        ``"reference"`` (the oracle, in-process, for small data; a DataFrame
        source is collected), ``"host"`` (the incremental graph of physical
        operators, in-process; ``consistency=`` as :meth:`with_consistency`),
        ``"spark"``; ``"auto"`` runs DataFrame sources on Spark and in-memory
        ones on the reference engine.
        """
        self._batch_only("to_cht")
        if engine == "auto":
            has_df = any(src.df is not None for src in sources(self.plan))
            engine = "spark" if has_df else "reference"
        if spark is not None:
            options["spark"] = spark
        runner = get_engine(engine, **options)
        rows, layout, metrics = runner.collect(self.plan)
        self.metrics = metrics
        metrics.invalid_rows(wait=True)
        return rows_to_cht(rows, self.keys, layout)

    def to_events(self, consistency: Any = None, **options: Any) -> list[Element]:
        """Run on the incremental engine and return the output physical
        stream: inserts, retractions of earlier speculative output, and
        CTIs, as each operator of the graph emitted them. ``consistency``
        (as :meth:`with_consistency`) chooses between speculation and
        blocking. Payloads are read as :meth:`to_cht` reads them."""
        self._batch_only("to_events")
        engine: Any = get_engine("host", consistency=consistency, **options)
        events: list[Element] = engine.events(self.plan)
        self.metrics = engine.metrics
        return events
