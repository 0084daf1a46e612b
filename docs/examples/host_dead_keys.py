"""Keys that come and go: a key with nothing left to do is dropped at the CTI."""

from udm.host import Cti, Host, Insert, OutputId, TumblingWindow, point
from udm.sdk import IncrementalAggregate


class Total(IncrementalAggregate):
    def initial_state(self):
        return 0

    def add(self, state, payload):
        return state + payload["v"]

    def remove(self, state, payload):
        return state - payload["v"]

    def result(self, state):
        return state


host = Host(TumblingWindow(10), Total, key=lambda p: p["device"])
host.process_many(
    [point("a", 1, {"device": "d1", "v": 5}), point("b", 3, {"device": "d2", "v": 2})]
)
assert host.holds_key("d1") and host.holds_key("d2")

# the CTI makes both keys' only window final: their outputs are settled,
# nothing of theirs is live, so both keys are dropped whole
out = host.process(Cti(10))
assert Insert(OutputId("d1", 0), 0, 10, 5) in out
assert not host.holds_key("d1") and not host.holds_key("d2")

# a key that comes back starts afresh, with the output a kept key would give
out = host.process_many([point("c", 12, {"device": "d1", "v": 4}), Cti(20)])
assert [e.payload for e in out if type(e) is Insert] == [4]
