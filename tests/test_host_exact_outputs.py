"""A window's corrected result replaces its speculative output when it is
another value or another type, and only then.

Regression from a black-box differential tester (CHANGELOG.md, Unreleased,
Fixed): the host engine compared a window's new result with its cached
output by Python's ``==`` (or ``freeze``, which makes ``2.0`` and ``2`` one
value), so a result that compared equal but had another type (``4`` after
``4.0``, ``1`` after ``True``, ``-0.0`` after ``0.0``, ``{"a": 1.0}`` after
``{"a": 1}``) left the stale output in place: the result's type depended on
arrival order. host.md "Guarantee": after ``flush()`` the output equals
``evaluate(cht, ...)`` exactly. Expected values are the reference engine's,
which evaluates the final CHT, checked with the type of every value.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from udm.host import (
    INFINITY,
    Cti,
    Host,
    Insert,
    Retract,
    TumblingWindow,
    derive_cht,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.query import Stream
from udm.host.sameoutput import exact_key, same_output
from udm.sdk import IncrementalAggregate, aggregate, operator

NAN = float("nan")

#: (the result over two values, the result over three): equal in Python, not the same output
PAIRS = [
    (4.0, 4),
    (1, True),
    (0.0, -0.0),
    ({"a": 1}, {"a": 1.0}),
    ([1, 2], [1, 2.0]),
    ([1, [2, 3.0]], [1, [2, 3]]),
]


def _typed(value: Any) -> Any:
    """``value`` with the type of every value in it, so equal values of
    other types compare unequal."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_typed(v) for v in value))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    return (type(value).__name__, value)


def _rows(cht: Any) -> list[Any]:
    return sorted(((e.start, e.end, _typed(e.payload)) for e in cht.sorted()), key=repr)


def _by_count(two: Any, three: Any) -> type[Any]:
    @aggregate(name="by_count")
    def by_count(values: list[Any]) -> Any:
        return three if len(values) >= 3 else two

    return by_count


# b enters [0, 10) late: [0, 10) is output speculatively from a and c (two
# values) when d starts after it, then holds three values once b arrives
LATE_IN_WINDOW = [
    Insert("a", 1, 2, 1),
    Insert("c", 3, 4, 3),
    Insert("d", 12, 13, 9),
    Insert("b", 2, 3, 2),
]


# the same for the snapshot [0, 10) (the general path, not the grid's)
LATE_IN_SNAPSHOT = [
    Insert("a", 0, 10, 1),
    Insert("c", 0, 10, 3),
    Insert("d", 12, 13, 9),
    Insert("b", 0, 10, 2),
]


@pytest.mark.parametrize(("two", "three"), PAIRS, ids=repr)
@pytest.mark.parametrize("window", ["tumbling", "hopping", "snapshot"])
def test_a_result_of_another_type_replaces_the_speculative_output(
    two: Any, three: Any, window: str
) -> None:
    udm = _by_count(two, three)
    if window == "snapshot":
        w = Stream.from_events(LATE_IN_SNAPSHOT).snapshot_window()
    else:
        s = Stream.from_events(LATE_IN_WINDOW)
        w = s.tumbling_window(10) if window == "tumbling" else s.hopping_window(10, 5)
    q = w.aggregate(udm)
    expected = _rows(q.to_cht(engine="reference"))
    assert _rows(q.to_cht(engine="host")) == expected
    if window == "tumbling":  # by hand: [0, 10) holds a, b, c; [10, 20) holds d
        assert expected == _rows_of([(0, 10, three), (10, 20, two)])


def _rows_of(rows: list[Any]) -> list[Any]:
    return sorted(((s, e, _typed(p)) for s, e, p in rows), key=repr)


def test_the_testers_median_is_an_int_whatever_the_arrival_order() -> None:
    events = [
        Insert("a", 11, 26, {"v": 8}),
        Insert("b", 22, 23, {"v": 0}),
        Insert("late", 36, 37, {"v": -2}),  # [22, 23) is output (median 4.0) before c
        Insert("c", 18, 29, {"v": 4}),
    ]

    @aggregate
    def med(values: list[float]) -> float:
        return statistics.median(values)

    for udm in ("stats.median", med):
        q = Stream.from_events(events).snapshot_window().aggregate(udm, value="v")
        rows = _rows(q.to_cht(engine="host"))
        assert rows == _rows(q.to_cht(engine="reference"))
        assert (22, 23, _typed(4)) in rows  # [22, 23) holds 8, 0 and 4


@operator
def items(values: list[Any]) -> list[Any]:
    """One output per distinct value, as it is (an operator's outputs are
    matched with its cached ones value by value)."""
    return sorted(set(values), key=repr)


def test_an_operators_item_of_another_type_replaces_the_cached_one() -> None:
    # [0, 10) holds 1.0 (output), then 1 too, earlier: {1, 1.0} is one item,
    # the one first in the canonical order, the int
    s = Stream.from_events([Insert("a", 2, 3, 1.0), Insert("d", 12, 13, 9), Insert("b", 1, 2, 1)])
    q = s.tumbling_window(10).apply(items)
    expected = _rows(q.to_cht(engine="reference"))
    assert _rows(q.to_cht(engine="host")) == expected


@aggregate
def always_nan(values: list[Any]) -> float:
    return NAN


def test_an_unchanged_nan_result_is_not_emitted_again() -> None:
    s = Stream.from_events(LATE_IN_WINDOW)
    out = s.tumbling_window(10).aggregate(always_nan).to_events()
    inserts = [e for e in out if isinstance(e, Insert)]
    assert [(e.start, e.end) for e in inserts] == [(0, 10), (10, 20)]
    assert not [e for e in out if isinstance(e, Retract)]


def test_an_unchanged_result_of_the_same_type_is_not_emitted_again() -> None:
    s = Stream.from_events(LATE_IN_WINDOW)
    out = s.tumbling_window(10).aggregate(_by_count(4, 4)).to_events()
    assert not [e for e in out if isinstance(e, Retract)]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (4, 4.0, False),
        (True, 1, False),
        (0.0, -0.0, False),
        (NAN, float("nan"), True),
        ([NAN], [float("nan")], True),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}, True),
        ({1, 2}, {2, 1}, True),
        ((1, 2), [1, 2], False),
        ("x", "x", True),
        (None, None, True),
    ],
    ids=repr,
)
def test_same_output_is_exact(a: Any, b: Any, same: bool) -> None:
    assert same_output(a, b) is same
    assert (exact_key(a) == exact_key(b)) is same


class CountAs(IncrementalAggregate):
    """Incremental: ``{"n": 1}`` for a window of fewer than three events,
    ``{"n": 1.0}`` for more (equal dicts, another type inside)."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: Any) -> int:
        return state + 1

    def remove(self, state: int, payload: Any) -> int:
        return state - 1

    def result(self, state: int) -> dict[str, Any]:
        return {"n": 1 if state < 3 else 1.0}


@pytest.mark.parametrize(("retract", "expected"), [(False, 1.0), (True, 1)])
def test_an_incremental_udms_output_of_another_type_is_replaced(
    retract: bool, expected: Any
) -> None:
    # [0, 10) is output with {"n": 1} when d starts after it, b makes it
    # {"n": 1.0}, and the retraction of b {"n": 1} again
    later = [Insert(f"x{t}", t, t + 1, 0) for t in range(22, 92, 10)]
    events: list[Any] = [*LATE_IN_WINDOW, *later, *([Retract("b", 2, 3, 2, 2)] if retract else [])]
    q = Stream.from_events(events).tumbling_window(10).aggregate(CountAs)
    rows = _rows(q.to_cht(engine="host"))
    assert rows == _rows(q.to_cht(engine="reference"))
    assert (0, 10, _typed({"n": expected})) in rows


@pytest.mark.parametrize(("retract", "expected"), [(False, 1.0), (True, 1)])
def test_process_many_replaces_an_output_of_another_type(retract: bool, expected: Any) -> None:
    # Host.process_many of one list takes a run of inserts (more than its
    # least) through the grid path's columnar loop
    events: list[Any] = [
        Insert(e.id, e.start, e.end, {"k": "a", "v": e.payload}) for e in LATE_IN_WINDOW
    ]
    events += [Insert(f"x{t}", t, t + 1, {"k": "a", "v": 0}) for t in range(22, 92, 10)]
    if retract:
        events.append(Retract("b", 2, 3, 2, {"k": "a", "v": 2}))
    host = Host(TumblingWindow(10), CountAs, key="k", value="v")
    out = host.process_many([*events, Cti(INFINITY)])
    got = output_cht_by_key(out)["a"]
    cht = derive_cht(events)[0]
    want = evaluate_by_key(cht, "k", TumblingWindow(10), CountAs, value="v")["a"]
    assert _rows(got) == _rows(want)
    assert (0, 10, _typed({"n": expected})) in _rows(got)
