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

# In a query, where() and select() pass each event's payload: a dict of its
# columns. A UDF of one value is applied to a column with a lambda.
from udm.host.query import Stream, UdfError  # noqa: E402

readings = Stream.from_cht([(0, 5, {"temp": 20.0}), (5, 10, {"temp": 35.0})])
hot_f = readings.where(lambda p: is_hot(p["temp"])).select(f=lambda p: fahrenheit(p["temp"]))
assert hot_f.to_cht(engine="reference") == Cht([(5, 10, {"f": 95.0})])
try:
    readings.select(f=fahrenheit).to_cht(engine="reference")  # gets the dict
except UdfError as exc:
    assert "UDF 'fahrenheit' in select(f=...) failed on payload {'temp': 20.0}" in str(exc)
    assert "lambda p: fahrenheit(p['<column>'])" in str(exc)
else:
    raise AssertionError("expected UdfError")
