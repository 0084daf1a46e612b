"""Snapshot and count windows, assigned and evaluated in the worker.

These windows follow the endpoints of one key's events: a snapshot window
lies between two consecutive distinct endpoints (starts and ends), a count
window spans ``n`` consecutive distinct starts (or ends). So each key's
events go to one worker (``repartition(keys)``; a stream without keys: a
single partition, as a Spark window function without ``partitionBy``
would), where numpy numbers the distinct endpoints of each key, pairs
every event with the windows it belongs to, and sorts the pairs by key,
window and lifetime; :func:`~udm.host.spark.members.evaluate_runs` then
calls the UDMs per window. Assigning the windows in Spark SQL instead
takes a self-join per endpoint rank and a shuffle of every (event,
window) pair, about ten times slower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from udm.host.plan import E_COL, S_COL, WindowOp
from udm.host.spark.frame import WindowJob, map_in_arrow, quoted
from udm.host.spark.members import (
    Memberships,
    Slices,
    evaluate_runs,
    explode,
    key_codes,
    run_starts,
    sliced_windows,
    table_of,
)
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    CountWindow,
    SnapshotWindow,
    WindowSpec,
)

__all__ = ["SLICES", "count_slices", "endpoint_results", "memberships", "window_ranges"]

EndpointWindow = SnapshotWindow | CountWindow


def endpoint_results(job: WindowJob) -> DataFrame:
    """The window operation's result rows (lifetime, keys, one column per
    call) for snapshot and count windows."""
    df, keys, op, needed = job.df, job.keys, job.op, job.needed
    columns = list(dict.fromkeys([*keys, S_COL, E_COL, *needed]))
    source = df.selectExpr(*[quoted(c) for c in columns])
    # a stream without keys is one group: one partition
    by_key = (
        source.repartition(*[source[quoted(k)] for k in keys]) if keys else source.repartition(1)
    )
    return map_in_arrow(by_key, _evaluate_fn(op, list(keys), needed, job.pa_schema), job.out_schema)


def _dense_rank(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rank of each row's tuple among the distinct tuples of ``cols``
    (the first column the most significant), the rows in sorted order, and
    where in that order each distinct tuple first appears."""
    order = np.lexsort(cols[::-1])
    firsts = run_starts(*[c[order] for c in cols])
    change = np.zeros(len(order), dtype=np.int64)
    change[firsts] = 1
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum(change) - 1
    return rank, order, firsts


def _groups(table: pa.Table, keys: list[str]) -> np.ndarray:
    """A dense group number per row, equal exactly where the keys are."""
    if not keys:
        return np.zeros(table.num_rows, dtype=np.int64)
    return _dense_rank(*[key_codes(table.column(k)) for k in keys])[0]


def _distinct(g: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (group, time) pairs sorted, as their groups and times,
    and the rank of each input pair among them."""
    rank, order, firsts = _dense_rank(g, t)
    return g[order][firsts], t[order][firsts], rank


#: (event, window) pairs made at a time: a snapshot window's events may be
#: members of very many windows (long events among short ones)
BLOCK = 4_000_000


Ranges = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def window_ranges(w: EndpointWindow, g: np.ndarray, s: np.ndarray, e: np.ndarray) -> Ranges:
    """Per event, the inclusive range ``lo..hi`` of the windows holding it
    (empty when ``lo > hi``), and the bounds ``[win_s[j], win_e[j])`` of
    window ``j``. A window's number orders it within its group; groups
    come one after another. Each kind answers with its entry in
    :data:`RANGES`."""
    ranges = next((RANGES[c] for c in type(w).__mro__ if c in RANGES), None)
    if ranges is None:
        raise TypeError(f"the Spark engine does not know window {w!r}")
    return ranges(w, g, s, e)


def _snapshot_ranges(w: SnapshotWindow, g: np.ndarray, s: np.ndarray, e: np.ndarray) -> Ranges:
    """Window j lies between the group's distinct endpoints j and j + 1."""
    n = len(s)
    _, ut, rank = _distinct(np.concatenate([g, g]), np.concatenate([s, e]))
    return rank[:n], rank[n:] - 1, ut, np.append(ut[1:], ut[-1:])


def _count_ranges(w: CountWindow, g: np.ndarray, s: np.ndarray, e: np.ndarray) -> Ranges:
    """Window j spans the group's distinct times j .. j + count - 1."""
    by_end = w.edge == "end"  # one function for the mirrored pair
    ug, ut, rank = _distinct(g, e if by_end else s)
    m, c = len(ut), w.count
    firsts = run_starts(ug)
    sizes = np.diff(np.append(firsts, m))
    first = np.repeat(firsts, sizes)  # per distinct time: its group's first
    last = first + np.repeat(sizes, sizes) - 1  # .. and last
    lo = np.maximum(rank - c + 1, first[rank])
    hi = np.minimum(rank, last[rank] - c + 1)
    upto = ut[np.minimum(np.arange(m) + c - 1, m - 1)]
    win_s, win_e = (ut - 1, upto) if by_end else (ut, upto + 1)
    return lo, hi, win_s, win_e


#: the numpy window ranges of each kind this worker evaluates, by spec
#: class (a new kind registers its own)
RANGES: dict[type[WindowSpec], Callable[[Any, np.ndarray, np.ndarray, np.ndarray], Ranges]] = {
    SnapshotWindow: _snapshot_ranges,
    CountByStartWindow: _count_ranges,
    CountByEndWindow: _count_ranges,
}


def memberships(
    lo: np.ndarray, hi: np.ndarray, n_windows: int, limit: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The (event, window) pairs of the ranges ``lo..hi`` as arrays ``rows``
    and ``wid``, in blocks of whole windows of about ``limit`` (default
    ``BLOCK``) pairs, at least one window each."""
    limit = BLOCK if limit is None else limit
    valid = lo <= hi
    per_window = np.cumsum(
        np.bincount(lo[valid], minlength=n_windows + 1)
        - np.bincount(hi[valid] + 1, minlength=n_windows + 1)
    )[:n_windows]
    total = np.cumsum(per_window)
    if not len(total) or total[-1] <= limit:
        yield explode(lo, hi)
        return
    order = np.argsort(lo, kind="stable")
    sorted_lo = lo[order]
    j0 = 0
    while j0 < n_windows:
        before = int(total[j0 - 1]) if j0 else 0
        j1 = max(int(np.searchsorted(total, before + limit, side="right")), j0 + 1)
        cand = order[: np.searchsorted(sorted_lo, j1, side="left")]
        cand = cand[hi[cand] >= j0]
        rows, wid = explode(np.maximum(lo[cand], j0), np.minimum(hi[cand], j1 - 1))
        yield cand[rows], wid
        j0 = j1


def count_slices(w: CountByStartWindow, g: np.ndarray, s: np.ndarray, watermark: int) -> Slices:
    """Count-by-start windows (ending by ``watermark``) as runs of the
    events sorted by (group, start): window ``j`` holds the events whose
    start is among the group's distinct starts ``j .. j + n - 1``, one run
    of that order, so each window is read as a slice of one list instead
    of ``n`` memberships of every event."""
    ug, ut, rank = _distinct(g, s)
    c = w.count
    j = np.arange(max(len(ut) - c + 1, 0))
    win_s, win_e = ut[j], ut[j + c - 1] + 1
    full = (ug[j] == ug[j + c - 1]) & (win_e <= watermark)  # n starts of one group
    j, win_s, win_e = j[full], win_s[full], win_e[full]
    order = np.argsort(rank, kind="stable")
    ranks = rank[order]
    firsts = np.searchsorted(ranks, j, side="left")
    lasts = np.searchsorted(ranks, j + c - 1, side="right")
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] = ranks[1:] == ranks[:-1]
    return Slices(order, tied, order[firsts], win_s, win_e, firsts, lasts)


#: the kinds whose windows are runs of the events sorted by start
#: (``members_by_start``), by spec class: their windows (ending by the
#: watermark) as slices of that order, which beats listing memberships
SLICES: dict[type[WindowSpec], Callable[[Any, np.ndarray, np.ndarray, int], Slices]] = {
    CountByStartWindow: count_slices,
}


def _evaluate_fn(
    op: WindowOp, keys: list[str], payload: list[str], schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function evaluating every window of the keys of a
    partition from their events: count-by-start windows as slices of the
    events sorted by start (:func:`count_slices`; for time-sensitive UDMs
    and operators, of point events only), others from their memberships."""
    w: Any = op.window
    watermark = op.watermark
    # windows that are runs of the events sorted by start: read as slices
    slicer = next((SLICES[c] for c in type(w).__mro__ if c in SLICES), None)
    # a time-sensitive UDM or an operator reads (or places outputs by)
    # lifetimes, which a count window may clip: sliced over point events
    needs_points = op.kind == "operator" or any(c.udm.time_sensitive for c in op.calls)

    def evaluate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = table_of(batches)
        if table is None:
            return
        s = table.column(S_COL).to_numpy()
        e = table.column(E_COL).to_numpy()
        g = _groups(table, keys)
        if slicer is not None and (not needs_points or bool((e == s + 1).all())):
            got = slicer(w, g, s, watermark)
            yield from sliced_windows(op, table, keys, payload, got, s, schema)
            return
        lo, hi, win_s, win_e = window_ranges(w, g, s, e)
        for rows, wid in memberships(lo, hi, len(win_s)):
            keep = win_e[wid] <= watermark  # only windows ending by the watermark
            if not keep.all():
                rows, wid = rows[keep], wid[keep]
            if not len(rows):
                continue
            order = np.lexsort((e[rows], s[rows], wid))
            rows, wid = rows[order], wid[order]
            runs = run_starts(wid)
            first = wid[runs]
            members = Memberships(table, keys, payload, s, e, rows, runs)
            yield from evaluate_runs(op, members, win_s[first], win_e[first], schema)

    return evaluate
