"""Conservative consistency: output only when a CTI makes a window final."""

from udm.host import Cti, Host, Insert, OutputId, TumblingWindow, point
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


host = Host(TumblingWindow(10), Total, consistency="conservative")
assert host.process_many([point("a", 1, 5), point("b", 12, 1), point("c", 3, 2)]) == []
assert host.process(Cti(15)) == [Insert(OutputId(None, 0), 0, 10, 7), Cti(10)]
