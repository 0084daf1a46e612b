"""Exact results for each UDM, through udm's reference evaluator and by name."""

from __future__ import annotations

import math

from udm.host import (
    Cht,
    Element,
    Host,
    Insert,
    IntervalEvent,
    Retract,
    Stream,
    TumblingWindow,
    evaluate,
    output_cht,
)
from udm.host.registry import get_registry

from {{ cookiecutter.library }} import Jumps, Rms

EVENTS = [
    IntervalEvent(0, 1, 3.0),
    IntervalEvent(1, 2, 4.0),
    IntervalEvent(2, 3, 10.0),
    IntervalEvent(12, 13, 2.0),
]


def test_rms_per_tumbling_window() -> None:
    got = evaluate(EVENTS, TumblingWindow(10), Rms)
    assert got == Cht([(0, 10, math.sqrt((9 + 16 + 100) / 3)), (10, 20, 2.0)])


def test_rms_retraction_is_exact() -> None:
    """The incremental host removes a retracted value from the state: 1.0
    stays exact next to 1e9 squared."""
    host = Host(TumblingWindow(10), Rms)
    stream: list[Element] = [Insert("a", 1, 2, 1.0), Insert("b", 2, 3, 1e9), Retract("b", 2, 3, 2)]
    out = host.process_many(stream)
    assert output_cht(out + host.flush()) == Cht([(0, 10, 1.0)])


def test_jumps_are_point_events_at_the_jump() -> None:
    got = evaluate(EVENTS, TumblingWindow(10), Jumps, args={"threshold": 2.0})
    assert got == Cht([(2, 3, 6.0)])


def test_registered_by_name() -> None:
    registry = get_registry()
    assert registry.resolve("{{ cookiecutter.library }}.rms") is Rms
    got = (
        Stream.from_cht([(e.start, e.end, e.payload) for e in EVENTS])
        .tumbling_window(10)
        .apply("{{ cookiecutter.library }}.jumps", threshold=0.5)
        .to_cht(engine="reference")
    )
    assert got == Cht([(1, 2, 1.0), (2, 3, 6.0)])
