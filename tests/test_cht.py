"""The canonical history table: derivation from physical streams (the
paper's Tables 1 and 2), multiset equality, diffs and tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from udm.host import (
    INFINITY,
    Cht,
    Cti,
    CtiViolationError,
    Insert,
    IntervalEvent,
    Retract,
    ValidationStats,
    cht_diff,
    cht_equal,
    derive_cht,
)
from udm.host.cht import freeze

E = IntervalEvent

#: Table 2 of the paper: one physical stream for the CHT of Table 1.
TABLE_2 = [
    Insert("E0", 1, INFINITY, "P1"),
    Retract("E0", 1, INFINITY, 10),
    Retract("E0", 1, 10, 5),
    Insert("E1", 4, 9, "P2"),
]


class TestDerivation:
    def test_paper_table_1_from_table_2(self) -> None:
        cht, stats = derive_cht(TABLE_2)
        assert cht.sorted() == [E(1, 5, "P1"), E(4, 9, "P2")]
        assert cht == Cht([(1, 5, "P1"), (4, 9, "P2")])
        assert stats == ValidationStats()

    def test_sorted_orders_payloads_canonically(self) -> None:
        # numbers by value (not by rendering: 27 before 100), an int before an
        # equal float, then strings, then mappings; as UDMs receive them
        cht = Cht([(0, 5, {"a": 1}), (0, 5, 100), (0, 5, "x"), (0, 5, 27.5), (0, 5, 27)])
        assert [e.payload for e in cht.sorted()] == [27, 27.5, 100, "x", {"a": 1}]
        assert cht.sorted() == sorted(cht)

    def test_paper_example_other_physical_orders(self) -> None:
        other = [
            Insert("x", 4, 9, "P2"),
            Insert("y", 1, 3, "P1"),
            Cti(1),
            Retract("y", 1, 3, 5),
        ]
        assert Cht.from_stream(other) == Cht.from_stream(TABLE_2)

    def test_intermediate_states(self) -> None:
        assert Cht.from_stream(TABLE_2[:1]) == [(1, INFINITY, "P1")]
        assert Cht.from_stream(TABLE_2[:2]) == [(1, 10, "P1")]
        assert Cht.from_stream(TABLE_2[:3]) == [(1, 5, "P1")]

    def test_full_retraction_removes_row(self) -> None:
        cht = Cht.from_stream([*TABLE_2, Retract("E1", 4, 9, 4)])
        assert cht == [(1, 5, "P1")]

    def test_ctis_do_not_appear(self) -> None:
        assert Cht.from_stream([Cti(0), Insert("a", 1, 2, "x"), Cti(9)]) == [(1, 2, "x")]

    def test_policy_is_applied(self) -> None:
        stream = [Cti(5), Insert("a", 3, 8, "late")]
        with pytest.raises(CtiViolationError):
            derive_cht(stream)
        assert Cht.from_stream(stream, cti_policy="adjust") == [(5, 8, "late")]
        assert Cht.from_stream(stream, cti_policy="drop") == []

    def test_empty_stream(self) -> None:
        cht, stats = derive_cht([])
        assert len(cht) == 0
        assert cht == Cht()
        assert stats.dropped == 0


class TestEquality:
    def test_order_and_ids_ignored(self) -> None:
        a = Cht.from_stream([Insert(1, 0, 3, "x"), Insert(2, 2, 5, "y")])
        b = Cht.from_stream([Insert("q", 2, 5, "y"), Insert("r", 0, 3, "x")])
        assert a == b

    def test_multiplicity_matters(self) -> None:
        twice = Cht([(1, 2, "a"), (1, 2, "a")])
        once = Cht([(1, 2, "a")])
        assert twice != once
        assert twice == Cht([(1, 2, "a"), (1, 2, "a")])
        assert len(twice) == 2

    def test_lifetime_and_payload_both_matter(self) -> None:
        assert Cht([(1, 2, "a")]) != Cht([(1, 3, "a")])
        assert Cht([(1, 2, "a")]) != Cht([(0, 2, "a")])
        assert Cht([(1, 2, "a")]) != Cht([(1, 2, "b")])

    def test_dict_payloads_compare_by_content(self) -> None:
        assert Cht([(1, 2, {"x": 1, "y": [1, 2]})]) == Cht([(1, 2, {"y": [1, 2], "x": 1})])
        assert Cht([(1, 2, {"x": 1})]) != Cht([(1, 2, {"x": 2})])
        assert Cht([(1, 2, {"x": 1})]) != Cht([(1, 2, {"x": 1, "y": 0})])

    def test_whole_floats_equal_ints(self) -> None:
        assert Cht([(1, 2, 3.0)]) == Cht([(1, 2, 3)])
        assert Cht([(1, 2, 3.5)]) != Cht([(1, 2, 3)])

    def test_compares_with_lists_not_other_types(self) -> None:
        cht = Cht([E(1, 2, "a")])
        assert cht == [(1, 2, "a")]
        assert cht == [E(1, 2, "a")]
        assert cht != [(1, 2, "b")]
        assert cht != "Cht([1, 2) 'a')"
        assert (cht == 5) is False

    def test_unhashable(self) -> None:
        with pytest.raises(TypeError, match="Cht is not hashable"):
            hash(Cht())

    def test_sequence_and_repr(self) -> None:
        cht = Cht([(4, 9, "P2"), (1, 5, "P1")])
        assert cht[0] == E(4, 9, "P2")
        assert list(cht) == [E(4, 9, "P2"), E(1, 5, "P1")]
        assert repr(cht) == "Cht([1, 5) 'P1', [4, 9) 'P2')"
        assert cht.counter() == {(1, 5, "P1"): 1, (4, 9, "P2"): 1}

    def test_freeze(self) -> None:
        assert freeze({"b": [1, 2.0], "a": {3}}) == freeze({"a": {3}, "b": (1, 2)})
        assert freeze(2.5) == 2.5
        assert freeze([1]) != freeze({1})
        assert freeze({1: "x"}) != freeze({"1": "x"})  # keys keep their types
        assert freeze({1.0: {None, 2, "a"}}) == freeze({1: {"a", 2.0, None}})
        assert Cht([(0, 1, {1: "x"})]) != Cht([(0, 1, {"1": "x"})])


class TestDiff:
    def test_exact_diff_is_a_multiset_difference(self) -> None:
        expected = [E(1, 2, "a"), E(1, 2, "a"), E(3, 4, "b")]
        actual = [E(1, 2, "a"), E(3, 4, "b"), E(5, 6, "c")]
        missing, extra = cht_diff(expected, actual)
        assert missing == [E(1, 2, "a")]
        assert extra == [E(5, 6, "c")]
        assert not cht_equal(expected, actual)

    def test_equal_chts_have_empty_diff(self) -> None:
        a = [E(3, 4, {"k": 1}), E(1, 2, 0.5)]
        assert cht_diff(a, list(reversed(a))) == ([], [])
        assert cht_equal(a, list(reversed(a)))

    def test_same_payload_different_lifetime_is_missing_and_extra(self) -> None:
        assert cht_diff([E(1, 2, 7)], [E(1, 3, 7)]) == ([E(1, 2, 7)], [E(1, 3, 7)])

    def test_extra_rows_sorted(self) -> None:
        _, extra = cht_diff([], [E(5, 6, "z"), E(1, 9, "y"), E(1, 2, "x")])
        assert extra == [E(1, 2, "x"), E(1, 9, "y"), E(5, 6, "z")]

    def test_relative_tolerance(self) -> None:
        expected = [E(0, 10, 100.0)]
        assert not cht_equal(expected, [E(0, 10, 100.0001)])
        assert cht_equal(expected, [E(0, 10, 100.0001)], rel_tol=1e-6)
        assert not cht_equal(expected, [E(0, 10, 100.01)], rel_tol=1e-6)
        missing, extra = cht_diff(expected, [E(0, 10, 100.01)], rel_tol=1e-6)
        assert missing == [E(0, 10, 100.0)]
        assert extra == [E(0, 10, 100.01)]

    def test_absolute_tolerance_near_zero(self) -> None:
        assert cht_equal([E(0, 1, 0.0)], [E(0, 1, 1e-12)], abs_tol=1e-9)
        assert not cht_equal([E(0, 1, 0.0)], [E(0, 1, 1e-12)], rel_tol=1e-6)

    def test_tolerance_inside_nested_payloads(self) -> None:
        a = [E(1, 2, {"mean": 1.0, "parts": [2.0, 3.0], "label": "x"})]
        b = [E(1, 2, {"mean": 1.0 + 1e-10, "parts": [2.0, 3.0 - 1e-10], "label": "x"})]
        assert cht_equal(a, b, rel_tol=1e-9)
        assert not cht_equal(a, b)
        c = [E(1, 2, {"mean": 1.0, "parts": [2.0, 3.0], "label": "y"})]
        assert not cht_equal(a, c, rel_tol=0.5)
        d = [E(1, 2, {"mean": 1.0, "parts": [2.0], "label": "x"})]
        assert not cht_equal(a, d, rel_tol=0.5)

    def test_nan_matches_nan(self) -> None:
        nan = float("nan")
        assert cht_equal([E(1, 2, nan)], [E(1, 2, nan)])
        assert not cht_equal([E(1, 2, nan)], [E(1, 2, 0.0)], abs_tol=1.0)

    def test_bools_are_not_numbers_within_tolerance(self) -> None:
        assert not cht_equal([E(1, 2, True)], [E(1, 2, 0)], abs_tol=5.0)
        assert cht_equal([E(1, 2, False)], [E(1, 2, False)])

    def test_integers_compare_exactly_whatever_the_tolerance(self) -> None:
        # at 1e9 a relative tolerance of 1e-9 would accept a count off by one,
        # and at real-date tick times (1.7e15) a time off by 1.7 seconds
        assert not cht_equal([E(0, 1, 1_000_000_000)], [E(0, 1, 1_000_000_001)], rel_tol=1e-9)
        t = 1_714_564_810_000_000
        assert not cht_equal(
            [E(0, 1, {"first_start": t - 1_000_000})], [E(0, 1, {"first_start": t})], rel_tol=1e-9
        )
        assert not cht_equal([E(0, 1, np.int64(7))], [E(0, 1, 8)], abs_tol=5.0)
        assert cht_equal([E(0, 1, np.int64(7))], [E(0, 1, 7)])
        # a float on either side: the tolerance applies
        assert cht_equal([E(0, 1, 1_000_000_000)], [E(0, 1, 1_000_000_001.0)], rel_tol=1e-9)
        assert cht_equal([E(0, 1, 2)], [E(0, 1, 2.05)], abs_tol=0.1)

    def test_rows_pair_up_as_many_as_possible_within_a_tolerance(self) -> None:
        # first-come pairing would give [1.00, 1.00] the only partner of
        # [1.02, 0.90] and report one missing and one extra row
        expected = [E(0, 1, [1.00, 1.00]), E(0, 1, [1.02, 0.90])]
        actual = [E(0, 1, [0.98, 0.95]), E(0, 1, [1.04, 1.05])]
        assert cht_diff(expected, actual, abs_tol=0.06) == ([], [])
        # and rows without a partner are still reported
        missing, extra = cht_diff([*expected, E(0, 1, [5.0, 5.0])], actual, abs_tol=0.06)
        assert (missing, extra) == ([E(0, 1, [5.0, 5.0])], [])

    def test_each_actual_row_matches_once(self) -> None:
        expected = [E(0, 1, 1.0), E(0, 1, 1.0)]
        missing, extra = cht_diff(expected, [E(0, 1, 1.0000001)], rel_tol=1e-3)
        assert missing == [E(0, 1, 1.0)]
        assert extra == []


def test_cht_takes_tick_or_datetime_tuples() -> None:
    from datetime import UTC, datetime

    day = datetime(2026, 11, 23, tzinfo=UTC)
    assert Cht([(day, datetime(2026, 11, 24, tzinfo=UTC), "x"), (5, 6.0, "y")]) == Cht(
        [E(1_795_392_000_000_000, 1_795_478_400_000_000, "x"), E(5, 6, "y")]
    )


@pytest.mark.parametrize(
    ("events", "error", "message"),
    [
        (
            [(1, 2, "a"), (5, 3, "b")],
            ValueError,
            "CHT event #1 [5, 3) 'b': end 3 is not after start 5",
        ),
        ([E(4, 4, "c")], ValueError, "CHT event #0 [4, 4) 'c': end 4 is not after start 4"),
        (
            [(1.5, 3, "d")],
            ValueError,
            "CHT event #0 (1.5, 3, 'd'): 1.5 is not a whole number of ticks",
        ),
        ([(1, 2)], TypeError, "CHT event #0 (1, 2) is neither an IntervalEvent nor a"),
    ],
)
def test_cht_rejects_bad_events_by_position(
    events: list[object], error: type, message: str
) -> None:
    """No silent truncation or empty lifetime: the message names the event."""
    with pytest.raises(error) as got:
        Cht(events)  # type: ignore[arg-type]
    assert str(got.value).startswith(message)


def test_the_reference_checks_a_plain_list_of_events() -> None:
    from udm.host import TumblingWindow, evaluate
    from udm.sdk import aggregate

    @aggregate
    def count(values: list[object]) -> int:
        return len(values)

    assert evaluate([(1, 2, "a"), (3, 4, "b")], TumblingWindow(10), count) == Cht([(0, 10, 2)])
    with pytest.raises(ValueError, match=r"CHT event #0 \[5, 3\)"):
        evaluate([E(5, 3, "a")], TumblingWindow(10), count)


def test_nan_payloads_compare_equal_in_a_cht() -> None:
    # two NaN objects are one value for multiset comparison (results of UDMs)
    assert Cht([(0, 1, float("nan"))]) == Cht([(0, 1, float("nan"))])
    assert Cht([(0, 1, float("nan"))]) != Cht([(0, 1, 1.0)])
