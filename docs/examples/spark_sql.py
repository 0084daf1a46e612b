"""A registered UDM called from Spark SQL as a table function."""

from datetime import datetime, timedelta

from pyspark.sql import SparkSession

from udm.host.spark.sql import register_sql

spark = SparkSession.builder.getOrCreate()
t0 = datetime(2026, 1, 1, 12, 0)
spark.createDataFrame(
    [
        ("a", t0 + timedelta(minutes=1), 20.0),
        ("a", t0 + timedelta(minutes=4), 22.0),
        ("a", t0 + timedelta(minutes=7), 30.0),
        ("b", t0 + timedelta(minutes=2), 18.0),
    ],
    "sensor string, ts timestamp, temp double",
).createOrReplaceTempView("readings")

name = register_sql(spark, "stats.median")  # -> "stats_median"
result = spark.sql(f"""
    SELECT * FROM {name}(
        TABLE(readings),
        start => 'ts', key => 'sensor', value => 'temp',
        window => 'tumbling', size => INTERVAL '5' MINUTE,
        returns => 'double')  -- stats.median's result type depends on its input
    ORDER BY sensor, start
""")
result.show(truncate=False)

m = timedelta(minutes=1)
assert [tuple(r) for r in result.collect()] == [
    (t0, t0 + 5 * m, "a", 21.0),
    (t0 + 5 * m, t0 + 10 * m, "a", 30.0),
    (t0, t0 + 5 * m, "b", 18.0),
]
