"""An id the input may reuse, while the operator's output still holds it."""

from udm.host import INFINITY, Cti, Insert
from udm.host.operators.ids import Reused
from udm.host.query import Stream

readings = Stream.from_events(
    [
        Insert("sensor-7", 1, 3, 10),  # ends at 3, before the CTI at 5:
        Cti(5),  # ... so the input may reuse its id
        Insert("sensor-7", 6, 8, 4),
    ]
)
sliding = readings.set_duration(5)  # [1, 6) is still live at the CTI's 5
out = sliding.to_events()
assert out == [
    Insert("sensor-7", 1, 6, 10),
    Cti(5),
    Insert(Reused("sensor-7", 1), 6, 11, 4),  # so the later event is renamed
    Cti(INFINITY),  # the end of the stream
]
assert sliding.to_cht(engine="host") == sliding.to_cht(engine="reference")
assert sliding.to_cht(engine="reference") == [(1, 6, 10), (6, 11, 4)]
