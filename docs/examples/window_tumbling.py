from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import aggregate


@aggregate
def count(values):
    return len(values)


cht = Cht([(1, 2, "e1"), (3, 7, "e2"), (12, 13, "e3")])

# Windows [5k, 5k + 5): e2 spans a boundary, so it is a member of two windows.
assert evaluate(cht, TumblingWindow(5), count) == Cht([(0, 5, 2), (5, 10, 1), (10, 15, 1)])

# offset shifts the grid: windows [5k + 2, 5k + 7).
assert evaluate(cht, TumblingWindow(5, offset=2), count) == Cht(
    [(-3, 2, 1), (2, 7, 1), (12, 17, 1)]
)
