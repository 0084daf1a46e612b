"""Physical stream validation: malformed elements, CTI violations under the
three CTI policies, exact ValidationStats, and untouched state on rejection."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from udm.host import (
    INFINITY,
    MIN_TIME,
    Cht,
    Cti,
    CtiViolationError,
    Host,
    Insert,
    InvalidElementError,
    Retract,
    SnapshotWindow,
    StreamError,
    StreamValidator,
    ValidationStats,
    derive_cht,
    edge_end,
    edge_start,
    point,
    validate,
)
from udm.host.validation import CtiPolicy
from udm.sdk import aggregate


def snapshot(v: StreamValidator) -> tuple[Any, ...]:
    """Everything a rejected element must leave unchanged."""
    return (
        copy.deepcopy(v.live),
        v.cti,
        copy.deepcopy(v.stats),
        set(v.dropped_ids),
        v.position,
    )


def feed(elements: list[Any], policy: str = "raise") -> tuple[StreamValidator, list[Any]]:
    v = StreamValidator(cti_policy=policy)
    return v, [v.check(e) for e in elements]


def lifetimes(v: StreamValidator) -> dict[Any, tuple[int, int]]:
    return {k: (ev.start, ev.end) for k, ev in v.live.items()}


def stats(**counts: int) -> ValidationStats:
    return ValidationStats(**counts)


def assert_rejected(
    v: StreamValidator,
    element: Any,
    error: type[StreamError],
    position: int,
    *fragments: str,
) -> StreamError:
    """``element`` raises ``error`` naming itself and its position, the message
    contains every fragment, and the validator state is unchanged."""
    before = snapshot(v)
    with pytest.raises(error) as err:
        v.check(element)
    exc = err.value
    assert exc.element is element
    assert exc.position == position
    msg = str(exc)
    assert msg.startswith(f"element #{position} {element!r}: ")
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert snapshot(v) == before
    return exc


class TestElements:
    def test_point_and_edges(self) -> None:
        assert point("p", 7, "x") == Insert("p", 7, 8, "x")
        assert edge_start("e", 3, "y") == Insert("e", 3, INFINITY, "y")
        assert edge_end("e", 3, 9) == Retract("e", 3, INFINITY, 9)

    def test_times_are_converted(self) -> None:
        assert Insert("a", "1970-01-01T00:00:01", "inf").start == 1_000_000
        assert Insert("a", "1970-01-01T00:00:01", "inf").end == INFINITY
        assert Cti("1970-01-01T00:00:00.000002").time == 2

    def test_sync_times(self) -> None:
        assert Insert("a", 4, 9).sync_time == 4
        assert Retract("a", 1, 10, 5).sync_time == 5  # shrink: the new end
        assert Retract("a", 1, 10, 12).sync_time == 10  # expansion: the old end
        assert Cti(6).sync_time == 6
        assert Retract("a", 1, 10, 1).is_full
        assert not Retract("a", 1, 10, 2).is_full

    def test_reprs_show_inf(self) -> None:
        assert repr(edge_start("e", 3)) == "Insert(id='e', start=3, end=inf, payload=None)"
        assert repr(edge_end("e", 3, 9)) == "Retract(id='e', start=3, old_end=inf, new_end=9)"
        assert repr(Cti(INFINITY)) == "Cti(inf)"


class TestMalformed:
    @pytest.mark.parametrize("end", [5, 4])
    def test_insert_end_not_after_start(self, end: int) -> None:
        v = StreamValidator()
        assert_rejected(
            v,
            Insert("a", 5, end),
            InvalidElementError,
            0,
            f"end {end} is not after start 5",
            "a point event ends at start + 1 tick",
        )

    @pytest.mark.parametrize("policy", ["raise", "drop", "adjust"])
    def test_times_beyond_the_tick_range_are_malformed(self, policy: str) -> None:
        """Found by black-box testing: an end of 2**63 was accepted (a host
        then lost a window) and a start of -2**63 was a CTI violation printed
        as "-inf" (adjusted or dropped in silence under the other policies).
        MIN_TIME and INFINITY themselves are times (concepts.md)."""
        v = StreamValidator(cti_policy=policy)
        assert_rejected(
            v,
            Insert("a", 0, 2**63),
            InvalidElementError,
            0,
            "end 9223372036854775808 is beyond INFINITY (9223372036854775807",
            "outside the int64 tick range",
        )
        low = Insert("a", -(2**63), 5)
        exc = assert_rejected(
            v,
            low,
            InvalidElementError,
            0,
            "start -9223372036854775808 is before MIN_TIME (-9223372036854775807",
        )
        assert "-inf" not in str(exc)
        assert_rejected(v, Cti(2**63), InvalidElementError, 0, "time 9223372036854775808 is beyond")
        v.check(Insert("a", MIN_TIME, INFINITY))
        for r, fragment in (
            (Retract("a", MIN_TIME, INFINITY, 2**63), "new_end 9223372036854775808 is beyond"),
            (Retract("a", -(2**63), INFINITY, 5), "start -9223372036854775808 is before"),
        ):
            assert_rejected(v, r, InvalidElementError, 1, fragment)
        assert derive_cht([Insert("a", MIN_TIME, INFINITY, 1)])[0] == Cht([(MIN_TIME, INFINITY, 1)])

    def test_host_refuses_an_end_beyond_infinity_instead_of_losing_a_window(self) -> None:
        @aggregate
        def count(values: list[Any]) -> int:
            return len(values)

        host = Host(SnapshotWindow(), count)
        with pytest.raises(InvalidElementError, match="end 9223372036854775808 is beyond"):
            host.process(Insert("a", 0, 2**63, 1))
        batch = [Insert("b", 5, 7, 1), Insert("a", 0, 2**63, 1)]
        with pytest.raises(InvalidElementError, match=r"element #1 Insert\(id='a'"):
            Host(SnapshotWindow(), count).process_many(batch)

    def test_from_events_names_the_element_not_an_option_it_lacks(self) -> None:
        from udm.host.query import Stream

        with pytest.raises(InvalidElementError) as err:
            Stream.from_events([Insert("a", 0, 2**63, 1)])
        assert "on_invalid" not in str(err.value)
        assert "element #0 Insert(id='a', start=0, end=9223372036854775808" in str(err.value)

    def test_duplicate_live_id(self) -> None:
        v, _ = feed([Insert("a", 1, 5)])
        assert_rejected(
            v,
            Insert("a", 2, 3),
            InvalidElementError,
            1,
            "event id 'a' is already live with lifetime [1, 5)",
            "ids must be unique until their event is fully retracted or ends before the latest CTI",
        )

    def test_id_of_an_event_ending_at_the_cti_is_still_taken(self) -> None:
        # a retraction with sync time 5 may still extend it
        v, _ = feed([Insert("a", 1, 5), Cti(5)])
        assert_rejected(v, Insert("a", 6, 7), InvalidElementError, 2, "already live")

    def test_id_of_an_expired_event_is_free_whether_or_not_pruned(self) -> None:
        stream = [Insert("a", 1, 5, "old"), Cti(6), Insert("a", 7, 8, "new"), Retract("a", 7, 8, 9)]
        for prune in (False, True):
            v = StreamValidator()
            for element in stream[:2]:
                v.check(element)
            if prune:
                v.prune(force=True)
            for element in stream[2:]:
                assert v.check(element) is element
            assert lifetimes(v) == {"a": (7, 9)}
        cht, _ = derive_cht(stream)
        assert cht == [(1, 5, "old"), (7, 9, "new")]

    @pytest.mark.parametrize("element", [Insert(["x"], 1, 5), Retract(["x"], 1, 5, 3)])
    def test_unhashable_id(self, element: Any) -> None:
        """A retraction with an unhashable id raised a bare TypeError."""
        assert_rejected(
            StreamValidator(),
            element,
            InvalidElementError,
            0,
            "event id ['x'] is not hashable",
            "use a str or int id",
        )

    def test_not_an_element(self) -> None:
        v = StreamValidator()
        before = snapshot(v)
        with pytest.raises(InvalidElementError) as err:
            v.check(("a", 1, 5))  # type: ignore[arg-type]
        assert err.value.position == 0
        assert "not a stream element (tuple)" in str(err.value)
        assert "use udm.host.Insert, Retract or Cti" in str(err.value)
        assert snapshot(v) == before

    def test_retraction_of_unknown_id(self) -> None:
        v, _ = feed([Insert("a", 1, 5)])
        assert_rejected(
            v,
            Retract("b", 1, 5, 3),
            InvalidElementError,
            1,
            "unknown event id 'b'",
            "never inserted or is already fully retracted",
            "retract only live events",
        )

    def test_retraction_with_mismatched_start(self) -> None:
        v, _ = feed([Insert("a", 1, 5)])
        assert_rejected(
            v,
            Retract("a", 2, 5, 3),
            InvalidElementError,
            1,
            "start 2 does not match event 'a', which starts at 1",
            "a retraction quotes the event's start",
        )

    def test_retraction_with_mismatched_old_end(self) -> None:
        v, _ = feed([Insert("a", 1, 5), Retract("a", 1, 5, 8)])
        assert_rejected(
            v,
            Retract("a", 1, 5, 3),
            InvalidElementError,
            2,
            "old_end 5 does not match the current end 8 of event 'a'",
            "quotes the end the event has after the retractions before it",
        )

    def test_retraction_new_end_before_start(self) -> None:
        v, _ = feed([Insert("a", 1, 5)])
        assert_rejected(
            v,
            Retract("a", 1, 5, 0),
            InvalidElementError,
            1,
            "new_end 0 is before the event's start 1",
            "a full retraction sets new_end = start",
        )

    def test_position_counts_accepted_elements(self) -> None:
        v, _ = feed([Insert("a", 1, 5), Cti(2), Insert("b", 3, 4)])
        assert v.position == 3
        assert_rejected(v, Insert("b", 3, 4), InvalidElementError, 3, "already live")
        # the rejected element did not consume a position: the next one is #3
        assert v.check(Insert("c", 3, 4)) == Insert("c", 3, 4)
        assert v.position == 4


class TestRetractions:
    def test_shrink_then_expand(self) -> None:
        v, out = feed([Insert("a", 1, 5), Retract("a", 1, 5, 9), Retract("a", 1, 9, 7)])
        assert out == [Insert("a", 1, 5), Retract("a", 1, 5, 9), Retract("a", 1, 9, 7)]
        assert lifetimes(v) == {"a": (1, 7)}

    def test_expansion_after_cti_allowed_when_old_end_not_before_it(self) -> None:
        v, out = feed([Insert("a", 1, 10), Cti(10), Retract("a", 1, 10, 12)])
        assert out[2] == Retract("a", 1, 10, 12)
        assert lifetimes(v) == {"a": (1, 12)}

    def test_edge_event_closed(self) -> None:
        v, _ = feed([edge_start("e", 3, "v"), Cti(3), edge_end("e", 3, 8)])
        assert lifetimes(v) == {"e": (3, 8)}

    def test_full_retraction_deletes_and_frees_the_id(self) -> None:
        v, _ = feed([Insert("a", 1, 5, "old"), Retract("a", 1, 5, 1)])
        assert v.live == {}
        # a second retraction of the deleted event is an unknown id
        assert_rejected(v, Retract("a", 1, 5, 1), InvalidElementError, 2, "unknown event id 'a'")
        # the id is free for a new event
        assert v.check(Insert("a", 2, 3, "new")) == Insert("a", 2, 3, "new")
        assert lifetimes(v) == {"a": (2, 3)}
        cht, _ = derive_cht(
            [Insert("a", 1, 5, "old"), Retract("a", 1, 5, 1), Insert("a", 2, 3, "new")]
        )
        assert cht == [(2, 3, "new")]

    def test_validate_yields_applied_elements(self) -> None:
        stream = [Insert("a", 1, 5), Cti(4), Insert("b", 2, 6), Insert("c", 4, 5)]
        assert list(validate(stream, "drop")) == [Insert("a", 1, 5), Cti(4), Insert("c", 4, 5)]
        with pytest.raises(CtiViolationError):
            list(validate(stream))


class TestCtiRaise:
    def test_cti_backwards(self) -> None:
        v, _ = feed([Cti(5)])
        assert_rejected(
            v,
            Cti(3),
            CtiViolationError,
            1,
            "CTI goes backwards: the latest CTI is 5",
            "CTIs must not decrease",
        )

    def test_equal_cti_is_fine(self) -> None:
        v, out = feed([Cti(5), Cti(5)])
        assert out == [Cti(5), Cti(5)]
        assert v.cti == 5

    def test_insert_before_cti(self) -> None:
        v, _ = feed([Cti(5)])
        assert_rejected(
            v,
            Insert("a", 3, 8),
            CtiViolationError,
            1,
            "sync time 3 is before the latest CTI 5",
            "late elements need cti_policy='drop' or 'adjust', or an earlier CTI",
        )

    def test_insert_at_cti_is_fine(self) -> None:
        v, out = feed([Cti(5), Insert("a", 5, 6)])
        assert out[1] == Insert("a", 5, 6)
        assert lifetimes(v) == {"a": (5, 6)}

    def test_shrinking_retraction_before_cti(self) -> None:
        v, _ = feed([Insert("a", 1, 10), Cti(5)])
        assert_rejected(
            v,
            Retract("a", 1, 10, 3),
            CtiViolationError,
            2,
            "sync time 3 is before the latest CTI 5",
            "cti_policy='drop' or 'adjust'",
        )

    def test_expansion_of_event_ending_before_cti(self) -> None:
        v, _ = feed([Insert("a", 1, 4), Cti(5)])
        assert_rejected(
            v, Retract("a", 1, 4, 8), CtiViolationError, 2, "sync time 4 is before the latest CTI 5"
        )

    def test_shrinking_to_exactly_the_cti_is_fine(self) -> None:
        v, out = feed([Insert("a", 1, 10), Cti(5), Retract("a", 1, 10, 5)])
        assert out[2] == Retract("a", 1, 10, 5)
        assert lifetimes(v) == {"a": (1, 5)}

    def test_retraction_of_unknown_id_before_cti_is_a_cti_violation(self) -> None:
        # the validator may have forgotten events the CTI has passed, so a
        # late retraction of an unknown id is reported as late, not unknown
        v, _ = feed([Cti(5)])
        assert_rejected(
            v, Retract("z", 1, 3, 2), CtiViolationError, 1, "sync time 2 is before the latest CTI 5"
        )


class TestCtiDrop:
    def test_late_elements_dropped_and_counted(self) -> None:
        v, out = feed(
            [
                Insert("a", 1, 10),
                Cti(5),
                Insert("late", 3, 8),  # dropped insert
                Retract("late", 3, 8, 4),  # retraction of a dropped event: dropped
                Retract("a", 1, 10, 3),  # shrinks before the CTI: dropped
                Cti(4),  # backwards: dropped
                Insert("ok", 5, 6),
            ],
            "drop",
        )
        assert out == [Insert("a", 1, 10), Cti(5), None, None, None, None, Insert("ok", 5, 6)]
        assert v.stats == stats(dropped_inserts=1, dropped_retractions=2, dropped_ctis=1)
        assert v.stats.dropped == 4
        assert v.stats.adjusted == 0
        assert lifetimes(v) == {"a": (1, 10), "ok": (5, 6)}
        assert v.cti == 5

    def test_a_retraction_may_quote_the_end_a_dropped_one_asked_for(self) -> None:
        """The producer believes its late retraction happened: the next one
        quotes that end. It is judged by what it changes here ([1, 20) to
        3: still late, dropped), and a non-late one applies to the real end."""
        v, out = feed(
            [
                Insert("a", 1, 20),
                Cti(10),
                Retract("a", 1, 20, 5),  # late: dropped, the producer believes 5
                Retract("a", 1, 5, 3),  # quotes 5; changes 20 -> 3: late, dropped
                Retract("a", 1, 3, 30),  # quotes 3; changes 20 -> 30: not late
            ],
            "drop",
        )
        assert out[2:] == [None, None, Retract("a", 1, 20, 30)]
        assert lifetimes(v) == {"a": (1, 30)}
        assert v.stats == stats(dropped_retractions=2)
        with pytest.raises(InvalidElementError, match=r"old_end 5 does not match the current end"):
            feed([Insert("b", 1, 20), Cti(10), Retract("b", 1, 20, 25), Retract("b", 1, 5, 3)])

    def test_a_follow_up_to_a_dropped_extension_is_judged_by_the_real_end(self) -> None:
        # [0, 1) cannot grow past the CTI 2 from before it: 1 -> 4 is dropped;
        # the producer's 4 -> 2 would make it [0, 2) here, changing [1, 2): dropped
        v, out = feed(
            [Insert("e", 0, 1), Cti(2), Retract("e", 0, 1, 4), Retract("e", 0, 4, 2)], "drop"
        )
        assert out[2:] == [None, None]
        assert lifetimes(v) == {"e": (0, 1)}

    def test_dropped_id_can_be_reused_later(self) -> None:
        v, out = feed([Cti(5), Insert("x", 1, 2), Insert("x", 6, 7), Retract("x", 6, 7, 9)], "drop")
        assert out[1] is None
        assert lifetimes(v) == {"x": (6, 9)}
        assert v.stats == stats(dropped_inserts=1)

    def test_derive_cht_reports_stats(self) -> None:
        cht, st = derive_cht([Cti(5), Insert("a", 1, 2), Insert("b", 5, 7, "kept")], "drop")
        assert cht == [(5, 7, "kept")]
        assert st == stats(dropped_inserts=1)


class TestCtiAdjust:
    def test_insert_straddling_cti_starts_at_cti(self) -> None:
        v, out = feed([Cti(5), Insert("a", 3, 8, "p")], "adjust")
        assert out[1] == Insert("a", 5, 8, "p")
        assert v.stats == stats(adjusted_inserts=1)
        assert lifetimes(v) == {"a": (5, 8)}

    def test_insert_wholly_before_cti_dropped(self) -> None:
        v, out = feed([Cti(5), Insert("a", 3, 5), Insert("b", 1, 2)], "adjust")
        assert out[1:] == [None, None]
        assert v.stats == stats(dropped_inserts=2)
        assert v.live == {}

    def test_retraction_before_cti_ends_at_cti(self) -> None:
        v, out = feed([Insert("a", 1, 10, "p"), Cti(5), Retract("a", 1, 10, 3)], "adjust")
        assert out[2] == Retract("a", 1, 10, 5, "p")
        assert v.stats == stats(adjusted_retractions=1)
        assert lifetimes(v) == {"a": (1, 5)}

    def test_full_retraction_after_cti_keeps_the_part_before_it(self) -> None:
        v, _ = feed([Insert("a", 1, 10), Cti(5), Retract("a", 1, 10, 1)], "adjust")
        assert lifetimes(v) == {"a": (1, 5)}
        assert v.stats == stats(adjusted_retractions=1)

    def test_retraction_of_event_ended_before_cti_dropped(self) -> None:
        v, out = feed([Insert("a", 1, 4), Cti(5), Retract("a", 1, 4, 3)], "adjust")
        assert out[2] is None
        assert v.stats == stats(dropped_retractions=1)
        assert lifetimes(v) == {"a": (1, 4)}

    def test_backwards_cti_dropped(self) -> None:
        v, out = feed([Cti(5), Cti(2)], "adjust")
        assert out == [Cti(5), None]
        assert v.stats == stats(dropped_ctis=1)
        assert v.cti == 5

    def test_retractions_of_adjusted_event_may_quote_either_start(self) -> None:
        v, out = feed(
            [Cti(5), Insert("a", 3, 8), Retract("a", 3, 8, 7), Retract("a", 5, 7, 6)], "adjust"
        )
        assert out[2] == Retract("a", 5, 8, 7)
        assert out[3] == Retract("a", 5, 7, 6)
        assert lifetimes(v) == {"a": (5, 6)}
        assert v.stats == stats(adjusted_inserts=1)

    def test_full_retraction_of_adjusted_event_quoting_original_start(self) -> None:
        v, out = feed([Cti(5), Insert("a", 3, 8), Retract("a", 3, 8, 3)], "adjust")
        assert out[2] == Retract("a", 5, 8, 5)
        assert v.live == {}
        assert v.stats == stats(adjusted_inserts=1)

    def test_partial_retraction_of_adjusted_event_to_before_cti(self) -> None:
        # [3, 8) was adjusted to [5, 8); retracting it to [3, 4) asks for a
        # lifetime wholly before the CTI: it ends at the CTI, i.e. vanishes,
        # and that is an adjustment
        v, out = feed([Cti(5), Insert("a", 3, 8), Retract("a", 3, 8, 4)], "adjust")
        assert out[2] == Retract("a", 5, 8, 5)
        assert v.live == {}
        assert v.stats == stats(adjusted_inserts=1, adjusted_retractions=1)

    def test_adjusted_event_after_later_cti(self) -> None:
        v, out = feed([Cti(5), Insert("a", 3, 12), Cti(7), Retract("a", 3, 12, 4)], "adjust")
        assert out[3] == Retract("a", 5, 12, 7)
        assert lifetimes(v) == {"a": (5, 7)}
        assert v.stats == stats(adjusted_inserts=1, adjusted_retractions=1)

    def test_after_an_adjusted_retraction_the_next_may_quote_its_end(self) -> None:
        v, out = feed(
            [Insert("a", 1, 20), Cti(10), Retract("a", 1, 20, 5), Retract("a", 1, 5, 3)], "adjust"
        )
        assert out[2:] == [Retract("a", 1, 20, 10), None]  # a already ends at the CTI
        assert lifetimes(v) == {"a": (1, 10)}
        assert v.stats == stats(adjusted_retractions=1, dropped_retractions=1)

    def test_mixed_stream_counts(self) -> None:
        cht, st = derive_cht(
            [
                Insert("a", 0, 20, "a"),
                Insert("b", 1, 3, "b"),
                Cti(10),
                Insert("c", 8, 15, "c"),  # adjusted to [10, 15)
                Insert("d", 2, 9, "d"),  # dropped
                Retract("d", 2, 9, 4),  # dropped with its event
                Retract("a", 0, 20, 6),  # adjusted to end at 10
                Retract("b", 1, 3, 2),  # event ended before the CTI: dropped
                Cti(9),  # dropped
                Insert("e", 10, 11, "e"),
            ],
            "adjust",
        )
        assert cht == [(0, 10, "a"), (1, 3, "b"), (10, 15, "c"), (10, 11, "e")]
        assert st == stats(
            dropped_inserts=1,
            dropped_retractions=2,
            dropped_ctis=1,
            adjusted_inserts=1,
            adjusted_retractions=1,
        )
        assert st.as_dict() == {
            "dropped_inserts": 1,
            "dropped_retractions": 2,
            "dropped_ctis": 1,
            "adjusted_inserts": 1,
            "adjusted_retractions": 1,
        }


class TestPolicyParsing:
    def test_strings_and_enums(self) -> None:
        assert StreamValidator(cti_policy="drop").cti_policy is CtiPolicy.DROP
        assert CtiPolicy.parse(CtiPolicy.ADJUST) is CtiPolicy.ADJUST

    def test_unknown_policy(self) -> None:
        with pytest.raises(ValueError) as err:
            StreamValidator(cti_policy="ignore")
        assert "unknown CTI policy 'ignore'" in str(err.value)
        assert "use one of: raise, drop, adjust" in str(err.value)


class TestRejectionLeavesStateUnchanged:
    """Each policy: a raising element changes nothing, and the stream goes on."""

    @pytest.mark.parametrize("policy", ["raise", "drop", "adjust"])
    def test_every_invalid_element(self, policy: str) -> None:
        v, _ = feed(
            [
                Insert("a", 1, 10, "a"),
                Insert("b", 6, 9, "b"),
                Cti(5),
                Insert("c", 5, 8, "c"),
                Retract("b", 6, 9, 12),
            ],
            policy,
        )
        before = snapshot(v)
        bad = [
            Insert("x", 7, 7),
            Insert("a", 6, 7),
            Retract("nobody", 6, 9, 7),
            Retract("b", 7, 12, 10),
            Retract("b", 6, 9, 10),
            Retract("b", 6, 12, 5),
        ]
        for element in bad:
            with pytest.raises(InvalidElementError):
                v.check(element)
            assert snapshot(v) == before
        assert v.check(Insert("d", 6, 7)) == Insert("d", 6, 7)
        assert v.position == before[-1] + 1

    def test_cti_violation_under_raise(self) -> None:
        v, _ = feed([Insert("a", 1, 10), Cti(5)])
        before = snapshot(v)
        for element in [Insert("x", 1, 6), Retract("a", 1, 10, 2), Cti(4)]:
            with pytest.raises(CtiViolationError):
                v.check(element)
            assert snapshot(v) == before


def test_a_time_that_is_no_tick_names_the_element_and_its_field() -> None:
    """``Insert("a", 1.5, 2, 1)`` said only "1.5 is not a whole number of
    ticks": which element, which field? (black-box round 11, D6)."""
    import pandas as pd

    from udm.host.time import SubMicrosecondError, TimeConversionError

    with pytest.raises(TimeConversionError) as info:
        Insert("a", 1.5, 2, 1)
    assert str(info.value) == (
        "Insert(id='a') start: 1.5 is not a whole number of ticks; round it to an int "
        "(1 tick = 1 microsecond)"
    )
    with pytest.raises(TimeConversionError, match=r"^Retract\(id='a'\) new_end: 2\.5 is not"):
        Retract("a", 1, 2, 2.5)
    with pytest.raises(TimeConversionError, match=r"^Cti time: 'x' is neither an ISO 8601"):
        Cti("x")
    with pytest.raises(SubMicrosecondError, match=r"^Insert\(id=7\) end: "):  # the class kept
        Insert(7, 0, pd.Timestamp("2024-01-01 00:00:00.000000001"), 1)
