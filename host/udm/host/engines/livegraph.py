"""A plan's operator graph fed from outside, one element at a time.

What a streaming query runs per key (:mod:`udm.host.spark.graphstream`):
the host engine's graph (:mod:`udm.host.engines.graph`) with its sources
as entry points, whose state saves to bytes and restores into a graph
compiled from the same plan.
"""

from __future__ import annotations

import operator
from typing import Any

from udm.host.engines.graph import HostEngine
from udm.host.operators.base import Operator, PhysicalElement
from udm.host.plan import PlanNode
from udm.host.versioned import dump_versioned, load_versioned

__all__ = ["GRAPH_SNAPSHOT_VERSION", "LiveGraph"]

#: what a :meth:`LiveGraph.snapshot` holds, and the version of its layout
GRAPH_SNAPSHOT_FORMAT = "udm-operator-graph"
GRAPH_SNAPSHOT_VERSION = 1


class LiveGraph:
    """A plan compiled once into its operator graph and fed from outside,
    element by element, source by source; its state saves to bytes and
    restores into a graph compiled from the same plan.

    A streaming query runs one per key (``udm.host.spark.graphstream``):
    each micro-batch restores the key's graph, feeds its rows and saves it
    again. Sources are numbered as :func:`udm.host.plan.sources` lists
    them; each enters through a validator with ``cti_policy`` (late
    elements dropped or adjusted are counted in :attr:`late`)."""

    def __init__(self, plan: PlanNode, consistency: Any = None, cti_policy: str = "raise") -> None:
        parts = HostEngine(consistency=consistency).compile_live(plan, cti_policy)
        self._sink = parts.sink
        self.entries = parts.entries
        self._ops: list[Operator] = parts.operators
        self._finalizers = parts.finalizers

    def push(self, source: int, element: PhysicalElement) -> list[PhysicalElement]:
        """Feed one element to source ``source``; returns the graph's output.

        ``source`` must be one of the plan's sources, ``0 .. n - 1``: a
        negative number is refused rather than taken from the end (it would
        feed another source without a word)."""
        entries = self.entries
        try:
            number = -1 if isinstance(source, bool) else operator.index(source)
        except TypeError:
            number = -1
        if not 0 <= number < len(entries):
            raise ValueError(
                f"no source {source!r}: this query has {len(entries)} source(s), numbered "
                f"0 to {len(entries) - 1} as udm.host.plan.sources lists them"
            )
        entries[number].push(0, element)
        out = self._sink.elements
        self._sink.elements = []
        return out

    @property
    def late(self) -> tuple[int, int]:
        """Elements (dropped, adjusted) so far: by the sources' CTI policy,
        and late inputs a bounded Finalize dropped."""
        dropped = sum(e.validator.stats.dropped for e in self.entries)
        dropped += sum(f.dropped for f in self._finalizers)
        return dropped, sum(e.validator.stats.adjusted for e in self.entries)

    @property
    def cti(self) -> int:
        """The least CTI the sources have seen (time every input has reached)."""
        return min(e.validator.cti for e in self.entries)

    def snapshot(self) -> bytes:
        """Every operator's state, pickled with a format version."""
        operators = [(op.name, op.get_state()) for op in self._ops]
        return dump_versioned(
            GRAPH_SNAPSHOT_FORMAT, GRAPH_SNAPSHOT_VERSION, {"operators": operators}
        )

    def restore(self, blob: bytes) -> None:
        """Load a :meth:`snapshot` of a graph compiled from the same plan."""
        data = load_versioned(
            blob, GRAPH_SNAPSHOT_FORMAT, GRAPH_SNAPSHOT_VERSION, "operator-graph snapshot"
        )
        saved = data["operators"]
        names = [op.name for op in self._ops]
        if [name for name, _ in saved] != names:
            raise ValueError(
                "this snapshot was taken from another query: its operators are "
                f"{[name for name, _ in saved]}, this query's are {names}; restart the "
                "streaming query with a new checkpoint"
            )
        for op, (_, state) in zip(self._ops, saved, strict=True):
            op.set_state(state)
