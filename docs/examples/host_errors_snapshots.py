"""A failing UDM leaves the host unchanged; snapshots resume a stream."""

from udm.host import Cti, Host, TumblingWindow, UdmInvocationError, output_cht, point
from udm.sdk import IncrementalAggregate


class Picky(IncrementalAggregate):
    def initial_state(self):
        return 0

    def add(self, state, payload):
        if payload < 0:
            raise ValueError("negative reading")
        return state + payload

    def remove(self, state, payload):
        return state - payload

    def result(self, state):
        return state


host = Host(TumblingWindow(10), Picky)
host.process(point("a", 1, 5))
try:
    host.process(point("bad", 2, -1))
except UdmInvocationError as exc:
    print(exc)
    assert "picky" in str(exc) and "[0, 10)" in str(exc) and "id='bad'" in str(exc)

saved = host.snapshot()  # versioned plain data; state as before the failure
resumed = Host(TumblingWindow(10), Picky)
resumed.restore(saved)
outputs = resumed.process_many([point("b", 4, 2), Cti(10)])
assert output_cht(outputs) == [(0, 10, 7)]
