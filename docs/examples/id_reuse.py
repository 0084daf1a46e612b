"""An id is free again once its event ended before the latest CTI."""

from udm.host import Cti, Host, Insert, Retract, TumblingWindow, derive_cht, output_cht
from udm.sdk import aggregate


@aggregate
def total(values):
    return sum(values)


stream = [
    Insert("sensor-7", 1, 3, 10),  # ends at 3 ...
    Cti(5),  # ... before the CTI: no retraction can reach it any more
    Insert("sensor-7", 6, 8, 4),  # so its id names a new event
    Retract("sensor-7", 6, 8, 9),  # and a retraction means the new one
    Cti(10),
]
cht, _ = derive_cht(stream)
assert cht == [(1, 3, 10), (6, 9, 4)]  # both events stay in the CHT

host = Host(TumblingWindow(10), total)
assert output_cht(host.process_many(stream) + host.flush()) == [(0, 10, 14)]
