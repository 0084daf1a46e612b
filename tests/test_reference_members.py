"""The reference evaluator's window membership, found by bisection, must be
exactly the literal belongs-to rule over every event (issue 31)."""

from __future__ import annotations

from itertools import pairwise
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
)
from udm.host.reference import assign_members

WINDOWS = [
    TumblingWindow(4),
    HoppingWindow(6, 2),
    HoppingWindow(2, 5, offset=1),
    SnapshotWindow(),
    CountByStartWindow(1),
    CountByStartWindow(3),
    CountByEndWindow(2),
]

events_strategy = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(0, 5)).map(
        lambda t: IntervalEvent(t[0], t[0] + t[1], t[2])
    ),
    max_size=30,
)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=60, deadline=None)
@given(events=events_strategy, watermark=st.sampled_from([10, 25, 60]))
def test_members_by_bisection_are_the_belongs_to_rule(
    window: Any, events: list[IntervalEvent[int]], watermark: int
) -> None:
    windows = window.windows(events, watermark)
    found = assign_members(window, windows, events)
    assert found == [[e for e in events if window.belongs(e, w)] for w in windows]


@settings(max_examples=60, deadline=None)
@given(events=events_strategy)
def test_snapshot_windows_are_the_nonempty_gaps_between_endpoints(
    events: list[IntervalEvent[int]],
) -> None:
    points = sorted({t for e in events for t in (e.start, e.end)})
    literal = [
        (a, b) for a, b in pairwise(points) if any(e.start < b and a < e.end for e in events)
    ]
    assert [(w.start, w.end) for w in SnapshotWindow().windows(events)] == literal


@pytest.mark.parametrize("window", WINDOWS[:3], ids=repr)
@settings(max_examples=60, deadline=None)
@given(events=events_strategy, step=st.sampled_from([1, 2, 3]), skip=st.integers(0, 2))
def test_grid_members_over_any_list_of_windows_are_the_belongs_to_rule(
    window: Any, events: list[IntervalEvent[int]], step: int, skip: int
) -> None:
    """Grid windows found by index range (consecutive windows) or by
    bisection (a list with gaps, or starting elsewhere) alike."""
    windows = [window.window_at(k) for k in range(-3, 15)][skip::step]
    found = assign_members(window, windows, events)
    assert found == [[e for e in events if window.belongs(e, w)] for w in windows]
