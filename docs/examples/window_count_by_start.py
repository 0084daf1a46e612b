from udm.host import Cht, CountByStartWindow, evaluate
from udm.sdk import WindowDescriptor, aggregate


@aggregate
def members(values):
    return "".join(sorted(values))


cht = Cht([(1, 3, "a"), (1, 2, "b"), (4, 9, "c"), (6, 7, "d")])
window = CountByStartWindow(2)  # distinct starts: 1, 4, 6

assert window.windows(cht) == [
    WindowDescriptor(1, 5),  # [s0, s1 + 1): starts 1 and 4
    WindowDescriptor(4, 7),  # [s1, s2 + 1): starts 4 and 6
]  # no window starts at 6: there is no second start after it (yet)

# Members: the events whose start lies in the window (a and b share a start: 3 events).
# Default output policy for count windows: a point at the window's last tick.
assert evaluate(cht, window, members) == Cht([(4, 5, "abc"), (6, 7, "cd")])
