"""Hopping-window medians per sensor on Spark, with a UDA from udm-stats by name."""

from datetime import datetime, timedelta

from pyspark.sql import SparkSession

from udm.host.query import Stream

spark = SparkSession.builder.getOrCreate()
t0 = datetime(2026, 1, 1, 12, 0)
readings = spark.createDataFrame(
    [
        ("a", t0 + timedelta(minutes=1), 20.0),
        ("a", t0 + timedelta(minutes=4), 22.0),
        ("a", t0 + timedelta(minutes=7), 30.0),
        ("b", t0 + timedelta(minutes=2), 18.0),
    ],
    "sensor string, ts timestamp, temp double",
)

medians = (
    Stream.from_dataframe(readings, start="ts", key="sensor")  # point events
    .hopping_window(size=timedelta(minutes=10), hop=timedelta(minutes=5))
    .aggregate("stats.median", value="temp")  # a UDA by registered name
    .to_dataframe()  # start, end, sensor, median
)
medians.orderBy("sensor", "start").show(truncate=False)

rows = [tuple(r) for r in medians.orderBy("sensor", "start").collect()]
m = timedelta(minutes=1)
assert rows == [
    (t0 - 5 * m, t0 + 5 * m, "a", 21.0),  # readings at 1 and 4 minutes
    (t0, t0 + 10 * m, "a", 22.0),  # all three
    (t0 + 5 * m, t0 + 15 * m, "a", 30.0),  # the one at 7 minutes
    (t0 - 5 * m, t0 + 5 * m, "b", 18.0),
    (t0, t0 + 10 * m, "b", 18.0),
], rows

# A result that does not fit its declared type fails, naming the UDM and its
# window: under returns="bigint" a mean of 21.5 is refused, not cut to 21.
pair = spark.createDataFrame([(t0, 20.0), (t0 + m, 23.0)], "ts timestamp, temp double")
means = (
    Stream.from_dataframe(pair, start="ts")
    .tumbling_window(timedelta(minutes=5))
    .aggregate("stats.mean", value="temp", returns="bigint")
)
try:
    means.to_dataframe().collect()
except Exception as exc:  # Spark reports the worker's TypeError
    assert "returned 21.5, which does not fit the result type" in str(exc)
else:
    raise AssertionError("expected a result type error")
