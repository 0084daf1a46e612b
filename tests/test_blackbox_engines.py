"""Regressions found by a black-box acceptance tester, items 4, 5, 6 and
8 (see CHANGELOG.md, Unreleased, Fixed): Finalize's CTIs over ExternalCTIs
that arrive out of order or leave a gap, the Spark workers' interpreter on
every entry point, union of an input whose events are all retracted, and
mixed column types across the inputs of a union or join on Spark. Each
test fails without its fix; results are worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host import Cht, Cti, Insert, IntervalEvent
from udm.host.errors import OperatorError
from udm.host.operators.base import Collector
from udm.host.operators.consistency import FinalizeOperator
from udm.host.query import Stream
from udm.host.stream import ExternalCti
from udm.host.time import INFINITY

# ------------------------------- 4. Finalize: no CTI over time no ExternalCTI covers

OUT_OF_ORDER = [
    Insert("c", 6, 7, "C"),
    ExternalCti(5, 9, 1),
    Insert("a", 1, 5, "A"),
    ExternalCti(0, 4, 1),
]
GAP = [Insert("a", 1, 2, 1), ExternalCti(0, 2, 1), ExternalCti(6, 9, 0), Insert("b", 4, 5, 1)]


def _finalized(elements: list[Any]) -> list[Any]:
    op = FinalizeOperator(INFINITY)
    sink = Collector()
    op.connect(sink)
    for element in elements:
        op.push(0, element)
    return sink.elements


def test_finalize_waits_for_an_external_cti_that_arrives_late() -> None:
    """[5, 9] completes first, but [0, 4] is still open: the CTI at 9 comes
    only once [0, 4] is complete too (CEDR 4.6: no earlier than correct)."""
    assert _finalized(OUT_OF_ORDER) == [
        Insert("c", 6, 7, "C"),
        Insert("a", 1, 5, "A"),
        Cti(9),
    ]


def test_finalize_issues_no_cti_over_a_gap_between_external_ctis() -> None:
    assert _finalized(GAP) == [Insert("a", 1, 2, 1), Cti(2), Insert("b", 4, 5, 1)]
    # the gap (2, 6) covered: the CTI moves over it and over [6, 9]
    assert _finalized([*GAP, ExternalCti(3, 5, 1)]) == [
        Insert("a", 1, 2, 1),
        Cti(2),
        Insert("b", 4, 5, 1),
        Cti(9),
    ]


def test_finalize_cti_from_a_plain_cti_joins_a_completed_external_cti() -> None:
    """A CTI in the input closes the time before it: [5, 9], complete,
    then follows on without a gap."""
    out = _finalized([ExternalCti(5, 9, 0), Cti(5)])
    assert out == [Cti(5), Cti(9)]


def test_finalize_refuses_an_element_beyond_a_completed_count_awaiting_its_cti() -> None:
    with pytest.raises(OperatorError) as err:
        _finalized([Insert("c", 6, 7, "C"), ExternalCti(5, 9, 1), Insert("d", 8, 9, "D")])
    assert str(err.value) == (
        "finalize: more elements arrived with sync times in [5, 9] than its ExternalCti counted (1)"
    )


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_external_ctis_out_of_order_or_with_a_gap_on_every_engine(engine: str) -> None:
    a = Stream.from_events(OUT_OF_ORDER)
    assert a.to_cht(engine=engine) == Cht([IntervalEvent(1, 5, "A"), IntervalEvent(6, 7, "C")])
    assert a.finalize().to_cht(engine=engine) == a.to_cht(engine=engine)
    b = Stream.from_events(GAP)
    assert b.to_cht(engine=engine) == Cht([IntervalEvent(1, 2, 1), IntervalEvent(4, 5, 1)])
    assert a.to_events() == [Insert("c", 6, 7, "C"), Insert("a", 1, 5, "A"), Cti(9), Cti(INFINITY)]


@pytest.mark.spark
def test_external_ctis_out_of_order_or_with_a_gap_on_spark(spark: Any) -> None:
    a = Stream.from_events(OUT_OF_ORDER)
    assert a.to_cht(engine="spark") == Cht([IntervalEvent(1, 5, "A"), IntervalEvent(6, 7, "C")])
    b = Stream.from_events(GAP)
    assert b.to_cht(engine="spark") == Cht([IntervalEvent(1, 2, 1), IntervalEvent(4, 5, 1)])
