"""Column names with dots (as flattened JSON gives them) are plain columns."""

from pyspark.sql import SparkSession

from udm.host.query import Stream

spark = SparkSession.builder.getOrCreate()
readings = spark.createDataFrame(
    [("a", 1, 20.0), ("a", 4, 22.0), ("b", 2, 18.0)],
    "`sensor.id` string, ts long, `temp.c` double",
)

means = (
    Stream.from_dataframe(readings, start="ts", key="sensor.id")
    .tumbling_window(10)
    .aggregate("stats.mean", value="temp.c")
    .to_dataframe()
)
rows = sorted(tuple(r) for r in means.collect())
assert means.columns == ["start", "end", "sensor.id", "mean"], means.columns
assert rows == [(0, 10, "a", 21.0), (0, 10, "b", 18.0)], rows
