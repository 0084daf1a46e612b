"""The vectorized fold (``add_segments``) on Spark's sliced grid path,
in-process (no Spark session): the worker function Spark runs is called on
Arrow batches and must give the reference evaluator's CHT, calling
``add_segments`` once per chunk of disjoint windows and falling back to
``add_many`` where windows overlap; a failing or wrong-sized
``add_segments`` names its window; and ``members.lexsort`` equals
``np.lexsort``.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from udm.host import HoppingWindow, InputClipping, OutputPolicy, UdmInvocationError
from udm.host.time import INFINITY
from udm.sdk import IncrementalAggregate, UdmDefinitionError
from udm.testing import load_fixture, run_fixture

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402
from worker_support import SumCount, by_key, reference, worker_table  # noqa: E402

from udm.host.plan import E_COL, S_COL, Source, UdmCall, WindowOp  # noqa: E402
from udm.host.spark import grid, members  # noqa: E402
from udm.host.spark.arrowio import arrow_schema_with_marks  # noqa: E402


class First(IncrementalAggregate):
    """Order-sensitive: the window's first value in canonical order (events
    starting together by payload), vectorized as each segment's first."""

    def initial_state(self) -> list[float]:
        return []

    def add(self, state: list[float], value: float) -> list[float]:
        return state or [value]

    def add_segments(self, values: Any, bounds: Any) -> list[list[float]]:
        return [[v] for v in values[bounds[:-1]].tolist()]

    def result(self, state: list[float]) -> float:
        return state[0]


class Short(SumCount):
    """Returns one state too few."""

    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        return super().add_segments(values, bounds)[:-1]


class Failing(SumCount):
    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        raise ValueError("no segments today")


def _op(udms: list[Any], window: HoppingWindow) -> WindowOp:
    calls = tuple(UdmCall(f"r{i}", u(), "v") for i, u in enumerate(udms))
    return WindowOp(
        Source(rows=()),
        window,
        "aggregate",
        calls,
        InputClipping.NONE,
        OutputPolicy.ALIGN,
        False,
        INFINITY,
        False,
        False,
    )


def _evaluated(udms: list[Any], window: HoppingWindow, rows: list[Any]) -> list[dict[str, Any]]:
    fields = [
        T.StructField(S_COL, T.LongType(), False),
        T.StructField(E_COL, T.LongType(), False),
        T.StructField("key", T.StringType(), True),
        *[T.StructField(f"__udm_r{i}", T.DoubleType(), True) for i in range(len(udms))],
    ]
    schema = arrow_schema_with_marks(T.StructType(fields))
    evaluate = grid._evaluate_fn(_op(udms, window), ["key"], ["key", "v"], schema)
    table = worker_table(rows)
    return [r for b in evaluate(iter(table.to_batches(max_chunksize=5))) for r in b.to_pylist()]


POINTS = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.integers(-10, 30), st.integers(0, 8)),
    max_size=40,
)
DISJOINT = st.sampled_from([HoppingWindow(6, 6), HoppingWindow(4, 7, offset=1)])


@settings(max_examples=60, deadline=None)
@given(points=POINTS, window=DISJOINT, chunk=st.sampled_from([members.CHUNK, 4]))
@example(  # payloads of events starting together, out of order
    points=[("a", 0, 3), ("a", 0, 1), ("a", 3, 2), ("b", 7, 5)],
    window=HoppingWindow(6, 6),
    chunk=members.CHUNK,
)
def test_disjoint_windows_fold_by_segments(
    points: list[tuple[str | None, int, int]], window: HoppingWindow, chunk: int
) -> None:
    """Tumbling windows (and hopping ones with gaps): every window's state
    comes from ``add_segments``, never ``add_many``; events starting
    together are in canonical order (``First``); all equal the reference."""
    rows = [(k, s, s + 1, float(v)) for k, s, v in points]
    SumCount.calls.clear()
    old, members.CHUNK = members.CHUNK, chunk
    try:
        out = _evaluated([SumCount, First], window, rows)
    finally:
        members.CHUNK = old
    for i, udm in enumerate([SumCount, First]):
        assert by_key(out, f"__udm_r{i}") == reference(rows, window, udm)
    assert SumCount.calls["add_many"] == 0
    assert (SumCount.calls["add_segments"] > 0) == bool(out)


def test_segment_results_are_exact() -> None:
    """Hand-computed: two keys, tumbling windows of 10 ticks, events tying
    on their start (First reads the smaller payload)."""
    rows = [
        ("a", 3, 4, 5.0),
        ("a", 1, 2, 4.0),
        ("a", 1, 2, 2.0),
        ("a", 12, 13, 1.0),
        ("b", 0, 1, 0.5),
        ("b", 9, 10, 0.25),
    ]
    out = _evaluated([SumCount, First], HoppingWindow(10, 10), rows)
    got = sorted((r["key"], r[S_COL], r[E_COL], r["__udm_r0"], r["__udm_r1"]) for r in out)
    assert got == [
        ("a", 0, 10, 11.0 / 3, 2.0),
        ("a", 10, 20, 1.0, 1.0),
        ("b", 0, 10, 0.375, 0.5),
    ]


def test_overlapping_windows_fall_back_to_add_many() -> None:
    """Hopping windows share events: each window is folded by ``add_many``
    from its slice, with the reference's results."""
    rows = [("a", t, t + 1, float(t % 5)) for t in range(20)]
    window = HoppingWindow(6, 2)
    SumCount.calls.clear()
    out = _evaluated([SumCount], window, rows)
    assert by_key(out, "__udm_r0") == reference(rows, window, SumCount)
    assert SumCount.calls["add_segments"] == 0
    assert SumCount.calls["add_many"] == len(out)


def test_integer_and_null_columns() -> None:
    """An integer column reaches ``add_segments`` as integers (in the order
    of the rows picked); a column with nulls among them, or overlapping
    windows, take the per-window fold (the UDA sees Python None)."""
    table = pa.table(
        {
            "key": pa.array(["a", "a", "b"], pa.string()),
            S_COL: pa.array([0, 1, 2], pa.int64()),
            E_COL: pa.array([1, 2, 3], pa.int64()),
            "v": pa.array([1, None, 3], pa.int64()),
        }
    )
    op = _op([SumCount], HoppingWindow(5, 5))
    call = op.calls[0]
    values = members.vector_input(op, call, table, pa.array([2, 0]), [0, 1], [1, 2])
    assert values is not None and values.dtype.kind == "i" and values.tolist() == [3, 1]
    assert members.vector_input(op, call, table, pa.array([0, 1, 2]), [0, 2], [2, 3]) is None
    assert members.vector_input(op, call, table, pa.array([0, 2]), [0, 0], [2, 2]) is None


@pytest.mark.parametrize(
    ("udm", "where"),
    [
        (Failing, r"'failing' failed on window \[0, 6\) of key 'a': ValueError: no segments"),
        (
            Short,
            r"'short' failed on window \[0, 6\) of key 'a': ValueError: add_segments "
            r"returned 2 states for 3 segments",
        ),
    ],
)
def test_a_wrong_add_segments_names_its_window(udm: Any, where: str) -> None:
    rows = [("a", t, t + 1, float(t)) for t in range(16)]
    with pytest.raises(UdmInvocationError, match=where):
        _evaluated([udm], HoppingWindow(6, 6), rows)


def test_add_segments_takes_values_and_bounds() -> None:
    with pytest.raises(UdmDefinitionError, match="add_segments takes 1 required argument"):

        class Bad(SumCount):
            def add_segments(self, values: Any) -> list[Any]:  # type: ignore[override]
                return []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(-(2**40), 2**40), min_size=0, max_size=30), min_size=1, max_size=3
    ).filter(lambda cols: len({len(c) for c in cols}) == 1),
    st.booleans(),
)
def test_lexsort_equals_numpy(cols: list[list[int]], floats: bool) -> None:
    """Packed into one int64 (or not, when the ranges are too wide or the
    keys are floats), the order is np.lexsort's, ties included."""
    keys = tuple(np.array(c, dtype=np.float64 if floats else np.int64) for c in cols)
    assert members.lexsort(keys).tolist() == np.lexsort(keys).tolist()
    small = tuple(k.astype(np.int64) % 3 for k in keys)  # many ties
    assert members.lexsort(small).tolist() == np.lexsort(small).tolist()


class OffByOne(SumCount):
    """Its vectorized form drops each segment's last value."""

    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        ends = bounds.tolist()
        return [(float(values[a : z - 1].sum()), z - a) for a, z in itertools.pairwise(ends)]


def test_the_fixture_runner_checks_add_segments(tmp_path: Path) -> None:
    """``udm-cli test`` calls ``add_segments`` on a step's windows at once
    and reports the first window whose result differs from ``add``'s."""
    text = textwrap.dedent(
        """\
        udm: test_segments:{udm}
        window: {{kind: tumbling, size: 10}}
        input:
          - {{insert: a, start: 1, payload: 7}}
          - {{insert: b, start: 2, payload: 3}}
          - {{insert: c, start: 13, payload: 5}}
        """
    )
    path = tmp_path / "f.udm.yaml"
    path.write_text(text.format(udm="SumCount"))
    assert run_fixture(load_fixture(path)[0]).passed
    path.write_text(text.format(udm="OffByOne"))
    assert run_fixture(load_fixture(path)[0]).failures == [
        "add_segments differs from add: in window [0, 10) the segment [7, 3] gives 3.5 "
        "instead of 5.0"
    ]
    path.write_text(text.format(udm="Short"))
    assert run_fixture(load_fixture(path)[0]).failures == [
        "add_segments returned 1 states for 2 windows"
    ]


@pytest.mark.spark
def test_a_spark_query_folds_by_segments(spark: Any) -> None:
    """End to end on Spark: tumbling windows of point events without
    partial states give the reference's results through ``add_segments``
    (hand-checked: key a's first window holds 2.0 and 4.0 starting
    together and 5.0)."""
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
    df = spark.createDataFrame(rows, "k string, ts long, v double")
    got = (
        Stream.from_dataframe(df, start="ts", key="k")
        .window(TumblingWindow(10))
        .aggregate(mean=(SumCount, "v"), first=(First, "v"), partial=False)
        .to_cht()
    )
    table = sorted(
        (k, e.start, e.end, e.payload["mean"], e.payload["first"])
        for k, cht in got.items()
        for e in cht
    )
    assert table == [
        ("a", 0, 10, 11.0 / 3, 2.0),
        ("a", 10, 20, 1.0, 1.0),
        ("b", 0, 10, 0.375, 0.5),
        ("b", 20, 30, 8.0, 8.0),
    ]
    events = Cht(IntervalEvent(s, s + 1, {"k": k, "v": v}) for k, s, v in rows)
    for name, udm in (("mean", SumCount), ("first", First)):
        want = evaluate_by_key(events, "k", TumblingWindow(10), udm, value="v")
        mine = {k: Cht((e.start, e.end, e.payload[name]) for e in cht) for k, cht in got.items()}
        assert mine == {k: v for k, v in want.items() if len(v)}
