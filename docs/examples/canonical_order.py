from udm.host import Cti, Insert, TumblingWindow, derive_cht, evaluate
from udm.sdk import aggregate


@aggregate(order_insensitive=False)
def arrival(values):
    """Depends on the order it sees: the payloads joined in that order."""
    return ",".join(values)


events = [Insert("x", 3, 4, "x"), Insert("y", 1, 9, "y"), Insert("z", 1, 2, "z")]
forward, _ = derive_cht([*events, Cti(10)])
backward, _ = derive_cht([*reversed(events), Cti(10)])

# Same CHT, different arrival order: the UDM sees the same order (start, then payload).
for cht in (forward, backward):
    assert evaluate(cht, TumblingWindow(10), arrival) == [(0, 10, "y,z,x")]
