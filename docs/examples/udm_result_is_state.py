from udm.host import Host, Insert, OutputId, Retract, TumblingWindow, point
from udm.sdk import IncrementalAggregate


class Counts(IncrementalAggregate):
    """Counts per value in a dict it updates in place, returned as it is."""

    def initial_state(self):
        return {}

    def add(self, state, payload):
        state[payload] = state.get(payload, 0) + 1
        return state

    def remove(self, state, payload):
        state[payload] -= 1
        return {k: n for k, n in state.items() if n}

    def result(self, state):
        return state  # the live state: the host copies it before emitting


host = Host(TumblingWindow(10), Counts)
first = host.process_many([point("a", 1, "x"), point("b", 12, "y")])
assert first == [Insert(OutputId(None, 0), 0, 10, {"x": 1})]

# A late event updates the state; the output emitted before keeps its
# payload, and is retracted before the new one is inserted.
late = host.process(point("c", 3, "x"))
assert late == [
    Retract(OutputId(None, 0), 0, 10, 0, {"x": 1}),
    Insert(OutputId(None, 1), 0, 10, {"x": 2}),
]
assert first[0].payload == {"x": 1}
