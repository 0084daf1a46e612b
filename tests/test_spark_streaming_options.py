"""``Stream.to_stream()``'s options, output types and time zones
(black-box round 16): every option of docs/streaming.md's table reaches
the query or is refused saying where it goes, an undeclared ``select`` UDF
is refused when the query is built, and a ``timestamp_ntz`` time column
is its wall time in UTC whatever the session time zone, and comes out as
``timestamp_ntz``, and time strings are checked as in batch.

Most tests stop at build time (no micro-batch runs); those that run a
stream write one tiny JSON file and run it once (availableNow).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import types as T

from udm.host import TumblingWindow
from udm.host.plan import sources
from udm.host.query import Stream
from udm.host.spark import streaming_engine
from udm.host.spark.streaming import (
    AdvanceTime,
    changelog_cht,
    read_changelog,
    start_stream,
    stream_counts,
)

pytestmark = pytest.mark.spark

S = 1_000_000
WINDOW = TumblingWindow(10 * S)

#: docs/streaming.md "Two entry points": the options to_stream passes on
PASSED = {
    "advance": AdvanceTime(every_events=1),
    "cti_policy": "drop",
    "consistency": "conservative",
    "seq": "v",
    "on_invalid": "drop",
}


def _rate(spark: Any) -> Any:
    """A streaming DataFrame (nothing reads it: build-time tests only)."""
    return spark.readStream.format("rate").load().selectExpr("timestamp", "value AS v")


def _write(folder: Path, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(changelog: Any, tmp: Path) -> Any:
    q = start_stream(changelog, str(tmp / "out"), str(tmp / "ck"), trigger={"availableNow": True})
    q.awaitTermination()
    return read_changelog(changelog.sparkSession, str(tmp / "out"))


# ------------------------------------------------------------ options


@pytest.mark.parametrize("option", list(PASSED))
def test_every_documented_option_reaches_a_window_operation(
    spark: Any, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """on_invalid: "stream_changelog() got multiple values for keyword
    argument 'on_invalid'"."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(streaming_engine, "stream_changelog", lambda *a, **kw: seen.update(kw))
    query = Stream.from_dataframe(_rate(spark), start="timestamp").window(WINDOW)
    query.aggregate("stats.mean", value="v").to_stream(**{option: PASSED[option]})
    assert seen[option] == PASSED[option]


@pytest.mark.parametrize("option", list(PASSED))
def test_every_documented_option_reaches_a_whole_query(
    spark: Any, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """on_invalid: "stream_query() got an unexpected keyword argument";
    it is every source's now, as the sources check their own rows."""
    seen: dict[str, Any] = {}

    def record(plan: Any, **kw: Any) -> None:
        seen.update(kw, on_invalid={s.on_invalid for s in sources(plan)})

    monkeypatch.setattr(streaming_engine, "stream_query", record)
    src = Stream.from_dataframe(_rate(spark), start="timestamp", on_invalid="raise")
    src.where(lambda p: p["v"] > 0).to_stream(**{option: PASSED[option]})
    expected = {PASSED[option]} if option == "on_invalid" else PASSED[option]
    assert seen[option] == expected
    if option != "on_invalid":
        assert seen["on_invalid"] == {"raise"}


@pytest.mark.parametrize(
    ("option", "value", "where"),
    [
        ("returns", "double", "aggregate(..., returns=...) or apply(...)"),
        ("name", "m", "aggregate(..., alias=...) or apply(...)"),
        ("input_clipping", "both", "aggregate(..., input_clipping=...) or apply(...)"),
        ("output_policy", "window", "aggregate(..., output_policy=...) or apply(...)"),
        ("key", "v", "from_dataframe(key=...) or group_apply(...)"),
        ("value", "v", "aggregate(udm, value=...)"),
    ],
)
def test_what_the_query_says_is_refused_by_to_stream_saying_where_it_goes(
    spark: Any, option: str, value: str, where: str
) -> None:
    """Each was "got multiple values for keyword argument"."""
    query = Stream.from_dataframe(_rate(spark), start="timestamp").window(WINDOW)
    with pytest.raises(TypeError) as info:
        query.aggregate("stats.mean", value="v").to_stream(**{option: value})
    assert str(info.value) == (
        f"to_stream({option}=...): the query itself says this, as in batch: give it to {where}"
    )


def test_an_unknown_on_invalid_is_refused(spark: Any) -> None:
    query = Stream.from_dataframe(_rate(spark), start="timestamp").window(WINDOW)
    with pytest.raises(ValueError, match=r"on_invalid='ignore': use 'raise' or 'drop'"):
        query.aggregate("stats.mean", value="v").to_stream(on_invalid="ignore")


def test_to_stream_on_invalid_drop_drops_and_counts_a_malformed_row(
    spark: Any, tmp_path: Path
) -> None:
    """The row [7 s, 7 s) is malformed; the others' window [0, 10 s)
    is passed by the CTI the 25 s event generates."""
    rows = [(1, 2, 1.0), (7, 7, 9.0), (3, 4, 3.0), (25, 26, 5.0)]
    _write(tmp_path / "in", [{"k": "a", "s": s * S, "e": e * S, "v": v} for s, e, v in rows])
    src = spark.readStream.schema("k string, s long, e long, v double").json(str(tmp_path / "in"))
    changelog = (
        Stream.from_dataframe(src, start="s", end="e", key="k")
        .window(WINDOW)
        .aggregate("stats.mean", value="v")
        .to_stream(advance=AdvanceTime(every_events=1), on_invalid="drop")
    )
    log = _run(changelog, tmp_path)
    assert stream_counts(log) == {"late_dropped": 0, "late_adjusted": 0, "invalid_dropped": 1}
    cht = changelog_cht(log, ["k"]).collect()
    assert [(r["k"], r["start"], r["end"], r["mean"]) for r in cht] == [("a", 0, 10 * S, 2.0)]


# -------------------------------------------------------- output types


def doubled(p: dict[str, Any]) -> float:
    """A select UDF whose annotation declares its type."""
    return float(p["v"] * 2)


def test_an_undeclared_select_udf_is_refused_when_the_query_is_built(spark: Any) -> None:
    """It was typed string and failed in the first micro-batch with a raw
    Arrow error; declared ones build, with the declared types."""
    src = Stream.from_dataframe(_rate(spark), start="timestamp")
    with pytest.raises(TypeError) as info:
        src.select(x=lambda p: p["v"] * 2).to_stream()
    assert str(info.value) == (
        "the type of select(x=...) (select x=udf <lambda>) is not declared; a streaming "
        "query cannot infer it from data: declare it as a (udf, type) tuple, "
        "select(x=(udf, 'double')), or annotate the function's return type"
    )
    declared = src.select(x=(lambda p: p["v"] * 2, "double"), y=doubled).to_stream()
    assert declared.schema["x"].dataType == T.DoubleType()
    assert declared.schema["y"].dataType == T.DoubleType()


# ------------------------------------------------------------ time zones


def test_a_timestamp_ntz_stream_is_its_wall_time_in_utc_and_stays_ntz(
    spark: Any, tmp_path: Path
) -> None:
    """Under a New York session the event at 23:30 (wall time) on Jan 1
    went to Jan 2's window (read as 04:30Z), and start/end came out as
    timestamp; batch gives Jan 1's window, as timestamp_ntz."""
    rows = [("2026-01-01T23:30:00", 1.0), ("2026-01-05T12:00:00", 2.0)]
    _write(tmp_path / "in", [{"k": "a", "ts": t, "v": v} for t, v in rows])
    schema = "k string, ts timestamp_ntz, v double"
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        src = spark.readStream.schema(schema).json(str(tmp_path / "in"))
        stream = Stream.from_dataframe(src, start="ts", key="k")
        whole = stream.where(lambda p: p["v"] > 0).to_stream()  # the operator graph per key
        assert whole.schema["start"].dataType == T.TimestampNTZType()
        changelog = (
            stream.tumbling_window(timedelta(days=1))
            .aggregate("stats.mean", value="v")
            .to_stream(advance=AdvanceTime(every_events=1))
        )
        assert changelog.schema["start"].dataType == T.TimestampNTZType()
        cht = changelog_cht(_run(changelog, tmp_path), ["k"])
        assert cht.schema["start"].dataType == T.TimestampNTZType()
        assert [(r["start"], r["end"], r["mean"]) for r in cht.collect()] == [
            (datetime(2026, 1, 1), datetime(2026, 1, 2), 1.0)
        ]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


# ------------------------------------------------------------ time strings

JAN_1 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in ticks


@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_time_strings_are_checked_as_in_batch(spark: Any, tmp_path: Path, on_invalid: str) -> None:
    """A string time column was refused, and the documented conversion
    (``F.to_timestamp``) silently dropped a digit below a microsecond:
    strings are read as batch reads them, such a row an invalid row."""
    rows = [
        ("2026-01-01T00:00:01Z", 1.0),
        ("2026-01-01T00:00:02.0000019Z", 9.0),  # finer than a tick
        ("garbage", 9.0),
        ("2026-01-01T00:00:03Z", 3.0),
        ("2026-01-01T00:00:25Z", 5.0),
    ]
    _write(tmp_path / "in", [{"k": "a", "ts": t, "v": v} for t, v in rows])
    src = spark.readStream.schema("k string, ts string, v double").json(str(tmp_path / "in"))
    changelog = (
        Stream.from_dataframe(src, start="ts", key="k")
        .window(WINDOW)
        .aggregate("stats.mean", value="v")
        .to_stream(advance=AdvanceTime(every_events=1), on_invalid=on_invalid)
    )
    if on_invalid == "raise":
        with pytest.raises(Exception, match="has sub-microsecond precision") as info:
            _run(changelog, tmp_path)
        assert "2026-01-01T00:00:02.0000019Z" in str(info.value)
        return
    log = _run(changelog, tmp_path)
    assert stream_counts(log) == {"late_dropped": 0, "late_adjusted": 0, "invalid_dropped": 2}
    cht = changelog_cht(log, ["k"]).selectExpr(
        "unix_micros(start) AS s", "unix_micros(end) AS e", "mean"
    )
    assert [tuple(r) for r in cht.collect()] == [(JAN_1, JAN_1 + 10 * S, 2.0)]
