from udm.host import (
    Cht,
    TumblingWindow,
    UdmInvocationError,
    cht_diff,
    cht_equal,
    evaluate,
    evaluate_by_key,
)
from udm.sdk import IntervalEvent, aggregate


@aggregate
def mean(values):
    return sum(values) / len(values)


cht = Cht(
    [
        (0, 3, {"room": "lab", "temp": 20.0}),
        (1, 4, {"room": "hall", "temp": 15.0}),
        (2, 6, {"room": "lab", "temp": 23.0}),
    ]
)
window = TumblingWindow(5)

# value= maps payloads to what the UDM sees: a field name or a function.
assert evaluate(cht, window, mean, value="temp") == Cht([(0, 5, 58.0 / 3), (5, 10, 23.0)])
assert evaluate(cht, window, mean, value=lambda p: p["temp"] * 2) == Cht(
    [(0, 5, 116.0 / 3), (5, 10, 46.0)]
)

# Group and apply: one output CHT per key (a field name or a function of the payload).
by_room = evaluate_by_key(cht, "room", window, mean, value="temp")
assert by_room == {
    "lab": Cht([(0, 5, 21.5), (5, 10, 23.0)]),
    "hall": Cht([(0, 5, 15.0)]),
}

# Comparing CHTs: == is exact multiset equality; cht_equal and cht_diff take tolerances.
approx = Cht([(0, 5, 19.3333), (5, 10, 23.0)])
result = evaluate(cht, window, mean, value="temp")
assert result != approx and cht_equal(result, approx, abs_tol=1e-3)
missing, extra = cht_diff(expected=Cht([(0, 5, 21.5), (5, 10, 23.0)]), actual=by_room["lab"])
assert (missing, extra) == ([], [])
missing, extra = cht_diff(expected=Cht([(0, 5, 21.0)]), actual=by_room["lab"])
assert missing == [IntervalEvent(0, 5, 21.0)]
assert extra == [IntervalEvent(0, 5, 21.5), IntervalEvent(5, 10, 23.0)]


# A failing UDM is reported with its name and the window it failed on.
@aggregate
def broken(values):
    return 1 / 0


try:
    evaluate(cht, window, broken, value="temp")
except UdmInvocationError as exc:
    assert exc.udm == "broken" and exc.window == "[0, 5)"
    assert "ZeroDivisionError: division by zero" in str(exc)
    assert isinstance(exc.__cause__, ZeroDivisionError)
else:
    raise AssertionError("expected UdmInvocationError")
