"""A plan node's output as the Spark engine holds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from udm.host.metrics import QueryMetrics
from udm.host.plan import PlanNode
from udm.host.rows import Layout
from udm.host.spark.frame import EventFrame

__all__ = ["SparkRunner", "SparkTable"]


@dataclass(frozen=True)
class SparkTable:
    """A node's output as the Spark engine holds it: the event table, its
    group keys, how to read CHT payloads, and whether payloads are scalars."""

    frame: EventFrame
    keys: tuple[str, ...]
    layout: Layout
    scalar: bool


class SparkRunner(Protocol):
    """What an operator's Spark implementation may ask of the engine."""

    def run(self, node: PlanNode) -> SparkTable:
        """The output table of ``node``."""
        ...

    def session(self) -> Any:
        """The SparkSession to create tables in."""
        ...

    def add_metrics(self, metrics: QueryMetrics) -> None:
        """Count what a node dropped in the run's metrics."""
        ...
