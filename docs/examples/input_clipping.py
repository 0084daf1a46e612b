from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import TimeSensitiveAggregate


class TimeWeightedAverage(TimeSensitiveAggregate):
    def compute_result(self, events, window):
        total = sum(e.payload * (e.end - e.start) for e in events)
        return total / (window.end - window.start)


cht = Cht([(2, 6, 10.0), (6, 15, 20.0)])  # the second event spans the boundary at 10
window = TumblingWindow(10)


def twa(clipping):
    return evaluate(cht, window, TimeWeightedAverage, input_clipping=clipping)


# none: [6, 15) counts all 9 ticks in [0, 10): (10*4 + 20*9) / 10
assert twa("none") == Cht([(0, 10, 22.0), (10, 20, 18.0)])
# right: ends clipped to the window's end: (10*4 + 20*4) / 10 in [0, 10)
assert twa("right") == Cht([(0, 10, 12.0), (10, 20, 18.0)])
# left: starts clipped to the window's start: [6, 15) becomes [10, 15) in [10, 20)
assert twa("left") == Cht([(0, 10, 22.0), (10, 20, 10.0)])
# full: both; the time-weighted average the paper intends
assert twa("full") == Cht([(0, 10, 12.0), (10, 20, 10.0)])
