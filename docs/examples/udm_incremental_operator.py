from collections import Counter

from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import IncrementalOperator


class Repeated(IncrementalOperator):
    """The payloads seen more than once in the window, maintained in a Counter."""

    def initial_state(self):
        return Counter()

    def add(self, state, payload):
        state[payload] += 1
        return state

    def remove(self, state, payload):
        state[payload] -= 1
        return +state  # drop zero counts

    def result(self, state):
        return sorted(p for p, n in state.items() if n > 1)


cht = Cht([(0, 1, "a"), (1, 2, "b"), (2, 3, "a"), (3, 4, "b"), (4, 5, "c"), (6, 7, "c")])
assert evaluate(cht, TumblingWindow(5), Repeated) == Cht([(0, 5, "a"), (0, 5, "b")])
