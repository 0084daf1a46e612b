"""A new temporal operator: one plan class, one implementation per engine.

``Extend(d)`` lengthens every event by ``d`` ticks (an event that lasts
forever still does, and a full retraction stays a full retraction, as CEDR
asks of every lifetime change). Nothing in udm is edited: the node class
is registered with each engine (the Spark one is in the test suite).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from udm.host import Cht
from udm.host.engines import graph, reference
from udm.host.operators import Operator
from udm.host.plan import PlanNode, UnaryNode
from udm.host.query import Stream
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY


# 1. the plan: what the operator means, knowing no engine (a UnaryNode
#    reads one node, its first field ``input``; a node reading several
#    subclasses PlanNode and answers ``inputs`` itself)
@dataclass(frozen=True, eq=False)
class ExtendNode(UnaryNode):
    amount: int

    def describe(self, datetimes: bool = False) -> str:
        return f"extend by {self.amount}"


def later(start: int, end: int, amount: int) -> int:
    """The new end: open ends stay open, a deleted event stays deleted."""
    return end if end >= INFINITY or end == start else end + amount


# 2. the reference engine: the definition over the input's CHT
def extend_reference(engine: reference.ReferenceEngine, node: PlanNode) -> reference.Table:
    assert isinstance(node, ExtendNode)
    table = engine.run(node.input)
    rows = [(s, later(s, e, node.amount), p) for s, e, p in table.rows]
    return dataclasses.replace(table, rows=rows)


# 3. the host engine: a physical operator (insert, retraction, CTI)
class ExtendOperator(Operator):
    name = "extend"

    def __init__(self, amount: int) -> None:
        super().__init__()
        self.amount = amount

    def on_insert(self, port: int, element: Insert) -> None:
        end = later(element.start, element.end, self.amount)
        self.emit(Insert(element.id, element.start, end, element.payload))

    def on_retract(self, port: int, element: Retract) -> None:
        old = later(element.start, element.old_end, self.amount)
        new = later(element.start, element.new_end, self.amount)
        self.emit(Retract(element.id, element.start, old, new, element.payload))

    def on_cti(self, port: int, time: int) -> None:
        self.emit(Cti(time))  # starts never move: the input's guarantee holds


def extend_host(engine: graph.HostEngine, node: PlanNode) -> Operator:
    assert isinstance(node, ExtendNode)
    return engine.unary(node, ExtendOperator(node.amount))


reference.register_handler(ExtendNode, extend_reference)
graph.register_handler(ExtendNode, extend_host)

# a query using it: a Stream is built on any plan node
readings = Stream.from_cht([(1, 2, 5), (3, 4, 2), (8, INFINITY, 4)])
extended = Stream(ExtendNode(readings.plan, 10))
expected = Cht([(1, 12, 5), (3, 14, 2), (8, INFINITY, 4)])
assert extended.to_cht(engine="reference") == expected
assert extended.to_cht(engine="host") == expected

# a physical stream with a full retraction: it stays a full retraction
events = Stream.from_events(
    [Insert("a", 1, 5, "x"), Insert("b", 2, 3, "y"), Retract("b", 2, 3, 2, "y"), Cti(9)]
)
out = Stream(ExtendNode(events.plan, 10)).to_events()
assert [e for e in out if isinstance(e, Retract)] == [Retract("b", 2, 13, 2, "y")]
assert Stream(ExtendNode(events.plan, 10)).to_cht(engine="host") == Cht([(1, 15, "x")])
print(extended.explain().splitlines()[2])
