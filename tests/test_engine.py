"""The incremental host against the reference evaluator, plus its own
guarantees: rollback on errors, snapshots, liveliness, cleanup."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import (
    ALL_FLAVORS,
    Histogram,
    Max,
    Sum,
    WeightedSum,
    at_starts,
    physical_streams,
    random_stream,
    total,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    INFINITY,
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    Cti,
    CtiViolationError,
    HoppingWindow,
    Host,
    Insert,
    InvalidElementError,
    OutputPolicy,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    derive_cht,
    evaluate,
    evaluate_by_key,
    output_cht,
    output_cht_by_key,
    point,
)
from udm.sdk import (
    IncrementalAggregate,
    IncrementalOperator,
    IntervalEvent,
    Properties,
    aggregate,
    operator,
)

WINDOWS = [
    TumblingWindow(5),
    HoppingWindow(6, 2),
    HoppingWindow(3, 5, offset=1),
    SnapshotWindow(),
    CountByStartWindow(1),
    CountByStartWindow(3),
    CountByEndWindow(1),
    CountByEndWindow(2),
]

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def policies_for(udm: Any, window: Any) -> list[str | None]:
    pols: list[str | None] = [None, "align", "point_end"]
    if udm.kind == "operator" and udm.time_sensitive:
        pols += ["clip", "keep"]
        if udm is at_starts and window.is_grid:
            pols.append("time_bound")
    return pols


def run(host: Host, stream: list[Any]) -> list[Any]:
    return host.process_many(stream) + host.flush()


def reference_or_error(cht: Any, window: Any, udm: Any, **options: Any) -> Any:
    try:
        return evaluate(cht, window, udm, **options)
    except (UdmInvocationError, ValueError) as exc:
        return exc


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("udm", ALL_FLAVORS, ids=lambda u: u.__name__)
@SETTINGS
@given(data=st.data(), stream=physical_streams())
def test_host_matches_reference(window: Any, udm: Any, data: Any, stream: list[Any]) -> None:
    clipping = data.draw(st.sampled_from(["none", "left", "right", "full"]), label="clipping")
    consistency = data.draw(st.sampled_from(["speculative", "conservative"]), label="mode")
    policy = data.draw(st.sampled_from(policies_for(udm, window)), label="policy")
    options = {"input_clipping": clipping, "output_policy": policy}
    cht = derive_cht(stream)[0]
    expected = reference_or_error(cht, window, udm, **options)
    fast = data.draw(st.booleans(), label="fast_path")
    host = Host(window, udm, consistency=consistency, fast_path=fast, **options)
    if isinstance(expected, Exception):
        # the UDM or policy rejects this input: the host must too, and say why
        with pytest.raises(type(expected)):
            run(host, stream)
        return
    try:
        outputs = run(host, stream)
    except UdmInvocationError as exc:
        # the host computes windows as elements arrive: it may meet a state
        # the UDM or policy rejects that a later retraction removes. Such an
        # error must be justified by the stream up to the failing element.
        prefix = stream[: getattr(exc, "position", len(stream)) + 1]
        at_failure = reference_or_error(derive_cht(prefix)[0], window, udm, **options)
        assert isinstance(at_failure, Exception), f"unjustified host error: {exc}"
        return
    # the output is itself a valid physical stream: retractions match earlier
    # outputs, lifetimes are valid, nothing violates an emitted output CTI
    assert output_cht(outputs) == expected
    if consistency == "conservative":
        assert not any(isinstance(o, Retract) for o in outputs)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=40, deadline=None)
@given(stream=physical_streams(max_size=40))
def test_speculative_output_before_end_of_stream(window: Any, stream: list[Any]) -> None:
    """Before the end of the stream, the output holds exactly the windows the
    watermark (latest CTI or event start) has passed."""
    host = Host(window, Sum)
    outputs = host.process_many(stream)
    cht = derive_cht(stream)[0]
    # the watermark: latest CTI or start of any insert (even one retracted since)
    times = [
        e.time if isinstance(e, Cti) else e.start for e in stream if not isinstance(e, Retract)
    ]
    watermark = max(times, default=host.cti)
    assert output_cht(outputs) == evaluate(cht, window, Sum, watermark=watermark)


def test_fast_path_key_whose_events_fall_between_windows() -> None:
    """Regression (found by the property above): with gaps between hopping
    windows (size < hop), a key whose first events all fall in gaps has no
    window yet when the watermark moves; nothing is output and nothing fails."""
    window = HoppingWindow(size=3, hop=5, offset=1)  # windows [1, 4), [6, 9), ...
    stream = [Cti(0), Insert("e1", 0, 1, 8), Insert("e2", 4, 6, 5), Insert("e3", 7, 8, 2)]
    host = Host(window, Sum)
    outputs = host.process_many(stream)
    assert outputs == [Cti(0)]  # [6, 9) has not ended by the watermark 7
    outputs += host.flush()
    assert output_cht(outputs) == Cht([(6, 9, 2)])
    assert output_cht(outputs) == evaluate(derive_cht(stream)[0], window, Sum)


@pytest.mark.parametrize(
    "window", [TumblingWindow(4), HoppingWindow(4, 2), SnapshotWindow(), CountByStartWindow(2)]
)
@pytest.mark.parametrize("fast", [True, False])
@settings(max_examples=30, deadline=None)
@given(stream=physical_streams(max_size=40, keys=3))
def test_group_apply_matches_reference_per_key(window: Any, fast: bool, stream: list[Any]) -> None:
    host = Host(window, Sum, key="k", value="v", fast_path=fast)
    outputs = run(host, stream)
    cht = derive_cht(stream)[0]
    expected = evaluate_by_key(cht, "k", window, Sum, value="v")
    got = output_cht_by_key(outputs)
    assert {k: v for k, v in got.items()} == {k: v for k, v in expected.items() if len(v)}


# --- hand-computed -------------------------------------------------------


def test_tumbling_speculation_retraction_and_ctis() -> None:
    host = Host(TumblingWindow(10), Sum)
    assert host.process(point("a", 1, 5)) == []
    assert host.process(point("b", 12, 1)) == [
        Insert(host_id(0), 0, 10, 5),  # the watermark (12) passed [0, 10)
    ]
    # a late event for [0, 10): the speculative output is corrected
    assert host.process(point("c", 3, 2)) == [
        Retract(host_id(0), 0, 10, 0, 5),
        Insert(host_id(1), 0, 10, 7),
    ]
    # CTI 15: [0, 10) is final; output CTI at the start of the open window
    assert host.process(Cti(15)) == [Cti(10)]
    assert host.process(Cti(20)) == [Insert(host_id(2), 10, 20, 1), Cti(20)]


def host_id(n: int, key: Any = None) -> Any:
    from udm.host import OutputId

    return OutputId(key, n)


def test_conservative_emits_only_final_windows() -> None:
    host = Host(TumblingWindow(10), Sum, consistency="conservative")
    assert host.process_many([point("a", 1, 5), point("b", 12, 1), point("c", 3, 2)]) == []
    assert host.process(Cti(15)) == [Insert(host_id(0), 0, 10, 7), Cti(10)]


def test_conservative_flush_outputs_windows_that_end_at_infinity() -> None:
    """Found by a generated fixture: a snapshot window over an edge event that
    never ends, [2, inf), was never final, so the conservative host lost it at
    the end of the stream; a CTI at the end of time finalizes every window."""
    for consistency in ("speculative", "conservative"):
        host = Host(SnapshotWindow(), Sum, consistency=consistency)
        out = host.process(Insert("a", 2, INFINITY, 19)) + host.flush()
        assert output_cht(out) == Cht([(2, INFINITY, 19)]), consistency


@pytest.mark.parametrize(
    ("window", "policy"),
    [
        (CountByStartWindow(2), "align"),
        (CountByEndWindow(2), "align"),
        (CountByEndWindow(2), None),
        (TumblingWindow(5), "align"),
        (TumblingWindow(5), "point_end"),
        (SnapshotWindow(), "point_end"),
        (SnapshotWindow(), "align"),
    ],
)
@pytest.mark.parametrize("consistency", ["speculative", "conservative"])
@pytest.mark.parametrize("fast", [True, False])
def test_flush_ends_the_output_too(
    window: Any, policy: str | None, consistency: str, fast: bool
) -> None:
    """After a CTI at the end of time nothing can follow, so no window can
    change or still form: the output CTI is the end of time as well (it
    stopped at the last count window's start, or a window short of the end
    of time, so a downstream operator never saw the stream end)."""
    host = Host(window, Sum, output_policy=policy, consistency=consistency, fast_path=fast)
    out = host.process_many([point("a", 1, 1), point("b", 7, 2)]) + host.flush()
    assert out[-1] == Cti(INFINITY)
    assert host.output_cti == INFINITY
    assert output_cht(out) == evaluate(
        Cht([(1, 2, 1), (7, 8, 2)]), window, Sum, output_policy=policy
    )


def test_point_end_output_cti_follows_input_cti() -> None:
    host = Host(TumblingWindow(10), Sum, output_policy="point_end")
    out = host.process_many([point("a", 1, 5), Cti(15)])
    assert out == [Insert(host_id(0), 9, 10, 5), Cti(15)]


@pytest.mark.parametrize(
    ("window", "stream", "cti"),
    [
        # [1, 6) is final; the next window needs a start at or after 10, and
        # its point_end output lies at that start: nothing can come before 10
        (CountByStartWindow(2), [point("a", 1, 1), point("b", 5, 1), Cti(10)], 10),
        (CountByStartWindow(3), [point("a", 0, 1), point("b", 100, 1), Cti(1000)], 1000),
        # an end may still move to exactly 10, ending a window whose point is at 9
        (CountByEndWindow(2), [Insert("a", 0, 2, 1), Insert("b", 0, 4, 1), Cti(10)], 9),
    ],
)
def test_count_windows_point_end_output_cti(window: Any, stream: list[Any], cti: int) -> None:
    """The default policy of count windows puts a future window's output at
    its last tick, not at its start: the output CTI follows the input CTI."""
    out = Host(window, Sum).process_many(stream)
    assert [e.time for e in out if isinstance(e, Cti)] == [cti]


@operator(time_sensitive=True, time_bound=True)
def declared_at_starts(events: list[IntervalEvent[int]], window: Any) -> list[IntervalEvent[int]]:
    """``at_starts`` declaring the paper's TimeBoundOutputInterval itself."""
    return [IntervalEvent(e.start, e.start + 1, e.payload) for e in events]


@operator(time_sensitive=True, time_bound=True)
def at_window_start(events: list[IntervalEvent[int]], window: Any) -> list[IntervalEvent[int]]:
    """Declares time_bound, but outputs at the window's start, before a change."""
    return [IntervalEvent(window.start, window.start + 1, len(events))]


@pytest.mark.parametrize(
    ("udm", "policy"),
    [
        (at_starts, "time_bound"),  # the policy
        # the declared property, under the default (clip, which only moves
        # starts later) and keep
        (declared_at_starts, None),
        (declared_at_starts, "clip"),
        (declared_at_starts, "keep"),
    ],
)
def test_time_bound_output_cti_equals_input_cti(udm: Any, policy: str | None) -> None:
    host = Host(TumblingWindow(10), udm, output_policy=policy)
    out = host.process_many([point("a", 1, 5), Cti(3), point("b", 4, 6), Cti(7)])
    assert out == [
        Insert(host_id(0), 1, 2, 5),
        Cti(3),
        Insert(host_id(1), 4, 5, 6),
        Cti(7),
    ]


def test_a_declared_time_bound_operator_under_align_waits_for_its_windows() -> None:
    # under align the UDM's timestamps are replaced by the window's
    aligned = Host(TumblingWindow(10), declared_at_starts, output_policy="align")
    assert Cti(3) not in aligned.process_many([point("a", 1, 5), Cti(3)])


def test_a_declared_time_bound_operator_is_not_eager_over_count_windows() -> None:
    """Over count and snapshot windows an element reshapes windows that
    began earlier, so the declaration applies over grid windows only: an
    echo of its members over count-by-end windows still runs as without it."""
    stream = [Insert("a", -1, INFINITY, "a"), Cti(1), Retract("a", -1, INFINITY, 1)]

    @operator(time_sensitive=True, time_bound=True)
    def echo(events: list[IntervalEvent[str]], window: Any) -> list[IntervalEvent[str]]:
        return list(events)

    out = run(Host(CountByEndWindow(1), echo), stream)
    assert output_cht(out) == Cht([(0, 1, "a")])


class DriftingSum(IncrementalAggregate):
    """Has remove(), but declares invertible=False: a float sum that loses
    small values next to large ones when they are taken out again."""

    properties = Properties(invertible=False)

    def initial_state(self) -> float:
        return 0.0

    def add(self, state: float, value: float) -> float:
        return state + value

    def remove(self, state: float, value: float) -> float:
        return state - value

    def result(self, state: float) -> float:
        return state


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("window", [TumblingWindow(10), SnapshotWindow()])
def test_invertible_false_is_honoured_though_remove_exists(window: Any, fast_path: bool) -> None:
    # (1.0 + 1e16) - 1e16 is 0.0; rebuilding the window gives 1.0
    stream = [Insert("a", 1, 2, 1.0), Insert("b", 1, 2, 1e16), Retract("b", 1, 2, 1)]
    out = run(Host(window, DriftingSum, fast_path=fast_path), stream)
    start, end = (0, 10) if isinstance(window, TumblingWindow) else (1, 2)
    assert output_cht(out) == Cht([(start, end, 1.0)])


def test_a_false_time_bound_declaration_is_caught() -> None:
    host = Host(TumblingWindow(10), at_window_start)
    host.process_many([point("a", 1, 5), Cti(3)])
    with pytest.raises(UdmInvocationError, match="a time_bound UDM must not output before"):
        host.process(point("b", 4, 6))


def test_snapshot_split_shortens_output_in_place() -> None:
    host = Host(SnapshotWindow(), Sum)
    # at CTI 10 the event ending at 10 may still be extended, which would
    # reshape [0, 10): the output CTI stays at the window start until CTI 11
    out = host.process_many([Insert("a", 0, 10, 1), Cti(10), Cti(11)])
    assert out == [Insert(host_id(0), 0, 10, 1), Cti(0), Cti(11)]
    host = Host(SnapshotWindow(), Sum)
    out = host.process_many([Insert("a", 0, 10, 1), point("x", 10, 0), Insert("b", 5, 10, 2)])
    assert out == [
        Insert(host_id(0), 0, 10, 1),
        Retract(host_id(0), 0, 10, 5, 1),  # shortened: the first part is unchanged
        Insert(host_id(1), 5, 10, 3),
    ]


@pytest.mark.parametrize("fast", [True, False])
def test_edge_event_needs_its_end_before_grid_flush(fast: bool) -> None:
    host = Host(TumblingWindow(10), Sum, fast_path=fast)
    host.process(Insert("edge", 3, INFINITY, 1))
    with pytest.raises(ValueError, match="never ends"):
        host.flush()
    out = host.process_many([Retract("edge", 3, INFINITY, 25)]) + host.flush()
    assert output_cht(out) == [(0, 10, 1), (10, 20, 1), (20, 30, 1)]


@pytest.mark.parametrize("fast", [True, False])
def test_edge_event_at_the_end_of_time_is_refused_at_flush(fast: bool) -> None:
    """An open event whose first window ends past INFINITY: the fast path
    emitted that window cut short, [INFINITY - 7, INFINITY), where the
    general path and the reference refuse."""
    host = Host(TumblingWindow(10), Sum, fast_path=fast)
    host.process(Insert("edge", INFINITY - 5, INFINITY, 1))
    with pytest.raises(ValueError, match="never ends"):
        host.flush()


def test_non_invertible_incremental_recomputes_on_removal() -> None:
    stream = [Insert("a", 0, 5, 9), Insert("b", 1, 5, 4), Retract("a", 0, 5, 0), Cti(10)]
    out = Host(TumblingWindow(10), Max).process_many(stream)
    assert output_cht(out) == [(0, 10, 4)]


# --- errors leave the host unchanged ------------------------------------


class Fragile(IncrementalAggregate):
    """Sums, but raises on the payload 13."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        if payload == 13:
            raise ZeroDivisionError("thirteen")
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        return state


def insert_only(stream: list[Any]) -> list[Any]:
    """The stream without retractions and reused ids."""
    seen: set[Any] = set()
    kept = []
    for element in stream:
        if isinstance(element, Retract) or (isinstance(element, Insert) and element.id in seen):
            continue
        seen.add(getattr(element, "id", None))
        kept.append(element)
    return kept


@pytest.mark.parametrize(
    "window", [TumblingWindow(5), HoppingWindow(6, 2), SnapshotWindow(), CountByStartWindow(1)]
)
@pytest.mark.parametrize("retractions", [True, False], ids=["retractions", "insert-only"])
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_udm_error_leaves_state_unchanged(window: Any, retractions: bool, seed: int) -> None:
    rng = random.Random(seed)
    stream = random_stream(rng, 30)
    if not retractions:
        stream = insert_only(stream)
    position = rng.randrange(len(stream) + 1)
    bad = Insert("bad", max([0, *(getattr(e, "time", 0) for e in stream[:position])]), 50, 13)
    faulty = Host(window, Fragile, retractions=retractions)
    clean = Host(window, Fragile, retractions=retractions)
    out_faulty = faulty.process_many(stream[:position])
    out_clean = clean.process_many(stream[:position])
    with pytest.raises(UdmInvocationError) as info:
        faulty.process_many([bad])
    message = str(info.value)
    assert "fragile" in message and "ZeroDivisionError: thirteen" in message
    assert "Insert(id='bad'" in message and "window [" in message
    out_faulty += faulty.process_many(stream[position:]) + faulty.flush()
    out_clean += clean.process_many(stream[position:]) + clean.flush()
    assert out_faulty == out_clean


def test_rejected_elements_leave_state_unchanged() -> None:
    host = Host(TumblingWindow(10), Sum)
    host.process_many([Insert("a", 0, 5, 1), Cti(4)])
    before = host.snapshot()
    with pytest.raises(InvalidElementError, match="unknown event id 'zzz'"):
        host.process(Retract("zzz", 5, 9, 7))
    with pytest.raises(CtiViolationError, match="before the latest CTI 4"):
        host.process(Insert("late", 2, 8, 1))
    with pytest.raises(InvalidElementError, match="already live"):
        host.process(Insert("a", 6, 8, 1))
    assert host.snapshot() == before


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("bad", [("a", 1, 2), None])
def test_a_non_element_is_an_invalid_element_and_changes_nothing(fast: bool, bad: Any) -> None:
    host = Host(TumblingWindow(10), Sum, fast_path=fast)
    host.process(Insert("a", 0, 5, 1))
    before = host.snapshot()
    kind = type(bad).__name__
    with pytest.raises(InvalidElementError, match=rf"element #1 .*not a stream element \({kind}\)"):
        host.process(bad)
    assert host.snapshot() == before
    with pytest.raises(InvalidElementError, match=rf"element #2 .*not a stream element \({kind}\)"):
        host.process_many([Insert("b", 1, 2, 2), bad])  # "b" stays processed
    assert output_cht(host.process(Cti(10))) == [(0, 10, 3)]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("batch", [True, False])
def test_a_payload_without_the_value_field_fails_as_the_udm_on_its_window(
    fast: bool, batch: bool
) -> None:
    # as in the reference evaluator: UdmInvocationError naming UDM, window, element
    stream = [Insert("a", 11, 12, {"v": 1}), Insert("b", 13, 14, {"x": 1})]  # same window
    with pytest.raises(UdmInvocationError, match=r"failed on window \[10, 20\)") as ref:
        evaluate(Cht.from_stream(stream), TumblingWindow(10), Sum, value="v")
    assert "has no field 'v'" in str(ref.value)
    host = Host(TumblingWindow(10), Sum, value="v", fast_path=fast)
    host.process(stream[0])
    with pytest.raises(UdmInvocationError) as got:
        if batch:
            host.process_many(stream[1:])
        else:
            host.process(stream[1])
    message = str(got.value)
    assert "UDM 'sum' failed on window [10, 20) while processing Insert(id='b'" in message
    assert "KeyError: \"payload {'x': 1} has no field 'v'; check the value= argument" in message
    out = host.process_many([Insert("c", 13, 14, {"v": 5}), Cti(20)])
    assert output_cht(out) == [(10, 20, 6)]


def test_a_payload_without_the_value_field_fails_as_the_udm_on_snapshot_windows() -> None:
    # the general path adds to and removes from each window's state: the
    # value function runs guarded, and fails on the first window, as in evaluate
    stream = [Insert("a", 1, 9, {"v": 1}), Insert("b", 3, 9, {"v": 2}), Insert("c", 2, 5, {})]
    with pytest.raises(UdmInvocationError, match=r"UDM 'sum' failed on window \[2, 3\)"):
        evaluate(Cht.from_stream(stream), SnapshotWindow(), Sum, value=lambda p: p["v"])
    host = Host(SnapshotWindow(), Sum, value=lambda p: p["v"])
    out = host.process_many(stream[:2])
    with pytest.raises(UdmInvocationError, match=r"UDM 'sum' failed on window \[2, 3\)"):
        host.process(stream[2])
    assert output_cht(out + host.process(Cti(20))) == [(1, 3, 1), (3, 9, 3)]


@pytest.mark.parametrize("fast", [True, False])
def test_dict_keys_of_another_type_are_another_result(fast: bool) -> None:
    # {1: 1} and {"1": 1} differ: the late "1" must replace the window's output
    @aggregate
    def latest_tag(values: list[Any]) -> dict[Any, int]:
        return {values[-1]: 1}

    stream = [Insert("a", 1, 2, 1), Insert("z", 12, 13, 0), Insert("b", 5, 6, "1"), Cti(20)]
    out = Host(TumblingWindow(10), latest_tag, fast_path=fast).process_many(stream)
    expected = evaluate(Cht.from_stream(stream), TumblingWindow(10), latest_tag, watermark=20)
    assert output_cht(out) == expected == [(0, 10, {"1": 1}), (10, 20, {0: 1})]
    assert output_cht(out) != [(0, 10, {1: 1}), (10, 20, {0: 1})]


def test_set_payloads_of_mixed_types_are_output_and_compared() -> None:
    @aggregate
    def distinct(values: list[Any]) -> set[Any]:
        return set(values)

    stream = [Insert("a", 1, 2, 1.5), Insert("b", 3, 4, None), Insert("c", 5, 6, "x"), Cti(10)]
    out = output_cht(Host(TumblingWindow(10), distinct).process_many(stream))
    assert out == evaluate(Cht.from_stream(stream), TumblingWindow(10), distinct)
    assert out == [(0, 10, {None, "x", 1.5})]
    assert out != [(0, 10, {None, "x", 2.5})]


class _Positives(IncrementalOperator):
    """Its result reads the state lazily: a generator, or a dict view."""

    def __init__(self, view: bool = False) -> None:
        self.view = view

    def initial_state(self) -> dict[Any, int]:
        return {}

    def add(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        state[payload] = state.get(payload, 0) + 1
        return state

    def remove(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        state[payload] -= 1
        if not state[payload]:
            del state[payload]
        return state

    def result(self, state: dict[Any, int]) -> Any:
        return state.keys() if self.view else (p for p in state if p > 0)


@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_an_operators_lazy_result_is_read_while_the_state_is_as_it_is(
    view: bool, fast: bool
) -> None:
    # [0, 10) is output ({1}), changed by a late "c" ({1, 2}), changed back
    stream = [point("a", 1, 1), point("b", 12, 3), point("c", 5, 2), Retract("c", 5, 6, 5)]
    udm = _Positives(view=view)
    host = Host(TumblingWindow(10), udm, fast_path=fast)
    out = host.process_many([*stream, Cti(30)])
    expected = [(0, 10, 1), (10, 20, 3)]
    assert output_cht(out) == evaluate(Cht.from_stream(stream), TumblingWindow(10), udm)
    assert output_cht(out) == expected


def test_an_aggregate_returning_a_generator_fails_in_every_engine() -> None:
    class Lazy(IncrementalAggregate):
        def initial_state(self) -> list[Any]:
            return []

        def add(self, state: list[Any], payload: Any) -> list[Any]:
            return [*state, payload]

        def result(self, state: list[Any]) -> Any:
            return iter(state)

    stream = [point("a", 1, 1), Cti(10)]
    wanted = r"UDM 'lazy' failed on window \[0, 10\).*an aggregate returns one value per window"
    with pytest.raises(UdmInvocationError, match=wanted):
        evaluate(Cht.from_stream(stream), TumblingWindow(10), Lazy)
    with pytest.raises(UdmInvocationError, match=wanted):
        Host(TumblingWindow(10), Lazy).process_many(stream)


def test_cti_policies_drop_and_adjust_are_counted() -> None:
    host = Host(TumblingWindow(10), Sum, cti_policy="adjust")
    out = host.process_many([Cti(5), Insert("late", 2, 8, 4), point("gone", 1, 9), Cti(20)])
    assert output_cht(out) == [(0, 10, 4)]
    assert (host.stats.adjusted_inserts, host.stats.dropped_inserts) == (1, 1)


# --- snapshots -------------------------------------------------------------


@pytest.mark.parametrize(
    "window, udm",
    [(TumblingWindow(5), Sum), (SnapshotWindow(), WeightedSum), (CountByEndWindow(2), Histogram)],
    ids=repr,
)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_snapshot_restore_resumes_with_identical_output(window: Any, udm: Any, seed: int) -> None:
    rng = random.Random(seed)
    stream = random_stream(rng, 40)
    cut = rng.randrange(len(stream) + 1)
    continuous = Host(window, udm)
    expected = continuous.process_many(stream) + continuous.flush()
    first = Host(window, udm)
    got = first.process_many(stream[:cut])
    resumed = Host(window, udm)
    resumed.restore(first.snapshot())
    got += resumed.process_many(stream[cut:]) + resumed.flush()
    assert got == expected


def test_restore_rejects_a_different_query() -> None:
    blob = Host(TumblingWindow(5), Sum).snapshot()
    with pytest.raises(ValueError, match="cannot be restored"):
        Host(TumblingWindow(6), Sum).restore(blob)
    with pytest.raises(ValueError, match="not a udm host snapshot"):
        Host(TumblingWindow(5), Sum).restore(b"\x80\x04N.")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            {"consistency": "conservative"},
            "consistency: speculative in the snapshot, conservative here",
        ),
        ({"output_policy": "point_end"}, "output_policy: align in the snapshot, point_end here"),
        ({"input_clipping": "full"}, "input_clipping: none in the snapshot, full here"),
        ({"cti_policy": "drop"}, "cti_policy: raise in the snapshot, drop here"),
        ({"key": "k"}, "key: None in the snapshot, 'k' here"),
        ({"retractions": False}, "retractions: True in the snapshot, False here"),
        ({"fast_path": False}, "fast_path: True in the snapshot, False here"),
        ({"args": {"n": 2}}, "args: [('n', 1)] in the snapshot, [('n', 2)] here"),
    ],
)
def test_restore_rejects_other_query_options(option: dict[str, Any], message: str) -> None:
    """Only the window and the UDM were compared: a conservative host
    restored from a speculative one emitted retractions, and under another
    output policy the output matched neither query."""
    first = Host(TumblingWindow(10), Sum)
    first.process_many([point("a", 1, 5), point("b", 12, 1)])
    udm: Any = Sum
    if "args" in option:

        class Scaled(IncrementalAggregate):
            name = "Sum"

            def __init__(self, n: int = 1) -> None:
                self.n = n

            def initial_state(self) -> int:
                return 0

            def add(self, state: int, value: int) -> int:
                return state + self.n * value

            def result(self, state: int) -> int:
                return state

        first = Host(TumblingWindow(10), Scaled)
        first.process_many([point("a", 1, 5), point("b", 12, 1)])
        udm = Scaled
    blob = first.snapshot()
    other = Host(TumblingWindow(10), udm, **option)
    with pytest.raises(ValueError) as err:
        other.restore(blob)
    assert "was taken with other query options (" in str(err.value)
    assert message in str(err.value)
    assert "restore it into a host created with the same options" in str(err.value)
    assert other.keys == {}  # nothing was loaded


def test_restore_compares_arguments_bound_to_the_udm() -> None:
    """Arguments bound by calling the class (quantile(q=0.9)) were not
    compared, only those given as args=: a snapshot of scaled(x=2) resumed
    under scaled(x=3), blending both."""

    @aggregate
    def scaled(values: list[float], x: int = 1) -> float:
        return sum(values) * x

    first = Host(TumblingWindow(10), scaled(x=2))
    first.process(Insert("a", 1, 2, 1.0))
    blob = first.snapshot()
    with pytest.raises(
        ValueError, match=r"args: \[\('x', 2\)\] in the snapshot, \[\('x', 3\)\] here"
    ):
        Host(TumblingWindow(10), scaled(x=3)).restore(blob)
    Host(TumblingWindow(10), scaled, args={"x": 2}).restore(blob)  # the same arguments


# --- cleanup ---------------------------------------------------------------


@pytest.mark.parametrize(
    "window", [TumblingWindow(10), HoppingWindow(20, 5), SnapshotWindow(), CountByStartWindow(4)]
)
def test_memory_is_bounded_by_data_between_ctis(window: Any) -> None:
    host = Host(window, total)
    peak = (0, 0)
    for i in range(3000):
        host.process(Insert(f"e{i}", i, i + 3, i % 7))
        if i % 50 == 49:
            host.process(Cti(i - 5))
            peak = max(peak, host.memory_size)
    events, windows = host.memory_size
    assert events <= 70 and windows <= 70, host.memory_size
    assert peak[0] <= 70
    assert len(host.validator.live) <= 2200  # pruned as it doubles


def test_policy_names_are_checked() -> None:
    with pytest.raises(ValueError, match="keeps timestamps chosen by the UDM"):
        Host(TumblingWindow(5), Sum, output_policy=OutputPolicy.KEEP)
    with pytest.raises(ValueError, match="unknown consistency"):
        Host(TumblingWindow(5), Sum, consistency="eventual")


@aggregate(name="unlucky")
def _unlucky(values: list[float]) -> float:
    if 13.0 in values:
        raise ZeroDivisionError("13 is unlucky")
    return sum(values)


@pytest.mark.parametrize(
    "window", [TumblingWindow(10), SnapshotWindow()], ids=["grid path", "general path"]
)
def test_udm_error_computed_at_a_cti_names_the_windows_events(window: Any) -> None:
    """In speculative mode a window is computed once time passes its end, so
    the triggering element can be a CTI: the message lists the window's
    events so the one the UDM choked on can be found."""
    host = Host(window, _unlucky)
    host.process_many([Insert("a", 1, 4, 2.0), Insert("b", 3, 6, 13.0)])
    with pytest.raises(UdmInvocationError) as info:
        host.process(Cti(100))
    message = str(info.value)
    assert "UDM 'unlucky' failed on window [" in message
    assert "while processing Cti(100): ZeroDivisionError: 13 is unlucky" in message
    assert "the window's events: " in message
    assert "id='b' [3, 6) 13.0" in message
    assert [e.split(" ")[0] for e in info.value.events][-1] == "id='b'"


def test_an_error_on_a_speculative_window_state_is_raised_when_met() -> None:
    """Found by hypothesis: e3 [0, 5) makes the snapshot window [2, 4), whose
    at_starts output at 0 lies before the window: the default clip policy
    rejects it when the window is computed, although e3's later shortening to
    [0, 2) would have removed it. The reference on the stream up to e3 agrees."""
    stream = [
        Cti(0),
        Insert("e1", 0, 2, 2),
        Insert("e2", 4, 5, 9),
        Insert("e3", 0, 5, 6),
        Insert("e4", 4, 5, 3),
        Insert("e5", 3, 4, 2),
        Insert("e6", 10, 13, 9),
        Retract("e3", 0, 5, 2),
    ]
    host = Host(SnapshotWindow(), at_starts)
    with pytest.raises(
        UdmInvocationError, match=r"window \[2, 4\) while processing Insert\(id='e3'"
    ):
        host.process_many(stream)
    assert isinstance(
        reference_or_error(derive_cht(stream[:4])[0], SnapshotWindow(), at_starts), Exception
    )
    assert not isinstance(
        reference_or_error(derive_cht(stream)[0], SnapshotWindow(), at_starts), Exception
    )


class Items(IncrementalAggregate):
    """Counts each value in a dict it updates in place, and returns that
    live dict as the result."""

    def initial_state(self) -> dict[str, int]:
        return {}

    def add(self, state: dict[str, int], payload: int) -> dict[str, int]:
        state[str(payload)] = state.get(str(payload), 0) + 1
        return state

    def remove(self, state: dict[str, int], payload: int) -> dict[str, int]:
        state[str(payload)] -= 1
        if not state[str(payload)]:
            del state[str(payload)]
        return state

    def result(self, state: dict[str, int]) -> dict[str, int]:
        return state


@pytest.mark.parametrize("window", [TumblingWindow(10), HoppingWindow(10, 5), SnapshotWindow()])
def test_a_result_that_is_the_live_state_is_copied_out(window: Any) -> None:
    """An output must not change when the state it was read from does: the
    late event over [0, 10) retracts the window's earlier output and inserts
    the new one, and every emitted element keeps the payload it had."""
    stream = [
        Insert("a", 0, 10, 5),
        point("b", 12, 1),
        Insert("c", 0, 10, 2),
        point("d", 14, 7),
        Cti(40),
    ]
    host = Host(window, Items)
    outputs, seen = [], []
    for element in stream:
        got = host.process(element)
        outputs += got
        seen += [repr(e) for e in got]
    assert [repr(e) for e in outputs] == seen
    assert output_cht(outputs) == evaluate(derive_cht(stream)[0], window, Items)
    if isinstance(window, TumblingWindow):
        assert [(type(e).__name__, e.start, e.payload) for e in outputs[:3]] == [
            ("Insert", 0, {"5": 1}),
            ("Retract", 0, {"5": 1}),
            ("Insert", 0, {"5": 1, "2": 1}),
        ]


@pytest.mark.parametrize("fast", [True, False])
def test_an_event_ending_at_the_cti_is_kept_for_a_retraction_past_a_gap(fast: bool) -> None:
    """HoppingWindow(3, 5) has gaps. X = [6, 9) ends in the gap [8, 10) and
    at the CTI 9, so a retraction may still extend it (sync time 9) into
    window [10, 13): cleanup must not forget X, even once the host holds
    enough events for its amortized sweep to run."""
    filler = [Insert(f"f{i}", 0, 1, 0) for i in range(80)]
    stream = [
        *filler,
        Insert("X", 6, 9, 100),
        Insert("Y", 11, 12, 1),
        Cti(9),
        Retract("X", 6, 9, 12),
        Cti(20),
    ]
    host = Host(HoppingWindow(3, 5), Sum, fast_path=fast)
    got = output_cht(run(host, stream))
    assert [(e.start, e.end, e.payload) for e in got.sorted() if e.start >= 10] == [(10, 13, 101)]
    assert got == evaluate(derive_cht(stream)[0], HoppingWindow(3, 5), Sum)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
def test_events_inserted_after_a_prune_in_the_same_batch_stay_retractable(fast: bool) -> None:
    # The validator forgets expired events once its live set doubled; a
    # batch inserting after that prune must still record its events there.
    stream: list[Any] = [point(i, i, i) for i in range(3000)]
    stream += [Cti(3000), Insert("x", 3000, 3001, 5), Retract("x", 3000, 3001, 3002), Cti(3010)]
    host = Host(TumblingWindow(1000), Sum, fast_path=fast)
    out = host.process_many(stream) + host.flush()
    expected = evaluate(derive_cht(stream)[0], TumblingWindow(1000), Sum)
    assert output_cht(out) == expected
    # expired points were pruned, or (the grid path's batch loop registers
    # its events lazily, skipping those a CTI expires) never recorded; the
    # first event of the stream went through the per-element path
    live = set(host.validator.live)
    assert {2999, "x"} <= live and live <= {0, 2999, "x"}


@pytest.mark.parametrize("window", [HoppingWindow(10_000, 10), SnapshotWindow()], ids=repr)
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
def test_an_expired_events_id_is_reused_while_its_windows_are_open(window: Any, fast: bool) -> None:
    # "a" ended before the CTI but its windows are still open when its id is
    # reused; a UDM error in between must not lose either event.
    stream: list[Any] = [Insert("a", 5, 6, 1), point("b", 8, 2), Cti(50)]
    stream += [Insert("a", 60, 61, 4), Retract("a", 60, 61, 70), Cti(20_000)]
    expected = evaluate(derive_cht(stream)[0], window, Sum)
    assert len(derive_cht(stream)[0]) == 3
    host = Host(window, Fragile, fast_path=fast)
    out = host.process_many(stream[:3])
    with pytest.raises(UdmInvocationError):
        host.process(Insert("a", 55, 56, 13))
    out += host.process_many(stream[3:]) + host.flush()
    assert output_cht(out) == expected
    resumed = Host(window, Sum, fast_path=fast)
    first = Host(window, Sum, fast_path=fast)
    got = first.process_many(stream[:4])
    resumed.restore(first.snapshot())
    got += resumed.process_many(stream[4:]) + resumed.flush()
    assert output_cht(got) == expected


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize(
    "bad",
    [
        Insert("low", -(2**63) + 1, 5, 100),  # from the beginning of time
        point("high", INFINITY - 5, 100),  # its window would end after INFINITY
        Retract("a", 1, 2, INFINITY - 1),  # an expansion into that window
    ],
)
def test_events_grid_windows_cannot_hold_are_refused(fast_path: bool, bad: Any) -> None:
    """Before, an event starting at MIN_TIME made the host enumerate 9.2e16
    tumbling windows (it hung), and one near INFINITY got a window ending
    past it. Now it is refused like any invalid element: the host is left
    as it was, and the rest of the stream gives what it gives without it."""
    before, after = [point("a", 1, 5), point("b", 4, 7)], [Cti(10), point("c", 12, 1), Cti(20)]
    expected = Host(TumblingWindow(10), Sum).process_many(before + after)
    for feed in ("process", "process_many", "process_inserts"):
        host = Host(TumblingWindow(10), Sum, fast_path=fast_path)
        out = host.process_many(before)
        with pytest.raises(InvalidElementError, match=r"cannot be windowed by TumblingWindow"):
            if feed == "process" or type(bad) is not Insert:
                host.process(bad)
            elif feed == "process_many":
                host.process_many([bad])
            else:
                host.process_inserts([bad.id], [bad.start], [bad.end], [bad.payload])
        assert out + host.process_many(after) == expected, feed


@pytest.mark.parametrize("udm", [Sum, total])  # the fast path, the general path
def test_process_inserts_refuses_columns_of_different_lengths(udm: Any) -> None:
    """The general path zipped the columns and silently dropped the
    inserts past the shortest; the fast path applied some, then raised a
    bare IndexError."""
    host = Host(TumblingWindow(10), udm)
    with pytest.raises(ValueError) as err:
        host.process_inserts(["a", "b"], [6, 7], [7, 8], [1])
    assert str(err.value) == (
        "process_inserts needs columns of one length, one entry per insert; "
        "got ids 2, starts 2, ends 2, payloads 1"
    )
    assert host.memory_size == (0, 0)  # nothing applied
    assert output_cht(host.process_inserts(["a"], [6], [7], [1]) + host.flush()) == [(0, 10, 1)]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("feed", ["process", "process_many", "process_inserts"])
@pytest.mark.parametrize(
    ("key", "payload", "cause"),
    [
        (
            "k",
            {"v": 1},
            "KeyError: \"payload {'v': 1} has no field 'k'; check the key= argument of the query\"",
        ),
        (lambda p: 1 // p["v"], {"v": 0}, "ZeroDivisionError: integer division or modulo by zero"),
        (lambda p: [1] if p["v"] == 1 else 1, {"v": 1}, "TypeError: unhashable type: 'list'"),
    ],
)
def test_a_key_that_cannot_be_computed_is_one_error_on_every_path(
    fast: bool, feed: str, key: Any, payload: Any, cause: str
) -> None:
    """The fast path let the key function's own exception (a bare KeyError)
    escape without naming the element; the general path raised ValueError."""
    host = Host(TumblingWindow(10), Sum, key=key, value="v", fast_path=fast)
    host.process(Insert("ok", 1, 2, {"v": 5, "k": "x"}))
    bad = Insert("a", 1, 2, payload)
    with pytest.raises(ValueError) as err:
        if feed == "process":
            host.process(bad)
        elif feed == "process_many":
            host.process_many([bad])
        else:
            host.process_inserts([bad.id], [bad.start], [bad.end], [bad.payload])
    assert str(err.value) == f"cannot compute the group key of {bad!r}: {cause}"
    # nothing of the bad insert was applied
    assert output_cht(host.flush()) == [(0, 10, 5)]
