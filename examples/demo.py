"""The main demo (`make demo`): udm queries as Spark jobs over a week of sensor readings.

Reads examples/data/readings.parquet (six sensors, a reading about every 10 s;
regenerate it with examples/generate_data.py) on a local Spark (2 cores), or on
the master ``spark-submit`` or the environment gives (docs/cluster.md), and runs
three queries whose UDMs are plain Python written with udm.sdk
(examples/sensor_udms.py):

1. the median temperature of each sensor over the last hour, every 15 minutes
   (hopping windows, a UDA);
2. the fleet's time-weighted average of those hourly medians (a chained query:
   snapshot windows over the first query's output, a time-sensitive UDA with
   full input clipping): one value per change of the live medians, so a
   sensor that goes offline drops out of the average;
3. overheating alarms per sensor: above 30 °C until back under 28 °C (a
   time-sensitive pattern UDO with hysteresis, over daily windows).

It prints a preview of each result and writes them as Parquet under out/.
``make demo`` runs it as ``udm-cli run examples/demo.py`` (the ``queries``
function below); ``python examples/demo.py`` does the same with a few more
figures.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data" / "readings.parquet"
OUT = ROOT / "out"
sys.path.insert(0, str(HERE))

from sensor_udms import Overheating, TimeWeightedAverage, median  # noqa: E402

from udm.host.query import Stream  # noqa: E402


def spark_session() -> Any:
    """The master spark-submit or the environment gives (SPARK_MASTER,
    SPARK_REMOTE for Spark Connect), else a quiet local Spark with two
    cores whose workers run this interpreter."""
    from udm.host.spark.session import session

    spark = session("udm-demo")
    ship_udms(spark)
    return spark


def ship_udms(spark: Any) -> None:
    """Let the Python workers import sensor_udms (UDMs are pickled by
    reference), on a cluster's executors and through Spark Connect too."""
    from udm.host.spark.shipping import add_py_files

    add_py_files(spark, [HERE / "sensor_udms.py"])


def hourly_median(readings: Any) -> Stream:
    """Per sensor: median of the last hour, every 15 minutes."""
    return (
        Stream.from_dataframe(readings, start="ts", key="sensor")
        .hopping_window(size=timedelta(hours=1), hop=timedelta(minutes=15))
        .aggregate(median, value="temp", alias="median_temp")
    )


def fleet_average(medians: Any) -> Stream:
    """All sensors: time-weighted average of the hourly medians (``hourly_median``'s
    output, each valid for its hour), one row per snapshot window."""
    return (
        Stream.from_dataframe(medians, start="start", end="end")
        .snapshot_window()
        .aggregate(
            TimeWeightedAverage, value="median_temp", input_clipping="full", alias="avg_temp"
        )
    )


def overheating(readings: Any, high: float = 30.0, low: float = 28.0) -> Stream:
    """Per sensor and day: overheating alarms with hysteresis."""
    return (
        Stream.from_dataframe(readings, start="ts", key="sensor")
        .tumbling_window(size=timedelta(days=1))
        .apply(
            Overheating,
            value="temp",
            returns="struct<peak: double, readings: bigint>",
            high=high,
            low=low,
        )
    )


def queries(spark: Any) -> dict[str, Any]:
    """The three results for ``udm-cli run examples/demo.py`` (what ``make demo``
    runs), written in this order; the fleet average chains on the cached medians.
    The readings are not cached: reading the 3 MB Parquet file twice costs
    less CPU than building Spark's in-memory columnar cache of it (1.3 s
    against 2.9 s for the median query in a warm session,
    docs/performance.md, "The demo")."""
    readings = spark.read.parquet(str(DATA))
    medians = hourly_median(readings).to_dataframe().cache()
    return {
        "hourly_median": medians,
        "fleet_average": fleet_average(medians),
        "overheating": overheating(readings),
    }


def preview(console: Console, title: str, df: Any, n: int = 8) -> None:
    """A rich table of the first ``n`` output rows (a Spark DataFrame)."""
    rows = df.limit(n).collect()
    table = Table(title=title, title_justify="left")
    for name in df.columns:
        table.add_column(name, justify="left" if name in ("start", "end", "sensor") else "right")
    for row in rows:
        table.add_row(*(cell(v) for v in row))
    console.print(table)


def cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def main() -> None:
    console = Console(width=110, highlight=False)
    t0 = time.perf_counter()
    spark = spark_session()
    readings = spark.read.parquet(str(DATA)).cache()
    n = readings.count()
    sensors = readings.select("sensor").distinct().count()
    console.print(f"{n:,} readings of {sensors} sensors from {DATA.relative_to(ROOT)}\n")
    queries = {
        "hourly_median": ("Median per sensor, last hour every 15 minutes", hourly_median),
        "fleet_average": (
            "Fleet time-weighted average of the hourly medians, snapshot windows",
            lambda _: fleet_average(spark.read.parquet(str(OUT / "hourly_median"))),
        ),
        "overheating": ("Overheating alarms (> 30 °C until < 28 °C), daily windows", overheating),
    }
    for name, (title, query) in queries.items():
        started = time.perf_counter()
        path = OUT / name
        query(readings).to_dataframe().write.mode("overwrite").parquet(str(path))
        result = spark.read.parquet(str(path))
        result = result.orderBy(*(c for c in ("start", "sensor") if c in result.columns))
        rows = result.count()
        preview(console, f"{title}: {rows:,} rows", result)
        console.print(f"wrote {path.relative_to(ROOT)}/ in {time.perf_counter() - started:.1f} s\n")
    alarms = spark.read.parquet(str(OUT / "overheating"))
    per_sensor = alarms.groupBy("sensor").count().orderBy("sensor").collect()
    console.print(
        "alarms per sensor: " + ", ".join(f"{r['sensor']} {r['count']}" for r in per_sensor)
    )
    console.print(f"done in {time.perf_counter() - t0:.1f} s")
    spark.stop()


if __name__ == "__main__":
    main()
