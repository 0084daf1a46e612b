"""A union has every column of its inputs, also of an input that gives no rows."""

from udm.host import Cht, IntervalEvent
from udm.host.query import Stream

temps = Stream.from_cht([(0, 10, {"sensor": "s1", "temp": 21.5})], key="sensor")
# a join without pairs: the doors never opened while a sensor was read
doors = Stream.from_cht([(20, 30, {"sensor": "s1", "door": "open"})], key="sensor")
alarms = temps.join(doors)  # columns sensor, temp, door; no rows
readings = Stream.from_cht([(5, 15, {"sensor": "s1", "humidity": 40})], key="sensor")

both = readings.union(alarms)
expected = {
    "s1": Cht(
        [IntervalEvent(5, 15, {"sensor": "s1", "humidity": 40, "temp": None, "door": None})]
    )
}
# every engine gives the union's rows every column, null where an input lacks it
assert both.to_cht(engine="reference") == expected
assert both.to_cht(engine="host") == expected
print(both.to_cht(engine="host"))
