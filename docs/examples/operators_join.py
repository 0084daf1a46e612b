"""CEDR's join example (its Tables 1, 3 and 4), as a udm query."""

from udm.host import Cht, Cti, Insert, IntervalEvent, Retract
from udm.host.query import Stream

# Table 1: S1 and S2 as physical streams; S1's event A1 is later cut to end at 4
s1 = Stream.from_events(
    [
        Insert("a0", 0, 2, {"P": "A0"}),
        Cti(1),
        Insert("a1", 2, 6, {"P": "A1"}),
        Retract("a1", 2, 6, 4),
    ]
)
s2 = Stream.from_events([Insert("b1", 3, 5, {"P": "A1"}), Cti(3)])

# an event for every pair with equal P whose lifetimes overlap, over the intersection
joined = s1.join(s2, on="P")

# Table 3: the output's CHT, the same on every engine
table3 = {"A1": Cht([IntervalEvent(3, 4, {"P": "A1"})])}
assert joined.to_cht(engine="reference") == table3
assert joined.to_cht(engine="host") == table3

# the incremental engine's output stream: speculative [3, 5), then corrected to [3, 4)
# (Table 4; udm's ids name the pair of input events)
out = joined.to_events()
assert Insert(("a1", "b1"), 3, 5, {"P": "A1"}) in out
assert Retract(("a1", "b1"), 3, 5, 4) in out
for element in out:
    print(element)
