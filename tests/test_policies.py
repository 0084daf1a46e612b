"""Input clipping and output timestamping policies, their errors, and the
defaults per window kind and UDM flavor."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from udm.host import (
    INFINITY,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    InputClipping,
    IntervalEvent,
    OutputPolicy,
    SnapshotWindow,
    TumblingWindow,
    WindowDescriptor,
    WindowSpec,
    default_output_policy,
)
from udm.host.policies import resolve_output_policy, stamp
from udm.sdk import (
    Aggregate,
    IncrementalAggregate,
    IncrementalOperator,
    Operator,
    TimeSensitiveAggregate,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveIncrementalOperator,
    TimeSensitiveOperator,
    Udm,
)

E = IntervalEvent
W = WindowDescriptor(5, 10)


# -- one UDM of each of the eight flavors --------------------------------------


class Agg(Aggregate):
    def compute_result(self, payloads: Sequence[Any]) -> Any:
        return len(payloads)


class TsAgg(TimeSensitiveAggregate):
    def compute_result(self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor) -> Any:
        return len(events)


class IncAgg(IncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: Any) -> int:
        return state + 1

    def result(self, state: int) -> int:
        return state


class TsIncAgg(TimeSensitiveIncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[Any], window: WindowDescriptor) -> int:
        return state + 1

    def result(self, state: int, window: WindowDescriptor) -> int:
        return state


class Op(Operator):
    def compute_result(self, payloads: Sequence[Any]) -> Iterable[Any]:
        return list(payloads)


class TsOp(TimeSensitiveOperator):
    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> Iterable[IntervalEvent[Any]]:
        return list(events)


class IncOp(IncrementalOperator):
    def initial_state(self) -> list[Any]:
        return []

    def add(self, state: list[Any], payload: Any) -> list[Any]:
        return [*state, payload]

    def result(self, state: list[Any]) -> Iterable[Any]:
        return state


class TsIncOp(TimeSensitiveIncrementalOperator):
    def initial_state(self) -> list[Any]:
        return []

    def add(self, state: list[Any], event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        return [*state, event]

    def result(self, state: list[Any], window: WindowDescriptor) -> Iterable[IntervalEvent[Any]]:
        return state


NOT_TIMESTAMPING: list[type[Udm]] = [Agg, TsAgg, IncAgg, TsIncAgg, Op, IncOp]
TIMESTAMPING: list[type[Udm]] = [TsOp, TsIncOp]
GRID_AND_SNAPSHOT: list[WindowSpec] = [HoppingWindow(10, 5), TumblingWindow(5), SnapshotWindow()]
COUNT: list[WindowSpec] = [CountByStartWindow(2), CountByEndWindow(2)]


class TestInputClipping:
    @pytest.mark.parametrize(
        ("event", "none", "left", "right", "full"),
        [
            # straddles the left boundary
            ((2, 7), (2, 7), (5, 7), (2, 7), (5, 7)),
            # straddles the right boundary
            ((7, 12), (7, 12), (7, 12), (7, 10), (7, 10)),
            # straddles both
            ((2, 12), (2, 12), (5, 12), (2, 10), (5, 10)),
            # inside
            ((6, 8), (6, 8), (6, 8), (6, 8), (6, 8)),
            # exactly the window
            ((5, 10), (5, 10), (5, 10), (5, 10), (5, 10)),
            # never ends
            ((7, INFINITY), (7, INFINITY), (7, INFINITY), (7, 10), (7, 10)),
        ],
    )
    def test_each_policy(
        self,
        event: tuple[int, int],
        none: tuple[int, int],
        left: tuple[int, int],
        right: tuple[int, int],
        full: tuple[int, int],
    ) -> None:
        e = E(event[0], event[1], "p")
        for policy, expected in [("none", none), ("left", left), ("right", right), ("full", full)]:
            clipped = InputClipping(policy).clip(e, W)
            assert (clipped.start, clipped.end, clipped.payload) == (*expected, "p"), policy

    def test_unchanged_event_is_returned_as_is(self) -> None:
        e = E(6, 8, {"k": 1})
        assert InputClipping.FULL.clip(e, W) is e

    def test_flags(self) -> None:
        assert [(c.clips_left, c.clips_right) for c in InputClipping] == [
            (False, False),
            (True, False),
            (False, True),
            (True, True),
        ]

    def test_parse(self) -> None:
        assert InputClipping.parse("full") is InputClipping.FULL
        assert InputClipping.parse(InputClipping.LEFT) is InputClipping.LEFT
        with pytest.raises(ValueError) as err:
            InputClipping.parse("both")
        assert "unknown input clipping 'both'" in str(err.value)
        assert "use one of: none, left, right, full" in str(err.value)


class TestStamp:
    def test_align_uses_window_lifetime(self) -> None:
        assert stamp(OutputPolicy.ALIGN, W, None, 3) == E(5, 10, 3)
        # align overrides a time-sensitive operator's own timestamps
        assert stamp(OutputPolicy.ALIGN, W, E(6, 7, "x"), "x") == E(5, 10, "x")

    def test_point_end(self) -> None:
        assert stamp(OutputPolicy.POINT_END, W, None, 3) == E(9, 10, 3)
        assert stamp(OutputPolicy.POINT_END, W, E(6, 7, "x"), "x") == E(9, 10, "x")

    def test_point_end_of_a_window_that_never_ends(self) -> None:
        """A window over an event still open at the end of the stream ends
        with time: its point is the last tick (it was an error blamed on
        the UDM, which made count-by-end's default policy fail)."""
        got = stamp(OutputPolicy.POINT_END, WindowDescriptor(5, INFINITY), None, 3)
        assert got == E(INFINITY - 1, INFINITY, 3)

    @pytest.mark.parametrize(
        ("output", "expected"),
        [
            ((6, 8), (6, 8)),
            ((2, 8), (5, 8)),
            ((8, 20), (8, 10)),
            ((0, 30), (5, 10)),
            ((9, INFINITY), (9, 10)),
        ],
    )
    def test_clip(self, output: tuple[int, int], expected: tuple[int, int]) -> None:
        assert stamp(OutputPolicy.CLIP, W, E(*output, "x"), "x") == E(*expected, "x")

    @pytest.mark.parametrize("output", [(10, 12), (0, 5), (20, 21)])
    def test_clip_output_outside_window(self, output: tuple[int, int]) -> None:
        with pytest.raises(ValueError) as err:
            stamp(OutputPolicy.CLIP, W, E(*output, "x"), "x")
        assert f"output event [{output[0]}, {output[1]}) lies outside the window" in str(err.value)
        assert "clipping leaves nothing" in str(err.value)

    @pytest.mark.parametrize("policy", [OutputPolicy.KEEP, OutputPolicy.TIME_BOUND])
    def test_keep_and_time_bound_keep_lifetimes(self, policy: OutputPolicy) -> None:
        assert stamp(policy, W, E(6, 8, "x"), "x") == E(6, 8, "x")
        # ending after the window, or starting after it, is allowed
        assert stamp(policy, W, E(5, 40, "x"), "x") == E(5, 40, "x")
        assert stamp(policy, W, E(12, 13, "x"), "x") == E(12, 13, "x")

    @pytest.mark.parametrize("policy", [OutputPolicy.KEEP, OutputPolicy.TIME_BOUND])
    def test_keep_rejects_output_in_the_past(self, policy: OutputPolicy) -> None:
        with pytest.raises(ValueError) as err:
            stamp(policy, W, E(4, 8, "x"), "x")
        msg = str(err.value)
        assert "output event [4, 8) starts before its window" in msg
        assert f"policy {policy.value!r} forbids output in the past (use 'clip')" in msg

    def test_payload_comes_from_argument(self) -> None:
        assert stamp(OutputPolicy.CLIP, W, E(6, 8, "old"), "new") == E(6, 8, "new")

    def test_results_without_timestamps_align(self) -> None:
        for policy in (OutputPolicy.CLIP, OutputPolicy.KEEP, OutputPolicy.TIME_BOUND):
            assert stamp(policy, W, None, 1) == E(5, 10, 1)

    def test_parse(self) -> None:
        assert OutputPolicy.parse("time_bound") is OutputPolicy.TIME_BOUND
        with pytest.raises(ValueError) as err:
            OutputPolicy.parse("shift")
        assert "unknown output policy 'shift'" in str(err.value)
        assert "align, point_end, clip, keep, time_bound" in str(err.value)

    def test_uses_udm_timestamps(self) -> None:
        assert [p.value for p in OutputPolicy if p.uses_udm_timestamps] == [
            "clip",
            "keep",
            "time_bound",
        ]


class TestDefaults:
    @pytest.mark.parametrize("udm", NOT_TIMESTAMPING)
    @pytest.mark.parametrize("window", GRID_AND_SNAPSHOT)
    def test_align_on_grid_and_snapshot(self, udm: type[Udm], window: WindowSpec) -> None:
        assert default_output_policy(window, udm) is OutputPolicy.ALIGN
        assert resolve_output_policy(None, window, udm()) is OutputPolicy.ALIGN

    @pytest.mark.parametrize("udm", NOT_TIMESTAMPING)
    @pytest.mark.parametrize("window", COUNT)
    def test_point_end_on_count_windows(self, udm: type[Udm], window: WindowSpec) -> None:
        assert default_output_policy(window, udm) is OutputPolicy.POINT_END

    @pytest.mark.parametrize("udm", TIMESTAMPING)
    @pytest.mark.parametrize("window", GRID_AND_SNAPSHOT + COUNT)
    def test_clip_for_time_sensitive_operators(self, udm: type[Udm], window: WindowSpec) -> None:
        assert default_output_policy(window, udm) is OutputPolicy.CLIP
        assert default_output_policy(window, udm()) is OutputPolicy.CLIP


class TestResolve:
    @pytest.mark.parametrize("udm", NOT_TIMESTAMPING)
    @pytest.mark.parametrize("policy", ["clip", "keep", "time_bound"])
    def test_udm_timestamps_need_a_timestamping_udm(self, udm: type[Udm], policy: str) -> None:
        with pytest.raises(ValueError) as err:
            resolve_output_policy(policy, TumblingWindow(5), udm())
        msg = str(err.value)
        assert f"output policy {policy!r} keeps timestamps chosen by the UDM" in msg
        assert f"{udm.name!r} is a {udm.flavor()}" in msg
        assert "use 'align' or 'point_end'" in msg

    @pytest.mark.parametrize("udm", NOT_TIMESTAMPING + TIMESTAMPING)
    @pytest.mark.parametrize("policy", ["align", "point_end"])
    def test_align_and_point_end_for_everyone(self, udm: type[Udm], policy: str) -> None:
        assert resolve_output_policy(policy, SnapshotWindow(), udm()) is OutputPolicy(policy)

    @pytest.mark.parametrize("udm", TIMESTAMPING)
    @pytest.mark.parametrize("policy", ["clip", "keep", "time_bound"])
    def test_timestamping_policies_for_time_sensitive_operators(
        self, udm: type[Udm], policy: str
    ) -> None:
        assert resolve_output_policy(policy, CountByEndWindow(1), udm()) is OutputPolicy(policy)

    def test_unknown_policy(self) -> None:
        with pytest.raises(ValueError, match="unknown output policy 'late'"):
            resolve_output_policy("late", SnapshotWindow(), Agg())
