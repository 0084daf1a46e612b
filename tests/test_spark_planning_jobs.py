"""Building a window operation's DataFrame runs no Spark job.

A Spark job while planning (a ``collect``, a ``count`` to size something,
a sample of the keys) would read the input before the user's action, and
one that brings rows to the driver breaks on inputs larger than the
driver's memory (issue #32, "Scale"). The one planned exception is a UDM
without a declared result type, whose types are found from its results:
the check below sees that job, which shows it can see jobs at all.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from pyspark.sql import functions as F

from udm.host.query import Stream
from udm.sdk import IncrementalAggregate, aggregate

pytestmark = pytest.mark.spark

_groups = itertools.count()


class Mean(IncrementalAggregate):
    """Mergeable: the grid route folds partial states by default."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] - value, state[1] - 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


@aggregate
def median(values: Sequence[float]) -> float:
    """Not mergeable: the grid route's slices of sorted events."""
    return float(statistics.median(values))


@aggregate
def untyped_median(values: Sequence[float]):  # type: ignore[no-untyped-def]  # no declared type
    return statistics.median(values)


@contextmanager
def jobs_run(spark: Any) -> Iterator[list[int]]:
    """The ids of the Spark jobs started inside the block (filled on exit)."""
    sc = spark.sparkContext
    group = f"udm-planning-{next(_groups)}"
    sc.setJobGroup(group, "planning a udm query")
    found: list[int] = []
    try:
        yield found
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        found.extend(sc.statusTracker().getJobIdsForGroup(group))


@pytest.fixture(scope="module")
def events(spark: Any) -> Any:
    """400 point events of 4 keys, one every 100 ms."""
    ident = F.col("id")
    return spark.range(400).select(
        (ident % 4).alias("key"),
        F.timestamp_micros(ident * 100_000).alias("ts"),
        (ident * 0.5).alias("v"),
    )


SECOND = timedelta(seconds=1)

QUERIES: dict[str, Callable[[Stream], Stream]] = {
    "tumbling mean, partial states": lambda s: s.tumbling_window(5 * SECOND).aggregate(
        Mean, value="v", partial=True
    ),
    "tumbling mean, no partial states": lambda s: s.tumbling_window(5 * SECOND).aggregate(
        Mean, value="v", partial=False
    ),
    "tumbling median": lambda s: s.tumbling_window(5 * SECOND).aggregate(median, value="v"),
    "hopping median": lambda s: s.hopping_window(5 * SECOND, SECOND).aggregate(median, value="v"),
    "snapshot mean": lambda s: s.snapshot_window().aggregate(Mean, value="v"),
    "count median": lambda s: s.count_window(10).aggregate(median, value="v"),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_building_a_window_query_runs_no_spark_job(spark: Any, events: Any, name: str) -> None:
    stream = Stream.from_dataframe(events, start="ts", key="key")
    with jobs_run(spark) as jobs:
        out = QUERIES[name](stream).to_dataframe()
    assert jobs == []
    assert out.columns[:3] == ["start", "end", "key"]


def test_choosing_partial_states_reads_only_a_sample_once_per_dataframe(
    spark: Any, events: Any
) -> None:
    """partial=None (the default for a mergeable UDA): the planner reads the
    input's head (Spark's limit: one small job, or a few as Spark widens
    the partitions it tries) the first time, and nothing again for the same
    DataFrame."""
    stream = Stream.from_dataframe(events, start="ts", key="key")
    query = stream.tumbling_window(5 * SECOND).aggregate(Mean, value="v")
    with jobs_run(spark) as first:
        query.to_dataframe()
    with jobs_run(spark) as again:
        query.to_dataframe()
    assert 1 <= len(first) <= 3
    assert again == []


def test_an_untyped_udm_is_typed_by_a_job_while_planning(spark: Any, events: Any) -> None:
    stream = Stream.from_dataframe(events, start="ts", key="key").tumbling_window(5 * SECOND)
    with jobs_run(spark) as jobs:
        out = stream.aggregate(untyped_median, value="v").to_dataframe()
    assert jobs != []
    assert dict(out.dtypes)["untyped_median"] == "double"
