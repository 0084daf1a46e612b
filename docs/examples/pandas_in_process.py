"""Small data without Spark: a pandas DataFrame in, a pandas DataFrame out."""

import pandas as pd

from udm.host import Cht
from udm.host.query import Stream

readings = pd.DataFrame(
    {
        "ts": pd.to_datetime(
            ["2024-01-01 00:00:00", "2024-01-01 00:00:00.000001", "2024-01-01 00:01:10"],
            format="ISO8601",
            utc=True,
        ),
        "sensor": ["a", "a", "a"],
        "temp": [20.0, 22.0, 25.0],
    }
)
query = (
    Stream.from_pandas(readings, start="ts", key="sensor")  # same arguments as from_dataframe
    .tumbling_window(pd.Timedelta(minutes=1).to_pytimedelta())
    .aggregate("stats.mean", value="temp")
)
out = query.to_pandas()  # in-process: no SparkSession
assert list(out.columns) == ["start", "end", "sensor", "mean"]
assert list(out["mean"]) == [21.0, 25.0]
assert str(out["start"].dtype) == "datetime64[us, UTC]"
minute = 60_000_000
t0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in ticks
assert query.to_cht() == {"a": Cht([(t0, t0 + minute, 21.0), (t0 + minute, t0 + 2 * minute, 25.0)])}
