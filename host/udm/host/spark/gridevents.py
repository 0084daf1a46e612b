"""Grid window indexes of a worker's event batches (numpy).

Every grid worker (:mod:`udm.host.spark.grid`, :mod:`udm.host.spark.panes`)
reads its partition's events with :func:`grid_events`: lifetimes, and per
event the range of window indexes holding it, from
:meth:`~udm.host.windows.HoppingWindow.index_range` over the arrays, after
refusing events the grid cannot window, as the host does.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from udm.host.plan import E_COL, S_COL
from udm.host.spark.members import (
    table_of,
)
from udm.host.spark.windows import never_ends_message
from udm.host.time import INFINITY
from udm.host.windows import HoppingWindow

__all__ = ["BUCKET_COL", "check_ends", "grid_events", "window_range"]

#: the bucket of windows a grid event row is sent with (grid_results)
BUCKET_COL = "__udm_bucket"


def window_range(
    s: np.ndarray, e: np.ndarray, w: HoppingWindow, watermark: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per event, the inclusive range of window indexes holding it (as
    :func:`udm.host.spark.windows.hopping_range` computes it in Spark)."""
    # windows must end by the watermark, so an end beyond it counts as the
    # watermark (the index arithmetic itself cannot overflow int64)
    if watermark >= INFINITY:
        return w.index_range(s, e)
    k_min, k_max = w.index_range(s, np.minimum(e, watermark))
    return k_min, np.minimum(k_max, w.last_index_before(watermark))


def check_ends(s: np.ndarray, e: np.ndarray, w: HoppingWindow, watermark: int) -> None:
    """Fail on an event the grid cannot window (as the host does), before
    its window arithmetic could overflow int64."""
    min_start, max_end = w.time_bounds
    outside = (s < min_start) | ((e < INFINITY) & (e > max_end))
    if bool(outside.any()):
        i = int(np.argmax(outside))
        problem = w.range_problem(int(s[i]), int(e[i]))
        assert problem is not None
        raise ValueError(problem)
    if watermark >= INFINITY and bool((e >= INFINITY).any()):
        before, after = never_ends_message(w)
        raise ValueError(f"{before}{int(s[np.argmax(e >= INFINITY)])}{after}")


def grid_events(
    batches: Iterator[pa.RecordBatch], w: HoppingWindow, watermark: int
) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """A partition's events: the table, lifetimes, and the range of window
    indexes holding each event (None: no events)."""
    table = table_of(batches)
    if table is None:
        return None
    s = table.column(S_COL).to_numpy()
    # a point source's ends are not shipped (grid_results): [s, s + 1)
    e = table.column(E_COL).to_numpy() if E_COL in table.column_names else s + 1
    check_ends(s, e, w, watermark)
    return (table, s, e, *window_range(s, e, w, watermark))
