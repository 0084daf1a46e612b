"""A windowed mean per sensor as a Structured Streaming query over a folder
of JSON files, with CTIs generated from the data, then the current CHT."""

import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from udm.host.query import Stream
from udm.host.spark.streaming import AdvanceTime, changelog_cht, read_changelog, start_stream

spark = SparkSession.builder.getOrCreate()
folder = Path(tempfile.mkdtemp())
(folder / "in").mkdir()
t0 = datetime(2026, 1, 1, 12, 0)


def reading(sensor: str, minute: int, temp: float) -> str:
    ts = (t0 + timedelta(minutes=minute)).isoformat()
    return json.dumps({"sensor": sensor, "ts": ts, "temp": temp}) + "\n"


# two files: the file source picks up each as it appears (here: both at once)
(folder / "in" / "part-0.json").write_text(
    reading("a", 1, 20.0) + reading("a", 4, 22.0) + reading("b", 2, 18.0)
)
(folder / "in" / "part-1.json").write_text(
    reading("a", 12, 30.0) + reading("b", 11, 19.0) + reading("a", 21, 25.0)
)

source = spark.readStream.schema("sensor string, ts timestamp, temp double").json(
    str(folder / "in")
)
changelog = (
    Stream.from_dataframe(source, start="ts", key="sensor")  # the same query API as batch
    .tumbling_window(timedelta(minutes=10))
    .aggregate("stats.mean", value="temp")
    .to_stream(advance=AdvanceTime(every=timedelta(minutes=5)))  # a CTI per 5 minutes
)
query = start_stream(
    changelog,
    str(folder / "out"),  # Parquet, one directory per micro-batch id
    str(folder / "checkpoint"),  # restart from here after a failure
    trigger={"availableNow": True},  # process what is there, then stop
)
query.awaitTermination()

log = read_changelog(spark, str(folder / "out"))  # kind, seq, id, start, end, ..., batch_id
cht = changelog_cht(log, ["sensor"])  # start, end, sensor, mean
cht.orderBy("sensor", "start").show(truncate=False)

m = timedelta(minutes=1)
rows = [tuple(r) for r in cht.orderBy("sensor", "start").collect()]
assert rows == [
    (t0, t0 + 10 * m, "a", 21.0),  # passed by a's reading at 12 minutes
    (t0 + 10 * m, t0 + 20 * m, "a", 30.0),  # passed by the reading at 21 minutes
    (t0, t0 + 10 * m, "b", 18.0),  # b's [10, 20) is still open: no output yet
], rows
