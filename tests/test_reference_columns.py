"""``evaluate_by_key`` over each key's columns (issue 31): a time-insensitive
UDM's windows computed from the start times, end times and mapped payloads
read in one pass over the input. Exact outputs computed by hand, for every
time-insensitive flavour, and the same errors as evaluating each group on
its own when the columns cannot be read."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from udm.host import (
    Cht,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    evaluate,
    evaluate_by_key,
)
from udm.host.reference import key_columns
from udm.sdk import IncrementalAggregate, aggregate, operator


@aggregate
def listed(values: list[Any]) -> tuple[Any, ...]:
    """Order-sensitive: shows each window's members and their order."""
    return tuple(values)


@aggregate
def middle(values: list[float]) -> float:
    return statistics.median(values)


class Total(IncrementalAggregate):
    """A time-insensitive incremental sum."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        return state


@operator
def each(values: list[Any]) -> list[Any]:
    return list(values)


def _point(t: int, key: str, v: Any) -> IntervalEvent[dict[str, Any]]:
    return IntervalEvent(t, t + 1, {"k": key, "v": v})


# key "a": points at 0, 1, 3, 6; key "b" out of order, two at 2 (a tie the
# canonical order breaks by payload: 3 before 7)
CHT = [
    _point(0, "a", 5),
    _point(9, "b", 8),
    _point(1, "a", 1),
    _point(2, "b", 7),
    _point(3, "a", 9),
    _point(2, "b", 3),
    _point(6, "a", 4),
]


def test_hopping_windows_of_each_key_by_hand() -> None:
    """Hopping 4 / 2: a point at t is in the windows starting at t - 3 to t
    on the grid of 2 (two windows each). "a": [-2, 2) holds 0 and 1,
    [0, 4) 0, 1 and 3, [2, 6) 3, [4, 8) and [6, 10) 6. "b": [0, 4) and
    [2, 6) hold both points at 2, [6, 10) and [8, 12) the one at 9."""
    window = HoppingWindow(4, 2)
    got = evaluate_by_key(CHT, "k", window, listed, value="v")
    assert got == {
        "a": Cht([(-2, 2, (5, 1)), (0, 4, (5, 1, 9)), (2, 6, (9,)), (4, 8, (4,)), (6, 10, (4,))]),
        "b": Cht([(0, 4, (3, 7)), (2, 6, (3, 7)), (6, 10, (8,)), (8, 12, (8,))]),
    }
    assert evaluate_by_key(CHT, "k", window, middle, value="v") == {
        "a": Cht([(-2, 2, 3.0), (0, 4, 5), (2, 6, 9), (4, 8, 4), (6, 10, 4)]),
        "b": Cht([(0, 4, 5.0), (2, 6, 5.0), (6, 10, 8), (8, 12, 8)]),
    }
    assert list(got) == ["a", "b"]  # keys in the order they first appear


def test_incremental_and_operator_flavours_by_hand() -> None:
    """The same windows through a time-insensitive incremental aggregate
    (the sum of each window's values) and an operator (one output per
    member, each with the window's lifetime, in canonical order)."""
    window = TumblingWindow(4)
    assert evaluate_by_key(CHT, "k", window, Total, value="v") == {
        "a": Cht([(0, 4, 15), (4, 8, 4)]),
        "b": Cht([(0, 4, 10), (8, 12, 8)]),
    }
    out = evaluate_by_key(CHT, "k", window, each, value="v", output_policy="point_end")
    assert out == {
        "a": Cht([(3, 4, 5), (3, 4, 1), (3, 4, 9), (7, 8, 4)]),
        "b": Cht([(3, 4, 3), (3, 4, 7), (11, 12, 8)]),
    }
    assert [e.payload for e in out["b"]] == [3, 7, 8]


def test_emit_empty_and_watermark_by_hand() -> None:
    """Tumbling 5 up to a watermark at 20: "a" (points at 1 and 12) has the
    empty windows [5, 10) and [15, 20) too; "b" (a point at 21) none, its
    window not ending by the watermark."""
    cht = [_point(1, "a", 2), _point(12, "a", 3), _point(21, "b", 4)]
    got = evaluate_by_key(
        cht, "k", TumblingWindow(5), listed, value="v", watermark=20, emit_empty=True
    )
    assert got == {
        "a": Cht([(0, 5, (2,)), (5, 10, ()), (10, 15, (3,)), (15, 20, ())]),
        "b": Cht([]),
    }


def test_intervals_and_snapshot_windows_by_hand() -> None:
    """Events longer than a tick: [1, 6) and [4, 5) under tumbling 4 ([0, 4)
    holds the first, [4, 8) both); under snapshot windows [1, 4), [4, 5)
    and [5, 6)."""
    cht = [
        IntervalEvent(1, 6, {"k": "a", "v": "x"}),
        IntervalEvent(4, 5, {"k": "a", "v": "y"}),
    ]
    assert evaluate_by_key(cht, "k", TumblingWindow(4), listed, value="v") == {
        "a": Cht([(0, 4, ("x",)), (4, 8, ("x", "y"))])
    }
    assert evaluate_by_key(cht, "k", SnapshotWindow(), listed, value="v") == {
        "a": Cht([(1, 4, ("x",)), (4, 5, ("x", "y")), (5, 6, ("x",))])
    }


def test_key_columns_read_in_one_pass() -> None:
    """Each key's times and mapped values, in the input's order, the times
    equal ints of their own; None for what the grouping path must report."""
    columns = key_columns(CHT, "k", "v")
    assert columns is not None
    assert list(columns) == ["a", "b"]
    assert (columns["b"].starts, columns["b"].ends, columns["b"].values) == (
        [9, 2, 2],
        [10, 3, 3],
        [8, 7, 3],
    )
    assert key_columns(CHT, "k", lambda p: -p["v"])["a"].values == [-5, -1, -9, -4]  # type: ignore[index]
    assert key_columns([*CHT, IntervalEvent(7, 8, {"k": "a"})], "k", "v") is None
    assert key_columns([*CHT, IntervalEvent(True, 8, {"k": "a", "v": 1})], "k", "v") is None
    assert key_columns([*CHT, (7, 8, {"k": "a", "v": 1})], "k", "v") is None  # type: ignore[list-item]


@pytest.mark.parametrize(
    "bad",
    [
        IntervalEvent(2**70, 2**70 + 1, {"k": "b", "v": 1}),  # beyond int64: no window holds it
        IntervalEvent(True, 8, {"k": "b", "v": 1}),  # a bool is not a time
        IntervalEvent(4, 8, {"k": "b"}),  # no value field
    ],
    ids=["beyond-int64", "bool-start", "no-value"],
)
def test_events_the_columns_cannot_hold_fail_as_their_group_alone(bad: Any) -> None:
    """The error for key "b" is the one :func:`evaluate` raises for that
    group on its own, after key "a" was evaluated."""
    group = [e for e in CHT if e.payload["k"] == "b"] + [bad]
    with pytest.raises(Exception) as alone:
        evaluate(group, TumblingWindow(4), listed, value="v")
    with pytest.raises(Exception) as by_key:
        evaluate_by_key([*CHT, bad], "k", TumblingWindow(4), listed, value="v")
    assert type(by_key.value) is type(alone.value)
    assert str(by_key.value) == str(alone.value)
