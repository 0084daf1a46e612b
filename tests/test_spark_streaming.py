"""Streaming execution on Spark: the same CHT as batch, exactly once across
failures, UDM errors named, output latency, the rate source, late events.

Inputs are tiny JSON files written one per micro-batch (maxFilesPerTrigger=1);
times are whole seconds in ticks (Spark watermarks have millisecond precision).
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from udm.host import Cht, TumblingWindow
from udm.host.query import Stream
from udm.host.stream import Cti, Element, Insert, Retract
from udm.sdk import aggregate

pytestmark = pytest.mark.spark

S = 1_000_000
WINDOW = TumblingWindow(10 * S)
ELEMENTS = "kind string, id long, start long, end long, new_end long, k string, v double, seq long"


@aggregate(name="tests.fragile")
def fragile(values: list[float]) -> float:
    """A mean that fails on the value 13 (the bug the test then fixes)."""
    if 13.0 in values:
        raise ZeroDivisionError("13 is unlucky")
    return sum(values) / len(values)


@aggregate(name="tests.fragile")
def fixed(values: list[float]) -> float:
    """The fixed version (same name: its snapshots restore the old state)."""
    return sum(values) / len(values)


def _write(folder: Path, batches: Sequence[Sequence[dict[str, Any]]]) -> None:
    folder.mkdir(parents=True)
    seq = 0
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.json"
        with open(path, "w") as f:
            for row in rows:
                f.write(json.dumps({**row, "seq": seq}) + "\n")
                seq += 1
        # the file source takes files oldest first: one second apart keeps the order
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _source(spark: Any, folder: Path, schema: str = ELEMENTS) -> Any:
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(folder))


def _ins(i: int, t: int, k: str | None, v: float, end: int | None = None) -> dict[str, Any]:
    return {"kind": "insert", "id": i, "start": t * S, "end": (end or t + 1) * S, "k": k, "v": v}


def _cti(t: int, k: str | None = None) -> dict[str, Any]:
    return {"kind": "cti", "start": t * S, "k": k}


def _run(changelog: Any, tmp: Path, name: str = "out", **kw: Any) -> Any:
    from udm.host.spark.streaming import read_changelog, start_stream

    q = start_stream(
        changelog, str(tmp / name), str(tmp / f"{name}.ck"), trigger={"availableNow": True}, **kw
    )
    q.awaitTermination()
    return read_changelog(changelog.sparkSession, str(tmp / name))


def _cht_by_key(spark_cht: Any, result: str, key: str | None = "k") -> dict[Any, Cht]:
    out: dict[Any, list[tuple[int, int, Any]]] = {}
    for r in spark_cht.collect():
        out.setdefault(r[key] if key else None, []).append((r["start"], r["end"], r[result]))
    return {k: Cht(v) for k, v in out.items()}


def _physical(batches: Sequence[Sequence[dict[str, Any]]]) -> list[Element]:
    out: list[Element] = []
    for rows in batches:
        for r in rows:
            if r["kind"] == "insert":
                out.append(Insert(r["id"], r["start"], r["end"], {"k": r["k"], "v": r["v"]}))
            elif r["kind"] == "retract":
                out.append(Retract(r["id"], r["start"], r["end"], r["new_end"]))
            elif r["k"] is None:
                out.append(Cti(r["start"]))
    return out


def _reference(batches: Sequence[Sequence[dict[str, Any]]], udm: Any = "stats.mean") -> Any:
    stream = Stream.from_events(_physical(batches), key="k")
    return stream.window(WINDOW).aggregate(udm, value="v").to_cht(engine="reference")


# three keys over four micro-batches, one retraction, a final unkeyed CTI
BATCHES: list[list[dict[str, Any]]] = [
    [_ins(0, 1, "a", 1.0), _ins(1, 2, "b", 2.0), _ins(2, 4, "a", 3.0)],
    [_ins(3, 11, "a", 5.0), _ins(4, 6, "c", 7.0, end=14), _ins(5, 9, "b", 4.0)],
    [
        {"kind": "retract", "id": 5, "start": 9 * S, "end": 10 * S, "new_end": 9 * S, "k": "b"},
        _ins(6, 15, "b", 6.0),
        _ins(7, 22, "c", 8.0),
    ],
    [_ins(8, 23, "a", 13.0), _ins(9, 25, "b", 1.0), _cti(100)],
]


def _changelog(spark: Any, folder: Path, udm: Any = "stats.mean", **kw: Any) -> Any:
    from udm.host.spark.streaming import stream_changelog

    return stream_changelog(
        _source(spark, folder), WINDOW, udm, key="k", value="v", input="elements", seq="seq", **kw
    )


def test_streaming_cht_equals_batch_and_survives_a_crash(spark: Any, tmp_path: Path) -> None:
    """A crash after the sink wrote micro-batch k but before Spark committed
    it (k random, fixed seed): the restart replays batch k over its first
    attempt; the CHT equals the batch reference exactly and no row is doubled."""
    from udm.host.spark.streaming import changelog_cht, write_changelog

    _write(tmp_path / "in", BATCHES)
    k = random.Random(8).randint(0, len(BATCHES) - 1)
    out = str(tmp_path / "out")
    ck = str(tmp_path / "ck")
    write = write_changelog(out)

    def crash(batch: Any, batch_id: int) -> None:
        write(batch, batch_id)
        if batch_id == k:
            raise RuntimeError(f"simulated crash after writing batch {batch_id}")

    changelog = _changelog(spark, tmp_path / "in")
    spark.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    q = changelog.writeStream.foreachBatch(crash).option("checkpointLocation", ck).start()
    with pytest.raises(Exception, match="simulated crash"):
        q.awaitTermination()
    from udm.host.spark.streaming import read_changelog, start_stream

    done = sorted(p.name for p in Path(out).glob("batch_id=*"))
    # batches 0..k reached the sink, batch k uncommitted
    assert done == [f"batch_id={i}" for i in range(k + 1)]
    q = start_stream(_changelog(spark, tmp_path / "in"), out, ck, trigger={"availableNow": True})
    q.awaitTermination()
    log = read_changelog(spark, out)
    rows = log.where("kind in ('insert', 'retract')")
    assert rows.count() == rows.select("k", "id", "kind", "new_end").distinct().count()
    got = _cht_by_key(changelog_cht(log, ["k"]), "mean")
    expected = _reference(BATCHES)
    assert got == expected
    assert got["a"] == Cht([(0, 10 * S, 2.0), (10 * S, 20 * S, 5.0), (20 * S, 30 * S, 13.0)])


def test_to_stream_from_events_with_generated_ctis(spark: Any, tmp_path: Path) -> None:
    """Point events from a Stream query, CTIs generated every 2 events of a key."""
    from udm.host.spark.streaming import AdvanceTime, changelog_cht

    events = [[_ins(i, t, k, v) for i, t, k, v in rows] for rows in _EVENTS]
    schema = "start long, k string, v double, seq long"
    _write(
        tmp_path / "in",
        [[{"start": r["start"], "k": r["k"], "v": r["v"]} for r in b] for b in events],
    )
    src = _source(spark, tmp_path / "in", schema)
    query = Stream.from_dataframe(src, start="start", key="k").window(WINDOW)
    changelog = query.aggregate("stats.mean", value="v").to_stream(
        advance=AdvanceTime(every_events=2), seq="seq"
    )
    log = _run(changelog, tmp_path)
    # the stream has not ended: a window is output once its key's latest
    # start passes its end (a: 12 s, b: 21 s); its value is the batch one
    points = [[{**r, "end": r["start"] + 1} for r in b] for b in events]
    reference = _reference(points)
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == {
        "a": Cht([(0, 10 * S, 4.0)]),
        "b": Cht([(0, 10 * S, 4.0), (10 * S, 20 * S, 3.0)]),
    }
    assert Cht(reference["a"].sorted()[:1]) == [(0, 10 * S, 4.0)]
    assert Cht(reference["b"].sorted()[:2]) == [(0, 10 * S, 4.0), (10 * S, 20 * S, 3.0)]
    # generated CTIs: a's 2nd event (5 s) and b's 2nd (14 s), aligned to windows
    ctis = log.where("kind = 'cti'").orderBy("k").collect()
    assert [(r["k"], r["batch_id"], r["start"]) for r in ctis] == [("a", 0, 0), ("b", 1, 10 * S)]


_EVENTS = [
    [(0, 1, "a", 2.0), (1, 3, "b", 4.0), (2, 5, "a", 6.0)],
    [(3, 12, "a", 1.0), (4, 14, "b", 3.0), (5, 21, "b", 5.0)],
]


def test_udm_error_names_udm_window_event_then_fixed_udm_resumes(
    spark: Any, tmp_path: Path
) -> None:
    from udm.host.spark.streaming import changelog_cht

    _write(tmp_path / "in", BATCHES)
    with pytest.raises(Exception) as failure:
        _run(_changelog(spark, tmp_path / "in", fragile), tmp_path)
    message = str(failure.value)
    assert "UDM 'tests.fragile' failed on window [20000000, 30000000)" in message
    assert "13 is unlucky" in message
    # the window is computed when the CTI finalizes it; the message names
    # the window's events, so the 13 is found
    assert "while processing Cti(100000000)" in message
    assert "the window's events: id=8 [23000000, 24000000) {'k': 'a', 'v': 13.0}" in message
    log = _run(_changelog(spark, tmp_path / "in", fixed), tmp_path)
    got = _cht_by_key(changelog_cht(log, ["k"]), "tests_fragile")
    assert got == _reference(BATCHES, fixed)


def test_window_output_arrives_with_the_cti_that_passes_its_end(spark: Any, tmp_path: Path) -> None:
    """Conservative mode: a window's only output row is in the micro-batch of
    the CTI passing its end (keyed CTIs in-band; no key: every CTI in-band)."""
    batches = [
        [_ins(0, 1, "a", 1.0), _ins(1, 3, "a", 3.0)],
        [_ins(2, 12, "a", 5.0), _cti(9, "a")],
        [_cti(10, "a")],
        [_ins(3, 19, "a", 7.0)],
        [_cti(25, "a")],
    ]
    _write(tmp_path / "in", batches)
    log = _run(_changelog(spark, tmp_path / "in", consistency="conservative"), tmp_path)
    rows = log.where("kind != 'cti'").orderBy("batch_id", "seq").collect()
    got = [(r["batch_id"], r["kind"], r["start"], r["end"], r["mean"]) for r in rows]
    assert got == [(2, "insert", 0, 10 * S, 2.0), (4, "insert", 10 * S, 20 * S, 6.0)]
    ctis = log.where("kind = 'cti'").orderBy("batch_id").collect()
    # CTI(9 s) moves the output CTI to the start of the unfinished window
    assert [(r["batch_id"], r["start"]) for r in ctis] == [(1, 0), (2, 10 * S), (4, 20 * S)]


@aggregate(name="tests.span")
def span(values: list[int]) -> dict[str, int]:
    """Smallest, largest and number of values: the rate source's values are
    consecutive, so each window's span is checkable exactly."""
    return {"lo": min(values), "hi": max(values), "n": len(values)}


def test_rate_source_runs_for_a_few_batches(spark: Any, tmp_path: Path) -> None:
    """Rate rows keyed by parity: every final window holds a gap-free run of
    its key's values, and consecutive windows continue each other."""
    from udm.host.spark.streaming import AdvanceTime, start_stream, stream_changelog

    src = spark.readStream.format("rate").option("rowsPerSecond", 40).load()
    src = src.selectExpr("timestamp", "value % 2 as parity", "value")
    changelog = stream_changelog(
        src,
        TumblingWindow(S // 4),
        span,
        key="parity",
        value="value",
        start="timestamp",
        advance=AdvanceTime(every_events=5),
        consistency="conservative",
        returns="struct<lo:long, hi:long, n:long>",
    )
    q = start_stream(changelog, str(tmp_path / "out"), str(tmp_path / "ck"))
    try:
        while sum(1 for p in q.recentProgress if p["numInputRows"] > 0) < 3:
            q.awaitTermination(0.5)
            assert q.exception() is None, q.exception()
    finally:
        q.stop()
    rows = spark.read.parquet(str(tmp_path / "out")).where("kind = 'insert'").collect()
    assert rows
    by_key: dict[int, list[Any]] = {}
    for r in sorted(rows, key=lambda r: r["start"]):
        assert r["hi"] - r["lo"] == 2 * (r["n"] - 1)
        assert r["lo"] % 2 == r["hi"] % 2 == r["parity"]
        by_key.setdefault(r["parity"], []).append(r)
    for runs in by_key.values():
        for a, b in itertools.pairwise(runs):
            assert b["lo"] == a["hi"] + 2


@pytest.mark.parametrize("policy", ["drop", "adjust", "raise"])
def test_late_events_follow_the_policy_and_are_counted(
    spark: Any, tmp_path: Path, policy: str
) -> None:
    from udm.host.spark.streaming import AdvanceTime, changelog_cht, stream_counts

    batches = [
        [_ins(0, 1, "a", 1.0), _ins(1, 5, "a", 3.0)],  # CTI(5s) after the 2nd event
        [_ins(2, 3, "a", 8.0, end=8), _ins(3, 12, "a", 4.0)],  # [3s, 8s) is late
        [_ins(4, 14, "a", 2.0), _cti(100)],
    ]
    _write(tmp_path / "in", batches)
    changelog = _changelog(spark, tmp_path / "in", advance=AdvanceTime(2, policy=policy))
    if policy == "raise":
        with pytest.raises(Exception, match="Insert\\(id=2, start=3000000"):
            _run(changelog, tmp_path)
        return
    log = _run(changelog, tmp_path)
    late = _ins(2, 5, "a", 8.0, end=8) if policy == "adjust" else None
    kept = [batches[0], [r for r in (late, batches[1][1]) if r], batches[2]]
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == _reference(kept)
    counts = stream_counts(log)
    assert counts == {
        "late_dropped": int(policy == "drop"),
        "late_adjusted": int(policy == "adjust"),
        "invalid_dropped": 0,
    }


def _run_mean_of_events(spark: Any, tmp_path: Path, key: str = "k", value: str = "v") -> Any:
    """Point events (start, key, value) written under tmp_path/in, through
    the query API: tumbling mean, a CTI per key every 5 s."""
    from udm.host.spark.frame import quoted as q
    from udm.host.spark.streaming import AdvanceTime

    schema = f"start long, {q(key)} string, {q(value)} double, seq long"
    src = _source(spark, tmp_path / "in", schema)
    changelog = (
        Stream.from_dataframe(src, start="start", key=key)
        .window(WINDOW)
        .aggregate("stats.mean", value=value)
        .to_stream(advance=AdvanceTime(every=5 * S))
    )
    return _run(changelog, tmp_path)


def test_events_of_one_micro_batch_are_taken_in_start_order(spark: Any, tmp_path: Path) -> None:
    """One file, rows written latest first: without ordering, the CTI
    generated from the 25 s event would make every other event late."""
    from udm.host.spark.streaming import changelog_cht, stream_counts

    rows = [{"start": t * S, "k": "a", "v": float(t)} for t in (25, 12, 14, 3, 1)]
    _write(tmp_path / "in", [rows])
    log = _run_mean_of_events(spark, tmp_path)
    assert stream_counts(log) == {"late_dropped": 0, "late_adjusted": 0, "invalid_dropped": 0}
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == {
        "a": Cht([(0, 10 * S, 2.0), (10 * S, 20 * S, 13.0)])
    }


@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_malformed_rows_fail_naming_the_row_or_are_dropped_and_counted(
    spark: Any, tmp_path: Path, on_invalid: str
) -> None:
    from udm.host.spark.streaming import changelog_cht, stream_counts

    bad = {"kind": "insert", "id": 2, "start": 7 * S, "end": 7 * S, "k": "a", "v": 9.0}
    batches = [[_ins(0, 1, "a", 1.0), bad, _ins(1, 3, "a", 3.0)], [_cti(100)]]
    _write(tmp_path / "in", batches)
    changelog = _changelog(spark, tmp_path / "in", on_invalid=on_invalid)
    if on_invalid == "raise":
        with pytest.raises(Exception, match="end 7000000 is not after start 7000000") as info:
            _run(changelog, tmp_path)
        assert "'id': 2" in str(info.value) and "on_invalid='drop'" in str(info.value)
        return
    log = _run(changelog, tmp_path)
    assert stream_counts(log) == {"late_dropped": 0, "late_adjusted": 0, "invalid_dropped": 1}
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == {"a": Cht([(0, 10 * S, 2.0)])}


@pytest.mark.parametrize("policy", ["raise", "drop"])
def test_a_broadcast_cti_going_backwards_is_refused_or_dropped_and_counted(
    spark: Any, tmp_path: Path, policy: str
) -> None:
    """Spark dropped it as late, silently, under every policy (an in-band
    one raised or was counted). With drop, an insert without an id is an
    invalid row too (it was given an id of its own, where replay refused)."""
    from udm.host.spark.streaming import changelog_cht, stream_counts

    no_id = {"kind": "insert", "id": None, "start": 3 * S, "end": 4 * S, "k": "a", "v": 9.0}
    batches = [
        [_ins(0, 1, "a", 1.0), no_id, _cti(20)],
        [_cti(10), _ins(1, 25, "a", 5.0)],  # CTI 10 after CTI 20
        [_cti(100)],
    ]
    _write(tmp_path / "in", batches)
    changelog = _changelog(spark, tmp_path / "in", cti_policy=policy, on_invalid=policy)
    if policy == "raise":
        with pytest.raises(Exception, match=r"null id \(every insert of an element stream needs"):
            _run(changelog, tmp_path)
        batches[0].remove(no_id)
        _write(tmp_path / "in2", batches)
        changelog = _changelog(spark, tmp_path / "in2", cti_policy=policy)
        with pytest.raises(
            Exception,
            match=r"broadcast CTI \(seq 2\) goes backwards: the latest broadcast CTI is 20000000",
        ):
            _run(changelog, tmp_path, name="out2")
        return
    log = _run(changelog, tmp_path)
    assert stream_counts(log) == {"late_dropped": 1, "late_adjusted": 0, "invalid_dropped": 1}
    kept = [[_ins(0, 1, "a", 1.0), _cti(20)], [_ins(1, 25, "a", 5.0)], [_cti(100)]]
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == _reference(kept)


def test_a_key_or_result_named_like_a_changelog_column_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    """It failed deep in Spark with AMBIGUOUS_REFERENCE."""
    from udm.host.spark.streaming import stream_changelog

    df = spark.readStream.schema("id string, ts long, v double").json(str(tmp_path))
    for kw, what in (({"key": "id"}, "key column 'id'"), ({"name": "seq"}, "result column 'seq'")):
        with pytest.raises(ValueError) as err:
            stream_changelog(df, WINDOW, "stats.mean", value="v", start="ts", **kw)
        assert str(err.value).startswith(f"{what} has the name of one of the changelog's own")


def test_a_window_that_is_not_a_window_spec_is_refused(spark: Any, tmp_path: Path) -> None:
    from datetime import timedelta

    from udm.host.spark.streaming import stream_changelog

    _write(tmp_path / "in", [[_ins(0, 1, "a", 1.0)]])
    with pytest.raises(TypeError, match=r"TumblingWindow\(size\).*not datetime.timedelta"):
        stream_changelog(_source(spark, tmp_path / "in"), timedelta(seconds=10), "stats.mean")


def test_events_with_a_null_key_are_a_key_of_their_own(spark: Any, tmp_path: Path) -> None:
    """As in batch, null is a key value: its events are windowed, not taken
    for broadcast CTIs (only CTI rows with null keys are)."""
    from udm.host.spark.streaming import changelog_cht

    rows = [
        {"start": 1 * S, "k": None, "v": 1.0},
        {"start": 2 * S, "k": "a", "v": 5.0},
        {"start": 4 * S, "k": None, "v": 3.0},
        {"start": 12 * S, "k": None, "v": 9.0},
        {"start": 13 * S, "k": "a", "v": 7.0},
    ]
    _write(tmp_path / "in", [rows])
    log = _run_mean_of_events(spark, tmp_path)
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == {
        None: Cht([(0, 10 * S, 2.0)]),
        "a": Cht([(0, 10 * S, 5.0)]),
    }


def test_batch_only_options_are_refused_by_to_stream(spark: Any) -> None:
    src = spark.readStream.format("rate").load().selectExpr("timestamp", "value as v")
    windowed = Stream.from_dataframe(src, start="timestamp").window(WINDOW)
    with pytest.raises(ValueError, match="emit_empty is not available in streaming"):
        windowed.aggregate("stats.mean", value="v", emit_empty=True).to_stream()
    with pytest.raises(ValueError, match="watermark= bounds a batch query"):
        windowed.aggregate("stats.mean", value="v", watermark=100).to_stream()
    # and the batch runners, on a streaming source, point at to_stream()
    query = windowed.aggregate("stats.mean", value="v")
    for run in (query.to_dataframe, query.to_cht):
        with pytest.raises(ValueError) as err:
            run()
        assert str(err.value) == (
            f"{run.__name__}() runs a batch query, and this stream's source is a streaming "
            "DataFrame (spark.readStream): call to_stream() for the output changelog and "
            "start it with udm.host.spark.streaming.start_stream (docs/streaming.md)"
        )
    from udm.host.spark.streaming import stream_changelog

    def changelog(**options: Any) -> Any:
        return stream_changelog(src, WINDOW, "stats.mean", start="timestamp", value="v", **options)

    # stream_changelog itself: not taken for UDM arguments, named
    with pytest.raises(ValueError, match="emit_empty= is a batch option"):
        changelog(emit_empty=True)
    with pytest.raises(ValueError, match="watermark= is a batch option"):
        changelog(watermark=100)
    with pytest.raises(ValueError, match="on_invalid='ignore': use 'raise' or 'drop'"):
        changelog(on_invalid="ignore")
    with pytest.raises(ValueError, match="shape='point' takes no end column"):
        changelog(shape="point", end="timestamp")


def test_column_names_with_dots_and_backticks(spark: Any, tmp_path: Path) -> None:
    """Key and value columns named like nested fields reach the workers."""
    from udm.host.spark.streaming import changelog_cht

    rows = [
        {"start": 1 * S, "k.1": "a", "v`1": 1.0},
        {"start": 3 * S, "k.1": "a", "v`1": 5.0},
        {"start": 12 * S, "k.1": "a", "v`1": 9.0},
    ]
    _write(tmp_path / "in", [rows])
    log = _run_mean_of_events(spark, tmp_path, key="k.1", value="v`1")
    assert _cht_by_key(changelog_cht(log, ["k.1"]), "mean", key="k.1") == {
        "a": Cht([(0, 10 * S, 3.0)])
    }


def test_changelog_cht_matches_retractions_of_the_null_key(spark: Any) -> None:
    from udm.host.spark.streaming import changelog_cht

    rows = []
    for key in (None, "a"):
        rows += [
            ("insert", 0, 0, 0, 10, None, key, 3.0),
            ("retract", 1, 0, 0, 10, 0, key, 3.0),
            ("insert", 2, 1, 0, 10, None, key, 1.0),
        ]
    log = spark.createDataFrame(
        rows,
        "kind string, seq long, id long, start long, end long, new_end long, k string, mean double",
    )
    assert _cht_by_key(changelog_cht(log, ["k"]), "mean") == {
        None: Cht([(0, 10, 1.0)]),
        "a": Cht([(0, 10, 1.0)]),
    }


@aggregate(name="tests.big")
def big(values: list[float]) -> int:
    """2**53 + 1 for one value: an int no float64 holds."""
    return 2**53 + len(values)


def test_output_frames_keep_ints_beyond_float64(spark: Any, tmp_path: Path) -> None:
    # a micro-batch's frame mixes output rows with CTI rows (nulls): built
    # through float64 it rounded 2**53 + 1 down and failed on an output
    # that never ends (the end of time is no float64 either)
    _write(tmp_path / "in", [[_ins(0, 1, "a", 1.0), _ins(1, 12, "a", 1.0)], [_cti(30, "a")]])
    log = _run(_changelog(spark, tmp_path / "in", big), tmp_path)
    results = [r["tests_big"] for r in log.where("kind = 'insert'").collect()]
    assert results == [2**53 + 1, 2**53 + 1]


def test_a_restart_with_other_state_buckets_is_refused(spark: Any, tmp_path: Path) -> None:
    # keys would hash to other buckets and their states be lost silently
    _write(tmp_path / "in", [[_ins(0, 1, "a", 1.0), _ins(1, 2, "b", 2.0)]])
    _run(_changelog(spark, tmp_path / "in", state_buckets=2), tmp_path)
    path = tmp_path / "in" / "part-009.json"
    path.write_text(json.dumps({**_ins(2, 3, "a", 3.0), "seq": 9}) + "\n")
    os.utime(path, (1_700_000_100, 1_700_000_100))
    with pytest.raises(ValueError, match=r"written with state_buckets=2; restart with state_"):
        _run(_changelog(spark, tmp_path / "in", state_buckets=3), tmp_path)


@aggregate(name="tests.fields")
def fields(payloads: list[dict[str, Any]]) -> str:
    """The payload's field names, to see what the UDM receives."""
    return ",".join(sorted(payloads[0]))


def test_the_payload_is_the_batch_payload_key_columns_included(spark: Any, tmp_path: Path) -> None:
    # streaming left out the keys and any column named id, kind or new_end
    from udm.host.spark.streaming import AdvanceTime

    rows = [
        {"start": 1 * S, "k": "a", "id": 7, "v": 1.0},
        {"start": 12 * S, "k": "a", "id": 8, "v": 3.0},
    ]
    _write(tmp_path / "in", [rows])
    src = _source(spark, tmp_path / "in", "start long, k string, id long, v double, seq long")
    stream = Stream.from_dataframe(src, start="start", key="k").window(WINDOW)
    advance = AdvanceTime(every=5 * S)
    log = _run(stream.aggregate(fields).to_stream(advance=advance), tmp_path)
    assert [r["tests_fields"] for r in log.where("kind = 'insert'").collect()] == ["id,k,seq,v"]
    log = _run(
        stream.aggregate("stats.mean", value="id").to_stream(advance=advance), tmp_path, "o2"
    )
    assert [r["mean"] for r in log.where("kind = 'insert'").collect()] == [7.0]


@aggregate(name="tests.half_count")
def half_count(values: list[float]) -> float:
    return len(values) / 2


def test_a_float_result_does_not_fit_an_integer_type(spark: Any, tmp_path: Path) -> None:
    """As in batch (test_spark_query): Spark's pandas conversion truncated a
    streaming 1.5 into the bigint 1. A whole float (1.0) still fits."""
    _write(tmp_path / "in", [[_ins(0, 1, "a", 1.0), _ins(1, 2, "a", 1.0)], [_cti(30, "a")]])
    log = _run(_changelog(spark, tmp_path / "in", half_count, returns="bigint"), tmp_path, "even")
    assert [r["tests_half_count"] for r in log.where("kind = 'insert'").collect()] == [1]
    _write(tmp_path / "odd", [[_ins(0, 1, "a", 1.0)], [_cti(30, "a")]])
    with pytest.raises(Exception) as failure:
        _run(_changelog(spark, tmp_path / "odd", half_count, returns="bigint"), tmp_path, "odd")
    assert (
        "UDM 'tests.half_count' on window [0, 10000000) of key 'a' returned 0.5, which does not "
        "fit the result type int64"
    ) in str(failure.value)


@pytest.mark.parametrize("ticks", [-10_000_000, 999])
def test_a_broadcast_cti_the_watermark_cannot_carry_is_refused(ticks: int) -> None:
    # Spark's watermark counts milliseconds from the epoch and never goes
    # below it: Spark would drop such a CTI row as late, silently
    import pyarrow as pa

    from udm.host.spark.streamrows import CTI_COL, GROUP_COL, SEQ_COL, pack_rows

    batch = pa.RecordBatch.from_pydict(
        {
            GROUP_COL: pa.array([0, 0], pa.int32()),
            CTI_COL: pa.array([None, ticks], pa.int64()),
            SEQ_COL: pa.array([0, 1], pa.int64()),
        }
    )
    with pytest.raises(ValueError, match=rf"^broadcast CTI at {ticks} ticks \(seq 1\): "):
        list(pack_rows(iter([batch])))
    fine = batch.set_column(1, CTI_COL, pa.array([None, 1000], pa.int64()))
    # the CTI row with its time (for the watermark), its copy without (for
    # the processor to check its order), the event row
    [packed] = list(pack_rows(iter([fine])))
    assert packed.column(CTI_COL).to_pylist() == [1000, None, None]


def test_a_row_in_a_message_reads_as_the_input_wrote_it() -> None:
    """An event stream's bad row read {'k': 'a', 'start': None, 'end': None,
    'te': ..., 'kind': 'insert', 'id': None, 'new_end': None}: internal
    names, and columns the input does not have."""
    from udm.host.spark.streamrows import E_COL, ID_COL, KIND_COL, NE_COL, S_COL, show_row

    row = {
        S_COL: None,
        E_COL: None,
        "te": None,
        "k": "a",
        "v": 2.0,
        KIND_COL: "insert",
        ID_COL: None,
        NE_COL: None,
    }
    assert show_row(row, {S_COL: "ts"}) == "{'ts': None, 'te': None, 'k': 'a', 'v': 2.0}"
