"""Partial aggregation on hopping and tumbling windows, in-process (no Spark
session): the worker functions Spark runs (``grid.fold_fn`` per input
partition, ``grid.merge_fn`` after the shuffle) are called on Arrow
batches directly and must give the reference evaluator's CHT; failures
name the UDM, the window and the key. ``add_many`` replaces the per-event
``add`` loop where a UDA defines it.
"""

from __future__ import annotations

import gc
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from udm.host import (
    HoppingWindow,
    InputClipping,
    IntervalEvent,
    OutputPolicy,
    UdmInvocationError,
)
from udm.host.time import INFINITY
from udm.sdk import (
    IncrementalAggregate,
    Properties,
    TimeSensitiveIncrementalAggregate,
    aggregate,
    operator,
)

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402
from worker_support import Rises, by_key, reference, worker_table  # noqa: E402

from udm.host.plan import E_COL, S_COL, Source, UdmCall, WindowOp  # noqa: E402
from udm.host.spark import evaluate as ev  # noqa: E402
from udm.host.spark import grid, members  # noqa: E402


class Mean(IncrementalAggregate):
    def initial_state(self) -> list[float]:
        return [0.0, 0]

    def add(self, state: list[float], value: float) -> list[float]:
        state[0] += value  # updates its state in place, as the SDK allows
        state[1] += 1
        return state

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        a[0] += b[0]  # and merge updates its first argument
        a[1] += b[1]
        return a

    def result(self, state: list[float]) -> float:
        return state[0] / state[1]


class Bag(IncrementalAggregate):
    """The window's payloads as a sorted list; counts its calls."""

    calls: ClassVar[Counter[str]] = Counter()

    def initial_state(self) -> Counter[float]:
        return Counter()

    def add(self, state: Counter[float], value: float) -> Counter[float]:
        Bag.calls["add"] += 1
        state[value] += 1
        return state

    def add_many(self, state: Counter[float], values: Sequence[float]) -> Counter[float]:
        Bag.calls["add_many"] += 1
        state.update(values)
        return state

    def merge(self, a: Counter[float], b: Counter[float]) -> Counter[float]:
        a.update(b)
        return a

    def result(self, state: Counter[float]) -> list[float]:
        return sorted(state.elements())


class Span(TimeSensitiveIncrementalAggregate):
    """Covered ticks of the window (time-sensitive: no panes)."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[float], window: Any) -> int:
        return state + (event.end - event.start)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int, window: Any) -> int:
        return state


class InOrder(IncrementalAggregate):
    """Concatenates payloads: associative, not commutative, so merges out of
    time order show. (Declared order-insensitive so that it may run
    partially; a single input partition keeps every merge in time order.)"""

    properties = Properties(order_insensitive=True)

    def initial_state(self) -> list[float]:
        return []

    def add(self, state: list[float], value: float) -> list[float]:
        state.append(value)
        return state

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        a.extend(b)
        return a

    def result(self, state: list[float]) -> list[float]:
        return list(state)


class Handover(IncrementalAggregate):
    """A multiset whose merge hands back ``b`` itself when ``a`` is empty
    (and otherwise updates ``a``): a state the host gets back that way is
    still someone else's, so it must not be updated later."""

    def initial_state(self) -> Counter[float]:
        return Counter()

    def add(self, state: Counter[float], value: float) -> Counter[float]:
        state[value] += 1
        return state

    def merge(self, a: Counter[float], b: Counter[float]) -> Counter[float]:
        if not a:
            return b
        a.update(b)
        return a

    def result(self, state: Counter[float]) -> list[float]:
        return sorted(state.elements())


@aggregate(time_sensitive=True)
def stamped(events: Sequence[IntervalEvent[float]], window: Any) -> list[str]:
    """Time- and order-sensitive: the lifetimes and payloads in order."""
    return [f"{e.start} {e.end} {e.payload} in {window.start}" for e in events]


@aggregate
def middle(values: Sequence[float]) -> float:
    """A non-incremental UDA: the upper median."""
    return sorted(values)[len(values) // 2]


RESULT_TYPES = {
    middle: T.DoubleType(),
    Mean: T.DoubleType(),
    Bag: T.ArrayType(T.DoubleType()),
    Handover: T.ArrayType(T.DoubleType()),
    Span: T.LongType(),
    InOrder: T.ArrayType(T.DoubleType()),
    stamped: T.ArrayType(T.StringType()),
}


def _op(
    window: HoppingWindow,
    udms: list[Any],
    watermark: int = INFINITY,
    policy: OutputPolicy = OutputPolicy.ALIGN,
) -> WindowOp:
    calls = tuple(UdmCall(f"r{i}", u(), "v") for i, u in enumerate(udms))
    return WindowOp(
        Source(rows=()),
        window,
        "aggregate",
        calls,
        InputClipping.NONE,
        policy,
        False,
        watermark,
        True,
        False,
    )


def _schema(udms: list[Any]) -> Any:
    fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        T.StructField("key", T.StringType(), True),
        *[T.StructField(f"__udm_r{i}", RESULT_TYPES[u], True) for i, u in enumerate(udms)],
    ]
    return ev._arrow_schema_with_marks(T.StructType(fields))


def _one_call(
    udm: Any, value: Any = "v", partial: bool = True, window: HoppingWindow | None = None
) -> WindowOp:
    """One aggregate call over ``window`` (HoppingWindow(6, 2)), aligned output."""
    return WindowOp(
        Source(rows=()),
        window or HoppingWindow(6, 2),
        "aggregate",
        (UdmCall("r0", udm, value),),
        InputClipping.NONE,
        OutputPolicy.ALIGN,
        False,
        INFINITY,
        partial,
        False,
    )


def _run(
    op: WindowOp, udms: list[Any], rows: list[tuple[str | None, int, int, float]], parts: int
) -> list[dict[str, Any]]:
    """Fold ``parts`` input partitions (rows dealt out round-robin), then
    merge every state in one go: the output rows."""
    fold = grid.fold_fn(op, ["key"], ["key", "v"])
    merge = grid.merge_fn(op, ["key"], _schema(udms))
    states = []
    for part in range(parts):
        mine = rows[part::parts]
        if not mine:
            continue
        states += list(fold(iter(worker_table(mine).to_batches(max_chunksize=3))))
    return [row for b in merge(iter(states)) for row in b.to_pylist()]


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.integers(-20, 60),
        st.one_of(st.just(1), st.just(1), st.integers(1, 25)),  # mostly points
        st.integers(0, 8).map(float),
    ).map(lambda t: (t[0], t[1], t[1] + t[2], t[3])),
    max_size=40,
)
WINDOWS = st.sampled_from(
    [
        HoppingWindow(10, 2),  # 5 panes a window
        HoppingWindow(12, 8),  # panes of 4: 3 a window, windows 2 panes apart
        HoppingWindow(6, 6),  # tumbling
        HoppingWindow(9, 3, offset=2),
        HoppingWindow(4, 7, offset=1),  # gaps between windows
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    rows=EVENTS,
    window=WINDOWS,
    parts=st.integers(1, 3),
    bucket=st.sampled_from([128, 2]),
    chunk=st.sampled_from([members.CHUNK, 3]),
    watermark=st.sampled_from([INFINITY, 40]),
    udms=st.sampled_from([[Mean, Bag, Handover], [Mean, Span, Handover]]),
)
def test_fold_and_merge_equal_the_reference(
    rows: list[Any],
    window: HoppingWindow,
    parts: int,
    bucket: int,
    chunk: int,
    watermark: int,
    udms: list[Any],
) -> None:
    """Panes (point events of time-insensitive UDAs), per-window states
    (intervals, or a time-sensitive UDA), several input partitions, buckets
    of 2 windows (panes serving two buckets), chunks of 3 memberships and
    a watermark: every window's merged result is the reference's, also
    for a merge that updates its first state or returns its second."""
    old = ev.BUCKET, members.CHUNK
    ev.BUCKET, members.CHUNK = bucket, chunk
    try:
        out = _run(_op(window, udms, watermark), udms, rows, parts)
    finally:
        ev.BUCKET, members.CHUNK = old
    for i, udm in enumerate(udms):
        assert by_key(out, f"__udm_r{i}") == reference(rows, window, udm, watermark=watermark)


@settings(max_examples=40, deadline=None)
@given(
    starts=st.lists(st.integers(-30, 80), unique=True, max_size=40),
    window=WINDOWS,
)
def test_panes_are_merged_in_time_order(starts: list[int], window: HoppingWindow) -> None:
    """The two-stack queue's merges keep the panes in time order: a
    concatenating state comes out sorted by start."""
    rows = [("k", s, s + 1, float(s)) for s in random.Random(1).sample(starts, len(starts))]
    out = _run(_op(window, [InOrder]), [InOrder], rows, 1)
    assert by_key(out, "__udm_r0") == reference(rows, window, InOrder)
    assert all(r["__udm_r0"] == sorted(r["__udm_r0"]) for r in out)


def test_point_end_policy_and_pane_windows() -> None:
    """Size/hop = 5: each window merges five panes; point_end stamps the
    window's last tick."""
    rows = [("a", t, t + 1, float(t % 7)) for t in range(0, 40, 3)]
    window = HoppingWindow(10, 2)
    out = _run(_op(window, [Mean], policy=OutputPolicy.POINT_END), [Mean], rows, 2)
    want = reference(rows, window, Mean, output_policy="point_end")
    assert by_key(out, "__udm_r0") == want
    # the first window holding the event at 0 is [-8, 2): stamped [1, 2)
    first = min(out, key=lambda r: r[S_COL])
    assert (first[S_COL], first[E_COL], first["__udm_r0"]) == (1, 2, 0.0)


def test_add_many_replaces_the_add_loop() -> None:
    """A UDA with add_many gets one call per (key, pane) run of a partition."""
    Bag.calls.clear()
    rows = [("a", t, t + 1, float(t)) for t in range(20)]  # panes of 2: 10 runs
    out = _run(_op(HoppingWindow(4, 2), [Bag]), [Bag], rows, 1)
    assert Bag.calls == Counter({"add_many": 10})
    assert by_key(out, "__udm_r0") == reference(rows, HoppingWindow(4, 2), Bag)


class Fragile(Mean):
    def __init__(self, stage: str = "add") -> None:
        self.stage = stage

    def add(self, state: list[float], value: float) -> list[float]:
        if self.stage == "add" and value == 13.0:
            raise ValueError("13 is unlucky")
        return super().add(state, value)

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        if self.stage == "merge" and a[1] and b[1]:
            raise ValueError("no merging")
        return super().merge(a, b)

    def result(self, state: list[float]) -> float:
        if self.stage == "result" and state[0] > 20:
            raise ValueError("too big")
        return super().result(state)


@pytest.mark.parametrize(
    ("stage", "parts", "where"),
    [
        # the pane [12, 14) holding 13 (the fold works per pane)
        ("add", 1, r"window \[12, 14\) of key 'a': ValueError: 13 is unlucky"),
        # the same pane's states from two partitions
        ("merge", 2, r"window \[0, 2\) of key 'a': ValueError: no merging"),
        # panes merged for the first window holding two
        ("merge", 1, r"window \[-2, 4\) of key 'a': ValueError: no merging"),
        ("result", 1, r"window \[2, 8\) of key 'a': ValueError: too big"),
        # tumbling windows: a state per window, nothing merged in one partition
        ("result", 1, r"window \[6, 12\) of key 'a': ValueError: too big"),
        # tumbling windows, each in both partitions: merged position by
        # position, the failure found again to name its window
        ("merge", 2, r"window \[0, 6\) of key 'a': ValueError: no merging"),
    ],
)
def test_a_failing_uda_names_window_and_key(stage: str, parts: int, where: str) -> None:
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    tumbling = "6, 12" in where or "[0, 6" in where
    op = _one_call(Fragile(stage), window=HoppingWindow(6, 6) if tumbling else HoppingWindow(6, 2))
    with pytest.raises(UdmInvocationError, match=rf"UDM 'fragile' failed on {where}"):
        _run(op, [Mean], rows, parts)


def test_a_failing_value_function_names_its_pane() -> None:
    """A value function is applied per (key, pane) run, so its failure names
    the pane of the event it failed on."""

    def inverse(row: dict[str, Any]) -> float:
        return 1.0 / (row["v"] - 13.0)

    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    op = _one_call(Mean(), inverse)
    where = r"window \[12, 14\) of key 'a': ZeroDivisionError"
    with pytest.raises(UdmInvocationError, match=rf"UDM 'mean' failed on {where}"):
        _run(op, [Mean], rows, 1)


def _evaluated(
    op: WindowOp, udms: list[Any], rows: list[tuple[str | None, int, int, float]]
) -> list[dict[str, Any]]:
    """The path without partial aggregation: every event of a key in one
    partition, each window evaluated from its events."""
    evaluate = grid._evaluate_fn(op, ["key"], ["key", "v"], _schema(udms))
    batches = worker_table(rows).to_batches(max_chunksize=5)
    return [row for b in evaluate(iter(batches)) for row in b.to_pylist()]


@settings(max_examples=60, deadline=None)
@given(
    rows=EVENTS,
    window=WINDOWS,
    udms=st.sampled_from([[Mean, middle], [middle, Bag], [Mean, Span]]),
    policy=st.sampled_from([OutputPolicy.ALIGN, OutputPolicy.POINT_END]),
)
def test_evaluation_without_partial_states_equals_the_reference(
    rows: list[Any], window: HoppingWindow, udms: list[Any], policy: OutputPolicy
) -> None:
    """Windows of time-insensitive aggregates read their values straight
    from the sorted columns (members tying on their start fall back to the
    canonical order), a time-sensitive one gets its events: all equal the
    reference, with either output policy."""
    op = _op(window, udms, policy=policy)
    out = _evaluated(op, udms, rows)
    for i, udm in enumerate(udms):
        want = reference(rows, window, udm, output_policy=policy.value)
        assert by_key(out, f"__udm_r{i}") == want


@pytest.mark.parametrize(
    ("udm", "where"),
    [
        (Fragile("add"), r"'fragile' failed on window \[8, 14\) of key 'a': ValueError: 13 is"),
        (
            Fragile("result"),
            r"'fragile' failed on window \[2, 8\) of key 'a': ValueError: too big",
        ),
    ],
)
def test_evaluation_names_the_failing_window(udm: Any, where: str) -> None:
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    op = _one_call(udm, partial=False)
    with pytest.raises(UdmInvocationError, match=where):
        _evaluated(op, [Mean], rows)


@settings(max_examples=40, deadline=None)
@given(
    starts=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(-20, 60)), max_size=40),
    window=WINDOWS,
    partial=st.booleans(),
)
def test_a_point_source_without_ends_equals_the_reference(
    starts: list[tuple[str, int]], window: HoppingWindow, partial: bool
) -> None:
    """For a point source Spark does not ship the ends (a quarter of the
    data); the worker derives [s, s + 1) and must give the same windows."""
    rows = [(k, s, s + 1, float(s % 7)) for k, s in starts]
    udms: list[Any] = [Mean]
    op = _op(window, udms, INFINITY)
    table = worker_table(rows).drop_columns([E_COL])
    if partial:
        fold = grid.fold_fn(op, ["key"], ["key", "v"])
        merge = grid.merge_fn(op, ["key"], _schema(udms))
        states = list(fold(iter(table.to_batches(max_chunksize=5)))) if rows else []
        out = [row for b in merge(iter(states)) for row in b.to_pylist()]
    else:
        evaluate = grid._evaluate_fn(op, ["key"], ["key", "v"], _schema(udms))
        out = [row for b in evaluate(iter(table.to_batches())) for row in b.to_pylist()]
    assert by_key(out, "__udm_r0") == reference(rows, window, Mean)


POINTS = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.integers(-10, 30), st.integers(0, 8)),
    max_size=40,
)


def _bucketed(rows: list[Any], window: HoppingWindow) -> pa.Table:
    """Rows of a stream without keys as Spark sends them to the grid: one
    row per bucket of windows holding the event."""
    out = []
    for _, s, e, v in rows:
        lo, hi = window.index_range(s, e)
        for b in range(lo // ev.BUCKET, hi // ev.BUCKET + 1):
            out.append({S_COL: s, E_COL: e, "v": v, grid.BUCKET_COL: b})
    schema = pa.schema(
        [
            (S_COL, pa.int64()),
            (E_COL, pa.int64()),
            ("v", pa.float64()),
            (grid.BUCKET_COL, pa.int64()),
        ]
    )
    return pa.Table.from_pylist(out, schema=schema)


@settings(max_examples=80, deadline=None)
@given(
    points=POINTS,
    window=WINDOWS,
    udms=st.sampled_from([[Mean, middle], [middle, Bag], [InOrder, middle], [stamped, Span]]),
    policy=st.sampled_from([OutputPolicy.ALIGN, OutputPolicy.POINT_END]),
    chunk=st.sampled_from([members.CHUNK, 4]),
    bucket=st.sampled_from([128, 2]),
    keyed=st.booleans(),
    watermark=st.sampled_from([INFINITY, 12]),
)
@example(  # payloads of events starting together, out of order
    points=[("a", 0, 3), ("a", 0, 1), ("a", 3, 2)],
    window=HoppingWindow(4, 2),
    udms=[InOrder, middle],
    policy=OutputPolicy.ALIGN,
    chunk=members.CHUNK,
    bucket=128,
    keyed=True,
    watermark=INFINITY,
)
def test_point_windows_are_slices_of_the_sorted_events(
    points: list[tuple[str | None, int, int]],
    window: HoppingWindow,
    udms: list[Any],
    policy: OutputPolicy,
    chunk: int,
    bucket: int,
    keyed: bool,
    watermark: int,
) -> None:
    """Aggregates over point events: each window's values (or point events,
    for a time-sensitive UDA) are one slice of its key's (or bucket's)
    events sorted by start (events starting together by payload: a
    concatenation shows the order), in chunks of a few events, never
    memberships, and only windows ending by the watermark; all equal the
    reference."""
    rows = [(k if keyed else None, s, s + 1, float(v)) for k, s, v in points]
    calls: list[str] = []
    old = ev.BUCKET, members.CHUNK, grid.evaluate_runs
    ev.BUCKET, members.CHUNK = bucket, chunk

    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append("memberships")
        return old[2](*args, **kwargs)

    grid.evaluate_runs = spied
    try:
        op = _op(window, udms, watermark, policy=policy)
        if keyed:
            table = worker_table(rows)
            evaluate = grid._evaluate_fn(op, ["key"], ["key", "v"], _schema(udms))
        else:
            table = _bucketed(rows, window)
            evaluate = grid._evaluate_fn(op, [], ["v"], _unkeyed_schema(udms))
        out = [r for b in evaluate(iter(table.to_batches(max_chunksize=7))) for r in b.to_pylist()]
    finally:
        ev.BUCKET, members.CHUNK, grid.evaluate_runs = old
    out = [{"key": None, **r} for r in out]
    for i, udm in enumerate(udms):
        want = reference(rows, window, udm, output_policy=policy.value, watermark=watermark)
        assert by_key(out, f"__udm_r{i}") == want
    assert calls == []


def _unkeyed_schema(udms: list[Any]) -> Any:
    fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        *[T.StructField(f"__udm_r{i}", RESULT_TYPES[u], True) for i, u in enumerate(udms)],
    ]
    return ev._arrow_schema_with_marks(T.StructType(fields))


@pytest.mark.parametrize(
    ("udm", "value", "where"),
    [
        (Fragile("add"), "v", r"'fragile' failed on window \[8, 14\) of key 'a': ValueError"),
        (Fragile("result"), "v", r"'fragile' failed on window \[2, 8\) of key 'a': ValueError"),
        (Mean(), lambda r: 1 / (r["v"] - 13), r"'mean' failed on window \[8, 14\) of key 'a'"),
        (middle, lambda r: 1 / (r["v"] - 13), r"'middle' failed on window \[8, 14\) of key 'a'"),
    ],
)
def test_a_failing_slice_names_its_window(udm: Any, value: Any, where: str) -> None:
    """On the sliced path a UDA failure names its window; a value function,
    applied once per event, names the first window holding the event."""
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    op = _one_call(udm, value, partial=False)
    with pytest.raises(UdmInvocationError, match=where):
        _evaluated(op, [Mean], rows)


@operator
def above_first(values: Sequence[float]) -> list[float]:
    """Time-insensitive and order-sensitive: the payloads above the first."""
    return [v for v in values[1:] if v > values[0]]


@settings(max_examples=80, deadline=None)
@given(
    points=POINTS,
    window=WINDOWS,
    udm_policy=st.sampled_from(
        [(Rises, p) for p in ("clip", "keep", "align", "point_end")]
        + [(above_first, p) for p in ("align", "point_end")]
    ),
    chunk=st.sampled_from([members.CHUNK, 4]),
    keyed=st.booleans(),
)
def test_operators_over_point_windows_are_slices(
    points: list[tuple[str | None, int, int]],
    window: HoppingWindow,
    udm_policy: tuple[Any, str],
    chunk: int,
    keyed: bool,
) -> None:
    """An operator over point events reads each window as a slice of the
    events sorted by start (ties by payload) and stamps its outputs by its
    policy, never through memberships: the reference's output."""
    udm, policy = udm_policy
    rows = [(k if keyed else None, s, s + 1, float(v)) for k, s, v in points]
    op = WindowOp(
        Source(rows=()),
        window,
        "operator",
        (UdmCall("r0", udm(), "v"),),
        InputClipping.NONE,
        OutputPolicy(policy),
        False,
        INFINITY,
        False,
        False,
    )
    calls: list[str] = []
    old = members.CHUNK, grid.evaluate_runs

    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append("memberships")
        return old[1](*args, **kwargs)

    members.CHUNK, grid.evaluate_runs = chunk, spied
    try:
        if keyed:
            evaluate = grid._evaluate_fn(op, ["key"], ["key", "v"], _schema([Mean]))
            table = worker_table(rows)
        else:
            evaluate = grid._evaluate_fn(op, [], ["v"], _unkeyed_schema([Mean]))
            table = _bucketed(rows, window)
        out = [r for b in evaluate(iter(table.to_batches(max_chunksize=7))) for r in b.to_pylist()]
    finally:
        members.CHUNK, grid.evaluate_runs = old
    out = [{"key": None, **r} for r in out]
    assert by_key(out, "__udm_r0") == reference(rows, window, udm, output_policy=policy)
    assert calls == []


class Watched(Mean):
    """A mean that records whether the cyclic garbage collector ran
    enabled during each of its calls."""

    seen: ClassVar[set[bool]] = set()

    def add(self, state: list[float], value: float) -> list[float]:
        Watched.seen.add(gc.isenabled())
        return super().add(state, value)

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        Watched.seen.add(gc.isenabled())
        return super().merge(a, b)

    def result(self, state: list[float]) -> float:
        Watched.seen.add(gc.isenabled())
        return super().result(state)


@pytest.mark.parametrize("partial", [True, False])
def test_worker_functions_pause_the_collector_while_they_run(partial: bool) -> None:
    """The fold, the merge and the evaluation without partial states run
    the UDA with the cyclic collector paused (many short-lived objects),
    and leave it enabled afterwards; the results stay the reference's."""
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    window = HoppingWindow(6, 6)
    Watched.seen.clear()
    assert gc.isenabled()
    if partial:
        out = _run(_one_call(Watched(), window=window), [Mean], rows, 2)
    else:
        out = _evaluated(_one_call(Watched(), window=window, partial=False), [Mean], rows)
    assert Watched.seen == {False}
    assert gc.isenabled()
    assert by_key(out, "__udm_r0") == reference(rows, window, Mean)


def test_events_in_one_window_each_are_runs_of_equal_window() -> None:
    """Over point events of tumbling windows the slices are the runs of
    equal (key, window) of the events sorted by (key, start), worked out
    by hand here; an event in no window (``k_min > k_max``) is left out."""
    import numpy as np

    window = HoppingWindow(6, 6)
    keys = np.array([0, 0, 0, 1, 0, 1])  # a, a, a, b, a, b
    s = np.array([0, 5, 7, 1, 13, 20])
    k_min, k_max = s // 6, s // 6
    k_min[5] = 4  # the last event is in no window (past a watermark)
    got = grid._slices(window, [keys], s, s + 1, k_min, k_max)
    assert got is not None
    assert got.order.tolist() == [0, 1, 2, 4, 3]  # a at 0, 5, 7, 13; b at 1
    assert got.firsts.tolist() == [0, 2, 3, 4]
    assert got.lasts.tolist() == [2, 3, 4, 5]
    assert got.win_row.tolist() == [0, 2, 4, 3]
    assert got.win_s.tolist() == [0, 6, 12, 0]
    assert got.win_e.tolist() == [6, 12, 18, 6]
    assert got.tied.tolist() == [False] * 5
