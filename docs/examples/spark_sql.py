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

# a row whose key is null fails the query by default, as Stream.from_dataframe
# does; on_null_key => 'drop' drops it (counted in the log), 'keep' keeps it
# as a group of its own
spark.createDataFrame(
    [("a", t0, 20.0), (None, t0 + m, 99.0)], "sensor string, ts timestamp, temp double"
).createOrReplaceTempView("unkeyed")
call = f"""SELECT * FROM {name}(TABLE(unkeyed), start => 'ts', key => 'sensor',
    value => 'temp', window => 'tumbling', size => INTERVAL '5' MINUTE,
    returns => 'double', on_null_key => '{{}}')"""
try:
    spark.sql(call.format("raise")).collect()
except Exception as err:
    assert "invalid event: key 'sensor' is null" in str(err)
else:
    raise AssertionError("a null key must fail the query")
assert [tuple(r) for r in spark.sql(call.format("drop")).collect()] == [(t0, t0 + 5 * m, "a", 20.0)]
assert len(spark.sql(call.format("keep")).collect()) == 2
