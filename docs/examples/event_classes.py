from udm.host import INFINITY, Insert, Retract, derive_cht, edge_end, edge_start, point
from udm.sdk import IntervalEvent

ping = point("ping", 10, "ping")  # a point event: [10, 11), one tick long
job = Insert("job", 10, 25, "job")  # an interval event: [10, 25)
level = edge_start("level", 10, 21.5)  # an edge event: [10, inf) until its end is known
level_ends = edge_end("level", 10, 40)  # its end edge: a retraction [10, inf) -> [10, 40)

assert (ping.start, ping.end) == (10, 11)
assert (level.start, level.end) == (10, INFINITY)
assert level_ends == Retract("level", 10, INFINITY, 40)

cht, _ = derive_cht([ping, job, level, level_ends])
assert cht.sorted() == [
    IntervalEvent(10, 11, "ping"),
    IntervalEvent(10, 25, "job"),
    IntervalEvent(10, 40, 21.5),
]
