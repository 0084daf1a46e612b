from udm.host import INFINITY, Cht, TumblingWindow, evaluate
from udm.sdk import aggregate


@aggregate
def count(values):
    return len(values)


cht = Cht([(1, 2, "a"), (6, 7, "b"), (12, 13, "c")])
window = TumblingWindow(5)

# After a CTI at 12, windows ending at or before 12 are final and output; [10, 15) is not.
assert evaluate(cht, window, count, watermark=12) == Cht([(0, 5, 1), (5, 10, 1)])
# A window ending exactly at the watermark is output.
assert evaluate(cht, window, count, watermark=15) == Cht([(0, 5, 1), (5, 10, 1), (10, 15, 1)])
# The default watermark (infinity) is the end of the stream: every window.
assert evaluate(cht, window, count) == evaluate(cht, window, count, watermark=15)

# An event that never ends overlaps infinitely many grid windows: a finite watermark is needed.
forever = Cht([(1, INFINITY, "x")])
try:
    evaluate(forever, window, count)
except ValueError as exc:
    assert "give a finite watermark" in str(exc)
else:
    raise AssertionError("expected ValueError")
assert evaluate(forever, window, count, watermark=10) == Cht([(0, 5, 1), (5, 10, 1)])
