from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import TimeSensitiveIncrementalAggregate


class Integral(TimeSensitiveIncrementalAggregate):
    """The area under a step signal: sum of payload x duration, maintained by deltas."""

    def initial_state(self):
        return 0.0

    def add(self, state, event, window):
        return state + event.payload * (event.end - event.start)

    def remove(self, state, event, window):
        return state - event.payload * (event.end - event.start)

    def result(self, state, window):
        return state


cht = Cht([(0, 3, 1.0), (2, 4, 4.0), (6, 7, 10.0)])
# With full clipping each event counts only inside the window.
assert evaluate(cht, TumblingWindow(5), Integral, input_clipping="full") == Cht(
    [(0, 5, 11.0), (5, 10, 10.0)]
)
