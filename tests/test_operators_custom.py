"""An operator added from outside udm (docs/examples/custom_operator.py):
one plan class and one implementation per engine, registered, and the
engines agree, Spark included. No udm module knows the operator."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from udm.host import Cht
from udm.host.plan import E_COL, S_COL, PlanNode
from udm.host.query import Stream
from udm.host.spark.execute import register_handler
from udm.host.spark.frame import EventFrame
from udm.host.spark.table import SparkRunner, SparkTable
from udm.host.time import INFINITY

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "custom_operator.py"


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLE))


def test_the_example_operator_runs_on_spark_as_on_the_reference(
    example: dict[str, Any], spark: Any
) -> None:
    node_class = example["ExtendNode"]

    def extend_spark(engine: SparkRunner, node: PlanNode) -> SparkTable:
        before = engine.run(node.inputs[0])
        end = F.col(E_COL)
        longer = F.when((end >= INFINITY) | (end == F.col(S_COL)), end).otherwise(
            end + F.lit(node.amount)  # type: ignore[attr-defined]
        )
        df = before.frame.df.withColumn(E_COL, longer)
        frame = EventFrame(df, before.frame.time)
        return SparkTable(frame, before.keys, before.layout, before.scalar)

    register_handler(node_class, extend_spark)
    df = spark.createDataFrame(
        [("a", 0, 6, 1), ("a", 20, None, 3), ("b", 1, 3, 4)], "k string, s long, e long, x long"
    )
    base = Stream.from_dataframe(df, start="s", end="e", shape="edge", key="k")
    query = Stream(node_class(base.plan, 5))
    # keyed: one CHT per key (to_cht's documented form for grouped streams)
    expected = {
        "a": Cht([(0, 11, {"k": "a", "x": 1}), (20, INFINITY, {"k": "a", "x": 3})]),
        "b": Cht([(1, 8, {"k": "b", "x": 4})]),
    }
    assert query.to_cht(engine="reference") == expected
    assert query.to_cht(engine="spark") == expected
    assert query.to_cht(engine="host") == expected
