from udm.host import Cht, CountByEndWindow, evaluate
from udm.sdk import WindowDescriptor, aggregate


@aggregate
def members(values):
    return "".join(sorted(values))


cht = Cht([(1, 3, "a"), (2, 3, "b"), (0, 6, "c"), (5, 8, "d")])
window = CountByEndWindow(2)  # distinct ends: 3, 6, 8

assert window.windows(cht) == [
    WindowDescriptor(2, 6),  # [e0 - 1, e1): ends 3 and 6
    WindowDescriptor(5, 8),  # [e1 - 1, e2): ends 6 and 8
]

# Members: the events whose end lies in [e_i, e_(i+n-1)], i.e. whose last tick is in
# the window. d = [5, 8) overlaps [2, 6) but ends after it, so it is not a member.
assert evaluate(cht, window, members) == Cht([(5, 6, "abc"), (7, 8, "cd")])
