"""The incremental host: speculative output, a late event, CTIs."""

from udm.host import Cti, Host, Insert, OutputId, Retract, TumblingWindow, point
from udm.sdk import IncrementalAggregate


class Total(IncrementalAggregate):
    def initial_state(self):
        return 0

    def add(self, state, payload):
        return state + payload

    def remove(self, state, payload):
        return state - payload

    def result(self, state):
        return state


host = Host(TumblingWindow(10), Total)
print(host.process(point("a", 1, 5)))  # nothing yet: [0, 10) may still change
print(host.process(point("b", 12, 1)))  # an event at 12: [0, 10) is output
print(host.process(point("c", 3, 2)))  # late for [0, 10): retract, re-emit
print(host.process(Cti(15)))  # [0, 10) is final; output CTI at 10
print(host.process(Cti(20)))  # [10, 20) is final too

out = OutputId
assert host.process(point("d", 21, 4)) == []
host2 = Host(TumblingWindow(10), Total)
assert host2.process_many([point("a", 1, 5), point("b", 12, 1), point("c", 3, 2)]) == [
    Insert(out(None, 0), 0, 10, 5),
    Retract(out(None, 0), 0, 10, 0, 5),
    Insert(out(None, 1), 0, 10, 7),
]
assert host2.process(Cti(15)) == [Cti(10)]
