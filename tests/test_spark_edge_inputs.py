"""Inputs at the edges, on Spark batch as on the in-process engines
(black-box acceptance findings): in-memory streams without events, times
at the ends of the tick range, payload columns of mixed types, results of
mixed types, and NaN group keys (every NaN is one key, on every engine).

Each Spark test runs one or two small queries; the expected results are
the reference engine's, or written out by hand.
"""

from __future__ import annotations

import math
import pickle
import re
from typing import Any

import pytest

from udm.host import MIN_TIME, Cht, Cti, Insert, Retract
from udm.host.errors import InvalidEventError, OperatorError
from udm.host.query import Stream
from udm.host.rows import NAN_KEY, key_of
from udm.host.time import INFINITY
from udm.sdk import aggregate


@aggregate
def cnt(values: list[Any]) -> int:
    """How many events a window holds."""
    return len(values)


# ------------------------------------------------ streams without events

NO_LIVE_EVENTS = {
    "no elements": [],
    "a CTI alone": [Cti(5)],
    "every insert retracted": [Insert("a", 1, 3, 5), Retract("a", 1, 3, 1)],
}


@pytest.mark.spark
@pytest.mark.parametrize("elements", list(NO_LIVE_EVENTS.values()), ids=list(NO_LIVE_EVENTS))
def test_a_window_over_a_from_events_stream_without_events(spark: Any, elements: Any) -> None:
    """A KeyError: the scalar stream's ``value`` column was missing."""
    q = Stream.from_events(elements).tumbling_window(5).aggregate(cnt)
    assert q.to_cht(engine="reference") == Cht([])
    assert q.to_cht(engine="spark") == Cht([])


@pytest.mark.spark
def test_a_window_or_group_over_from_cht_without_events_names_any_column(spark: Any) -> None:
    """KeyError "value column(s) ['value'] ... columns: []" (and a
    ValueError for a key) on Spark where the in-process engines give the
    empty result: a source without events or known columns lacks none."""
    windowed = Stream.from_cht([]).tumbling_window(5).aggregate(cnt, value="value")
    keyed = Stream.from_cht([], key="k").tumbling_window(5).aggregate(cnt, value="v")
    for q, empty in ((windowed, Cht([])), (keyed, {})):
        assert q.to_cht(engine="reference") == empty
        assert q.to_cht(engine="spark") == empty
    assert keyed.to_dataframe().count() == 0


@pytest.mark.spark
@pytest.mark.parametrize("elements", [[], [Cti(60)]], ids=["no elements", "a CTI alone"])
def test_a_keyed_from_events_stream_without_inserts_names_any_column(
    spark: Any, elements: Any
) -> None:
    """KeyError "key columns ['k'] are not in the stream; columns:
    ['value']": the stream knew only its scalar ``value`` column, so it was
    not blank, though it has no events either (black-box round 15)."""
    keyed = Stream.from_events(elements, key="k")
    windowed = keyed.tumbling_window(5).aggregate(cnt, value="v")
    for q in (keyed, windowed):
        assert q.to_cht(engine="reference") == {}
        assert q.to_cht(engine="spark") == {}


@pytest.mark.spark
def test_a_window_over_a_dataframe_without_the_value_column_is_still_refused(spark: Any) -> None:
    df = spark.createDataFrame([], "t long, v double")
    q = Stream.from_dataframe(df, start="t").tumbling_window(5).aggregate(cnt, value="w")
    with pytest.raises(KeyError, match=r"value column\(s\) \['w'\]"):
        q.to_cht(engine="spark")


@pytest.mark.spark
def test_joins_with_an_in_memory_stream_without_events(spark: Any) -> None:
    """'the right stream has no column(s) ['k']': a stream without events
    lacks no column, as on the in-process engines."""
    left = Stream.from_events([Insert("a", 1, 3, {"k": 1, "v": 2})])
    for empty in (Stream.from_cht([]), Stream.from_events([])):
        anti = left.left_anti_join(empty, on="k")
        assert anti.to_cht(engine="spark") == Cht([(1, 3, {"k": 1, "v": 2})])
        assert left.join(empty, on="k").to_cht(engine="spark") == {}
    assert Stream.from_cht([]).join(left, on="k").to_cht(engine="spark") == {}


@pytest.mark.spark
def test_a_join_side_with_events_but_no_key_column_is_still_refused(spark: Any) -> None:
    left = Stream.from_cht([(0, 10, {"k": "a"})])
    right = Stream.from_cht([(0, 10, {"z": "a"})])
    with pytest.raises(OperatorError, match=r"the right stream has no column\(s\) \['k'\]"):
        left.join(right, on="k").to_cht(engine="spark")


# ------------------------------------------------- the ends of the tick range


@pytest.mark.spark
def test_a_dataframe_time_below_min_time_is_an_invalid_row(spark: Any) -> None:
    """-2**63 passed through as a start; in-process it is no time."""
    df = spark.createDataFrame(
        [(-(2**63), 5, 1), (1, 2, 2), (3, 4, 3), (5, -(2**63), 4)], "ts long, te long, v long"
    )
    with pytest.raises(InvalidEventError) as info:
        Stream.from_dataframe(df, start="ts", end="te").to_cht()
    text = str(info.value)
    assert re.match(r"invalid event: '(ts|te)' is not a valid time; row: ", text)
    assert "2 invalid rows in all (1 'te' is not a valid time, 1 'ts' is not a valid time)" in text
    dropped = Stream.from_dataframe(df, start="ts", end="te", on_invalid="drop")
    assert dropped.to_cht() == Cht([(1, 2, {"v": 2}), (3, 4, {"v": 3})])
    reasons = {"'ts' is not a valid time": 1, "'te' is not a valid time": 1}
    assert dropped.metrics.invalid_rows() == reasons


@pytest.mark.spark
def test_a_time_string_finer_than_a_microsecond_is_refused_as_in_process(spark: Any) -> None:
    """Spark's parser drops a string's digits below a microsecond, which
    moved the event silently; ``to_ticks`` refuses them in-process."""
    rows = [("2024-01-01T00:00:00.0000009Z", 1.0), ("2024-01-01T00:00:00.1234560Z", 2.0)]
    df = spark.createDataFrame(rows, "ts string, v double")
    with pytest.raises(InvalidEventError) as info:
        Stream.from_dataframe(df, start="ts").to_cht()
    text = str(info.value)
    assert "'ts' has sub-microsecond precision (udm ticks are microseconds)" in text
    assert "round the times to microseconds (at most six fraction digits)" in text
    dropped = Stream.from_dataframe(df, start="ts", on_invalid="drop")
    t0 = 1_704_067_200_000_000 + 123_456  # a trailing zero is no finer part
    assert dropped.to_cht() == Cht([(t0, t0 + 1, {"v": 2.0})])
    reason = "'ts' has sub-microsecond precision (udm ticks are microseconds)"
    assert dropped.metrics.invalid_rows() == {reason: 1}
    pdf = df.toPandas()  # the same rows in-process: the same row dropped, the same reason
    local = Stream.from_pandas(pdf, start="ts", on_invalid="drop")
    assert local.to_cht() == dropped.to_cht()
    assert local.metrics.invalid_rows() == {reason: 1}


@pytest.mark.spark
@pytest.mark.parametrize(
    ("event", "by", "new_start"),
    [
        ((MIN_TIME + 2, 5, 1), -3, -(2**63)),  # was silently -2**63
        ((MIN_TIME + 2, 5, 1), -5, -(2**63) - 2),  # was Spark's ARITHMETIC_OVERFLOW
        ((INFINITY - 3, INFINITY, 1), 3, INFINITY),
    ],
)
def test_a_shift_out_of_the_time_range_fails_as_on_the_reference(
    spark: Any, event: tuple[int, int, int], by: int, new_start: int
) -> None:
    q = Stream.from_cht([(1, 2, 0), event]).shift(by)
    s, e, _ = event
    said = f"the new start {new_start} is outside the time range"
    at = re.escape(f"shift by {by} at ({s}, {e}, {{'value': 1}}): {said}")
    with pytest.raises(OperatorError, match=at):
        q.to_cht(engine="reference")
    with pytest.raises(OperatorError, match=re.escape(f"shift by {by} at ({s}, {e}): {said}")):
        q.to_cht(engine="spark")


@pytest.mark.spark
def test_a_join_of_events_at_the_ends_of_the_tick_range(spark: Any) -> None:
    """Events at time's last tick [INFINITY-1, INFINITY) and from MIN_TIME:
    the range-bucketed join built a literal past the longs (Py4JError)
    or overflowed casting a double quotient (ARITHMETIC_OVERFLOW); an
    open event would then have spanned 2**63 buckets (black-box round 15)."""
    left = Stream.from_events(
        [
            Insert("a", INFINITY - 1, INFINITY, {"k": "x", "v": 1}),
            Insert("m", MIN_TIME, 5, {"k": "x", "v": 2}),
        ],
        key="k",
    )
    right = Stream.from_events(
        [
            Insert("c", 3, INFINITY, {"k": "x", "w": 5}),
            Insert("n", -7, -2, {"k": "x", "w": 7}),
            Insert("b", 0, 15, {"k": "y", "w": 6}),
        ],
        key="k",
    )
    q = left.join(right)
    expected = {
        "x": Cht(
            [
                (INFINITY - 1, INFINITY, {"k": "x", "v": 1, "w": 5}),
                (3, 5, {"k": "x", "v": 2, "w": 5}),
                (-7, -2, {"k": "x", "v": 2, "w": 7}),
            ]
        )
    }
    assert q.to_cht(engine="reference") == expected
    assert q.to_cht(engine="spark") == expected
    no_pair = left.join(Stream.from_events([Insert("b", 0, 15, {"k": "y"})], key="k"))
    assert no_pair.to_cht(engine="spark") == {}


# ------------------------------------------------------------ mixed types


@pytest.mark.spark
def test_a_mixed_type_in_memory_column_names_the_column_and_types(spark: Any) -> None:
    """A raw ArrowInvalid naming neither the column nor a way out."""
    events = [(1, 3, {"k": 1, "v": 1}), (1, 3, {"k": 1, "v": "a"})]
    q = Stream.from_cht(events).tumbling_window(5).aggregate(cnt, value="v")
    assert q.to_cht(engine="reference") == Cht([(0, 5, 2)])
    with pytest.raises(TypeError) as info:
        q.to_cht(engine="spark")
    text = str(info.value)
    assert text.startswith("column 'v' holds int and str values (1 and 'a'; ")
    assert "give the column one type in every event" in text
    keyed = Stream.from_cht([(1, 3, {"k": 1}), (2, 3, {"k": "a"})], key="k")
    with pytest.raises(TypeError, match="column 'k' holds int and str values"):
        keyed.tumbling_window(5).aggregate(cnt).to_cht(engine="spark")


@pytest.mark.spark
def test_mixed_select_results_point_to_the_select_type_tuple(spark: Any) -> None:
    """The message said 'pass returns=', which select() refuses."""
    q = Stream.from_cht([(1, 3, {"v": 1}), (2, 4, {"v": None})]).select(
        d=lambda p: "x" if p["v"] is None else p["v"]
    )
    with pytest.raises(TypeError) as info:
        q.to_cht(engine="spark")
    assert str(info.value) == (
        "select(d=...): results mix bigint and string values; return values of one "
        "type and declare it as a (udf, type) tuple: select(name=(udf, 'string'))"
    )
    typed = Stream.from_cht([(1, 3, {"v": 1}), (2, 4, {"v": None})]).select(
        d=(lambda p: "x" if p["v"] is None else str(p["v"]), "string")
    )
    assert typed.to_cht(engine="spark") == Cht([(1, 3, {"d": "1"}), (2, 4, {"d": "x"})])


@aggregate
def first_or_text(values: list[Any]):  # type: ignore[no-untyped-def]
    """An untyped result: a number, or text past 1."""
    return "x" if values[0] > 1 else 1


@pytest.mark.spark
def test_mixed_udm_results_point_to_returns(spark: Any) -> None:
    df = spark.createDataFrame([(1, 2, 1), (6, 7, 2)], "ts long, te long, v long")
    q = Stream.from_dataframe(df, start="ts", end="te").tumbling_window(5)
    with pytest.raises(TypeError) as info:
        q.aggregate(first_or_text, value="v").to_cht()
    assert str(info.value) == (
        "UDM 'first_or_text': results mix bigint and string values; return values of one "
        "type and declare it: returns= in aggregate()/apply() (a DDL string such as "
        "'string' or 'double'), or the UDM's return annotation"
    )


# ------------------------------------------------------------- NaN keys


def test_every_nan_key_is_one_key_that_survives_pickling() -> None:
    a, b = float("nan"), float("nan")
    assert key_of({"k": a}, ["k"]) is NAN_KEY
    assert key_of({"k": b, "j": 1}, ["k", "j"]) == (NAN_KEY, 1)
    assert key_of({"k": [a, 1.0]}, ["k"]) == (NAN_KEY, 1.0)
    assert len({key_of({"k": a}, ["k"]), key_of({"k": b}, ["k"])}) == 1
    assert pickle.loads(pickle.dumps(NAN_KEY)) is NAN_KEY
    assert math.isnan(NAN_KEY) and NAN_KEY != 1.0 and b == NAN_KEY


def _nan_streams() -> tuple[Stream, Stream]:
    events = [
        (1, 3, {"k": float("nan"), "v": 1}),
        (2, 4, {"k": float("nan"), "v": 2}),
        (2, 4, {"k": 1.0, "v": 3}),
    ]
    right = Stream.from_cht([(2, 3, {"k": float("nan"), "w": 9})])
    return Stream.from_cht(events, key="k"), right


def _by_nan(out: Any) -> dict[str, Any]:
    """A keyed output with its NaN key spelled ``"nan"`` (a dict cannot
    look a NaN up by another NaN)."""
    return {"nan" if math.isnan(k) else k: v for k, v in out.items()}


NAN_EXPECTED = {
    "tumbling": {"nan": Cht([(0, 5, 2)]), 1.0: Cht([(0, 5, 1)])},
    "count": {"nan": Cht([(1, 2, 1), (2, 3, 1)]), 1.0: Cht([(2, 3, 1)])},
    "snapshot": {"nan": Cht([(1, 2, 1), (2, 3, 2), (3, 4, 1)]), 1.0: Cht([(2, 4, 1)])},
    "join": {"nan": Cht([(2, 3, {"k": math.nan, "v": 1, "w": 9})])},
}


def _nan_queries() -> dict[str, Stream]:
    s, right = _nan_streams()
    return {
        "tumbling": s.tumbling_window(5).aggregate(cnt),
        "count": s.count_window(1).aggregate(cnt),
        "snapshot": s.snapshot_window().aggregate(cnt),
        "join": s.where(lambda p: p["v"] == 1).join(right, on="k"),
    }


def _same(got: dict[str, Any], expected: dict[str, Any]) -> bool:
    # a NaN in a payload compares by Cht's own rule (NaN matches NaN)
    return got.keys() == expected.keys() and all(got[k] == expected[k] for k in expected)


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_nan_keys_are_one_group_in_process(engine: str) -> None:
    """Each NaN event was a group of its own (NaN != NaN)."""
    for name, q in _nan_queries().items():
        assert _same(_by_nan(q.to_cht(engine=engine)), NAN_EXPECTED[name]), name


@pytest.mark.spark
def test_nan_keys_are_one_group_on_spark(spark: Any) -> None:
    """Spark grouped NaN keys of tumbling windows together, but its
    output was split per row (snapshot windows into three NaN groups)."""
    for name, q in _nan_queries().items():
        assert _same(_by_nan(q.to_cht(engine="spark")), NAN_EXPECTED[name]), name


@pytest.mark.spark
@pytest.mark.parametrize("elements", list(NO_LIVE_EVENTS.values()), ids=list(NO_LIVE_EVENTS))
def test_a_union_with_a_keyed_from_events_stream_without_events(
    spark: Any, elements: Any
) -> None:
    """The empty scalar stream's ``value`` column (there for a window over
    it) is no column of a union with a stream of dict rows (black-box round
    18, B4)."""
    a = Stream.from_cht([(0, 10, {"k": "y", "v": 2})], key="k")
    empty = Stream.from_events(elements, key="k")
    for q in (empty.union(a), a.union(empty)):
        for engine in ("reference", "spark"):
            got: Any = q.to_cht(engine=engine)
            assert [list(e.payload.items()) for e in got["y"]] == [[("k", "y"), ("v", 2)]]
