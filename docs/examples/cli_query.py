"""A Python query file for `udm-cli run` (run by the test suite on a small table)."""

from datetime import timedelta
from typing import Any

from udm.host import Stream


def queries(spark: Any) -> dict[str, Any]:
    readings = spark.table("readings")  # or spark.read.parquet("...")
    per_sensor = Stream.from_dataframe(readings, start="ts", key="sensor")
    return {
        "medians": per_sensor.tumbling_window(timedelta(minutes=10)).aggregate(
            "stats.median", value="temp"
        ),
        "alarms": per_sensor.tumbling_window(timedelta(hours=1)).apply(
            "patterns.threshold_crossing", value="temp", high=30.0, low=28.0
        ),
    }
