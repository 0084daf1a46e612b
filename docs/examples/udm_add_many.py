from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import IncrementalAggregate


class Mean(IncrementalAggregate):
    def initial_state(self):
        return (0.0, 0)

    def add(self, state, payload):
        return (state[0] + payload, state[1] + 1)

    def add_many(self, state, payloads):  # the same as add in a loop, in one call
        return (state[0] + sum(payloads), state[1] + len(payloads))

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state):
        return state[0] / state[1]


udm = Mean()
assert udm.add_many(udm.initial_state(), [1.0, 2.0, 6.0]) == (9.0, 3)
assert Mean.implements("add_many")  # the host calls it instead of the add loop
cht = Cht([(0, 1, 1.0), (2, 3, 2.0), (4, 5, 6.0), (5, 6, 3.0)])
assert evaluate(cht, TumblingWindow(5), Mean) == Cht([(0, 5, 3.0), (5, 10, 3.0)])
