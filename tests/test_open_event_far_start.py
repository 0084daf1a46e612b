"""An event that never ends, and a later start near the end of time: every
in-process engine refuses it at once with OpenEventError.

Regression from a black-box differential tester (CHANGELOG.md, Unreleased,
Fixed): the reference engine refuses grid windows over an event that never
ends ("infinitely many"), but the host engine (``to_cht``, ``to_events()``,
``consistency="strong"``) made the windows up to the latest start one by
one, about 1.8e18 of them for a start at the last tick, and ran for ever.
docs/concepts.md "When a window is output": a Stream query needs the event
ended or its lifetime bounded before the window. The timeout marks only
turn the old hang into a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from udm.host import INFINITY, Cht, Host, Insert, Retract, TumblingWindow, gridstate, output_cht
from udm.host.errors import OpenEventError
from udm.host.query import Stream
from udm.sdk import aggregate, operator


@aggregate
def count(values: list[Any]) -> int:
    return len(values)


@aggregate(time_sensitive=True)
def timed_count(events: list[Any], window: Any) -> int:
    return len(events)  # time-sensitive: the host's general path


@operator
def each(values: list[Any]) -> list[Any]:
    return list(values)


OPEN = Insert("a", 3, INFINITY, 1)
LAST_TICK = Insert("b", INFINITY - 1, INFINITY, 2)


def _query(elements: list[Any], window: str, udm: str, level: str | None) -> Any:
    s = Stream.from_events(elements)
    if level is not None:
        s = s.with_consistency(level)
    w = s.tumbling_window(5) if window == "tumbling" else s.hopping_window(10, 5)
    if udm == "operator":
        return w.apply(each)
    return w.aggregate(timed_count if udm == "time-sensitive" else count)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("order", ["open first", "last tick first"])
@pytest.mark.parametrize("window", ["tumbling", "hopping"])
@pytest.mark.parametrize("udm", ["aggregate", "time-sensitive", "operator"])
def test_every_engine_refuses_an_open_event_before_a_start_at_the_last_tick(
    order: str, window: str, udm: str
) -> None:
    elements = [OPEN, LAST_TICK] if order == "open first" else [LAST_TICK, OPEN]
    runs: dict[str, Callable[[], Any]] = {
        "reference": lambda: _query(elements, window, udm, None).to_cht(engine="reference"),
        "host": lambda: _query(elements, window, udm, None).to_cht(engine="host"),
        "to_events": lambda: _query(elements, window, udm, None).to_events(),
        "strong": lambda: _query(elements, window, udm, "strong").to_cht(engine="host"),
    }
    for name, run in runs.items():
        with pytest.raises(OpenEventError, match="never ends are infinitely many"):
            run()
        assert name  # (which engine failed shows in the traceback's locals)


@pytest.mark.timeout(120)
def test_the_host_api_refuses_it_with_advice_and_stays_usable() -> None:
    host = Host(TumblingWindow(5), count)
    host.process(OPEN)
    with pytest.raises(OpenEventError, match="end the event with a retraction") as info:
        host.process(LAST_TICK)
    # windows 1 to the last begun by INFINITY - 1 (window 0 holds it already)
    assert f"would join {(INFINITY - 1) // 5} windows" in str(info.value)
    # refused and left as it was: ending the event makes the query finite
    out = host.process(Retract("a", 3, INFINITY, 12, 1))
    out += host.process(Insert("c", 20, 21, 3))
    out += host.flush()
    assert output_cht(out) == [(0, 5, 1), (5, 10, 1), (10, 15, 1), (20, 25, 1)]


@pytest.mark.parametrize("timed", [False, True], ids=["grid path", "general path"])
def test_the_bound_on_windows_an_open_event_joins_at_once(
    monkeypatch: pytest.MonkeyPatch, timed: bool
) -> None:
    # the bound made small: a start 10 windows ahead is taken (and a
    # retraction that ends the event gives the reference's result), one
    # 11 windows ahead is refused
    monkeypatch.setattr(gridstate, "OPEN_EVENT_WINDOWS", 10)
    udm = timed_count if timed else count

    def query(start: int) -> Any:
        elements: list[Any] = [
            Insert("a", 0, INFINITY, 1),
            Insert("c", start, start + 1, 2),
            Retract("a", 0, INFINITY, 7, 1),
        ]
        return Stream.from_events(elements).tumbling_window(5).aggregate(udm)

    taken = query(50)  # windows 1 to 10 begin by 50
    assert taken.to_cht(engine="host") == taken.to_cht(engine="reference")
    assert taken.to_cht(engine="reference") == Cht([(0, 5, 1), (5, 10, 1), (50, 55, 1)])
    with pytest.raises(OpenEventError, match="would join 11 windows at once"):
        query(55).to_cht(engine="host")


FAR = 10**15


@pytest.mark.timeout(120)
@pytest.mark.parametrize("window", ["tumbling", "hopping"])
@pytest.mark.parametrize("udm", ["aggregate", "time-sensitive", "operator"])
@pytest.mark.parametrize("level", [None, "strong"])
def test_a_retraction_to_the_end_of_time_after_a_far_start_is_refused_at_once(
    window: str, udm: str, level: str | None
) -> None:
    """The same event made open by a retraction, not inserted open (black-box
    round 18, B1): the host engine refuses it as the reference does."""
    elements = [
        Insert("b", FAR, FAR + 1, 2),
        Insert("a", 3, 10, 1),
        Retract("a", 3, 10, INFINITY, 1),
    ]
    query = _query(elements, window, udm, level)
    with pytest.raises(OpenEventError, match="never ends"):
        query.to_cht(engine="reference")
    with pytest.raises(OpenEventError, match="never ends"):
        query.to_cht(engine="host")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("start", [3, -(2**63) + 10])
def test_the_host_refuses_a_retraction_to_the_end_of_time_after_a_far_start(
    fast_path: bool, start: int
) -> None:
    elements = [
        Insert("b", start + FAR, start + FAR + 1, 2),
        Insert("a", start, start + 7, 1),
        Retract("a", start, start + 7, INFINITY, 1),
    ]
    host = Host(TumblingWindow(5), count, fast_path=fast_path)
    with pytest.raises(OpenEventError, match="never ends"):
        host.process_many(elements)
