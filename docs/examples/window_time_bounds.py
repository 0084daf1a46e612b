from udm.host import (
    INFINITY,
    MIN_TIME,
    Cht,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    evaluate,
)
from udm.sdk import aggregate


@aggregate
def count(values):
    return len(values)


window = TumblingWindow(10)
# events starting from min_start and ending by max_end fit the grid's windows
min_start, max_end = window.time_bounds
assert (min_start, max_end) == (-9_223_372_036_854_775_800, 9_223_372_036_854_775_800)
assert min_start > MIN_TIME and max_end < INFINITY

# An open event (ending at INFINITY) is fine; with a final CTI its windows are finite.
ok = Cht([(5, INFINITY, "open")])
assert evaluate(ok, window, count, watermark=30) == Cht([(0, 10, 1), (10, 20, 1), (20, 30, 1)])

# An event from the beginning of time belongs to infinitely many windows: refused.
try:
    evaluate(Cht([(MIN_TIME, 5, "forever")]), window, count, watermark=30)
except ValueError as error:
    assert "beginning of time" in str(error), error
else:
    raise AssertionError("an event from MIN_TIME was windowed")

# With gaps too, though it starts in one: MIN_TIME means "since forever".
gapped = HoppingWindow(3, 10)
assert gapped.time_bounds == (MIN_TIME + 1, INFINITY)
try:
    evaluate(Cht([(MIN_TIME, 5, "forever")]), gapped, count, watermark=30)
except ValueError as error:
    assert "beginning of time" in str(error), error
else:
    raise AssertionError("an event from MIN_TIME was windowed")

# Snapshot and count windows take it.
assert evaluate(Cht([(MIN_TIME, 5, "forever")]), SnapshotWindow(), count) == Cht([(MIN_TIME, 5, 1)])
