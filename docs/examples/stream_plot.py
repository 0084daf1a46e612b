import statistics
import tempfile
from pathlib import Path

from udm.host import Stream
from udm.sdk import aggregate


@aggregate
def median(values):
    return statistics.median(values)


readings = [
    (1, 7, {"room": "lab", "temp": 20.0}),
    (4, 5, {"room": "lab", "temp": 22.0}),
    (6, 12, {"room": "hall", "temp": 18.0}),
    (8, 15, {"room": "lab", "temp": 21.0}),
]
query = (
    Stream.from_cht(readings, key="room")
    .hopping_window(size=10, hop=5)
    .aggregate(median, value="temp")
)
out = Path(tempfile.mkdtemp()) / "lab.png"
figure = query.plot(out, key="lab")  # input events, windows, outputs of one room

assert out.stat().st_size > 0
assert [ax.get_ylabel() for ax in figure.axes] == ["input events", "windows", "output events"]
# lab's windows [-5, 5), [0, 10), [5, 15), [10, 20): four medians
assert len(figure.axes[2].patches) == 4
