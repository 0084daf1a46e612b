"""Snapshot and count windows on Spark: assigned and evaluated in the worker."""

from pyspark.sql import SparkSession

from udm.host.query import Stream

spark = SparkSession.builder.getOrCreate()
readings = spark.createDataFrame(
    [("a", 0, 4, 10.0), ("a", 2, 6, 20.0), ("a", 6, 8, 30.0), ("b", 1, 3, 5.0)],
    "sensor string, ts long, te long, temp double",
)
stream = Stream.from_dataframe(readings, start="ts", end="te", key="sensor")

# a's endpoints 0, 2, 4, 6, 8 give four snapshots; b's 1, 3 give one
snapshots = stream.snapshot_window().aggregate("stats.mean", value="temp")
assert "distinct endpoints numbered" in snapshots.explain()
rows = sorted(tuple(r) for r in snapshots.to_dataframe().collect())
assert rows == [
    (0, 2, "a", 10.0),
    (1, 3, "b", 5.0),
    (2, 4, "a", 15.0),
    (4, 6, "a", 20.0),
    (6, 8, "a", 30.0),
], rows

# count by start, n = 2: a's starts 0, 2, 6 give [0, 3) and [2, 7), output at
# the window's last tick (point_end, the default of count windows)
pairs = stream.count_window(2).aggregate("stats.max", value="temp").to_dataframe()
assert sorted(tuple(r) for r in pairs.collect()) == [(2, 3, "a", 20.0), (6, 7, "a", 30.0)]
