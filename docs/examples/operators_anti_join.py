"""Detecting absence with a left anti-semijoin: sensors without a heartbeat."""

from udm.host import Cht, IntervalEvent
from udm.host.query import Stream

# each sensor should be watched during [0, 60)
watch = Stream.from_cht([(0, 60, {"sensor": "s1"}), (0, 60, {"sensor": "s2"})], key="sensor")
# a heartbeat keeps a sensor alive for 10 ticks after it is seen
beats = Stream.from_cht(
    [(5, 6, {"sensor": "s1"}), (12, 13, {"sensor": "s1"}), (40, 41, {"sensor": "s1"})],
    key="sensor",
).set_duration(10)

silent = watch.left_anti_join(beats)
expected = {
    "s1": Cht(
        [
            IntervalEvent(0, 5, {"sensor": "s1"}),
            IntervalEvent(22, 40, {"sensor": "s1"}),
            IntervalEvent(50, 60, {"sensor": "s1"}),
        ]
    ),
    "s2": Cht([IntervalEvent(0, 60, {"sensor": "s2"})]),
}
assert silent.to_cht(engine="reference") == expected
assert silent.to_cht(engine="host") == expected
print(silent.to_cht())
