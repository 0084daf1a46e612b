"""Windows evaluated in the worker from their sorted memberships.

The grid (:mod:`udm.host.spark.grid`) and endpoint
(:mod:`udm.host.spark.endpoints`) paths assign a partition's events to
windows with numpy; both end with the same arrays: ``rows``, the event of
each membership (event, window pair), sorted by key, window and lifetime;
``runs``, where each window's memberships begin; and each window's bounds.
This module turns those into output batches, calling the UDMs per window
exactly as :func:`~udm.host.spark.evaluate.window_rows` does, a chunk of
about ``CHUNK`` memberships at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.invoke import raw_result, stamp_result
from udm.host.plan import WindowOp
from udm.host.policies import InputClipping
from udm.host.rows import normalize_value
from udm.host.spark.arrowio import (
    ChunkColumns,
    Columns,
    output_batch,
    output_columns,
    result_labels,
    udm_failure,
    value_column,
)
from udm.host.spark.evaluate import window_rows
from udm.sdk.events import IntervalEvent, WindowDescriptor
from udm.sdk.payloads import payload_key

#: memberships (event, window pairs), or events of sliced windows, turned
#: into Python values at a time
CHUNK = 65_536


# ------------------------------------------------------------ numpy helpers


def table_of(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """A partition's rows as one table (None: no rows)."""
    got = list(batches)
    if not got or not any(b.num_rows for b in got):
        return None
    return pa.Table.from_batches(got)


def explode(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (row, k) for k in lo[row]..hi[row] (empty ranges give none)."""
    n = np.maximum(hi - lo + 1, 0)
    rows = np.repeat(np.arange(len(n)), n)
    first = np.cumsum(n) - n
    return rows, lo[rows] + (np.arange(len(rows)) - first[rows])


def key_codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes equal exactly where the values are (nulls included)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    try:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        return cast(np.ndarray, encoded.indices.to_numpy(zero_copy_only=False))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        seen: dict[Any, int] = {}
        return np.array([seen.setdefault(repr(v), len(seen)) for v in column.to_pylist()])


def lexsort(keys: tuple[np.ndarray, ...] | list[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key primary, stable), faster for
    signed integer keys whose ranges pack into one int64: each row's keys become
    one number; with the row number beside it (when both fit in int64)
    the numbers themselves are sorted and the row numbers read back, else
    the number's indexes are sorted by quicksort when no two rows tie (then
    every sort gives the same permutation) or stably when some do. ``np.lexsort``
    sorts once per key with a merge sort; over a partition's 500,000
    events by (key, start) that was half of a grid worker's time
    (docs/performance.md, "Where a udm mean's time goes")."""
    n = len(keys[0]) if len(keys) else 0
    if n < 2 or not all(k.dtype.kind == "i" for k in keys):
        return np.lexsort(keys)
    packed = np.zeros(n, dtype=np.int64)
    room = 1  # the packed range so far, as a Python int (no overflow)
    for k in reversed(keys):
        lo, hi = int(k.min()), int(k.max())
        span = hi - lo + 1
        room *= span
        if room >= 2**63:
            return np.lexsort(keys)
        packed *= span
        packed += k.astype(np.int64, copy=False) - lo
    bits = (n - 1).bit_length()
    if room << bits <= 2**63:
        # the row number in the low bits: every value distinct, ties in
        # row order, so sorting the values (several times faster than
        # sorting indexes: numpy's vectorized sort) gives the stable order
        packed <<= bits
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        packed &= (1 << bits) - 1
        return packed
    order = np.argsort(packed)
    ranked = packed[order]
    if bool((ranked[1:] == ranked[:-1]).any()):
        return np.argsort(packed, kind="stable")
    return order


def run_starts(*sorted_cols: np.ndarray) -> np.ndarray:
    """Indexes where a run of equal tuples begins in sorted columns."""
    n = len(sorted_cols[0])
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for c in sorted_cols:
        change[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(change)


def key_values(table: pa.Table, keys: list[str], rows: np.ndarray) -> list[list[Any]]:
    """The key columns' values at ``rows``, one list per key column."""
    take = pa.array(rows, pa.int64())
    return [table.column(k).take(take).to_pylist() for k in keys]


def ordered(
    s: np.ndarray,
    e: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
    runs: np.ndarray,
    clipping: InputClipping,
) -> tuple[np.ndarray, np.ndarray]:
    """Per run of memberships sorted by lifetime (``ws``, ``we``: each
    membership's window): whether the clipped starts strictly increase,
    and whether the clipped lifetimes do (the test
    :func:`~udm.host.spark.evaluate.evaluate_window` would make)."""
    cs, ce = clipping.clip_arrays(s, e, ws, we)
    up = cs[1:] > cs[:-1]
    up_lex = up | ((cs[1:] == cs[:-1]) & (ce[1:] > ce[:-1]))
    inner = np.ones(len(s), dtype=bool)
    inner[runs] = False  # a run's first membership has no predecessor in it
    run_of = np.cumsum(~inner)[1:] - 1
    n = len(runs)
    strict = np.bincount(run_of[inner[1:] & ~up], minlength=n) == 0
    strict_lex = np.bincount(run_of[inner[1:] & ~up_lex], minlength=n) == 0
    return strict, strict_lex


# ------------------------------------------------------------ Python values


class Chunk(NamedTuple):
    """Consecutive runs ``[i, j)`` of sorted memberships, as Python values."""

    i: int
    j: int
    lo: int  #: the first membership
    starts: list[int]
    ends: list[int]
    inputs: list[tuple[list[Any], Any]]  #: per call: raw values, value function
    keys: list[list[Any]]  #: per key column: one value per run
    bounds: list[int]  #: the runs' memberships, relative to ``lo`` (j - i + 1)


class Memberships(NamedTuple):
    """Which events belong to which windows, as the workers hold them: the
    event ``table`` (its ``keys`` and ``payload`` columns, lifetimes
    ``[s, e)``), the memberships as event ``rows`` sorted by key, window
    and lifetime, and the positions in ``rows`` where each window's run
    begins (``runs``)."""

    table: pa.Table
    keys: list[str]
    payload: list[str]
    s: np.ndarray
    e: np.ndarray
    rows: np.ndarray
    runs: np.ndarray


def chunks(op: WindowOp, members: Memberships, times: bool = True) -> Iterator[Chunk]:
    """The runs of ``members`` in chunks of about CHUNK memberships, so
    Python values are made for one chunk at a time. ``times=False``: no UDM
    reads lifetimes, so the chunks' ``starts`` and ``ends`` are left empty."""
    table, keys, payload, s, e, rows, runs = members
    bounds = np.append(runs, len(rows))
    i = 0
    while i < len(runs):
        j = max(int(np.searchsorted(bounds, bounds[i] + CHUNK, side="right")) - 1, i + 1)
        lo, hi = int(bounds[i]), int(bounds[j])
        sub = rows[lo:hi]
        cols = Columns(table.select(payload).take(pa.array(sub, pa.int64())), payload)
        yield Chunk(
            i,
            j,
            lo,
            s[sub].tolist() if times else [],
            e[sub].tolist() if times else [],
            [cols.values(c) for c in op.calls],
            key_values(table, keys, rows[runs[i:j]]),
            (bounds[i : j + 1] - lo).tolist(),
        )
        i = j


class RunFailed(Exception):
    """A UDM failed on run ``run`` of a chunk (the caller names the window)."""

    def __init__(self, run: int, cause: Exception) -> None:
        super().__init__(run)
        self.run, self.cause = run, cause


def fold_values(
    udm: Any, inputs: tuple[list[Any], Any], bounds: list[int], lasts: list[int] | None = None
) -> list[Any]:
    """One state per run of a time-insensitive UDA: its values added in
    order (by one ``add_many`` call where the UDA defines it). Run ``r`` is
    ``[bounds[r], bounds[r + 1])``, or ``[bounds[r], lasts[r])`` when runs
    may overlap."""
    values, fn = inputs
    init, add, add_many = udm.initial_state, udm.add, udm.add_many
    out: list[Any] = []
    append = out.append
    runs = itertools.pairwise(bounds) if lasts is None else zip(bounds, lasts, strict=True)
    try:
        if udm.implements("add_many"):
            if fn is None:
                for a, z in runs:
                    append(add_many(init(), values[a:z]))
            else:
                for a, z in runs:
                    append(add_many(init(), [fn(v) for v in values[a:z]]))
        else:  # the loop inlined: no call per run
            for a, z in runs:
                st = init()
                for v in values[a:z]:
                    st = add(st, v if fn is None else fn(v))
                append(st)
    except Exception as exc:
        raise RunFailed(len(out), exc) from exc
    return out


def vector_input(
    op: WindowOp,
    call: Any,
    table: pa.Table,
    picked: pa.Array,
    a_list: list[int],
    z_list: list[int],
) -> np.ndarray | None:
    """The values of ``call`` over consecutive windows ``[a_list[r],
    z_list[r])`` (of ``table``'s rows ``picked``; only the call's column
    is taken) as one numpy array for the UDA's
    ``add_segments``, or None where it does not apply: a UDA without it,
    a value function or whole rows, windows that overlap or leave rows
    out, or a column that is not numbers without nulls (then ``add_many``
    or ``add`` folds each window from Python values)."""
    u = call.udm
    if (
        op.kind != "aggregate"
        or not u.incremental
        or u.time_sensitive
        or not u.implements("add_segments")
        or not isinstance(call.value, str)
        or not a_list
        or a_list[0] != 0
        or a_list[1:] != z_list[:-1]
    ):
        return None
    column = table.column(call.value)
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    taken = column.take(picked)
    if taken.null_count:
        return None
    return cast(np.ndarray, taken.to_numpy())


def segment_states(udm: Any, values: np.ndarray, bounds: list[int] | np.ndarray) -> list[Any]:
    """One state per run ``[bounds[r], bounds[r + 1])`` of ``values``, from
    one ``add_segments`` call; a wrong number of states is the UDA's
    error, reported as its failure on the first window."""
    try:
        states = list(udm.add_segments(values, np.asarray(bounds, dtype=np.int64)))
    except Exception as exc:
        raise RunFailed(0, exc) from exc
    if len(states) != len(bounds) - 1:
        problem = ValueError(
            f"add_segments returned {len(states)} states for {len(bounds) - 1} segments "
            "(one state per segment values[bounds[i]:bounds[i + 1]])"
        )
        raise RunFailed(0, problem)
    return states


# ------------------------------------------------------------ evaluation


def evaluate_runs(
    op: WindowOp,
    members: Memberships,
    win_s: np.ndarray,
    win_e: np.ndarray,
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Output batches of the windows of ``members``: window ``r`` (the
    run starting at ``members.runs[r]``) is ``[win_s[r], win_e[r])``."""
    keys, s, e, rows, runs = members.keys, members.s, members.e, members.rows, members.runs
    lengths = np.diff(np.append(runs, len(rows)))
    flags_all = ordered(
        s[rows],
        e[rows],
        np.repeat(win_s, lengths),
        np.repeat(win_e, lengths),
        runs,
        op.clipping,
    )
    values_only = op.kind == "aggregate" and not any(c.udm.time_sensitive for c in op.calls)
    for chunk in chunks(op, members):
        i, j = chunk.i, chunk.j
        starts, ends, inputs = chunk.starts, chunk.ends, chunk.inputs
        run_keys, bounds = chunk.keys, chunk.bounds
        if values_only and bool(flags_all[0][i:j].all()):
            yield _aggregates(op, chunk, win_s[i:j], win_e[i:j], schema)
            continue
        flags = list(zip(flags_all[0][i:j].tolist(), flags_all[1][i:j].tolist(), strict=True))
        ws_list, we_list = win_s[i:j].tolist(), win_e[i:j].tolist()
        out: list[tuple[int, int, list[Any]]] = []
        out_keys: list[list[Any]] = [[] for _ in keys]
        row_windows: list[WindowDescriptor] = []
        for r in range(j - i):
            a, z = bounds[r], bounds[r + 1]
            window = WindowDescriptor(ws_list[r], we_list[r])
            kv = [col[r] for col in run_keys]
            got = window_rows(
                op,
                window,
                kv,
                starts[a:z],
                ends[a:z],
                [(values[a:z], fn) for values, fn in inputs],
                flags[r],
            )
            out += got
            row_windows += [window] * len(got)
            for col, v in zip(out_keys, kv, strict=True):
                col += [v] * len(got)
        yield output_batch(out, out_keys, schema, result_labels(op, row_windows.__getitem__))


def _aggregates(
    op: WindowOp, chunk: Chunk, win_s: np.ndarray, win_e: np.ndarray, schema: pa.Schema
) -> pa.RecordBatch:
    """The output of a chunk's windows for time-insensitive aggregates
    whose members are already in canonical order: each UDA reads the
    values of its window, no lifetimes or events are made, and the output
    lifetimes come from numpy (:func:`aggregate_batch`)."""
    results: list[list[Any]] = []
    for call, (values, fn) in zip(op.calls, chunk.inputs, strict=True):
        u: Any = call.udm
        got: list[Any] = []
        try:
            if u.incremental:
                result = u.result
                for st in fold_values(u, (values, fn), chunk.bounds):
                    got.append(normalize_value(result(st)))
            else:
                compute = u.compute_result
                for a, z in itertools.pairwise(chunk.bounds):
                    run = values[a:z] if fn is None else [fn(v) for v in values[a:z]]
                    got.append(normalize_value(compute(run)))
        except Exception as exc:
            r, cause = (exc.run, exc.cause) if isinstance(exc, RunFailed) else (len(got), exc)
            kv = [col[r] for col in chunk.keys]
            window = WindowDescriptor(int(win_s[r]), int(win_e[r]))
            raise udm_failure(u, window, kv, cause, value_column(op, u)) from cause
        results.append(got)
    return aggregate_batch(op, win_s, win_e, chunk.keys, results, schema)


class Slices(NamedTuple):
    """Windows whose events are runs of one sorted order (point events of
    grid windows, events of count-by-start windows): a window's values are
    then a slice of one list, and no event is copied per window."""

    order: np.ndarray  #: the events (table rows), sorted by group and start
    tied: np.ndarray  #: per sorted event: it starts with the one before it
    win_row: np.ndarray  #: per window: a table row of its group (for its keys)
    win_s: np.ndarray  #: per window: its start ..
    win_e: np.ndarray  #: .. and end
    firsts: np.ndarray  #: per window: its run of sorted events [first ..
    lasts: np.ndarray  #: .. last); both never decrease


def tie_runs(tied: np.ndarray) -> list[tuple[int, int]]:
    """The runs ``[a, z)`` of events starting together (``tied``: an event
    starts with the one before it)."""
    if not tied.any():
        return []
    before = np.concatenate([[False], tied[:-1]])
    after = np.concatenate([tied[1:], [False]])
    firsts = np.flatnonzero(tied & ~before) - 1
    lasts = np.flatnonzero(tied & ~after) + 1
    return list(zip(firsts.tolist(), lasts.tolist(), strict=True))


def sorted_ties(values: np.ndarray, ties: list[tuple[int, int]]) -> np.ndarray:
    """``values`` with each run ``[a, z)`` of events starting together in
    ascending order (a stable sort: the order ``payload_key`` gives numbers,
    NaN last), as :func:`sliced_windows` orders Python values."""
    if not ties:
        return values
    values = values.copy()
    for a, z in ties:
        values[a:z] = np.sort(values[a:z], kind="stable")
    return values


def segment_results(
    op: WindowOp,
    u: Any,
    vector: Any,
    a_list: list[int],
    z_list: list[int],
    source: tuple[pa.Table, list[str]],
    windows: tuple[np.ndarray, list[int], list[int]],
) -> list[Any]:
    """The results of windows ``[a, z)`` of a chunk by the UDA's vectorized
    fold (``add_segments``) over ``vector``; a failure names the window
    (its key row, start and end in ``windows``)."""
    got: list[Any] = []
    try:
        result = u.result
        for st in segment_states(u, vector, [*a_list, z_list[-1]]):
            got.append(normalize_value(result(st)))
    except Exception as exc:
        cause = exc.cause if isinstance(exc, RunFailed) else exc
        r = exc.run if isinstance(exc, RunFailed) else len(got)
        table, keys = source
        rows, ws_list, we_list = windows
        kv = [c[0] for c in key_values(table, keys, rows[r : r + 1])]
        window = WindowDescriptor(ws_list[r], we_list[r])
        raise udm_failure(u, window, kv, cause, value_column(op, u)) from cause
    return got


def sliced_windows(
    op: WindowOp,
    table: pa.Table,
    keys: list[str],
    payload: list[str],
    slices: Slices,
    s: np.ndarray,
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Output batches of the windows of ``slices``, some CHUNK events at a
    time. Events starting together are in every window or none, so sorting
    each such run by payload puts every window's values in the canonical
    order (start, then payload); value functions are applied once per
    event. A time-sensitive UDM (and an operator) gets point events ``[s,
    s + 1)`` (starts ``s``), made once per event: the caller passes only
    point events to those, which no window clips."""
    order, tied, win_row, win_s, win_e, firsts, lasts = slices
    numbers: dict[str, np.ndarray | None] = {}  # per column, made once per partition
    i, n = 0, len(win_s)
    while i < n:
        j = max(int(np.searchsorted(lasts, firsts[i] + CHUNK, side="right")), i + 1)
        lo, hi = int(firsts[i]), int(lasts[j - 1])
        picked = pa.array(order[lo:hi], pa.int64())
        cols: ChunkColumns | None = None  # Python values, made for the calls that need them
        a_list, z_list = (firsts[i:j] - lo).tolist(), (lasts[i:j] - lo).tolist()
        ws_list, we_list = win_s[i:j].tolist(), win_e[i:j].tolist()
        ties = tie_runs(tied[lo:hi])
        starts: list[int] = []
        results: list[list[Any]] = []
        rows: list[tuple[int, int, list[Any]]] = []  # an operator's output
        row_windows: list[int] = []  # .. and the window of each row
        for call in op.calls:
            u: Any = call.udm
            got: list[Any] = []
            applied: list[Any] | None = None
            r = 0
            vector = vector_input(op, call, table, picked, a_list, z_list)
            if vector is not None:
                results.append(
                    segment_results(
                        op,
                        u,
                        sorted_ties(vector, ties),
                        a_list,
                        z_list,
                        (table, keys),
                        (win_row[i:j], ws_list, we_list),
                    )
                )
                continue
            if cols is None:
                cols = ChunkColumns(table, payload, numbers, order[lo:hi])
            values, fn = cols.values(call)
            try:
                if fn is not None:
                    applied = []
                    for v in values:
                        applied.append(fn(v))
                    values, applied = applied, None
                if ties:
                    values = list(values)
                    for a, z in ties:
                        values[a:z] = sorted(values[a:z], key=payload_key)
                if u.time_sensitive or op.kind == "operator":
                    starts = starts or s[order[lo:hi]].tolist()
                    pairs = zip(starts, values, strict=True)
                    events = [IntervalEvent(t, t + 1, v) for t, v in pairs]
                    bounds = zip(a_list, z_list, ws_list, we_list, strict=True)
                    for r, (a, z, ws, we) in enumerate(bounds):
                        window = WindowDescriptor(ws, we)
                        raw = raw_result(u, window, events[a:z])
                        if op.kind == "aggregate":
                            got.append(normalize_value(raw))
                            continue
                        for out in stamp_result(u, window, raw, op.policy):
                            rows.append((out.start, out.end, [normalize_value(out.payload)]))
                            row_windows.append(r)
                elif u.incremental:
                    result = u.result
                    for st in fold_values(u, (values, None), a_list, z_list):
                        got.append(normalize_value(result(st)))
                else:
                    compute = u.compute_result
                    for a, z in zip(a_list, z_list, strict=True):
                        got.append(normalize_value(compute(values[a:z])))
            except Exception as exc:
                cause = exc.cause if isinstance(exc, RunFailed) else exc
                if applied is not None:  # the value function: the event's first window
                    r = int(np.searchsorted(z_list, len(applied), side="right"))
                elif op.kind == "aggregate":
                    r = exc.run if isinstance(exc, RunFailed) else len(got)
                kv = [c[0] for c in key_values(table, keys, win_row[i + r : i + r + 1])]
                window = WindowDescriptor(ws_list[r], we_list[r])
                raise udm_failure(u, window, kv, cause, value_column(op, u)) from cause
            results.append(got)
        key_columns = key_values(table, keys, win_row[i:j])
        if op.kind == "aggregate":
            yield aggregate_batch(op, win_s[i:j], win_e[i:j], key_columns, results, schema)
        else:
            out_keys = [[col[r] for r in row_windows] for col in key_columns]
            windows = [WindowDescriptor(ws_list[r], we_list[r]) for r in row_windows]
            labels = result_labels(op, windows.__getitem__)
            yield output_batch(rows, out_keys, schema, labels)
        i = j


def aggregate_batch(
    op: WindowOp,
    win_s: np.ndarray,
    win_e: np.ndarray,
    key_columns: list[list[Any]],
    results: list[list[Any]],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Output rows of aggregates over windows ``[win_s, win_e)``:
    lifetimes by the output policy (aggregates take ``align`` or
    ``point_end``), keys and one result column per call."""
    starts, ends = op.policy.window_lifetime(win_s, win_e)
    labels = result_labels(op, lambda i: WindowDescriptor(int(win_s[i]), int(win_e[i])))
    return output_columns(starts, ends, key_columns, results, schema, labels)
