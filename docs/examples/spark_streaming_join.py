"""A whole query in Structured Streaming: trades joined with the quote valid
at each trade, per symbol, over two streaming sources, as its operator
graph per key; the changelog's CHT equals the batch result."""

import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from udm.host.query import Stream
from udm.host.spark.streaming import AdvanceTime, changelog_cht, read_changelog, start_stream

spark = SparkSession.builder.getOrCreate()
folder = Path(tempfile.mkdtemp())
t0 = datetime(2026, 1, 1, 9, 0)


def at(minute: int) -> str:
    return (t0 + timedelta(minutes=minute)).isoformat()


def lines(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


(folder / "quotes").mkdir()
(folder / "quotes" / "part-0.json").write_text(
    lines(
        [
            {"symbol": "a", "ts": at(0), "until": at(5), "bid": 10.0},
            {"symbol": "a", "ts": at(5), "until": at(20), "bid": 11.0},
            {"symbol": "b", "ts": at(0), "until": at(20), "bid": 50.0},
        ]
    )
)
(folder / "trades").mkdir()
(folder / "trades" / "part-0.json").write_text(
    lines(
        [
            {"symbol": "a", "ts": at(2), "price": 10.5},
            {"symbol": "a", "ts": at(7), "price": 11.5},
            {"symbol": "b", "ts": at(3), "price": 50.5},
        ]
    )
)

quotes_df = spark.readStream.schema("symbol string, ts timestamp, until timestamp, bid double")
trades_df = spark.readStream.schema("symbol string, ts timestamp, price double")
quotes = Stream.from_dataframe(
    quotes_df.json(str(folder / "quotes")), start="ts", end="until", key="symbol"
)
trades = Stream.from_dataframe(trades_df.json(str(folder / "trades")), start="ts", key="symbol")

changelog = trades.join(quotes, on="symbol").to_stream(  # two sources, one graph per symbol
    advance=AdvanceTime(every=timedelta(minutes=1))  # CTIs per symbol and source
)
query = start_stream(
    changelog, str(folder / "out"), str(folder / "checkpoint"), trigger={"availableNow": True}
)
query.awaitTermination()

cht = changelog_cht(read_changelog(spark, str(folder / "out")), ["symbol"])
cht.orderBy("symbol", "start").show(truncate=False)

tick = timedelta(microseconds=1)  # a trade is a point event: it lasts one tick
rows = [tuple(r) for r in cht.orderBy("symbol", "start").collect()]
assert rows == [
    (t0 + timedelta(minutes=2), t0 + timedelta(minutes=2) + tick, "a", 10.5, 10.0),
    (t0 + timedelta(minutes=7), t0 + timedelta(minutes=7) + tick, "a", 11.5, 11.0),
    (t0 + timedelta(minutes=3), t0 + timedelta(minutes=3) + tick, "b", 50.5, 50.0),
], rows
