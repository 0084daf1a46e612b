from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import aggregate


@aggregate
def count(values):
    return len(values)


cht = Cht([(1, 2, "a"), (17, 18, "b")])
window = TumblingWindow(5)

# Empty windows produce no output (empty-preserving semantics) ...
assert evaluate(cht, window, count) == Cht([(0, 5, 1), (15, 20, 1)])
# ... unless emit_empty asks for every grid window from the first non-empty one
# to the last non-empty one (infinite watermark) ...
assert evaluate(cht, window, count, emit_empty=True) == Cht(
    [(0, 5, 1), (5, 10, 0), (10, 15, 0), (15, 20, 1)]
)
# ... or to the last one that ends by the watermark.
assert evaluate(cht, window, count, emit_empty=True, watermark=30) == Cht(
    [(0, 5, 1), (5, 10, 0), (10, 15, 0), (15, 20, 1), (20, 25, 0), (25, 30, 0)]
)
