from udm.host import Cht, TumblingWindow, evaluate, filter_events, project
from udm.sdk import function


@function
def fahrenheit(celsius):
    return celsius * 9 / 5 + 32


@function(name="hot")
def is_hot(celsius, threshold=30.0):
    return celsius > threshold


cht = Cht([(0, 5, 20.0), (5, 10, 35.0)])

assert fahrenheit(100) == 212.0  # a UDF is still a plain callable
assert project(cht, fahrenheit) == Cht([(0, 5, 68.0), (5, 10, 95.0)])  # lifetimes kept
assert filter_events(cht, is_hot) == Cht([(5, 10, 35.0)])
assert filter_events(cht, lambda c: is_hot(c, threshold=10.0)) == cht
assert is_hot.name == "hot" and fahrenheit.properties.deterministic

# A UDF is evaluated per event, not per window.
try:
    evaluate(cht, TumblingWindow(5), fahrenheit)
except TypeError as exc:
    assert "use it in a filter or projection" in str(exc)
else:
    raise AssertionError("expected TypeError")
