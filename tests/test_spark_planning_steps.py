"""How a window query's DataFrame steps are composed while planning
(issue #32, "Where a udm mean's time goes"): a classic session analyses
every DataFrame step in the JVM as it is made, so the source's projection
is composed with the window's choice of columns and the window's result
names with the output's times, and the source's raising validity filter
is made once per DataFrame. The results must not change: a result
declared a time (``-> Ticks``) is still shown as a timestamp, directly or
as a field of a record result."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest

from udm.host.plan import Source, agg
from udm.host.query import Stream
from udm.host.spark.frame import normalize
from udm.sdk import Ticks, aggregate

pytestmark = pytest.mark.spark

UTC = UTC


@aggregate
def last_time(values: Sequence[int]) -> Ticks:
    """The latest of the values, which are times in ticks."""
    return Ticks(max(values))


class Span(NamedTuple):
    """A record result with one time field."""

    last: Ticks
    n: int


@aggregate
def span(values: Sequence[int]) -> Span:
    """The latest time and the count."""
    return Span(Ticks(max(values)), len(values))


def _events(spark: Any) -> Any:
    # ts: timestamps; t: the same instants as ticks (microseconds)
    return spark.createDataFrame(
        [
            ("a", datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC), 1_767_225_601_000_000),
            ("a", datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC), 1_767_225_605_000_000),
            ("b", datetime(2026, 1, 1, 0, 0, 12, tzinfo=UTC), 1_767_225_612_000_000),
        ],
        "k string, ts timestamp, t long",
    )


def test_a_time_result_is_a_timestamp_directly_or_as_a_record_field(spark: Any) -> None:
    """The output's times are composed with the window's result names:
    a direct ``-> Ticks`` result keeps its mark through that composition,
    and a record's time field (known only to Spark) still gets shown."""
    df = _events(spark)
    stream = Stream.from_dataframe(df, start="ts", key="k").tumbling_window(10_000_000, offset=0)
    got = sorted(
        (r["k"], r["start"], r["last"])
        for r in stream.aggregate(last=agg(last_time, "t")).to_dataframe().collect()
    )
    at = lambda s: datetime(2026, 1, 1, 0, 0, s)  # noqa: E731 (session time zone: UTC)
    assert got == [("a", at(0), at(5)), ("b", at(10), at(12))]
    rows = stream.aggregate(s=agg(span, "t")).to_dataframe().collect()
    assert sorted((r["k"], r["s_last"], r["s_n"]) for r in rows) == [
        ("a", at(5), 2),
        ("b", at(12), 1),
    ]


def test_the_raising_validity_filter_is_made_once_per_dataframe(spark: Any) -> None:
    """Planning again over the same DataFrame reuses its checked rows (the
    filter's JVM analysis is the costliest planning step); another
    DataFrame gets its own."""
    df = _events(spark)

    def base(frame: Any) -> Any:
        source = frame.plan
        while not isinstance(source, Source):
            source = source.inputs[0]
        got, _ = normalize(source)
        assert got.projection is not None
        return got.projection.base

    stream = Stream.from_dataframe(df, start="ts", key="k")
    assert base(stream) is base(Stream.from_dataframe(df, start="ts", key="k"))
    assert base(stream) is not base(Stream.from_dataframe(_events(spark), start="ts", key="k"))
