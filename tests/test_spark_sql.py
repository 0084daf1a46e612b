"""UDMs called from Spark SQL as table functions, against the reference."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from test_query import ROWS_SEED, Mean, make_rows, median, rises, rows_cht, value_range

from udm.host import Cht, IntervalEvent, SnapshotWindow, evaluate_by_key
from udm.host.registry import _LOCAL_UDMS, register_udm
from udm.host.spark.sql import register_sql
from udm.sdk import aggregate

pytestmark = pytest.mark.spark


def test_a_time_string_finer_than_a_microsecond_is_invalid(spark: Any, sql: Any) -> None:
    """Spark's parser would drop the digits below a microsecond silently."""
    spark.createDataFrame(
        [("a", "2026-01-01T12:01:00.0000009Z", 20.0)], "sensor string, ts string, temp double"
    ).createOrReplaceTempView("fine_strings")
    call = (
        "SELECT * FROM udm_mean(TABLE(fine_strings), start => 'ts', value => 'temp', "
        "window => 'tumbling', size => INTERVAL '5' MINUTE"
    )
    with pytest.raises(Exception) as err:
        sql(call + ")").collect()
    assert (
        "invalid event: 'ts' has sub-microsecond precision (udm ticks are microseconds); "
        'row: {"sensor":"a","ts":"2026-01-01T12:01:00.0000009Z","temp":20.0}. '
        "Fix the data: round the times to microseconds"
    ) in str(err.value)
    assert sql(call + ", on_invalid => 'drop')").collect() == []


@aggregate
def quantile(values: list[float], q: float = 0.5) -> float:
    return sorted(values)[int(q * (len(values) - 1))]


@pytest.fixture(scope="module")
def sql(spark: Any) -> Iterator[Any]:
    register_udm("stats.median", median)
    register_udm("stats.quantile", quantile)
    assert register_sql(spark, "stats.median") == "stats_median"
    assert register_sql(spark, "stats.quantile") == "stats_quantile"
    assert register_sql(spark, value_range, name="value_range") == "value_range"
    with pytest.raises(ValueError, match="already has a function named 'mean'; register"):
        register_sql(spark, Mean)
    assert register_sql(spark, Mean, name="udm_mean") == "udm_mean"
    assert register_sql(spark, rises) == "rises"
    readings = spark.createDataFrame(
        [
            ("a", 1, 2.0),
            ("a", 3, 4.0),
            ("a", 12, 1.0),
            ("b", 5, 7.0),
            ("b", 15, 3.0),
            ("b", 16, 5.0),
        ],
        "sensor string, ts long, temp double",
    )
    readings.createOrReplaceTempView("readings")
    events = spark.createDataFrame(
        make_rows(ROWS_SEED), "sensor string, ts long, te long, temp double"
    )
    events.createOrReplaceTempView("events")
    yield spark.sql
    # the overrides must not shadow udm-stats for the tests that follow
    for name in ("stats.median", "stats.quantile"):
        _LOCAL_UDMS.pop(name, None)


def test_median_per_sensor_on_tumbling_windows(sql: Any) -> None:
    rows = sql(
        "SELECT * FROM stats_median(TABLE(readings), start => 'ts', key => 'sensor', "
        "value => 'temp', window => 'tumbling', size => 10) ORDER BY sensor, start"
    ).collect()
    assert [tuple(r) for r in rows] == [
        (0, 10, "a", 3.0),
        (10, 20, "a", 1.0),
        (0, 10, "b", 7.0),
        (10, 20, "b", 4.0),
    ]
    assert rows[0].asDict() == {"start": 0, "end": 10, "sensor": "a", "median": 3.0}


def test_snapshot_windows_over_intervals_match_reference(sql: Any) -> None:
    rows = sql(
        "SELECT * FROM udm_mean(TABLE(events), start => 'ts', end => 'te', key => 'sensor', "
        # the rows have null keys: a group of their own, as evaluate_by_key has them
        "value => 'temp', window => 'snapshot', on_null_key => 'keep')"
    ).collect()
    got: dict[Any, list[IntervalEvent[Any]]] = {}
    for r in rows:
        got.setdefault(r["sensor"], []).append(IntervalEvent(r["start"], r["end"], r["mean"]))
    expected = evaluate_by_key(
        rows_cht(make_rows(ROWS_SEED)), "sensor", SnapshotWindow(), Mean, value="temp"
    )
    assert {k: Cht(v) for k, v in got.items()} == expected


def test_timestamps_intervals_arguments_and_struct_results(sql: Any, spark: Any) -> None:
    t0 = dt.datetime(2024, 1, 1)
    spark.createDataFrame(
        [(t0 + dt.timedelta(minutes=m), float(m)) for m in (0, 4, 8, 12)], "ts timestamp, v double"
    ).createOrReplaceTempView("minutes")
    hopping = (
        "window => 'hopping', size => INTERVAL '10' MINUTE, hop => INTERVAL '5' MINUTE, "
        "watermark => 1704067800000000"  # 00:10: only windows ending by then
    )
    q = sql(
        f"SELECT * FROM stats_quantile(TABLE(minutes), start => 'ts', value => 'v', {hopping}, "
        "args => '{\"q\": 1.0}') ORDER BY start"
    ).collect()
    five = dt.timedelta(minutes=5)
    assert [tuple(r) for r in q] == [(t0 - five, t0 + five, 4.0), (t0, t0 + 2 * five, 8.0)]
    r = sql(
        f"SELECT * FROM value_range(TABLE(minutes), start => 'ts', value => 'v', {hopping}) "
        "ORDER BY start"
    ).collect()
    assert [r_.asDict() for r_ in r] == [
        {"start": t0 - five, "end": t0 + five, "lo": 0.0, "hi": 4.0},
        {"start": t0, "end": t0 + 2 * five, "lo": 0.0, "hi": 8.0},
    ]


def test_bad_calls_say_what_to_pass(sql: Any) -> None:
    with pytest.raises(Exception, match="needs start => '<time column>'"):
        sql("SELECT * FROM udm_mean(TABLE(readings), window => 'tumbling', size => 10)").collect()
    with pytest.raises(Exception, match="unknown argument 'sise'"):
        sql("SELECT * FROM udm_mean(TABLE(readings), start => 'ts', sise => 10)").collect()
    with pytest.raises(Exception, match="result type of UDM 'rises' is unknown"):
        sql(
            "SELECT * FROM rises(TABLE(readings), start => 'ts', window => 'tumbling', size => 5)"
        ).collect()
    call = (
        "SELECT * FROM udm_mean(TABLE(readings), start => 'ts', value => 'temp', "
        "window => 'tumbling', size => 5"
    )
    with pytest.raises(Exception, match=r"shape => 'edgy': use 'point', 'interval' or 'edge'"):
        sql(call + ", shape => 'edgy')").collect()
    with pytest.raises(Exception, match=r"on_invalid => 'ignore': use 'raise' or 'drop'"):
        sql(call + ", on_invalid => 'ignore')").collect()
    with pytest.raises(Exception, match=r"args => '\{q: 1\}' is not JSON"):
        sql(call + ", args => '{q: 1}')").collect()
    # Spark's conversion error named neither the UDM nor the window
    with pytest.raises(Exception, match=r"UDM '\w+' on window \[0, 5\) returned .* decimal"):
        sql(call + ", returns => 'decimal(10,2)')").collect()


def test_invalid_rows_are_shown_with_their_times_as_written(spark: Any, sql: Any) -> None:
    spark.createDataFrame(
        [("a", "2026-01-01 12:01:00", None, 20.0), ("a", "garbage", None, 22.0)],
        "sensor string, ts string, te string, temp double",
    ).createOrReplaceTempView("bad_strings")
    call = (
        "SELECT * FROM udm_mean(TABLE(bad_strings), start => 'ts', value => 'temp', "
        "window => 'tumbling', size => INTERVAL '5' MINUTE)"
    )
    with pytest.raises(Exception) as err:
        sql(call).collect()
    assert (
        "invalid event: 'ts' is not a valid time; "
        'row: {"sensor":"a","ts":"garbage","te":null,"temp":22.0}. '
        "Fix the data, or pass on_invalid => 'drop'"
    ) in str(err.value)
    spark.createDataFrame(
        [("a", 8, 3, 1.0)], "sensor string, s long, e long, temp double"
    ).createOrReplaceTempView("bad_order")
    with pytest.raises(Exception) as err:
        sql(
            "SELECT * FROM udm_mean(TABLE(bad_order), start => 's', end => 'e', "
            "value => 'temp', window => 'tumbling', size => 5)"
        ).collect()
    assert (
        """invalid event: 'e' is not after 's'; row: {"sensor":"a","s":8,"e":3,"temp":1.0}"""
    ) in str(err.value)


@aggregate
def untyped_spread(values):  # type: ignore[no-untyped-def]
    return max(values) - min(values)


def test_result_type_from_the_returns_option_or_registration(spark: Any, sql: Any) -> None:
    """Python workers parse ``returns =>`` without a JVM; DDL given to
    register_sql is parsed on the driver."""
    assert register_sql(spark, untyped_spread, name="spread_sql") == "spread_sql"
    query = (
        "SELECT * FROM {f}(TABLE(readings), start => 'ts', key => 'sensor', value => 'temp', "
        "window => 'tumbling', size => 10{opt}) ORDER BY sensor, start"
    )
    with pytest.raises(Exception, match="result type of UDM 'untyped_spread' is unknown"):
        sql(query.format(f="spread_sql", opt="")).collect()
    rows = sql(query.format(f="spread_sql", opt=", returns => 'DOUBLE'")).collect()
    assert [tuple(r) for r in rows] == [
        (0, 10, "a", 2.0),
        (10, 20, "a", 0.0),
        (0, 10, "b", 0.0),
        (10, 20, "b", 2.0),
    ]
    assert register_sql(spark, untyped_spread, name="spread_int", returns="bigint") == "spread_int"
    typed = sql(query.format(f="spread_int", opt=""))
    assert typed.schema["untyped_spread"].dataType.typeName() == "long"
    with pytest.raises(Exception, match=r"returns='array<double' is not a Spark type"):
        sql(query.format(f="spread_sql", opt=", returns => 'array<double'")).collect()


def test_null_keys_raise_by_default_and_can_be_dropped_or_kept(spark: Any, sql: Any) -> None:
    """As ``Stream.from_dataframe``'s ``on_null_key``: the table function
    kept a null key as a group of its own, silently, where batch refuses it."""
    spark.createDataFrame(
        [("a", 1, 2.0), (None, 2, 4.0), (None, 3, 6.0)], "sensor string, ts long, temp double"
    ).createOrReplaceTempView("null_keys")
    call = (
        "SELECT * FROM udm_mean(TABLE(null_keys), start => 'ts', key => 'sensor', "
        "value => 'temp', window => 'tumbling', size => 10"
    )
    with pytest.raises(Exception) as err:
        sql(call + ")").collect()
    assert (
        """invalid event: key 'sensor' is null; row: {"sensor":null,"ts":2,"temp":4.0}. """
        "Fix the data, or pass on_null_key => 'drop'"
    ) in str(err.value)
    rows = sql(call + ", on_null_key => 'drop')").collect()
    assert [tuple(r) for r in rows] == [(0, 10, "a", 2.0)]
    rows = sql(call + ", on_null_key => 'keep')").collect()
    assert {tuple(r) for r in rows} == {(0, 10, None, 5.0), (0, 10, "a", 2.0)}
    with pytest.raises(Exception, match="on_null_key => 'nope': use 'raise', 'drop' or 'keep'"):
        sql(call + ", on_null_key => 'nope')").collect()
