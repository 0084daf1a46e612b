"""Finalize repairs a retraction chain that arrives out of order (CEDR 4.6)."""

from udm.host import INFINITY, Cht, Cti, ExternalCti, Insert, Retract
from udm.host.query import Stream

# e = [1, 7) is cut to 4, then to 2; the second cut arrives first, and
# [0, 3] (the insert and that cut) completes before the first cut arrives
stream = [
    Retract("e", 1, 4, 2),  # waits for its predecessor, 7 -> 4
    Insert("e", 1, 7),
    ExternalCti(0, 3, 2),  # complete: the CTI waits at 2, where 4 -> 2 will change e
    Retract("e", 1, 7, 4),  # the chain connects: 7 -> 2 goes out, the CTI moves on
    ExternalCti(4, 9, 1),
]
assert Stream.from_events(stream).to_events() == [
    Insert("e", 1, 7),
    Cti(2),
    Retract("e", 1, 7, 2),
    Cti(3),
    Cti(9),
    Cti(INFINITY),
]
for engine in ("reference", "host"):
    assert Stream.from_events(stream).to_cht(engine=engine) == Cht([(1, 2, None)])

# a retraction nothing can connect any more (its insert, at 0, would have to
# be in [0, 9], which is complete) is discarded and counted on every engine
orphan = Stream.from_events([Retract("a", 0, 10, 5), Insert("b", 1, 2), ExternalCti(0, 9, 2)])
assert orphan.to_cht(engine="host") == Cht([(1, 2, None)])
assert orphan.metrics.invalid_rows() == {"unmatched retraction (finalize)": 1}
print(Stream.from_events(stream).to_events())
