"""Regressions found by a black-box acceptance tester (see CHANGELOG.md,
Unreleased, Fixed): each test fails without its fix, with exact results
worked out by hand (or the reference engine where noted)."""

from __future__ import annotations

from typing import Any

import pytest

import udm.host
from udm.host import INFINITY, Cht, Cti, Insert, IntervalEvent, Retract, derive_cht
from udm.host.algebra import join_payload
from udm.host.errors import OperatorError
from udm.host.operators.base import Collector
from udm.host.operators.consistency import AlignOperator, FinalizeOperator
from udm.host.query import Stream
from udm.host.stream import ExternalCti

REUSED = [Insert("a", 0, 10, "x"), Retract("a", 0, 10, 0), Insert("a", 2, 9, "y")]


def _cht(elements: list[Any]) -> Cht:
    return derive_cht(e for e in elements if not isinstance(e, ExternalCti))[0]


# ----------------------------------- 1. Align and an id reused after a full retraction


@pytest.mark.parametrize("level", ["strong", (3, INFINITY), (2, 5)])
def test_align_takes_an_id_reused_after_a_full_retraction(level: Any) -> None:
    out = Stream.from_events(REUSED).to_events(consistency=level)
    assert [e for e in out if not isinstance(e, Cti)] == [Insert("a", 2, 9, "y")]
    assert out[-1] == Cti(INFINITY)


def test_align_with_blocking_releases_a_reused_id_at_its_own_start() -> None:
    """The dropped first ``a`` (start 0) must not release the second (start
    2) when the output time reaches 0: it waits for a start of 6."""
    s = [*REUSED, Insert("b", 4, 20, "z"), Cti(1), Insert("c", 6, 20, "w")]
    assert Stream.from_events(s).align(4).to_events() == [
        Cti(1),
        Insert("a", 2, 9, "y"),
        Insert("b", 4, 20, "z"),
        Insert("c", 6, 20, "w"),
        Cti(INFINITY),
    ]


def test_align_state_saved_with_stale_entries_is_upgraded() -> None:
    """A state saved before held elements carried their entry's seq (three
    fields, a stale entry for the fully retracted ``a``) still runs."""
    old = AlignOperator(INFINITY)
    state = old.get_state()
    state["inserts"] = {"a": [2, 9, "y"]}
    state["_by_start"] = type(state["_by_start"])([(0, 1, "a", True), (2, 3, "a", True)])
    state["_seq"] = 3
    op = AlignOperator(INFINITY)
    op.set_state(state)
    sink = Collector()
    op.connect(sink)
    op.push(0, Cti(INFINITY))
    assert sink.elements == [Insert("a", 2, 9, "y"), Cti(INFINITY)]


# ------------------------------------ 2. a source's cti_policy under a consistency level

LATE = [Insert("a", 1, 20, 1), Cti(10), Insert("b", 5, 15, 2)]
KEPT = {
    "drop": Cht([IntervalEvent(1, 20, 1)]),
    "adjust": Cht([IntervalEvent(1, 20, 1), IntervalEvent(10, 15, 2)]),
}


@pytest.mark.parametrize("policy", ["drop", "adjust"])
@pytest.mark.parametrize("level", ["strong", "middle", ("weak", 3), (2, 5)])
def test_cti_policy_applies_before_a_consistency_level(policy: str, level: Any) -> None:
    src = Stream.from_events(LATE, cti_policy=policy)
    assert _cht(src.to_events(consistency=level)) == KEPT[policy]
    assert src.to_cht(engine="host", consistency=level) == KEPT[policy]


@pytest.mark.parametrize("policy", ["drop", "adjust"])
@pytest.mark.parametrize("engine", ["reference", "host"])
def test_cti_policy_applies_before_a_bounded_finalize(policy: str, engine: str) -> None:
    q = Stream.from_events(LATE, cti_policy=policy).finalize(3)
    assert q.to_cht(engine=engine) == KEPT[policy]


def test_middle_consistency_exact_stream_under_adjust() -> None:
    src = Stream.from_events(LATE, cti_policy="adjust")
    assert src.to_events(consistency="middle") == [
        Insert("a", 1, 20, 1),
        Cti(10),
        Insert("b", 10, 15, 2),
        Cti(INFINITY),
    ]


def test_a_late_element_behind_a_plain_cti_is_not_blamed_on_external_ctis() -> None:
    s = [Insert("a", 3, 20, "x"), ExternalCti(3, 4, 1), Cti(10), Insert("b", 7, 20, "y")]
    with pytest.raises(OperatorError) as err:
        Stream.from_events(s)
    message = str(err.value)
    assert "Insert(id='b', start=7, end=20, payload='y')" in message
    assert "after a CTI at 10 in its input (a late element)" in message
    assert "counted" not in message


def test_a_late_element_behind_an_external_cti_names_it() -> None:
    s = [Insert("a", 3, 20, "x"), ExternalCti(0, 4, 1), Insert("b", 1, 20, "y")]
    with pytest.raises(OperatorError) as err:
        Stream.from_events(s)
    assert "the CTI at 4 that Finalize issued once every element " in str(err.value)
    assert "ExternalCti(start=0, end=4, count=1) counted had arrived" in str(err.value)


# --------------------------------------------- 3. join suffixes that make a name twice

COLLIDING = "two output columns would both be named 'x_left'"


@pytest.mark.parametrize("engine", ["reference", "host"])
@pytest.mark.parametrize("mirror", [False, True])
def test_join_refuses_suffixes_that_collide(engine: str, mirror: bool) -> None:
    left = Stream.from_cht([(0, 10, {"k": 1, "x": 111, "x_left": "orig"})])
    right = Stream.from_cht([(0, 10, {"k": 1, "x": 2})])
    if mirror:  # the right stream has the column the left's suffix makes
        left, right = right, left
    side = "right" if mirror else "left"
    with pytest.raises(OperatorError) as err:
        left.join(right, on="k").to_cht(engine=engine)
    message = str(err.value)
    assert message.startswith("join on k: ") and COLLIDING in message
    assert "the left stream's column 'x' (in both streams, so suffixed to 'x_left')" in message
    assert f"the {side} stream's column 'x_left'" in message
    assert "suffixes=" in message and "select=" in message
    # other suffixes, or a select=, join them
    out = left.join(right, on="k", suffixes=("_l", "_r")).to_cht(engine=engine)
    payload = next(iter(out[1])).payload
    assert payload == (
        {"k": 1, "x_l": 2, "x_r": 111, "x_left": "orig"}
        if mirror
        else {"k": 1, "x_l": 111, "x_left": "orig", "x_r": 2}
    )


def test_join_refuses_a_collision_before_running_even_without_pairs() -> None:
    left = Stream.from_cht([(0, 10, {"k": 1, "x": 1, "x_left": 0})])
    right = Stream.from_cht([(20, 30, {"k": 2, "x": 2})])
    for engine in ("reference", "host"):
        with pytest.raises(OperatorError, match=COLLIDING):
            left.join(right, on="k").to_cht(engine=engine)


def test_join_payload_refuses_a_collision_at_run_time() -> None:
    with pytest.raises(OperatorError, match=COLLIDING):
        join_payload({"k": 1, "x": 1, "x_left": 0}, {"k": 1, "x": 2}, ["k"])
    # a side without the key column is no collision
    assert join_payload({"k": 1, "x": 1}, {"x": 2}, ["k"]) == {"k": 1, "x_left": 1, "x_right": 2}


@pytest.mark.spark
def test_join_refuses_suffixes_that_collide_on_spark(spark: Any) -> None:
    left = Stream.from_cht([(0, 10, {"k": 1, "x": 111, "x_left": "orig"})])
    right = Stream.from_cht([(0, 10, {"k": 1, "x": 2})])
    with pytest.raises(OperatorError, match=COLLIDING):
        left.join(right, on="k").to_cht(engine="spark")


# ------------------------------------------------------------ 4. overlapping ExternalCTIs


@pytest.mark.parametrize(
    "elements,new,old",
    [
        (
            [Insert("a", 3, 20, "x"), ExternalCti(3, 4, 1), Insert("b", 7, 20, "y")],
            ExternalCti(0, 9, 2),
            ExternalCti(3, 4, 1),  # completed (its CTI waiting for [0, 2]) before [0, 9] arrives
        ),
        (
            [Insert("a", 3, 20, "x"), ExternalCti(0, 9, 2)],
            ExternalCti(3, 4, 1),
            ExternalCti(0, 9, 2),
        ),
    ],
)
def test_overlapping_external_ctis_are_refused_in_either_order(
    elements: list[Any], new: ExternalCti, old: ExternalCti
) -> None:
    with pytest.raises(OperatorError) as err:
        Stream.from_events([*elements, new])
    assert str(err.value) == (
        f"finalize at {new!r}: ExternalCTIs must not overlap: it overlaps the earlier {old!r}"
    )


def test_finalize_state_saved_before_overlap_history_still_loads() -> None:
    state = FinalizeOperator(INFINITY).get_state()
    del state["seen"], state["cti_cause"]
    op = FinalizeOperator(INFINITY)
    op.set_state(state)
    sink = Collector()
    op.connect(sink)
    op.push(0, ExternalCti(0, 4, 0))
    assert sink.elements == [Cti(4)]


# ------------------------------------------------------ 5. AlterLifetime's CTI (docs)


def test_alter_lifetime_cti_waits_for_an_end_moved_back_to_the_cti() -> None:
    """docs/operators.md: start = 2s maps [3, 10) to [6, 13); after a CTI at
    8 a retraction may move the end to 8, which maps to 11: the CTI is 11."""
    s = Stream.from_events([Insert("a", 3, 10, "x"), Cti(8)])
    out = s.alter_lifetime(start=lambda t: 2 * t).to_events()
    assert out == [Insert("a", 6, 13, "x"), Cti(11), Cti(INFINITY)]
    s = Stream.from_events([Insert("a", 3, 10, "x"), Cti(8), Retract("a", 3, 10, 8)])
    assert s.alter_lifetime(start=lambda t: 2 * t).to_events() == [
        Insert("a", 6, 13, "x"),
        Cti(11),
        Retract("a", 6, 13, 11),
        Cti(INFINITY),
    ]


# ------------------------------------------------------------------ 6. ExternalCti export


def test_external_cti_is_exported_from_udm_host() -> None:
    assert "ExternalCti" in udm.host.__all__
    assert udm.host.ExternalCti is ExternalCti


# --------------------------------------------- 7. a shift past the end of time


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_a_shift_past_the_end_of_time_is_refused(engine: str) -> None:
    q = Stream.from_events([Insert("a", 3, 10, "x")]).shift(INFINITY - 5)
    with pytest.raises(OperatorError) as err:
        q.to_cht(engine=engine)
    message = str(err.value)
    assert message.startswith(f"shift by {INFINITY - 5} at ")
    assert "the event [3, 10) would end at" in message and "never ends" in message
    # an event that never ends still may; one that ends just before the end of time too
    q = Stream.from_events([Insert("a", 3, INFINITY, "x")]).shift(INFINITY - 5)
    assert q.to_cht(engine=engine) == Cht([IntervalEvent(INFINITY - 2, INFINITY, "x")])
    q = Stream.from_events([Insert("a", 3, 10, "x")]).shift(INFINITY - 11)
    assert q.to_cht(engine=engine) == Cht([IntervalEvent(INFINITY - 8, INFINITY - 1, "x")])


# ------------------------------------ 8. a start function that is not monotone (reference)


def test_reference_names_the_events_of_a_non_monotone_start_function() -> None:
    q = Stream.from_events([Insert("x", 3, 6, "a"), Insert("y", 4, 8, "b")])
    with pytest.raises(OperatorError) as err:
        q.alter_lifetime(start=lambda t: -t).to_cht(engine="reference")
    assert str(err.value) == (
        "alter_lifetime start=udf <lambda> at (4, 8, {'value': 'b'}): the start function is "
        "not monotone: start 3 (of (3, 6, {'value': 'a'})) maps to -3 but the later start 4 "
        "maps to -4; a start function must not decrease (CTIs could not pass through it)"
    )


@pytest.mark.spark
def test_a_shift_past_the_end_of_time_is_refused_on_spark(spark: Any) -> None:
    q = Stream.from_events([Insert("a", 3, 10, "x")]).shift(INFINITY - 5)
    with pytest.raises(OperatorError) as err:
        q.to_cht(engine="spark")
    assert str(err.value) == (
        f"shift by {INFINITY - 5}: the event [3, 10) would end at {INFINITY + 5}, at or past "
        f"the end of time ({INFINITY}), which means it never ends; a finite event must stay "
        "finite"
    )
    q = Stream.from_events([Insert("a", 3, INFINITY, "x"), Insert("b", 3, 10, "y")])
    assert q.shift(INFINITY - 11).to_cht(engine="spark") == Cht(
        [IntervalEvent(INFINITY - 8, INFINITY, "x"), IntervalEvent(INFINITY - 8, INFINITY - 1, "y")]
    )
    shifted = Stream.from_events([Insert("b", 3, 10, "y")]).shift(INFINITY - 11)
    past = rf"the event \[{INFINITY - 8}, {INFINITY - 1}\) would end at {INFINITY + 12}"
    for engine in ("reference", "spark"):  # set_duration too, alike
        with pytest.raises(OperatorError, match=r"set_duration 20\b.*: " + past):
            shifted.set_duration(20).to_cht(engine=engine)


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_a_sources_cti_policy_drops_and_adjustments_are_counted(engine: str) -> None:
    """What cti_policy dropped or adjusted went uncounted (the guide: every
    drop or adjust policy is explicit and counted)."""
    elements = [Insert("a", 1, 20, 1), Cti(10), Insert("b", 5, 15, 2), Insert("c", 2, 4, 3)]
    dropped = Stream.from_events(elements, cti_policy="drop")
    assert dropped.metrics.invalid_rows() == {"late (drop): dropped inserts": 2}
    query = dropped.shift(1)
    assert query.to_cht(engine=engine) == Cht([(2, 21, 1)])
    assert query.metrics.invalid_rows() == {"late (drop): dropped inserts": 2}
    adjusted = Stream.from_events(elements, cti_policy="adjust").with_consistency("middle")
    assert adjusted.to_cht(engine=engine) == Cht([(1, 20, 1), (10, 15, 2)])
    assert adjusted.metrics.invalid_rows() == {
        "late (adjust): adjusted inserts": 1,
        "late (adjust): dropped inserts": 1,
    }
