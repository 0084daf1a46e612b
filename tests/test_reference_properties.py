"""Property tests for the foundation: equivalent physical streams give equal
CHTs and outputs, window-kind identities, incremental = non-incremental,
and evaluation independent of input order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chts, equivalent_streams, with_ctis

from udm.host import (
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    IntervalEvent,
    SnapshotWindow,
    TumblingWindow,
    WindowDescriptor,
    WindowSpec,
    derive_cht,
    evaluate,
)
from udm.host.invoke import payload_key
from udm.sdk import (
    Aggregate,
    IncrementalAggregate,
    TimeSensitiveAggregate,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveOperator,
)

FAST = settings(max_examples=60, deadline=None)
Events = Sequence[IntervalEvent[Any]]


class Sum(Aggregate):
    def compute_result(self, payloads: Sequence[int]) -> int:
        return sum(payloads)


class IncSum(IncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        return state


class Mean(Aggregate):
    def compute_result(self, payloads: Sequence[int]) -> float:
        return sum(payloads) / len(payloads)


class IncMean(IncrementalAggregate):
    def initial_state(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, state: tuple[int, int], payload: int) -> tuple[int, int]:
        return (state[0] + payload, state[1] + 1)

    def result(self, state: tuple[int, int]) -> float:
        return state[0] / state[1]


class WeightedSum(TimeSensitiveAggregate):
    def compute_result(self, events: Events, window: WindowDescriptor) -> int:
        return sum(e.payload * (e.end - e.start) for e in events)


class IncWeightedSum(TimeSensitiveIncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[int], window: WindowDescriptor) -> int:
        return state + event.payload * (event.end - event.start)

    def result(self, state: int, window: WindowDescriptor) -> int:
        return state


class Seen(TimeSensitiveAggregate):
    """Order-sensitive: everything the UDM sees, in the order it sees it."""

    def compute_result(self, events: Events, window: WindowDescriptor) -> Any:
        return tuple((e.start, e.end, e.payload) for e in events)


class Order(Aggregate):
    """Order-sensitive time-insensitive aggregate."""

    def compute_result(self, payloads: Sequence[int]) -> Any:
        return tuple(payloads)


class Echo(TimeSensitiveOperator):
    def compute_result(self, events: Events, window: WindowDescriptor) -> Iterable[Any]:
        return [IntervalEvent(e.start, e.end, (e.payload, window.start)) for e in events]


windows = st.one_of(
    st.builds(TumblingWindow, st.integers(1, 12), st.integers(0, 11)),
    st.builds(HoppingWindow, st.integers(1, 12), st.integers(1, 12), st.integers(0, 11)),
    st.just(SnapshotWindow()),
    st.builds(CountByStartWindow, st.integers(1, 3)),
    st.builds(CountByEndWindow, st.integers(1, 3)),
)
clippings = st.sampled_from(["none", "left", "right", "full"])


@st.composite
def cht_and_equivalent_stream(draw: st.DrawFn) -> tuple[Cht, list[Any]]:
    cht = draw(chts(max_size=6))
    return cht, draw(equivalent_streams(cht))


class TestEquivalentStreams:
    @FAST
    @given(cht_and_equivalent_stream())
    def test_derives_the_same_cht(self, case: tuple[Cht, list[Any]]) -> None:
        cht, stream = case
        derived, stats = derive_cht(stream)
        assert derived == cht
        assert stats.dropped == 0
        assert stats.adjusted == 0

    @FAST
    @given(cht_and_equivalent_stream(), windows, clippings)
    def test_same_evaluate_output(
        self, case: tuple[Cht, list[Any]], window: WindowSpec, clipping: str
    ) -> None:
        cht, stream = case
        derived = Cht.from_stream(stream)
        for udm in (Seen, Echo):
            assert evaluate(derived, window, udm, input_clipping=clipping) == evaluate(
                cht, window, udm, input_clipping=clipping
            )

    @FAST
    @given(chts(max_size=6, infinite=True), st.data())
    def test_open_events_too(self, cht: Cht, data: st.DataObject) -> None:
        stream = data.draw(equivalent_streams(cht))
        assert Cht.from_stream(stream) == cht

    @FAST
    @given(chts(max_size=6), st.integers(1, 3), st.data())
    def test_ctis_at_their_latest_are_valid(
        self, cht: Cht, every: int, data: st.DataObject
    ) -> None:
        stream = data.draw(equivalent_streams(cht, ctis=False))
        assert Cht.from_stream(with_ctis(stream, every)) == cht


class TestWindowIdentities:
    @FAST
    @given(chts(max_size=6), st.integers(1, 12), st.integers(0, 30), clippings)
    def test_tumbling_is_hopping_with_hop_equal_size(
        self, cht: Cht, size: int, offset: int, clipping: str
    ) -> None:
        for udm in (Seen, Echo):
            assert evaluate(
                cht, TumblingWindow(size, offset), udm, input_clipping=clipping
            ) == evaluate(cht, HoppingWindow(size, size, offset), udm, input_clipping=clipping)

    @FAST
    @given(chts(max_size=8))
    def test_count_by_start_1_groups_by_start(self, cht: Cht) -> None:
        window = CountByStartWindow(1)
        starts = sorted({e.start for e in cht})
        assert window.windows(list(cht)) == [WindowDescriptor(s, s + 1) for s in starts]
        out = evaluate(cht, window, Seen, output_policy="align")
        expected = [
            (
                s,
                s + 1,
                tuple(
                    sorted(
                        ((e.start, e.end, e.payload) for e in cht if e.start == s),
                        key=lambda t: (t[0], t[1], payload_key(t[2])),
                    )
                ),
            )
            for s in starts
        ]
        assert out == Cht(expected)

    @FAST
    @given(chts(max_size=6), st.integers(1, 12), st.integers(1, 12), st.integers(0, 11))
    def test_every_member_overlaps_its_window(
        self, cht: Cht, size: int, hop: int, offset: int
    ) -> None:
        spec = HoppingWindow(size, hop, offset)
        events = list(cht)
        listed = spec.windows(events)
        for w in listed:
            members = spec.members(w, events)
            assert members
            assert all(e.start < w.end and w.start < e.end for e in members)
        # and every event is in each grid window it overlaps
        for e in events:
            for k in range(-10, 10):
                w = spec.window_at(k)
                if w.overlaps(e.start, e.end):
                    assert w in listed


class TestIncrementalEqualsNonIncremental:
    @FAST
    @given(chts(max_size=8), windows)
    def test_sum(self, cht: Cht, window: WindowSpec) -> None:
        assert evaluate(cht, window, IncSum) == evaluate(cht, window, Sum)

    @FAST
    @given(chts(max_size=8), windows)
    def test_mean(self, cht: Cht, window: WindowSpec) -> None:
        assert evaluate(cht, window, IncMean) == evaluate(cht, window, Mean)

    @FAST
    @given(chts(max_size=8), windows, clippings)
    def test_time_sensitive_weighted_sum(self, cht: Cht, window: WindowSpec, clipping: str) -> None:
        assert evaluate(cht, window, IncWeightedSum, input_clipping=clipping) == evaluate(
            cht, window, WeightedSum, input_clipping=clipping
        )


class TestInputOrder:
    @FAST
    @given(chts(max_size=8), windows, clippings, st.randoms(use_true_random=False))
    def test_evaluate_ignores_input_order(
        self, cht: Cht, window: WindowSpec, clipping: str, rnd: Any
    ) -> None:
        shuffled = list(cht)
        rnd.shuffle(shuffled)
        for udm in (Seen, Order, Echo):
            out = evaluate(cht, window, udm, input_clipping=clipping)
            assert evaluate(shuffled, window, udm, input_clipping=clipping) == out
            assert evaluate(list(reversed(cht)), window, udm, input_clipping=clipping) == out

    @FAST
    @given(chts(max_size=8), windows, clippings)
    def test_time_insensitive_udms_ignore_clipping(
        self, cht: Cht, window: WindowSpec, clipping: str
    ) -> None:
        # clipping changes lifetimes only, which time-insensitive UDMs never see
        assert evaluate(cht, window, Order, input_clipping=clipping) == evaluate(cht, window, Order)
