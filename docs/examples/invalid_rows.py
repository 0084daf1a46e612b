"""Invalid rows dropped and counted (in-process; on Spark the same API)."""

from udm.host import Cht
from udm.host.query import Stream

rows = [(0, 5, 1.0), (7, 7, 2.0), (None, 3, 3.0), (12, 15, 4.0)]
source = Stream.from_cht(rows, on_invalid="drop")
query = source.tumbling_window(10).aggregate("stats.mean")
assert query.to_cht() == Cht([(0, 10, 1.0), (10, 20, 4.0)])

counts = {"'end' is not after 'start'": 1, "'start' is null": 1}
assert query.metrics.invalid_rows() == counts
# the stream on_invalid was passed to reports the run built on it
assert source.metrics.invalid_rows() == counts and source.metrics.dropped == 2
