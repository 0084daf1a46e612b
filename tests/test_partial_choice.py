"""The planner's choice of partial states on hopping and tumbling windows:
the decision for clear-cut samples (exact), what ``explain`` says, forced
paths, and identical results whichever path runs (against the reference
evaluator)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from test_query import Mean, median

from udm.host import HoppingWindow, evaluate_by_key
from udm.host.errors import InvalidEventError
from udm.host.plan import S_COL, WindowOp
from udm.host.query import Stream
from udm.host.strategy import (
    PARTIAL_MIN_HEAVY,
    PARTIAL_MIN_PER_GROUP,
    KeySample,
    PartialChoice,
    choose_partial,
    partial_is_open,
    sample_unit,
    use_partial,
)
from udm.sdk import IntervalEvent


def _op(udm: Any = Mean, size: int = 40, hop: int = 10, **kwargs: Any) -> WindowOp:
    stream = Stream.from_cht([(0, 1, {"k": "a", "v": 1.0})], key="k")
    plan = stream.hopping_window(size, hop).aggregate(udm, value="v", **kwargs).plan
    assert isinstance(plan, WindowOp)
    return plan


ONE_KEY = KeySample(rows=10_000, keys=1, hottest=1.0, groups=7, heavy=1.0)
MANY_KEYS = KeySample(rows=10_000, keys=1_000, hottest=0.002, groups=6_700, heavy=0.0)
HOT_KEY = KeySample(rows=10_000, keys=992, hottest=0.5, groups=5_000, heavy=0.5)


def test_few_keys_choose_partial_states() -> None:
    choice = choose_partial(_op(), ONE_KEY)
    assert choice == PartialChoice(
        True,
        "sample of 10000 events (head of the first input partition): 1 keys, hottest 100%; "
        "100% of events in keys of >= 0.5% each (>= 75%), 1428.6 events per (key, pane) "
        "group (>= 1.5): partial states",
    )


def test_many_keys_choose_the_sliced_path() -> None:
    choice = choose_partial(_op(), MANY_KEYS)
    assert choice == PartialChoice(
        False,
        "sample of 10000 events (head of the first input partition): 1000 keys, hottest 0%; "
        "0% of events in keys of >= 0.5% each (< 75%), 1.5 events per (key, pane) "
        "group (< 1.5): sliced path",
    )


def test_a_hot_key_among_many_cold_ones_chooses_the_sliced_path() -> None:
    assert choose_partial(_op(), HOT_KEY).partial is False


def test_the_thresholds_are_inclusive() -> None:
    groups = int(80 / PARTIAL_MIN_PER_GROUP)
    at = KeySample(rows=80, keys=2, hottest=0.5, groups=groups, heavy=PARTIAL_MIN_HEAVY)
    assert choose_partial(_op(), at).partial is True
    sparse = KeySample(rows=79, keys=2, hottest=0.5, groups=groups, heavy=1.0)
    assert choose_partial(_op(), sparse).partial is False
    light = KeySample(rows=80, keys=2, hottest=0.5, groups=groups, heavy=0.74)
    assert choose_partial(_op(), light).partial is False


def test_forced_and_closed_choices() -> None:
    assert choose_partial(_op(partial=True), MANY_KEYS) == PartialChoice(
        True, "partial=True forces it"
    )
    assert choose_partial(_op(partial=False), ONE_KEY) == PartialChoice(
        False, "partial=False forces it"
    )
    assert choose_partial(_op(median), ONE_KEY) == PartialChoice(
        False, "not every UDA merges states in any order"
    )
    assert choose_partial(_op(emit_empty=True), MANY_KEYS).partial is True
    assert choose_partial(_op(), None, "not sampled") == PartialChoice(
        False, "not sampled: sliced path"
    )
    assert choose_partial(_op(), KeySample(0, 0, 0.0, 0, 0.0)).partial is False
    assert partial_is_open(_op()) and not partial_is_open(_op(partial=False))
    assert not partial_is_open(_op(median)) and not partial_is_open(_op(emit_empty=True))
    # unresolved (no sample): the sliced path; forced: as forced
    assert use_partial(_op()) is False and use_partial(_op(partial=True)) is True
    with pytest.raises(ValueError, match="cannot merge states"):
        choose_partial(_op(median, partial=True), ONE_KEY)


def test_sample_unit_is_the_pane_or_the_hop() -> None:
    assert sample_unit(_op(size=40, hop=10)) == 10
    assert sample_unit(_op(size=60, hop=25)) == 5
    assert sample_unit(_op(size=30, hop=30)) == 30  # tumbling: the window


def test_summarize_counts_keys_and_pane_groups() -> None:
    from udm.host.spark.keysample import summarize

    op = _op(size=40, hop=10)
    table = pa.table(
        {
            "k": ["a", "a", "a", "b", "a", None],
            S_COL: pa.array([0, 9, 10, 3, -1, 4], pa.int64()),
        }
    )
    # groups: (a, 0) twice, (a, 1), (b, 0), (a, -1), (None, 0); every key is
    # heavy (at least 0.5% of 6 events)
    assert summarize(table, ("k",), op) == KeySample(6, 3, 4 / 6, 5, 1.0)
    assert summarize(table, (), op) == KeySample(6, 1, 1.0, 3, 1.0)
    assert summarize(table.slice(0, 0), ("k",), op) == KeySample(0, 0, 0.0, 0, 0.0)
    many = pa.table({"k": [f"k{i}" for i in range(300)], S_COL: pa.array([0] * 300, pa.int64())})
    assert summarize(many, ("k",), op) == KeySample(300, 300, 1 / 300, 300, 0.0)
    # two key columns: a key is the pair; NaN keys are one key, as the fold
    # groups them
    pairs = pa.table(
        {
            "k": ["a", "a", "a", "b", "b"],
            "j": [1.0, 2.0, 1.0, float("nan"), float("nan")],
            S_COL: pa.array([0, 0, 10, 0, 5], pa.int64()),
        }
    )
    # keys (a, 1) twice, (a, 2), (b, nan) twice; groups (a, 1, 0), (a, 2, 0),
    # (a, 1, 1), (b, nan, 0)
    assert summarize(pairs, ("k", "j"), op) == KeySample(5, 3, 2 / 5, 4, 1.0)


# ------------------------------------------------------------------ on Spark

FEW = [(i, "a" if i % 2 else "b", float(i % 7)) for i in range(400)]  # 2 keys
MANY = [(i, f"k{i % 100}", float(i % 7)) for i in range(400)]  # 100 keys


def _stream(spark: Any, rows: list[tuple[int, str, float]], **kwargs: Any) -> Stream:
    df = spark.createDataFrame(rows, "ts long, k string, v double").repartition(1)
    return Stream.from_dataframe(df, start="ts", key="k", **kwargs)


def _reference(rows: list[tuple[int, str, float]], window: HoppingWindow) -> Any:
    cht = [IntervalEvent(ts, ts + 1, {"k": k, "v": v}) for ts, k, v in rows]
    want = evaluate_by_key(cht, "k", window, Mean, value="v")
    return {k: v for k, v in want.items() if len(v)}


@pytest.mark.spark
@pytest.mark.parametrize(
    ("rows", "chosen", "line"),
    [
        (
            FEW,
            "partial states folded",
            "partial states: sample of 400 events (head of the first input partition): 2 keys, "
            "hottest 50%; 100% of events in keys of >= 0.5% each (>= 75%), 10.0 events per "
            "(key, pane) group (>= 1.5): partial states",
        ),
        (
            MANY,
            "events shuffled by (k)",
            "partial states: sample of 400 events (head of the first input partition): "
            "100 keys, hottest 1%; 100% of events in keys of >= 0.5% each (>= 75%), 1.0 events "
            "per (key, pane) group (< 1.5): sliced path",
        ),
    ],
    ids=["2-keys", "100-keys"],
)
def test_explain_shows_the_sampled_choice(spark: Any, rows: Any, chosen: str, line: str) -> None:
    query = _stream(spark, rows).window(HoppingWindow(40, 20)).aggregate(Mean, value="v")
    text = query.explain()
    assert f"spark: {chosen}" in text
    assert line in [s.strip() for s in text.splitlines()]


@pytest.mark.spark
@pytest.mark.parametrize("partial", [None, True, False], ids=["chosen", "forced", "off"])
@pytest.mark.parametrize("layout", ["few", "many"])
def test_every_path_equals_the_reference(spark: Any, partial: Any, layout: str) -> None:
    rows = FEW if layout == "few" else MANY
    window = HoppingWindow(40, 20)  # panes of 20: 10 events per (key, pane) with 2 keys
    query = _stream(spark, rows).window(window).aggregate(Mean, value="v", partial=partial)
    text = query.explain()
    if partial is None:
        expect = "partial states folded" if layout == "few" else "events shuffled by (k)"
        assert f"spark: {expect}" in text
    else:
        assert f"partial states: partial={partial} forces it" in text
    assert query.to_cht() == _reference(rows, window)


@pytest.mark.spark
def test_the_sample_neither_counts_nor_raises_invalid_rows(spark: Any) -> None:
    rows: list[Any] = [*FEW, (None, "a", 1.0)]
    window = HoppingWindow(40, 20)
    dropping = _stream(spark, rows, on_invalid="drop").window(window).aggregate(Mean, value="v")
    assert dropping.to_cht() == _reference(FEW, window)
    assert dropping.metrics.invalid_rows() == {"'ts' is null": 1}
    raising = _stream(spark, rows).window(window).aggregate(Mean, value="v")
    out = raising.to_dataframe()  # planned, sample taken: nothing raised yet
    with pytest.raises(InvalidEventError, match="'ts' is null"):
        out.collect()
