from udm.host import Cht, SnapshotWindow, TumblingWindow, evaluate
from udm.sdk import IntervalEvent, TimeSensitiveOperator


class Rises(TimeSensitiveOperator):
    """A point event at each start where the value rises above the previous one."""

    def compute_result(self, events, window):
        out, previous = [], None
        for e in events:  # canonical order: by start, then end, then payload
            if previous is not None and e.payload > previous:
                out.append(IntervalEvent(e.start, e.start + 1, e.payload - previous))
            previous = e.payload
        return out


cht = Cht([(0, 2, 3), (2, 4, 9), (4, 6, 5), (6, 8, 8)])
assert evaluate(cht, TumblingWindow(10), Rises) == Cht([(2, 3, 6), (6, 7, 3)])
# The query writer can override the operator's timestamps with the window's.
assert evaluate(cht, TumblingWindow(10), Rises, output_policy="align") == Cht(
    [(0, 10, 6), (0, 10, 3)]
)
# Snapshot windows hold one value each: nothing rises inside any of them.
assert evaluate(cht, SnapshotWindow(), Rises) == Cht([])
