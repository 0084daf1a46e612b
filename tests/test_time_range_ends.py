"""Lifetimes at the ends of the time range, on every engine.

Regressions and gaps from a black-box acceptance tester (CHANGELOG.md,
Unreleased): a CTI at (or near) the beginning of time under a lifetime map
moving starts earlier failed the host engine only; CEDR's ``Inserts(S) =
Π(Vs, ∞)`` (StreamInsight's ``AlterEventDuration(e => TimeSpan.MaxValue)``)
could not be written; and the advice for grid windows over an event that
never ends named a watermark the Stream API's entry points do not take.
Expected CHTs are hand-computed from CEDR's Definition 6 (``[f(Vs),
f(Vs) + Δ)``, a full retraction removing the event).
"""

from __future__ import annotations

from typing import Any

import pytest

from udm.host import MIN_TIME, Cht, Cti, Host, Insert, Retract, TumblingWindow
from udm.host.errors import OpenEventError, OperatorError
from udm.host.query import Stream
from udm.host.time import INFINITY
from udm.sdk import aggregate

ENGINES = ["reference", "host"]


@aggregate
def total(values: list[int]) -> int:
    return sum(values)


# ------------------------------------------ a CTI at the beginning of time


@pytest.mark.parametrize("cti", [MIN_TIME, MIN_TIME + 2])
@pytest.mark.parametrize(
    ("query", "mapped"),
    [
        (lambda s: s.shift(-5), 100),
        (lambda s: s.alter_lifetime(start=lambda t: t - 5, duration=lambda t, e: e - t), 100),
        (lambda s: s.alter_lifetime(start=lambda t: t // 10 * 10 - 5), 95),
    ],
    ids=["shift", "start-5", "floor"],
)
def test_a_cti_mapped_before_the_beginning_of_time_stays_there(
    cti: int, query: Any, mapped: int
) -> None:
    # [100, 110) -> [95, 105); the CTI at 105 -> 100 (95 floored); the first
    # CTI's map is below MIN_TIME: the beginning of time, where the output clock is
    s = Stream.from_events([Cti(cti), Insert("a", 100, 110, 1), Cti(105)])
    for engine in ENGINES:
        assert query(s).to_cht(engine=engine) == Cht([(95, 105, 1)])
    assert query(s).to_events() == [Insert("a", 95, 105, 1), Cti(mapped), Cti(INFINITY)]


@pytest.mark.parametrize("first", [MIN_TIME, MIN_TIME + 1])
def test_several_ctis_mapped_before_the_beginning_of_time(first: int) -> None:
    """The second CTI's map was checked against the first's clamped one
    (MIN_TIME), not its map, and called the start function not monotone."""
    s = Stream.from_events([Cti(first), Cti(first + 1), Insert("a", 5, 10, 1), Cti(20)])
    for engine in ENGINES:
        assert s.shift(-3).to_cht(engine=engine) == Cht([(2, 7, 1)])
    assert s.shift(-3).to_events() == [Insert("a", 2, 7, 1), Cti(17), Cti(INFINITY)]


def test_an_event_mapped_before_the_beginning_of_time_is_still_refused() -> None:
    s = Stream.from_events([Cti(MIN_TIME), Insert("a", MIN_TIME + 1, 110, 1)]).shift(-5)
    for engine in ENGINES:
        with pytest.raises(OperatorError, match="is outside the time range"):
            s.to_cht(engine=engine)


def test_a_start_function_decreasing_at_a_cti_before_the_beginning_is_refused() -> None:
    # 100 maps to 100, the later CTI at MIN_TIME + 200 to below the range: not monotone
    s = [Insert("a", MIN_TIME + 100, 110, 1), Cti(MIN_TIME + 200)]
    q = Stream.from_events(s).alter_lifetime(start=lambda t: t if t < MIN_TIME + 150 else t - 2**63)
    with pytest.raises(OperatorError, match="the start function is not monotone"):
        q.to_events()


# -------------------------------------------- an infinite duration: Π(Vs, ∞)

# a = [-5, 3); b = [2, 9) cut to 4; c = [6, 8) fully retracted
LIFETIMES = [
    Insert("a", -5, 3, 1),
    Insert("b", 2, 9, 2),
    Retract("b", 2, 9, 4),
    Insert("c", 6, 8, 3),
    Retract("c", 6, 8, 6),
    Cti(10),
]
OPEN = Cht([(-5, INFINITY, 1), (2, INFINITY, 2)])

INFINITE = [
    lambda s: s.set_duration(INFINITY),
    lambda s: s.alter_lifetime(duration=INFINITY),
    lambda s: s.alter_lifetime(start=lambda t: t, duration=INFINITY),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("query", INFINITE, ids=["set_duration", "constant", "with-start"])
def test_an_infinite_duration_makes_every_event_never_end(engine: str, query: Any) -> None:
    assert query(Stream.from_events(LIFETIMES)).to_cht(engine=engine) == OPEN


def test_an_infinite_duration_keeps_full_retractions_and_hides_the_others() -> None:
    # b's cut changes nothing once b never ends; c's full retraction stays one
    assert Stream.from_events(LIFETIMES).set_duration(INFINITY).to_events() == [
        Insert("a", -5, INFINITY, 1),
        Insert("b", 2, INFINITY, 2),
        Insert("c", 6, INFINITY, 3),
        Retract("c", 6, INFINITY, 6),
        Cti(10),
        Cti(INFINITY),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_infinite_duration_then_a_clip_is_streaminsights_pattern(engine: str) -> None:
    q = Stream.from_events(LIFETIMES).set_duration(INFINITY).clip_to(4)
    assert q.to_cht(engine=engine) == Cht([(-5, -1, 1), (2, 6, 2)])
    moved = Stream.from_events(LIFETIMES).alter_lifetime(start=lambda t: t + 1, duration=INFINITY)
    assert moved.to_cht(engine=engine) == Cht([(-4, INFINITY, 1), (3, INFINITY, 2)])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_finite_duration_reaching_the_end_of_time_is_still_refused(engine: str) -> None:
    q = Stream.from_events([Insert("a", 3, 10, 1)]).set_duration(INFINITY - 1)
    with pytest.raises(OperatorError, match="a finite event must stay finite"):
        q.to_cht(engine=engine)
    # a function's result is a length: e - s of [MIN_TIME, 0) is INFINITY, and
    # the event keeps its end; a function reaching the end of time is refused
    span = Stream.from_events([Insert("a", MIN_TIME, 0, 1)])
    kept = span.alter_lifetime(start=lambda t: t, duration=lambda t, e: e - t)
    assert kept.to_cht(engine=engine) == Cht([(MIN_TIME, 0, 1)])
    q = Stream.from_events([Insert("a", 3, 10, 1)]).alter_lifetime(duration=lambda t, e: INFINITY)
    with pytest.raises(OperatorError, match="a finite event must stay finite"):
        q.to_cht(engine=engine)


@pytest.mark.spark
def test_lifetimes_at_the_ends_of_time_on_spark(spark: Any) -> None:
    s = Stream.from_events(LIFETIMES)
    for query in INFINITE:
        assert query(s).to_cht(engine="spark") == OPEN
    assert s.set_duration(INFINITY).clip_to(4).to_cht(engine="spark") == Cht(
        [(-5, -1, 1), (2, 6, 2)]
    )
    early = Stream.from_events([Cti(MIN_TIME), Insert("a", 100, 110, 1), Cti(105)])
    assert early.shift(-5).to_cht(engine="spark") == Cht([(95, 105, 1)])


# ------------------------------------ grid windows over an event that never ends

OPEN_EVENT = [Insert("a", 1, INFINITY, 5), Insert("b", 3, 4, 1), Cti(12)]


def test_the_stream_api_advises_what_its_entry_points_take() -> None:
    q = Stream.from_events(OPEN_EVENT).tumbling_window(5).aggregate(total)
    for run in (
        lambda: q.to_cht(engine="host"),
        lambda: q.to_events(),
        lambda: q.to_events(consistency="strong"),
    ):
        with pytest.raises(OpenEventError) as err:
            run()
        assert str(err.value) == (
            "cannot close hopping/tumbling windows at the end of time: an event that never ends "
            "overlaps infinitely many windows; a Stream query's input ends at the end of time, "
            "so end the event with a retraction, or bound lifetimes before the window "
            "(clip_to()); engine='reference' or 'spark' also take aggregate(..., watermark=t) "
            "(apply(..., watermark=t)), which outputs only the windows complete by t"
        )
    with pytest.raises(OpenEventError, match=r"of a Stream's aggregate\(\)/apply\(\)"):
        q.to_cht(engine="reference")
    # both pieces of advice work: a watermark on the reference engine, a clip on the host
    bounded = Stream.from_events(OPEN_EVENT).tumbling_window(5).aggregate(total, watermark=12)
    assert bounded.to_cht(engine="reference") == Cht([(0, 5, 6), (5, 10, 5)])
    clipped = Stream.from_events(OPEN_EVENT).clip_to(6).tumbling_window(5).aggregate(total)
    assert clipped.to_cht(engine="host") == Cht([(0, 5, 6), (5, 10, 5)])


def test_a_live_host_advises_finite_ctis() -> None:
    host = Host(TumblingWindow(5), total)
    host.process(Insert("a", 1, INFINITY, 5))
    out = host.process(Cti(12))  # a finite CTI closes the windows before it
    assert [(e.start, e.end, e.payload) for e in out if isinstance(e, Insert)] == [
        (0, 5, 5),
        (5, 10, 5),
    ]
    assert out[-1] == Cti(10)
    with pytest.raises(OpenEventError, match=r"or send only finite CTIs \(a CTI at INFINITY"):
        host.process(Cti(INFINITY))
