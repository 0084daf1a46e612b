"""An insert-only stream fed as columns: process_inserts and retractions=False."""

from udm.host import Cti, Host, InvalidElementError, Retract, TumblingWindow
from udm.sdk import IncrementalAggregate


class Total(IncrementalAggregate):
    """Invertible, so the host takes its fast path."""

    def initial_state(self):
        return 0

    def add(self, state, payload):
        return state + payload

    def remove(self, state, payload):
        return state - payload

    def result(self, state):
        return state


host = Host(TumblingWindow(10), Total, retractions=False)
# four point events as columns: ids, starts, ends, payloads
out = host.process_inserts([0, 1, 2, 3], [1, 4, 12, 15], [2, 5, 13, 16], [5, 7, 1, 2])
out += host.process(Cti(20))
print([(e.start, e.end, e.payload) for e in out if not isinstance(e, Cti)])
assert [(e.start, e.end, e.payload) for e in out if not isinstance(e, Cti)] == [
    (0, 10, 12),  # emitted once the event at 12 passed the window's end
    (10, 20, 3),
]

try:
    host.process(Retract(3, 15, 16, 15))
except InvalidElementError as exc:
    print(exc)
    assert "retractions=False" in str(exc)
