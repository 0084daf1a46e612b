"""AlterLifetime and its shortcuts; a sliding window as CEDR builds it."""

from udm.host import INFINITY, Cht, IntervalEvent
from udm.host.query import Stream
from udm.sdk import aggregate


@aggregate
def total(values):
    return sum(values)


# point events: readings at 1, 3 and 8
readings = Stream.from_cht([(1, 2, 5), (3, 4, 2), (8, 9, 4)])

# shift, set_duration, to_points and clip_to change lifetimes, not payloads
assert readings.shift(10).to_cht() == Cht([(11, 12, 5), (13, 14, 2), (18, 19, 4)])
assert readings.set_duration(4).to_cht() == Cht([(1, 5, 5), (3, 7, 2), (8, 12, 4)])
long = Stream.from_cht([(0, 100, "a"), (5, 7, "b")])
assert long.clip_to(10).to_cht() == Cht([(0, 10, "a"), (5, 7, "b")])
assert long.to_points().to_cht() == Cht([(0, 1, "a"), (5, 6, "b")])

# A sliding window of 4 ticks (CEDR: W = AlterLifetime(Vs, wl)): each reading
# lasts 4 ticks, and the snapshot aggregate sums what is live at each moment.
moving = readings.set_duration(4).snapshot_window().aggregate(total)
expected = Cht(
    [
        IntervalEvent(1, 3, 5),  # only the reading at 1
        IntervalEvent(3, 5, 7),  # readings at 1 and 3
        IntervalEvent(5, 7, 2),  # only the reading at 3
        IntervalEvent(8, 12, 4),  # only the reading at 8
    ]
)
assert moving.to_cht(engine="reference") == expected
assert moving.to_cht(engine="host") == expected

# any monotone start function and any duration that does not grow as the end shrinks
hourly = readings.alter_lifetime(start=lambda s: s // 5 * 5, duration=lambda s, e: 5)
assert hourly.to_cht() == Cht([(0, 5, 5), (0, 5, 2), (5, 10, 4)])

# an infinite duration: every event never ends (CEDR's Inserts(S) = Π(Vs, ∞));
# then clip_to gives every event the same length (StreamInsight's pattern)
assert long.set_duration(INFINITY).to_cht() == Cht([(0, INFINITY, "a"), (5, INFINITY, "b")])
assert long.set_duration(INFINITY).clip_to(3).to_cht() == Cht([(0, 3, "a"), (5, 8, "b")])
print(moving.to_cht())
