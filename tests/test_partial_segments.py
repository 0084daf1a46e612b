"""The partial fold from one sort (:mod:`udm.host.spark.partialfold`),
in-process (no Spark session) and once on Spark: partial states folded per
input partition by one ``add_segments`` call, or by ``add_many`` (``add``)
per state over slices of a Python list, merged after the shuffle, must
give the reference evaluator's CHT; where an event is in several states
(intervals across windows or panes) the per-event fold runs instead, and
a value column with nulls goes to ``add_many``; a failing or wrong-sized
``add_segments``, a failing ``add_many``, ``add`` or value function names
its window and key; the planner picks partial states for such UDAs from
dense groups alone.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from udm.host import HoppingWindow, InputClipping, OutputPolicy, UdmInvocationError
from udm.host.time import INFINITY
from udm.sdk import IncrementalAggregate

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402
from worker_support import MergeableSumCount as SumCount  # noqa: E402
from worker_support import by_key, reference, worker_table  # noqa: E402

from udm.host.plan import E_COL, S_COL, Source, UdmCall, WindowOp  # noqa: E402
from udm.host.spark import grid, panes, partialfold  # noqa: E402
from udm.host.spark.arrowio import arrow_schema_with_marks  # noqa: E402
from udm.host.strategy import (  # noqa: E402
    KeySample,
    choose_partial,
    folds_by_segments,
    folds_by_sort,
)


class Extremes(IncrementalAggregate):
    """A second vectorized UDA with list states: (min, max)."""

    def initial_state(self) -> list[float]:
        return []

    def add(self, state: list[float], value: float) -> list[float]:
        return [min(state[0], value), max(state[1], value)] if state else [value, value]

    def add_segments(self, values: Any, bounds: Any) -> list[list[float]]:
        lo = np.minimum.reduceat(values, bounds[:-1]).tolist()
        hi = np.maximum.reduceat(values, bounds[:-1]).tolist()
        return [[a, b] for a, b in zip(lo, hi, strict=True)]

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        return [min(a[0], b[0]), max(a[1], b[1])] if a and b else list(a or b)

    def result(self, state: list[float]) -> float:
        return state[1] - state[0]


class Short(SumCount):
    """Returns one state too few."""

    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        return super().add_segments(values, bounds)[:-1]


class Failing(SumCount):
    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        raise ValueError("no segments today")


class ManyMean(IncrementalAggregate):
    """A mergeable mean without a vectorized form: ``add_many`` per state."""

    calls: ClassVar[Counter[str]] = Counter()

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        ManyMean.calls["add"] += 1
        return (state[0] + value, state[1] + 1)

    def add_many(self, state: tuple[float, int], values: Sequence[float]) -> tuple[float, int]:
        ManyMean.calls["add_many"] += 1
        if any(v == 13.0 for v in values):
            raise ValueError("13 is unlucky")
        return (state[0] + sum(values), state[1] + len(values))

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class AddMax(IncrementalAggregate):
    """A mergeable maximum by ``add`` alone; fails on 13."""

    def initial_state(self) -> float | None:
        return None

    def add(self, state: float | None, value: float) -> float:
        if value == 13.0:
            raise ValueError("13 again")
        return value if state is None else max(state, value)

    def merge(self, a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else max(a, b)

    def result(self, state: float | None) -> float | None:
        return state


class MergeFails(SumCount):
    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        raise ValueError("cannot merge")


def _op(
    udms: list[Any], window: HoppingWindow, watermark: int = INFINITY, value: Any = "v"
) -> WindowOp:
    calls = tuple(UdmCall(f"r{i}", u(), value) for i, u in enumerate(udms))
    return WindowOp(
        Source(rows=()),
        window,
        "aggregate",
        calls,
        InputClipping.NONE,
        OutputPolicy.ALIGN,
        False,
        watermark,
        True,
        False,
    )


def _schema(n: int) -> pa.Schema:
    fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        T.StructField("key", T.StringType(), True),
        *[T.StructField(f"__udm_r{i}", T.DoubleType(), True) for i in range(n)],
    ]
    return arrow_schema_with_marks(T.StructType(fields))


def _run(op: WindowOp, rows: list[Any], parts: int, table: Any = None) -> list[dict[str, Any]]:
    """Fold ``parts`` input partitions (rows dealt out round-robin, batches
    of 3 rows), then merge every state: the output rows."""
    fold = grid.fold_fn(op, ["key"], ["key", "v"])
    merge = grid.merge_fn(op, ["key"], _schema(len(op.calls)))
    whole = worker_table(rows) if table is None else table
    states = []
    for part in range(parts):
        mine = whole.take(pa.array(range(part, whole.num_rows, parts), pa.int64()))
        if mine.num_rows:
            states += list(fold(iter(mine.to_batches(max_chunksize=3))))
    return [row for b in merge(iter(states)) for row in b.to_pylist()]


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.integers(-20, 60),
        st.one_of(st.just(1), st.just(1), st.integers(1, 25)),  # mostly points
        st.integers(-8, 8).map(float),  # integral: sums exact in any order
    ).map(lambda t: (t[0], t[1], t[1] + t[2], t[3])),
    max_size=40,
)
WINDOWS = st.sampled_from(
    [
        HoppingWindow(6, 6),  # tumbling
        HoppingWindow(4, 7, offset=1),  # gaps between windows
        HoppingWindow(10, 2),  # 5 panes a window
        HoppingWindow(12, 8),  # panes of 4
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    rows=EVENTS,
    window=WINDOWS,
    parts=st.integers(1, 3),
    watermark=st.sampled_from([INFINITY, 30]),
    runs=st.sampled_from([partialfold.RUNS, 2]),
    block=st.sampled_from([panes.FOLD_BLOCK, 1, 4]),
)
@example(  # two partitions' states of one window, a state per chunk of 2 runs
    rows=[("a", 0, 1, 1.0), ("a", 1, 2, 2.0), ("b", 2, 3, 3.0), ("a", 7, 8, 4.0)],
    window=HoppingWindow(6, 6),
    parts=2,
    watermark=INFINITY,
    runs=2,
    block=4,
)
@example(  # a partition folded in blocks of one batch (3 rows): 4 blocks
    rows=[("a", t, t + 1, float(t)) for t in range(10)] + [("b", 3, 9, 1.0)],
    window=HoppingWindow(6, 6),
    parts=1,
    watermark=INFINITY,
    runs=2,
    block=1,
)
def test_segment_fold_equals_the_reference(
    rows: list[Any], window: HoppingWindow, parts: int, watermark: int, runs: int, block: int
) -> None:
    """Points and intervals, tumbling, gapped and hopping windows, a
    watermark, chunks of runs, a partition folded in blocks of batches
    (each block's states merged like another partition's): the
    reference's CHT per key. Where every event is in one state (a point,
    or an interval inside one tumbling window) ``add_segments`` folds it,
    never ``add_many``."""
    udms: list[Any] = [SumCount, Extremes]
    op = _op(udms, window, watermark)
    SumCount.calls.clear()
    old, partialfold.RUNS = partialfold.RUNS, runs
    old_block, panes.FOLD_BLOCK = panes.FOLD_BLOCK, block
    try:
        out = _run(op, rows, parts)
    finally:
        partialfold.RUNS = old
        panes.FOLD_BLOCK = old_block
    for i, udm in enumerate(udms):
        assert by_key(out, f"__udm_r{i}") == reference(rows, window, udm, watermark=watermark)
    k_lo, k_hi = window.index_range(
        np.array([s for _, s, _, _ in rows], np.int64),
        np.array([min(e, watermark) for _, _, e, _ in rows], np.int64),
    )
    if window.size > window.hop:
        one_state = all(e == s + 1 for _, s, e, _ in rows)
    else:
        one_state = bool(((k_lo == k_hi) | (k_lo > k_hi)).all()) if rows else True
    if one_state:
        assert SumCount.calls["add_many"] == 0
        assert (SumCount.calls["add_segments"] > 0) == bool(out)


def test_blocks_group_batches_by_events_without_splitting_one() -> None:
    """A fold block ends at the first batch reaching the bound; the last
    holds the rest; every batch is in exactly one block, in order."""
    sizes = [3, 3, 1, 5, 2, 2]
    batches = [pa.record_batch({"n": list(range(k))}) for k in sizes]
    got = [[b.num_rows for b in block] for block in panes.blocks(iter(batches), 4)]
    assert got == [[3, 3], [1, 5], [2, 2]]
    assert [[b.num_rows for b in g] for g in panes.blocks(iter(batches), 100)] == [sizes]
    assert [[b.num_rows for b in g] for g in panes.blocks(iter(batches[:3]), 1)] == [[3], [3], [1]]
    assert list(panes.blocks(iter([]), 4)) == []


def test_segment_fold_is_exact_and_vectorized() -> None:
    """Hand-computed: tumbling windows of 10, two keys, two partitions;
    one ``add_segments`` call per partition, the states merged."""
    rows = [
        ("a", 1, 2, 4.0),
        ("a", 3, 4, 5.0),
        ("b", 0, 1, 0.5),
        ("a", 1, 2, 2.0),
        ("a", 12, 13, 1.0),
        ("b", 9, 10, 0.25),
    ]
    SumCount.calls.clear()
    out = _run(_op([SumCount], HoppingWindow(10, 10)), rows, 2)
    got = sorted((r["key"], r[S_COL], r[E_COL], r["__udm_r0"]) for r in out)
    assert got == [("a", 0, 10, 11.0 / 3), ("a", 10, 20, 1.0), ("b", 0, 10, 0.375)]
    assert SumCount.calls == Counter({"add_segments": 2})


def test_a_column_with_nulls_folds_by_add_many() -> None:
    """``add_segments`` reads numbers only: a column with a null goes
    through ``add_many`` (None added as Python sees it)."""
    table = pa.table(
        {
            "key": pa.array(["a", "a", "b"], pa.string()),
            S_COL: pa.array([0, 1, 2], pa.int64()),
            E_COL: pa.array([1, 2, 3], pa.int64()),
            "v": pa.array([1.0, 2.0, None], pa.float64()),
        }
    )
    op = _op([SumCount], HoppingWindow(5, 5))
    assert partialfold.fold_inputs(op, table) == [None]
    assert partialfold.fold_inputs(op, table.slice(0, 2))[0] is not None
    SumCount.calls.clear()
    with pytest.raises(UdmInvocationError, match=r"window \[0, 5\) of key 'b'"):
        _run(op, [], 1, table)
    assert SumCount.calls["add_segments"] == 0


def _sorted_runs(op: WindowOp, rows: list[Any], parts: int) -> tuple[list[Any], int]:
    """:func:`_run`, and how many partitions the sorted fold folded."""
    folded = 0
    real = panes.sorted_fold

    def spy(*args: Any, **kwargs: Any) -> Any:
        nonlocal folded
        got = real(*args, **kwargs)
        folded += got is not None
        return got

    panes.sorted_fold = spy  # type: ignore[assignment]
    try:
        return _run(op, rows, parts), folded
    finally:
        panes.sorted_fold = real  # type: ignore[assignment]


@settings(max_examples=120, deadline=None)
@given(
    rows=EVENTS,
    window=WINDOWS,
    parts=st.integers(1, 3),
    watermark=st.sampled_from([INFINITY, 30]),
    sizes=st.sampled_from([(partialfold.RUNS, partialfold.EVENTS), (2, 3), (50, 1)]),
    in_time_order=st.booleans(),
)
def test_add_many_and_add_fold_from_one_sort(
    rows: list[Any],
    window: HoppingWindow,
    parts: int,
    watermark: int,
    sizes: tuple[int, int],
    in_time_order: bool,
) -> None:
    """UDAs without ``add_segments`` (``add_many``; ``add`` alone; beside
    a vectorized one) fold from the same sort where each event is in one
    state, in chunks bounded by runs and by events, from partitions in
    time order (sorted by (key, index) by radix passes) or not: the
    reference's CHT per key, and one ``add_many`` call per state."""
    rows = [r for r in rows if r[3] != 13.0]
    if in_time_order:
        rows.sort(key=lambda r: r[1])
    udms: list[Any] = [ManyMean, AddMax, SumCount]
    op = _op(udms, window, watermark)
    ManyMean.calls.clear()
    old = partialfold.RUNS, partialfold.EVENTS
    partialfold.RUNS, partialfold.EVENTS = sizes
    try:
        out, folded = _sorted_runs(op, rows, parts)
    finally:
        partialfold.RUNS, partialfold.EVENTS = old
    assert ManyMean.calls["add"] == 0
    for i, udm in enumerate(udms):
        assert by_key(out, f"__udm_r{i}") == reference(rows, window, udm, watermark=watermark)
    k_lo, k_hi = window.index_range(
        np.array([s for _, s, _, _ in rows], np.int64),
        np.array([min(e, watermark) for _, _, e, _ in rows], np.int64),
    )
    if window.size > window.hop:
        one_state = all(e == s + 1 for _, s, e, _ in rows)
    else:
        one_state = bool(((k_lo == k_hi) | (k_lo > k_hi)).all()) if rows else True
    if one_state:  # every partition with events folded from the sort
        assert folded == min(parts, len(rows))


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(st.integers(1, 5_000), min_size=1, max_size=3),
    n=st.integers(1, 300),
    seed=st.integers(0, 2**16),
)
def test_group_order_is_a_stable_sort(spans: list[int], n: int, seed: int) -> None:
    """One or two radix passes (packed ranges up to 2**16, up to 2**32),
    or None beyond: the order ``np.lexsort`` gives (stable, the first
    column primary)."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(-5, span - 5, n) for span in spans]
    got = partialfold.group_order(cols)
    room = int(np.prod([int(c.max()) - int(c.min()) + 1 for c in cols]))
    if room > 2**32:
        assert got is None
    else:
        assert got is not None
        assert got.tolist() == np.lexsort(cols[::-1]).tolist()


def test_a_value_function_folds_from_one_sort() -> None:
    """Hand-computed: a value function over whole payloads, tumbling
    windows of 10, one ``add_many`` call per (key, window) state."""
    rows = [("a", 1, 2, 4.0), ("a", 3, 4, 5.0), ("b", 0, 1, 0.5), ("a", 12, 13, 1.0)]
    ManyMean.calls.clear()
    op = _op([ManyMean], HoppingWindow(10, 10), value=lambda p: p["v"] * 2)
    out, folded = _sorted_runs(op, rows, 1)
    got = sorted((r["key"], r[S_COL], r[E_COL], r["__udm_r0"]) for r in out)
    assert got == [("a", 0, 10, 9.0), ("a", 10, 20, 2.0), ("b", 0, 10, 1.0)]
    assert (folded, ManyMean.calls) == (1, Counter({"add_many": 3}))


@pytest.mark.parametrize(
    ("udm", "window", "value", "where"),
    [
        (ManyMean, HoppingWindow(6, 6), "v", r"'many_mean' failed on window \[12, 18\) of key 'b'"),
        (ManyMean, HoppingWindow(6, 2), "v", r"'many_mean' failed on window \[12, 14\) of key 'b'"),
        (AddMax, HoppingWindow(6, 6), "v", r"'add_max' failed on window \[12, 18\) of key 'b'"),
        (
            ManyMean,
            HoppingWindow(6, 6),
            lambda p: 1.0 / (p["v"] - 13.0),
            r"'many_mean' failed on window \[12, 18\) of key 'b': ZeroDivisionError",
        ),
    ],
)
def test_a_failing_add_many_names_its_window_and_key(
    udm: Any, window: HoppingWindow, value: Any, where: str
) -> None:
    """``add_many``, ``add`` or the value function failing on the value
    13 (at time 13, key b) names the state's window, or its pane under
    hopping windows, and key."""
    rows = [("a", t, t + 1, float(t)) for t in range(13)]
    rows += [("b", t, t + 1, float(t)) for t in range(10, 16)]
    with pytest.raises(UdmInvocationError, match=where):
        _run(_op([udm], window, value=value), rows, 2)


@pytest.mark.parametrize(
    ("udm", "where"),
    [
        (Failing, r"'failing' failed on window \[0, 6\) of key 'a': ValueError: no segments"),
        (
            Short,
            r"'short' failed on window \[0, 6\) of key 'a': ValueError: add_segments "
            r"returned 2 states for 3 segments",
        ),
        (
            Short,  # panes of 2 under hopping windows: the pane is named
            r"'short' failed on window \[0, 2\) of key 'a': ValueError: add_segments "
            r"returned 7 states for 8 segments",
        ),
    ],
)
def test_a_wrong_add_segments_names_its_window(udm: Any, where: str) -> None:
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    window = HoppingWindow(6, 2) if "7 states" in where else HoppingWindow(6, 6)
    with pytest.raises(UdmInvocationError, match=where):
        _run(_op([udm], window), rows, 1)


def test_a_failing_merge_names_its_window() -> None:
    """Two partitions' states of window [6, 12) of key a are merged after
    the shuffle (tumbling windows: states by window index)."""
    rows = [("a", 1, 2, 1.0), ("b", 8, 9, 3.0), ("a", 7, 8, 2.0), ("a", 9, 10, 4.0)]
    with pytest.raises(
        UdmInvocationError, match=r"window \[6, 12\) of key 'a': ValueError: cannot"
    ):
        _run(_op([MergeFails], HoppingWindow(6, 6)), rows, 2)


def test_the_planner_picks_partial_states_from_dense_groups_alone() -> None:
    """Many cold keys: over tumbling windows UDAs that fold from one sort
    (``add_segments``, ``add_many`` or ``add``) take partial states when
    the groups are dense enough; over panes, and for a time-sensitive UDA,
    the heavy-key rule stands and they go sliced."""
    from test_query import Mean, Span

    many = KeySample(rows=10_000, keys=1_000, hottest=0.002, groups=5_800, heavy=0.0)
    sparse = KeySample(rows=10_000, keys=1_000, hottest=0.002, groups=9_000, heavy=0.0)
    tumbling = HoppingWindow(60, 60)
    for udms in ([SumCount], [ManyMean], [Mean], [ManyMean, SumCount]):
        vector = dataclasses.replace(_op(udms, tumbling), partial=None)
        assert folds_by_sort(vector)
        assert folds_by_segments(vector) == (udms == [SumCount])
        choice = choose_partial(vector, many)
        assert choice.partial is True
        assert choice.reason.endswith(
            "0% of events in keys of >= 0.5% each (any share: every UDA folds from one "
            "sort, windows do not overlap), 1.7 events per (key, window) group "
            "(>= 1.5): partial states"
        )
        assert choose_partial(vector, sparse).partial is False
        # under panes the heavy-key rule stands (cold keys' pane states are
        # merged into every window holding them)
        panes = dataclasses.replace(_op(udms, HoppingWindow(60, 6)), partial=None)
        assert folds_by_sort(panes)
        assert choose_partial(panes, many).partial is False
    timed = dataclasses.replace(_op([Span], tumbling), partial=None)
    assert not folds_by_sort(timed)
    assert choose_partial(timed, many).partial is False


@pytest.mark.spark
def test_a_spark_query_folds_partial_states_by_segments(spark: Any) -> None:
    """End to end: tumbling windows with partial states say so in
    ``explain`` and give the reference's (hand-checked) results."""
    from udm.host import Cht, IntervalEvent, TumblingWindow, evaluate_by_key
    from udm.host.query import Stream

    rows = [
        ("a", 3, 5.0),
        ("a", 1, 4.0),
        ("a", 1, 2.0),
        ("a", 12, 1.0),
        ("b", 0, 0.5),
        ("b", 9, 0.25),
        ("b", 25, 8.0),
    ]
    df = spark.createDataFrame(rows, "k string, ts long, v double").repartition(2)
    query = (
        Stream.from_dataframe(df, start="ts", key="k")
        .window(TumblingWindow(10))
        .aggregate(SumCount, value="v", partial=True)
    )
    assert "by one add_segments call per UDA" in query.explain()
    got = query.to_cht()
    assert isinstance(got, dict)
    table = sorted((k, e.start, e.end, e.payload) for k, cht in got.items() for e in cht)
    assert table == [
        ("a", 0, 10, 11.0 / 3),
        ("a", 10, 20, 1.0),
        ("b", 0, 10, 0.375),
        ("b", 20, 30, 8.0),
    ]
    events = Cht(IntervalEvent(s, s + 1, {"k": k, "v": v}) for k, s, v in rows)
    want = evaluate_by_key(events, "k", TumblingWindow(10), SumCount, value="v")
    assert got == {k: v for k, v in want.items() if len(v)}


@pytest.mark.spark
def test_partial_states_fold_one_task_per_core_in_blocks(spark: Any) -> None:
    """More input partitions (5) than cores (2): the fold joins them into
    one task per core (a coalesce, no shuffle) and reads blocks of at most
    ``FOLD_BLOCK`` events (here 2), and as many merge tasks as cores; the
    results are the reference's (hand-checked sums: integral values)."""
    from udm.host import TumblingWindow
    from udm.host.query import Stream
    from udm.host.spark.session import task_slots

    rows = [("a", t, float(t)) for t in range(0, 30, 2)] + [("b", t, 1.0) for t in range(5, 25, 5)]
    df = spark.createDataFrame(rows, "k string, ts long, v double").repartition(5)
    old, panes.FOLD_BLOCK = panes.FOLD_BLOCK, 2
    try:
        out = (
            Stream.from_dataframe(df, start="ts", key="k")
            .window(TumblingWindow(10))
            .aggregate(SumCount, value="v", partial=True)
            .to_dataframe()
        )
    finally:
        panes.FOLD_BLOCK = old
    slots = task_slots(spark)
    assert slots == spark.sparkContext.defaultParallelism == 2
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert "Repartition 2, false" in plan  # the fold's coalesce to one task per core
    assert out.rdd.getNumPartitions() == 2  # the merge's tasks
    got = sorted((r[2], r[0], r[1], r[3]) for r in out.collect())
    # a: 0+2+4+6+8 = 20 over 5, 10..18: 70 over 5, 20..28: 120 over 5; b: 1.0 each
    assert got == [
        ("a", 0, 10, 4.0),
        ("a", 10, 20, 14.0),
        ("a", 20, 30, 24.0),
        ("b", 0, 10, 1.0),
        ("b", 10, 20, 1.0),
        ("b", 20, 30, 1.0),
    ]
