"""Result fields that are times: annotate them Ticks, and a query over
timestamps shows them as timestamps, like start and end."""

import datetime as dt
from collections.abc import Sequence
from typing import Any, TypedDict

from pyspark.sql import SparkSession

from udm.host.query import Stream
from udm.sdk import IntervalEvent, Ticks, TimeSensitiveAggregate, WindowDescriptor


class Peak(TypedDict):
    value: float
    at: Ticks  # a point in time, in ticks


class PeakAt(TimeSensitiveAggregate):
    """The window's largest value and when it was seen."""

    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> Peak:
        top = max(events, key=lambda e: e.payload)
        return {"value": top.payload, "at": top.start}


spark = SparkSession.builder.getOrCreate()
t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
readings = spark.createDataFrame(
    [(t0, 1.0), (t0 + dt.timedelta(microseconds=7), 5.0), (t0 + dt.timedelta(seconds=3), 2.0)],
    "ts timestamp, temp double",
)
peaks = (
    Stream.from_dataframe(readings, start="ts")
    .tumbling_window(dt.timedelta(minutes=1))
    .aggregate(PeakAt(), value="temp")
    .to_dataframe()
)
assert dict(peaks.dtypes) == {
    "start": "timestamp",
    "end": "timestamp",
    "value": "double",
    "at": "timestamp",  # not bigint ticks
}
row = peaks.selectExpr("value", "unix_micros(at) - unix_micros(start) AS after").first()
assert (row.value, row.after) == (5.0, 7), row
