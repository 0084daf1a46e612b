"""Queries on Spark: every path checked against the reference evaluator.

One generated event table (three keys, one of them null; points and
intervals with shared endpoints) is reused by the differential tests; the
rest are hand-computed. All share the session-wide ``spark`` fixture, and
each test runs as few Spark jobs as it can.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from test_query import (
    READINGS,
    ROWS_SEED,
    WINDOWS,
    Mean,
    Span,
    field_of,
    fragile,
    make_rows,
    median,
    median_untyped,
    range_untyped,
    rises,
    rows_cht,
    twa,
    value_range,
)

from udm.host import (
    INFINITY,
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    InputClipping,
    IntervalEvent,
    OutputPolicy,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    WindowDescriptor,
    cht_equal,
    evaluate,
    evaluate_by_key,
)
from udm.host.errors import InvalidEventError
from udm.host.invoke import compute_window
from udm.host.query import Stream
from udm.host.spark.evaluate import evaluate_window
from udm.sdk import aggregate

pytestmark = pytest.mark.spark


@aggregate
def first_two(values: list[float]) -> list[float]:
    """Order-sensitive: shows which payloads come first."""
    return list(values[:2])


@aggregate(time_sensitive=True)
def twa_list(events: list[IntervalEvent[float]], window: WindowDescriptor) -> list[Any]:
    """Order-sensitive and time-sensitive: the lifetimes and payloads in order."""
    return [(e.start, e.end, e.payload) for e in events]


ROWS = make_rows(ROWS_SEED)
CHT = rows_cht(ROWS)
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def events(spark: Any) -> Any:
    df = spark.createDataFrame(ROWS, "sensor string, ts long, te long, temp double")
    return df.cache()


def keyed(events: Any) -> Stream:
    # the rows have null sensors on purpose: a group of their own, as in the reference
    return Stream.from_dataframe(events, start="ts", end="te", key="sensor", on_null_key="keep")


CLIPPING = {
    "hopping": "none",
    "tumbling": "full",
    "snapshot": "left",
    "count_by_start": "right",
    "count_by_end": "none",
}


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: w.kind)
def test_window_kinds_match_reference(events: Any, window: Any) -> None:
    clipping = CLIPPING[window.kind]
    got = (
        keyed(events)
        .window(window)
        .aggregate(med=(median, "temp"), mean=(Mean, "temp"), twa=(twa, "temp"))
        .to_cht()
    )
    assert isinstance(got, dict)
    for name, udm in (("med", median), ("mean", Mean), ("twa", twa)):
        assert field_of(got, name) == evaluate_by_key(CHT, "sensor", window, udm, value="temp")
    # clipping changes only the time-sensitive aggregate: run it once clipped
    clipped = keyed(events).window(window).aggregate(twa, value="temp", input_clipping=clipping)
    assert clipped.to_cht() == evaluate_by_key(
        CHT, "sensor", window, twa, value="temp", input_clipping=clipping
    )


@pytest.mark.parametrize(
    "window", [HoppingWindow(10, 3), CountByStartWindow(2)], ids=lambda w: w.kind
)
def test_partial_aggregation_matches_reference(events: Any, window: Any) -> None:
    """On request (by default chosen from a sample on grid windows, never
    on count and snapshot windows)."""
    query = (
        keyed(events)
        .window(window)
        .aggregate(mean=(Mean, "temp"), span=(Span, "temp"), partial=True)
    )
    assert "partial states folded" in query.explain() or "partial states per" in query.explain()
    if not window.is_grid:
        default = keyed(events).window(window).aggregate(Mean, value="temp")
        assert "partial states" not in default.explain()
    out = query.to_dataframe()
    assert "MapInArrow" in out._jdf.queryExecution().executedPlan().toString()
    got = query.to_cht()
    assert isinstance(got, dict)
    assert field_of(got, "mean") == evaluate_by_key(CHT, "sensor", window, Mean, value="temp")
    assert field_of(got, "span") == evaluate_by_key(CHT, "sensor", window, Span, value="temp")


def test_partial_aggregation_can_be_turned_off(events: Any) -> None:
    query = keyed(events).hopping_window(10, 3).aggregate(Mean, value="temp", partial=False)
    assert "events shuffled by (sensor); windows assigned" in query.explain()
    assert query.to_cht() == evaluate_by_key(
        CHT, "sensor", HoppingWindow(10, 3), Mean, value="temp"
    )
    count = keyed(events).count_window(2).aggregate(Mean, value="temp", partial=False)
    assert "distinct endpoints numbered, windows assigned" in count.explain()
    assert "each window is a slice of the events sorted by start" in count.explain()
    assert count.to_cht() == evaluate_by_key(
        CHT, "sensor", CountByStartWindow(2), Mean, value="temp"
    )


@pytest.mark.parametrize("window", [WINDOWS[0], WINDOWS[4]], ids=lambda w: w.kind)
def test_time_sensitive_operator_matches_reference(events: Any, window: Any) -> None:
    """rises has no result annotation: its struct type is inferred from the values."""
    query = keyed(events).window(window).apply(rises, value="temp")
    out = query.to_dataframe()
    assert out.columns == ["start", "end", "sensor", "frm", "to"]
    assert query.to_cht() == evaluate_by_key(CHT, "sensor", window, rises, value="temp")


def test_timestamps_in_timestamps_out(spark: Any) -> None:
    minute = dt.timedelta(minutes=1)
    df = spark.createDataFrame(
        [("a", T0 + k * minute, float(k)) for k in (0, 1, 5, 11, 12)] + [("b", T0, 9.0)],
        "sensor string, ts timestamp, temp double",
    )
    out = (
        Stream.from_dataframe(df, start="ts", key="sensor")
        .tumbling_window(dt.timedelta(minutes=10))
        .aggregate(median, value="temp")
        .to_dataframe()
    )
    assert [(f.name, f.dataType.simpleString()) for f in out.schema.fields] == [
        ("start", "timestamp"),
        ("end", "timestamp"),
        ("sensor", "string"),
        ("median", "double"),
    ]
    rows = [tuple(r) for r in out.orderBy("sensor", "start").collect()]
    naive = T0.replace(tzinfo=None)  # collect() shows UTC wall clock (session time zone)
    assert rows == [
        (naive, naive + 10 * minute, "a", 1.0),
        (naive + 10 * minute, naive + 20 * minute, "a", 11.5),
        (naive, naive + 10 * minute, "b", 9.0),
    ]


def test_string_times_and_counted_drops(spark: Any) -> None:
    df = spark.createDataFrame(
        [
            ("2024-01-01 00:00:00", "2024-01-01 00:00:30", 1.0),
            ("2024-01-01 00:00:10", "2024-01-01 00:00:05", 2.0),  # ends before it starts
            ("yesterday", "2024-01-01 00:00:20", 3.0),  # unparsable
            ("2024-01-01 00:00:20", None, 4.0),  # interval without an end
            ("2024-01-01 00:00:40", "2024-01-01 00:00:50", 5.0),
        ],
        "t0 string, t1 string, v double",
    )
    stream = Stream.from_dataframe(df, start="t0", end="t1", on_invalid="drop")
    query = stream.tumbling_window(dt.timedelta(minutes=1)).aggregate(Mean, value="v")
    assert query.to_cht() == Cht([(T0_TICKS, T0_TICKS + 60_000_000, 3.0)])
    assert query.metrics.invalid_rows() == {
        "'t0' is not a valid time": 1,
        "'t1' is null (interval events need an end; use shape='edge' for open events)": 1,
        "'t1' is not after 't0'": 1,
    }
    assert query.metrics.dropped == 3
    # the stream on_invalid was passed to reports the run built on it
    assert stream.metrics.invalid_rows() == query.metrics.invalid_rows()
    assert stream.metrics.dropped == 3


T0_TICKS = 1_704_067_200_000_000


def test_invalid_rows_fail_naming_column_and_row(spark: Any) -> None:
    df = spark.createDataFrame(
        [("a", 1, 1.0), ("a", None, 2.0)], "sensor string, ts long, temp double"
    )
    query = (
        Stream.from_dataframe(df, start="ts", key="sensor")
        .tumbling_window(10)
        .aggregate(median, value="temp")
    )
    with pytest.raises(InvalidEventError) as err:
        query.to_cht()
    assert str(err.value) == (
        'invalid event: \'ts\' is null; row: {"sensor":"a","ts":null,"temp":2.0}. '
        "1 invalid row in all (1 'ts' is null); the first 1: "
        '{"sensor":"a","ts":null,"temp":2.0} (\'ts\' is null). '
        "Fix the data, or pass on_invalid='drop' to drop such rows and count them "
        "(stream.metrics.invalid_rows())"
    )


@pytest.mark.parametrize(
    "action",
    [
        lambda s: s.to_dataframe().count(),
        lambda s: s.to_dataframe().groupBy("k").sum("v").collect(),
        lambda s: s.select("v").to_dataframe().count(),
    ],
    ids=["count", "payload-only-aggregate", "projected-count"],
)
def test_invalid_rows_fail_actions_that_read_no_time_column(spark: Any, action: Any) -> None:
    # Spark prunes unread columns: the check must not live on the start column
    df = spark.createDataFrame(
        [("a", 1, 5, 1.0), ("a", 9, 3, 3.0)], "k string, s long, e long, v double"
    )
    stream = Stream.from_dataframe(df, start="s", end="e", key="k")
    row = r'row: \{"k":"a","s":9,"e":3,"v":3.0\}'
    with pytest.raises(Exception, match=r"invalid event: 'e' is not after 's'; " + row):
        action(stream)


@pytest.mark.parametrize("window", ["tumbling", "hopping", "snapshot", "count"])
def test_a_value_column_the_udm_cannot_take_is_named(spark: Any, window: str) -> None:
    from udm.host.spark.errors import SparkUdmInvocationError

    df = spark.createDataFrame([("a", 0, "x"), ("a", 60, "y")], "k string, ts long, v string")
    s = Stream.from_dataframe(df, start="ts", key="k")
    windowed = {
        "tumbling": s.tumbling_window(100),
        "hopping": s.hopping_window(100, 10),
        "snapshot": s.snapshot_window(),
        "count": s.count_window(2),
    }[window]
    with pytest.raises(SparkUdmInvocationError) as err:
        windowed.aggregate("stats.mean", value="v").to_cht()
    message = str(err.value)
    assert message.startswith("UDM 'mean' failed on window [")
    # the first failing window depends on which partition runs first
    assert re.search(
        r" of key 'a': TypeError: stats.mean takes numbers, got '[xy]' \(str\); "
        r"values from column 'v'$",
        message,
    )


def test_timestamp_ntz_and_date_columns(spark: Any) -> None:
    day = dt.timedelta(days=1)
    ntz = spark.createDataFrame(
        [
            (dt.datetime(2024, 1, 1, 0, 0, 5), dt.datetime(2024, 1, 1, 0, 0, 50), 2.0),
            (dt.datetime(2024, 1, 1, 0, 1, 0), dt.datetime(2024, 1, 1, 0, 1, 10), 4.0),
        ],
        "t0 timestamp_ntz, t1 timestamp_ntz, v double",
    )
    query = (
        Stream.from_dataframe(ntz, start="t0", end="t1")
        .tumbling_window(dt.timedelta(minutes=1))
        .aggregate(Mean, value="v")
    )
    assert query.to_cht() == Cht(
        [
            (T0_TICKS, T0_TICKS + 60_000_000, 2.0),
            (T0_TICKS + 60_000_000, T0_TICKS + 120_000_000, 4.0),
        ]
    )
    out = query.to_dataframe()
    assert [f.dataType.simpleString() for f in out.schema.fields[:2]] == ["timestamp_ntz"] * 2
    minute = dt.timedelta(minutes=1)
    naive = T0.replace(tzinfo=None)
    assert sorted(tuple(r) for r in out.collect()) == [
        (naive, naive + minute, 2.0),
        (naive + minute, naive + 2 * minute, 4.0),
    ]
    dates = spark.createDataFrame(
        [(dt.date(2024, 1, 1), 1.0), (dt.date(2024, 1, 1), 3.0), (dt.date(2024, 1, 3), 7.0)],
        "d date, v double",
    )
    out = Stream.from_dataframe(dates, start="d").tumbling_window(day).aggregate(Mean, value="v")
    rows = sorted(tuple(r) for r in out.to_dataframe().collect())
    assert rows == [(naive, naive + day, 2.0), (naive + 2 * day, naive + 3 * day, 7.0)]


def test_quotes_dots_and_backslashes_in_column_names(spark: Any) -> None:
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("it's", T.LongType()),
            T.StructField("v.1", T.DoubleType()),
            T.StructField("back\\slash", T.StringType()),
        ]
    )
    df = spark.createDataFrame([(1, 1.0, "a"), (None, 2.0, "b\\'c")], schema)
    query = Stream.from_dataframe(df, start="it's").tumbling_window(10).aggregate(Mean, value="v.1")
    with pytest.raises(InvalidEventError) as err:
        query.to_cht()
    row = '{"it\'s":null,"v.1":2.0,"back\\\\slash":"b\\\\\'c"}'
    assert str(err.value) == (
        f"""invalid event: "it's" is null; row: {row}. 1 invalid row in all (1 "it's" is """
        f"""null); the first 1: {row} ("it's" is null). """
        "Fix the data, or pass on_invalid='drop' to drop such rows and count them "
        "(stream.metrics.invalid_rows())"
    )
    dropped = Stream.from_dataframe(df, start="it's", on_invalid="drop")
    counted = dropped.tumbling_window(10).aggregate(Mean, value="v.1")
    assert counted.to_cht() == Cht([(0, 10, 1.0)])
    assert counted.metrics.invalid_rows() == {'"it\'s" is null': 1}
    # keys and values with dots and backticks through every worker path
    rows = [("a.b", 1, 2.0), ("a.b", 4, 4.0), ("c`d", 2, 8.0), ("c`d", 12, 1.0)]
    df = spark.createDataFrame(rows, "`k.1` string, ts long, `v``2` double")
    stream = Stream.from_dataframe(df, start="ts", key="k.1")
    cht = {
        "a.b": [(0, 10, 3.0)],
        "c`d": [(0, 10, 8.0), (10, 20, 1.0)],
    }
    for partial in (True, False):
        query = stream.tumbling_window(10).aggregate(Mean, value="v`2", partial=partial)
        out = query.to_dataframe()
        assert out.columns == ["start", "end", "k.1", "mean"]
        got = sorted((r["k.1"], r["start"], r["end"], r["mean"]) for r in out.collect())
        assert got == sorted((k, s, e, m) for k, spans in cht.items() for s, e, m in spans)
    snapshot = stream.snapshot_window().aggregate(Mean, value="v`2").to_dataframe()
    got = sorted(tuple(r) for r in snapshot.collect())
    assert got == [(1, 2, "a.b", 2.0), (2, 3, "c`d", 8.0), (4, 5, "a.b", 4.0), (12, 13, "c`d", 1.0)]
    counted = stream.count_window(2).aggregate(Mean, value="v`2").to_dataframe()
    assert sorted(tuple(r) for r in counted.collect()) == [(4, 5, "a.b", 3.0), (12, 13, "c`d", 4.5)]
    filtered = (
        stream.where(lambda r: r["v`2"] > 1.5).tumbling_window(10).aggregate(Mean, value="v`2")
    )
    got = sorted(tuple(r) for r in filtered.to_dataframe().collect())
    assert got == [(0, 10, "a.b", 3.0), (0, 10, "c`d", 8.0)]


def test_missing_columns_and_wrong_value_types_fail_before_running(events: Any) -> None:
    with pytest.raises(KeyError, match=r"end column 'stop' is not in the DataFrame; its columns"):
        Stream.from_dataframe(events, start="ts", end="stop")
    with pytest.raises(KeyError, match=r"value column\(s\) \['humidity'\] of 'median'"):
        keyed(events).tumbling_window(10).aggregate(median, value="humidity").to_dataframe()
    with pytest.raises(TypeError, match="UDM 'median' takes float values, but column 'sensor'"):
        keyed(events).tumbling_window(10).aggregate(median, value="sensor").to_dataframe()


def test_udm_failure_names_udm_window_and_key(events: Any) -> None:
    query = keyed(events).tumbling_window(10).aggregate(fragile, value="temp")
    with pytest.raises(
        UdmInvocationError,
        match=r"UDM 'fragile' failed on window \[\d+, \d+\) "
        r"of key '?\w+'?: ArithmeticError: value above 18",
    ):
        query.to_cht()


@aggregate
def fragile_untyped(values):  # type: ignore[no-untyped-def]
    """No annotation: its Spark type is found from its values while the
    query is planned, so its failure surfaces there."""
    if any(v > 18 for v in values):
        raise ArithmeticError("value above 18")
    return sum(values)


def test_udm_failure_while_typing_results_is_a_udm_error(events: Any) -> None:
    query = keyed(events).tumbling_window(10).aggregate(fragile_untyped, value="temp")
    with pytest.raises(
        UdmInvocationError, match=r"UDM 'fragile_untyped' failed on window .*value above 18"
    ):
        query.to_cht()


def test_edge_events_need_a_watermark_for_grid_windows(spark: Any) -> None:
    df = spark.createDataFrame(
        [(1, 4, 2.0), (3, None, 4.0), (12, 14, 6.0)], "ts long, te long, v double"
    )
    stream = Stream.from_dataframe(df, start="ts", end="te", shape="edge")
    with pytest.raises(ValueError, match=r"never ends are infinitely many .* pass watermark="):
        stream.tumbling_window(10).aggregate(Mean, value="v").to_cht()
    got = stream.tumbling_window(10).aggregate(Mean, value="v", watermark=40, emit_empty=True)
    cht = Cht([(1, 4, {"v": 2.0}), (3, 2**63 - 1, {"v": 4.0}), (12, 14, {"v": 6.0})])
    expected = evaluate(cht, TumblingWindow(10), Mean, value="v", watermark=40, emit_empty=True)
    assert (
        got.to_cht() == expected == Cht([(0, 10, 3.0), (10, 20, 5.0), (20, 30, 4.0), (30, 40, 4.0)])
    )
    # snapshot windows end at every endpoint: the open event's last one is infinite
    snap = stream.snapshot_window().aggregate(Mean, value="v").to_dataframe()
    assert snap.where(F.col("end") == 2**63 - 1).collect()[0]["mean"] == 4.0


@pytest.mark.parametrize(("keys", "partial"), [((), False), (("k",), False), (("k",), True)])
@pytest.mark.parametrize("bad", [-(2**63) + 1, INFINITY - 5])
def test_grid_windows_refuse_events_at_the_ends_of_time(
    spark: Any, keys: tuple[str, ...], partial: bool, bad: int
) -> None:
    """Before, an event at tick INFINITY - 5 vanished from tumbling windows
    (its window's end overflowed int64) or got windows wrapping to negative
    ends, and one at MIN_TIME vanished. The host refuses such an event
    (test_engine); Spark fails the query with the same text."""
    rows = [("a", 5, 1.0), ("a", bad, 2.0), ("b", 7, 3.0)]
    df = spark.createDataFrame(rows, "k string, ts long, v double")
    stream = Stream.from_dataframe(df, start="ts")
    if keys:
        stream = stream.group_apply(*keys)
    query = stream.hopping_window(size=100, hop=10).aggregate(Mean, value="v", partial=partial)
    with pytest.raises(Exception) as err:
        query.to_dataframe().collect()
    shown = "-inf" if bad == -(2**63) + 1 else bad
    assert f"event [{shown}, {bad + 1}) cannot be windowed by HoppingWindow(size=100, hop=10)" in (
        str(err.value)
    )


def test_udfs_columns_and_chaining_match_the_reference_engine(events: Any) -> None:
    query = (
        keyed(events)
        .where(F.col("temp") > 1.0)
        .where(lambda p: p["temp"] != 5.0)
        .select(
            "temp", f=lambda p: p["temp"] * 9 / 5 + 32, hot=(lambda p: p["temp"] > 10, "boolean")
        )
        .hopping_window(12, 4)
        .aggregate(hi=(value_range, "f"), n=(Span, "f"))
        .where("n > 2")
        .tumbling_window(20)
        .aggregate(Mean, value="hi_hi")
    )
    spark_out = query.to_cht(engine="spark")
    # "n > 2" comes after UDFs and a window: the reference engine has Spark
    # evaluate it over its own rows (it refused to run the query before)
    in_process = query.to_cht(engine="reference")
    reference = Stream.from_cht(CHT, key="sensor")
    expected = (
        reference.where(lambda p: p["temp"] > 1.0 and p["temp"] != 5.0)
        .select("temp", f=lambda p: p["temp"] * 9 / 5 + 32)
        .hopping_window(12, 4)
        .aggregate(hi=(value_range, "f"), n=(Span, "f"))
        .where(lambda p: p["n"] > 2)
        .tumbling_window(20)
        .aggregate(Mean, value="hi_hi")
        .to_cht()
    )
    # Mean merges partial sums of non-integral values: equal up to rounding
    assert isinstance(spark_out, dict) and isinstance(expected, dict)
    assert set(spark_out) == set(expected) == {"a", "b", None}
    assert all(cht_equal(spark_out[k], expected[k], rel_tol=1e-12) for k in expected)
    assert in_process == expected  # the same arithmetic in the same order: exactly
    # a Spark select after a window, too
    selected = (
        keyed(events)
        .tumbling_window(10)
        .aggregate(n=(Span, "temp"))
        .select("n", twice=F.col("n") * 2)
        .where(F.col("twice") > 2)
    )
    assert selected.to_cht(engine="reference") == selected.to_cht(engine="spark")
    last = keyed(events).tumbling_window(10).aggregate(s=(Span, "temp")).where("s > 1")
    assert last.to_cht(engine="reference") == last.to_cht(engine="spark")


def test_result_types_inferred_from_values(events: Any) -> None:
    query = (
        keyed(events)
        .snapshot_window()
        .aggregate(med=(median_untyped, "temp"), r=(range_untyped, "temp"))
    )
    out = query.to_dataframe()
    assert [(f.name, f.dataType.simpleString()) for f in out.schema.fields] == [
        ("start", "bigint"),
        ("end", "bigint"),
        ("sensor", "string"),
        ("med", "double"),
        ("r_lo", "double"),
        ("r_n", "bigint"),
    ]
    got = query.to_cht()
    assert isinstance(got, dict)
    window = WINDOWS[2]
    assert field_of(got, "med") == evaluate_by_key(
        CHT, "sensor", window, median_untyped, value="temp"
    )
    ranges = evaluate_by_key(CHT, "sensor", window, range_untyped, value="temp")
    for key, cht in ranges.items():
        flat = Cht(
            IntervalEvent(e.start, e.end, {"r_lo": e.payload["lo"], "r_n": e.payload["n"]})
            for e in cht
        )
        mine = Cht(
            IntervalEvent(e.start, e.end, {k: e.payload[k] for k in ("r_lo", "r_n")})
            for e in got[key]
        )
        assert mine == flat


@aggregate
def half_count(values: list[float]) -> int:
    """Annotated int, but returns len / 2."""
    return len(values) / 2  # type: ignore[return-value]


def test_a_float_result_does_not_fit_an_integer_type(spark: Any) -> None:
    """pyarrow truncates 21.5 into bigint as 21; udm refuses it as it does
    any other result that does not fit the declared type."""
    df = spark.createDataFrame([("a", 1, 20.0), ("a", 4, 23.0)], "k string, t long, v double")
    mean = Stream.from_dataframe(df, start="t", key="k").tumbling_window(10)
    with pytest.raises(Exception, match=r"returned 21\.5, which does not fit the result type"):
        mean.aggregate("stats.mean", value="v", returns="bigint").to_dataframe().collect()
    # a whole float fits an integer type exactly: two events give 1.0
    rows = mean.aggregate(half_count, value="v").to_dataframe().collect()
    assert [r.half_count for r in rows] == [1]
    three = df.union(spark.createDataFrame([("a", 5, 1.0)], df.schema))
    odd = Stream.from_dataframe(three, start="t", key="k").tumbling_window(10)
    with pytest.raises(Exception, match=r"'half_count' on window \[0, 10\).* returned 1\.5"):
        odd.aggregate(half_count, value="v").to_dataframe().collect()


@aggregate
def huge_untyped(values):  # type: ignore[no-untyped-def]
    return 2**70 if values[0] > 2 else 1


@aggregate
def count_untyped(values):  # type: ignore[no-untyped-def]
    return len(values)


def test_an_untyped_result_that_does_not_fit_names_its_udm_and_window(spark: Any) -> None:
    """Untyped results are typed from their values after the fact; one that
    fits no Spark type said "result 0", not which UDM, window or key."""
    df = spark.createDataFrame([("a", 1, 3.0), ("a", 12, 1.5)], "k string, t long, v double")
    query = (
        Stream.from_dataframe(df, start="t", key="k")
        .tumbling_window(10)
        .aggregate(n=(count_untyped, "v"), h=(huge_untyped, "v"))
    )
    wanted = (
        "UDM 'huge_untyped' (output [0, 10) of key 'a') returned 1180591620717411303424, "
        "which does not fit the result type int64"
    )
    with pytest.raises(Exception, match=re.escape(wanted)):
        query.to_dataframe().collect()
    with pytest.raises(TypeError, match=re.escape(wanted)):
        query.to_cht()  # udm's actions raise the error behind Spark's, as in-process


def test_array_and_struct_keys_are_tuples_in_to_cht(spark: Any) -> None:
    """Lists and dicts cannot be dict keys: to_cht failed with a bare
    "unhashable type: 'list'" on either engine (to_dataframe worked)."""
    df = spark.createDataFrame(
        [([1, 2], (1, "x"), 1, 1.0), ([3], (2, "y"), 2, 5.0), ([1, 2], (1, "x"), 3, 3.0)],
        "k array<int>, s struct<n: int, c: string>, ts long, v double",
    )
    for key, want in (
        ("k", {(1, 2): [(0, 10, 2.0)], (3,): [(0, 10, 5.0)]}),
        ("s", {(("n", 1), ("c", "x")): [(0, 10, 2.0)], (("n", 2), ("c", "y")): [(0, 10, 5.0)]}),
    ):
        query = (
            Stream.from_dataframe(df, start="ts", key=key)
            .tumbling_window(10)
            .aggregate("stats.mean", value="v")
        )
        expected = {k: Cht(v) for k, v in want.items()}
        assert query.to_cht(engine="spark") == expected
        assert query.to_cht(engine="reference") == expected
    rows = (
        Stream.from_dataframe(df, start="ts", key="k")
        .tumbling_window(10)
        .aggregate("stats.mean", value="v")
        .to_dataframe()
        .orderBy("mean")
        .collect()
    )
    assert [tuple(r) for r in rows] == [(0, 10, [1, 2], 2.0), (0, 10, [3], 5.0)]


def test_in_memory_source_runs_on_spark_with_timestamps(spark: Any) -> None:
    stream = Stream.from_cht(READINGS, key="sensor", timestamps=True)
    query = stream.tumbling_window(10).aggregate(value_range, value="temp")
    out = query.to_dataframe(spark)
    assert out.columns == ["start", "end", "sensor", "lo", "hi"]
    first = out.where("sensor = 'a'").orderBy("start").first()
    assert first is not None
    epoch = dt.datetime(1970, 1, 1)
    assert tuple(first) == (epoch, epoch + dt.timedelta(microseconds=10), "a", 2.0, 4.0)
    assert query.to_cht(engine="spark") == query.to_cht(engine="reference")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.integers(1, 6), st.sampled_from([0.5, 1.0, 10.0, 2.0])),
        max_size=8,
    ),
    st.sampled_from(["none", "left", "right", "full"]),
    st.booleans(),
)
def test_window_evaluation_shortcut_equals_compute_window(
    members: list[tuple[int, int, float]], clipping: str, presorted: bool
) -> None:
    """The worker skips payload sort keys when lifetimes do not tie; with
    or without ties, and in any input order, it equals compute_window."""
    window = WindowDescriptor(3, 11)
    if presorted:
        members = sorted(members, key=lambda m: (m[0], m[0] + m[1]))
    starts = [s for s, _, _ in members]
    ends = [s + d for s, d, _ in members]
    values = [v for _, _, v in members]
    events = [IntervalEvent(s, e, v) for s, e, v in zip(starts, ends, values, strict=True)]
    clip = InputClipping(clipping)
    for udm, policy in ((first_two(), OutputPolicy.ALIGN), (twa_list(), OutputPolicy.POINT_END)):
        expected = compute_window(udm, window, events, clip, policy)
        got = evaluate_window(udm, window, starts, ends, values, None, clip, policy)
        assert got == expected


@pytest.mark.parametrize(
    ("window", "watermark"),
    [(HoppingWindow(12, 4), INFINITY), (HoppingWindow(10, 4, offset=3), 44)],
    ids=["panes", "panes-offset-watermark"],
)
@pytest.mark.parametrize("bucket", [128, 2], ids=["bucket-128", "bucket-2"])
def test_pane_partial_aggregation_matches_reference(
    events: Any, window: Any, watermark: int, bucket: int, monkeypatch: Any
) -> None:
    """Point events are folded once per pane of gcd(size, hop) and panes
    merged per window; intervals go through windows; the result is the
    reference's. Buckets of 2 windows put panes into two buckets (including
    windows before time 0)."""
    monkeypatch.setattr("udm.host.spark.evaluate.BUCKET", bucket)
    query = (
        keyed(events)
        .window(window)
        .aggregate(Mean, value="temp", watermark=watermark, partial=True)
    )
    assert "folded once per pane" in query.explain()
    got = query.to_cht()
    assert isinstance(got, dict)
    want = evaluate_by_key(CHT, "sensor", window, Mean, value="temp", watermark=watermark)
    assert got == {k: v for k, v in want.items() if len(v)}
    # a time-sensitive UDA's state depends on its window: no panes
    mixed = (
        keyed(events)
        .window(window)
        .aggregate(mean=(Mean, "temp"), span=(Span, "temp"), partial=True)
    )
    assert "folded once per pane" not in mixed.explain()


GRID_ROWS = [
    # (site, line, ts, te, temp): ties in start and lifetime, intervals crossing
    # windows and buckets, a null key, points and a long event
    ("n", 1, 0, 1, 1.0),
    ("n", 1, 0, 1, 3.0),
    ("n", 1, 2, 9, 2.0),
    ("n", 1, 2, 9, 0.5),
    ("n", 2, 4, 5, 8.0),
    ("n", 1, 13, 14, 6.0),
    ("n", 1, 17, 40, 5.0),
    ("s", 1, -7, -6, 4.0),
    ("s", 1, 1, 30, 2.5),
    ("s", 1, 29, 30, 9.0),
    (None, 1, 3, 4, 7.0),
    (None, 1, 3, 11, 1.5),
]


def _site_line(
    spark: Any, rows: list[Any], keys: tuple[str, ...], window: Any
) -> tuple[Stream, Any]:
    """The stream of (site, line, ts, te, temp) rows, grouped by ``keys``,
    and the reference evaluator's answer for a UDM over ``window``."""
    df = spark.createDataFrame(rows, "site string, line int, ts long, te long, temp double")
    stream = Stream.from_dataframe(df, start="ts", end="te")
    if keys:
        stream = stream.group_apply(*keys)
    cht = Cht(IntervalEvent(s, e, {"site": k, "line": n, "temp": v}) for k, n, s, e, v in rows)

    def reference(udm: Any, **options: Any) -> Any:
        if not keys:
            return evaluate(cht, window, udm, value="temp", **options)
        by_key = evaluate_by_key(
            cht, lambda p: (p["site"], p["line"]), window, udm, value="temp", **options
        )
        return {k: v for k, v in by_key.items() if len(v)}

    return stream, reference


@pytest.mark.parametrize(
    "window",
    [HoppingWindow(6, 2), TumblingWindow(5), HoppingWindow(4, 6, offset=1)],
    ids=["hopping", "tumbling", "gaps"],
)
@pytest.mark.parametrize("keys", [("site", "line"), ()], ids=["two-keys", "no-keys"])
@pytest.mark.parametrize("bucket", [128, 2], ids=["bucket-128", "bucket-2"])
def test_grid_windows_match_reference(
    spark: Any, window: Any, keys: tuple[str, ...], bucket: int, monkeypatch: Any
) -> None:
    """Hopping and tumbling windows are assigned in the worker: ties fall
    back to the canonical order, intervals reach every window (and bucket
    of windows) they overlap, null and composite keys group as in the
    reference, and a stream without keys is spread over buckets."""
    monkeypatch.setattr("udm.host.spark.evaluate.BUCKET", bucket)
    stream, reference = _site_line(spark, GRID_ROWS, keys, window)

    assert "in the worker" in stream.window(window).aggregate(Mean, value="temp").explain()
    for partial in (True, False):
        got = stream.window(window).aggregate(
            mean=(Mean, "temp"), span=(Span, "temp"), partial=partial
        )
        got_cht = got.to_cht()
        if keys:
            assert field_of(got_cht, "mean") == reference(Mean)
            assert field_of(got_cht, "span") == reference(Span)
        else:
            assert Cht(
                IntervalEvent(e.start, e.end, e.payload["mean"]) for e in got_cht
            ) == reference(Mean)
    order = stream.window(window).aggregate(first_two, value="temp", input_clipping="left")
    assert order.to_cht() == reference(first_two, input_clipping="left")
    lifetimes = stream.window(window).aggregate(twa_list, value="temp", input_clipping="full")
    assert lifetimes.to_cht() == reference(twa_list, input_clipping="full")


POINT_ROWS = [
    # (site, line, ts, temp): ties in start (payloads out of order), a null
    # key, events in one window, in ten, and between windows
    ("n", 1, 0, 3.0),
    ("n", 1, 0, 1.0),
    ("n", 1, 0, 2.0),
    ("n", 1, 4, 8.0),
    ("n", 2, 4, 0.5),
    ("n", 1, 13, 6.0),
    ("s", 1, -7, 4.0),
    ("s", 1, 29, 9.0),
    ("s", 1, 29, -9.0),
    (None, 1, 3, 7.0),
    (None, 1, 11, 1.5),
]


@pytest.mark.parametrize(
    "window",
    [HoppingWindow(10, 1), TumblingWindow(5), HoppingWindow(4, 6, offset=1)],
    ids=["hopping", "tumbling", "gaps"],
)
@pytest.mark.parametrize("keys", [("site", "line"), ()], ids=["two-keys", "no-keys"])
@pytest.mark.parametrize("bucket", [128, 3], ids=["bucket-128", "bucket-3"])
def test_point_grid_windows_match_reference(
    spark: Any, window: Any, keys: tuple[str, ...], bucket: int, monkeypatch: Any
) -> None:
    """A point source under aggregates without partial states: each
    window's values (or point events, for the time-sensitive twa_list) are
    a slice of its key's (or bucket's) events sorted by start, ties by
    payload, so an order-sensitive UDA sees the canonical order; the output
    is the reference's."""
    monkeypatch.setattr("udm.host.spark.evaluate.BUCKET", bucket)
    df = spark.createDataFrame(POINT_ROWS, "site string, line int, ts long, temp double")
    stream = Stream.from_dataframe(df, start="ts")
    if keys:
        stream = stream.group_apply(*keys)
    cht = Cht(
        IntervalEvent(s, s + 1, {"site": k, "line": n, "temp": v}) for k, n, s, v in POINT_ROWS
    )
    udms = {"med": median, "mean": Mean, "first": first_two, "seen": twa_list}
    got = stream.window(window).aggregate(
        med=(median, "temp"),
        mean=(Mean, "temp"),
        first=(first_two, "temp"),
        seen=(twa_list, "temp"),
        partial=False,
    )
    assert "each window is a slice of the events sorted by start" in got.explain()
    got_cht = got.to_cht()
    for name, udm in udms.items():
        if keys:
            want = evaluate_by_key(cht, lambda p: (p["site"], p["line"]), window, udm, value="temp")
            assert field_of(got_cht, name) == {k: v for k, v in want.items() if len(v)}
        else:
            assert Cht(IntervalEvent(e.start, e.end, e.payload[name]) for e in got_cht) == evaluate(
                cht, window, udm, value="temp"
            )


@pytest.mark.parametrize(
    "window",
    [SnapshotWindow(), CountByStartWindow(2), CountByEndWindow(3)],
    ids=["snapshot", "count-by-start", "count-by-end"],
)
@pytest.mark.parametrize("keys", [("site", "line"), ()], ids=["two-keys", "no-keys"])
def test_endpoint_windows_match_reference(spark: Any, window: Any, keys: tuple[str, ...]) -> None:
    """Snapshot and count windows are assigned in the worker (without
    partial aggregation): composite and null keys group as in the
    reference, ties fall back to the canonical order, a stream without
    keys is one group, and the watermark keeps only finished windows."""
    rows = [*GRID_ROWS, ("s", 1, 35, INFINITY, 3.0)]  # an event that never ends
    stream, reference = _site_line(spark, rows, keys, window)

    def single(got: Any) -> Any:
        return got if keys else Cht(IntervalEvent(e.start, e.end, e.payload) for e in got)

    query = stream.window(window).aggregate(
        mean=(Mean, "temp"),
        first=(first_two, "temp"),
        spans=(twa_list, "temp"),
        input_clipping="full",
        output_policy="align",
        watermark=30,
    )
    assert "in the worker" in query.explain()
    got = query.to_cht()
    for name, udm in (("mean", Mean), ("first", first_two), ("spans", twa_list)):
        want = reference(udm, input_clipping="full", output_policy="align", watermark=30)
        if keys:
            assert field_of(got, name) == want
        else:
            assert Cht(IntervalEvent(e.start, e.end, e.payload[name]) for e in got) == want
    # without a watermark: the never-ending event's windows too (align)
    ops = stream.window(window).apply(rises, value="temp")
    assert single(ops.to_cht()) == reference(rises)


def test_a_sql_filter_after_the_keys_runs_in_a_reference_run(spark: Any) -> None:
    """from_dataframe(key=...) groups first; a SQL where() after it still
    runs in Spark before the in-process evaluation (a filter commutes with
    group_apply). Hand-computed: v > 1 keeps [2, 5) of a and [4, 9) of b."""
    df = spark.createDataFrame(
        [(0, 3, "a", 1), (2, 5, "a", 2), (4, 9, "b", 3)], "s long, e long, k string, v long"
    )
    stream = Stream.from_dataframe(df, start="s", end="e", key="k").where("v > 1")
    query = stream.tumbling_window(10).aggregate("stats.max", value="v")
    want = {"a": Cht([(0, 10, 2)]), "b": Cht([(0, 10, 3)])}
    assert query.to_cht(engine="reference") == want
    assert query.to_cht(engine="spark") == want


@aggregate(deterministic=False)
def draw(values):  # type: ignore[no-untyped-def]
    """Untyped (typed from its values) and different on every run."""
    import random

    return random.random()


def test_results_typed_from_values_are_cached_privately_and_released(
    spark: Any, monkeypatch: Any
) -> None:
    """Untyped results run once into a persisted table. Before, the cache
    answered any later query with the same plan (the same query built
    again over changed files got the old results) and was never released.
    Now a DataFrame's own actions agree with each other, a second build
    runs the UDMs again, and the cache goes with the output DataFrame."""
    import gc

    from udm.host.spark import evaluate as ev_mod

    seen: list[list[Any]] = []
    track = ev_mod.tracking_persisted

    @contextmanager
    def keep() -> Iterator[list[Any]]:
        with track() as got:
            seen.append(got)
            yield got

    monkeypatch.setattr(ev_mod, "tracking_persisted", keep)
    df = spark.createDataFrame([("a", 1, 1.0), ("a", 12, 2.0)], "k string, ts long, v double")
    query = (
        Stream.from_dataframe(df, start="ts", key="k")
        .tumbling_window(10)
        .aggregate(draw, value="v")
    )
    first = query.to_dataframe()
    once, again = first.collect(), first.collect()
    assert once == again  # one DataFrame: one run of the UDMs
    second = query.to_dataframe().collect()
    assert [r["draw"] for r in second] != [r["draw"] for r in once]
    (cached,) = seen[0]
    assert cached.storageLevel.useMemory
    del first
    gc.collect()
    assert not cached.storageLevel.useMemory and not cached.storageLevel.useDisk
    # to_cht() collects, then releases at once
    assert isinstance(query.to_cht(), dict)
    assert all(not t.storageLevel.useMemory for t in seen[-1])
