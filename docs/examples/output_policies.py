from udm.host import Cht, CountByStartWindow, TumblingWindow, UdmInvocationError, evaluate
from udm.sdk import IntervalEvent, aggregate, operator


@aggregate
def count(values):
    return len(values)


cht = Cht([(1, 2, 5), (3, 9, 50), (12, 13, 7)])

# Defaults for a time-insensitive UDM: align on hopping, tumbling and snapshot windows ...
assert evaluate(cht, TumblingWindow(5), count) == Cht([(0, 5, 2), (5, 10, 1), (10, 15, 1)])
# ... and point_end, [W.end - 1, W.end), on count windows.
assert evaluate(cht, CountByStartWindow(2), count) == Cht([(3, 4, 2), (12, 13, 2)])
# point_end can be chosen for any window.
assert evaluate(cht, TumblingWindow(5), count, output_policy="point_end") == Cht(
    [(4, 5, 2), (9, 10, 1), (14, 15, 1)]
)


@operator(time_sensitive=True)
def large(events, window):
    """Each event with a payload above 10, with the event's own lifetime."""
    return [IntervalEvent(e.start, e.end, e.payload) for e in events if e.payload > 10]


# A time-sensitive operator timestamps its output; the default policy is clip.
assert evaluate(cht, TumblingWindow(5), large) == Cht([(3, 5, 50), (5, 9, 50)])
# align overrides the operator's timestamps with the window's.
assert evaluate(cht, TumblingWindow(5), large, output_policy="align") == Cht(
    [(0, 5, 50), (5, 10, 50)]
)
# keep leaves them unchanged, but output starting before its window is an error:
# in window [5, 10) the operator returns [3, 9), which would be output in the past.
try:
    evaluate(cht, TumblingWindow(5), large, output_policy="keep")
except UdmInvocationError as exc:
    assert "[5, 10)" in str(exc) and "starts before its window" in str(exc)
else:
    raise AssertionError("expected UdmInvocationError")
# With left clipping the operator never sees a start before the window: keep works.
assert evaluate(cht, TumblingWindow(5), large, input_clipping="left", output_policy="keep") == Cht(
    [(3, 9, 50), (5, 9, 50)]
)

# Policies that keep UDM timestamps need a UDM that produces them.
try:
    evaluate(cht, TumblingWindow(5), count, output_policy="clip")
except ValueError as exc:
    assert "use 'align' or 'point_end'" in str(exc)
else:
    raise AssertionError("expected ValueError")
