from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import IncrementalAggregate, pick


class Total(IncrementalAggregate):
    """A sum over scalar payloads, or over one field of mapping payloads."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> float:
        return 0.0

    def add(self, state: float, payload: object) -> float:
        return state + pick(payload, self.field)

    def remove(self, state: float, payload: object) -> float:
        return state - pick(payload, self.field)

    def result(self, state: float) -> float:
        return state


readings = Cht([(0, 1, {"temp": 20.0, "hum": 0.4}), (2, 3, {"temp": 22.0, "hum": 0.5})])
assert evaluate(readings, TumblingWindow(5), Total(field="temp")) == Cht([(0, 5, 42.0)])
assert evaluate(Cht([(0, 1, 1.5), (3, 4, 2.5)]), TumblingWindow(5), Total()) == Cht([(0, 5, 4.0)])

try:  # a mapping payload without field=: the error says what to pass
    evaluate(readings, TumblingWindow(5), Total())
except Exception as exc:
    assert "pass field='<name>'" in str(exc)
else:
    raise AssertionError("expected an error")
try:
    pick({"temp": 20.0}, "pressure")
except KeyError as exc:
    assert "its fields are ['temp']" in str(exc)
