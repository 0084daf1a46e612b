"""The window-kind protocol: engines ask the spec and never switch on its class.

* No ``isinstance`` (or ``issubclass``, ``type(w) is``, ``case K()``) check
  of a window kind outside ``udm/host/windows.py`` and ``udm/host/kinds.py``
  (an ast walk over the packages, naming file:line).
* The traits the planners read answer as each kind's definition says.
* The grid's index range: its scalar form against a brute-force listing of
  the windows a lifetime overlaps, and its Spark SQL form (what the Spark
  engine assigns windows with) against the scalar one, at the edge cases:
  negative times, offsets, gaps, lifetimes ending exactly on a boundary,
  open ends under a finite watermark, the grid's time bounds.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from test_query import Mean

import udm.host.windows as windows_module
from udm.host import evaluate, evaluate_by_key
from udm.host.time import INFINITY, MIN_TIME
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    WindowSpec,
)
from udm.sdk import IntervalEvent

ROOT = Path(__file__).resolve().parents[1]
#: the packages whose code must ask specs instead of checking their class
PACKAGES = ["host", "testing", "cli", "sdk", "plugins"]
#: where a kind's own logic lives: checking classes there is the point
ALLOWED = {Path("host/udm/host/windows.py"), Path("host/udm/host/kinds.py")}

KINDS = sorted(
    name
    for name, obj in vars(windows_module).items()
    if inspect.isclass(obj) and issubclass(obj, WindowSpec) and obj is not WindowSpec
)


def _names(node: ast.AST) -> set[str]:
    """Class names an expression mentions (``K``, ``mod.K``, tuples, ``A | B``)."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def kind_checks(source: str, kinds: list[str]) -> list[tuple[int, str]]:
    """(line, text) of every check of a window kind's class in ``source``."""
    wanted = set(kinds)
    hits = []
    for node in ast.walk(ast.parse(source)):
        names: set[str] = set()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            names = _names(node.args[1])
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) for op in node.ops
        ):
            sides = [node.left, *node.comparators]
            if any(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type"
                for s in sides
            ):
                names = set().union(*(_names(s) for s in sides))
        elif isinstance(node, ast.MatchClass):
            names = _names(node.cls)
        if names & wanted:
            hits.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return hits


def test_the_kinds_are_found() -> None:
    assert {"HoppingWindow", "SnapshotWindow", "CountByStartWindow", "CountByEndWindow"} <= set(
        KINDS
    )


def test_the_scan_finds_every_form_of_check() -> None:
    source = """
isinstance(w, HoppingWindow)
isinstance(w, (SnapshotWindow, int))
isinstance(w, windows.CountByEndWindow | int)
issubclass(cls, TumblingWindow)
type(w) is CountByStartWindow
match w:
    case SnapshotWindow():
        pass
isinstance(w, WindowSpec)
isinstance(op, WindowOp)
w.grid is not None
"""
    assert [line for line, _ in kind_checks(source, KINDS)] == [2, 3, 4, 5, 6, 8]


def test_no_window_kind_checks_outside_the_kinds() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED or "templates" in rel.parts:
                continue
            for line, text in kind_checks(path.read_text(), KINDS):
                found.append(f"{rel}:{line}: {text}")
    assert not found, (
        "ask the window spec (grid, members_by_start, sql_assignment, ...) or a registry "
        "by spec class instead of checking the kind:\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    ("spec", "grid", "by_start"),
    [
        (HoppingWindow(10, 5), True, False),
        (TumblingWindow(10, offset=3), True, False),
        (SnapshotWindow(), False, False),
        (CountByStartWindow(2), False, True),
        (CountByEndWindow(2), False, False),
    ],
)
def test_traits(spec: WindowSpec, grid: bool, by_start: bool) -> None:
    assert (spec.grid is spec) is grid
    assert spec.is_grid is grid
    assert spec.members_by_start is by_start
    assert spec.sql_assignment


def test_require_grid_names_the_caller_and_the_kind() -> None:
    assert TumblingWindow(5).require_grid("x") == TumblingWindow(5)
    with pytest.raises(TypeError, match=r"^the fold runs on grid windows .*CountByEndWindow"):
        CountByEndWindow(3).require_grid("the fold")


def test_pane_is_the_gcd() -> None:
    assert [HoppingWindow(10, 4).pane, HoppingWindow(9, 6).pane, TumblingWindow(7).pane] == [
        2,
        3,
        7,
    ]


GRIDS = [
    HoppingWindow(10, 5),
    HoppingWindow(10, 4, offset=3),
    HoppingWindow(3, 5, offset=1),  # gaps: hop > size
    TumblingWindow(7, offset=-2),  # offset taken modulo the hop: 5
    HoppingWindow(1, 1),
]


def _brute_range(w: HoppingWindow, start: int, end: int) -> tuple[int, int]:
    """The windows overlapping [start, end) by listing k around them (empty:
    lo > hi, as index_range gives it)."""
    ks = [k for k in range(-50, 50) if w.start_of(k) < end and start < w.end_of(k)]
    return (ks[0], ks[-1]) if ks else (1, 0)


@pytest.mark.parametrize("w", GRIDS, ids=repr)
def test_index_range_is_the_overlapping_windows(w: HoppingWindow) -> None:
    for start in range(-23, 24):
        for end in range(start + 1, start + 16):
            lo, hi = w.index_range(start, end)
            if lo > hi:
                assert _brute_range(w, start, end) == (1, 0), (start, end)
            else:
                assert (lo, hi) == _brute_range(w, start, end), (start, end)


def _cases(w: HoppingWindow) -> list[tuple[int, int]]:
    """Lifetimes at the edges of ``w``'s grid (all inside its time bounds)."""
    o, h, z = w.offset, w.hop, w.size
    min_start, max_end = w.time_bounds
    return [
        (-7, -2),
        (-13, -12),
        (o, o + z),  # exactly one window's lifetime
        (o - 1, o),  # ending exactly where a window starts
        (o + z, o + z + 1),  # starting exactly where a window ends
        (o + h - 1, o + h + 1),
        (3 * h + o, 5 * h + o),
        (-4 * h + o - 1, -2 * h + o),
        (min_start, min_start + 1),
        (max_end - 1, max_end),
        (max_end - z - h, max_end),
        (5, INFINITY),  # open: capped by a finite watermark
    ]


def _expected(w: HoppingWindow, start: int, end: int, watermark: int) -> tuple[int, int]:
    lo, hi = w.index_range(start, end)
    if watermark < INFINITY:
        hi = min(hi, w.last_index_before(watermark))
    return lo, hi


@pytest.mark.parametrize("watermark", [INFINITY, 40, -3])
def test_spark_index_range_agrees_with_the_scalar_one(spark: Any, watermark: int) -> None:
    from pyspark.sql import functions as F

    from udm.host.plan import E_COL, S_COL
    from udm.host.spark.windows import hopping_range

    frames = []
    expected = {}
    for i, w in enumerate(GRIDS):
        cases = _cases(w)
        if watermark >= INFINITY:
            cases = [c for c in cases if c[1] < INFINITY]  # an open end fails, tested below
        rows = [(i, j, s, e) for j, (s, e) in enumerate(cases)]
        expected.update({(i, j): _expected(w, s, e, watermark) for i, j, s, e in rows})
        k_min, k_max = hopping_range(w, watermark)
        df = spark.createDataFrame(rows, f"w int, c int, {S_COL} long, {E_COL} long")
        frames.append(df.select("w", "c", k_min.alias("lo"), k_max.alias("hi")))
    union = frames[0]
    for f in frames[1:]:
        union = union.unionByName(f)
    got = {(r["w"], r["c"]): (r["lo"], r["hi"]) for r in union.orderBy(F.col("w")).collect()}
    assert got == expected


def test_spark_index_range_refuses_what_the_grid_refuses(spark: Any) -> None:
    from pyspark.sql.utils import AnalysisException

    from udm.host.plan import E_COL, S_COL
    from udm.host.spark.windows import hopping_range

    w = HoppingWindow(10, 5)
    assert w.range_problem(MIN_TIME, 5) is not None
    cases = [((MIN_TIME, 5), INFINITY, "beginning of time"), ((0, INFINITY), INFINITY, "never")]
    for (s, e), watermark, text in cases:
        k_min, k_max = hopping_range(w, watermark)
        df = spark.createDataFrame([(s, e)], f"{S_COL} long, {E_COL} long")
        with pytest.raises(Exception, match=text) as info:
            df.select(k_min, k_max).collect()
        assert not isinstance(info.value, AnalysisException)  # a run-time error, not bad SQL


def _edge_events(w: HoppingWindow, low: bool) -> list[tuple[int, int]]:
    """Lifetimes at the earliest (``low``) or latest times ``w`` accepts."""
    min_start, max_end = w.time_bounds
    z, h = w.size, w.hop
    if low:
        return [
            (min_start, min_start + 1),
            (min_start, min_start + 3),
            (min_start + 2, min_start + z + h),
        ]
    return [(max_end - 1, max_end), (max_end - z - h, max_end), (max_end - 3, max_end - 1)]


@pytest.mark.spark
@pytest.mark.parametrize("route", ["sliced", "keyless", "partial", "emit_empty"])
@pytest.mark.parametrize("low", [True, False], ids=["earliest", "latest"])
def test_spark_windows_events_at_the_grid_bounds_as_the_reference(
    spark: Any, route: str, low: bool
) -> None:
    """Every Spark route: the worker's numpy ranges (by key, or by bucket
    of windows without keys, from Spark SQL's ranges), partial states per
    pane, windows assigned in Spark SQL (``emit_empty``)."""
    from udm.host.query import Stream

    key = None if route == "keyless" else "k"
    for w in GRIDS[1:4]:
        events = _edge_events(w, low)
        rows = [(s, e, "a", float(i)) for i, (s, e) in enumerate(events)]
        df = spark.createDataFrame(rows, "s long, e long, k string, v double")
        options: dict[str, Any] = {
            "partial": route in ("partial", "emit_empty"),
            "emit_empty": route == "emit_empty",
        }
        query = (
            Stream.from_dataframe(df, start="s", end="e", key=key)
            .window(w)
            .aggregate(Mean, value="v", **options)
        )
        cht = [IntervalEvent(s, e, {"k": "a", "v": v}) for s, e, _, v in rows]
        if key is None:
            assert query.to_cht() == evaluate(cht, w, Mean, value="v"), w
            continue
        want = evaluate_by_key(cht, "k", w, Mean, value="v", emit_empty=route == "emit_empty")
        assert query.to_cht() == {k: v for k, v in want.items() if len(v)}, w


#: a grid with gaps whose window before the tick range ends at or before
#: MIN_TIME: the computed earliest start fell to MIN_TIME itself
GAPPED = HoppingWindow(3, 10)
GAPPED_REFUSAL = (
    "event [-inf, 5) cannot be windowed by HoppingWindow(size=3, hop=10): it starts at the "
    "beginning of time (MIN_TIME), so infinitely many hold it. Grid windows take events "
    "starting at or after -9223372036854775806"
)


def test_a_grid_with_gaps_refuses_an_event_from_the_beginning_of_time() -> None:
    """Black-box acceptance (bb4 #4): ``time_bounds`` of HoppingWindow(3, 10)
    was (MIN_TIME, INFINITY), so [MIN_TIME, 5) was accepted and every
    engine began enumerating about 9.2e17 windows (the reference and the
    host hung). By hand: the windows start at multiples of 10; the last
    one starting at or before MIN_TIME is [-...810, -...807), ending at
    MIN_TIME, so only ``MIN_TIME + 1`` keeps the bound inside the range."""
    assert GAPPED.time_bounds == (MIN_TIME + 1, INFINITY)
    assert HoppingWindow(3, 10, offset=4).time_bounds[0] == MIN_TIME + 1
    assert GAPPED.range_problem(MIN_TIME + 1, 5) is None
    problem = GAPPED.range_problem(MIN_TIME, 5)
    assert problem is not None and problem.startswith(GAPPED_REFUSAL)
    # an event from one tick later starts in the gap before the first
    # window inside the range, [MIN_TIME + 7, MIN_TIME + 10)
    low = MIN_TIME + 1
    later = [IntervalEvent(low, low + 7, "gap"), IntervalEvent(low, low + 9, "x")]
    assert GAPPED.windows(later) == [windows_module.WindowDescriptor(low + 6, low + 9)]


@pytest.mark.timeout(60)  # the old code hung
def test_every_in_process_engine_refuses_it() -> None:
    from udm.host import Cti, Host, Insert, InvalidElementError, output_cht

    # the old code accepted the event and ran out of memory listing its
    # windows: fail first on the bound that let it in
    assert GAPPED.time_bounds[0] > MIN_TIME
    with pytest.raises(ValueError) as err:
        evaluate([IntervalEvent(MIN_TIME, 5, 1.0)], GAPPED, Mean, watermark=30)
    assert str(err.value).startswith(GAPPED_REFUSAL)
    bad = Insert("old", MIN_TIME, 5, 1.0)
    for fast_path in (True, False):
        for feed in ("process", "process_many", "process_inserts"):
            host = Host(GAPPED, Mean, fast_path=fast_path)
            out = host.process(Insert("a", 1, 2, 4.0))
            with pytest.raises(InvalidElementError) as refused:
                if feed == "process":
                    host.process(bad)
                elif feed == "process_many":
                    host.process_many([bad])
                else:
                    host.process_inserts([bad.id], [bad.start], [bad.end], [bad.payload])
            assert GAPPED_REFUSAL in str(refused.value), (fast_path, feed)
            out += host.process(Cti(30))
            assert output_cht(out) == [(0, 3, 4.0)], (fast_path, feed)


@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", [None, "k"], ids=["sql_ranges", "worker_ranges"])
def test_spark_refuses_it(spark: Any, key: str | None) -> None:
    from udm.host.query import Stream

    assert GAPPED.time_bounds[0] > MIN_TIME  # else Spark would explode ~9.2e17 windows
    rows = [(1, 2, "a", 4.0), (MIN_TIME, 5, "a", 1.0)]
    df = spark.createDataFrame(rows, "s long, e long, k string, v double")
    query = Stream.from_dataframe(df, start="s", end="e", key=key).window(GAPPED)
    with pytest.raises(Exception, match=r"starts at the beginning of time \(MIN_TIME\)"):
        query.aggregate(Mean, value="v", watermark=30).to_cht()
