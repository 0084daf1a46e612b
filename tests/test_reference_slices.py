"""The reference evaluator's members as slices of the events sorted by
start, and ``evaluate_by_key`` checking lifetimes while it groups (issue
31): exactly the literal belongs-to rule, and the same outputs and errors
as evaluating each group on its own."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    evaluate,
    evaluate_by_key,
)
from udm.host.reference import sliced_members
from udm.sdk import aggregate
from udm.sdk.payloads import payload_key

WINDOWS = [
    TumblingWindow(4),
    HoppingWindow(6, 2),
    HoppingWindow(2, 5, offset=1),
    HoppingWindow(12, 3),
    SnapshotWindow(),
    CountByStartWindow(3),
    CountByEndWindow(2),
]

events_strategy = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([1, 1, 2, 3, 12]), st.integers(0, 5)).map(
        lambda t: IntervalEvent(t[0], t[0] + t[1], t[2])
    ),
    max_size=30,
)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=60, deadline=None)
@given(events=events_strategy, watermark=st.sampled_from([10, 25, 60]))
def test_sliced_members_are_the_belongs_to_rule(
    window: Any, events: list[IntervalEvent[int]], watermark: int
) -> None:
    events = sorted(events, key=lambda e: e.start)
    windows = window.windows(events, watermark)
    found = list(sliced_members(window, windows, events))
    assert found == [[e for e in events if window.belongs(e, w)] for w in windows]


def test_sliced_members_of_points_and_of_longer_events_by_hand() -> None:
    """Hopping 4 / 2: window [0, 4) holds the points at 0 and 3, [2, 6)
    those at 3 and 5; with the event [1, 4) (as long as a hop and a half)
    [2, 6) holds it too, [4, 8) not (it ends at 4)."""
    window = HoppingWindow(4, 2)
    points = [IntervalEvent(0, 1, "a"), IntervalEvent(3, 4, "b"), IntervalEvent(5, 6, "c")]
    windows = [window.window_at(k) for k in (0, 1, 2)]
    assert list(sliced_members(window, windows, points)) == [
        points[:2],
        points[1:],
        points[2:],
    ]
    longer = [points[0], IntervalEvent(1, 4, "x"), *points[1:]]
    assert list(sliced_members(window, windows, longer)) == [
        longer[:3],
        longer[1:],
        longer[3:],
    ]


@aggregate
def spread(values: list[int]) -> int:
    return max(values) - min(values)


@settings(max_examples=40, deadline=None)
@given(events=events_strategy)
def test_by_key_equals_each_group_evaluated_alone(events: list[IntervalEvent[int]]) -> None:
    cht = [IntervalEvent(e.start, e.end, {"k": e.payload % 3, "v": e.payload}) for e in events]
    window = HoppingWindow(6, 2)
    got = evaluate_by_key(cht, "k", window, spread, value="v")
    groups: dict[Any, list[IntervalEvent[Any]]] = {}
    for e in cht:
        groups.setdefault(e.payload["k"], []).append(e)
    assert got == {k: evaluate(g, window, spread, value="v") for k, g in groups.items()}


def test_by_key_reports_a_bad_lifetime_as_the_group_alone_does() -> None:
    """An event ending at its start: the error names the event by its
    place in its group, as ``evaluate`` of the group does, after the
    groups before it were evaluated (a UDM error there comes first)."""
    good = IntervalEvent(0, 1, {"k": "a", "v": 1})
    group_b = [IntervalEvent(1, 2, {"k": "b", "v": 3}), IntervalEvent(5, 5, {"k": "b", "v": 2})]
    with pytest.raises(ValueError) as alone:
        evaluate(group_b, TumblingWindow(4), spread, value="v")
    with pytest.raises(ValueError) as by_key:
        evaluate_by_key([good, *group_b], "k", TumblingWindow(4), spread, value="v")
    assert str(by_key.value) == str(alone.value)
    assert "CHT event #1" in str(by_key.value)
    with pytest.raises(UdmInvocationError, match=r"no field .v."):  # group "a" fails first
        evaluate_by_key(
            [IntervalEvent(0, 1, {"k": "a"}), *group_b], "k", TumblingWindow(4), spread, value="v"
        )


def test_by_key_refuses_an_unknown_option_as_evaluate_does() -> None:
    with pytest.raises(TypeError, match="unexpected keyword"):
        evaluate_by_key([IntervalEvent(0, 1, {"k": 1})], "k", TumblingWindow(4), spread, bogus=1)


@aggregate
def first_minus_last(values: list[int]) -> int:
    """Order-sensitive: shows the members' order."""
    return values[0] - values[-1]


@pytest.mark.parametrize("window", [HoppingWindow(6, 2), TumblingWindow(4)], ids=repr)
@settings(max_examples=60, deadline=None)
@given(events=events_strategy, shuffled=st.booleans())
def test_an_order_sensitive_udm_sees_the_canonical_order(
    window: Any, events: list[IntervalEvent[int]], shuffled: bool
) -> None:
    """Events in increasing start order are taken as they are, others (or
    ties) sorted by start, then payload: literally, each window's members
    by the overlap rule, sorted so."""
    ordered = sorted(events, key=lambda e: e.start)
    cht = events if shuffled else ordered
    literal = [
        (w.start, w.end, first_minus_last().compute_result([e.payload for e in members]))
        for w in window.windows(cht)
        if (
            members := sorted(
                (e for e in cht if e.start < w.end and w.start < e.end),
                key=lambda e: (e.start, payload_key(e.payload)),
            )
        )
    ]
    got = evaluate(cht, window, first_minus_last)
    assert sorted((e.start, e.end, e.payload) for e in got) == sorted(literal)
