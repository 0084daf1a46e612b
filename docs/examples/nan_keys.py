import math

import numpy as np

from udm.host import Cht, Host, Insert, TumblingWindow, evaluate_by_key, output_cht
from udm.sdk import aggregate


@aggregate
def count(values: list[float]) -> int:
    return len(values)


# three NaN keys of three types (a pandas or numpy column gives numpy's)
rows = [(1, 2, float("nan")), (3, 4, np.float64("nan")), (5, 6, np.float32("nan")), (7, 8, 1.0)]
cht = Cht([(s, e, {"k": k, "v": 1.0}) for s, e, k in rows])

by_key = evaluate_by_key(cht, "k", TumblingWindow(10), count)
assert len(by_key) == 2  # one NaN group, one group of 1.0
(nan_key,) = [k for k in by_key if isinstance(k, float) and math.isnan(k)]
assert by_key[nan_key] == Cht([(0, 10, 3)])

host = Host(TumblingWindow(10), count, key="k", value="v")
events = [Insert(i, s, e, {"k": k, "v": 1.0}) for i, (s, e, k) in enumerate(rows)]
out = output_cht(host.process_many(events) + host.flush())
assert sorted(e.payload for e in out) == [1, 3]  # the same groups in the host
