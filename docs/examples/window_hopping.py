from udm.host import Cht, HoppingWindow, evaluate
from udm.sdk import WindowDescriptor, aggregate


@aggregate
def count(values):
    return len(values)


cht = Cht([(1, 2, "e1"), (3, 7, "e2")])
window = HoppingWindow(size=4, hop=2)  # windows [2k, 2k + 4) for every integer k

assert window.windows(cht) == [
    WindowDescriptor(-2, 2),  # k = -1: a window starting before 0 still holds e1
    WindowDescriptor(0, 4),
    WindowDescriptor(2, 6),
    WindowDescriptor(4, 8),
    WindowDescriptor(6, 10),
]
assert evaluate(cht, window, count) == Cht(
    [(-2, 2, 1), (0, 4, 2), (2, 6, 1), (4, 8, 1), (6, 10, 1)]
)

# hop > size leaves gaps: windows [5k, 5k + 2) cover none of the ticks 2, 3, 4,
# so a point event at 3 belongs to no window.
gaps = Cht([(1, 2, "e1"), (3, 4, "e3")])
assert evaluate(gaps, HoppingWindow(size=2, hop=5), count) == Cht([(0, 2, 1)])
