"""Snapshot and count windows assigned and evaluated in the worker,
in-process (no Spark session): ``endpoints.memberships`` pairs events with
exactly the windows and members the reference's window specifications
give, and the worker function Spark runs per partition
(``endpoints._evaluate_fn``) gives the reference evaluator's CHT for every
key, UDM flavour, clipping and output policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host import (
    CountByEndWindow,
    CountByStartWindow,
    InputClipping,
    IntervalEvent,
    OutputPolicy,
    SnapshotWindow,
    UdmInvocationError,
    WindowDescriptor,
)
from udm.host.policies import default_output_policy
from udm.host.time import INFINITY
from udm.sdk import IncrementalAggregate, aggregate

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402
from worker_support import Rises, by_key, reference, worker_table  # noqa: E402

from udm.host.plan import E_COL, S_COL, Source, UdmCall, WindowOp  # noqa: E402
from udm.host.spark import endpoints, members  # noqa: E402
from udm.host.spark import evaluate as ev  # noqa: E402

WINDOWS = [
    SnapshotWindow(),
    CountByStartWindow(1),
    CountByStartWindow(3),
    CountByEndWindow(1),
    CountByEndWindow(2),
]

ROWS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.integers(-10, 30),
        st.one_of(st.just(1), st.integers(1, 12), st.just(None)),  # None: never ends
        st.integers(0, 6).map(float),
    ).map(lambda t: (t[0], t[1], INFINITY if t[2] is None else t[1] + t[2], t[3])),
    max_size=30,
)


class Mean(IncrementalAggregate):
    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


@aggregate
def in_order(values: Sequence[float]) -> list[float]:
    """Order-sensitive: the payloads as the UDA receives them."""
    return list(values)


@aggregate(time_sensitive=True)
def lifetimes(events: Sequence[IntervalEvent[float]], window: WindowDescriptor) -> list[str]:
    """Time- and order-sensitive: the (clipped) lifetimes and payloads."""
    return [f"{e.start} {e.end} {e.payload}" for e in events]


TYPES = {
    Mean: T.DoubleType(),
    in_order: T.ArrayType(T.DoubleType()),
    lifetimes: T.ArrayType(T.StringType()),
    Rises: T.DoubleType(),
}


def _run(
    window: Any,
    udms: list[Any],
    rows: list[Any],
    watermark: int,
    clipping: InputClipping = InputClipping.NONE,
    policy: OutputPolicy | None = None,
) -> list[dict[str, Any]]:
    kind = "operator" if udms == [Rises] else "aggregate"
    calls = tuple(UdmCall(f"r{i}", u(), "v") for i, u in enumerate(udms))
    policy = policy or default_output_policy(window, calls[0].udm)
    op = WindowOp(
        Source(rows=()), window, kind, calls, clipping, policy, False, watermark, False, False
    )
    fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        T.StructField("key", T.StringType(), True),
        *[T.StructField(f"__udm_r{i}", TYPES[u], True) for i, u in enumerate(udms)],
    ]
    schema = ev._arrow_schema_with_marks(T.StructType(fields))
    evaluate = endpoints._evaluate_fn(op, ["key"], ["key", "v"], schema)
    batches = worker_table(rows).to_batches(max_chunksize=4)
    return [row for b in evaluate(iter(batches)) for row in b.to_pylist()]


@settings(max_examples=150, deadline=None)
@given(
    rows=ROWS,
    window=st.sampled_from(WINDOWS),
    watermark=st.sampled_from([INFINITY, 15]),
    limit=st.sampled_from([1, 5, endpoints.BLOCK]),
)
def test_memberships_are_the_reference_windows_and_members(
    rows: list[Any], window: Any, watermark: int, limit: int
) -> None:
    """Per key (dense group numbers, nulls a group of their own): every
    window ending by the watermark that has members, with exactly its
    members, and nothing else; blocks of about ``limit`` pairs hold whole
    windows."""
    groups = {k: i for i, k in enumerate(dict.fromkeys(r[0] for r in rows))}
    g = np.array([groups[r[0]] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = np.array([r[2] for r in rows], dtype=np.int64)
    lo, hi, win_s, win_e = endpoints.window_ranges(window, g, s, e)
    got: dict[Any, dict[WindowDescriptor, list[int]]] = {}
    seen: set[int] = set()
    for pairs, wid in endpoints.memberships(lo, hi, len(win_s), limit):
        block = set(wid.tolist())
        assert not block & seen  # a window lies in one block
        seen |= block
        for r, j in zip(pairs.tolist(), wid.tolist(), strict=True):
            w = WindowDescriptor(int(win_s[j]), int(win_e[j]))
            if w.end <= watermark:
                got.setdefault(rows[r][0], {}).setdefault(w, []).append(r)
    want: dict[Any, dict[WindowDescriptor, list[int]]] = {}
    for key in groups:
        mine = [i for i, row in enumerate(rows) if row[0] == key]
        events = [IntervalEvent(rows[i][1], rows[i][2], i) for i in mine]
        for w in window.windows(events, watermark):
            members = [ev_.payload for ev_ in window.members(w, events)]
            if members:
                want.setdefault(key, {})[w] = members
    assert {k: {w: sorted(m) for w, m in ws.items()} for k, ws in got.items()} == want


@settings(max_examples=80, deadline=None)
@given(
    rows=ROWS,
    window=st.sampled_from(WINDOWS),
    watermark=st.sampled_from([INFINITY, 15]),
    clipping=st.sampled_from(list(InputClipping)),
    udms=st.sampled_from([[Mean, in_order], [in_order, lifetimes], [Rises]]),
)
def test_worker_equals_the_reference(
    rows: list[Any], window: Any, watermark: int, clipping: InputClipping, udms: list[Any]
) -> None:
    """Incremental, order-sensitive and time-sensitive aggregates, and a
    time-sensitive operator: ties, clipping, never-ending events and
    watermarks as in the reference (with each UDM's default policy), in
    blocks of a few (event, window) pairs."""
    endpoints.BLOCK, block = 3, endpoints.BLOCK
    try:
        _check_worker(rows, window, watermark, clipping, udms)
    finally:
        endpoints.BLOCK = block


def _check_worker(
    rows: list[Any], window: Any, watermark: int, clipping: InputClipping, udms: list[Any]
) -> None:
    try:
        want = [
            reference(rows, window, udm, watermark=watermark, input_clipping=clipping.value)
            for udm in udms
        ]
    except UdmInvocationError as exc:
        # point_end on a window that never ends, an operator output the
        # policy cannot place: the worker fails too, for the same reason
        cause = str(exc).rsplit(": ", 2)[-2]  # e.g. "ValueError"
        with pytest.raises(UdmInvocationError, match=cause):
            _run(window, udms, rows, watermark, clipping)
        return
    out = _run(window, udms, rows, watermark, clipping)
    for i, got in enumerate(want):
        assert by_key(out, f"__udm_r{i}") == got


@pytest.mark.parametrize("window", WINDOWS[:3], ids=lambda w: repr(w))
def test_point_end_policy(window: Any) -> None:
    rows = [("a", 0, 4, 1.0), ("a", 2, 3, 2.0), ("a", 5, 6, 3.0), ("b", 1, 9, 4.0)]
    out = _run(window, [Mean], rows, INFINITY, policy=OutputPolicy.POINT_END)
    assert by_key(out, "__udm_r0") == reference(rows, window, Mean, output_policy="point_end")


class Fragile(IncrementalAggregate):
    def initial_state(self) -> float:
        return 0.0

    def add(self, state: float, value: float) -> float:
        if value > 5:
            raise ValueError(f"{value} is too big")
        return state + value

    def result(self, state: float) -> float:
        return state


def test_failure_names_udm_window_and_key() -> None:
    rows = [("a", 0, 2, 1.0), ("a", 1, 3, 2.0), ("b", 0, 1, 1.0), ("b", 4, 6, 9.0)]
    TYPES[Fragile] = T.DoubleType()
    with pytest.raises(UdmInvocationError, match=r"window \[4, 6\) of key 'b': ValueError: 9.0"):
        _run(SnapshotWindow(), [Fragile], rows, INFINITY)


@settings(max_examples=80, deadline=None)
@given(
    rows=ROWS,
    count=st.integers(1, 4),
    watermark=st.sampled_from([INFINITY, 15]),
    policy=st.sampled_from([OutputPolicy.ALIGN, OutputPolicy.POINT_END]),
    chunk=st.sampled_from([65_536, 3]),
    udms=st.sampled_from([[Mean, in_order], [in_order, lifetimes], [Rises]]),
    points=st.booleans(),
)
def test_count_by_start_windows_are_slices(
    rows: list[Any],
    count: int,
    watermark: int,
    policy: OutputPolicy,
    chunk: int,
    udms: list[Any],
    points: bool,
) -> None:
    """Count-by-start windows of aggregates hold runs of the events sorted
    by start: each window reads a slice of them (events starting together
    by payload, which the order-sensitive UDAs show), a few events at a
    time, never (event, window) memberships; a time-sensitive UDA or an
    operator, whose events a window may clip, only over point events. The
    output is the reference's."""
    if points:
        rows = [(k, s, s + 1, v) for k, s, _, v in rows]
    window = CountByStartWindow(count)
    calls: list[int] = []
    old = endpoints.evaluate_runs, members.CHUNK

    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return old[0](*args, **kwargs)

    endpoints.evaluate_runs, members.CHUNK = spied, chunk
    try:
        out = _run(window, udms, rows, watermark, policy=policy)
    finally:
        endpoints.evaluate_runs, members.CHUNK = old
    for i, udm in enumerate(udms):
        want = reference(rows, window, udm, watermark=watermark, output_policy=policy.value)
        assert by_key(out, f"__udm_r{i}") == want
    if not {lifetimes, Rises} & set(udms) or all(e == s + 1 for _, s, e, _ in rows):
        assert calls == []


def test_a_failing_slice_names_its_count_window() -> None:
    rows = [("a", 0, 2, 1.0), ("a", 1, 3, 2.0), ("b", 0, 1, 1.0), ("b", 4, 6, 9.0)]
    TYPES[Fragile] = T.DoubleType()
    with pytest.raises(UdmInvocationError, match=r"window \[0, 5\) of key 'b': ValueError: 9.0"):
        _run(CountByStartWindow(2), [Fragile], rows, INFINITY)
