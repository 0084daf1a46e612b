from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import IntervalEvent, TimeSensitiveIncrementalOperator


class Longest(TimeSensitiveIncrementalOperator):
    """The longest event(s) of the window, with their own lifetimes."""

    def initial_state(self):
        return []

    def add(self, state, event, window):
        return [*state, event]

    def remove(self, state, event, window):
        rest = list(state)
        rest.remove(event)
        return rest

    def result(self, state, window):
        longest = max(e.duration for e in state)
        return [IntervalEvent(e.start, e.end, e.payload) for e in state if e.duration == longest]


cht = Cht([(0, 3, "a"), (1, 2, "b"), (6, 8, "c"), (7, 9, "d")])
# Default output policy for time-sensitive operators: clip to the window.
assert evaluate(cht, TumblingWindow(5), Longest) == Cht([(0, 3, "a"), (6, 8, "c"), (7, 9, "d")])
