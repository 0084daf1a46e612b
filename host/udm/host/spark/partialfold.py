"""Partial states of an input partition as shuffle rows, and their fold
from one sort.

Both folds of :func:`udm.host.spark.panes.fold_fn` end here: the
per-event fold (memberships sorted on five keys, for time-sensitive UDAs
and events in several states) and, where each event is in one state of
time-insensitive UDAs, :func:`sorted_fold`: one packed int64 sort of the
partition's events by (key, start), whose runs of equal (key, window or
pane) are the states, folded a chunk of runs at a time by one
``add_segments`` call per UDA that defines it (no Python value per event)
or by one ``add_many`` call per run (``add`` per value) on slices of a
Python list made once per chunk. :func:`state_batch` packs a chunk's
states into one row per (key, bucket of windows), the rows the shuffle
moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa

from udm.host.plan import WindowOp
from udm.host.spark.arrowio import STATE, plain_numbers, udm_failure
from udm.host.spark.gridevents import BUCKET_COL
from udm.host.spark.members import (
    RunFailed,
    explode,
    fold_values,
    key_codes,
    lexsort,
    run_starts,
    segment_states,
)
from udm.host.spark.types import dumps
from udm.host.windows import HoppingWindow
from udm.sdk.events import WindowDescriptor

__all__ = ["EVENTS", "RUNS", "StateRuns", "sorted_fold", "state_batch"]

#: (key, window or pane) runs folded by one ``add_segments`` call per UDA:
#: bounds a chunk's Python states (at 15 events a run, 65,536 runs are
#: about a million events)
RUNS = 65_536
#: events of a chunk whose Python values are made at once (``add_many``,
#: ``add``): bounds the chunk's Python objects
EVENTS = 262_144


class StateRuns:
    """A chunk of one partition's partial states, one per run (a (key,
    window) or (key, pane) group): whether it is a pane's, the window or
    pane index, the key codes, the key values (Arrow, one per run) and per
    UDA its states."""

    __slots__ = ("codes", "columns", "idx", "key_arrays", "kind")

    def __init__(
        self,
        kind: np.ndarray,
        idx: np.ndarray,
        codes: list[np.ndarray],
        key_arrays: list[pa.Array],
        columns: list[list[Any]],
    ) -> None:
        self.kind, self.idx, self.codes = kind, idx, codes
        self.key_arrays, self.columns = key_arrays, columns


def state_batch(
    runs: StateRuns, keys: list[str], w: HoppingWindow, k_last: int | None, n_bucket: int
) -> pa.RecordBatch:
    """One row per (key, bucket of windows) of a chunk's states, each
    state sent with every bucket holding a window that needs it (a pane
    at a bucket's edge serves two); per row, the (is pane, index) of each
    state, then each UDA's states, pickled together."""
    run_kind, run_idx = runs.kind, runs.idx
    b_lo = np.where(run_kind, 0, run_idx // n_bucket)
    b_hi = b_lo.copy()
    if run_kind.any():
        ps = run_idx * w.pane + w.offset  # int64 wraps back within the tick range
        first_k, last_k = w.index_range(ps, ps + w.pane)  # the windows holding the pane
        if k_last is not None:
            last_k = np.minimum(last_k, k_last)
        b_lo = np.where(run_kind, first_k // n_bucket, b_lo)
        b_hi = np.where(run_kind, last_k // n_bucket, b_hi)
    out_runs, bucket = explode(b_lo, b_hi)
    run_codes = [c[out_runs] for c in runs.codes]
    order = lexsort((bucket, *reversed(run_codes)))
    out_runs, bucket = out_runs[order], bucket[order]
    groups = run_starts(bucket, *[c[order] for c in run_codes])
    ends = [*groups[1:].tolist(), len(out_runs)]
    kinds, idxs, members = run_kind[out_runs], run_idx[out_runs].tolist(), out_runs.tolist()
    spans = list(zip(groups.tolist(), ends, strict=True))
    if bool((np.diff(out_runs) == 1).all()):  # each state once, in order: slices
        per_col = [[col[a:z] for a, z in spans] for col in runs.columns]
    else:
        per_col = [[[col[m] for m in members[a:z]] for a, z in spans] for col in runs.columns]
    blobs = [
        dumps((kinds[a:z].tobytes(), idxs[a:z], [states[g] for states in per_col]))
        for g, (a, z) in enumerate(spans)
    ]
    take = pa.array(out_runs[groups], pa.int64())
    arrays = [
        *[col.take(take) for col in runs.key_arrays],
        pa.array(bucket[groups], pa.int64()),
        pa.array(blobs, pa.binary()),
    ]
    return pa.RecordBatch.from_arrays(arrays, names=[*keys, BUCKET_COL, STATE])


def fold_inputs(op: WindowOp, table: pa.Table) -> list[np.ndarray | None]:
    """Per call, its value column as a numpy array where the UDA folds by
    ``add_segments`` over it (a column of numbers without nulls), else None
    (``add_many`` or ``add`` over Python values)."""
    got: list[np.ndarray | None] = []
    for call in op.calls:
        u: Any = call.udm
        column = table.column(call.value) if isinstance(call.value, str) else None
        got.append(
            column.to_numpy()
            if column is not None and u.implements("add_segments") and plain_numbers(column)
            else None
        )
    return got


def fold_codes(column: pa.ChunkedArray) -> np.ndarray:
    """Integer codes equal exactly where the key values are: an integer
    column without nulls as it is (its range is packed by
    :func:`~udm.host.spark.members.lexsort`), else dictionary codes."""
    if pa.types.is_integer(column.type) and not column.null_count:
        return cast(np.ndarray, column.to_numpy()).astype(np.int64, copy=False)
    return key_codes(column)


def sorted_fold(
    op: WindowOp,
    table: pa.Table,
    names: tuple[list[str], list[str]],
    events: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    panes: bool,
) -> Iterator[StateRuns] | None:
    """A partition's partial states from one sort, a chunk of runs at a
    time, where each event is in one state (tumbling windows, or windows
    with gaps, where an event is in at most one window; point events under
    panes): the events sorted by (key, start) by one packed int64 sort
    (:func:`~udm.host.spark.members.lexsort`), whose runs of equal (key,
    window or pane) are the states. Per UDA, one ``add_segments`` call per
    chunk over a column of numbers without nulls, else per run one
    ``add_many`` call (or ``add`` per value) on the slice of a Python list
    made once per chunk. Else None (the caller folds event by event).
    ``names``: the key columns and the payload columns the calls read.
    Within a run events are in start order (input order among equal
    starts), as the per-event fold adds them."""
    s, e, k_min, k_max = events
    keys = names[0]
    w = op.window.require_grid("partial states of grid windows")
    keep = np.flatnonzero(k_min <= k_max)
    every = len(keep) == len(s)  # usually: no copies of the kept rows

    def kept(a: np.ndarray) -> np.ndarray:
        return a if every else a[keep]

    kept_s = kept(s)
    if panes:
        if not bool((kept(e) == kept_s + 1).all()):
            return None
    elif not bool((kept(k_min) == kept(k_max)).all()):
        return None
    if not len(keep):
        return iter(())
    codes = [kept(fold_codes(table.column(c))) for c in keys]
    idx = w.pane_index.at(kept_s) if panes else kept(k_min)
    sub = None
    if bool((kept_s[1:] >= kept_s[:-1]).all()):
        # events in time order (as a time-ordered source's partitions are):
        # a stable sort by (key, index) keeps them so within each state
        sub = group_order([*codes, idx])
    if sub is None:
        # a window's (or pane's) index grows with the start: sorting by
        # (key, start) sorts by (key, index, start) too
        sub = lexsort((kept_s, *reversed(codes)))
    order = sub if every else keep[sub]
    codes = [c[sub] for c in codes]
    idx = idx[sub]
    starts = run_starts(idx, *codes)
    runs = SortedRuns(order, idx, codes, starts)
    return _chunks(op, table, names, runs, fold_inputs(op, table), panes)


def group_order(cols: list[np.ndarray]) -> np.ndarray | None:
    """A stable order of rows by integer columns ``cols`` (the first
    primary): their values packed into one number, sorted by one or two
    stable passes over its 16-bit digits (numpy sorts 16-bit integers
    stably by radix sort, about ten times faster than a quicksort of
    int64, which is not stable). None when the packed range exceeds 32
    bits."""
    packed = np.zeros(len(cols[0]), dtype=np.int64)
    room = 1  # the packed range so far, as a Python int (no overflow)
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        room *= span
        if room > 2**32:
            return None
        packed *= span
        packed += c.astype(np.int64, copy=False) - lo
    if room <= 2**16:
        return np.argsort(packed.astype(np.uint16), kind="stable")
    order = np.argsort((packed & 0xFFFF).astype(np.uint16), kind="stable")
    high = (packed >> 16).astype(np.uint16)
    return order[np.argsort(high[order], kind="stable")]


class SortedRuns(NamedTuple):
    """A partition's kept events sorted by (key, start) (``order``: table
    rows), each one's window or pane index and key codes, and where each
    run of one (key, window or pane) begins."""

    order: np.ndarray
    idx: np.ndarray
    codes: list[np.ndarray]
    starts: np.ndarray


class ChunkValues:
    """The Python values of one chunk's events (table rows ``picked``, in
    run order) per call, each column converted once however many calls
    read it: numbers by numpy (``tolist``), other columns by Arrow, whole
    payloads as one dict per row."""

    def __init__(self, table: pa.Table, payload: list[str], picked: np.ndarray) -> None:
        self.table, self.payload, self.picked = table, payload, picked
        self.cache: dict[str | None, list[Any]] = {}

    def values(self, call: Any) -> tuple[list[Any], Any]:
        """The call's raw values and the value function still to apply."""
        name = call.value if isinstance(call.value, str) else None
        got = self.cache.get(name)
        if got is None:
            rows = pa.array(self.picked, pa.int64())
            if name is None:
                got = self.table.select(self.payload).take(rows).to_pylist()
            else:
                column = self.table.column(name)
                if plain_numbers(column):
                    got = cast(np.ndarray, column.to_numpy())[self.picked].tolist()
                else:
                    got = column.take(rows).to_pylist()
            self.cache[name] = got
        return got, None if name is not None else call.value_fn


def chunk_ends(bounds: np.ndarray, python: bool) -> Iterator[tuple[int, int]]:
    """Consecutive runs ``[i, j)`` folded together: at most :data:`RUNS`,
    and where Python values are made, about :data:`EVENTS` events (a run
    longer than that alone)."""
    n = len(bounds) - 1
    i = 0
    while i < n:
        j = min(i + RUNS, n)
        if python:
            by_events = int(np.searchsorted(bounds, bounds[i] + EVENTS, side="right")) - 1
            j = max(min(j, by_events), i + 1)
        yield i, j
        i = j


def _chunks(
    op: WindowOp,
    table: pa.Table,
    names: tuple[list[str], list[str]],
    runs: SortedRuns,
    inputs: list[np.ndarray | None],
    panes: bool,
) -> Iterator[StateRuns]:
    """The states of :func:`sorted_fold`'s runs, a chunk at a time."""
    order, idx, codes, starts = runs
    keys, payload = names
    w = op.window.require_grid("partial states of grid windows")
    bounds = np.append(starts, len(order))
    for i, j in chunk_ends(bounds, any(v is None for v in inputs)):
        lo, hi = int(bounds[i]), int(bounds[j])
        picked = order[lo:hi]
        local = bounds[i : j + 1] - lo
        local_list: list[int] | None = None
        values = ChunkValues(table, payload, picked)
        columns: list[list[Any]] = []
        for call, column in zip(op.calls, inputs, strict=True):
            u: Any = call.udm
            try:
                if column is not None:
                    columns.append(segment_states(u, column[picked], local))
                    continue
                local_list = local.tolist() if local_list is None else local_list
                columns.append(fold_values(u, values.values(call), local_list))
            except RunFailed as failed:
                r = i + failed.run
                first = int(idx[starts[r]])
                window = (
                    WindowDescriptor(first * w.pane + w.offset, first * w.pane + w.offset + w.pane)
                    if panes
                    else w.window_at(first)
                )
                kv = [table.column(k)[int(order[starts[r]])].as_py() for k in keys]
                raise udm_failure(u, window, kv, failed.cause, call.value) from failed.cause
        heads = starts[i:j]
        rows = pa.array(order[heads], pa.int64())
        yield StateRuns(
            np.full(j - i, panes),
            idx[heads],
            [c[heads] for c in codes],
            [table.column(k).take(rows).combine_chunks() for k in keys],
            columns,
        )
