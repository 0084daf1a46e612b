"""The CEDR operators on Spark batch (and the host engine) against the
reference engine, on generated physical streams, and a join's ``select=``
on every engine.

The differential tests draw physical streams as
``tests/test_operators.py`` does (reordered inserts, every retraction kind:
ends speculated longer, shorter, open or zigzagging and then corrected,
inserts fully retracted again; duplicated events; CTIs wherever valid;
two keys) and give them to ``Stream.from_events``. Spark batch consumes the
CHT that physical stream denotes (``Stream.from_events`` derives it on the
driver, as the reference engine does), except bounded-memory Finalize
(weak consistency), which both engines compute over the arrival order.

Spark jobs are expensive, so each hypothesis example is ONE Spark
evaluation (one ``to_cht``): the example is a batch of 2 to 8
(left, right) stream pairs, pair ``j`` moved to its own time range
(``j * SPAN`` later; every window size and start function below is
invariant under such a shift) and its keys prefixed with ``j``, so the
pairs concatenate into one valid physical stream per side; every query
runs over its own copy of those streams (keys prefixed with the query's
name) and all queries are unioned into one plan. The output is split by
that prefix, so a failure names the query, and hypothesis shrinks a
failure to two pairs, one of them empty, and one small stream (shrinking
takes minutes: each step is a Spark evaluation).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import equivalent_streams, interval_events

from udm.host import Cht, Cti, Insert, IntervalEvent, Retract
from udm.host.query import Stream
from udm.host.stream import Element
from udm.host.time import INFINITY
from udm.sdk import aggregate

pytestmark = pytest.mark.spark

#: each pair of a batch lives in its own time range, this far apart (a
#: multiple of every window size and start-function step below)
SPAN = 1000

#: few examples, each one Spark evaluation of a batch of 2 to 8 stream
#: pairs (about 20 pairs per operator in all; the first example hypothesis
#: draws is the trivial one); derandomized so CI is stable
SETTINGS = settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@aggregate
def total(values: list[int]) -> int:
    """Declared ``-> int``: Spark need not type the results from their values."""
    return sum(values)


def _payloads(keys: str) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"k": st.sampled_from(keys), "x": st.integers(0, 9)})


@st.composite
def physical_streams(draw: st.DrawFn, infinite: bool, keys: str = "ab") -> list[Element]:
    """A physical stream of up to 5 events (and copies of some of them:
    duplicates) with every kind of retraction, disorder and CTIs; its
    payloads' keys ``k`` drawn from ``keys``."""
    payloads = _payloads(keys)
    events = draw(st.lists(interval_events(payload=payloads, infinite=infinite), max_size=5))
    copies = draw(st.lists(st.sampled_from(events), max_size=2)) if events else []
    return draw(equivalent_streams([*events, *copies], ghosts=2, payload=payloads))


def pairs(
    infinite: bool, keys: str = "ab"
) -> st.SearchStrategy[list[tuple[list[Element], list[Element]]]]:
    side = physical_streams(infinite, keys)
    return st.lists(st.tuples(side, side), min_size=2, max_size=8)


def moved(element: Element, j: int, prefix: str) -> Element:
    """``element`` of pair ``j``: ``j * SPAN`` later, its id and key prefixed."""
    shift = j * SPAN

    def at(t: int) -> int:
        return t if t >= INFINITY else t + shift

    if isinstance(element, Cti):
        return Cti(at(element.time))
    payload = element.payload
    if isinstance(payload, dict):
        payload = {**payload, "k": f"{prefix}|{j}{payload['k']}"}
    ident = f"{j}:{element.id}"
    if isinstance(element, Retract):
        old, new = at(element.old_end), at(element.new_end)
        return Retract(ident, at(element.start), old, new, payload)
    assert isinstance(element, Insert)
    return Insert(ident, at(element.start), at(element.end), payload)


def concatenated(streams: list[list[Element]], prefix: str) -> Stream:
    """The pairs' streams one after the other: a valid physical stream,
    since pair ``j``'s CTIs are below every time of pair ``j + 1``; then
    one event, so that no side is empty."""
    elements = [moved(e, j, prefix) for j, s in enumerate(streams) for e in s]
    # an event after all pairs: Spark types a source's columns from its rows
    last = len(streams) * SPAN
    elements.append(Insert("last", last, last + 1, {"k": f"{prefix}|last", "x": 0}))
    return Stream.from_events(elements, key="k")


Query = Callable[[Stream, Stream, int], Stream]


def _sum_of_x(a: Any, b: Any) -> dict[str, Any]:
    """A join's select= whose columns Spark types from the values (one is
    sometimes null)."""
    return {"s": a["x"] + b["x"], "small": a["x"] if a["x"] < 5 else None}


class Summed(TypedDict):
    s: int
    gap: int


def declared_sum(a: Any, b: Any) -> Summed:
    """A join's select= whose columns its annotation declares."""
    return {"s": a["x"] + b["x"], "gap": a["x"] - b["x"]}


#: every operator and consistency level, each over (left, right, remember)
UNWINDOWED: dict[str, Query] = {
    "union": lambda lhs, rhs, m: lhs.union(rhs),
    "join": lambda lhs, rhs, m: lhs.join(rhs),
    "join_where": lambda lhs, rhs, m: lhs.join(rhs, where=lambda a, b: a["x"] <= b["x"]),
    "join_select": lambda lhs, rhs, m: lhs.join(rhs, select=_sum_of_x),
    "anti_join": lambda lhs, rhs, m: lhs.left_anti_join(rhs),
    "anti_join_where": lambda lhs, rhs, m: lhs.left_anti_join(
        rhs, where=lambda a, b: a["x"] > b["x"]
    ),
    "shift": lambda lhs, rhs, m: lhs.shift(3),
    "shift_back": lambda lhs, rhs, m: lhs.shift(-4),
    "set_duration": lambda lhs, rhs, m: lhs.set_duration(4),
    "to_points": lambda lhs, rhs, m: lhs.to_points(),
    "clip_to": lambda lhs, rhs, m: lhs.clip_to(2),
    "alter_lifetime": lambda lhs, rhs, m: lhs.alter_lifetime(
        start=lambda s: s // 5 * 5, duration=lambda s, e: min(e - s, 6)
    ),
    "align": lambda lhs, rhs, m: lhs.align(3),
    "finalize": lambda lhs, rhs, m: lhs.finalize(m),
    "strong": lambda lhs, rhs, m: lhs.left_anti_join(rhs).with_consistency("strong"),
    "middle": lambda lhs, rhs, m: lhs.set_duration(3).with_consistency("middle"),
    "weak": lambda lhs, rhs, m: lhs.union(rhs).with_consistency(("weak", m)),
    "blocking_remember": lambda lhs, rhs, m: lhs.shift(2).with_consistency((2, m + 3)),
}

#: a window operation after a join, a union and an anti-join (finite
#: events: a window over an event that never ends needs a watermark)
WINDOWED: dict[str, Query] = {
    "window_over_join": lambda lhs, rhs, m: (
        lhs.join(rhs).tumbling_window(5).aggregate(total, value="x_left")
    ),
    "snapshot_over_union": lambda lhs, rhs, m: (
        lhs.union(rhs).snapshot_window().aggregate(total, value="x")
    ),
    "hopping_over_anti_join": lambda lhs, rhs, m: (
        lhs.left_anti_join(rhs).hopping_window(10, 5).aggregate(total, value="x")
    ),
    "window_over_select_join": lambda lhs, rhs, m: (
        lhs.join(rhs, select=declared_sum).tumbling_window(10).aggregate(total, value="gap")
    ),
    "strong_window": lambda lhs, rhs, m: (
        lhs.union(rhs).tumbling_window(5).aggregate(total, value="x").with_consistency("strong")
    ),
}


def by_query(cht: Any) -> dict[str, dict[Hashable, Cht]]:
    """The output of the union of all queries, split by the query's prefix."""
    out: dict[str, dict[Hashable, Cht]] = {}
    assert isinstance(cht, dict)
    for key, part in cht.items():
        name, _, rest = str(key).partition("|")
        out.setdefault(name, {})[rest] = part
    return out


def differential(
    queries: dict[str, Query],
    batch: list[tuple[list[Element], list[Element]]],
    remember: int,
) -> None:
    """Every query of ``queries`` over the batch, all in one unioned plan:
    the Spark and host engines' CHTs equal the reference's, query by query."""
    outputs = [
        build(
            concatenated([left for left, _ in batch], name),
            concatenated([right for _, right in batch], name),
            remember,
        )
        for name, build in queries.items()
    ]
    union = outputs[0].union(*outputs[1:])
    expected = by_query(union.to_cht(engine="reference"))
    # the host engine consumes the physical streams themselves (in-process: cheap)
    for engine in ("spark", "host"):
        got = by_query(union.to_cht(engine=engine))
        for name in queries:
            assert got.get(name, {}) == expected.get(name, {}), (engine, name)


@SETTINGS
@given(pairs(infinite=True), st.integers(0, 10))
def test_every_operator_and_consistency_level_on_spark_and_host_equals_the_reference(
    spark: Any, batch: list[tuple[list[Element], list[Element]]], remember: int
) -> None:
    differential(UNWINDOWED, batch, remember)


@settings(SETTINGS, max_examples=3)
@given(pairs(infinite=False), st.integers(0, 10))
def test_window_operations_after_joins_and_unions_on_spark_and_host_equal_the_reference(
    spark: Any, batch: list[tuple[list[Element], list[Element]]], remember: int
) -> None:
    differential(WINDOWED, batch, remember)


# ------------------------------------------------- a join's select=, exactly

LEFT = [(0, 6, {"k": "a", "x": 1}), (2, 9, {"k": "a", "x": 2}), (1, 3, {"k": "b", "x": 4})]
RIGHT = [(1, 4, {"k": "a", "y": 10}), (5, 12, {"k": "a", "y": 20}), (2, 8, {"k": "b", "y": 40})]

#: by hand: a's x1 [0,6) and x2 [2,9) meet y10 [1,4) and y20 [5,12); b's
#: x4 [1,3) meets y40 [2,8); "late" is null where y is 15 or less
SELECTED = {
    "a": Cht(
        [
            IntervalEvent(1, 4, {"k": "a", "total": 11, "late": None}),
            IntervalEvent(5, 6, {"k": "a", "total": 21, "late": 20}),
            IntervalEvent(2, 4, {"k": "a", "total": 12, "late": None}),
            IntervalEvent(5, 9, {"k": "a", "total": 22, "late": 20}),
        ]
    ),
    "b": Cht([IntervalEvent(2, 3, {"k": "b", "total": 44, "late": 40})]),
}


class Totals(TypedDict):
    total: int
    late: int | None


def _totals(a: Any, b: Any) -> dict[str, Any]:
    return {"total": a["x"] + b["y"], "late": b["y"] if b["y"] > 15 else None}


def _declared_totals(a: Any, b: Any) -> Totals:
    return {"total": a["x"] + b["y"], "late": b["y"] if b["y"] > 15 else None}


def _sides() -> tuple[Stream, Stream]:
    return Stream.from_cht(LEFT, key="k"), Stream.from_cht(RIGHT, key="k")


def test_a_joins_select_gives_the_same_cht_on_every_engine(spark: Any) -> None:
    """Columns typed from the values on Spark (``late`` is null in some
    rows), and declared by a ``TypedDict`` return annotation."""
    left, right = _sides()
    for select in (_totals, _declared_totals):
        query = left.join(right, select=select)
        for engine in ("reference", "host", "spark"):
            assert query.to_cht(engine=engine) == SELECTED, (select.__name__, engine)
    # after where=, and read by the next operator
    query = left.join(right, where=lambda a, b: b["y"] > 15, select=_totals).shift(1)
    expected = {
        "a": Cht(
            [
                IntervalEvent(6, 7, {"k": "a", "total": 21, "late": 20}),
                IntervalEvent(6, 10, {"k": "a", "total": 22, "late": 20}),
            ]
        ),
        "b": Cht([IntervalEvent(3, 4, {"k": "b", "total": 44, "late": 40})]),
    }
    for engine in ("reference", "host", "spark"):
        assert query.to_cht(engine=engine) == expected, engine


def test_a_joins_select_with_varying_columns_and_a_key_on_spark(spark: Any) -> None:
    """A dict lacking a column has null there (as on the reference engine),
    and a dict naming the ``on`` column overrides it; no pair at all gives
    the ``on`` columns only."""
    left, right = _sides()

    def varying(a: Any, b: Any) -> dict[str, Any]:
        if a["k"] == "b":
            return {"k": "moved", "y": b["y"]}
        return {"x": a["x"]} if b["y"] == 10 else {"y": b["y"]}

    query = left.join(right, select=varying)
    expected = {
        "a": Cht(
            [
                IntervalEvent(1, 4, {"k": "a", "x": 1, "y": None}),
                IntervalEvent(5, 6, {"k": "a", "x": None, "y": 20}),
                IntervalEvent(2, 4, {"k": "a", "x": 2, "y": None}),
                IntervalEvent(5, 9, {"k": "a", "x": None, "y": 20}),
            ]
        ),
        "moved": Cht([IntervalEvent(2, 3, {"k": "moved", "x": None, "y": 40})]),
    }
    assert query.to_cht(engine="reference") == expected
    assert query.to_cht(engine="spark") == expected
    none = left.join(right, where=lambda a, b: False, select=_totals)
    assert none.to_cht(engine="spark") == none.to_cht(engine="reference") == {}


def test_a_joins_select_that_fails_names_the_join_on_spark(spark: Any) -> None:
    from udm.host.rows import UdfError

    left, right = _sides()
    with pytest.raises(UdfError, match="returns the output payload, a dict"):
        left.join(right, select=lambda a, b: 5).to_cht(engine="spark")

    def undeclared(a: Any, b: Any) -> Totals:
        return {"total": 1, "late": None, "extra": 2}  # type: ignore[typeddict-unknown-key]

    with pytest.raises(UdfError, match=r"\['extra'\] that its return annotation does not"):
        left.join(right, select=undeclared).to_cht(engine="spark")


# ------------------------------------------------- found by the tests above


def test_events_that_never_end_do_not_overflow_spark_longs(spark: Any) -> None:
    """Found by the differential test: ``clip_to`` computed ``end - start``
    (an open end minus a negative start overflows a long), and a join
    whose events last one tick (bucket width 1) divided an open end as a
    double, which rounds beyond the longs."""
    left = Stream.from_cht(
        [(-1, INFINITY, {"k": "a", "x": 0}), (3, 4, {"k": "a", "x": 1})], key="k"
    )
    right = Stream.from_cht([(5, 6, {"k": "a", "y": 2})], key="k")
    clipped = left.clip_to(2)
    assert clipped.to_cht(engine="spark") == {
        "a": Cht(
            [IntervalEvent(-1, 1, {"k": "a", "x": 0}), IntervalEvent(3, 4, {"k": "a", "x": 1})]
        )
    }
    assert left.join(right).to_cht(engine="spark") == {
        "a": Cht([IntervalEvent(5, 6, {"k": "a", "x": 0, "y": 2})])
    }


@pytest.mark.timeout(300)  # the bug was a hang
def test_a_union_and_an_anti_join_of_a_dropping_source_run_and_count_on_spark(
    spark: Any,
) -> None:
    """A source that drops rows counts them in an ``Observation`` that
    only the output's action completes; a plan reading two sources summed
    the counts while it was made, and waited for that action forever."""
    df = spark.createDataFrame(
        [(1, "a", 1.0), (2, "a", 2.0), (None, "b", 3.0)], "t long, k string, v double"
    )
    left = Stream.from_dataframe(df, start="t", key="k", on_invalid="drop")
    right = Stream.from_dataframe(df.where("t is not null"), start="t", key="k")
    both = left.union(right)
    got = both.to_cht(engine="spark")
    assert both.metrics.invalid_rows() == {"'t' is null": 1}
    # the right source drops nothing, so its rows are not observed
    assert both.metrics.rows_read() is None
    assert got == both.to_cht(engine="reference")
    a1, a2 = {"k": "a", "v": 1.0}, {"k": "a", "v": 2.0}
    assert got == {"a": Cht([(1, 2, a1), (1, 2, a1), (2, 3, a2), (2, 3, a2)])}
    # the DataFrame's action completes the observation; asked before it, None
    out = left.left_anti_join(right.where(lambda p: p["v"] > 1.5)).to_dataframe()
    assert left.metrics.invalid_rows() is None
    assert sorted(r["v"] for r in out.collect()) == [1.0]
    assert left.metrics.invalid_rows() == {"'t' is null": 1}


@aggregate
def float_total(values: list[float]) -> float:
    """A UDA typed as taking floats."""
    return float(sum(values))


def test_a_window_over_a_stream_whose_inserts_were_all_retracted_outputs_nothing_on_spark(
    spark: Any,
) -> None:
    """Such a stream's columns are void on Spark (docs/spark.md, In-memory
    sources); a UDA typed as taking floats refused the void column with
    advice to cast it, where the other engines output nothing."""
    events = [Insert("a", 1, 5, {"v": 1.0}), Retract("a", 1, 5, 1)]
    query = Stream.from_events(events).tumbling_window(5).aggregate(float_total, value="v")
    assert query.to_cht(engine="spark") == query.to_cht(engine="reference") == Cht([])
