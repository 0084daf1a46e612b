"""Physical-stream replay on Spark against the in-process incremental host."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_query import Mean, rises

from udm.host import (
    INFINITY,
    Cht,
    Cti,
    Element,
    HoppingWindow,
    Host,
    Insert,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    derive_cht,
    evaluate_by_key,
    output_cht,
)
from udm.host.spark.replay import replay

pytestmark = pytest.mark.spark

Row = tuple[int, str, str | None, int, int | None, int | None, str | None, float | None]


def physical_rows(seed: int, n: int = 40) -> list[Row]:
    """A valid physical stream for keys a and b: inserts (points, intervals,
    open edges, closed at the end), shrinking, extending and full
    retractions, and CTIs that apply to every key (null key)."""
    rng = random.Random(seed)
    rows: list[Row] = []
    live: dict[str, tuple[str, int, int]] = {}
    t = cti = 0
    for i in range(n):
        r = rng.random()
        if r < 0.1 and t > cti:
            cti = rng.randrange(cti + 1, t + 1)
            rows.append((i, "CTI", None, cti, None, None, None, None))
            live = {k: v for k, v in live.items() if v[2] > cti}  # ends before it are final
        elif r < 0.35 and live:
            eid = rng.choice(sorted(live))
            key, s, e = live[eid]
            new = rng.choice([s, max(s + 1, cti), e + rng.randrange(1, 6), max(s + 1, cti) + 2])
            if new == e or min(new, e) < cti or (new == s and s < cti):
                continue
            rows.append((i, "retract", eid, s, None if e == INFINITY else e, new, None, None))
            if new == s:
                del live[eid]
            else:
                live[eid] = (key, s, new)
        else:
            t += rng.randrange(0, 3)
            s = max(t, cti)
            shape = rng.random()
            e = s + 1 if shape < 0.4 else (INFINITY if shape > 0.85 else s + rng.randrange(2, 9))
            key = rng.choice("ab")
            eid = f"e{i}"
            live[eid] = (key, s, e)
            temp = rng.randrange(0, 30) / 2
            rows.append((i, "insert", eid, s, None if e == INFINITY else e, None, key, temp))
    # close the open edges, so that hopping windows end
    for j, (eid, (_, s, e)) in enumerate(sorted(live.items())):
        if e == INFINITY:
            rows.append((n + j, "retract", eid, s, None, max(s, cti) + 3, None, None))
    return rows


def all_elements(rows: list[Row]) -> list[Element]:
    """The whole stream in arrival order, each CTI once."""
    owner = {r[2]: r[6] for r in rows if r[1] == "insert"}
    out: list[Element] = []
    for _seq, kind, eid, s, e, ne, _key, temp in rows:
        end = INFINITY if e is None else e
        if kind == "CTI":
            out.append(Cti(s))
        elif kind == "insert":
            out.append(Insert(eid, s, end, {"sensor": owner[eid], "temp": temp}))
        else:
            assert ne is not None
            out.append(Retract(eid, s, end, ne))
    return out


def elements_by_key(rows: list[Row]) -> dict[str, list[Element]]:
    keys = sorted({r[6] for r in rows if r[6] is not None})
    out: dict[str, list[Element]] = {k: [] for k in keys}
    for _seq, kind, eid, s, e, ne, key, temp in rows:
        end = INFINITY if e is None else e
        if kind == "CTI":
            for k in keys:
                out[k].append(Cti(s))
        elif kind == "insert":
            assert key is not None
            out[key].append(Insert(eid, s, end, {"sensor": key, "temp": temp}))
        else:
            owner = next(r[6] for r in rows if r[1] == "insert" and r[2] == eid)
            assert owner is not None and ne is not None
            out[owner].append(Retract(eid, s, end, ne))
    return out


@pytest.fixture(scope="module")
def stream(spark: Any) -> Any:
    rows = physical_rows(3)
    df = spark.createDataFrame(
        rows,
        "seq long, kind string, id string, start long, end long, new_end long, "
        "sensor string, temp double",
    )
    return rows, df.cache()


def test_changelog_equals_the_in_process_host(stream: Any) -> None:
    rows, df = stream
    window = HoppingWindow(6, 3)
    out = replay(df, window, Mean, key="sensor", value="temp")
    assert out.columns == [
        "seq",
        "kind",
        "id",
        "start",
        "end",
        "new_end",
        "sensor",
        "mean",
        "late_dropped",
        "late_adjusted",
    ]
    got: dict[str, list[tuple[Any, ...]]] = {}
    for r in out.orderBy("sensor", "seq").collect():
        got.setdefault(r["sensor"], []).append(
            (r["kind"], r["id"], r["start"], r["end"], r["new_end"], r["mean"])
        )
    expected: dict[str, list[tuple[Any, ...]]] = {}
    for key, elements in elements_by_key(rows).items():
        host = Host(window, Mean, value="temp")
        outputs = host.process_many(elements) + host.flush()
        expected[key] = [_changelog_row(el) for el in outputs]
    assert got == expected
    kinds = {k for rows_ in got.values() for k, *_ in rows_}
    assert kinds == {"insert", "retract", "cti"}


def _changelog_row(el: Element) -> tuple[Any, ...]:
    if isinstance(el, Cti):
        return ("cti", None, el.time, None, None, None)
    if isinstance(el, Insert):
        return ("insert", el.id.n, el.start, el.end, None, el.payload)
    return ("retract", el.id.n, el.start, el.old_end, el.new_end, el.payload)


def test_output_cht_equals_the_reference_evaluator(stream: Any) -> None:
    rows, df = stream
    window = SnapshotWindow()
    out = replay(df, window, rises, key="sensor", value="temp", output="cht")
    assert out.columns == ["start", "end", "sensor", "frm", "to"]
    got: dict[str, list[tuple[int, int, Any]]] = {}
    for r in out.collect():
        got.setdefault(r["sensor"], []).append(
            (r["start"], r["end"], {"frm": r["frm"], "to": r["to"]})
        )
    cht, _ = derive_cht(all_elements(rows))
    expected = evaluate_by_key(cht, "sensor", window, rises, value="temp")
    assert {k: Cht(v) for k, v in got.items()} == {k: c for k, c in expected.items() if c}
    # and the host's own output CHT agrees
    for key, elements in elements_by_key(rows).items():
        host = Host(window, rises, value="temp")
        assert output_cht(host.process_many(elements) + host.flush()) == expected[key]


@pytest.mark.parametrize("second_key", ["a", "b"])
def test_a_reused_id_takes_the_key_of_its_latest_insert(spark: Any, second_key: str) -> None:
    """A retraction without keys belongs to the latest insert of its id
    before it: x is fully retracted, then inserted again (same or other
    key). Hand-computed: only [5, 10) of the second x remains, mean 2."""
    rows = [
        (0, "insert", "x", 1, 3, None, "a", 1.0),
        (1, "retract", "x", 1, 3, 1, None, None),
        (2, "insert", "x", 5, 6, None, second_key, 2.0),
        (3, "retract", "x", 5, 6, 7, None, None),
        (4, "CTI", None, 10, None, None, None, None),
    ]
    df = spark.createDataFrame(
        rows,
        "seq long, kind string, id string, start long, end long, new_end long, "
        "sensor string, temp double",
    )
    out = replay(df, TumblingWindow(5), Mean, key="sensor", value="temp", output="cht")
    assert [tuple(r) for r in out.collect()] == [(5, 10, second_key, 2.0)]


@pytest.mark.parametrize(
    "policy, counts, cht",
    [
        ("drop", (2, 0), [(10, 20, 7.0)]),
        # [5, 6) ends before the CTI: dropped; [8, 15) starts at 10: (3 + 7) / 2
        ("adjust", (1, 1), [(10, 20, 5.0)]),
    ],
)
def test_late_elements_dropped_or_adjusted_are_counted(
    spark: Any, policy: str, counts: tuple[int, int], cht: list[Any]
) -> None:
    rows = [
        (0, "CTI", None, 10, None, None, None, None),
        (1, "insert", "p", 5, 6, None, "a", 1.0),
        (2, "insert", "q", 8, 15, None, "a", 3.0),
        (3, "insert", "r", 12, 13, None, "a", 7.0),
    ]
    df = spark.createDataFrame(
        rows,
        "seq long, kind string, id string, start long, end long, new_end long, "
        "sensor string, temp double",
    )
    out = replay(df, TumblingWindow(10), Mean, key="sensor", value="temp", cti_policy=policy)
    stats = [
        tuple(r)
        for r in out.where("kind = 'stats'").select("late_dropped", "late_adjusted").collect()
    ]
    assert stats == [counts]
    assert out.where("kind <> 'stats' AND late_dropped IS NOT NULL").count() == 0
    got = replay(
        df, TumblingWindow(10), Mean, key="sensor", value="temp", cti_policy=policy, output="cht"
    )
    assert [(r["start"], r["end"], r["mean"]) for r in got.collect()] == cht


def test_timestamps_come_back_with_the_flush_at_the_end_of_time_as_null(spark: Any) -> None:
    from datetime import datetime, timedelta

    t = datetime(2024, 1, 1)
    rows = [
        (0, "insert", "x", t, t + timedelta(minutes=1), None, "a", 2.0),
        (1, "insert", "y", t + timedelta(minutes=12), t + timedelta(minutes=13), None, "a", 4.0),
    ]
    df = spark.createDataFrame(
        rows,
        "seq long, kind string, id string, start timestamp, end timestamp, "
        "new_end timestamp, sensor string, temp double",
    )
    out = replay(df, TumblingWindow(timedelta(minutes=10)), Mean, key="sensor", value="temp")
    got = [(r["kind"], r["start"], r["end"], r["mean"]) for r in out.orderBy("seq").collect()]
    ten = timedelta(minutes=10)
    assert ("insert", t, t + ten, 2.0) in got and ("insert", t + ten, t + 2 * ten, 4.0) in got
    assert got[-1] == ("cti", None, None, None)  # the flush: the end of time


def test_a_null_seq_and_batch_options_are_refused_clearly(spark: Any) -> None:
    rows = [(None, "insert", "x", 1, 3, None, "a", 1.0), (1, "insert", "y", 2, 3, None, "a", 2.0)]
    df = spark.createDataFrame(
        rows,
        "seq long, kind string, id string, start long, end long, new_end long, "
        "sensor string, temp double",
    )
    with pytest.raises(Exception, match=r"replay row \(insert, id 'x', start 1\) has a null seq"):
        replay(df, TumblingWindow(5), Mean, key="sensor", value="temp").collect()
    # an insert without an id: the first was taken with id None, and a
    # second failed as a duplicate of it
    no_id = spark.createDataFrame([(r[0] or 0, *r[1:2], None, *r[3:]) for r in rows], df.schema)
    with pytest.raises(Exception, match=r"replay row #0 \(insert, start 1\) has a null id"):
        replay(no_id, TumblingWindow(5), Mean, key="sensor", value="temp").collect()
    for option, value in (("emit_empty", True), ("watermark", 5)):
        with pytest.raises(ValueError, match=rf"^{option}= is a batch option; replay runs"):
            replay(df, TumblingWindow(5), Mean, key="sensor", value="temp", **{option: value})
