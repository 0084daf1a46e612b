"""A cheap look at a window operation's input, for choosing partial states.

The planner reads the first :data:`~udm.host.strategy.SAMPLE_ROWS` events
of the input with Spark's ``limit`` (which runs the input's first partition
only as far as it needs, never a pass over the data) and counts what the
partial fold would make of them: distinct keys, the hottest key's share,
and distinct (key, pane) groups, one state each
(:func:`udm.host.strategy.choose_partial` decides from these).

Only an input that is a source followed by narrow steps (group, where,
select) is sampled: the head of anything after a shuffle (another window
operation, a join) would cost that shuffle's whole map side. The sample
reads the source without its invalid-row checks (such rows are skipped
quietly): an invalid row must fail, or be counted, by the query itself,
not by the planner's peek at it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from udm.host.plan import S_COL, GroupNode, PlanNode, SelectNode, Source, WhereNode, WindowOp
from udm.host.spark.members import key_codes
from udm.host.strategy import HEAVY_KEY_SHARE, SAMPLE_ROWS, KeySample, sample_unit

__all__ = ["head_of", "narrow_chain", "sample_frame", "summarize"]

#: heads already read, per source DataFrame (a DataFrame is an immutable
#: plan): a query planned again over the same DataFrame -- a dashboard, a
#: benchmark's repeats -- reads its head once per process
_HEADS: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], pa.Table]] = (
    weakref.WeakKeyDictionary()
)


def narrow_chain(node: PlanNode) -> list[PlanNode] | None:
    """``node``'s plan from its source as a list (source first) when every
    step after the source is narrow (group, where, select), else None."""
    line = [node]
    while not isinstance(line[-1], Source):
        if not isinstance(line[-1], GroupNode | WhereNode | SelectNode):
            return None
        line.append(line[-1].inputs[0])
    line.reverse()
    return line


def head_of(
    source: Source,
    steps: list[PlanNode],
    keys: tuple[str, ...],
    read: Callable[[], pa.Table],
) -> pa.Table:
    """``read()``, the head of a source's DataFrame after ``steps``,
    remembered per DataFrame when the steps only group (a filter or a
    projection holds functions, which are not compared)."""
    if source.df is None or not all(isinstance(s, GroupNode) for s in steps):
        return read()
    key = (source.start, source.end, source.on_null_key, keys)
    try:
        heads = _HEADS.setdefault(source.df, {})
    except TypeError:  # not weakly referable: read every time
        return read()
    if key not in heads:
        heads[key] = read()
    return heads[key]


def sample_frame(df: DataFrame, keys: tuple[str, ...]) -> pa.Table:
    """The key columns and starts of the first events of ``df``."""
    cols = ["`" + c.replace("`", "``") + "`" for c in [*keys, S_COL]]
    return df.selectExpr(*cols).limit(SAMPLE_ROWS).toArrow()


def _group_ids(codes: list[np.ndarray], n: int) -> np.ndarray:
    """One dense id per distinct row of the integer columns ``codes``
    (all zeros without columns), by numpy: the sample's 10,000 rows as
    Python tuples in a ``Counter`` took about 10 ms of every planning."""
    ids = np.zeros(n, dtype=np.int64)
    for c in codes:
        # dense ids below n, so the pair packs into int64 without overflow
        ids = _dense(ids * n + _dense(c))
    return ids


def _dense(values: np.ndarray) -> np.ndarray:
    """Per value, its rank among the distinct values (by one sort)."""
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    step = np.zeros(len(values), dtype=np.int64)
    step[1:] = ranked[1:] != ranked[:-1]
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.cumsum(step)
    return out


def summarize(table: pa.Table, keys: tuple[str, ...], op: WindowOp) -> KeySample:
    """What the partial fold would make of the sampled events ``table``:
    keys are told apart as the fold tells them (:func:`key_codes`; a null
    is a key of its own)."""
    n = table.num_rows
    if n == 0:
        return KeySample(0, 0, 0.0, 0, 0.0)
    w = op.window.require_grid("sampling the partial fold's groups")
    slots = np.floor_divide(table.column(S_COL).to_numpy() - w.offset, sample_unit(op))
    key_id = _group_ids([key_codes(table.column(k)) for k in keys], n)
    per_key = np.bincount(key_id)
    groups = int(_dense(key_id * n + _dense(slots)).max()) + 1
    heavy = int(per_key[per_key >= HEAVY_KEY_SHARE * n].sum())
    return KeySample(n, len(per_key), int(per_key.max()) / n, groups, heavy / n)
