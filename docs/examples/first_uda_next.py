import statistics

from udm.host import (
    Cht,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    evaluate,
)
from udm.sdk import aggregate


@aggregate
def median(values):
    return statistics.median(values)


# The CHT that first_uda.py derives from its physical stream.
cht = Cht([(1, 2, 20.0), (3, 4, 22.0), (4, 6, 21.0), (7, 8, 30.0)])

# Overlapping windows: size 4, a new one every 2 ticks (the first starts before 0).
assert evaluate(cht, HoppingWindow(size=4, hop=2), median) == Cht(
    [(-2, 2, 20.0), (0, 4, 21.0), (2, 6, 21.5), (4, 8, 25.5), (6, 10, 30.0)]
)
# Windows between consecutive event endpoints: here each holds a single event.
assert evaluate(cht, SnapshotWindow(), median) == cht
# Every 2 consecutive start times; the result is a point at the window's last tick.
assert evaluate(cht, CountByStartWindow(2), median) == Cht(
    [(3, 4, 21.0), (4, 5, 21.5), (7, 8, 25.5)]
)
# As if a CTI at 7 were the last element: [5, 10) is not final yet.
assert evaluate(cht, TumblingWindow(5), median, watermark=7) == Cht([(0, 5, 21.0)])
