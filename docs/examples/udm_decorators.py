import statistics

from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import UdmDefinitionError, aggregate, operator


@aggregate
def median(values):
    return statistics.median(values)


@aggregate(name="pct")
def quantile(values, q=0.5):
    """Nearest-rank quantile: extra keyword parameters become UDM arguments."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@operator
def distinct(values):
    return sorted(set(values))


@aggregate(time_sensitive=True)
def coverage(events, window):
    """The share of the window's ticks covered by events."""
    return sum(e.end - e.start for e in events) / (window.end - window.start)


cht = Cht([(0, 1, 3), (1, 2, 9), (2, 3, 5), (3, 4, 9)])
window = TumblingWindow(5)

assert evaluate(cht, window, median) == Cht([(0, 5, 7.0)])
assert evaluate(cht, window, quantile) == Cht([(0, 5, 9)])  # q=0.5: sorted[2]
assert evaluate(cht, window, quantile(q=0.25)) == Cht([(0, 5, 5)])  # an instance ...
assert evaluate(cht, window, quantile, args={"q": 0.25}) == Cht([(0, 5, 5)])  # ... or args=
assert evaluate(cht, window, distinct) == Cht([(0, 5, 3), (0, 5, 5), (0, 5, 9)])
assert evaluate(cht, window, coverage, input_clipping="full") == Cht([(0, 5, 0.8)])

# The decorators build ordinary UDM classes.
assert quantile.name == "pct" and repr(quantile(q=0.9)) == "quantile(q=0.9)"
assert quantile.flavor() == "time-insensitive non-incremental aggregate"
assert coverage.flavor() == "time-sensitive non-incremental aggregate"

# UDM arguments must be optional keyword parameters.
try:

    @aggregate
    def top(values, k):
        return sorted(values)[-k:]

except UdmDefinitionError as exc:
    assert "parameter 'k' of top needs a default value" in str(exc)
else:
    raise AssertionError("expected UdmDefinitionError")
