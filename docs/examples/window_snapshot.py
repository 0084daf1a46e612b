from udm.host import Cht, SnapshotWindow, evaluate
from udm.sdk import WindowDescriptor, aggregate


@aggregate
def members(values):
    return "".join(sorted(values))


cht = Cht([(1, 5, "a"), (3, 8, "b"), (10, 12, "c")])
window = SnapshotWindow()

# One window between each two consecutive endpoints 1, 3, 5, 8, 10, 12 ...
# ... except [8, 10), which no event overlaps.
assert window.windows(cht) == [
    WindowDescriptor(1, 3),
    WindowDescriptor(3, 5),
    WindowDescriptor(5, 8),
    WindowDescriptor(10, 12),
]
assert evaluate(cht, window, members) == Cht(
    [(1, 3, "a"), (3, 5, "ab"), (5, 8, "b"), (10, 12, "c")]
)
