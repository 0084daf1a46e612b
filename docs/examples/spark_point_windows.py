"""Hopping windows over point events: each window a slice of the sorted events."""

from collections.abc import Sequence

from pyspark.sql import SparkSession

from udm.host.query import Stream
from udm.sdk import aggregate

spark = SparkSession.builder.getOrCreate()


@aggregate
def in_order(values: Sequence[float]) -> list[float]:
    """Order-sensitive: the values as the UDA receives them."""
    return list(values)


# point events (start only); two readings of a start together at tick 2
readings = spark.createDataFrame(
    [("a", 0, 5.0), ("a", 2, 9.0), ("a", 2, 1.0), ("a", 5, 3.0)],
    "sensor string, ts long, temp double",
)
stream = Stream.from_dataframe(readings, start="ts", key="sensor")
query = stream.hopping_window(size=4, hop=2).aggregate(
    med=("stats.median", "temp"), seen=(in_order, "temp")
)
assert "each window is a slice of the events sorted by start" in query.explain()

rows = sorted(tuple(r) for r in query.to_dataframe().collect())
# windows [-2, 2), [0, 4), [2, 6), [4, 8): events by start, then payload
assert rows == [
    (-2, 2, "a", 5.0, [5.0]),
    (0, 4, "a", 5.0, [5.0, 1.0, 9.0]),
    (2, 6, "a", 3.0, [1.0, 9.0, 3.0]),
    (4, 8, "a", 3.0, [3.0]),
], rows
