"""UDM evaluation in Spark's Python workers, over Arrow batches.

Hopping and tumbling windows (:mod:`udm.host.spark.grid`) and, without
partial aggregation, snapshot and count windows
(:mod:`udm.host.spark.endpoints`) are assigned in the worker; this module
runs the windows Spark assigns (snapshot and count windows with partial
aggregation, grid windows with ``emit_empty``) and holds the per-window
evaluation they all share (:mod:`udm.host.spark.windowop` routes a window
operation to one of them).

Each (key, window) group of the window-assigned event table reaches a
Python worker through ``groupBy(...).applyInArrow`` as Arrow record
batches. The worker builds the window's events and calls
:func:`udm.host.invoke.compute_window`, the very function the reference
evaluator uses: the same canonical order, clipping, output policies and
error wrapping, so results match the reference exactly.

Mergeable, order-insensitive incremental UDAs are partially aggregated
instead: ``mapInArrow`` folds each partition's events into per-(key,
window) states (pickled into a binary column) before the shuffle, and the
groups merge those states, so neither a hot key nor a huge window has to
sit on one worker.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable, Iterator
from typing import Any, cast

import pyarrow as pa

from udm.host.errors import UdmInvocationError
from udm.host.invoke import compute_window, raw_result, stamp_result, udm_label
from udm.host.plan import E_COL, S_COL, WindowOp
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.spark.arrowio import (
    STATE,
    Columns,
    arrow_schema_with_marks,
    call_type,
    output_batch,
    pickled_field,
    result_labels,
    same_key,
    to_arrow_column,
    udm_failure,
    value_column,
)
from udm.host.spark.decode import decode_pickled, release, released_with, tracking_persisted
from udm.host.spark.types import (
    dumps,
    normalize_value,
)
from udm.host.spark.windows import MARK, WINDOW_END, WINDOW_ORDINAL, WINDOW_START
from udm.host.windows import describe_window
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = [
    "BUCKET",
    "call_type",
    "decode_pickled",
    "evaluate_window",
    "make_group_fn",
    "make_merge_fn",
    "make_partial_fn",
    "release",
    "released_with",
    "to_arrow_column",
    "tracking_persisted",
    "value_column",
    "window_rows",
]

#: windows of one key evaluated per Python call (consecutive ordinals); the
#: worker routes read it here when they plan, so tests may lower it
BUCKET = 128

# the names these helpers had here before arrowio (other modules import them)
_arrow_schema_with_marks = arrow_schema_with_marks
_pickled_field = pickled_field


def _windows_of(table: pa.Table) -> tuple[pa.Table, list[tuple[int, int, int, int]]]:
    """The rows sorted by window, then lifetime, and the runs ``(ws, we, lo,
    hi)`` of each window's rows: one Python call evaluates a batch of windows."""
    import pyarrow.compute as pc

    keys = [
        (WINDOW_START, "ascending"),
        (WINDOW_END, "ascending"),
        (S_COL, "ascending"),
        (E_COL, "ascending"),
    ]
    order = pc.sort_indices(table, sort_keys=keys)
    table = table.take(order)
    ws, we = table.column(WINDOW_START).to_pylist(), table.column(WINDOW_END).to_pylist()
    runs = []
    lo = 0
    for i in range(1, len(ws) + 1):
        if i == len(ws) or ws[i] != ws[lo] or we[i] != we[lo]:
            runs.append((ws[lo], we[lo], lo, i))
            lo = i
    return table, runs


def _increasing(xs: list[Any]) -> bool:
    return all(a < b for a, b in itertools.pairwise(xs))


def evaluate_window(
    udm: Udm,
    window: WindowDescriptor,
    starts: list[int],
    ends: list[int],
    values: list[Any],
    value_fn: Any,
    clipping: InputClipping,
    policy: OutputPolicy,
    ordered: bool | None = None,
) -> list[IntervalEvent[Any]]:
    """:func:`~udm.host.invoke.compute_window` for members given by
    lifetime order.

    The canonical order sorts by the (clipped) lifetime the UDM sees, then
    by payload value (:func:`~udm.host.invoke.payload_key`). When those
    lifetimes strictly increase in the given order (no two members tie, the
    usual case), that order is
    already canonical and the costly payload keys are skipped; otherwise
    this is exactly ``compute_window``. ``ordered`` is that test's answer
    when the caller already knows it (for a time-insensitive UDM: the
    clipped starts strictly increase; for a time-sensitive one: the
    clipped lifetimes do).
    """
    ws, we = window.start, window.end
    sensitive = udm.time_sensitive
    try:
        if sensitive or ordered is None:
            cs = clipping.clip_starts(starts, ws)
        if sensitive:
            ce = clipping.clip_ends(ends, we)
        if ordered is not None:
            fast = ordered
        elif sensitive:
            fast = _increasing(cs) or _increasing(list(zip(cs, ce, strict=True)))
        else:
            fast = _increasing(cs)
        if fast:
            if value_fn is not None:
                values = [value_fn(v) for v in values]
            if udm.time_sensitive:
                events = [IntervalEvent(s, e, v) for s, e, v in zip(cs, ce, values, strict=True)]
                raw = raw_result(udm, window, events)
            else:
                raw = _raw_payloads(udm, values)
            return stamp_result(udm, window, raw, policy)
    except Exception as exc:
        raise UdmInvocationError(
            udm_label(udm), describe_window(window), f"{type(exc).__name__}: {exc}"
        ) from exc
    members = [IntervalEvent(s, e, v) for s, e, v in zip(starts, ends, values, strict=True)]
    return compute_window(udm, window, members, clipping, policy, value_fn)


def _raw_payloads(udm: Udm, payloads: list[Any]) -> Any:
    """A time-insensitive UDM's result from its payloads in order (as
    :func:`~udm.host.invoke.raw_result`)."""
    u: Any = udm
    if udm.incremental:
        return u.result(u.add_many(u.initial_state(), payloads))
    return u.compute_result(list(payloads))


def window_rows(
    op: WindowOp,
    window: WindowDescriptor,
    keys: list[Any],
    starts: list[int],
    ends: list[int],
    inputs: list[tuple[list[Any], Any]],
    ordered: tuple[bool, bool] | None = None,
) -> list[tuple[int, int, list[Any]]]:
    """A window's output rows (lifetime, one result per call) from its
    members' lifetimes and each call's raw values and value function.
    ``ordered``, when known: whether the clipped starts, and the clipped
    lifetimes, strictly increase (see :func:`evaluate_window`)."""
    per_call: list[list[IntervalEvent[Any]]] = []
    for call, (values, value_fn) in zip(op.calls, inputs, strict=True):
        known = None if ordered is None else ordered[1 if call.udm.time_sensitive else 0]
        try:
            per_call.append(
                evaluate_window(
                    call.udm,
                    window,
                    starts,
                    ends,
                    values,
                    value_fn,
                    op.clipping,
                    op.policy,
                    known,
                )
            )
        except Exception as exc:
            raise udm_failure(call.udm, window, keys, exc, call.value) from exc
    if op.kind == "aggregate":
        return [
            (evs[0].start, evs[0].end, [normalize_value(e.payload) for e in evs])
            for evs in zip(*per_call, strict=True)
        ]
    return [(e.start, e.end, [normalize_value(e.payload)]) for e in per_call[0]]


def make_group_fn(
    op: WindowOp, n_keys: int, payload: list[str], schema: pa.Schema, has_mark: bool
) -> Callable[..., Iterator[pa.RecordBatch]]:
    """The applyInArrow function computing a batch of windows of one key
    from their events (the group key is the key columns and a bucket of
    window ordinals)."""
    calls = op.calls

    def evaluate_windows(
        key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        keys = [k.as_py() for k in key[:n_keys]]
        table, runs = _windows_of(pa.Table.from_batches(list(batches)))
        marks = table.column(MARK).to_pylist() if has_mark else None
        cols = Columns(table, payload)
        starts, ends = cols.col(S_COL), cols.col(E_COL)
        inputs = [cols.values(c) for c in calls]
        rows: list[tuple[int, int, list[Any]]] = []
        row_windows: list[WindowDescriptor] = []
        for ws, we, lo, hi in runs:
            window = WindowDescriptor(ws, we)
            idx = range(lo, hi) if marks is None else [r for r in range(lo, hi) if not marks[r]]
            got = window_rows(
                op,
                window,
                keys,
                [starts[r] for r in idx],
                [ends[r] for r in idx],
                [([values[r] for r in idx], value_fn) for values, value_fn in inputs],
            )
            rows += got
            row_windows += [window] * len(got)
        yield output_batch(
            rows, same_key(keys, len(rows)), schema, result_labels(op, row_windows.__getitem__)
        )

    return evaluate_windows


def make_partial_fn(
    op: WindowOp, keys: list[str], payload: list[str], has_mark: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function folding a partition into per-window states."""
    calls = op.calls
    clipping = op.clipping
    n_keys = len(keys)

    def partial_states(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        states: dict[tuple[Any, ...], list[Any]] = {}
        adds = [cast(Any, c.udm).add for c in calls]
        sensitive = [c.udm.time_sensitive for c in calls]
        for batch in batches:
            cols = Columns(pa.Table.from_batches([batch]), payload)
            key_cols = [cols.col(k) for k in keys]
            ws, we, wo = cols.col(WINDOW_START), cols.col(WINDOW_END), cols.col(WINDOW_ORDINAL)
            starts, ends = cols.col(S_COL), cols.col(E_COL)
            marks = cols.col(MARK) if has_mark else None
            inputs = [cols.values(c) for c in calls]
            for i in range(batch.num_rows):
                gk = (*(kc[i] for kc in key_cols), ws[i], we[i], wo[i])
                st = states.get(gk)
                j = 0
                try:
                    if st is None:
                        st = states[gk] = [cast(Any, c.udm).initial_state() for c in calls]
                    if marks is not None and marks[i]:
                        continue
                    for j, (values, value_fn) in enumerate(inputs):
                        v = values[i] if value_fn is None else value_fn(values[i])
                        if sensitive[j]:
                            window = WindowDescriptor(ws[i], we[i])
                            ev = clipping.clip(IntervalEvent(starts[i], ends[i], v), window)
                            st[j] = adds[j](st[j], ev, window)
                        else:
                            st[j] = adds[j](st[j], v)
                except Exception as exc:
                    window = WindowDescriptor(ws[i], we[i])
                    kv = list(gk[:n_keys])
                    raise udm_failure(calls[j].udm, window, kv, exc, calls[j].value) from exc
        if not states:
            return
        columns: list[list[Any]] = [[] for _ in range(n_keys + 4)]
        for gk, st in states.items():
            for j, v in enumerate(gk):
                columns[j].append(v)
            columns[n_keys + 3].append(dumps(st))
        names = [*keys, WINDOW_START, WINDOW_END, WINDOW_ORDINAL, STATE]
        arrays = [
            *[pa.array(v) for v in columns[:n_keys]],
            *[pa.array(v, pa.int64()) for v in columns[n_keys : n_keys + 3]],
            pa.array(columns[n_keys + 3], pa.binary()),
        ]
        yield pa.RecordBatch.from_arrays(arrays, names=names)

    return partial_states


def _merged(
    udms: list[Any], parts: list[list[Any]], window: WindowDescriptor, keys: list[Any]
) -> list[Any]:
    """One state per UDM from partial states (one list per part), merged in
    order; the first part's list is copied, its states may be updated."""
    state = list(parts[0])
    j = 0
    try:
        for j, u in enumerate(udms):
            merge, st = u.merge, state[j]
            for other in itertools.islice(parts, 1, None):
                st = merge(st, other[j])
            state[j] = st
    except Exception as exc:
        raise udm_failure(udms[j], window, keys, exc) from exc
    return state


def _window_row(
    udms: list[Any],
    state: list[Any],
    window: WindowDescriptor,
    keys: list[Any],
    policy: OutputPolicy,
) -> tuple[int, int, list[Any]]:
    """A window's output row from its merged states: lifetime and results."""
    results: list[Any] = []
    start = end = 0
    for j, u in enumerate(udms):
        try:
            raw = u.result(state[j], window) if u.time_sensitive else u.result(state[j])
            (ev,) = stamp_result(u, window, raw, policy)
        except Exception as exc:
            raise udm_failure(u, window, keys, exc) from exc
        start, end = ev.start, ev.end
        results.append(normalize_value(ev.payload))
    return start, end, results


def make_merge_fn(
    op: WindowOp, n_keys: int, schema: pa.Schema
) -> Callable[..., Iterator[pa.RecordBatch]]:
    """The applyInArrow function merging partial states into results, for
    a batch of windows of one key."""
    calls = op.calls
    udms: list[Any] = [c.udm for c in calls]

    def merge_states(
        key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        keys = [k.as_py() for k in key[:n_keys]]
        blobs: dict[tuple[int, int], list[bytes]] = {}
        for batch in batches:
            ws, we = batch.column(WINDOW_START).to_pylist(), batch.column(WINDOW_END).to_pylist()
            for s, e, b in zip(ws, we, batch.column(STATE).to_pylist(), strict=True):
                blobs.setdefault((s, e), []).append(b)
        rows: list[tuple[int, int, list[Any]]] = []
        row_windows: list[WindowDescriptor] = []
        for (ws_, we_), found in sorted(blobs.items()):
            window = WindowDescriptor(ws_, we_)
            state = _merged(udms, [pickle.loads(b) for b in sorted(found)], window, keys)
            rows.append(_window_row(udms, state, window, keys, op.policy))
            row_windows.append(window)
        yield output_batch(
            rows, same_key(keys, len(rows)), schema, result_labels(op, row_windows.__getitem__)
        )

    return merge_states
