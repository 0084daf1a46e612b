"""The demo's three queries (examples/demo.py) on a small slice of its data:
Spark's output equals the reference evaluator's, and the hand-checkable parts
of it are what they should be."""

from __future__ import annotations

import itertools
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from udm.host import Cht

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def demo(spark: Any) -> dict[str, Any]:
    sys.path.insert(0, str(EXAMPLES))
    module = runpy.run_path(str(EXAMPLES / "demo.py"), run_name="demo")
    module["ship_udms"](spark)  # Spark's Python workers import sensor_udms
    return module


@pytest.fixture(scope="module")
def readings(spark: Any) -> Any:
    """The first two hours of two sensors from the shipped data set."""
    df = spark.read.parquet(str(EXAMPLES / "data" / "readings.parquet"))
    first = df.agg({"ts": "min"}).collect()[0][0]
    from pyspark.sql import functions as F

    return df.where(
        F.col("sensor").isin("boiler-1", "lab")
        & (F.col("ts") < F.lit(first) + F.expr("INTERVAL 2 HOURS"))
    ).cache()


def spark_cht(stream: Any) -> Any:
    return stream.to_cht(engine="spark")


def test_hourly_median_matches_the_reference(demo: dict[str, Any], readings: Any) -> None:
    stream = demo["hourly_median"](readings)
    got = spark_cht(stream)
    assert got == stream.to_cht(engine="reference")
    assert set(got) == {"boiler-1", "lab"}
    # 1 h windows every 15 min over 2 h of data: windows starting 45 min before
    # the first reading through the last quarter hour
    assert all(len(c) in (11, 12) for c in got.values())


def test_fleet_average_matches_the_reference(demo: dict[str, Any], readings: Any) -> None:
    medians = demo["hourly_median"](readings).to_dataframe()
    stream = demo["fleet_average"](medians)
    got = spark_cht(stream)
    want = stream.to_cht(engine="reference")
    assert isinstance(got, Cht) and got == want
    # snapshot windows: consecutive, non-overlapping, between the medians' endpoints
    spans = sorted((e.start, e.end) for e in got)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_overheating_matches_the_reference(demo: dict[str, Any], readings: Any) -> None:
    stream = demo["overheating"](readings, high=23.0, low=22.5)
    got = spark_cht(stream)
    assert got == stream.to_cht(engine="reference")
    for alarms in got.values():
        for e in alarms:
            assert e.payload["peak"] > 23.0 and e.payload["readings"] >= 1
