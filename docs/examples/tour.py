from udm.host import Cht, Cti, HoppingWindow, Insert, Retract, derive_cht, evaluate_by_key
from udm.sdk import IntervalEvent, TimeSensitiveAggregate, WindowDescriptor


class TimeWeightedAverage(TimeSensitiveAggregate):
    """The paper's example: each value weighs by its lifetime within the window."""

    def compute_result(self, events: list[IntervalEvent[float]], window: WindowDescriptor):
        total = sum(e.payload * (e.end - e.start) for e in events)
        return total / (window.end - window.start)


stream = [
    Insert(1, 0, 10, {"room": "lab", "temp": 20.0}),
    Insert(2, 0, 10, {"room": "hall", "temp": 16.0}),
    Insert(3, 10, 20, {"room": "lab", "temp": 30.0}),
    Retract(3, 10, 20, 15),  # the lab reading only lasted until 15
    Cti(20),
]
cht, stats = derive_cht(stream)
out = evaluate_by_key(
    cht,
    "room",
    HoppingWindow(size=10, hop=5),
    TimeWeightedAverage,
    value="temp",
    input_clipping="full",
)
assert out["lab"] == Cht(
    [
        (-5, 5, 10.0),  # 20.0 for 5 of the window's 10 ticks
        (0, 10, 20.0),
        (5, 15, 25.0),  # 20.0 for 5 ticks + 30.0 for 5 ticks
        (10, 20, 15.0),  # 30.0 for 5 ticks, nothing after 15
    ]
)
assert out["hall"] == Cht([(-5, 5, 8.0), (0, 10, 16.0), (5, 15, 8.0)])
