from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import TimeSensitiveAggregate


class MyTimeWeightedAverage(TimeSensitiveAggregate):
    """The paper's MyTimeWeightedAverage: events with lifetimes and the window in."""

    def compute_result(self, events, window):
        total = sum(e.payload * (e.end - e.start) for e in events)
        return total / (window.end - window.start)


cht = Cht([(0, 3, 1.0), (2, 4, 4.0), (6, 7, 10.0)])
# [0, 5): (1.0 * 3 + 4.0 * 2) / 5;  [5, 10): 10.0 * 1 / 5
assert evaluate(cht, TumblingWindow(5), MyTimeWeightedAverage) == Cht([(0, 5, 2.2), (5, 10, 2.0)])
