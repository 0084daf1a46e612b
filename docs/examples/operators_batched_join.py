"""The join's batched path: a run of inserts joined at once, output as columns."""

import numpy as np

from udm.host import Cti, Insert
from udm.host.operators.base import Collector
from udm.host.operators.batch import InsertBatch, runs
from udm.host.operators.join import JoinOperator


def key(p):
    return p["k"]


join = JoinOperator(key, key, lambda left, right: {"k": left["k"], "x": left["x"], "y": right["y"]})
out = Collector()
join.connect(out)


def side(tag, field):
    """200 in-order events over 10 keys, lasting 5 ticks, a CTI every 100."""
    elements = []
    for i in range(200):
        elements.append(Insert(f"{tag}{i}", i, i + 5, {"k": i % 10, field: i}))
        if i % 100 == 99:
            elements.append(Cti(i + 1))
    return [*elements, Cti(300)]


# runs end at each CTI: 100 inserts and a CTI, fed to each side in turn
for l_run, r_run in zip(runs(side("l", "x")), runs(side("r", "y")), strict=True):
    join.push_batch(0, l_run)
    join.push_batch(1, r_run)
    assert join.columns is not None  # the batched path took the run

# each left event meets the right event with the same start (same key, overlapping)
pairs = [e for e in out.elements if type(e) is Insert]  # the Collector built the objects
assert len(pairs) == 200
assert pairs[0] == Insert(("l0", "r0"), 0, 5, {"k": 0, "x": 0, "y": 0})
assert [e for e in out.elements if type(e) is Cti] == [Cti(100), Cti(200), Cti(300)]
assert join.state_size() == 0  # every event ended before the last CTI

# an InsertBatch is a sequence of inserts held as columns
batch = InsertBatch([("a", "b")], np.array([3]), np.array([4]), [{}])
assert list(batch) == [Insert(("a", "b"), 3, 4, {})]
print(len(pairs), "pairs")
