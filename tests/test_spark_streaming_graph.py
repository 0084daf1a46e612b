"""Whole queries in Structured Streaming: the operator graph per key
(``udm.host.spark.graphstream``) gives the batch reference's CHT, for a
join of two streaming sources (restarted from its checkpoint half way), a
union under a window, and a lifetime change under a snapshot aggregate
with two UDMs; queries keyed otherwise are refused naming the operator.

Inputs are tiny JSON files, one per micro-batch and source
(maxFilesPerTrigger=1); times are whole seconds in ticks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

import pytest

from udm.host import Cht, TumblingWindow
from udm.host.query import Stream
from udm.host.stream import Cti, Element, Insert, Retract

pytestmark = pytest.mark.spark

S = 1_000_000
COLUMNS = "kind string, id long, start long, end long, new_end long, k string, {v} double, seq long"


def ins(i: int, t: int, k: str, v: float, end: int, name: str = "v") -> dict[str, Any]:
    return {"kind": "insert", "id": i, "start": t * S, "end": end * S, "k": k, name: v}


def retract(i: int, t: int, end: int, new_end: int, k: str) -> dict[str, Any]:
    return {
        "kind": "retract",
        "id": i,
        "start": t * S,
        "end": end * S,
        "new_end": new_end * S,
        "k": k,
    }


def cti(t: int, k: str | None = None) -> dict[str, Any]:
    return {"kind": "cti", "start": t * S, "k": k}


def write(folder: Path, batches: Sequence[Sequence[dict[str, Any]]], first: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    seq = sum(1 for _ in folder.glob("*.json")) * 100
    for i, rows in enumerate(batches, start=first):
        path = folder / f"part-{i:03d}.json"
        with open(path, "w") as f:
            for row in rows:
                f.write(json.dumps({**row, "seq": seq}) + "\n")
                seq += 1
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def source(spark: Any, folder: Path, v: str = "v") -> Stream:
    df = (
        spark.readStream.schema(COLUMNS.format(v=v))
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )
    return Stream.from_dataframe(df, start="start", end="end", key="k")


def physical(batches: Sequence[Sequence[dict[str, Any]]], v: str = "v") -> list[Element]:
    out: list[Element] = []
    for rows in batches:
        for r in rows:
            if r["kind"] == "insert":
                out.append(Insert(r["id"], r["start"], r["end"], {"k": r["k"], v: r[v]}))
            elif r["kind"] == "retract":
                out.append(Retract(r["id"], r["start"], r["end"], r["new_end"]))
            elif r["k"] is None:
                out.append(Cti(r["start"]))
    return out


def run(stream: Stream, tmp: Path, name: str = "out", **options: Any) -> Any:
    from udm.host.spark.streaming import read_changelog, start_stream

    changelog = stream.to_stream(input="elements", seq="seq", **options)
    q = start_stream(
        changelog, str(tmp / name), str(tmp / f"{name}.ck"), trigger={"availableNow": True}
    )
    q.awaitTermination()
    return read_changelog(changelog.sparkSession, str(tmp / name))


def streamed_cht(log: Any) -> dict[Any, Cht]:
    from udm.host.spark.streaming import changelog_cht

    cht = changelog_cht(log, ["k"])
    payload = [c for c in cht.columns if c not in ("start", "end")]
    out: dict[Any, list[tuple[int, int, Any]]] = {}
    for r in cht.collect():
        out.setdefault(r["k"], []).append((r["start"], r["end"], {c: r[c] for c in payload}))
    return {k: Cht(v) for k, v in out.items()}


def rows(cht: Cht) -> list[tuple[int, int, Any]]:
    return [(e.start, e.end, e.payload) for e in cht.sorted()]


def as_dicts(reference: Any, names: Sequence[str]) -> dict[Any, Cht]:
    """The reference CHT with every payload a dict of the output columns."""
    out = {}
    for key, cht in reference.items():
        rows = []
        for e in cht:
            p = e.payload if isinstance(e.payload, dict) else {names[-1]: e.payload}
            rows.append((e.start, e.end, {"k": key, **p}))
        out[key] = Cht(rows)
    return out


LEFT = [
    [ins(0, 1, "a", 1.0, 6, "x"), ins(1, 2, "b", 2.0, 9, "x")],
    [ins(2, 4, "a", 3.0, 12, "x"), cti(3, "a")],
    [retract(2, 4, 12, 7, "a"), ins(3, 11, "b", 5.0, 15, "x")],
    [ins(4, 20, "a", 7.0, 25, "x"), cti(40)],
]
RIGHT = [
    [ins(0, 3, "a", 10.0, 5, "y")],
    [ins(1, 5, "a", 20.0, 30, "y"), ins(2, 1, "b", 30.0, 12, "y")],
    [ins(3, 13, "b", 40.0, 14, "y"), retract(1, 5, 30, 22, "a")],
    [cti(40)],
]


def test_a_join_of_two_streams_equals_batch_across_a_restart(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "l", LEFT[:2])
    write(tmp_path / "r", RIGHT[:2])

    def query() -> Stream:
        left, right = source(spark, tmp_path / "l", "x"), source(spark, tmp_path / "r", "y")
        return left.join(right, on="k")

    run(query(), tmp_path)
    write(tmp_path / "l", LEFT[2:], first=2)
    write(tmp_path / "r", RIGHT[2:], first=2)
    log = run(query(), tmp_path)  # the same checkpoint: the state is restored
    assert log.select("batch_id").distinct().count() >= 4
    reference = (
        Stream.from_events(physical(LEFT, "x"), key="k")
        .join(Stream.from_events(physical(RIGHT, "y"), key="k"), on="k")
        .to_cht(engine="reference")
    )
    got = streamed_cht(log)
    assert got == as_dicts(reference, ["k", "x", "y"])
    # hand-checked: a's x1 [1,6), x3 [4,7) (retracted from 12), x7 [20,25)
    # meet y10 [3,5) and y20 [5,22) (retracted from 30)
    assert sorted(rows(got["a"]), key=lambda r: r[:2]) == [
        (3 * S, 5 * S, {"k": "a", "x": 1.0, "y": 10.0}),
        (4 * S, 5 * S, {"k": "a", "x": 3.0, "y": 10.0}),
        (5 * S, 6 * S, {"k": "a", "x": 1.0, "y": 20.0}),
        (5 * S, 7 * S, {"k": "a", "x": 3.0, "y": 20.0}),
        (20 * S, 22 * S, {"k": "a", "x": 7.0, "y": 20.0}),
    ]


UNION_A = [
    [ins(0, 1, "a", 1.0, 2), ins(1, 12, "b", 2.0, 13)],
    [ins(2, 4, "a", 3.0, 5), retract(1, 12, 13, 12, "b"), cti(40)],
]
UNION_B = [
    [ins(0, 2, "a", 10.0, 3), ins(1, 15, "b", 20.0, 16)],
    [ins(2, 23, "a", 30.0, 24), cti(40)],
]


def test_a_window_over_a_union_of_two_streams_equals_batch(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "a", UNION_A)
    write(tmp_path / "b", UNION_B)
    window = TumblingWindow(10 * S)
    stream = source(spark, tmp_path / "a").union(source(spark, tmp_path / "b"))
    log = run(stream.window(window).aggregate("stats.mean", value="v"), tmp_path)
    reference = (
        Stream.from_events(physical(UNION_A), key="k")
        .union(Stream.from_events(physical(UNION_B), key="k"))
        .window(window)
        .aggregate("stats.mean", value="v")
        .to_cht(engine="reference")
    )
    got = streamed_cht(log)
    assert got == as_dicts(reference, ["k", "mean"])
    assert rows(got["a"]) == [
        (0, 10 * S, {"k": "a", "mean": (1.0 + 3.0 + 10.0) / 3}),
        (20 * S, 30 * S, {"k": "a", "mean": 30.0}),
    ]
    assert rows(got["b"]) == [(10 * S, 20 * S, {"k": "b", "mean": 20.0})]


SHIFTED = [
    [ins(0, 1, "a", 1.0, 3), ins(1, 2, "a", 5.0, 6), ins(2, 1, "b", 4.0, 2)],
    [retract(1, 2, 6, 4, "a"), ins(3, 9, "b", 6.0, 10), cti(40)],
]


def test_a_snapshot_aggregate_of_two_udms_after_a_lifetime_change_equals_batch(
    spark: Any, tmp_path: Path
) -> None:
    write(tmp_path / "in", SHIFTED)

    def query(stream: Stream) -> Stream:
        return (
            stream.alter_lifetime(start=lambda s: s + 2 * S, duration=lambda s, e: 3 * S)
            .snapshot_window()
            .aggregate(avg=("stats.mean", "v"), n=("stats.distinct_count", "v"))
        )

    log = run(query(source(spark, tmp_path / "in")), tmp_path)
    reference = query(Stream.from_events(physical(SHIFTED), key="k")).to_cht(engine="reference")
    assert streamed_cht(log) == as_dicts(reference, ["k", "avg", "n"])


def test_operators_keyed_by_other_columns_are_refused_naming_the_operator() -> None:
    from udm.host.spark.graphstream import partition_keys

    events = [Insert(0, 1, 2, {"k": "a", "j": 1, "v": 1.0})]
    keyed = Stream.from_events(events, key="k")
    ungrouped = Stream.from_events(events)
    with pytest.raises(ValueError, match="operator 'join on j' is keyed by \\['j'\\]"):
        partition_keys(keyed.join(keyed, on="j").group_apply("k").plan)
    with pytest.raises(
        ValueError, match="operator 'window TumblingWindow\\(size=5\\)' is keyed by \\[\\]"
    ):
        partition_keys(
            ungrouped.tumbling_window(5).aggregate("stats.min", value="v").join(keyed, on="k").plan
        )
    assert partition_keys(keyed.join(keyed, on="k").shift(3).plan) == ("k",)


def test_a_result_type_that_is_not_declared_is_refused(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "in", [[ins(0, 1, "a", 1.0, 2)]])
    stream = source(spark, tmp_path / "in").where(lambda p: p["v"] > 0)
    with pytest.raises(TypeError, match=r"result type of 'min' .* is not declared"):
        stream.tumbling_window(5).aggregate("stats.min", value="v").to_stream(input="elements")
    other = spark.readStream.schema("start long, k long, v double").json(str(tmp_path / "in"))
    longs = Stream.from_dataframe(other, start="start", key="k")
    with pytest.raises(TypeError, match=r"key column 'k' has the types \['bigint', 'string'\]"):
        source(spark, tmp_path / "in").union(longs).to_stream()


def test_a_chain_of_where_and_two_window_operations_equals_batch(
    spark: Any, tmp_path: Path
) -> None:
    write(tmp_path / "in", UNION_A)

    def query(stream: Stream) -> Stream:
        means = (
            stream.where(lambda p: p["v"] < 3.0)
            .window(TumblingWindow(10 * S))
            .aggregate("stats.mean", value="v")
        )
        return means.snapshot_window().aggregate("stats.mean", value="mean")

    log = run(query(source(spark, tmp_path / "in")), tmp_path)
    reference = query(Stream.from_events(physical(UNION_A), key="k")).to_cht(engine="reference")
    got = streamed_cht(log)
    assert got == as_dicts(reference, ["k", "mean"])
    # a's values below 3: 1.0 in [0, 10); b's 2.0 was retracted whole
    assert rows(got["a"]) == [(0, 10 * S, {"k": "a", "mean": 1.0})]


def test_a_strong_anti_join_equals_batch_and_never_retracts(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "l", LEFT)
    write(tmp_path / "r", RIGHT)
    left, right = source(spark, tmp_path / "l", "x"), source(spark, tmp_path / "r", "y")
    log = run(left.left_anti_join(right, on="k"), tmp_path, consistency="strong")
    reference = (
        Stream.from_events(physical(LEFT, "x"), key="k")
        .left_anti_join(Stream.from_events(physical(RIGHT, "y"), key="k"), on="k")
        .to_cht(engine="reference")
    )
    assert streamed_cht(log) == as_dicts(reference, ["k", "x"])
    # strong consistency blocks until CTIs: the output is final, never retracted
    assert log.where("kind = 'retract'").count() == 0
    assert log.where("kind = 'insert'").count() == sum(len(c) for c in reference.values())


class Summed(TypedDict):
    total: float


def summed(left: Any, right: Any) -> Summed:
    """A join's select=, its output columns declared (a streaming query
    cannot type them from data)."""
    return {"total": left["x"] + right["y"]}


def test_a_join_with_select_equals_batch(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "l", LEFT)
    write(tmp_path / "r", RIGHT)
    left, right = source(spark, tmp_path / "l", "x"), source(spark, tmp_path / "r", "y")
    log = run(left.join(right, on="k", select=summed), tmp_path)
    batch_left = Stream.from_events(physical(LEFT, "x"), key="k")
    batch_right = Stream.from_events(physical(RIGHT, "y"), key="k")
    reference = batch_left.join(batch_right, on="k", select=summed).to_cht(engine="reference")
    got = streamed_cht(log)
    assert got == as_dicts(reference, ["k", "total"])
    # the pairs of the plain join above, each payload x + y
    assert sorted(rows(got["a"]), key=lambda r: r[:2]) == [
        (3 * S, 5 * S, {"k": "a", "total": 11.0}),
        (4 * S, 5 * S, {"k": "a", "total": 13.0}),
        (5 * S, 6 * S, {"k": "a", "total": 21.0}),
        (5 * S, 7 * S, {"k": "a", "total": 23.0}),
        (20 * S, 22 * S, {"k": "a", "total": 27.0}),
    ]
    with pytest.raises(TypeError, match="select= are not declared"):
        left.join(right, on="k", select=lambda a, b: {"total": 0.0}).to_stream(input="elements")


#: a's third event starts at 3, after the second's 10: with remember 2 it
#: is behind the Finalize's time 10 - 2 = 8 and dropped; the fourth (9) is not
FINALIZED = [
    [ins(0, 1, "a", 1.0, 5), ins(1, 10, "a", 2.0, 12), ins(2, 3, "a", 3.0, 4)],
    [ins(3, 9, "a", 4.0, 11), cti(40)],
]


def test_a_bounded_finalize_equals_batch(spark: Any, tmp_path: Path) -> None:
    """Found by tests/test_operators_streaming.py: typing the output of a
    query with a bounded Finalize (finalize(m), the weak level) ran the
    batch plan, whose bounded Finalize needs an in-memory physical stream,
    so to_stream() refused every such query."""
    from udm.host.spark.streaming import stream_counts

    write(tmp_path / "in", FINALIZED)
    levels: dict[str, Callable[[Stream], Stream]] = {
        "finalize": lambda stream: stream.finalize(2 * S),
        "weak": lambda stream: stream.with_consistency(("weak", 2 * S)),
    }
    for level, query in levels.items():
        log = run(query(source(spark, tmp_path / "in")), tmp_path, name=level)
        reference = query(Stream.from_events(physical(FINALIZED), key="k"))
        got = streamed_cht(log)
        assert got == as_dicts(reference.to_cht(engine="reference"), ["k", "v"]), level
        assert sorted(rows(got["a"])) == [
            (1 * S, 5 * S, {"k": "a", "v": 1.0}),
            (9 * S, 11 * S, {"k": "a", "v": 4.0}),
            (10 * S, 12 * S, {"k": "a", "v": 2.0}),
        ], level
        assert stream_counts(log)["late_dropped"] == 1, level
