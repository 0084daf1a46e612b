"""Partial states of grid windows: folded per pane, merged per window.

With partial aggregation (:func:`~udm.host.strategy.use_partial`) each
partition folds its events into per-window states, or, over point events
of overlapping windows, per pane of width gcd(size, hop) (Li et al., "No
pane, no gain": a point event is folded once, not size/hop times)
(:func:`fold_fn`); a shuffle by key and bucket of windows brings a
window's partial states together, and :func:`merge_fn` merges them, with a
pane's merged state reused by every window holding it.
"""

from __future__ import annotations

import copy
import itertools
import math
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.gcpause import paused_batches
from udm.host.plan import WindowOp
from udm.host.policies import InputClipping
from udm.host.rows import normalize_value
from udm.host.spark import (
    evaluate as spark_evaluate,  # BUCKET read at call time (tests set it)
)
from udm.host.spark.arrowio import STATE, udm_failure
from udm.host.spark.gridevents import BUCKET_COL, grid_events
from udm.host.spark.members import (
    Memberships,
    RunFailed,
    aggregate_batch,
    chunks,
    explode,
    fold_values,
    key_codes,
    key_values,
    run_starts,
    table_of,
)
from udm.host.spark.partialfold import StateRuns, sorted_fold, state_batch
from udm.host.strategy import folds_by_sort, uses_panes
from udm.host.time import INFINITY
from udm.host.windows import HoppingWindow
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["FOLD_BLOCK", "blocks", "fold_fn", "merge_fn"]


def fold_events(
    udm: Any,
    inputs: tuple[list[Any], Any],
    bounds: list[int],
    starts: list[int],
    ends: list[int],
    w: HoppingWindow,
    idx: list[int],
    clipping: InputClipping,
) -> list[Any]:
    """One state per run of a time-sensitive UDA (run ``r`` is window
    ``idx[r]``): its events, clipped to the window, added in order."""
    values, fn = inputs
    init, add = udm.initial_state, udm.add
    out: list[Any] = []
    try:
        for r, (a, z) in enumerate(itertools.pairwise(bounds)):
            window = w.window_at(idx[r])
            st = init()
            for m in range(a, z):
                v = values[m] if fn is None else fn(values[m])
                st = add(st, clipping.clip(IntervalEvent(starts[m], ends[m], v), window), window)
            out.append(st)
    except Exception as exc:
        raise RunFailed(len(out), exc) from exc
    return out


#: events of a partition folded at once into partial states: bounds a fold
#: task's memory (its input partitions are joined, one task per core:
#: :func:`udm.host.spark.grid.grid_results`) to about what one input
#: partition of Spark's default 128 MB splits held before; a larger
#: partition's further blocks add states of their own, merged like another
#: partition's
FOLD_BLOCK = 1 << 22


def blocks(batches: Iterator[pa.RecordBatch], events: int) -> Iterator[Iterator[pa.RecordBatch]]:
    """``batches`` in consecutive groups of at least ``events`` rows each
    (the last of fewer), a batch never split."""
    group: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        group.append(batch)
        rows += batch.num_rows
        if rows >= events:
            yield iter(group)
            group, rows = [], 0
    if group:
        yield iter(group)


def fold_fn(
    op: WindowOp, keys: list[str], payload: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function folding a partition's events into partial
    states per (key, window), or per (key, pane) for point events, each
    tagged with the buckets of windows that need it."""
    w = op.window.require_grid("partial states of grid windows")
    off = w.offset
    watermark = op.watermark
    k_last = w.last_index_before(watermark) if watermark < INFINITY else None
    panes = uses_panes(op)
    p = w.pane
    n_bucket = spark_evaluate.BUCKET  # as planned on the driver
    block_events = FOLD_BLOCK  # as planned on the driver (tests set it)
    udms: list[Any] = [c.udm for c in op.calls]
    sensitive = [u.time_sensitive for u in udms]
    n_udms = len(udms)
    clipping: InputClipping = op.clipping
    by_sort = folds_by_sort(op)

    def fold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for block in blocks(batches, block_events):
            yield from fold_block(block)

    def fold_block(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        events = grid_events(batches, w, watermark)
        if events is None:
            return
        table, s, e, k_min, k_max = events
        if by_sort:
            folded = sorted_fold(op, table, (keys, payload), (s, e, k_min, k_max), panes)
            if folded is not None:
                for states in folded:
                    yield state_batch(states, keys, w, k_last, n_bucket)
                return
        point = (e == s + 1) if panes else np.zeros(len(s), dtype=bool)
        w_rows, w_idx = explode(np.where(point, 0, k_min), np.where(point, -1, k_max))
        p_rows = np.flatnonzero(point & (k_min <= k_max))
        p_idx = w.pane_index.at(s[p_rows])
        rows = np.concatenate([p_rows, w_rows])
        kind = np.concatenate([np.ones(len(p_rows), bool), np.zeros(len(w_rows), bool)])
        idx = np.concatenate([p_idx, w_idx])
        codes = [key_codes(table.column(c))[rows] for c in keys]
        order = np.lexsort((e[rows], s[rows], idx, kind, *reversed(codes)))
        rows, kind, idx = rows[order], kind[order], idx[order]
        codes = [c[order] for c in codes]
        runs = run_starts(idx, kind, *codes)
        members = Memberships(table, keys, payload, s, e, rows, runs)
        for chunk in chunks(op, members, times=any(sensitive)):
            i, j = chunk.i, chunk.j
            starts, ends, inputs = chunk.starts, chunk.ends, chunk.inputs
            run_keys, bounds = chunk.keys, chunk.bounds
            run_kind, run_idx = kind[runs[i:j]], idx[runs[i:j]]
            idx_list = run_idx.tolist()
            columns: list[list[Any]] = []
            n = 0
            try:
                for n in range(n_udms):
                    if sensitive[n]:
                        got = fold_events(
                            udms[n], inputs[n], bounds, starts, ends, w, idx_list, clipping
                        )
                    else:
                        got = fold_values(udms[n], inputs[n], bounds)
                    columns.append(got)
            except RunFailed as failed:
                r = failed.run
                i_r = idx_list[r]
                window = (
                    WindowDescriptor(i_r * p + off, i_r * p + off + p)
                    if run_kind[r]
                    else w.window_at(i_r)
                )
                kv = [col[r] for col in run_keys]
                column = op.calls[n].value
                raise udm_failure(udms[n], window, kv, failed.cause, column) from failed.cause
            types = [table.schema.field(k).type for k in keys]
            run_arrays = [pa.array(c, t) for c, t in zip(run_keys, types, strict=True)]
            run_codes = [c[runs[i:j]] for c in codes]
            got_runs = StateRuns(run_kind, run_idx, run_codes, run_arrays, columns)
            yield state_batch(got_runs, keys, w, k_last, n_bucket)

    return paused_batches(fold)


def merge_fn(
    op: WindowOp, keys: list[str], schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function computing each (key, bucket) group's windows
    from partial states: a window merges its panes in time order, then its
    own per-window states."""
    w = op.window.require_grid("partial states of grid windows")
    off = w.offset
    p = w.pane
    k_last = w.last_index_before(op.watermark) if op.watermark < INFINITY else None
    n_bucket = spark_evaluate.BUCKET  # as planned on the driver
    udms: list[Any] = [c.udm for c in op.calls]

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = table_of(batches)
        if table is None:
            return
        codes = [key_codes(table.column(c)) for c in keys]
        bucket = table.column(BUCKET_COL).to_numpy()
        order = np.lexsort((bucket, *reversed(codes)))
        groups = run_starts(bucket[order], *[c[order] for c in codes])
        blobs = table.column(STATE).take(pa.array(order, pa.int64())).to_pylist()
        group_keys = key_values(table, keys, order[groups])
        bounds = [*groups.tolist(), len(order)]
        parts = [
            unpickled(udms, blobs[bounds[g] : bounds[g + 1]], w, [c[g] for c in group_keys])
            for g in range(len(groups))
        ]
        # every group's windows at once: those holding a pane of the group
        # (within its bucket and the watermark), or with a state of their own
        lo = bucket[order[groups]] * n_bucket
        hi = lo + n_bucket - 1 if k_last is None else np.minimum(lo + n_bucket - 1, k_last)
        n_panes = np.fromiter((len(pn[0]) for pn, _ in parts), np.int64, len(parts))
        n_own = np.fromiter((len(ow[0]) for _, ow in parts), np.int64, len(parts))
        pane_g = np.repeat(np.arange(len(parts)), n_panes)
        ps = np.fromiter(itertools.chain.from_iterable(pn[0] for pn, _ in parts), np.int64)
        ps = ps * p + off  # int64 wraps back within the tick range
        first_k, last_k = w.index_range(ps, ps + p)  # the windows holding each pane
        rows, held = explode(np.maximum(first_k, lo[pane_g]), np.minimum(last_k, hi[pane_g]))
        own_k = np.fromiter(itertools.chain.from_iterable(ow[0] for _, ow in parts), np.int64)
        win_g = np.concatenate([pane_g[rows], np.repeat(np.arange(len(parts)), n_own)])
        win_k = np.concatenate([held, own_k])
        sort = np.lexsort((win_k, win_g))
        win_g, win_k = win_g[sort], win_k[sort]
        first = run_starts(win_k, win_g)
        win_g, all_k = win_g[first], win_k[first].tolist()
        win_bounds = np.searchsorted(win_g, np.arange(len(parts) + 1)).tolist()
        ks: list[int] = []
        out_keys: list[list[Any]] = [[] for _ in keys]
        results: list[list[Any]] = [[] for _ in udms]
        for g, (panes, own) in enumerate(parts):
            kv = [col[g] for col in group_keys]
            todo = all_k[win_bounds[g] : win_bounds[g + 1]]
            for n, u in enumerate(udms):
                results[n] += window_results(u, panes[n], own[n], todo, w, kv)
            ks += todo
            for col, v in zip(out_keys, kv, strict=True):
                col += [v] * len(todo)
        yield grid_batch(op, ks, out_keys, results, schema)

    return paused_batches(merge)


def unpickled(
    udms: list[Any], blobs: list[bytes], w: HoppingWindow, kv: list[Any]
) -> tuple[list[dict[int, Any]], list[dict[int, Any]]]:
    """Per UDA, a group's partial states by pane and by window, the parts
    of one index (from several input partitions) merged in a fixed order.
    Each state is unpickled once and owned here, so the first part of an
    index may be updated by merge."""
    p = math.gcd(w.size, w.hop)
    parts = [pickle.loads(blob) for blob in sorted(blobs)]
    # a state's slot: 2 * index for a pane, 2 * index + 1 for a window;
    # without panes (tumbling windows), the window index itself
    windows_only = not any(kinds.strip(b"\x00") for kinds, _, _ in parts)
    slots = (
        [idxs for _, idxs, _ in parts]
        if windows_only
        else [[2 * i + 1 - k for k, i in zip(kinds, idxs, strict=True)] for kinds, idxs, _ in parts]
    )
    panes: list[dict[int, Any]] = []
    own: list[dict[int, Any]] = []
    for n, u in enumerate(udms):
        merge = u.merge
        into: dict[int, Any] = {}
        get = into.get
        slot = 0
        if windows_only and all(got == slots[0] for got in slots[1:]):
            # every part holds the same windows (a key spread evenly over
            # the input partitions): merged position by position, no dict
            # lookups; on a failure the dict loop below finds the window
            try:
                merged = parts[0][2][n]
                for _, _, states in parts[1:]:
                    merged = list(map(merge, merged, states[n]))
                own.append(dict(zip(slots[0], merged, strict=True)))
                panes.append({})
                continue
            except Exception:  # redone below, naming the window
                parts = [pickle.loads(blob) for blob in sorted(blobs)]
        try:
            for got_slots, (_, _, states) in zip(slots, parts, strict=True):
                for slot, state in zip(got_slots, states[n], strict=True):
                    got = get(slot)
                    into[slot] = state if got is None else merge(got, state)
        except Exception as exc:
            i, is_window = (slot, 1) if windows_only else divmod(slot, 2)
            start = i * p + w.offset
            window = w.window_at(i) if is_window else WindowDescriptor(start, start + p)
            raise udm_failure(u, window, kv, exc) from exc
        if windows_only:
            panes.append({})
            own.append(into)
            continue
        panes.append({s >> 1: st for s, st in into.items() if not s & 1})
        own.append({s >> 1: st for s, st in into.items() if s & 1})
    return panes, own


def window_results(
    u: Any,
    panes: dict[int, Any],
    own: dict[int, Any],
    ks: list[int],
    w: HoppingWindow,
    kv: list[Any],
) -> list[Any]:
    """One UDA's result for each window ``ks`` (increasing): its pane
    states, then its own state, merged in time order.

    The panes slide through a two-stack queue (Hirzel et al., "Sliding
    window aggregation algorithms", Two-Stacks): the newer panes are kept
    as one running merge (``back``); the older ones (``front``) each as
    their merge with every newer pane in ``front``, rebuilt from the
    panes behind ``back`` when the windows have left ``front``. A window
    then costs about three merges whatever size/hop is. ``merge`` may
    update its first state, so only states owned here go first: pane
    states (unpickled for this call, each read before it is merged
    into), ``back``, and the ``front`` merge of a window's oldest pane
    when no later window starts there; a merge that returns its second
    state gets a copy of it.

    One function (complexity 21): the two stacks' invariants are easier
    to check with their updates side by side than spread over helpers.
    """
    p = math.gcd(w.size, w.hop)
    per_window, step = w.size // p, w.hop // p
    init, merge, result = u.initial_state, u.merge, u.result
    sensitive = u.time_sensitive
    deepcopy = copy.deepcopy

    def copied(x: Any) -> Any:
        """A state equal to ``x`` that this call owns."""
        got = merge(init(), x)
        return deepcopy(x) if got is x else got

    def finished(st: Any, k: int) -> Any:
        """Window ``k``'s result from its merged state (``None``: no
        events, the initial state)."""
        if st is None:
            st = init()
        return normalize_value(result(st, w.window_at(k)) if sensitive else result(st))

    if not panes:  # tumbling windows, or interval events: nothing to merge
        done: list[Any] = []
        k = 0
        get = own.get
        try:
            if not sensitive and len(own) == len(ks):
                # every window has its own state (ks are own's windows):
                # one result call per window, no per-window Python frame;
                # extend keeps the results before a failing one, whose
                # window is then ks[len(done)]
                k = ks[0] if ks else 0
                done.extend(map(normalize_value, map(result, map(own.__getitem__, ks))))
                return done
            for k in ks:
                done.append(finished(get(k), k))
        except Exception as exc:
            if not sensitive and len(own) == len(ks) and len(done) < len(ks):
                k = ks[len(done)]
            raise udm_failure(u, w.window_at(k), kv, exc) from exc
        return done

    order = sorted(panes)
    states = [panes[i] for i in order]
    lows = np.asarray(ks, dtype=np.int64) * step
    # per window, the positions in ``order`` of its panes: [first, last)
    firsts = np.searchsorted(order, lows).tolist()
    lasts = np.searchsorted(order, lows + per_window).tolist()
    nexts = [*firsts[1:], -1]
    front: list[Any] = []  # merges of the panes at positions [f0, f1) ..
    f0 = f1 = 0  # .. with every later one up to f1
    back: Any = None  # the merge of the panes at positions [f1, pushed)
    pushed = 0
    own_state = own.get if own else None
    out: list[Any] = []
    k = 0
    try:
        for k, a, z, a_next in zip(ks, firsts, lasts, nexts, strict=True):
            if a >= f1:  # the windows have left front: rebuild it from back
                front = states[a:pushed]
                for t in range(len(front) - 2, -1, -1):
                    x = front[t + 1]
                    front[t] = got = merge(front[t], x)
                    if got is x:
                        front[t] = deepcopy(x)
                f0, back = a, None
                f1 = pushed if pushed > a else a
            if pushed < z:
                for x in states[pushed if pushed > a else a : z]:
                    got = merge(init() if back is None else back, x)
                    back = deepcopy(x) if got is x else got
                pushed = z
            st = None
            if a < f1:
                st = front[a - f0]
                if a_next == a:  # the next window reads it too
                    st = copied(st)
            if back is not None:
                if st is None:
                    st = back
                else:
                    got = merge(st, back)
                    st = deepcopy(back) if got is back else got
            if own_state is not None and (x := own_state(k)) is not None:
                if st is None:
                    st = x
                else:
                    if st is back:
                        st = copied(st)
                    got = merge(st, x)
                    st = deepcopy(x) if got is x else got
            out.append(finished(st, k))
    except Exception as exc:
        raise udm_failure(u, w.window_at(k), kv, exc) from exc
    return out


def grid_batch(
    op: WindowOp,
    ks: list[int],
    key_columns: list[list[Any]],
    results: list[list[Any]],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Output rows of aggregates over grid windows ``ks``."""
    w = op.window.require_grid("partial states of grid windows")
    starts = w.start_of(np.asarray(ks, dtype=np.int64))
    return aggregate_batch(op, starts, starts + w.size, key_columns, results, schema)
