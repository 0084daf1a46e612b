"""The fluent query API on the in-process reference engine (no Spark).

The UDMs and the event generator here are shared by the Spark tests
(``test_spark_*.py``), whose Python workers import this module.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import subprocess
import sys
from typing import Any, TypedDict

import pytest

from udm.host import (
    INFINITY,
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    WindowDescriptor,
    evaluate,
    evaluate_by_key,
    point,
)
from udm.host.errors import InvalidEventError
from udm.host.plan import agg
from udm.host.query import Stream
from udm.host.registry import register_udm
from udm.host.rows import UdfError
from udm.host.stream import Cti, Insert, Retract
from udm.sdk import (
    IncrementalAggregate,
    TimeSensitiveIncrementalAggregate,
    aggregate,
    function,
    operator,
)

# ---------------------------------------------------------------- UDMs


@aggregate
def median(values: list[float]) -> float:
    return float(statistics.median(values))


@aggregate
def median_untyped(values):  # type: ignore[no-untyped-def]
    return statistics.median(values)


class Mean(IncrementalAggregate):
    """Mergeable and invertible: partial aggregation applies."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], v: float) -> tuple[float, int]:
        return (state[0] + v, state[1] + 1)

    def remove(self, state: tuple[float, int], v: float) -> tuple[float, int]:
        return (state[0] - v, state[1] - 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float | None:
        return state[0] / state[1] if state[1] else None


class Span(TimeSensitiveIncrementalAggregate):
    """Mergeable, time-sensitive: total (clipped) duration of the members."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[Any], window: WindowDescriptor) -> int:
        return state + min(event.end, window.end) - max(event.start, window.start)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int, window: WindowDescriptor) -> int:
        return state


@aggregate(time_sensitive=True)
def twa(events: list[IntervalEvent[float]], window: WindowDescriptor) -> float:
    """Time-weighted average over the window (lifetimes clipped here)."""
    total = sum(e.payload * (min(e.end, window.end) - max(e.start, window.start)) for e in events)
    return total / (window.end - window.start)


class Range(TypedDict):
    lo: float
    hi: float


@aggregate
def value_range(values: list[float]) -> Range:
    return {"lo": min(values), "hi": max(values)}


@aggregate
def range_untyped(values):  # type: ignore[no-untyped-def]
    return {"lo": min(values), "n": len(values)}


@operator(time_sensitive=True)
def rises(events: list[IntervalEvent[float]], window: WindowDescriptor) -> list[IntervalEvent[Any]]:
    """A pattern UDO: a point event at each rise over the previous value."""
    out = []
    prev = None
    for e in events:
        if prev is not None and e.payload > prev:
            t = max(e.start, window.start)
            out.append(IntervalEvent(t, t + 1, {"frm": prev, "to": e.payload}))
        prev = e.payload
    return out


@aggregate
def first_payload(payloads: list[dict[str, Any]]) -> str:
    """Sees whole payload dicts (value=None)."""
    return ",".join(f"{p['sensor']}:{p['temp']}" for p in payloads[:2])


@aggregate
def fragile(values: list[float]) -> float:
    if any(v > 18 for v in values):
        raise ArithmeticError("value above 18")
    return sum(values)


@function
def fahrenheit(payload: dict[str, Any]) -> float:
    return float(payload["temp"] * 9 / 5 + 32)


# ---------------------------------------------------------- generated data

KEYS = ("a", "b", None)
ROWS_SEED = 7


def make_rows(seed: int, n: int = 40) -> list[tuple[str | None, int, int, float]]:
    """(sensor, start, end, temp): points and intervals, shared start and end
    times, a null key; temps are halves, so sums are exact in any order."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        s = rng.randrange(0, 50)
        d = 1 if rng.random() < 0.4 else rng.randrange(1, 13)
        rows.append((rng.choice(KEYS), s, s + d, rng.randrange(0, 40) / 2))
    return rows


def rows_cht(rows: list[tuple[str | None, int, int, float]]) -> Cht:
    return Cht(IntervalEvent(s, e, {"sensor": k, "temp": t}) for k, s, e, t in rows)


def field_of(got: dict[Any, Cht], name: str) -> dict[Any, Cht]:
    """One result column of a multi-aggregate output, per key."""
    return {
        k: Cht(IntervalEvent(e.start, e.end, e.payload[name]) for e in c) for k, c in got.items()
    }


WINDOWS = [
    HoppingWindow(10, 5),
    TumblingWindow(7, offset=3),
    SnapshotWindow(),
    CountByStartWindow(3),
    CountByEndWindow(2),
]

# ------------------------------------------------------------------ tests

READINGS = [
    IntervalEvent(1, 2, {"sensor": "a", "temp": 2.0}),
    IntervalEvent(3, 4, {"sensor": "a", "temp": 4.0}),
    IntervalEvent(12, 13, {"sensor": "a", "temp": 1.0}),
    IntervalEvent(5, 6, {"sensor": "b", "temp": 7.0}),
    IntervalEvent(15, 16, {"sensor": "b", "temp": 3.0}),
    IntervalEvent(16, 17, {"sensor": "b", "temp": 5.0}),
]


def test_tumbling_median_per_key_hand_computed() -> None:
    got = (
        Stream.from_cht(READINGS, key="sensor")
        .tumbling_window(10)
        .aggregate(median, value="temp")
        .to_cht()
    )
    assert got == {
        "a": Cht([(0, 10, 3.0), (10, 20, 1.0)]),
        "b": Cht([(0, 10, 7.0), (10, 20, 4.0)]),
    }


def test_unkeyed_stream_gives_one_cht_and_scalar_payloads_round_trip() -> None:
    got = Stream.from_cht([(0, 4, 1.0), (2, 3, 5.0)]).snapshot_window().aggregate(Mean).to_cht()
    assert got == Cht([(0, 2, 1.0), (2, 3, 3.0), (3, 4, 1.0)])
    same = Stream.from_cht([(0, 4, 1.0), (2, 3, 5.0)]).to_cht()
    assert same == Cht([(0, 4, 1.0), (2, 3, 5.0)])


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: w.kind)
def test_reference_engine_equals_evaluate_by_key(window: Any) -> None:
    rows = make_rows(7)
    cht = rows_cht(rows)
    got = (
        Stream.from_cht(cht, key="sensor")
        .window(window)
        .aggregate(med=(median, "temp"), mean=agg(Mean, "temp"), twa=(twa, "temp"))
        .to_cht()
    )
    assert isinstance(got, dict)
    for name, udm in (("med", median), ("mean", Mean), ("twa", twa)):
        assert field_of(got, name) == evaluate_by_key(cht, "sensor", window, udm, value="temp")


def test_multi_aggregate_payload_and_struct_columns() -> None:
    stream = Stream.from_cht(READINGS, key="sensor").tumbling_window(10)
    single = stream.aggregate(value_range, value="temp").to_cht()
    assert isinstance(single, dict)
    assert single["a"] == Cht([(0, 10, {"lo": 2.0, "hi": 4.0}), (10, 20, {"lo": 1.0, "hi": 1.0})])
    multi = stream.aggregate(r=(value_range, "temp"), n=(Span, "temp")).to_cht()
    assert isinstance(multi, dict)
    assert multi["b"] == Cht(
        [
            (0, 10, {"r_lo": 7.0, "r_hi": 7.0, "n": 1}),
            (10, 20, {"r_lo": 3.0, "r_hi": 5.0, "n": 2}),
        ]
    )


def test_udm_by_registered_name_and_arguments() -> None:
    @aggregate
    def quantile(values: list[float], q: float = 0.5) -> float:
        return sorted(values)[int(q * (len(values) - 1))]

    register_udm("test.quantile", quantile)
    got = (
        Stream.from_cht([(0, 1, 1.0), (1, 2, 2.0), (2, 3, 9.0)])
        .tumbling_window(10)
        .aggregate("test.quantile", q=1.0)
        .to_cht()
    )
    assert got == Cht([(0, 10, 9.0)])
    with pytest.raises(KeyError, match=r"no UDM is registered as 'test\.nope'"):
        Stream.from_cht([(0, 1, 1.0)]).tumbling_window(10).aggregate("test.nope")
    with pytest.raises(KeyError, match=r"did you mean stats\.median, "):
        Stream.from_cht([(0, 1, 1.0)]).tumbling_window(10).aggregate("stats.medain")
    with pytest.raises(TypeError, match=r"register_udm\('test\.bad'\)"):
        register_udm("test.bad", object())


def test_installed_library_udm_by_name() -> None:
    """stats.median comes from the udm-stats plugin's entry point."""
    got = (
        Stream.from_cht([(0, 1, 1.0), (1, 2, 2.0), (2, 3, 9.0), (12, 13, 4.0)])
        .tumbling_window(10)
        .aggregate("stats.median")
        .to_cht()
    )
    assert got == Cht([(0, 10, 2.0), (10, 20, 4.0)])


def test_wrong_udm_kinds_and_options_are_rejected_when_building() -> None:
    w = Stream.from_cht([(0, 1, 1.0)]).tumbling_window(10)
    with pytest.raises(
        TypeError, match=r"is a time-sensitive non-incremental operator; use \.apply"
    ):
        w.aggregate(rises)
    with pytest.raises(TypeError, match=r"use \.aggregate"):
        w.apply(median)
    with pytest.raises(TypeError, match="UDF"):
        w.aggregate(fahrenheit)
    with pytest.raises(ValueError, match="partial=True needs mergeable"):
        w.aggregate(median, partial=True)
    with pytest.raises(ValueError, match="emit_empty applies to hopping and tumbling"):
        Stream.from_cht([(0, 1, 1.0)]).snapshot_window().aggregate(median, emit_empty=True)
    with pytest.raises(ValueError, match="'clip' keeps timestamps chosen by the UDM"):
        w.aggregate(median, output_policy="clip")
    # a UDM before a window: named, with the fix (was a bare AttributeError)
    for method in ("aggregate", "apply"):
        with pytest.raises(TypeError) as err:
            getattr(Stream.from_cht([(0, 1, 1.0)]), method)(median)
        assert str(err.value) == (
            f"{method}() runs a UDM once per window: window the stream first, e.g. "
            f"stream.tumbling_window(size).{method}(...), or hopping_window, snapshot_window, "
            "count_window, window(spec)"
        )
    # a windowed stream's other methods: named, with what comes first
    for method in ("snapshot_window", "where", "to_cht", "explain"):
        with pytest.raises(TypeError) as err:
            getattr(w, method)()
        assert str(err.value) == (
            f".{method}() on a windowed stream: finish the TumblingWindow(size=10) first "
            "with .aggregate(...) (a UDA per window) or .apply(...) (a UDO per window); "
            f".{method}() then applies to the stream of results"
        )
    assert not hasattr(w, "nothing_like_this")
    with pytest.raises(TypeError, match=r"aggregate\(.*, m=agg\(\.\.\.\)\): give one UDA"):
        w.aggregate(median, m=agg(median))


def test_durations_accept_timedelta() -> None:
    s = Stream.from_cht([(0, 1, 1.0)])
    assert s.hopping_window(dt.timedelta(seconds=10), dt.timedelta(seconds=5)).window == (
        HoppingWindow(10_000_000, 5_000_000)
    )
    assert s.count_window(3, by="end").window == CountByEndWindow(3)
    with pytest.raises(ValueError, match="'start' or 'end'"):
        s.count_window(3, by="middle")  # type: ignore[arg-type]


def test_in_memory_datetimes_give_datetimes_out() -> None:
    """Before, from_cht over datetimes explained (and returned) ticks unless
    the caller also passed timestamps=True."""
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    events = [(noon, noon + dt.timedelta(minutes=1), 1.0)]
    hour = dt.timedelta(hours=1)

    def window(stream: Stream) -> str:
        return stream.tumbling_window(hour).aggregate("stats.mean").explain().splitlines()[2]

    for given in (events, iter(events), [("2026-01-01T12:00:00Z", "2026-01-01T12:01", 1.0)]):
        stream = Stream.from_cht(given)
        assert stream.source.timestamps is True
        assert window(stream) == "  - window TumblingWindow(size=1h)"
        assert stream.to_cht() == [(1_767_268_800_000_000, 1_767_268_860_000_000, 1.0)]
    assert window(Stream.from_cht(events, timestamps=False)) == (
        "  - window TumblingWindow(size=3600000000 (1h))"
    )
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    for start in (
        pd.Timestamp("2026-01-01T12:00Z"),
        np.datetime64("2026-01-01T12:00"),
        pa.scalar(noon, pa.timestamp("us", tz="UTC")),
    ):
        assert Stream.from_cht([(start, None, 1.0)], on_invalid="drop").source.timestamps, start
    assert Stream.from_cht([(np.int64(0), 1, 1.0)]).source.timestamps is False
    assert Stream.from_cht([(0, 1, 1.0)]).source.timestamps is False
    assert Stream.from_cht([]).source.timestamps is False


def test_explain_names_every_stage() -> None:
    text = (
        Stream.from_cht(READINGS, key="sensor")
        .where(lambda p: p["temp"] > 1)
        .hopping_window(10, 5)
        .aggregate(Mean, value="temp")
        .explain()
    )
    assert text.splitlines() == [
        "Stream plan",
        "  source: 6 in-memory events; on_invalid=raise",
        "  - group_apply sensor",
        "  - where udf <lambda>",
        "  - window HoppingWindow(size=10, hop=5)",
        "      aggregate mean = mean('temp') [time-insensitive incremental aggregate]",
        "      input_clipping=none, output_policy=align",
        "    spark: chosen when the query runs, from a sample of the input's head: with "
        "partial states when >= 75% of its events are in keys of >= 0.5% each and its "
        "(key, pane) groups hold >= 1.5 events on average, else sliced",
        "      with partial states: partial states folded per partition and per window in "
        "the worker (mapInArrow), point events folded once per pane of gcd(size, hop), "
        "from the partition's events sorted by (key, start) where each event is in one "
        "state (add_many or add per state and UDA, add_segments where defined); "
        "shuffled by (sensor, bucket of windows); merged per window (mapInArrow)",
        "      sliced: events shuffled by (sensor); windows assigned, sorted and evaluated in "
        "the worker (mapInArrow); over point events each window is a slice of the events "
        "sorted by start",
        "  output: start, end, sensor, mean  (a struct result becomes one column per field)",
    ]


def test_in_memory_invalid_rows_raise_or_are_counted() -> None:
    bad = [(0, 5, 1.0), (7, 7, 2.0), (None, 3, 3.0)]
    with pytest.raises(InvalidEventError, match=r"not after 'start'; row #1: \(7, 7, 2.0\)"):
        Stream.from_cht(bad)
    stream = Stream.from_cht(bad, on_invalid="drop")
    assert stream.to_cht() == Cht([(0, 5, 1.0)])
    counts = {"'end' is not after 'start'": 1, "'start' is null": 1}
    assert stream.metrics.invalid_rows() == counts
    query = stream.tumbling_window(10).aggregate(Mean)
    assert query.to_cht() == Cht([(0, 10, 1.0)])
    assert query.metrics.invalid_rows() == counts


def test_udf_filter_projection_and_chaining() -> None:
    got = (
        Stream.from_cht(READINGS, key="sensor")
        .where(lambda p: p["temp"] != 4.0)
        .select("temp", f=fahrenheit)
        .tumbling_window(10)
        .aggregate(hi=(value_range, "f"), n=(Span, "f"))
        .tumbling_window(20)
        .aggregate(Mean, value="hi_hi")
        .to_cht()
    )
    # a: windows [0,10) {35.6} and [10,20) {33.8}; b: 44.6 and max(37.4, 41) = 41
    assert got == {"a": Cht([(0, 20, (35.6 + 33.8) / 2)]), "b": Cht([(0, 20, (44.6 + 41.0) / 2)])}


def test_whole_payload_reaches_the_udm() -> None:
    got = Stream.from_cht(READINGS).tumbling_window(10).aggregate(first_payload).to_cht()
    assert got == Cht([(0, 10, "a:2.0,a:4.0"), (10, 20, "a:1.0,b:3.0")])


def test_spark_expressions_after_a_udf_need_spark() -> None:
    class FakeColumn:  # what a Column looks like to the plan
        pass

    FakeColumn.__module__ = "pyspark.sql.column"
    FakeColumn.__name__ = "Column"
    stream = Stream.from_cht(READINGS).where(lambda p: True).where(FakeColumn())
    with pytest.raises(TypeError, match="but this stream has no Spark session"):
        stream.to_cht()


def test_udm_errors_name_the_udm_and_window() -> None:
    stream = Stream.from_cht([(0, 1, 1.0), (12, 13, 19.0)]).tumbling_window(10).aggregate(fragile)
    with pytest.raises(UdmInvocationError) as err:
        stream.to_cht()
    assert str(err.value).startswith(
        "UDM 'fragile' failed on window [10, 20): ArithmeticError: value above 18; raised at "
        f"{__file__}:"
    )


def test_physical_stream_source_and_emit_empty_with_watermark() -> None:
    elements = [
        point("p", 1, 2.0),
        Insert("e", 3, INFINITY, 4.0),
        Retract("e", 3, INFINITY, 14),
        Cti(5),
        point("q", 31, 6.0),
    ]
    got = (
        Stream.from_events(elements)
        .tumbling_window(10)
        .aggregate(Mean, emit_empty=True, watermark=50)
        .to_cht()
    )
    assert got == Cht([(0, 10, 3.0), (10, 20, 4.0), (20, 30, None), (30, 40, 6.0), (40, 50, None)])
    assert got == evaluate(
        Cht([(1, 2, 2.0), (3, 14, 4.0), (31, 32, 6.0)]),
        TumblingWindow(10),
        Mean,
        emit_empty=True,
        watermark=50,
    )


def test_importing_the_host_does_not_import_spark() -> None:
    code = (
        "import sys, udm.sdk, udm.host, udm.host.query\n"
        "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_failing_udf_names_itself_and_how_the_payload_is_passed() -> None:
    @function
    def fahrenheit(celsius: float) -> float:
        return celsius * 9 / 5 + 32

    stream = Stream.from_cht([(0, 1, {"temp": 20.0})])
    with pytest.raises(UdfError) as err:
        stream.select("temp", f=fahrenheit).to_cht(engine="reference")
    assert str(err.value) == (
        "UDF 'fahrenheit' in select(f=...) failed on payload {'temp': 20.0}: TypeError: "
        "unsupported operand type(s) for *: 'dict' and 'int'; a UDF here is called with the "
        "event's payload dict (column -> value): for a UDF of one column write "
        "lambda p: fahrenheit(p['<column>'])"
    )
    with pytest.raises(UdfError, match=r"UDF 'hot' in where\(\) failed on payload 20\.0"):
        Stream.from_cht([(0, 1, 20.0)]).where(function(name="hot")(lambda v: v > "x")).to_cht(
            engine="reference"
        )
    # as the hint says
    got = stream.select("temp", f=lambda p: fahrenheit(p["temp"])).to_cht(engine="reference")
    assert got == Cht([(0, 1, {"temp": 20.0, "f": 68.0})])


def test_explain_shows_the_udms_arguments() -> None:
    windowed = Stream.from_cht(READINGS, key="sensor").tumbling_window(10)
    text = windowed.aggregate("stats.quantile", value="temp", q=0.9).explain()
    assert "aggregate quantile = quantile('temp', q=0.9) [" in text
    text = windowed.aggregate("stats.quantile", value="temp", q=0.5).explain()
    assert "aggregate quantile = quantile('temp', q=0.5) [" in text


def test_dict_payloads_lacking_a_field_have_it_null_as_table_rows() -> None:
    @aggregate
    def count(values: list[Any]) -> int:
        return len(values)

    events = [(0, 1, {"a": 1}), (1, 2, {"b": 2})]
    assert Stream.from_cht(events).to_cht(engine="reference") == [
        (0, 1, {"a": 1, "b": None}),
        (1, 2, {"a": None, "b": 2}),
    ]
    assert Stream.from_cht(events).select("a").to_cht(engine="reference") == [
        (0, 1, {"a": 1}),
        (1, 2, {"a": None}),
    ]
    counted = Stream.from_cht(events, key="a").snapshot_window().aggregate(count, value="b")
    assert counted.to_cht(engine="reference") == {1: [(0, 1, 1)], None: [(1, 2, 1)]}
    with pytest.raises(KeyError, match=r"key columns \['sensor'\] are not in the events"):
        Stream.from_cht(events, key="sensor")


# ------------------------------------------------ found by a black-box probe


@aggregate
def summed(values: list[float]) -> float:
    return float(sum(values))


def test_an_empty_in_memory_source_gives_an_empty_result() -> None:
    """With a key or value column and no events (none given, or all dropped
    as invalid), to_cht said the column was not in the stream."""
    dropped = Stream.from_cht([(5, 5, {"k": "a", "v": 1})], key="k", on_invalid="drop")
    assert dropped.tumbling_window(5).aggregate(summed, value="v").to_cht() == {}
    assert Stream.from_cht([], key="k").to_cht() == {}
    only_cti = Stream.from_events([Cti(5)], key="k")
    assert only_cti.tumbling_window(5).aggregate(summed, value="v").to_cht() == {}
    assert Stream.from_cht([]).tumbling_window(5).aggregate(summed, value="v").to_cht() == Cht()
    assert Stream.from_cht([]).select("x").to_cht() == Cht()


def test_a_second_group_apply_replaces_the_grouping_and_explain_says_so() -> None:
    src = [(0, 1, {"k": "a", "j": 1, "v": 1.0}), (0, 1, {"k": "b", "j": 1, "v": 10.0})]
    regrouped = Stream.from_cht(src, key="k").group_apply("j")
    query = regrouped.tumbling_window(5).aggregate(summed, value="v")
    assert query.to_cht() == {1: Cht([(0, 5, 11.0)])}
    assert "  - group_apply j (replacing the grouping by k)" in query.explain().splitlines()
    both = Stream.from_cht(src).group_apply("k", "j").tumbling_window(5)
    assert both.aggregate(summed, value="v").to_cht() == {
        ("a", 1): Cht([(0, 5, 1.0)]),
        ("b", 1): Cht([(0, 5, 10.0)]),
    }


def test_select_cannot_overwrite_a_key_column() -> None:
    """select(k=...) replaced the key values and so regrouped silently."""
    with pytest.raises(ValueError) as err:
        Stream.from_cht([(0, 1, {"k": "a", "v": 1})], key="k").select(k=lambda p: 1)
    assert str(err.value).startswith("select(k=...): 'k' is a key column of the stream")


@aggregate
def with_k(values: list[float]) -> dict[str, Any]:
    return {"k": "z", "n": len(values)}


@operator
def emits_k(values: list[float]) -> list[dict[str, Any]]:
    return [{"k": "z", "x": v} for v in values]


def test_a_struct_field_clashing_with_a_key_gets_a_fix_that_works() -> None:
    """The error suggested alias=, which does not rename struct fields."""
    windowed = Stream.from_cht([(0, 1, {"k": "a", "v": 1})], key="k").tumbling_window(5)
    with pytest.raises(ValueError) as err:
        windowed.aggregate(with_k, value="v", alias="r").to_cht()
    assert str(err.value) == (
        "result column 'k' of 'r' clashes with the start/end or key columns; give the "
        "aggregate a name, aggregate(name=(uda, value)), so its fields become name_k"
    )
    assert windowed.aggregate(r=(with_k, "v")).to_cht() == {
        "a": Cht([(0, 5, {"r_k": "z", "r_n": 1})])
    }
    with pytest.raises(ValueError, match="the operator's output field 'k' keeps its name"):
        windowed.apply(emits_k, value="v").to_cht()


def test_wrong_argument_types_name_the_argument() -> None:
    windowed = Stream.from_cht([(1, 2, {"v": 1.0}), (17, 18, {"v": 1.0})]).tumbling_window(5)
    for call, message in (
        (
            lambda: windowed.aggregate(summed, value=42),
            "value= takes a column name, a list of names or a function, got 42",
        ),
        (
            lambda: windowed.aggregate(x=(summed, "v", 3)),
            "x=(uda, value, args): args is a dict of the UDA's arguments, got 3",
        ),
        (
            lambda: windowed.aggregate(summed, value="v", emit_empty="no"),
            "emit_empty= is True or False, got 'no'",
        ),
        (
            lambda: windowed.aggregate(summed, value="v", alias=5),
            "alias= names the result column: a non-empty string, got 5",
        ),
        (
            lambda: windowed.aggregate(summed, value="v", alias=""),
            "alias= names the result column: a non-empty string, got ''",
        ),
    ):
        with pytest.raises(TypeError) as err:
            call()
        assert str(err.value) == message


def test_from_cht_says_why_a_time_is_invalid() -> None:
    import numpy as np

    with pytest.raises(InvalidEventError) as err:
        Stream.from_cht([(1, None, 1)])
    assert "'end' is null (an event that has not ended ends at INFINITY, 'inf')" in str(err.value)
    assert "shape=" not in str(err.value)  # from_cht takes no shape
    fine = np.datetime64("2024-01-01T00:00:00.000000001")
    with pytest.raises(InvalidEventError) as err:
        Stream.from_cht([(fine, np.datetime64("2024-01-01T00:00:01"), 1)])
    text = str(err.value)
    assert text.startswith(
        "invalid event: 'start' has sub-microsecond precision (udm ticks are microseconds); "
        "row #0: (np.datetime64('2024-01-01T00:00:00.000000001'), "
    )
    assert text.endswith(
        "Round the times to microseconds first (ts.floor('us'), ts.dt.floor('us') in pandas)"
    )


def test_cht_comparisons_take_tuples_as_cht_does() -> None:
    from udm.host import cht_diff, cht_equal

    assert cht_equal(Cht([(0, 1, 1.0)]), [(0, 1, 1.0)])
    assert cht_equal([(0, 1, 1.0)], [(0, 1, 1.0 + 1e-12)], rel_tol=1e-9)
    assert cht_diff([(0, 1, 1.0)], [(0, 2, 1.0)]) == (
        [IntervalEvent(0, 1, 1.0)],
        [IntervalEvent(0, 2, 1.0)],
    )
