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
    WindowDescriptor,
    evaluate,
    evaluate_by_key,
)
from udm.host.refmembers import (
    EventColumns,
    grid_slices,
    grid_windows,
    overlap_rule,
    window_payloads,
)
from udm.host.time import INFINITY
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


def _columns(events: list[IntervalEvent[Any]]) -> EventColumns:
    columns = EventColumns.of(events, None)
    assert columns is not None
    return columns.canonical()


def _literal(
    window: Any, events: list[IntervalEvent[Any]], watermark: int, emit_empty: bool
) -> list[tuple[WindowDescriptor, list[Any]]]:
    """Each window the definitions list, with its members' payloads by the
    belongs-to rule, in canonical order (start, then payload)."""
    if emit_empty:
        windows = grid_windows(window, events, watermark)
    else:
        windows = window.windows(events, watermark)
    out = []
    for w in windows:
        members = sorted(
            (e for e in events if window.belongs(e, w)),
            key=lambda e: (e.start, payload_key(e.payload)),
        )
        if members or emit_empty:
            out.append((w, [e.payload for e in members]))
    return out


@pytest.mark.parametrize("window", [w for w in WINDOWS if overlap_rule(w)], ids=repr)
@settings(max_examples=80, deadline=None)
@given(
    events=events_strategy,
    watermark=st.sampled_from([10, 25, 60, INFINITY]),
    emit_empty=st.booleans(),
)
def test_window_payloads_are_the_belongs_to_rule(
    window: Any, events: list[IntervalEvent[int]], watermark: int, emit_empty: bool
) -> None:
    """Every window ``windows`` defines (``grid_windows`` with ``emit_empty``),
    in order, with its members' payloads in canonical order: the grid walk,
    the slices of listed windows, and long events' members alike."""
    emit_empty = emit_empty and window.grid is not None
    found = list(window_payloads(window, _columns(events), watermark, emit_empty))
    assert found == _literal(window, events, watermark, emit_empty)


GRIDS = [w for w in WINDOWS if w.grid is not None] + [
    HoppingWindow(3, 7, offset=2),  # gaps between windows: an event may be in none
    HoppingWindow(10, 1),
]


@pytest.mark.parametrize("window", GRIDS, ids=repr)
@settings(max_examples=80, deadline=None)
@given(
    starts=st.lists(st.integers(-30, 60), max_size=25),
    lengths=st.lists(st.sampled_from([1, 1, 2, 3]), min_size=25, max_size=25),
    watermark=st.sampled_from([-5, 12, 40, INFINITY]),
    emit_empty=st.booleans(),
)
def test_grid_walk_finds_the_windows_of_the_definition(
    window: Any,
    starts: list[int],
    lengths: list[int],
    watermark: int,
    emit_empty: bool,
) -> None:
    """The walk's windows are ``windows`` (``grid_windows``) of the events,
    and each one's slice holds all its members, the first slot one of them."""
    events = sorted(
        (IntervalEvent(s, s + n, i) for i, (s, n) in enumerate(zip(starts, lengths, strict=False))),
        key=lambda e: e.start,
    )
    last = window.last_index_before(watermark) if watermark < INFINITY else None
    walked = list(
        grid_slices(window, [e.start for e in events], [e.end for e in events], last, emit_empty)
    )
    listed = (
        grid_windows(window, events, watermark) if emit_empty else window.windows(events, watermark)
    )
    assert [WindowDescriptor(a, b) for a, b, _, _ in walked] == listed
    for a, b, lo, hi in walked:
        w = WindowDescriptor(a, b)
        members = [i for i, e in enumerate(events) if window.belongs(e, w)]
        assert set(members) <= set(range(lo, hi))
        assert (members[0] == lo) if members else (lo == hi)


def test_window_payloads_of_points_and_of_longer_events_by_hand() -> None:
    """Hopping 4 / 2: window [0, 4) holds the points at 0 and 3, [2, 6)
    those at 3 and 5, [4, 8) the one at 5; with the event [1, 4) (as long
    as a hop and a half) [0, 4) and [2, 6) hold it too, [4, 8) not (it ends
    at 4). Window [-2, 2) holds the point at 0 (and [1, 4))."""
    window = HoppingWindow(4, 2)
    points = [IntervalEvent(0, 1, "a"), IntervalEvent(3, 4, "b"), IntervalEvent(5, 6, "c")]
    found = list(window_payloads(window, _columns(points), INFINITY, False))
    assert [(w.start, w.end, p) for w, p in found] == [
        (-2, 2, ["a"]),
        (0, 4, ["a", "b"]),
        (2, 6, ["b", "c"]),
        (4, 8, ["c"]),
    ]
    longer = [points[0], IntervalEvent(1, 4, "x"), *points[1:]]
    found = list(window_payloads(window, _columns(longer), INFINITY, False))
    assert [(w.start, w.end, p) for w, p in found] == [
        (-2, 2, ["a", "x"]),
        (0, 4, ["a", "x", "b"]),
        (2, 6, ["x", "b", "c"]),
        (4, 8, ["c"]),
    ]


def test_grid_walk_jumps_over_empty_windows_by_hand() -> None:
    """Tumbling 10 over points at 3, 5 and 1,000,004 and a watermark at 1,000,020:
    two windows with members, and with ``emit_empty`` every window between
    them and up to the watermark (the last ending at 1,000,020)."""
    window = TumblingWindow(10)
    starts, ends = [3, 5, 1_000_004], [4, 6, 1_000_005]
    last = window.last_index_before(1_000_020)
    assert list(grid_slices(window, starts, ends, last, False)) == [
        (0, 10, 0, 2),
        (1_000_000, 1_000_010, 2, 3),
    ]
    walked = list(grid_slices(window, starts, ends, last, True))
    assert len(walked) == 100_002
    assert walked[:2] == [(0, 10, 0, 2), (10, 20, 2, 2)]
    assert walked[-2:] == [(1_000_000, 1_000_010, 2, 3), (1_000_010, 1_000_020, 3, 3)]


def test_hopping_with_gaps_leaves_out_an_event_between_windows() -> None:
    """Hopping 3 / 7 (windows [0, 3), [7, 10), ...): the point at 5 is in no
    window, those at 1 and 8 each in one; with ``emit_empty`` no window
    comes after the last with members (the watermark is infinite)."""
    window = HoppingWindow(3, 7)
    events = [IntervalEvent(t, t + 1, t) for t in (1, 5, 8, 12)]
    found = list(window_payloads(window, _columns(events), INFINITY, True))
    assert [(w.start, w.end, p) for w, p in found] == [(0, 3, [1]), (7, 10, [8])]


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
