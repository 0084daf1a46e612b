"""Window specifications: hand-computed window lists and memberships for
every kind, watermark cut-off and events that never end."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from udm.host import (
    INFINITY,
    MIN_TIME,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    WindowDescriptor,
    WindowSpec,
    window_from_dict,
)
from udm.host.windows import describe_window, of_key

E = IntervalEvent
W = WindowDescriptor


def layout(spec: WindowSpec, events: list[IntervalEvent[Any]], watermark: int = INFINITY) -> dict:
    """{(start, end): sorted payloads of the members} for every window."""
    return {
        (w.start, w.end): sorted(e.payload for e in spec.members(w, events))
        for w in spec.windows(events, watermark)
    }


class TestWindowDescriptor:
    def test_overlap_is_half_open(self) -> None:
        w = W(5, 10)
        assert w.overlaps(9, 12)
        assert w.overlaps(0, 6)
        assert w.overlaps(6, 7)
        assert not w.overlaps(10, 12)
        assert not w.overlaps(0, 5)

    def test_duration_repr_order(self) -> None:
        assert W(5, 10).duration == 5
        assert W(5, INFINITY).duration == INFINITY
        assert E(5, INFINITY, None).duration == INFINITY
        assert E(5, 7, None).duration == 2
        assert repr(W(5, INFINITY)) == "WindowDescriptor[5, inf)"
        assert sorted([W(5, 10), W(0, 20), W(0, 10)]) == [W(0, 10), W(0, 20), W(5, 10)]
        assert describe_window(W(-1, INFINITY)) == "[-1, inf)"
        assert describe_window(W(MIN_TIME, 5)) == "[-inf, 5)"  # as format_time reads back
        assert (of_key([]), of_key(["a"]), of_key(["a", 1])) == (
            "",
            " of key 'a'",
            " of key ('a', 1)",
        )

    def test_with_lifetime(self) -> None:
        assert E(1, 9, "p").with_lifetime(2, 3) == E(2, 3, "p")


class TestHopping:
    def test_overlapping_windows(self) -> None:
        assert HoppingWindow(10, 5).windows([E(3, 12, "a")]) == [
            W(-5, 5),
            W(0, 10),
            W(5, 15),
            W(10, 20),
        ]

    def test_membership_with_several_events(self) -> None:
        events = [E(0, 3, "a"), E(3, 4, "b"), E(7, 8, "c")]
        assert layout(HoppingWindow(4, 2), events) == {
            (-2, 2): ["a"],
            (0, 4): ["a", "b"],
            (2, 6): ["a", "b"],
            (4, 8): ["c"],
            (6, 10): ["c"],
        }

    def test_gaps_when_hop_exceeds_size(self) -> None:
        spec = HoppingWindow(3, 5)
        assert spec.windows([E(0, 20, "a")]) == [W(0, 3), W(5, 8), W(10, 13), W(15, 18)]
        # an event inside a gap belongs to no window
        assert spec.windows([E(3, 5, "a")]) == []
        assert layout(spec, [E(3, 5, "gap"), E(4, 6, "b")]) == {(5, 8): ["b"]}

    def test_offset(self) -> None:
        spec = HoppingWindow(10, 5, offset=2)
        assert spec.windows([E(3, 12, "a")]) == [W(-3, 7), W(2, 12), W(7, 17)]

    def test_offset_is_reduced_modulo_hop(self) -> None:
        assert HoppingWindow(10, 5, offset=7) == HoppingWindow(10, 5, offset=2)
        assert HoppingWindow(10, 5, offset=-3).offset == 2
        assert HoppingWindow(10, 5, offset=5).offset == 0

    def test_negative_times(self) -> None:
        assert HoppingWindow(10, 5).windows([E(-7, -2, "a")]) == [
            W(-15, -5),
            W(-10, 0),
            W(-5, 5),
        ]

    def test_boundary_touching_is_not_overlap(self) -> None:
        # [0, 5) ends where [5, 15) starts: lifetimes are half-open, no overlap
        assert HoppingWindow(10, 5).windows([E(0, 5, "a")]) == [W(-5, 5), W(0, 10)]

    def test_index_range_and_last_index(self) -> None:
        spec = HoppingWindow(10, 5, offset=2)
        lo, hi = spec.index_range(3, 12)
        assert [spec.window_at(k) for k in range(lo, hi + 1)] == [W(-3, 7), W(2, 12), W(7, 17)]
        assert spec.last_index_before(17) == 1
        assert spec.window_at(1) == W(7, 17)
        assert spec.last_index_before(16) == 0

    def test_timedelta_parameters(self) -> None:
        spec = HoppingWindow(dt.timedelta(seconds=1), dt.timedelta(milliseconds=500))
        assert (spec.size, spec.hop, spec.offset) == (1_000_000, 500_000, 0)
        assert repr(spec) == "HoppingWindow(size=1000000, hop=500000)"
        assert repr(HoppingWindow(10, 5, 2)) == "HoppingWindow(size=10, hop=5, offset=2)"

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ((0, 5), "window size must be a positive duration, got 0"),
            ((5, -1), "window hop must be a positive duration, got -1"),
            ((dt.timedelta(0), 5), "window size must be a positive duration"),
        ],
    )
    def test_invalid_parameters(self, args: tuple[Any, ...], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            HoppingWindow(*args)

    def test_no_events_no_windows(self) -> None:
        assert HoppingWindow(10, 5).windows([]) == []


class TestTumbling:
    def test_windows_and_gaps_between_events(self) -> None:
        events = [E(-3, 7, "a"), E(20, 21, "b")]
        assert layout(TumblingWindow(5), events) == {
            (-5, 0): ["a"],
            (0, 5): ["a"],
            (5, 10): ["a"],
            (20, 25): ["b"],
        }

    def test_offset(self) -> None:
        assert TumblingWindow(5, offset=2).windows([E(0, 3, "a")]) == [W(-3, 2), W(2, 7)]
        assert repr(TumblingWindow(5, offset=2)) == "TumblingWindow(size=5, offset=2)"
        assert repr(TumblingWindow(5)) == "TumblingWindow(size=5)"

    def test_is_hopping_with_hop_equal_size(self) -> None:
        spec = TumblingWindow(5)
        assert (spec.size, spec.hop, spec.kind, spec.is_grid) == (5, 5, "tumbling", True)
        assert isinstance(spec, HoppingWindow)


class TestSnapshot:
    # the paper's Figure 5 shape: e1 alone, then e1 with e2, then e2 ...
    FIG5 = (E(1, 6, "e1"), E(3, 9, "e2"), E(7, 12, "e3"))

    def test_paper_figure_5(self) -> None:
        assert layout(SnapshotWindow(), list(self.FIG5)) == {
            (1, 3): ["e1"],
            (3, 6): ["e1", "e2"],
            (6, 7): ["e2"],
            (7, 9): ["e2", "e3"],
            (9, 12): ["e3"],
        }

    def test_no_window_where_no_event_lives(self) -> None:
        events = [*self.FIG5, E(14, 15, "e4")]
        assert list(layout(SnapshotWindow(), events)) == [
            (1, 3),
            (3, 6),
            (6, 7),
            (7, 9),
            (9, 12),
            (14, 15),
        ]

    def test_shared_endpoints(self) -> None:
        events = [E(1, 4, "a"), E(1, 4, "b"), E(4, 6, "c")]
        assert layout(SnapshotWindow(), events) == {(1, 4): ["a", "b"], (4, 6): ["c"]}

    def test_watermark(self) -> None:
        assert list(layout(SnapshotWindow(), list(self.FIG5), watermark=9)) == [
            (1, 3),
            (3, 6),
            (6, 7),
            (7, 9),
        ]
        assert list(layout(SnapshotWindow(), list(self.FIG5), watermark=8)) == [
            (1, 3),
            (3, 6),
            (6, 7),
        ]


class TestCountByStart:
    # starts 1, 1, 3, 6, 8: two events share start 1
    EVENTS = (E(1, 5, "a"), E(1, 3, "a2"), E(3, 8, "b"), E(6, 12, "c"), E(8, 9, "d"))

    def test_paper_figure_6_n2(self) -> None:
        assert layout(CountByStartWindow(2), list(self.EVENTS)) == {
            (1, 4): ["a", "a2", "b"],  # N=2 start times, three events
            (3, 7): ["b", "c"],  # a overlaps [3, 7) but starts before it
            (6, 9): ["c", "d"],
        }

    def test_n1_one_window_per_distinct_start(self) -> None:
        assert layout(CountByStartWindow(1), list(self.EVENTS)) == {
            (1, 2): ["a", "a2"],
            (3, 4): ["b"],
            (6, 7): ["c"],
            (8, 9): ["d"],
        }

    def test_fewer_starts_than_n_no_window(self) -> None:
        assert CountByStartWindow(6).windows(list(self.EVENTS)) == []
        assert CountByStartWindow(4).windows(list(self.EVENTS)) == [W(1, 9)]

    def test_watermark(self) -> None:
        assert CountByStartWindow(2).windows(list(self.EVENTS), watermark=7) == [
            W(1, 4),
            W(3, 7),
        ]

    def test_infinite_events_are_fine(self) -> None:
        events = [E(0, INFINITY, "x"), E(3, 5, "y")]
        assert layout(CountByStartWindow(2), events) == {(0, 4): ["x", "y"]}


class TestCountByEnd:
    EVENTS = TestCountByStart.EVENTS  # ends 5, 3, 8, 12, 9

    def test_n2(self) -> None:
        assert layout(CountByEndWindow(2), list(self.EVENTS)) == {
            (2, 5): ["a", "a2"],
            (4, 8): ["a", "b"],
            (7, 9): ["b", "d"],
            (8, 12): ["c", "d"],
        }

    def test_shared_end_times(self) -> None:
        events = [E(0, 4, "p"), E(2, 4, "q"), E(1, 6, "r")]
        assert layout(CountByEndWindow(1), events) == {(3, 4): ["p", "q"], (5, 6): ["r"]}

    def test_watermark(self) -> None:
        assert CountByEndWindow(2).windows(list(self.EVENTS), watermark=9) == [
            W(2, 5),
            W(4, 8),
            W(7, 9),
        ]


class TestInfiniteEvents:
    def test_grid_windows_need_a_finite_watermark(self) -> None:
        with pytest.raises(ValueError) as err:
            TumblingWindow(5).windows([E(0, INFINITY, "x")])
        assert "tumbling windows over an event that never ends are infinitely many" in str(
            err.value
        )
        assert "give a finite watermark (watermark= of evaluate(), or of a Stream's" in str(
            err.value
        )

    def test_grid_windows_up_to_the_watermark(self) -> None:
        spec = TumblingWindow(5)
        assert spec.windows([E(3, INFINITY, "x")], watermark=12) == [W(0, 5), W(5, 10)]
        assert HoppingWindow(10, 5).windows([E(3, INFINITY, "x")], watermark=15) == [
            W(-5, 5),
            W(0, 10),
            W(5, 15),
        ]

    def test_snapshot_last_window_never_ends(self) -> None:
        events = [E(0, INFINITY, "x"), E(3, 5, "y")]
        assert layout(SnapshotWindow(), events) == {
            (0, 3): ["x"],
            (3, 5): ["x", "y"],
            (5, INFINITY): ["x"],
        }
        assert SnapshotWindow().windows(events, watermark=100) == [W(0, 3), W(3, 5)]


class TestEndsOfTheTickRange:
    """Grid windows exist at every hop, so an event at either end of the
    int64 tick range would need windows whose lifetimes ticks cannot hold;
    every engine refuses it (the reference here, the host and Spark in
    their own tests). The bounds below are computed by hand."""

    LOW = -(2**63) + 1  # MIN_TIME
    OUTSIDE = "some of them would begin at or before MIN_TIME or end at or after INFINITY"

    def test_time_bounds_of_a_tumbling_window(self) -> None:
        # the first window inside the range starts at the first multiple of
        # 100 at or after MIN_TIME, ...800; the last one ends at ...800
        assert TumblingWindow(100).time_bounds == (-9223372036854775800, 9223372036854775800)

    def test_time_bounds_of_a_hopping_window_with_an_offset(self) -> None:
        # starts are 30k + 7: the first at or after MIN_TIME is
        # -9223372036854775793 (30 * -307445734561825860 + 7); the window
        # before it, [-...823, -...723), must not hold the event
        w = HoppingWindow(100, 30, offset=7)
        assert w.index_bounds[0] == -307445734561825860
        assert w.time_bounds[0] == -9223372036854775723
        # the last window ending by INFINITY has index (INFINITY - 107) // 30
        k1 = (INFINITY - 107) // 30
        assert w.index_bounds[1] == k1 == 307445734561825856
        assert w.time_bounds[1] == (k1 + 1) * 30 + 7 == 9223372036854775717

    def test_hop_beyond_the_size_leaves_no_end_bound(self) -> None:
        # a gap after the last window: every event before INFINITY fits
        assert HoppingWindow(10, 2**62).time_bounds[1] == INFINITY

    @pytest.mark.parametrize(
        "spec",
        [TumblingWindow(7), HoppingWindow(10, 3), HoppingWindow(100, 30, offset=7)],
        ids=repr,
    )
    def test_no_window_touches_the_ends_of_time(self, spec: Any) -> None:
        """MIN_TIME and INFINITY are multiples of 7: the grid reached both,
        so an event from the beginning of time had one tumbling window, and
        a window ending at INFINITY read as an open event (black-box
        acceptance). Windows now lie strictly inside the tick range."""
        first, last = spec.index_bounds
        assert spec.start_of(first) > self.LOW >= spec.start_of(first - 1)
        assert spec.start_of(last) + spec.size < INFINITY <= spec.start_of(last + 1) + spec.size
        low, high = spec.time_bounds
        assert low > self.LOW and high < INFINITY
        with pytest.raises(ValueError, match="beginning of time"):
            spec.windows([E(self.LOW, self.LOW + 5, "x")])
        with pytest.raises(ValueError, match="end at or after INFINITY"):
            spec.windows([E(high, high + 1, "x")])
        assert all(w.end < INFINITY for w in spec.windows([E(high - 1, high, "x")]))

    def test_events_just_inside_are_windowed(self) -> None:
        spec = TumblingWindow(100)
        low, high = spec.time_bounds
        assert spec.windows([E(low, low + 1, "a"), E(high - 1, high, "b")]) == [
            W(low, low + 100),
            W(high - 100, high),
        ]

    @pytest.mark.parametrize(
        ("start", "end", "what"),
        [
            (LOW, 5, "it starts at the beginning of time (MIN_TIME), so infinitely many hold it"),
            (-9223372036854775801, -9223372036854775800, OUTSIDE),
            (9223372036854775800, 9223372036854775801, OUTSIDE),
        ],
    )
    def test_events_outside_are_refused(self, start: int, end: int, what: str) -> None:
        with pytest.raises(ValueError) as err:
            TumblingWindow(100).windows([E(0, 1, "ok"), E(start, end, "x")])
        shown = "-inf" if start == self.LOW else start
        assert str(err.value).startswith(
            f"event [{shown}, {end}) cannot be windowed by TumblingWindow(size=100): {what}. "
        )
        assert (
            "Grid windows take events starting at or after -9223372036854775800 and ending by "
            "9223372036854775800 (or open, at INFINITY); use snapshot or count windows"
        ) in str(err.value)

    def test_snapshot_windows_take_events_from_the_beginning_of_time(self) -> None:
        assert layout(SnapshotWindow(), [E(self.LOW, 5, "x"), E(3, INFINITY - 1, "y")]) == {
            (self.LOW, 3): ["x"],
            (3, 5): ["x", "y"],
            (5, INFINITY - 1): ["y"],
        }


class TestFromDict:
    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ({"kind": "hopping", "size": 10, "hop": 5, "offset": 2}, HoppingWindow(10, 5, 2)),
            ({"kind": "tumbling", "size": 7}, TumblingWindow(7)),
            ({"kind": "snapshot"}, SnapshotWindow()),
            ({"kind": "count_by_start", "count": 2}, CountByStartWindow(2)),
            ({"kind": "count_by_end", "count": 3}, CountByEndWindow(3)),
        ],
    )
    def test_every_kind(self, spec: dict, expected: WindowSpec) -> None:
        built = window_from_dict(spec)
        assert built == expected
        assert type(built) is type(expected)
        assert built.kind == spec["kind"]

    def test_input_not_mutated(self) -> None:
        spec = {"kind": "tumbling", "size": 7}
        window_from_dict(spec)
        assert spec == {"kind": "tumbling", "size": 7}

    def test_unknown_kind(self) -> None:
        with pytest.raises(ValueError) as err:
            window_from_dict({"kind": "sliding", "size": 3})
        assert "unknown window kind 'sliding'" in str(err.value)
        assert "hopping, tumbling, snapshot, count_by_start, count_by_end" in str(err.value)

    def test_missing_kind(self) -> None:
        with pytest.raises(ValueError, match="unknown window kind None"):
            window_from_dict({"size": 3})

    def test_bad_parameters(self) -> None:
        with pytest.raises(ValueError, match=r"^a hopping window needs 'hop' \(size, hop, off"):
            window_from_dict({"kind": "hopping", "size": 3})
        with pytest.raises(ValueError, match=r"^a tumbling window takes size, offset, not hop$"):
            window_from_dict({"kind": "tumbling", "size": 3, "hop": 1})
        with pytest.raises(ValueError, match=r"^a snapshot window takes no parameters, not size$"):
            window_from_dict({"kind": "snapshot", "size": 3})

    def test_numpy_integers_are_sizes_and_counts(self) -> None:
        """They were refused ("must be an integer") while to_ticks took them."""
        import numpy as np

        assert CountByStartWindow(np.int64(2)) == CountByStartWindow(2)
        assert CountByEndWindow(np.int32(3)).count == 3
        assert type(CountByEndWindow(np.int32(3)).count) is int
        assert HoppingWindow(np.int64(10), np.int64(5)) == HoppingWindow(10, 5)

    def test_sizes_beyond_the_tick_range_are_refused_when_created(self) -> None:
        with pytest.raises(ValueError, match="beyond the int64 tick range"):
            TumblingWindow(2**63)
        with pytest.raises(ValueError, match="beyond the int64 tick range"):
            HoppingWindow(10, 2**64)

    @pytest.mark.parametrize("count", [0, -1, True, 2.0])
    def test_bad_counts(self, count: Any) -> None:
        with pytest.raises(ValueError) as err:
            CountByStartWindow(count)
        assert f"count window size must be an integer >= 1, got {count!r}" in str(err.value)
        with pytest.raises(ValueError):
            window_from_dict({"kind": "count_by_end", "count": count})
