"""Physical-stream replay on Spark, with a late element the CTI policy drops."""

from pyspark.sql import SparkSession

from udm.host import TumblingWindow
from udm.host.spark.replay import replay

spark = SparkSession.builder.getOrCreate()
elements = spark.createDataFrame(
    [
        (0, "insert", "r1", 1, 2, None, "a", 2.0),
        (1, "insert", "r2", 3, 4, None, "a", 4.0),
        (2, "cti", None, 10, None, None, None, None),  # null key: every key
        (3, "insert", "late", 5, 6, None, "a", 99.0),  # before the CTI: dropped
        (4, "insert", "r3", 12, 13, None, "a", 6.0),
    ],
    "seq long, kind string, id string, start long, end long, new_end long, "
    "sensor string, temp double",
)
log = replay(
    elements, TumblingWindow(10), "stats.mean", key="sensor", value="temp", cti_policy="drop"
)
rows = [
    (r["kind"], r["start"], r["end"], r["mean"], r["late_dropped"])
    for r in log.orderBy("seq").collect()
]
assert ("insert", 0, 10, 3.0, None) in rows  # the late 99.0 is not in [0, 10)
assert ("insert", 10, 20, 6.0, None) in rows
assert rows[-1] == ("stats", None, None, None, 1), rows  # counted, never silent
