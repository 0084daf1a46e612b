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


@aggregate(order_insensitive=False)
def first(values):
    return values[0]


# Payloads of one start are ordered by value: numbers numerically (27 before
# 100, as text "100" would come first), an int before an equal float.
ties = [Insert("a", 0, 1, 100), Insert("b", 0, 1, 27), Insert("c", 0, 1, 2.0), Cti(10)]
cht, _ = derive_cht(ties)
assert evaluate(cht, TumblingWindow(10), first) == [(0, 10, 2.0)]
cht, _ = derive_cht([Insert("d", 0, 1, 2), *ties])
assert type(evaluate(cht, TumblingWindow(10), first)[0].payload) is int  # 2 before 2.0

# Events compare in the canonical order too, so sorted() lists any CHT or
# result the way UDMs see events; Cht.sorted() is the same listing.
from udm.sdk import IntervalEvent  # noqa: E402

mixed = [IntervalEvent(0, 5, 100), IntervalEvent(0, 5, "x"), IntervalEvent(0, 5, 27)]
assert [e.payload for e in sorted(mixed)] == [27, 100, "x"]
