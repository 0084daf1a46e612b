"""A script for any Spark: session() takes the master spark-submit gives,
SPARK_REMOTE or SPARK_MASTER, an active session, else local[2]; the code of
the UDMs a query names is what a cluster's executors must be able to import."""

from pathlib import Path

from udm.host.query import Stream
from udm.host.registry import get_registry
from udm.host.spark.session import is_connect, is_local_master, session
from udm.host.spark.shipping import ship_folder, ship_modules

spark = session("my-job")
events = spark.createDataFrame(
    [("a", 1, 20.0), ("a", 4, 22.0), ("b", 2, 18.0), ("a", 12, 30.0)],
    "sensor string, t long, temp double",
)
medians = (
    Stream.from_dataframe(events, start="t", key="sensor")
    .tumbling_window(10)
    .aggregate("stats.median", value="temp")  # resolved here, on the driver
)
# names resolve on the driver; the executors get the UDM's code by pickle
assert "udm_stats" in get_registry().resolved_modules()

on_cluster = is_connect(spark) or not is_local_master(spark.sparkContext.master)
if on_cluster:  # a local master's workers share the driver's paths
    ship_folder(spark, Path(__file__).resolve().parent)  # this script's helpers
    ship_modules(spark, get_registry().resolved_modules())  # the libraries it names

rows = sorted(tuple(r) for r in medians.to_dataframe().collect())
assert rows == [(0, 10, "a", 21.0), (0, 10, "b", 18.0), (10, 20, "a", 30.0)], rows
