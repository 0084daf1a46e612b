"""UDM evaluation in Spark's Python workers, over Arrow batches.

Hopping and tumbling windows (:mod:`udm.host.spark.grid`) and, without
partial aggregation, snapshot and count windows
(:mod:`udm.host.spark.endpoints`) are assigned in the worker instead; this
module runs the windows Spark assigns (snapshot and count windows with
partial aggregation, grid windows with ``emit_empty``) and holds the
per-window evaluation they all share.

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

Results whose Spark type is known (``returns=`` or annotations) are
written typed; others are pickled first and typed from their values by
:func:`decode_pickled`.
"""

from __future__ import annotations

import itertools
import pickle
import secrets
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, cast

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.errors import UdmInvocationError
from udm.host.invoke import compute_window, raw_result, stamp_result, udm_label
from udm.host.plan import E_COL, S_COL, UdmCall, WindowOp
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.rows import Layout, check_output_names, op_layout, result_columns
from udm.host.spark.frame import EventFrame, apply_in_arrow, map_in_arrow, q
from udm.host.spark.types import (
    TIME_META,
    accepts,
    arrow_schema,
    concrete,
    declared_result_type,
    declared_time_result,
    dumps,
    expected_value_type,
    from_returns,
    infer_column,
    normalize_value,
    type_name,
    unify,
)
from udm.host.spark.windows import MARK, WE, WO, WS, assign_windows
from udm.host.strategy import spark_route, use_partial
from udm.host.windows import describe_window, of_key
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = [
    "decode_pickled",
    "evaluate_op",
    "release",
    "released_with",
    "to_arrow_column",
    "tracking_persisted",
]

_STATE = "__udm_state"
#: windows of one key evaluated per Python call (consecutive ordinals)
BUCKET = 128


def _result_col(i: int) -> str:
    return f"__udm_r{i}"


def call_type(call: UdmCall) -> T.DataType | None:
    """The declared Spark type of a call's results (None: infer from data)."""
    if call.returns is not None:
        return from_returns(call.returns)
    return declared_result_type(call.udm)


# ------------------------------------------------------------ worker side


def to_arrow_column(
    values: list[Any], dtype: pa.DataType | None, what: Callable[[int], str]
) -> pa.Array:
    """Values as an Arrow array of ``dtype`` (None: pickled binary)."""
    if dtype is None:
        return pa.array([None if v is None else dumps(v) for v in values], pa.binary())
    try:
        array = pa.array(values, type=dtype)
        if _holds_integers(dtype) and not _kept(array.to_pylist(), values):
            # pyarrow truncates floats into integer types (21.5 -> 21)
            raise ValueError("a float does not fit an integer type")
        return array
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        for i, v in enumerate(values):
            try:
                one = pa.array([v], type=dtype)
                if _holds_integers(dtype) and not _kept(one.to_pylist(), [v]):
                    raise ValueError("truncated")
            except Exception:
                raise TypeError(
                    f"{what(i)} returned {v!r:.80}, which does not fit the result type "
                    f"{dtype}; fix the UDM's return annotation or pass returns= "
                    "(a Spark DDL type such as 'double')"
                ) from None
        raise TypeError(f"results do not fit the result type {dtype}: {exc}") from None


def _holds_integers(dtype: pa.DataType) -> bool:
    """Whether a value of ``dtype`` has an integer part anywhere."""
    if pa.types.is_integer(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_holds_integers(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _holds_integers(dtype.value_type)
    if pa.types.is_map(dtype):
        return _holds_integers(dtype.key_type) or _holds_integers(dtype.item_type)
    return False


def _kept(got: Any, given: Any) -> bool:
    """Whether Arrow kept the values (NaN equal to NaN, 2.0 equal to 2)."""
    if isinstance(got, float) and isinstance(given, float) and got != got and given != given:
        return True
    if isinstance(got, list) and isinstance(given, Mapping):  # a map: (key, value) pairs
        got = dict(got)
    if isinstance(got, dict) and isinstance(given, Mapping):
        return got.keys() == given.keys() and all(_kept(got[k], given[k]) for k in got)
    if isinstance(got, list) and isinstance(given, list | tuple):
        return len(got) == len(given) and all(map(_kept, got, given))
    return bool(got == given)


def _wrap(
    udm: Udm, window: WindowDescriptor, key: list[Any], exc: BaseException, column: Any = None
) -> Exception:
    """The UDM's failure on a window of a group; ``column``: the call's
    ``value=``, named when it is a column, since a value of the wrong type
    is the usual cause."""
    cause = exc.__cause__ if isinstance(exc, UdmInvocationError) and exc.__cause__ else exc
    where = describe_window(window) + of_key(key)
    note = f"; values from column {column!r}" if isinstance(column, str) else ""
    return UdmInvocationError(udm_label(udm), where, f"{type(cause).__name__}: {cause}{note}")


def value_column(op: WindowOp, udm: Any) -> Any:
    """The ``value=`` of the call running ``udm`` (for :func:`_wrap`)."""
    return next((c.value for c in op.calls if c.udm is udm), None)


class _Columns:
    """One group's rows as Python values, read lazily per column."""

    def __init__(self, table: pa.Table, payload: list[str]) -> None:
        self.table = table
        self.payload = payload
        self._cache: dict[str, list[Any]] = {}
        self._rows: list[dict[str, Any]] | None = None

    def col(self, name: str) -> list[Any]:
        got = self._cache.get(name)
        if got is None:
            got = self._cache[name] = self.table.column(name).to_pylist()
        return got

    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = self.table.select(self.payload).to_pylist()
        return self._rows

    def values(self, call: UdmCall) -> tuple[list[Any], Any]:
        """The call's raw input values per row and the value function still
        to apply to them."""
        if isinstance(call.value, str):
            return self.col(call.value), None
        return self.rows(), call.value_fn


def _windows_of(table: pa.Table) -> tuple[pa.Table, list[tuple[int, int, int, int]]]:
    """The rows sorted by window, then lifetime, and the runs ``(ws, we, lo,
    hi)`` of each window's rows: one Python call evaluates a batch of windows."""
    import pyarrow.compute as pc

    keys = [(WS, "ascending"), (WE, "ascending"), (S_COL, "ascending"), (E_COL, "ascending")]
    order = pc.sort_indices(table, sort_keys=keys)
    table = table.take(order)
    ws, we = table.column(WS).to_pylist(), table.column(WE).to_pylist()
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
            cs = [max(s, ws) for s in starts] if clipping.clips_left else starts
        if sensitive:
            ce = [min(e, we) for e in ends] if clipping.clips_right else ends
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


def _label(what: Callable[[int, int], str], j: int) -> Callable[[int], str]:
    return lambda i: what(j, i)


def _output_batch(
    rows: list[tuple[int, int, list[Any]]],
    key_columns: list[list[Any]],
    schema: pa.Schema,
    what: Callable[[int, int], str],
) -> pa.RecordBatch:
    """Output rows (lifetime and results) with their key values, one list
    per key column."""
    n_results = len(schema) - 2 - len(key_columns)
    return _output_columns(
        [r[0] for r in rows],
        [r[1] for r in rows],
        key_columns,
        [[r[2][j] for r in rows] for j in range(n_results)],
        schema,
        what,
    )


def _output_columns(
    starts: Any,
    ends: Any,
    key_columns: list[list[Any]],
    results: list[list[Any]],
    schema: pa.Schema,
    what: Callable[[int, int], str],
) -> pa.RecordBatch:
    """The output batch from its columns: lifetimes, one list per key
    column and one per result column."""
    n_keys = len(key_columns)
    arrays: list[pa.Array] = [pa.array(starts, pa.int64()), pa.array(ends, pa.int64())]
    for i, values in enumerate(key_columns):
        arrays.append(pa.array(values, schema.field(2 + i).type))
    for j, values in enumerate(results):
        field = schema.field(2 + n_keys + j)
        dtype = None if field.metadata and b"udm.pickled" in field.metadata else field.type
        arrays.append(to_arrow_column(values, dtype, _label(what, j)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _same_key(keys: list[Any], n: int) -> list[list[Any]]:
    return [[k] * n for k in keys]


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
            raise _wrap(call.udm, window, keys, exc, call.value) from exc
    if op.kind == "aggregate":
        return [
            (evs[0].start, evs[0].end, [normalize_value(e.payload) for e in evs])
            for evs in zip(*per_call, strict=True)
        ]
    return [(e.start, e.end, [normalize_value(e.payload)]) for e in per_call[0]]


def result_labels(
    op: WindowOp, window_of: Callable[[int], WindowDescriptor]
) -> Callable[[int, int], str]:
    """Names result ``i`` of call ``j`` in type errors (``window_of(i)``:
    the window of output row ``i``)."""

    def what(j: int, i: int) -> str:
        return f"UDM {op.calls[j].udm.name!r} on window {describe_window(window_of(i))}"

    return what


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
        cols = _Columns(table, payload)
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
        yield _output_batch(
            rows, _same_key(keys, len(rows)), schema, result_labels(op, row_windows.__getitem__)
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
            cols = _Columns(pa.Table.from_batches([batch]), payload)
            key_cols = [cols.col(k) for k in keys]
            ws, we, wo = cols.col(WS), cols.col(WE), cols.col(WO)
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
                    raise _wrap(calls[j].udm, window, kv, exc, calls[j].value) from exc
        if not states:
            return
        columns: list[list[Any]] = [[] for _ in range(n_keys + 4)]
        for gk, st in states.items():
            for j, v in enumerate(gk):
                columns[j].append(v)
            columns[n_keys + 3].append(dumps(st))
        names = [*keys, WS, WE, WO, _STATE]
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
        raise _wrap(udms[j], window, keys, exc) from exc
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
            raise _wrap(u, window, keys, exc) from exc
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
            ws, we = batch.column(WS).to_pylist(), batch.column(WE).to_pylist()
            for s, e, b in zip(ws, we, batch.column(_STATE).to_pylist(), strict=True):
                blobs.setdefault((s, e), []).append(b)
        rows: list[tuple[int, int, list[Any]]] = []
        row_windows: list[WindowDescriptor] = []
        for (ws_, we_), found in sorted(blobs.items()):
            window = WindowDescriptor(ws_, we_)
            state = _merged(udms, [pickle.loads(b) for b in sorted(found)], window, keys)
            rows.append(_window_row(udms, state, window, keys, op.policy))
            row_windows.append(window)
        yield _output_batch(
            rows, _same_key(keys, len(rows)), schema, result_labels(op, row_windows.__getitem__)
        )

    return merge_states


# ------------------------------------------------------------ driver side


def _pickled_field(name: str) -> T.StructField:
    return T.StructField(name, T.BinaryType(), True, metadata={"udm.pickled": True})


def _assigned_results(
    df: DataFrame,
    keys: tuple[str, ...],
    op: WindowOp,
    needed: list[str],
    key_fields: list[T.StructField],
    out_schema: T.StructType,
    pa_schema: pa.Schema,
) -> DataFrame:
    """Result rows of windows assigned in Spark (snapshot, count, and grid
    windows with ``emit_empty``): one row per (event, window) pair, grouped
    by key and bucket of window ordinals."""
    assigned = assign_windows(df, keys, op.window, op.watermark, op.emit_empty)
    has_mark = op.emit_empty
    extra = [MARK] if has_mark else []
    assigned = assigned.selectExpr(
        *[q(c) for c in dict.fromkeys([*keys, WS, WE, WO, S_COL, E_COL, *extra, *needed])]
    )
    # one Python call evaluates up to BUCKET consecutive windows of a key
    bucket = F.expr(f"{WO} div {BUCKET}").alias("__udm_bucket")
    if use_partial(op):
        part_schema = T.StructType(
            [
                *key_fields,
                T.StructField(WS, T.LongType(), False),
                T.StructField(WE, T.LongType(), False),
                T.StructField(WO, T.LongType(), False),
                T.StructField(_STATE, T.BinaryType(), False),
            ]
        )
        partial = map_in_arrow(
            assigned, make_partial_fn(op, list(keys), needed, has_mark), part_schema
        )
        return apply_in_arrow(
            partial, list(keys), [bucket], make_merge_fn(op, len(keys), pa_schema), out_schema
        )
    return apply_in_arrow(
        assigned,
        list(keys),
        [bucket],
        make_group_fn(op, len(keys), needed, pa_schema, has_mark),
        out_schema,
    )


def evaluate_op(
    frame: EventFrame, keys: tuple[str, ...], op: WindowOp
) -> tuple[EventFrame, Layout]:
    """The output event table of a window operation."""
    df = frame.df
    payload = frame.columns
    for c in op.calls:
        missing = [col for col in (c.columns() or []) if col not in payload]
        if missing:
            raise KeyError(
                f"value column(s) {missing} of {c.name!r} are not in the stream; columns: {payload}"
            )
    types = [call_type(c) for c in op.calls]
    schema_of = {f.name: f for f in df.schema.fields}
    for c in op.calls:
        expected = expected_value_type(c.udm) if isinstance(c.value, str) else None
        if expected is not None and isinstance(c.value, str):
            column = schema_of[c.value].dataType
            if not accepts(expected, column):
                raise TypeError(
                    f"UDM {c.udm.name!r} takes {expected.__name__} values, but column "
                    f"{c.value!r} is {column.simpleString()}; cast the column (e.g. "
                    f"df.withColumn({c.value!r}, F.col({c.value!r}).cast('double'))) "
                    "or pass another value="
                )
    whole = any(c.columns() is None for c in op.calls)
    needed = (
        payload
        if whole
        else list(dict.fromkeys([*keys, *(col for c in op.calls for col in (c.columns() or []))]))
    )
    out_fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        *[T.StructField(k, schema_of[k].dataType, True) for k in keys],
    ]
    for i, (t, c) in enumerate(zip(types, op.calls, strict=True)):
        # an aggregate declared -> Ticks: its column is a time (frame.output)
        time = c.returns is None and declared_time_result(c.udm)
        meta = {TIME_META: True} if time and isinstance(t, T.LongType) else None
        out_fields.append(
            _pickled_field(_result_col(i))
            if t is None
            else T.StructField(_result_col(i), t, True, metadata=meta)
        )
    out_schema = T.StructType(out_fields)
    pa_schema = _arrow_schema_with_marks(out_schema)
    key_fields = [T.StructField(k, schema_of[k].dataType, True) for k in keys]
    route = spark_route(op)
    if route == "grid":
        from udm.host.spark.grid import grid_results

        result = grid_results(
            df, keys, op, needed, key_fields, out_schema, pa_schema, points=frame.points
        )
    elif route == "endpoints":
        from udm.host.spark.endpoints import endpoint_results

        result = endpoint_results(df, keys, op, needed, out_schema, pa_schema)
    else:
        result = _assigned_results(df, keys, op, needed, key_fields, out_schema, pa_schema)
    pickled = [_result_col(i) for i, t in enumerate(types) if t is None]
    if pickled:
        labels = {_result_col(i): f"UDM {c.udm.name!r}" for i, c in enumerate(op.calls)}
        result, inferred = decode_pickled(result, pickled, labels, keys)
        types = [inferred.get(_result_col(i), t) for i, t in enumerate(types)]
    structs = [list(t.fieldNames()) if isinstance(t, T.StructType) else None for t in types]
    cols = result_columns(op, structs)
    check_output_names(keys, op, cols)
    index = {c.name: i for i, c in enumerate(op.calls)}
    select = [S_COL, E_COL, *[q(k) for k in keys]]
    for col, call_name, field in cols:
        src = _result_col(index[call_name])
        select.append(f"{src if field is None else f'{src}.{q(field)}'} AS {q(col)}")
    return EventFrame(result.selectExpr(*select), frame.time), op_layout(op, cols)


def _arrow_schema_with_marks(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of ``schema``; pickled columns keep a metadata mark
    so the worker knows to pickle them."""
    base = arrow_schema(schema)
    fields = []
    for f, sf in zip(base, schema.fields, strict=True):
        if sf.metadata.get("udm.pickled"):
            f = f.with_metadata({b"udm.pickled": b"1"})
        fields.append(f)
    return pa.schema(fields)


# ----------------------------------------------------- typing pickled data


def _collect_types(
    columns: list[str],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def types_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found: dict[str, T.DataType | None] = dict.fromkeys(columns)
        for batch in batches:
            for c in columns:
                values = (pickle.loads(b) for b in batch.column(c).to_pylist() if b is not None)
                found[c] = unify(found[c], infer_column(values))
        yield pa.RecordBatch.from_pydict(
            {
                "column": list(found),
                "type": [None if t is None else t.json() for t in found.values()],
            }
        )

    return types_of


def _decode(
    schema: pa.Schema, columns: list[str], labels: dict[str, str], keys: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            arrays = []
            for f in schema:
                col = batch.column(f.name)
                if f.name in columns:
                    values = [None if b is None else pickle.loads(b) for b in col.to_pylist()]
                    what = _result_of(batch, labels.get(f.name, f"the result in {f.name}"), keys)
                    col = to_arrow_column(values, f.type, what)
                arrays.append(col)
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return decode


def _result_of(batch: pa.RecordBatch, label: str, keys: list[str]) -> Callable[[int], str]:
    """Names row ``i``'s result in a type error: who computed it, and the
    output lifetime and key it belongs to (when the batch has them)."""
    names = batch.schema.names

    def what(i: int) -> str:
        if S_COL not in names or E_COL not in names:
            return label
        s, e = batch.column(S_COL)[i].as_py(), batch.column(E_COL)[i].as_py()
        key = [batch.column(k)[i].as_py() for k in keys if k in names]
        return f"{label} (output {describe_window(WindowDescriptor(s, e))}{of_key(key)})"

    return what


_persisted: ContextVar[list[DataFrame] | None] = ContextVar("udm_persisted", default=None)
_NONCE = "__udm_nonce"


@contextmanager
def tracking_persisted() -> Iterator[list[DataFrame]]:
    """Collect the tables :func:`decode_pickled` persists while planning,
    for the caller to release with :func:`released_with`."""
    got: list[DataFrame] = []
    token = _persisted.set(got)
    try:
        yield got
    finally:
        _persisted.reset(token)


def release(tables: list[DataFrame]) -> None:
    """Unpersist ``tables`` (their results have been collected, or nothing
    reads them any more)."""
    for t in tables:
        with suppress(Exception):  # the session may be gone (at exit)
            t.unpersist(blocking=False)


def released_with(owner: DataFrame, tables: list[DataFrame]) -> DataFrame:
    """``owner``, with ``tables`` released once it is garbage collected."""
    if tables:
        weakref.finalize(owner, release, list(tables))
    return owner


def decode_pickled(
    df: DataFrame,
    columns: list[str],
    labels: dict[str, str] | None = None,
    keys: Sequence[str] = (),
) -> tuple[DataFrame, dict[str, T.DataType]]:
    """Type pickled result columns from their values (``labels``: who
    computed each column, and ``keys``, for an error naming a result).

    The pickled table is persisted (the UDMs run once), one job unifies
    the value types of every column over all rows, and a ``mapInArrow``
    decodes them. Give ``returns=`` or annotate the UDM to skip this.

    The persisted plan carries a random constant column, so no other query
    (the same query built again over changed data, say) is ever answered
    from this cache; it is registered with :func:`tracking_persisted`, and
    released when the query's output DataFrame is garbage collected.
    """
    from udm.host.spark.errors import udm_errors

    private = df.select("*", F.lit(secrets.randbits(62)).alias(_NONCE))
    private = private.persist(StorageLevel.MEMORY_AND_DISK)
    tracked = _persisted.get()
    if tracked is not None:
        tracked.append(private)
    df = private.drop(_NONCE)
    found: dict[str, T.DataType | None] = dict.fromkeys(columns)
    rows = map_in_arrow(df.select(*columns), _collect_types(columns), "column string, type string")
    with udm_errors():  # the UDMs run here, while the query is planned
        collected = rows.collect()
    for r in collected:
        t = None if r["type"] is None else T._parse_datatype_json_string(r["type"])
        try:
            found[r["column"]] = unify(found[r["column"]], t)
        except TypeError as exc:
            raise TypeError(f"UDM results of column {r['column']}: {exc}") from None
    types = {c: concrete(t) for c, t in found.items()}
    fields = [
        T.StructField(f.name, types[f.name], True) if f.name in types else f
        for f in df.schema.fields
    ]
    schema = T.StructType(fields)
    decode = _decode(arrow_schema(schema), columns, labels or {}, list(keys))
    decoded = map_in_arrow(df, decode, schema)
    return decoded, types


__all__ += ["call_type", "type_name"]
