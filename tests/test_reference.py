"""The reference evaluator against hand-computed outputs: every window kind
with every input clipping, the output policies, the paper's MyAverage and
MyTimeWeightedAverage, all eight UDM flavors, UDFs, value= mapping,
grouping, emit_empty, watermarks and error reporting."""

from __future__ import annotations

import datetime as dt
import gc
import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from udm.host import (
    INFINITY,
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    WindowDescriptor,
    WindowSpec,
    evaluate,
    evaluate_by_key,
    filter_events,
    project,
)
from udm.sdk import (
    Aggregate,
    IncrementalAggregate,
    IncrementalOperator,
    Operator,
    TimeSensitiveAggregate,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveIncrementalOperator,
    TimeSensitiveOperator,
    aggregate,
    function,
    operator,
)

E = IntervalEvent
Events = Sequence[IntervalEvent[Any]]

# -- UDMs ------------------------------------------------------------------------


class MyAverage(Aggregate):
    """The paper's time-insensitive average (section IV.C)."""

    def compute_result(self, payloads: Sequence[float]) -> float:
        return sum(payloads) / len(payloads)


class MyTimeWeightedAverage(TimeSensitiveAggregate):
    """The paper's time-weighted average: each payload weighted by its
    (clipped) lifetime, divided by the window's duration."""

    def compute_result(self, events: Events, window: WindowDescriptor) -> float:
        avg = 0.0
        for e in events:
            avg += e.payload * (e.end - e.start)
        return avg / (window.end - window.start)


class Lifetimes(TimeSensitiveAggregate):
    """What the UDM sees: the (clipped) lifetimes and payloads, in order."""

    def compute_result(self, events: Events, window: WindowDescriptor) -> Any:
        return tuple((e.start, e.end, e.payload) for e in events)


class Collect(Aggregate):
    """Order-sensitive: the payloads in the order the host passes them."""

    def compute_result(self, payloads: Sequence[Any]) -> Any:
        return tuple(payloads)


class Count(Aggregate):
    def compute_result(self, payloads: Sequence[Any]) -> int:
        return len(payloads)


class Echo(TimeSensitiveOperator):
    """Returns its (clipped) input events unchanged."""

    def compute_result(self, events: Events, window: WindowDescriptor) -> Iterable[Any]:
        return list(events)


# one of each flavor, all over the same CHT (see TestEightFlavors)


class Sum(Aggregate):
    def compute_result(self, payloads: Sequence[int]) -> int:
        return sum(payloads)


class Weighted(TimeSensitiveAggregate):
    def compute_result(self, events: Events, window: WindowDescriptor) -> int:
        return sum(e.payload * (e.end - e.start) for e in events)


class IncSum(IncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        return state


class IncWeighted(TimeSensitiveIncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[int], window: WindowDescriptor) -> int:
        return state + event.payload * (event.end - event.start)

    def result(self, state: int, window: WindowDescriptor) -> int:
        return state


class Top2(Operator):
    def compute_result(self, payloads: Sequence[int]) -> Iterable[int]:
        return sorted(payloads, reverse=True)[:2]


class StartsInWindow(TimeSensitiveOperator):
    """A point event at each start that lies inside the window."""

    def compute_result(self, events: Events, window: WindowDescriptor) -> Iterable[Any]:
        return [E(e.start, e.start + 1, e.payload) for e in events if e.start >= window.start]


class Spread(IncrementalOperator):
    """max - min of the payloads, as a one-element output list."""

    def initial_state(self) -> tuple[float, float]:
        return (float("inf"), float("-inf"))

    def add(self, state: tuple[float, float], payload: int) -> tuple[float, float]:
        return (min(state[0], payload), max(state[1], payload))

    def result(self, state: tuple[float, float]) -> Iterable[float]:
        return [state[1] - state[0]]


class Longest(TimeSensitiveIncrementalOperator):
    """The longest event of the window, with its own lifetime."""

    def initial_state(self) -> Any:
        return None

    def add(self, state: Any, event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        if state is None or event.end - event.start > state.end - state.start:
            return event
        return state

    def result(self, state: Any, window: WindowDescriptor) -> Iterable[Any]:
        return [] if state is None else [state]


# -- every window kind x every input clipping -----------------------------------

A = E(2, 9, "a")
B = E(6, 14, "b")
AB = Cht([A, B])

# window -> (members seen under none, left, right, full clipping)
CLIPPING_TABLE: dict[str, tuple[WindowSpec, list[tuple[tuple[int, int], tuple[Any, ...]]]]] = {
    "tumbling": (
        TumblingWindow(5),
        [
            ((0, 5), (((2, 9, "a"),), ((2, 9, "a"),), ((2, 5, "a"),), ((2, 5, "a"),))),
            (
                (5, 10),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((5, 9, "a"), (6, 14, "b")),
                    ((2, 9, "a"), (6, 10, "b")),
                    ((5, 9, "a"), (6, 10, "b")),
                ),
            ),
            ((10, 15), (((6, 14, "b"),), ((10, 14, "b"),), ((6, 14, "b"),), ((10, 14, "b"),))),
        ],
    ),
    "hopping": (
        HoppingWindow(6, 4),
        [
            ((0, 6), (((2, 9, "a"),), ((2, 9, "a"),), ((2, 6, "a"),), ((2, 6, "a"),))),
            (
                (4, 10),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((4, 9, "a"), (6, 14, "b")),
                    ((2, 9, "a"), (6, 10, "b")),
                    ((4, 9, "a"), (6, 10, "b")),
                ),
            ),
            (
                (8, 14),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((8, 9, "a"), (8, 14, "b")),
                    ((2, 9, "a"), (6, 14, "b")),
                    ((8, 9, "a"), (8, 14, "b")),
                ),
            ),
            ((12, 18), (((6, 14, "b"),), ((12, 14, "b"),), ((6, 14, "b"),), ((12, 14, "b"),))),
        ],
    ),
    "snapshot": (
        SnapshotWindow(),
        [
            ((2, 6), (((2, 9, "a"),), ((2, 9, "a"),), ((2, 6, "a"),), ((2, 6, "a"),))),
            (
                (6, 9),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((6, 9, "a"), (6, 14, "b")),
                    ((2, 9, "a"), (6, 9, "b")),
                    ((6, 9, "a"), (6, 9, "b")),
                ),
            ),
            ((9, 14), (((6, 14, "b"),), ((9, 14, "b"),), ((6, 14, "b"),), ((9, 14, "b"),))),
        ],
    ),
    "count_by_start": (
        CountByStartWindow(2),
        [
            (
                (2, 7),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((2, 9, "a"), (6, 14, "b")),
                    ((2, 7, "a"), (6, 7, "b")),
                    ((2, 7, "a"), (6, 7, "b")),
                ),
            ),
        ],
    ),
    "count_by_end": (
        CountByEndWindow(2),
        [
            (
                (8, 14),
                (
                    ((2, 9, "a"), (6, 14, "b")),
                    ((8, 9, "a"), (8, 14, "b")),
                    ((2, 9, "a"), (6, 14, "b")),
                    ((8, 9, "a"), (8, 14, "b")),
                ),
            ),
        ],
    ),
}
CLIPPINGS = ("none", "left", "right", "full")


class TestWindowKindsTimesClipping:
    @pytest.mark.parametrize("kind", list(CLIPPING_TABLE))
    @pytest.mark.parametrize("clipping", CLIPPINGS)
    def test_what_the_udm_sees(self, kind: str, clipping: str) -> None:
        window, table = CLIPPING_TABLE[kind]
        column = CLIPPINGS.index(clipping)
        count_window = kind.startswith("count")
        expected = []
        for (ws, we), seen in table:
            # default output policy: align, or point_end on count windows
            lifetime = (we - 1, we) if count_window else (ws, we)
            expected.append((*lifetime, seen[column]))
        assert evaluate(AB, window, Lifetimes, input_clipping=clipping) == Cht(expected)

    @pytest.mark.parametrize("kind", list(CLIPPING_TABLE))
    def test_time_insensitive_udm_unaffected_by_clipping(self, kind: str) -> None:
        window, _ = CLIPPING_TABLE[kind]
        outputs = {c: evaluate(AB, window, Collect, input_clipping=c) for c in CLIPPINGS}
        assert outputs["left"] == outputs["none"]
        assert outputs["right"] == outputs["none"]
        assert outputs["full"] == outputs["none"]


# -- output policies through the evaluator --------------------------------------


class TestOutputPolicies:
    def test_tumbling_echo_align(self) -> None:
        out = evaluate(AB, TumblingWindow(5), Echo, output_policy="align")
        assert out == [(0, 5, "a"), (5, 10, "a"), (5, 10, "b"), (10, 15, "b")]

    def test_tumbling_echo_point_end(self) -> None:
        out = evaluate(AB, TumblingWindow(5), Echo, output_policy="point_end")
        assert out == [(4, 5, "a"), (9, 10, "a"), (9, 10, "b"), (14, 15, "b")]

    def test_tumbling_echo_clip_is_the_default(self) -> None:
        expected = [(2, 5, "a"), (5, 9, "a"), (6, 10, "b"), (10, 14, "b")]
        assert evaluate(AB, TumblingWindow(5), Echo, output_policy="clip") == expected
        assert evaluate(AB, TumblingWindow(5), Echo) == expected

    @pytest.mark.parametrize("policy", ["keep", "time_bound"])
    def test_tumbling_echo_keep_after_left_clipping(self, policy: str) -> None:
        out = evaluate(AB, TumblingWindow(5), Echo, input_clipping="left", output_policy=policy)
        # lifetimes kept, even past the window end
        assert out == [(2, 9, "a"), (5, 9, "a"), (6, 14, "b"), (10, 14, "b")]

    @pytest.mark.parametrize("policy", ["keep", "time_bound"])
    def test_tumbling_echo_keep_after_full_clipping_equals_clip(self, policy: str) -> None:
        out = evaluate(AB, TumblingWindow(5), Echo, input_clipping="full", output_policy=policy)
        assert out == evaluate(AB, TumblingWindow(5), Echo, output_policy="clip")

    @pytest.mark.parametrize("policy", ["keep", "time_bound"])
    def test_keep_with_output_before_window_start(self, policy: str) -> None:
        with pytest.raises(UdmInvocationError) as err:
            evaluate(AB, TumblingWindow(5), Echo, output_policy=policy)
        msg = str(err.value)
        # a = [2, 9) is echoed unchanged into window [5, 10)
        assert "UDM 'echo' failed on window [5, 10)" in msg
        assert "output event [2, 9) starts before its window" in msg
        assert "(use 'clip')" in msg
        assert isinstance(err.value.__cause__, ValueError)

    @pytest.mark.parametrize(
        ("kind", "policy", "expected"),
        [
            (
                "hopping",
                "clip",
                [(2, 6, "a"), (4, 9, "a"), (6, 10, "b"), (8, 9, "a"), (8, 14, "b"), (12, 14, "b")],
            ),
            (
                "hopping",
                "align",
                [
                    (0, 6, "a"),
                    (4, 10, "a"),
                    (4, 10, "b"),
                    (8, 14, "a"),
                    (8, 14, "b"),
                    (12, 18, "b"),
                ],
            ),
            (
                "hopping",
                "point_end",
                [
                    (5, 6, "a"),
                    (9, 10, "a"),
                    (9, 10, "b"),
                    (13, 14, "a"),
                    (13, 14, "b"),
                    (17, 18, "b"),
                ],
            ),
            ("snapshot", "clip", [(2, 6, "a"), (6, 9, "a"), (6, 9, "b"), (9, 14, "b")]),
            ("snapshot", "align", [(2, 6, "a"), (6, 9, "a"), (6, 9, "b"), (9, 14, "b")]),
            ("snapshot", "point_end", [(5, 6, "a"), (8, 9, "a"), (8, 9, "b"), (13, 14, "b")]),
            ("count_by_end", "clip", [(8, 9, "a"), (8, 14, "b")]),
            ("count_by_end", "align", [(8, 14, "a"), (8, 14, "b")]),
            ("count_by_end", "point_end", [(13, 14, "a"), (13, 14, "b")]),
        ],
    )
    def test_echo_per_kind_and_policy(
        self, kind: str, policy: str, expected: list[tuple[int, int, str]]
    ) -> None:
        window, _ = CLIPPING_TABLE[kind]
        assert evaluate(AB, window, Echo, output_policy=policy) == expected

    def test_count_by_start_echo(self) -> None:
        window = CountByStartWindow(2)
        assert evaluate(AB, window, Echo) == [(2, 7, "a"), (6, 7, "b")]
        assert evaluate(AB, window, Echo, output_policy="keep") == [(2, 9, "a"), (6, 14, "b")]
        assert evaluate(AB, window, Echo, output_policy="point_end") == [(6, 7, "a"), (6, 7, "b")]
        assert evaluate(AB, window, Echo, output_policy="align") == [(2, 7, "a"), (2, 7, "b")]

    def test_count_by_end_aggregate_align_or_point_end(self) -> None:
        window = CountByEndWindow(2)
        assert evaluate(AB, window, Count) == [(13, 14, 2)]
        assert evaluate(AB, window, Count, output_policy="align") == [(8, 14, 2)]

    def test_snapshot_aggregate_point_end(self) -> None:
        out = evaluate(AB, SnapshotWindow(), Count, output_policy="point_end")
        assert out == [(5, 6, 1), (8, 9, 2), (13, 14, 1)]

    def test_clip_with_output_fully_outside(self) -> None:
        @operator(time_sensitive=True)
        def after_window(events: Events, window: WindowDescriptor) -> list[Any]:
            return [E(window.end, window.end + 5, len(events))]

        with pytest.raises(UdmInvocationError) as err:
            evaluate(AB, TumblingWindow(5), after_window)
        msg = str(err.value)
        assert "UDM 'after_window' failed on window [0, 5)" in msg
        assert "output event [5, 10) lies outside the window, so clipping leaves nothing" in msg
        # keep allows output after the window
        out = evaluate(AB, TumblingWindow(5), after_window, output_policy="keep")
        assert out == [(5, 10, 1), (10, 15, 2), (15, 20, 1)]

    def test_point_end_on_a_window_that_never_ends(self) -> None:
        cht = Cht([E(0, INFINITY, 1), E(3, 5, 2)])
        assert evaluate(cht, SnapshotWindow(), Count) == [
            (0, 3, 1),
            (3, 5, 2),
            (5, INFINITY, 1),
        ]
        # the last window ends with time, so its point is time's last tick
        assert evaluate(cht, SnapshotWindow(), Count, output_policy="point_end") == [
            (2, 3, 1),
            (4, 5, 2),
            (INFINITY - 1, INFINITY, 1),
        ]
        # count-by-end's default policy is point_end: an open edge event's
        # window no longer fails at the end of the stream
        assert evaluate(cht, CountByEndWindow(2), Count) == [(INFINITY - 1, INFINITY, 2)]

    @pytest.mark.parametrize("policy", ["clip", "keep", "time_bound"])
    @pytest.mark.parametrize("udm", [MyAverage, MyTimeWeightedAverage, Top2, Spread])
    def test_udm_timestamps_refused_for_uda_and_time_insensitive_udo(
        self, policy: str, udm: type
    ) -> None:
        with pytest.raises(ValueError) as err:
            evaluate(AB, TumblingWindow(5), udm, output_policy=policy)
        assert f"output policy {policy!r} keeps timestamps chosen by the UDM" in str(err.value)
        assert "use 'align' or 'point_end'" in str(err.value)


# -- the paper's worked example (section IV.C) ----------------------------------

PAPER = Cht([E(0, 10, 2.0), E(5, 15, 4.0)])


class TestPaperExample:
    def test_my_average(self) -> None:
        expected = [(0, 10, 3.0), (10, 20, 4.0)]
        for clipping in CLIPPINGS:
            assert evaluate(PAPER, TumblingWindow(10), MyAverage, input_clipping=clipping) == (
                expected
            )

    @pytest.mark.parametrize(
        ("clipping", "first", "second"),
        [
            # (2*10 + 4*10) / 10, 4*10 / 10: unclipped lifetimes overweight
            ("none", 6.0, 4.0),
            # b starts inside [0, 10); in [10, 20) it counts from 10 to 15
            ("left", 6.0, 2.0),
            # b cut at 10 in [0, 10): (2*10 + 4*5) / 10; ends inside [10, 20)
            ("right", 4.0, 4.0),
            # the true time-weighted average over each window
            ("full", 4.0, 2.0),
        ],
    )
    def test_my_time_weighted_average(self, clipping: str, first: float, second: float) -> None:
        out = evaluate(PAPER, TumblingWindow(10), MyTimeWeightedAverage, input_clipping=clipping)
        assert out == [(0, 10, first), (10, 20, second)]

    def test_time_weighted_average_by_snapshot(self) -> None:
        # snapshots [0, 5) {2.0}, [5, 10) {2.0, 4.0}, [10, 15) {4.0}
        out = evaluate(PAPER, SnapshotWindow(), MyTimeWeightedAverage, input_clipping="full")
        assert out == [(0, 5, 2.0), (5, 10, 6.0), (10, 15, 4.0)]


# -- the eight flavors ----------------------------------------------------------

XYZ = Cht([E(1, 4, 3), E(2, 8, 5), E(6, 7, 1)])


class TestEightFlavors:
    """Tumbling(5) over x=[1,4) 3, y=[2,8) 5, z=[6,7) 1:
    window [0, 5) holds x and y, window [5, 10) holds y and z."""

    def test_aggregate(self) -> None:
        assert evaluate(XYZ, TumblingWindow(5), Sum) == [(0, 5, 8), (5, 10, 6)]

    def test_time_sensitive_aggregate(self) -> None:
        # full clipping: [0,5): 3*3 + 5*3 = 24; [5,10): 5*3 + 1*1 = 16
        out = evaluate(XYZ, TumblingWindow(5), Weighted, input_clipping="full")
        assert out == [(0, 5, 24), (5, 10, 16)]
        # no clipping: [0,5): 3*3 + 5*6 = 39; [5,10): 5*6 + 1*1 = 31
        assert evaluate(XYZ, TumblingWindow(5), Weighted) == [(0, 5, 39), (5, 10, 31)]

    def test_incremental_aggregate(self) -> None:
        assert evaluate(XYZ, TumblingWindow(5), IncSum) == [(0, 5, 8), (5, 10, 6)]

    def test_time_sensitive_incremental_aggregate(self) -> None:
        out = evaluate(XYZ, TumblingWindow(5), IncWeighted, input_clipping="full")
        assert out == [(0, 5, 24), (5, 10, 16)]

    def test_operator(self) -> None:
        assert evaluate(XYZ, TumblingWindow(5), Top2) == [
            (0, 5, 5),
            (0, 5, 3),
            (5, 10, 5),
            (5, 10, 1),
        ]

    def test_time_sensitive_operator(self) -> None:
        # y starts before [5, 10), so only z's start is reported there
        assert evaluate(XYZ, TumblingWindow(5), StartsInWindow) == [
            (1, 2, 3),
            (2, 3, 5),
            (6, 7, 1),
        ]

    def test_incremental_operator(self) -> None:
        assert evaluate(XYZ, TumblingWindow(5), Spread) == [(0, 5, 2), (5, 10, 4)]

    def test_time_sensitive_incremental_operator(self) -> None:
        # y = [2, 8) is the longest in both windows; default clip cuts it
        assert evaluate(XYZ, TumblingWindow(5), Longest) == [(2, 5, 5), (5, 8, 5)]
        # keep: y's own lifetime from [0, 5); left clipping makes [5, 10) legal
        out = evaluate(XYZ, TumblingWindow(5), Longest, input_clipping="left", output_policy="keep")
        assert out == [(2, 8, 5), (5, 8, 5)]
        # with full input clipping the tie in [5,10) goes to the first added
        assert evaluate(XYZ, TumblingWindow(5), Longest, input_clipping="full") == [
            (1, 4, 3),
            (5, 8, 5),
        ]

    def test_count_window_over_flavors(self) -> None:
        # distinct starts 1, 2, 6 -> [1, 3) {x, y}, [2, 7) {y, z}; point_end
        assert evaluate(XYZ, CountByStartWindow(2), Sum) == [(2, 3, 8), (6, 7, 6)]
        assert evaluate(XYZ, CountByStartWindow(2), IncSum) == [(2, 3, 8), (6, 7, 6)]
        assert evaluate(XYZ, CountByStartWindow(2), Spread) == [(2, 3, 2), (6, 7, 4)]


# -- UDFs, value mapping, grouping ----------------------------------------------


@function
def fahrenheit(celsius: float) -> float:
    return celsius * 9 / 5 + 32


@function
def warm(celsius: float) -> bool:
    return celsius >= 20


READINGS = Cht(
    [
        E(0, 4, {"sensor": "s1", "temp": 10.0}),
        E(2, 6, {"sensor": "s2", "temp": 20.0}),
        E(5, 9, {"sensor": "s1", "temp": 30.0}),
    ]
)


class TestUdfsAndMapping:
    def test_project_with_udf(self) -> None:
        temps = project(READINGS, lambda p: p["temp"])
        assert project(temps, fahrenheit) == [(0, 4, 50.0), (2, 6, 68.0), (5, 9, 86.0)]

    def test_filter_with_udf(self) -> None:
        temps = project(READINGS, lambda p: p["temp"])
        assert filter_events(temps, warm) == [(2, 6, 20.0), (5, 9, 30.0)]

    def test_udf_then_uda(self) -> None:
        temps = project(project(READINGS, lambda p: p["temp"]), fahrenheit)
        assert evaluate(filter_events(temps, lambda f: f > 60), TumblingWindow(5), MyAverage) == [
            (0, 5, 68.0),
            (5, 10, 77.0),
        ]

    def test_value_field_name(self) -> None:
        assert evaluate(READINGS, TumblingWindow(5), MyAverage, value="temp") == [
            (0, 5, 15.0),
            (5, 10, 25.0),
        ]

    def test_value_function(self) -> None:
        out = evaluate(READINGS, TumblingWindow(5), MyAverage, value=lambda p: p["temp"] * 2)
        assert out == [(0, 5, 30.0), (5, 10, 50.0)]

    def test_value_for_time_sensitive_udm(self) -> None:
        # [0,5): (10*4 + 20*3) / 5 = 20; [5,10): (20*1 + 30*4) / 5 = 28
        out = evaluate(
            READINGS, TumblingWindow(5), MyTimeWeightedAverage, value="temp", input_clipping="full"
        )
        assert out == [(0, 5, 20.0), (5, 10, 28.0)]

    def test_value_missing_field(self) -> None:
        with pytest.raises(UdmInvocationError) as err:
            evaluate(READINGS, TumblingWindow(5), MyAverage, value="humidity")
        msg = str(err.value)
        assert "UDM 'my_average' failed on window [0, 5)" in msg
        assert "has no field 'humidity'" in msg
        assert "check the value= argument of the query" in msg

    def test_evaluate_by_key_field(self) -> None:
        out = evaluate_by_key(READINGS, "sensor", TumblingWindow(5), MyAverage, value="temp")
        assert out == {
            "s1": Cht([(0, 5, 10.0), (5, 10, 30.0)]),
            "s2": Cht([(0, 5, 20.0), (5, 10, 20.0)]),
        }

    def test_evaluate_by_key_function_and_options(self) -> None:
        out = evaluate_by_key(
            READINGS,
            lambda p: p["temp"] >= 20,
            TumblingWindow(5),
            Count,
            output_policy="point_end",
            watermark=5,
        )
        assert out == {False: Cht([(4, 5, 1)]), True: Cht([(4, 5, 1)])}

    def test_evaluate_by_key_missing_field(self) -> None:
        with pytest.raises(KeyError) as err:
            evaluate_by_key(READINGS, "room", TumblingWindow(5), Count)
        msg = str(err.value)
        assert "payload {'sensor': 's1', 'temp': 10.0} has no field 'room'" in msg
        assert "check the key= argument of the query" in msg

    def test_evaluate_by_key_over_a_one_pass_iterable(self) -> None:
        """A generator is read once, and each group's output is the same as
        :func:`evaluate` over that group alone."""
        out = evaluate_by_key(
            (e for e in READINGS), "sensor", TumblingWindow(5), MyAverage, value="temp"
        )
        for sensor, cht in out.items():
            group = [e for e in READINGS if e.payload["sensor"] == sensor]
            assert cht == evaluate(group, TumblingWindow(5), MyAverage, value="temp")
        assert out["s1"] == Cht([(0, 5, 10.0), (5, 10, 30.0)])

    def test_evaluate_by_key_value_failure_as_evaluate_reports_it(self) -> None:
        """A payload the value function fails on (s2's lacks the field): the
        error is the one :func:`evaluate` raises for that key's group, the
        UDM failing on the first window holding the event."""
        readings = Cht([*READINGS, E(6, 8, {"sensor": "s2"})])
        with pytest.raises(UdmInvocationError) as by_key:
            evaluate_by_key(readings, "sensor", TumblingWindow(5), MyAverage, value="temp")
        s2 = [e for e in readings if e.payload["sensor"] == "s2"]
        with pytest.raises(UdmInvocationError) as alone:
            evaluate(s2, TumblingWindow(5), MyAverage, value="temp")
        assert str(by_key.value) == str(alone.value)
        assert "failed on window [5, 10)" in str(by_key.value)

    @pytest.mark.parametrize("enabled", [True, False])
    def test_the_collector_is_paused_while_evaluating(self, enabled: bool) -> None:
        """The cyclic garbage collector is off while the UDM runs (its full
        collections made the time grow faster than the data) and as it was
        afterwards."""
        seen: list[bool] = []

        @aggregate
        def watching(values: Sequence[float]) -> int:
            seen.append(gc.isenabled())
            return len(values)

        (gc.enable if enabled else gc.disable)()
        try:
            out = evaluate_by_key(READINGS, "sensor", TumblingWindow(5), watching, value="temp")
            assert gc.isenabled() is enabled
            assert evaluate(READINGS, TumblingWindow(5), watching) == [(0, 5, 2), (5, 10, 2)]
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert out == {"s1": Cht([(0, 5, 1), (5, 10, 1)]), "s2": Cht([(0, 5, 1), (5, 10, 1)])}
        assert seen == [False] * 6

    def test_udf_is_not_a_window_udm(self) -> None:
        with pytest.raises(TypeError) as err:
            evaluate(READINGS, TumblingWindow(5), fahrenheit)  # type: ignore[arg-type]
        assert "'fahrenheit' is a UDF (scalar function)" in str(err.value)
        assert "use it in a filter or projection" in str(err.value)


# -- UDM arguments and instances ------------------------------------------------


@aggregate
def quantile(values: Sequence[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


NUMBERS = Cht([E(t, t + 1, float(t)) for t in range(10)])


class TestUdmArguments:
    def test_class_with_args(self) -> None:
        assert evaluate(NUMBERS, TumblingWindow(10), quantile, args={"q": 0.9}) == [(0, 10, 8.0)]
        assert evaluate(NUMBERS, TumblingWindow(10), quantile) == [(0, 10, 4.0)]

    def test_instance(self) -> None:
        assert evaluate(NUMBERS, TumblingWindow(10), quantile(q=1.0)) == [(0, 10, 9.0)]

    def test_args_for_an_instance(self) -> None:
        with pytest.raises(TypeError, match=r"arguments \{'q': 0.1\} given for an already"):
            evaluate(NUMBERS, TumblingWindow(10), quantile(q=1.0), args={"q": 0.1})

    def test_unknown_argument(self) -> None:
        with pytest.raises(TypeError) as err:
            evaluate(NUMBERS, TumblingWindow(10), quantile, args={"p": 0.1})
        assert "cannot create UDM 'quantile' with arguments {'p': 0.1}" in str(err.value)

    def test_missing_argument(self) -> None:
        from udm_patterns import FollowedBy  # its first, then, within have no default

        with pytest.raises(TypeError) as err:
            evaluate(NUMBERS, TumblingWindow(10), FollowedBy)
        assert str(err.value).startswith("cannot create UDM 'followed_by' with no arguments: ")

    def test_not_a_udm(self) -> None:
        class Plain:
            pass

        with pytest.raises(TypeError, match=r"Plain is not a UDM; derive it from a udm\.sdk"):
            evaluate(NUMBERS, TumblingWindow(10), Plain)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"is not a UDM; pass a udm\.sdk"):
            evaluate(NUMBERS, TumblingWindow(10), len)  # type: ignore[arg-type]


# -- canonical order ------------------------------------------------------------


class TestCanonicalOrder:
    def test_time_insensitive_udms_see_start_then_payload_order(self) -> None:
        cht = Cht([E(3, 4, "c"), E(0, 9, "b"), E(0, 3, "z"), E(0, 5, "a")])
        out = evaluate(cht, TumblingWindow(10), Collect)
        # by start, then payload: the end is invisible to the UDM
        assert out == [(0, 10, ("a", "b", "z", "c"))]

    @pytest.mark.parametrize("clipping", CLIPPINGS)
    def test_time_insensitive_order_ignores_clipping(self, clipping: str) -> None:
        # left clipping would give both events start 5 in [5, 10); a
        # time-insensitive UDM sees no lifetimes, so its order must not change
        cht = Cht([E(0, 9, "z"), E(3, 9, "a")])
        out = evaluate(cht, TumblingWindow(5), Collect, input_clipping=clipping)
        assert out == [(0, 5, ("z", "a")), (5, 10, ("z", "a"))]

    def test_time_sensitive_udms_see_clipped_start_end_payload_order(self) -> None:
        cht = Cht([E(6, 7, "x"), E(-5, 8, "b"), E(2, 8, "a"), E(2, 4, "q")])
        out = evaluate(cht, TumblingWindow(10), Lifetimes, input_clipping="full")
        assert out == [
            (-10, 0, ((-5, 0, "b"),)),
            (0, 10, ((0, 8, "b"), (2, 4, "q"), (2, 8, "a"), (6, 7, "x"))),
        ]


# -- emit_empty, watermark ------------------------------------------------------

SPARSE = Cht([E(1, 2, "p"), E(16, 17, "q")])


class TestEmitEmptyAndWatermark:
    def test_without_emit_empty(self) -> None:
        assert evaluate(SPARSE, TumblingWindow(5), Count) == [(0, 5, 1), (15, 20, 1)]

    def test_emit_empty_fills_the_gaps(self) -> None:
        out = evaluate(SPARSE, TumblingWindow(5), Count, emit_empty=True)
        assert out == [(0, 5, 1), (5, 10, 0), (10, 15, 0), (15, 20, 1)]

    def test_emit_empty_up_to_a_finite_watermark(self) -> None:
        out = evaluate(SPARSE, TumblingWindow(5), Count, emit_empty=True, watermark=30)
        assert out == [(0, 5, 1), (5, 10, 0), (10, 15, 0), (15, 20, 1), (20, 25, 0), (25, 30, 0)]
        out = evaluate(SPARSE, TumblingWindow(5), Count, emit_empty=True, watermark=12)
        assert out == [(0, 5, 1), (5, 10, 0)]

    def test_emit_empty_hopping(self) -> None:
        cht = Cht([E(1, 2, "p"), E(21, 22, "q")])
        assert evaluate(cht, HoppingWindow(10, 5), Count, emit_empty=True) == [
            (-5, 5, 1),
            (0, 10, 1),
            (5, 15, 0),
            (10, 20, 0),
            (15, 25, 1),
            (20, 30, 1),
        ]

    def test_emit_empty_incremental_uses_initial_state(self) -> None:
        out = evaluate(SPARSE, TumblingWindow(5), Spread, emit_empty=True, value=len)
        # an empty window's state is the initial (inf, -inf): spread -inf
        assert out == [
            (0, 5, 0),
            (5, 10, float("-inf")),
            (10, 15, float("-inf")),
            (15, 20, 0),
        ]

    def test_emit_empty_of_an_empty_cht(self) -> None:
        assert evaluate(Cht(), TumblingWindow(5), Count, emit_empty=True) == []

    def test_emit_empty_needs_grid_windows(self) -> None:
        for window in (SnapshotWindow(), CountByStartWindow(1), CountByEndWindow(1)):
            with pytest.raises(ValueError) as err:
                evaluate(SPARSE, window, Count, emit_empty=True)
            assert "emit_empty applies to hopping and tumbling windows only" in str(err.value)
            assert "never empty" in str(err.value)

    def test_watermark_cuts_open_windows(self) -> None:
        assert evaluate(SPARSE, TumblingWindow(5), Count, watermark=19) == [(0, 5, 1)]
        assert evaluate(SPARSE, TumblingWindow(5), Count, watermark=20) == [
            (0, 5, 1),
            (15, 20, 1),
        ]

    def test_watermark_accepts_times(self) -> None:
        epoch = dt.datetime(1970, 1, 1)
        assert evaluate(SPARSE, TumblingWindow(5), Count, watermark=epoch) == []
        stamp = epoch + dt.timedelta(microseconds=5)
        assert evaluate(SPARSE, TumblingWindow(5), Count, watermark=stamp) == [(0, 5, 1)]
        assert evaluate(SPARSE, TumblingWindow(5), Count, watermark="inf") == [
            (0, 5, 1),
            (15, 20, 1),
        ]

    def test_infinite_event_needs_a_watermark_on_grid_windows(self) -> None:
        cht = Cht([E(3, INFINITY, 1)])
        with pytest.raises(ValueError, match="give a finite watermark"):
            evaluate(cht, TumblingWindow(5), Count)
        assert evaluate(cht, TumblingWindow(5), Count, watermark=10) == [(0, 5, 1), (5, 10, 1)]


# -- UDM failures ---------------------------------------------------------------


class Fragile(Aggregate):
    def compute_result(self, payloads: Sequence[int]) -> float:
        if 13 in payloads:
            raise ZeroDivisionError("thirteen")
        return sum(payloads)


class TestUdmFailures:
    def test_exception_names_udm_and_window(self) -> None:
        cht = Cht([E(1, 2, 1), E(6, 7, 13)])
        with pytest.raises(UdmInvocationError) as err:
            evaluate(cht, TumblingWindow(5), Fragile)
        exc = err.value
        assert str(exc) == (
            "UDM 'fragile' failed on window [5, 10): ZeroDivisionError: thirteen; raised at "
            f"{__file__}:{inspect.getsourcelines(Fragile.compute_result)[1] + 2} in "
            'compute_result: raise ZeroDivisionError("thirteen")'
        )
        assert exc.udm == "fragile"
        assert isinstance(exc.__cause__, ZeroDivisionError)

    def test_operator_returning_none(self) -> None:
        @operator
        def nothing(values: Sequence[Any]) -> None:
            return None

        with pytest.raises(UdmInvocationError) as err:
            evaluate(AB, TumblingWindow(5), nothing)
        assert "UDM 'nothing' failed on window [0, 5)" in str(err.value)
        assert "an operator must return an iterable of outputs, not None" in str(err.value)

    def test_operator_returning_a_string(self) -> None:
        @operator
        def word(values: Sequence[Any]) -> str:
            return "abc"

        with pytest.raises(UdmInvocationError, match="not a single str"):
            evaluate(AB, TumblingWindow(5), word)

    def test_time_sensitive_operator_returning_payloads(self) -> None:
        @operator(time_sensitive=True)
        def payloads_only(events: Events, window: WindowDescriptor) -> list[Any]:
            return [e.payload for e in events]

        with pytest.raises(UdmInvocationError) as err:
            evaluate(AB, TumblingWindow(5), payloads_only)
        assert "must return IntervalEvent objects, got 'a'" in str(err.value)

    def test_time_sensitive_operator_returning_empty_lifetime(self) -> None:
        @operator(time_sensitive=True)
        def empty(events: Events, window: WindowDescriptor) -> list[Any]:
            return [E(window.start + 1, window.start + 1, "x")]

        with pytest.raises(UdmInvocationError) as err:
            evaluate(AB, TumblingWindow(5), empty)
        assert "output event [1, 1) has end not after start" in str(err.value)


@aggregate(order_insensitive=False)
def seen(values: list[Any]) -> str:
    """The payloads in the order the UDM receives them."""
    return " ".join(repr(v) for v in values)


@pytest.mark.parametrize(
    "payloads, expected",
    [
        ([100, 27, 3.5], "3.5 27 100"),  # by value: the rendering put "100" before "27"
        ([2.0, 2], "2 2.0"),  # equal numbers: the int first, whatever arrived first
        ([float("nan"), -1.0, 1e300], "-1.0 1e+300 nan"),
        ([{"v": 100}, {"v": 27}], "{'v': 27} {'v': 100}"),
        (["b", 10, "a"], "10 'a' 'b'"),  # numbers before strings
    ],
)
def test_payloads_of_one_start_are_ordered_by_value(payloads: list[Any], expected: str) -> None:
    for arrival in (payloads, payloads[::-1]):
        events = [IntervalEvent(0, 1, p) for p in arrival]
        assert evaluate(events, TumblingWindow(10), seen) == [(0, 10, expected)]


@aggregate(order_insensitive=False)
def members_in_order(values: list[Any]) -> tuple[Any, ...]:
    return tuple(values)


def test_payloads_are_mapped_once_and_members_come_in_canonical_order() -> None:
    """The reference maps each payload once and puts the events in canonical
    order once (start, then mapped payload; ties of both in CHT order):
    every window's members still come in that order, as the definition
    sorts each window's members."""
    calls: list[Any] = []

    def v(p: dict[str, Any]) -> Any:
        calls.append(p["id"])
        return p["v"]

    cht = [
        IntervalEvent(5, 6, {"id": "a", "v": 3}),
        IntervalEvent(1, 2, {"id": "b", "v": 9}),
        IntervalEvent(5, 6, {"id": "c", "v": 1}),
        IntervalEvent(5, 6, {"id": "d", "v": 1.0}),  # ties with c: CHT order
        IntervalEvent(7, 12, {"id": "e", "v": 0}),
    ]
    out = evaluate(cht, HoppingWindow(10, 5), members_in_order, value=v)
    assert sorted((e.start, e.end, e.payload) for e in out) == [
        (-5, 5, (9,)),
        (0, 10, (9, 1, 1.0, 3, 0)),
        (5, 15, (1, 1.0, 3, 0)),
        (10, 20, (0,)),
    ]
    assert sorted(calls) == ["a", "b", "c", "d", "e"]  # once per event, not per window


def test_a_value_function_failing_is_still_the_udm_failing_on_its_first_window() -> None:
    cht = [IntervalEvent(1, 2, {"v": 1}), IntervalEvent(12, 13, {"w": 2})]
    with pytest.raises(UdmInvocationError, match=r"\[10, 20\)") as info:
        evaluate(cht, TumblingWindow(10), members_in_order, value="v")
    assert "no field 'v'" in str(info.value)
