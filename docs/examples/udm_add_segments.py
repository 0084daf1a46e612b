import numpy as np

from udm.sdk import IncrementalAggregate


class Mean(IncrementalAggregate):
    def initial_state(self):
        return (0.0, 0)

    def add(self, state, payload):
        return (state[0] + payload, state[1] + 1)

    def add_many(self, state, payloads):
        return (state[0] + sum(payloads), state[1] + len(payloads))

    def add_segments(self, values, bounds):  # every window's state in two numpy calls
        sums = np.add.reduceat(values, bounds[:-1])
        return list(zip(sums.tolist(), np.diff(bounds).tolist(), strict=True))

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state):
        return state[0] / state[1]


udm = Mean()
values = np.array([1.0, 2.0, 6.0, 3.0, 5.0])
bounds = np.array([0, 3, 5])  # two windows: values[0:3] and values[3:5]
assert udm.add_segments(values, bounds) == [(9.0, 3), (8.0, 2)]
assert udm.add_segments(values, bounds)[1] == udm.add_many(udm.initial_state(), [3.0, 5.0])
assert Mean.implements("add_segments")  # Spark folds disjoint windows through it
