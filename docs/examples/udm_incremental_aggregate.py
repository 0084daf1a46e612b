from udm.host import Cht, HoppingWindow, evaluate
from udm.sdk import IncrementalAggregate


class Mean(IncrementalAggregate):
    """A per-window state (sum, count) updated by deltas."""

    def initial_state(self):
        return (0.0, 0)

    def add(self, state, payload):
        return (state[0] + payload, state[1] + 1)

    def remove(self, state, payload):  # optional: makes the UDM invertible
        return (state[0] - payload, state[1] - 1)

    def merge(self, a, b):  # optional: makes the UDM mergeable
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state):
        return state[0] / state[1]


assert Mean.properties.invertible and Mean.properties.mergeable  # derived from the class
cht = Cht([(0, 3, 1.0), (2, 4, 4.0), (6, 7, 10.0)])
assert evaluate(cht, HoppingWindow(size=4, hop=2), Mean) == Cht(
    [(-2, 2, 1.0), (0, 4, 2.5), (2, 6, 2.5), (4, 8, 10.0), (6, 10, 10.0)]
)
