"""Results typed from their values: computed once per output DataFrame."""

import random
from collections.abc import Sequence

from pyspark.sql import SparkSession

from udm.host.query import Stream
from udm.sdk import aggregate

spark = SparkSession.builder.getOrCreate()


@aggregate(deterministic=False)
def draw(values: Sequence[float]):  # no return annotation: typed from the values
    return random.random()


readings = spark.createDataFrame([("a", 1, 1.0), ("a", 12, 2.0)], "k string, ts long, v double")
query = (
    Stream.from_dataframe(readings, start="ts", key="k")
    .tumbling_window(10)
    .aggregate(draw, value="v")
)
out = query.to_dataframe()
assert dict(out.dtypes)["draw"] == "double"  # the type found in the values
assert out.collect() == out.collect()  # one DataFrame: the UDM ran once
again = query.to_dataframe().collect()  # built again: the UDM runs again
assert [r["draw"] for r in again] != [r["draw"] for r in out.collect()]
