"""The CEDR operators: the papers' worked examples, exactly, and the
incremental operator graph against the reference engine on generated
physical streams (disorder, every retraction kind, CTIs anywhere, keys)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import equivalent_streams, interval_events, with_ctis

from udm.host import (
    INFINITY,
    MIN_TIME,
    Cht,
    Cti,
    Insert,
    IntervalEvent,
    Retract,
    TumblingWindow,
    derive_cht,
)
from udm.host.algebra import anti_join_rows, join_rows, subtract_intervals
from udm.host.errors import OperatorError
from udm.host.operators.base import Collector
from udm.host.operators.consistency import AlignOperator, FinalizeOperator
from udm.host.operators.join import AntiJoinOperator, JoinOperator
from udm.host.operators.lifetime import AlterLifetimeOperator
from udm.host.query import Stream
from udm.host.stream import ExternalCti
from udm.sdk import aggregate


@aggregate
def total(values: list[Any]) -> Any:
    return sum(values)


def run(op: Any, feed: list[tuple[int, Any]]) -> list[Any]:
    sink = Collector()
    op.connect(sink)
    for port, element in feed:
        op.push(port, element)
    return sink.elements


def by_payload(p: Any) -> Any:
    return p["P"]


def pair(lp: Any, rp: Any) -> Any:
    return {"P": lp["P"]}


# ------------------------------------------------------ the papers' examples


def test_cedr_join_example_gives_table_4() -> None:
    """CEDR 4.3, Table 1 in arrival order: the output is Table 4 and its CHT
    Table 3 ([3, 4) A1)."""
    a0, a1 = {"P": "A0"}, {"P": "A1"}
    out = run(
        JoinOperator(by_payload, by_payload, pair),
        [
            (0, Insert("s1a0", 0, 2, a0)),
            (0, Cti(1)),
            (0, Insert("s1a1", 2, 6, a1)),
            (1, Insert("s2a1", 3, 5, a1)),
            (1, Cti(3)),
            (0, Retract("s1a1", 2, 6, 4)),
        ],
    )
    assert out == [
        Insert(("s1a1", "s2a1"), 3, 5, {"P": "A1"}),
        Cti(1),
        Retract(("s1a1", "s2a1"), 3, 5, 4),
    ]


def test_cedr_join_example_through_the_query_api() -> None:
    left = Stream.from_events(
        [Insert(0, 0, 2, {"P": "A0"}), Cti(1), Insert(1, 2, 6, {"P": "A1"}), Retract(1, 2, 6, 4)]
    )
    right = Stream.from_events([Insert(0, 3, 5, {"P": "A1"}), Cti(3)])
    query = left.join(right, on="P")
    expected = {"A1": Cht([IntervalEvent(3, 4, {"P": "A1"})])}
    assert query.to_cht(engine="reference") == expected
    assert query.to_cht(engine="host") == expected


def test_cedr_finalize_example_table_5() -> None:
    """CEDR 4.6, Table 5: the broken chain is repaired onto the insert
    ([0, 4) P0), and the ExternalCTI [0, 8] with count 5 becomes CTI 8
    once the fifth element arrives."""
    out = run(
        FinalizeOperator(INFINITY),
        [
            (0, Retract("p0", 0, 10, 8)),
            (0, Retract("p0", 0, 6, 4)),
            (0, Retract("p0", 0, 8, 6)),
            (0, Insert("p0", 0, 10, "P0")),
            (0, ExternalCti(0, 8, 5)),
            (0, Insert("p1", 1, 5, "P1")),
        ],
    )
    assert out == [Insert("p0", 0, 4, "P0"), Insert("p1", 1, 5, "P1"), Cti(8)]


def test_finalize_refuses_an_external_cti_counting_fewer_than_arrived() -> None:
    op = FinalizeOperator(INFINITY)
    run(op, [(0, Insert("a", 1, 2, 0)), (0, Insert("b", 2, 3, 0))])
    with pytest.raises(OperatorError, match="count 1 is below the 2 elements"):
        op.push(0, ExternalCti(0, 5, 1))
    assert not op.intervals  # state unchanged


def test_finalize_with_bounded_memory_drops_and_counts_late_input() -> None:
    op = FinalizeOperator(5)
    out = run(
        op,
        [(0, Insert("a", 10, 11, 0)), (0, Insert("b", 20, 21, 0)), (0, Insert("late", 12, 13, 0))],
    )
    assert out == [Insert("a", 10, 11, 0), Cti(5), Insert("b", 20, 21, 0), Cti(15)]
    assert op.dropped == 1


def test_alter_lifetime_keeps_full_retractions_full() -> None:
    """CEDR 4.2: with a constant duration a shrink changes nothing, but a
    full retraction still deletes the output."""
    out = run(
        AlterLifetimeOperator(None, lambda s, e: 10),
        [
            (0, Insert("a", 1, 5, 0)),
            (0, Retract("a", 1, 5, 3)),
            (0, Retract("a", 1, 3, 1)),
            (0, Cti(7)),
        ],
    )
    assert out == [Insert("a", 1, 11, 0), Retract("a", 1, 11, 1), Cti(7)]


def test_shift_keeps_an_open_end_open() -> None:
    out = run(AlterLifetimeOperator(lambda s: s + 5, None), [(0, Insert("a", 1, INFINITY, 0))])
    assert out == [Insert("a", 6, INFINITY, 0)]


def test_a_start_function_that_is_not_monotone_is_refused() -> None:
    op = AlterLifetimeOperator(lambda s: -s, None, "alter_lifetime")
    run(op, [(0, Insert("a", 1, 2, 0))])
    with pytest.raises(OperatorError, match="not monotone"):
        op.push(0, Insert("b", 5, 6, 0))
    with pytest.raises(OperatorError, match="not monotone"):
        Stream.from_cht([(1, 2, 0), (5, 6, 0)]).alter_lifetime(start=lambda s: -s).to_cht()


def test_a_duration_growing_as_the_end_shrinks_is_refused() -> None:
    """Checked at the insert (against the shortest end, as the reference
    engine checks it) and, for a function that passes that check, at the
    retraction that would lengthen the output."""
    op = AlterLifetimeOperator(None, lambda s, e: 100 - (e - s))
    with pytest.raises(OperatorError, match="duration grows"):
        op.push(0, Insert("a", 0, 50, 0))
    zigzag = AlterLifetimeOperator(None, lambda s, e: 50 if e - s == 40 else 10)
    run(zigzag, [(0, Insert("a", 0, 50, 0))])
    with pytest.raises(OperatorError, match="duration"):
        zigzag.push(0, Retract("a", 0, 50, 40))


def test_negative_durations_and_different_keys_are_refused() -> None:
    s = Stream.from_cht([(0, 1, {"k": 1})], key="k")
    with pytest.raises(OperatorError, match="positive"):
        s.set_duration(-3)
    with pytest.raises(OperatorError, match="keys differ"):
        s.join(Stream.from_cht([(0, 1, {"j": 1})], key="j"))


def test_anti_join_detects_absence() -> None:
    readings = Stream.from_cht([(0, 10, {"k": "a"}), (0, 10, {"k": "b"})], key="k")
    beats = Stream.from_cht([(2, 4, {"k": "a"}), (6, 7, {"k": "a"})], key="k")
    q = readings.left_anti_join(beats)
    expected = {
        "a": Cht(
            [
                IntervalEvent(0, 2, {"k": "a"}),
                IntervalEvent(4, 6, {"k": "a"}),
                IntervalEvent(7, 10, {"k": "a"}),
            ]
        ),
        "b": Cht([IntervalEvent(0, 10, {"k": "b"})]),
    }
    assert q.to_cht(engine="reference") == expected
    assert q.to_cht(engine="host") == expected


def test_anti_join_retracts_speculation_or_waits_when_conservative() -> None:
    feed = [
        (0, Insert("l", 0, 10, {"k": 1})),
        (1, Insert("r", 3, 5, {"k": 1})),
        (0, Cti(20)),
        (1, Cti(20)),
    ]
    key = lambda p: p["k"]  # noqa: E731
    speculative = run(AntiJoinOperator(key, key), list(feed))
    assert speculative[0] == Insert(("l", 0), 0, 10, {"k": 1})
    assert Retract(("l", 0), 0, 10, 3) in speculative
    conservative = run(AntiJoinOperator(key, key, conservative=True), list(feed))
    assert not any(isinstance(e, Retract) for e in conservative)
    assert Cht(
        IntervalEvent(e.start, e.end, e.payload) for e in conservative if isinstance(e, Insert)
    ) == Cht([IntervalEvent(0, 3, {"k": 1}), IntervalEvent(5, 10, {"k": 1})])


def test_align_merges_retractions_into_held_inserts() -> None:
    out = run(
        AlignOperator(INFINITY),
        [
            (0, Insert("a", 1, 10, 0)),
            (0, Retract("a", 1, 10, 4)),
            (0, Insert("b", 2, 3, 0)),
            (0, Retract("b", 2, 3, 2)),
            (0, Cti(5)),
        ],
    )
    assert out == [Insert("a", 1, 4, 0), Cti(5)]


def test_algebra_definitions() -> None:
    assert subtract_intervals(0, 10, []) == [(0, 10)]
    assert subtract_intervals(0, 10, [(-5, 20)]) == []
    left = [(0, 10, {"k": 1, "v": "l"})]
    right = [(5, 15, {"k": 1, "v": "r"}), (0, 3, {"k": 2, "v": "x"})]
    assert join_rows(left, right, ("k",)) == [(5, 10, {"k": 1, "v_left": "l", "v_right": "r"})]
    assert anti_join_rows(left, right, ("k",)) == [(0, 5, {"k": 1, "v": "l"})]


# ------------------------------------------------ differential, generated


def keyed_payloads() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"k": st.sampled_from("ab"), "x": st.integers(0, 9)})


@st.composite
def keyed_stream(draw: st.DrawFn, max_size: int = 6, infinite: bool = False) -> list[Any]:
    events = draw(
        st.lists(interval_events(payload=keyed_payloads(), infinite=infinite), max_size=max_size)
    )
    return draw(equivalent_streams(events, ghosts=2, payload=keyed_payloads()))


def queries(left: Stream, right: Stream) -> dict[str, Stream]:
    return {
        **unwindowed(left, right),
        "window_over_join": left.join(right).tumbling_window(5).aggregate(total, value="x_left"),
        "snapshot_over_union": left.union(right).snapshot_window().aggregate(total, value="x"),
    }


def unwindowed(left: Stream, right: Stream) -> dict[str, Stream]:
    return {
        "join": left.join(right),
        "join_where": left.join(right, where=lambda a, b: a["x"] <= b["x"]),
        "anti_join": left.left_anti_join(right),
        "union": left.union(right),
        "shift": left.shift(3),
        "set_duration": left.set_duration(4),
        "clip_to": left.clip_to(2),
        "to_points": left.to_points(),
        "where": left.where(lambda p: p["x"] % 2 == 0),
    }


@settings(max_examples=150, deadline=None)
@given(
    keyed_stream(),
    keyed_stream(),
    st.sampled_from(list(queries(Stream.from_cht([], key="k"), Stream.from_cht([], key="k")))),
)
def test_the_operator_graph_equals_the_reference(l_el: Any, r_el: Any, name: str) -> None:
    left = Stream.from_events(l_el, key="k")
    right = Stream.from_events(r_el, key="k")
    query = queries(left, right)[name]
    expected = query.to_cht(engine="reference")
    assert query.to_cht(engine="host") == expected
    # every consistency level converges to the same CHT; strong never retracts
    for level in ("strong", "middle"):
        out = query.to_events(consistency=level)
        if level == "strong":
            assert not any(isinstance(e, Retract) for e in out)
    assert query.with_consistency("strong").to_cht(engine="host") == expected


def reuse_ids(elements: list[Any]) -> list[Any]:
    """The same physical stream with every id reused as soon as the stream
    may reuse it (docs/concepts.md: once its event is fully retracted or
    ends before the latest CTI): each new event takes the earliest freed id."""
    cti = MIN_TIME
    name: dict[Any, Any] = {}  # original id -> the id it is given
    live: dict[Any, tuple[int, int]] = {}  # given id -> (start, end) of its event
    freed: list[Any] = []
    out: list[Any] = []
    for e in elements:
        if isinstance(e, Cti):
            cti = max(cti, e.time)
            for given in [g for g, (_, end) in live.items() if end < cti]:
                del live[given]
                freed.append(given)
            out.append(e)
        elif isinstance(e, Insert):
            given = freed.pop(0) if freed else e.id
            name[e.id] = given
            live[given] = (e.start, e.end)
            out.append(Insert(given, e.start, e.end, e.payload))
        else:
            given = name[e.id]
            out.append(Retract(given, e.start, e.old_end, e.new_end))
            if e.new_end <= e.start:
                del live[given]
                freed.append(given)
            else:
                live[given] = (e.start, e.new_end)
    return out


def test_reuse_ids_reuses_what_the_stream_may() -> None:
    stream = [
        Insert("a", 1, 3, 0),
        Cti(5),
        Insert("b", 6, 8, 1),
        Retract("b", 6, 8, 6),
        Insert("c", 7, 9, 2),
        Retract("c", 7, 9, 8),
    ]
    assert reuse_ids(stream) == [
        Insert("a", 1, 3, 0),
        Cti(5),
        Insert("a", 6, 8, 1),
        Retract("a", 6, 8, 6),
        Insert("a", 7, 9, 2),
        Retract("a", 7, 9, 8),
    ]


def reuse_queries(left: Stream, right: Stream) -> dict[str, Stream]:
    return {
        **queries(left, right),
        "snapshot_over_set_duration": left.set_duration(4)
        .snapshot_window()
        .aggregate(total, value="x"),
        "anti_join_over_set_duration": left.set_duration(4).left_anti_join(right),
        "join_over_union": left.union(right).join(right),
        "align": left.align(blocking=3),
        "finalize": left.finalize(),
    }


@st.composite
def reusing_stream(draw: st.DrawFn, max_size: int = 8) -> list[Any]:
    """Events arriving in start order with CTIs close behind them and
    every id reused as soon as it may be: the streams that reuse ids most."""
    events = draw(st.lists(interval_events(payload=keyed_payloads()), max_size=max_size))
    events.sort(key=lambda e: e.start)
    stream: list[Any] = []
    for i, e in enumerate(events):
        stream.append(Insert(f"e{i}", e.start, e.end, e.payload))
        if draw(st.integers(0, 3)) == 0:
            stream.append(Retract(f"e{i}", e.start, e.end, e.start))
    return reuse_ids(with_ctis(stream, every=draw(st.integers(1, 3))))


@settings(max_examples=300, deadline=None)
@given(
    reusing_stream(),
    st.one_of(reusing_stream(), keyed_stream().map(reuse_ids)),
    st.sampled_from(
        list(reuse_queries(Stream.from_cht([], key="k"), Stream.from_cht([], key="k")))
    ),
)
def test_reused_ids_give_the_reference_result_on_every_operator(
    l_el: Any, r_el: Any, name: str
) -> None:
    """An id reused as soon as the input may (its event fully retracted or
    ended before the CTI) while the operator's output or state still holds
    the earlier event: a union's lagging CTI, a lengthened lifetime, a
    join's other side. Found by black-box testing: the host crashed or
    lost a pair; now every output stream stays valid."""
    left = Stream.from_events(l_el, key="k")
    right = Stream.from_events(r_el, key="k")
    query = reuse_queries(left, right)[name]
    expected = query.to_cht(engine="reference")
    assert query.to_cht(engine="host") == expected
    assert query.with_consistency("strong").to_cht(engine="host") == expected
    assert query.with_consistency("middle").to_cht(engine="host") == expected
    derive_cht(query.to_events())  # a valid physical stream


@settings(max_examples=150, deadline=None)
@given(
    keyed_stream(infinite=True),
    keyed_stream(infinite=True),
    st.sampled_from(list(unwindowed(Stream.from_cht([], key="k"), Stream.from_cht([], key="k")))),
)
def test_events_that_never_end_stay_open_through_every_operator(
    l_el: Any, r_el: Any, name: str
) -> None:
    query = unwindowed(Stream.from_events(l_el, key="k"), Stream.from_events(r_el, key="k"))[name]
    assert query.to_cht(engine="host") == query.to_cht(engine="reference")


@settings(max_examples=100, deadline=None)
@given(keyed_stream(), st.integers(0, 10))
def test_weak_consistency_equals_the_reference_over_the_finalized_stream(
    elements: Any, remember: int
) -> None:
    # (a dropped retraction can leave an event open: clip_to keeps windows finite)
    finalized = Stream.from_events(elements, key="k").finalize(remember).clip_to(30)
    q = finalized.tumbling_window(5).aggregate(total, value="x")
    assert q.to_cht(engine="host") == q.to_cht(engine="reference")


@settings(max_examples=100, deadline=None)
@given(keyed_stream(), keyed_stream())
def test_join_of_perfect_streams_emits_no_retraction(l_el: Any, r_el: Any) -> None:
    """Perfectness preserving (CEDR Definition 6): inserts in start order
    and no retractions in, none out; and the output is ordered."""

    def perfect(elements: list[Any]) -> list[Any]:
        cht = Stream.from_events(elements).to_cht(engine="reference")
        assert isinstance(cht, Cht)
        ordered = sorted(cht, key=lambda e: e.start)
        return [Insert(i, e.start, e.end, e.payload) for i, e in enumerate(ordered)]

    left, right = (
        Stream.from_events(perfect(l_el), key="k"),
        Stream.from_events(perfect(r_el), key="k"),
    )
    out = left.join(right).to_events()
    assert not any(isinstance(e, Retract) for e in out)


def test_window_operation_after_a_join_runs_on_every_engine_alike() -> None:
    left = Stream.from_cht([(0, 6, {"k": 1, "x": 1}), (2, 9, {"k": 1, "x": 2})], key="k")
    right = Stream.from_cht([(1, 4, {"k": 1, "y": 10}), (5, 12, {"k": 1, "y": 20})], key="k")
    q = left.join(right).tumbling_window(TumblingWindow(5).size).aggregate(total, value="y")
    ref = q.to_cht(engine="reference")
    # pairs: [1,4) y10 (x1), [5,6) y20 (x1), [2,4) y10 (x2), [5,9) y20 (x2)
    assert ref == {1: Cht([IntervalEvent(0, 5, 20), IntervalEvent(5, 10, 40)])}
    assert q.to_cht(engine="host") == ref


# ------------------------------------------------------------------ Spark


@pytest.mark.spark
def test_every_operator_on_spark_equals_the_reference(spark: Any) -> None:
    """The same queries over DataFrames: union, lifetimes, the bucketed
    interval join (long and open events span many buckets), anti-join and
    a window over a join, each equal to the reference engine's CHT."""
    left_rows = [
        ("a", 0, 6, 1),
        ("a", 2, 9, 2),
        ("a", 20, None, 3),
        ("b", 1, 3, 4),
        ("b", 5, 40, 5),
    ]
    right_rows = [("a", 1, 4, 10), ("a", 5, 12, 20), ("a", 30, 31, 30), ("b", 2, 8, 40)]
    schema = "k string, s long, e long, {} long"
    ldf = spark.createDataFrame(left_rows, schema.format("x"))
    rdf = spark.createDataFrame(right_rows, schema.format("y"))
    left = Stream.from_dataframe(ldf, start="s", end="e", shape="edge", key="k")
    right = Stream.from_dataframe(rdf, start="s", end="e", shape="edge", key="k")
    queries = {
        "join": left.join(right),
        "join_where": left.join(right, where=lambda a, b: a["x"] * 10 <= b["y"]),
        "anti_join": left.left_anti_join(right),
        "union": left.select("x").union(right.select(x=lambda p: p["y"])),
        "shift": left.shift(-2),
        "set_duration": left.set_duration(3),
        "clip_to": left.clip_to(4),
        "to_points": left.to_points(),
        "custom": left.alter_lifetime(start=lambda s: s // 10 * 10, duration=lambda s, e: 10),
        "window": left.join(right).clip_to(50).tumbling_window(5).aggregate(total, value="y"),
    }
    for name, query in queries.items():
        assert query.to_cht(engine="spark") == query.to_cht(engine="reference"), name


def test_anti_join_keeps_right_events_that_still_cut_live_left_events() -> None:
    """Found by a query fixture: a right CTI past the right events forgot
    them while a left event they overlap was still live (the left side
    had no CTI), so at strong consistency the end of the stream refreshed
    the left event without its holes and retracted correct output."""
    left = Stream.from_events([Insert("x", 0, 20, {"k": "a"})], key="k")
    right = Stream.from_events(
        [Insert("h1", 0, 5, {"k": "a"}), Insert("h2", 12, 17, {"k": "a"}), Cti(20)], key="k"
    )
    q = left.left_anti_join(right)
    expected = {"a": Cht([IntervalEvent(5, 12, {"k": "a"}), IntervalEvent(17, 20, {"k": "a"})])}
    assert q.to_cht(engine="reference") == expected
    strong = q.to_events(consistency="strong")
    assert not any(isinstance(e, Retract) for e in strong)
    assert [e for e in strong if isinstance(e, Insert)] == [
        Insert(("x", 0), 5, 12, {"k": "a"}),
        Insert(("x", 1), 17, 20, {"k": "a"}),
    ]


# ------------------------------------- found by black-box acceptance tests


def _both(query: Stream) -> Any:
    ref = query.to_cht(engine="reference")
    assert query.to_cht(engine="host") == ref
    return ref


def test_union_of_physical_streams_fills_missing_columns_for_what_follows() -> None:
    a = Stream.from_events([Insert("x", 0, 5, {"k": "a", "v": 1})], key="k")
    b = Stream.from_events([Insert("y", 0, 5, {"k": "a", "w": 2})], key="k")
    out = _both(a.union(b).join(b))
    assert out == {
        "a": Cht(
            [
                IntervalEvent(0, 5, {"k": "a", "v": 1, "w_left": None, "w_right": 2}),
                IntervalEvent(0, 5, {"k": "a", "v": None, "w_left": 2, "w_right": 2}),
            ]
        )
    }
    assert _both(a.union(b).where(lambda p: p["w"] is None)) == {
        "a": Cht([IntervalEvent(0, 5, {"k": "a", "v": 1, "w": None})])
    }


def test_a_monotone_lifetime_change_holds_its_cti_for_later_retractions() -> None:
    """start = 2s maps [3, 10) to [6, 13); after a CTI at 8 (mapped: 16) the
    end may still move to 8 (mapped: 11) or 9 (mapped: 12), so the output
    CTI waits (at 11: see test_operators_acceptance.py)."""
    s = Stream.from_events([Insert("e", 3, 10, "a"), Cti(8), Retract("e", 3, 10, 9), Cti(20)])
    q = s.alter_lifetime(start=lambda t: 2 * t)
    assert _both(q) == Cht([IntervalEvent(6, 12, "a")])
    out = q.to_events()
    assert out.index(Retract("e", 6, 13, 12)) < next(
        i for i, e in enumerate(out) if isinstance(e, Cti) and e.time > 12
    )


def test_a_start_function_is_checked_whatever_the_arrival_order() -> None:
    s = Stream.from_events([Insert("x", 5, 6, "a"), Insert("y", 1, 2, "b")])
    for engine in ("reference", "host"):
        with pytest.raises(OperatorError, match="not monotone"):
            s.alter_lifetime(start=lambda t: -t).to_cht(engine=engine)


def test_engines_check_durations_alike() -> None:
    q = Stream.from_cht([(0, 10, "a")]).alter_lifetime(duration=lambda s, e: 100 - e)
    for engine in ("reference", "host"):
        with pytest.raises(OperatorError, match="duration grows"):
            q.to_cht(engine=engine)


def test_weak_consistency_over_a_broken_chain_agrees_on_both_engines() -> None:
    q = Stream.from_events(
        [Retract("p", 0, 10, 8), Insert("p", 0, 10, "P"), ExternalCti(0, 8, 2)]
    ).with_consistency(("weak", 3))
    assert _both(q) == Cht()


def test_a_missing_on_column_names_the_operator_on_every_engine() -> None:
    left = Stream.from_cht([(0, 10, {"k": "a"})])
    right = Stream.from_cht([(0, 10, {"z": "a"})])
    for engine in ("reference", "host"):
        with pytest.raises(OperatorError, match="right stream has no column"):
            left.join(right, on="k").to_cht(engine=engine)


def test_failing_join_functions_name_the_operator_and_payloads() -> None:
    from udm.host.rows import UdfError

    s = Stream.from_cht([(0, 10, {"k": "a", "x": 0})], key="k")
    for engine in ("reference", "host"):
        with pytest.raises(UdfError, match=r"join on k .*: where .* failed on left"):
            s.join(s, where=lambda a, b: 1 / a["x"]).to_cht(engine=engine)
        with pytest.raises(UdfError, match="returns the output payload, a dict"):
            s.join(s, select=lambda a, b: 5).to_cht(engine=engine)
        with pytest.raises(OperatorError, match="must return int ticks"):
            s.alter_lifetime(start=lambda t: t + 0.5).to_cht(engine=engine)


def _ordered(elements: list[Any]) -> bool:
    """No element's sync time is before an earlier one's (CEDR Definition 3)."""
    syncs = [e.sync_time for e in elements if isinstance(e, Insert | Retract | Cti)]
    return all(a <= b for a, b in itertools.pairwise(syncs))


@settings(max_examples=60, deadline=None)
@given(keyed_stream())
def test_order_preserving_operators_keep_ordered_input_ordered(l_el: Any) -> None:
    """CEDR Definition 6: selection, projection and shift of an ordered
    stream give an ordered stream. (A union of ordered streams is ordered
    only if merged in time order, which arrival order is not: the LMerge
    paper's point.)"""

    def ordered(elements: list[Any]) -> list[Any]:
        cht = Stream.from_events(elements).to_cht(engine="reference")
        assert isinstance(cht, Cht)
        events = sorted(cht, key=lambda e: e.start)
        out: list[Any] = []
        for i, e in enumerate(events):
            out.append(Insert(i, e.start, e.end, e.payload))
            out.append(Cti(e.start))
        return out

    left = Stream.from_events(ordered(l_el), key="k")
    for query in (
        left.where(lambda p: p["x"] > 2),
        left.select(y=lambda p: p["x"] * 2),
        left.shift(5),
        left.shift(-3).where(lambda p: p["x"] < 8),
    ):
        assert _ordered(query.to_events())


@settings(max_examples=60, deadline=None)
@given(keyed_stream(), keyed_stream(), st.sampled_from(["join", "anti_join", "union", "shift"]))
def test_progressive_output_up_to_every_cti(l_el: Any, r_el: Any, name: str) -> None:
    """CEDR Definition 8, as the issue states it: the output of the input up
    to each CTI (an arrival prefix ending at a CTI, then the end of time)
    equals the reference over that input's CHT."""

    def prefixes(elements: list[Any]) -> list[list[Any]]:
        ends = [i for i, e in enumerate(elements) if isinstance(e, Cti)]
        return [elements[: i + 1] for i in ends[:3]] or [elements]

    for lp, rp in zip(prefixes(l_el), prefixes(r_el), strict=False):
        left = Stream.from_events(lp, key="k")
        right = Stream.from_events(rp, key="k")
        query = unwindowed(left, right)[name]
        assert query.to_cht(engine="host") == query.to_cht(engine="reference")
