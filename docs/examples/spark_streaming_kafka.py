"""Reading events from Kafka: parse the message value into the columns a
streaming udm query needs. The parsing runs here on a static frame shaped
like Kafka's records; the broker part needs the spark-sql-kafka package."""

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

SCHEMA = "sensor string, ts timestamp, temp double"


def readings(kafka: DataFrame) -> DataFrame:
    """Kafka rows (key, value: binary, topic, partition, offset, ...) ->
    sensor, ts, temp, plus a seq that keeps each partition's order."""
    parsed = F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")
    return kafka.select(parsed, "partition", "offset").select(
        "r.*", (F.col("partition").cast("long") * 10**12 + F.col("offset")).alias("seq")
    )


def kafka_source(spark: SparkSession, servers: str, topic: str) -> DataFrame:
    """Needs spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    return readings(raw)


# what kafka_source(...) gives, checked on records shaped like Kafka's
spark = SparkSession.builder.getOrCreate()
records: list[Any] = [
    (b"a", b'{"sensor": "a", "ts": "2026-01-01T12:01:00", "temp": 20.0}', 0, 7),
    (b"b", b'{"sensor": "b", "ts": "2026-01-01T12:02:00", "temp": 18.5}', 1, 3),
]
kafka_like = spark.createDataFrame(records, "key binary, value binary, partition int, offset long")
rows = [tuple(r) for r in readings(kafka_like).orderBy("sensor").collect()]
assert [(s, t.minute, v, q) for s, t, v, q in rows] == [
    ("a", 1, 20.0, 7),
    ("b", 2, 18.5, 10**12 + 3),
], rows
