"""Batches (``process_many``, ``process_inserts``) against one element at a
time where an element fails, a key jumps far ahead, or a retraction of an
event the CTI passed quotes another lifetime: found by black-box acceptance
testing, each case here failed on the code before its fix."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from engine_support import Sum

from udm.host import (
    MIN_TIME,
    Cti,
    CtiViolationError,
    HoppingWindow,
    Host,
    Insert,
    InvalidElementError,
    Retract,
    TumblingWindow,
    UdmInvocationError,
    derive_cht,
    output_cht,
)
from udm.host.stream import Element
from udm.host.windows import WindowSpec
from udm.sdk import IncrementalAggregate


class MutatingSum(IncrementalAggregate):
    """A sum whose ``add`` changes its state in place, then refuses 13:
    allowed (``add`` may mutate), so the host must undo the change."""

    def initial_state(self) -> list[int]:
        return [0]

    def add(self, state: list[int], value: int) -> list[int]:
        state[0] += value
        if value == 13:
            raise ValueError("thirteen")
        return state

    def remove(self, state: list[int], value: int) -> list[int]:
        state[0] -= value
        return state

    def result(self, state: list[int]) -> int:
        return state[0]


class ThirteenFails(Sum):
    """A sum whose ``result`` refuses 13."""

    def result(self, state: int) -> int:
        if state == 13:
            raise ValueError("sum is thirteen")
        return state


def one_by_one(host: Host, stream: list[Element]) -> list[Element]:
    """Feed ``stream`` an element at a time, skipping those the UDM fails on."""
    out: list[Element] = []
    for e in stream:
        with contextlib.suppress(UdmInvocationError):
            out += host.process(e)
    return out


def batched(host: Host, stream: list[Element]) -> list[Element]:
    """``process_many`` of ``stream``, skipping the element a failure names."""
    out: list[Element] = []
    rest = stream
    while rest:
        try:
            out += host.process_many(rest)
            rest = []
        except UdmInvocationError as exc:
            out += exc.outputs  # type: ignore[attr-defined]
            rest = rest[exc.position + 1 :]  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("n", [1, 8, 300])
@pytest.mark.parametrize("window", [TumblingWindow(1000), HoppingWindow(1000, 500)])
def test_an_add_that_changed_its_state_then_raised_is_undone_in_a_batch(
    n: int, window: WindowSpec
) -> None:
    """``n`` events of 1, one of 13 that ``add`` refuses after adding it in
    place, ``n`` more of 1: the windows count 1 per accepted event (the
    batch used to keep the 13, and apply it twice)."""
    stream: list[Element] = [Insert(i, i, i + 1, 1) for i in range(n)]
    stream.append(Insert(n, n, n + 1, 13))
    stream += [Insert(n + 1 + i, n + 1 + i, n + 2 + i, 1) for i in range(n)]
    want = one_by_one(Host(window, MutatingSum), stream)
    host = Host(window, MutatingSum)
    got = batched(host, stream)
    assert got == want
    final = output_cht(got + host.flush())
    assert {e.payload for e in final if e.start == 0} == {2 * n}


def test_a_failed_element_gives_its_output_ids_back() -> None:
    """Key a's window [33, 43) sums to 13 when event 4 moves a past it:
    the element fails; the ids of the outputs after it are those feeding
    one at a time gives (a batch used to burn the ids of the outputs it
    withdrew)."""
    stream: list[Element] = [
        Insert(1, 32, 33, {"k": "a", "v": -2}),
        Insert(2, 36, 37, {"k": "b", "v": 0}),
        Insert(3, 39, 40, {"k": "a", "v": 13}),
        Insert(4, 100, 101, {"k": "a", "v": -1}),
        Insert(5, 101, 111, {"k": "b", "v": 5}),
    ]
    for window in (HoppingWindow(10, 2, offset=1), HoppingWindow(10, 5), TumblingWindow(10)):
        want = one_by_one(Host(window, ThirteenFails, key="k", value="v"), stream)
        got = batched(Host(window, ThirteenFails, key="k", value="v"), stream)
        assert got == want, window
    want = one_by_one(Host(HoppingWindow(10, 5), ThirteenFails, key="k", value="v"), stream)
    assert [(e.id.key, e.id.n, e.start) for e in want if isinstance(e, Insert)] == [
        ("a", 0, 25),
        ("b", 1, 30),
        ("b", 2, 35),
    ]


@pytest.mark.timeout(120)  # a hang guard: the old loop visited 9.2e17 empty windows
@pytest.mark.parametrize("api", ["many", "inserts"])
def test_a_key_jumping_over_empty_windows_visits_only_its_windows(api: str) -> None:
    first = Insert("old", MIN_TIME + 100, MIN_TIME + 101, 1)
    later = Insert("later", 3 * 10**8, 3 * 10**8 + 1, 1)
    stream: list[Element] = [first, Insert("now", 0, 1, 1), later]
    want = one_by_one(Host(TumblingWindow(10), Sum), stream)
    host = Host(TumblingWindow(10), Sum)
    if api == "many":
        got = host.process_many(stream)
    else:
        inserts = [e for e in stream if isinstance(e, Insert)]
        got = host.process_inserts(
            [e.id for e in inserts],
            [e.start for e in inserts],
            [e.end for e in inserts],
            [e.payload for e in inserts],
        )
    assert got == want
    assert [(e.start, e.payload) for e in got if isinstance(e, Insert)] == [
        ((MIN_TIME + 100) // 10 * 10, 1),  # the windows the first two events close
        (0, 1),
    ]


MISQUOTED: list[Element] = [
    Insert(10, 14, 15, {"k": "a", "v": 1}),
    Cti(59),
    Retract(10, 7, 19, 7),  # event 10 is [14, 15): quoted wrong, and late
]


@pytest.mark.parametrize("options", [{"key": "k", "value": "v"}, {"value": "v"}])
def test_a_late_misquoted_retraction_of_a_passed_event_is_late(
    options: dict[str, Any],
) -> None:
    """Whether the validator still knows event 10 (one element at a time,
    before its amortized prune) or not (a batch registers no event the CTI
    passed): its retraction with sync time 7 is a CTI violation, under
    ``drop`` dropped and counted, on every path."""
    with pytest.raises(CtiViolationError, match="sync time 7 is before the latest CTI 59"):
        derive_cht(MISQUOTED)
    for fast_path in (True, False):
        with pytest.raises(CtiViolationError, match="sync time 7"):
            one_by_one(Host(TumblingWindow(3), Sum, fast_path=fast_path, **options), MISQUOTED)
        with pytest.raises(CtiViolationError, match="sync time 7"):
            Host(TumblingWindow(3), Sum, fast_path=fast_path, **options).process_many(MISQUOTED)
        for batch in (False, True):
            host = Host(TumblingWindow(3), Sum, fast_path=fast_path, cti_policy="drop", **options)
            out = host.process_many(MISQUOTED) if batch else one_by_one(host, MISQUOTED)
            assert host.stats.dropped_retractions == 1
            assert [e.payload for e in output_cht(out + host.flush())] == [1]


def test_an_unknown_id_after_a_cti_may_be_a_forgotten_event() -> None:
    """Event p5 ended before the CTI: a batch registers no such event with
    the validator (its prune forgets them too), so a retraction quoting
    another lifetime that is not late meets an unknown id there, and the
    message says that the event may be forgotten, not that it never was."""
    stream: list[Element] = [Insert(f"p{i}", i, i + 1, 1) for i in range(50)]
    stream += [Cti(150), Retract("p5", 5, 151, 152)]
    with pytest.raises(InvalidElementError, match="or it ended before the latest CTI 150"):
        Host(TumblingWindow(10), Sum).process_many(stream)
    with pytest.raises(InvalidElementError, match="old_end 151 does not match"):
        one_by_one(Host(TumblingWindow(10), Sum), stream)
    with pytest.raises(InvalidElementError, match="never inserted or is already fully retracted;"):
        Host(TumblingWindow(10), Sum).process_many([Retract("x", 5, 151, 152)])
