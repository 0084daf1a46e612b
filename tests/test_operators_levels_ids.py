"""Consistency levels and reused ids through operators: regressions found
by a black-box acceptance tester (CHANGELOG.md, Unreleased, Fixed). Each
test fails without its fix; expected streams are worked out by hand from
the CEDR definitions, CHTs also from the reference evaluator."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host import INFINITY, Cht, Cti, Insert, Retract, derive_cht
from udm.host.operators.consistency import FinalizeOperator
from udm.host.operators.ids import Reused
from udm.host.operators.lifetime import AlterLifetimeOperator
from udm.host.query import Stream
from udm.sdk import aggregate

# ------------------------------------------- "strong" however it is written

LEFT = [Insert("a", 1, 4, {"k": 1}), Cti(5), Insert("a2", 6, 9, {"k": 1}), Cti(10)]
RIGHT = [Insert("b", 2, 7, {"k": 1}), Cti(3), Insert("b2", 8, 12, {"k": 1}), Cti(8)]
# a minus b is [1, 2), a2 minus b2 is [7, 8); at "strong" each piece comes
# once, after the CTI that makes it final, and nothing is retracted
STRONG_ANTI = [
    Cti(1),
    Insert(("a", 0), 1, 2, {"k": 1}),
    Cti(7),
    Insert(("a2", 1), 7, 8, {"k": 1}),
    Cti(INFINITY),
]


def _anti() -> Stream:
    return Stream.from_events(LEFT).left_anti_join(Stream.from_events(RIGHT), on="k")


@pytest.mark.parametrize(
    "spelling",
    [
        lambda: _anti().to_events(consistency="strong"),
        lambda: _anti().with_consistency("strong").to_events(),
        lambda: (
            Stream.from_events(LEFT)
            .align(INFINITY)
            .left_anti_join(Stream.from_events(RIGHT).align(INFINITY), on="k")
            .to_events()
        ),
    ],
    ids=["to_events", "with_consistency", "align_every_input"],
)
def test_strong_anti_join_never_retracts_however_it_is_written(spelling: Any) -> None:
    assert spelling() == STRONG_ANTI


@aggregate
def total(values: list[int]) -> int:
    """The sum of a window's payloads."""
    return sum(values)


def test_strong_window_is_conservative_through_with_consistency() -> None:
    """Align releases ``a`` and ``d`` at the CTI 13 but holds ``e`` (its end
    20 is not final): a speculative window would emit [0, 10) without
    ``e`` and retract it later; at "strong" it waits for the CTI 20."""
    events = [
        Insert("e", 5, 20, 2),
        Insert("a", 1, 2, 1),
        Insert("d", 11, 12, 1),
        Cti(13),
        Cti(25),
    ]
    q = Stream.from_events(events).tumbling_window(10).aggregate(total)
    out = q.with_consistency("strong").to_events()
    assert [(e.start, e.end, e.payload) for e in out if isinstance(e, Insert)] == [
        (0, 10, 3),
        (10, 20, 3),
    ]
    assert not any(isinstance(e, Retract) for e in out)
    assert out == q.to_events(consistency="strong")


def test_strong_is_not_assumed_when_one_input_is_not_aligned() -> None:
    q = Stream.from_events(LEFT).align(INFINITY).left_anti_join(Stream.from_events(RIGHT), on="k")
    assert any(isinstance(e, Retract) for e in q.to_events())


# ------------------------------------ a Finalize remembering everything is left out


def test_with_consistency_leaves_out_a_finalize_that_remembers_everything() -> None:
    s = Stream.from_events([Insert("a", 1, 5, 1), Cti(3)])
    assert "finalize" not in s.with_consistency("middle").explain()
    strong = s.with_consistency("strong").explain()
    assert "finalize" not in strong and "align blocking=until CTIs" in strong
    assert "finalize remember=5" in s.with_consistency(("weak", 5)).explain()


def test_middle_consistency_leaves_a_bounded_finalize_as_the_plain_run() -> None:
    """The no-op retraction of the second ``a0`` (sync time 18) moves the
    bounded Finalize's CTI to 12, so ``a3`` ([10, 12), sync 10) is late and
    dropped; an extra Finalize at "middle" used to swallow the no-op."""
    els = [
        Insert("a0", 6, 11, {"k": 0}),
        Retract("a0", 6, 11, 8),
        Cti(10),
        Insert("a0", 14, 18, {"k": 1}),
        Retract("a0", 14, 18, 18),
        Insert("a3", 10, 12, {"k": 1}),
    ]
    q = Stream.from_events(els).finalize(6)
    expected = Cht([(6, 8, {"k": 0}), (14, 18, {"k": 1})])
    assert q.to_cht(engine="reference") == expected
    assert q.to_cht(engine="host") == expected
    assert q.to_cht(engine="host", consistency="middle") == expected
    assert q.to_events(consistency="middle") == q.to_events()


# ------------------------------------------------------------ reused ids


def test_alter_lifetime_with_a_reused_id_and_a_tied_end() -> None:
    """``x`` ends at 12 before the CTI 13, so the input may reuse it; the
    operator's heap of ends held (end, id) pairs and compared the ids
    ``Reused`` and ``str`` when two ends tied (a TypeError)."""
    els = [Insert("x", 9, 12, 1), Insert("y", 11, 21, 2), Cti(13), Insert("x", 19, 21, 3)]
    q = Stream.from_events(els).alter_lifetime(
        start=lambda t: t // 4 * 4, duration=lambda t, e: e - t + 3
    )
    expected = Cht([(8, 14, 1), (8, 21, 2), (16, 21, 3)])
    assert q.to_cht(engine="reference") == expected
    assert q.to_cht(engine="host", consistency="strong") == expected
    assert q.to_events(consistency="strong") == [
        Insert("x", 8, 14, 1),
        Cti(8),
        Insert("y", 8, 21, 2),
        Insert(Reused("x", 1), 16, 21, 3),
        Cti(INFINITY),
    ]


def test_alter_lifetime_state_saved_with_id_pairs_still_loads() -> None:
    op = AlterLifetimeOperator(None, lambda t, e: e - t + 3)
    saved = {
        "emitted": 1,
        "last_cti": 0,
        "cti_mapped": 0,
        "starts": op.starts,
        "live": {"x": (1, 5), "y": (2, 5)},
        "ends": [(5, "x"), (5, "y")],
        "ids": op.ids,
    }
    op.set_state(saved)
    assert op.ends == [(5, 0, "x"), (5, 1, "y")] and op.seq == 2
    op.on_cti(0, 6)  # pops both tied ends without comparing ids
    assert op.live == {}


def test_bounded_finalize_renames_an_id_reused_after_a_dropped_retraction() -> None:
    """The full retraction of ``x`` is late for the Finalize (sync time 1,
    CTI 14) and dropped, so ``x`` stays live in the output; the input then
    reuses ``x`` (valid there), which the output names ``Reused("x", 1)``."""
    a = [
        Insert("x", 1, 30, 1),
        Insert("y", 20, 21, 2),
        Retract("x", 1, 30, 1),
        Insert("x", 22, 23, 3),
    ]
    q = Stream.from_events(a).finalize(6)
    out = q.to_events()
    assert out == [
        Insert("x", 1, 30, 1),
        Cti(-5),
        Insert("y", 20, 21, 2),
        Cti(14),
        Insert(Reused("x", 1), 22, 23, 3),
        Cti(16),
        Cti(INFINITY),
    ]
    assert q.metrics.invalid_rows() == {"late for finalize": 1}
    expected = Cht([(1, 30, 1), (20, 21, 2), (22, 23, 3)])
    assert derive_cht(out)[0] == expected
    assert q.to_cht(engine="reference") == expected
    assert Stream.from_events(a).with_consistency(("weak", 6)).to_cht(engine="host") == expected


def test_finalize_state_saved_before_output_ids_still_loads() -> None:
    first = FinalizeOperator(6)
    for el in [Insert("x", 1, 30, 1), Insert("y", 20, 21, 2)]:
        first.push(0, el)
    saved = first.get_state()
    del saved["ids"]
    second = FinalizeOperator(6)
    second.set_state(saved)
    assert second.ids.insert("x", 40) == Reused("x", 1)  # x still live in the output
