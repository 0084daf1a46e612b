"""The join's batched path (``JoinOperator.push_batch``): runs of inserts
joined with numpy against columnar state must give exactly what pushing
the elements one by one gives, and the reference engine's CHT.

The thresholds that choose the batched path are lowered here so that every
run of inserts, however short, takes it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import equivalent_streams, interval_events, with_ctis

import udm.host.operators.join as join_module
from udm.host import INFINITY, Cti, Insert, Retract
from udm.host.cht import derive_cht
from udm.host.operators.base import Collector
from udm.host.operators.batch import InsertBatch, runs
from udm.host.operators.join import JoinOperator
from udm.host.query import Stream


@contextmanager
def always_batched() -> Iterator[None]:
    """Every run of inserts takes the batched path."""
    with (
        mock.patch.object(join_module, "BATCH_MIN", 1),
        mock.patch.object(join_module, "BATCH_RATIO", 10**9),
    ):
        yield


def key(p: Any) -> Any:
    return p["k"]


def both(lp: Any, rp: Any) -> Any:
    return {"k": lp["k"], "l": lp["x"], "r": rp["x"]}


def join_op(predicate: Any = None) -> tuple[JoinOperator, Collector]:
    op = JoinOperator(key, key, both, predicate)
    sink = Collector()
    op.connect(sink)
    return op, sink


def cht_rows(elements: list[Any]) -> list[tuple[Any, ...]]:
    cht, _ = derive_cht(e for e in elements)
    return sorted((e.start, e.end, tuple(sorted(e.payload.items()))) for e in cht)


def one_by_one(feed: list[tuple[int, list[Any]]], predicate: Any = None) -> list[Any]:
    op, sink = join_op(predicate)
    for port, run in feed:
        for element in run:
            op.push(port, element)
    return sink.elements


def batched(feed: list[tuple[int, list[Any]]], predicate: Any = None) -> list[Any]:
    op, sink = join_op(predicate)
    with always_batched():
        for port, run in feed:
            op.push_batch(port, run)
    return sink.elements


def ev(ident: str, start: int, end: int, k: str, x: int = 0) -> Insert:
    return Insert(ident, start, end, {"k": k, "x": x})


# ------------------------------------------------------------ by hand


def test_a_run_with_several_keys_pairs_only_equal_keys_that_overlap() -> None:
    left = [ev("a", 0, 10, "p", 1), ev("b", 2, 4, "q", 2), ev("c", 5, 6, "r", 3)]
    right = [ev("x", 3, 8, "p", 10), ev("y", 3, 8, "q", 20), ev("z", 6, 9, "r", 30)]
    op, sink = join_op()
    with always_batched():
        op.push_batch(0, left)
        assert op.columns is not None  # the batched path ran
        op.push_batch(1, right)
    assert all(type(e) is Insert for e in sink.elements)
    assert sorted((e.id, e.start, e.end, e.payload["r"]) for e in sink.elements) == [
        (("a", "x"), 3, 8, 10),
        (("b", "y"), 3, 4, 20),
    ]  # c [5, 6) and z [6, 9) only touch


def test_empty_runs_change_nothing() -> None:
    op, sink = join_op()
    with always_batched():
        op.push_batch(0, [])
        op.push_batch(1, InsertBatch([], np.empty(0, np.int64), np.empty(0, np.int64), []))
        op.push_batch(0, [ev("a", 0, 5, "p")])
        op.push_batch(1, [])
    assert sink.elements == []
    assert op.state_size() == 1


def test_ctis_inside_a_run_free_state_and_pass_on() -> None:
    feed = [
        (0, [ev("a", 0, 3, "p"), ev("b", 1, 9, "p"), Cti(2), ev("c", 4, 6, "p"), Cti(5)]),
        (1, [ev("x", 2, 5, "p"), ev("y", 2, 8, "q"), Cti(4), ev("z", 5, 7, "p"), Cti(6)]),
    ]
    out = batched(feed)
    assert [e for e in out if type(e) is Cti] == [Cti(4), Cti(5)]
    assert cht_rows(out) == cht_rows(one_by_one(feed))
    assert sorted(e.id for e in out if type(e) is Insert) == [
        ("a", "x"),
        ("b", "x"),
        ("b", "z"),
        ("c", "x"),
        ("c", "z"),
    ]
    # only a [0, 3) ended before the output CTI (5: x [2, 5) may still be
    # retracted to end later)
    op, _ = join_op()
    with always_batched():
        for port, run in feed:
            op.push_batch(port, run)
    assert op.state_size() == 5


def test_a_run_then_late_inserts_and_retractions_leave_the_batched_path() -> None:
    runs_first = [
        (0, [ev("a", 0, 10, "p", 1), ev("b", 2, 12, "q", 2)]),
        (1, [ev("x", 1, 5, "p", 3), ev("y", 6, 9, "p", 4), ev("z", 3, 20, "q", 5)]),
    ]
    late = [
        (0, [Retract("a", 0, 10, 7)]),  # cuts (a, y) to [6, 7)
        (1, [Retract("z", 3, 20, 3)]),  # deletes (b, z)
        (0, [ev("c", 1, 4, "p", 6)]),  # late: meets x
        (1, [Retract("x", 1, 5, 11)]),  # extends x: (a, x) and (c, x) end later
    ]
    out = batched(runs_first + late)
    assert cht_rows(out) == cht_rows(one_by_one(runs_first + late))
    assert cht_rows(out) == [
        (1, 4, (("k", "p"), ("l", 6), ("r", 3))),
        (1, 7, (("k", "p"), ("l", 1), ("r", 3))),
        (6, 7, (("k", "p"), ("l", 1), ("r", 4))),
    ]


def test_a_join_output_batch_feeds_the_next_join_as_columns() -> None:
    first, _ = join_op()
    second = JoinOperator(key, key, lambda lp, rp: {**lp, "y": rp["x"]})
    sink = Collector()
    first.connect(second, 0)
    second.connect(sink)
    with always_batched():
        second.push_batch(1, [ev("m", 0, 100, "p", 7)])
        first.push_batch(0, [ev("a", 0, 10, "p", 1), ev("b", 5, 15, "p", 2)])
        first.push_batch(1, [ev("x", 8, 12, "p", 3)])
    assert second.columns is not None
    assert sorted((e.id, e.start, e.end, e.payload["y"]) for e in sink.elements) == [
        ((("a", "x"), "m"), 8, 10, 7),
        ((("b", "x"), "m"), 8, 12, 7),
    ]


def test_keys_with_equal_hashes_never_pair() -> None:
    # CPython's hash(-1) == hash(-2); a float NaN is unequal to itself but
    # the same object is the same dictionary key on the per-event path
    nan = math.nan
    assert hash(-1) == hash(-2)
    feed = [
        (0, [ev("a", 0, 5, -1), ev("b", 0, 5, nan), ev("c", 0, 5, float("nan"))]),  # type: ignore[arg-type]
        (1, [ev("x", 1, 6, -2), ev("y", 1, 6, -1), ev("z", 1, 6, nan)]),  # type: ignore[arg-type]
    ]
    ids = sorted(e.id for e in batched(feed) if type(e) is Insert)
    assert ids == sorted(e.id for e in one_by_one(feed) if type(e) is Insert)
    assert ids == [("a", "y"), ("b", "z")]


def test_the_where_predicate_sees_the_same_pairs_in_the_same_order() -> None:
    seen: list[Any] = []

    def where(lp: Any, rp: Any) -> bool:
        seen.append((lp["x"], rp["x"]))
        return bool(lp["x"] < rp["x"])

    feed = [
        (1, [ev("x", 0, 9, "p", 5), ev("y", 0, 9, "p", 1), ev("z", 0, 9, "q", 3)]),
        (0, [ev("a", 1, 3, "p", 2), ev("b", 2, 4, "q", 4), ev("c", 3, 5, "p", 0)]),
    ]
    out = batched(feed, where)
    by_batch, seen[:] = list(seen), []
    expected = one_by_one(feed, where)
    assert by_batch == seen
    assert cht_rows(out) == cht_rows(expected)
    assert sorted(e.id for e in out if type(e) is Insert) == [("a", "x"), ("c", "x"), ("c", "y")]


def test_state_saved_after_a_run_restores_into_the_per_event_form() -> None:
    op, _ = join_op()
    with always_batched():
        op.push_batch(0, [ev("a", 0, 10, "p", 1), ev("b", 0, 10, "q", 2)])
    saved = op.get_state()
    again, sink = join_op()
    again.set_state(saved)
    again.push(1, ev("x", 5, 6, "q", 3))
    assert [(e.id, e.start, e.end) for e in sink.elements] == [(("b", "x"), 5, 6)]


def test_runs_end_at_ctis_and_at_the_limit() -> None:
    els = [ev("a", 0, 1, "p"), Cti(1), ev("b", 1, 2, "p"), ev("c", 1, 2, "p"), Cti(2), Cti(3)]
    assert [len(r) for r in runs(els)] == [len(r) for r in runs(iter(els))] == [2, 3, 1]
    assert [len(r) for r in runs(els, 2)] == [len(r) for r in runs(iter(els), 2)] == [2, 2, 1, 1]


# ------------------------------------------------- against the reference


def keyed_payloads() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"k": st.sampled_from("abc"), "x": st.integers(0, 9)})


@st.composite
def ordered_then_late(draw: st.DrawFn) -> list[Any]:
    """Runs of in-order inserts over several keys, then late inserts and
    retractions of earlier events, with CTIs wherever the stream allows."""
    n = draw(st.integers(0, 14))
    stream: list[Any] = []
    start = 0
    for i in range(n):
        start += draw(st.integers(0, 3))
        stream.append(
            Insert(f"p{i}", start, start + draw(st.integers(1, 8)), draw(keyed_payloads()))
        )
    tail: list[Any] = []
    for e in stream:
        if draw(st.integers(0, 3)) == 0:
            tail.append(Retract(e.id, e.start, e.end, e.start + draw(st.integers(0, 10))))
    for i in range(draw(st.integers(0, 3))):
        s = draw(st.integers(0, max(start, 1)))
        tail.append(Insert(f"late{i}", s, s + draw(st.integers(1, 8)), draw(keyed_payloads())))
    stream += draw(st.permutations(tail))
    return with_ctis(stream, every=draw(st.integers(1, 6)))


@st.composite
def keyed_stream(draw: st.DrawFn) -> list[Any]:
    events = draw(st.lists(interval_events(payload=keyed_payloads()), max_size=6))
    return draw(equivalent_streams(events, ghosts=2, payload=keyed_payloads()))


def join_queries(left: Stream, right: Stream) -> dict[str, Stream]:
    return {
        "join": left.join(right),
        "join_where": left.join(right, where=lambda a, b: a["x"] <= b["x"]),
        "join_select": left.join(right, select=lambda a, b: {"s": a["x"] + b["x"]}),
        "join_of_join": left.join(right).join(right, suffixes=("", "_again")),
    }


@settings(max_examples=120, deadline=None)
@given(
    st.one_of(ordered_then_late(), keyed_stream()),
    st.one_of(ordered_then_late(), keyed_stream()),
    st.sampled_from(["join", "join_where", "join_select", "join_of_join"]),
)
def test_batched_joins_equal_the_reference(l_el: Any, r_el: Any, name: str) -> None:
    left = Stream.from_events(l_el, key="k")
    right = Stream.from_events(r_el, key="k")
    query = join_queries(left, right)[name]
    expected = query.to_cht(engine="reference")
    with always_batched():
        assert query.to_cht(engine="host") == expected


@settings(max_examples=60, deadline=None)
@given(ordered_then_late(), ordered_then_late())
def test_batched_and_one_by_one_give_the_same_stream_but_for_insert_order(
    l_el: Any, r_el: Any
) -> None:
    feed = [
        (port, run)
        for pair in itertools.zip_longest(runs(l_el), runs(r_el))
        for port, run in enumerate(pair)
        if run is not None
    ]
    a, b = batched(feed), one_by_one(feed)
    assert cht_rows(a) == cht_rows(b)
    # the same retractions and CTIs, in the same order
    assert [e for e in a if type(e) is not Insert] == [e for e in b if type(e) is not Insert]


def test_an_insert_batch_builds_the_inserts_its_columns_hold() -> None:
    batch = InsertBatch(
        [("a", "b"), 3], np.array([1, 2]), np.array([5, INFINITY]), [{"k": 1}, None]
    )
    expected = [Insert(("a", "b"), 1, 5, {"k": 1}), Insert(3, 2, INFINITY, None)]
    assert list(batch) == expected
    assert [batch[0], batch[1]] == expected
    assert batch[0:1] == expected[:1]
    assert all(type(e.start) is int and type(e.end) is int for e in batch)
    assert hash(list(batch)[1]) == hash(expected[1])


def test_without_numpy_every_run_takes_the_per_event_path() -> None:
    feed = [
        (0, [ev("a", 0, 10, "p", 1), ev("b", 2, 12, "q", 2), Cti(1)]),
        (1, [ev("x", 1, 5, "p", 3), ev("z", 3, 20, "q", 5), Cti(2)]),
    ]
    op, sink = join_op()
    with always_batched(), mock.patch.object(join_module, "HAVE_NUMPY", False):
        for port, run in feed:
            op.push_batch(port, run)
    assert op.columns is None
    assert sink.elements == one_by_one(feed)


def test_a_query_takes_the_batched_path_with_the_default_thresholds() -> None:
    """The host engine feeds runs up to each CTI: 100 inserts a run here, so
    the join takes them at once; late retractions then go per event."""

    def side(tag: str, seed: int) -> list[Any]:
        out: list[Any] = []
        for i in range(300):
            out.append(ev(f"{tag}{i}", i, i + 1 + (i * seed) % 9, "abcdefg"[i % 7], i % 5))
            if i % 100 == 99:
                out.append(Cti(i - 20))
        out.append(Retract(f"{tag}299", 299, 299 + 1 + (299 * seed) % 9, 299))
        out.append(Retract(f"{tag}290", 290, 290 + 1 + (290 * seed) % 9, 300))
        return out

    left = Stream.from_events(side("l", 3), key="k")
    right = Stream.from_events(side("r", 5), key="k")
    query = left.join(right, where=lambda a, b: a["x"] != b["x"])
    with mock.patch.object(
        JoinOperator, "_insert_run", autospec=True, side_effect=JoinOperator._insert_run
    ) as spy:
        host = query.to_cht(engine="host")
    assert spy.call_count >= 4
    assert host == query.to_cht(engine="reference")
