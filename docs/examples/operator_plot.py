import tempfile
from pathlib import Path

from udm.host import Stream
from udm.host.stream import Cti, Insert

# the CEDR join example (its Table 1), then a 2-tick lifetime for each result
s1 = Stream.from_events([Insert("a0", 0, 2, {"P": "A0"}), Cti(1), Insert("a1", 2, 6, {"P": "A1"})])
s2 = Stream.from_events([Insert("b1", 3, 5, {"P": "A1"}), Cti(3)])
query = s1.join(s2, on="P").set_duration(2)

out = Path(tempfile.mkdtemp()) / "operators.png"
figure = query.plot(out)  # what `udm-cli explain --plot` draws for this query

labels = [ax.get_ylabel() for ax in figure.axes]
assert labels == [
    "1. source",
    "2. source",
    "3. join on P\nin 1: output of 1",
    "3. join on P\nin 2: output of 2",
    "3. join on P\nout",
    "4. set_duration 2\nin: output of 3",
    "4. set_duration 2\nout",
]
assert out.stat().st_size > 0
