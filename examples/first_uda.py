import statistics

from udm.host import Cti, Insert, Retract, TumblingWindow, derive_cht, evaluate, point
from udm.sdk import aggregate


@aggregate
def median(values):
    """A user-defined aggregate: a plain function over the window's payloads."""
    return statistics.median(values)


stream = [  # a physical stream; times are ticks (1 tick = 1 microsecond)
    point("a", 1, 20.0),  # a point event: lifetime [1, 2)
    point("b", 3, 22.0),
    Insert("c", 4, 9, 21.0),  # an interval event [4, 9) ...
    Retract("c", 4, 9, 6),  # ... corrected to end at 6
    point("d", 7, 30.0),
    Cti(10),  # nothing later will change time before 10
]
cht, _ = derive_cht(stream)  # the stream's canonical history table
for e in evaluate(cht, TumblingWindow(5), median).sorted():
    print(f"[{e.start}, {e.end}) median={e.payload}")
