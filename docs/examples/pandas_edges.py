"""pandas and Arrow at the edges: object time columns, time's last tick, no rows."""

import pandas as pd
import pyarrow as pa

from udm.host import INFINITY
from udm.host.query import Stream

# an object time column is read value by value: a string among int ticks is
# an invalid row, dropped and counted under on_invalid="drop"
mixed = pd.DataFrame(
    {"t": pd.Series([5, "e", 12], dtype=object), "k": ["a", "a", "a"], "v": [1.0, 2.0, 4.0]}
)
stream = Stream.from_pandas(mixed, start="t", key="k", on_invalid="drop")
reason = "'t' is not a valid time (str in a column of int ticks)"
assert stream.metrics.invalid_rows() == {reason: 1}
means = stream.tumbling_window(10).aggregate("stats.mean", value="v")
assert means.to_cht() == {"a": [(0, 10, 1.0), (10, 20, 4.0)]}

# time's last tick, beyond Python datetime's year 9999, in and out exactly
last = pa.table({"ts": pa.array([INFINITY - 1], pa.timestamp("us", tz="UTC")), "k": ["a"]})
table = Stream.from_arrow(last, start="ts", key="k").to_arrow()
assert table.column("start").cast("int64")[0].as_py() == INFINITY - 1
assert str(table.column("start").type) == "timestamp[us, tz=UTC]"
again = Stream.from_arrow(table, start="start", end="end", shape="edge", key="k")
assert again.to_cht() == {"a": [(INFINITY - 1, INFINITY, {"k": "a"})]}

# an output without rows keeps its columns: start, end, the key, the result
nothing = Stream.from_pandas(mixed.iloc[1:2], start="t", key="k", on_invalid="drop")
empty = nothing.tumbling_window(10).aggregate("stats.mean", value="v").to_pandas()
assert list(empty.columns) == ["start", "end", "k", "mean"] and len(empty) == 0
