"""One query at three consistency levels (CEDR's triangle)."""

from udm.host import Cti, Insert, Retract
from udm.host.query import Stream
from udm.sdk import aggregate


@aggregate
def total(values):
    return sum(values)


# a stream with a late event (b arrives after c) and a correction of a
stream = [
    Insert("a", 1, 9, 10),
    Insert("c", 12, 13, 1),
    Insert("b", 3, 4, 5),  # late: its start is before c's
    Retract("a", 1, 9, 2),  # a really ended at 2
    Cti(20),
]
query = Stream.from_events(stream).tumbling_window(10).aggregate(total)


def sizes(level):
    out = query.to_events(consistency=level)
    inserts = sum(isinstance(e, Insert) for e in out)
    retractions = sum(isinstance(e, Retract) for e in out)
    return inserts, retractions


# strong: block until CTIs, remember everything: no retraction ever
assert sizes("strong") == (2, 0)
# middle: speculate at once and correct with retractions; same final answer
middle = sizes("middle")
assert middle[1] > 0
assert query.to_cht(engine="host", consistency="middle") == query.to_cht(engine="reference")
# weak: remember only 5 ticks: once c (at 12) arrives, time before 7 is final,
# so b (at 3) and the correction of a (to 2) come too late: dropped and counted
weak = query.with_consistency(("weak", 5))
events = weak.to_events()
assert weak.metrics.invalid_rows() == {"late for finalize": 2}
print("strong", sizes("strong"), "middle", middle)
