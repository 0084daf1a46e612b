"""The host's grid path at many keys (issue 31): CTIs that visit only the
keys with something due, windows read as slices of each key's sorted events
(time-insensitive aggregates that cannot add and remove), and batches of
in-order inserts of any key applied in one loop. Every output is compared
with the reference evaluator, per key, on streams with late events, every
kind of retraction and CTIs at random points."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import Max, Sum, physical_streams, random_stream, total
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    IntervalEvent,
    InvalidElementError,
    Retract,
    TumblingWindow,
    UdmInvocationError,
    derive_cht,
    evaluate,
    evaluate_by_key,
    output_cht,
    output_cht_by_key,
)
from udm.host.griddue import LINGER
from udm.host.stream import Element
from udm.sdk import IncrementalAggregate, IncrementalOperator, aggregate, operator


@aggregate
def low_median(values: list[int]) -> int:
    """Non-incremental and sensitive to every member."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@aggregate(order_insensitive=False)
def sequence(values: list[int]) -> tuple[int, ...]:
    """Order-sensitive: the members in the order the UDM sees them."""
    return tuple(values)


class Ordered(IncrementalAggregate):
    """Incremental, invertible but order-sensitive: the slice mode rebuilds
    it from each window's slice with add_many."""

    properties = IncrementalAggregate.properties.__class__(order_insensitive=False)

    def initial_state(self) -> tuple[int, ...]:
        return ()

    def add(self, state: tuple[int, ...], payload: int) -> tuple[int, ...]:
        return (*state, payload)

    def remove(self, state: tuple[int, ...], payload: int) -> tuple[int, ...]:
        i = state.index(payload)
        return state[:i] + state[i + 1 :]

    def result(self, state: tuple[int, ...]) -> tuple[int, ...]:
        return state


WINDOWS = [TumblingWindow(4), HoppingWindow(6, 2), HoppingWindow(2, 5, offset=1)]
SLICED = [total, low_median, sequence, Ordered, Max]
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(stream: list[Element], window: Any, udm: Any, policy: str) -> Any:
    cht = derive_cht(stream)[0]
    found = evaluate_by_key(cht, "k", window, udm, value="v", output_policy=policy)
    return {k: c for k, c in found.items() if len(c)}  # keys whose events fall between windows


def outputs(host: Host, stream: list[Element], batch: str) -> list[Element]:
    """Feed ``stream`` one element at a time, as one batch, or with runs of
    inserts as columns (``process_inserts``) between the other elements."""
    if batch == "one":
        out = [o for e in stream for o in host.process(e)]
    elif batch == "many":
        out = host.process_many(stream)
    else:
        out = []
        run: list[Insert] = []
        for e in [*stream, None]:
            if isinstance(e, Insert):
                run.append(e)
                continue
            if run:
                columns = ([r.id for r in run], [r.start for r in run], [r.end for r in run])
                out += host.process_inserts(*columns, [r.payload for r in run])
                run = []
            if e is not None:
                out += host.process(e)
    return out + host.flush()


def test_the_slice_mode_is_taken_where_add_and_remove_cannot_serve() -> None:
    for udm in SLICED:
        fast = Host(TumblingWindow(4), udm)._fast
        assert fast is not None and fast.slices, udm
    fast = Host(TumblingWindow(4), Sum)._fast
    assert fast is not None and not fast.slices
    assert Host(TumblingWindow(4), total, fast_path=False)._fast is None


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("udm", [*SLICED, Sum], ids=lambda u: getattr(u, "__name__", repr(u)))
@SETTINGS
@given(data=st.data(), stream=physical_streams(max_size=60, keys=5))
def test_many_keys_match_the_reference(window: Any, udm: Any, data: Any, stream: list[Any]) -> None:
    policy = data.draw(st.sampled_from(["align", "point_end"]), label="policy")
    consistency = data.draw(st.sampled_from(["speculative", "conservative"]), label="mode")
    batch = data.draw(st.sampled_from(["one", "many", "columns"]), label="batch")
    host = Host(window, udm, key="k", value="v", output_policy=policy, consistency=consistency)
    expected = reference(stream, window, udm, policy)
    assert output_cht_by_key(outputs(host, stream, batch)) == expected


@pytest.mark.parametrize("udm", [low_median, Sum], ids=lambda u: getattr(u, "__name__", "Sum"))
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), cut=st.floats(0, 1))
def test_snapshot_restore_mid_stream_resumes_identically(udm: Any, seed: int, cut: float) -> None:
    resumes_identically(udm, seed, cut)


def resumes_identically(udm: Any, seed: int, cut: float) -> None:
    """A host snapshotted at ``cut`` of a random stream and restored goes on
    as the host that ran straight through."""
    stream = random_stream(random.Random(seed), 120, keys=7)
    at = int(len(stream) * cut)
    window = HoppingWindow(6, 2)
    straight = Host(window, udm, key="k", value="v")
    expected = straight.process_many(stream) + straight.flush()
    first = Host(window, udm, key="k", value="v")
    head = first.process_many(stream[:at])
    resumed = Host(window, udm, key="k", value="v")
    resumed.restore(first.snapshot())
    assert head + resumed.process_many(stream[at:]) + resumed.flush() == expected


@pytest.mark.parametrize("udm", [low_median, Sum], ids=lambda u: getattr(u, "__name__", "Sum"))
def test_a_cti_visits_only_the_keys_it_has_work_for(udm: Any) -> None:
    """1,000 keys with windows ending at 10, one key with a window ending at
    100: a CTI at 50 finalizes the 1,000 keys' windows, a CTI at 90 has
    nothing to do and visits no key, a CTI at 100 visits the one key."""
    host = Host(TumblingWindow(10), udm, key="k", value="v")
    fast = host._fast
    assert fast is not None
    visited: list[int] = []
    due_keys = fast._due_keys

    def counting(c: int, k_final: int | None) -> list[Any]:
        found = due_keys(c, k_final)
        visited.append(len(found))
        return found

    fast._due_keys = counting  # type: ignore[method-assign]
    host.process_many([Insert(i, 5, 6, {"k": i, "v": i}) for i in range(1000)])
    host.process(Insert("late", 95, 96, {"k": "late", "v": 1}))
    host.process(Cti(50))
    host.process(Cti(90))
    out = host.process(Cti(100))
    assert visited == [1000, 0, 1]
    assert [o.payload for o in out if isinstance(o, Insert)] == [1]
    # no window is left; the slice mode also retired every event at the
    # visits (the id index of the add/remove mode is swept amortized)
    assert fast.memory_size()[1] == 0
    assert fast.memory_size()[0] == (0 if fast.slices else 1)  # swept at Cti(50)


def test_a_batch_error_names_the_failing_insert_after_a_run() -> None:
    """A run applied inserts before the failing one: the error's position
    is the failing insert's, and the inserts before it stay applied."""
    host = Host(TumblingWindow(10), Sum, key="k", value="v")
    host.process(Insert("a", 0, 1, {"k": 1, "v": 1}))
    batch = [Insert(f"e{i}", 1, 2, {"k": 1, "v": i}) for i in range(5)]
    batch.append(Insert("bad", 1, 2, {"k": 1}))
    with pytest.raises(UdmInvocationError) as caught:
        host.process_many(batch)
    assert caught.value.position == 5  # type: ignore[attr-defined]
    assert host.validator.position == 6  # "a" and the five applied inserts
    out = host.flush()
    assert [o.payload for o in out if isinstance(o, Insert)] == [11]


@pytest.mark.parametrize("fast", [True, False])
def test_live_outputs_are_the_open_windows_outputs_on_every_path(fast: bool) -> None:
    host = Host(TumblingWindow(10), low_median, fast_path=fast)
    host.process_many([Insert("a", 1, 2, 5), Insert("b", 12, 13, 7), Cti(5)])
    assert [(e.start, e.end, e.payload) for e in host.live_outputs()] == [(0, 10, 5)]


@aggregate
def fragile_median(values: list[int]) -> int:
    """Fails on a window holding 13."""
    if 13 in values:
        raise ZeroDivisionError("thirteen")
    return sorted(values)[(len(values) - 1) // 2]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_a_failing_element_leaves_the_slices_unchanged(window: Any, seed: int) -> None:
    """Elements on which the UDM fails (a window holding 13 is computed)
    are undone: a host that met them and went on gives the outputs of a
    host that never saw them (which then meets no failure either). Elements
    that refer to a skipped one are refused, and skipped, too."""
    rng = random.Random(seed)
    stream = []
    for e in random_stream(rng, 80, keys=3):
        if isinstance(e, Insert) and rng.random() < 0.15:
            e = Insert(e.id, e.start, e.end, {**e.payload, "v": 13})
        stream.append(e)
    faulty = Host(window, fragile_median, key="k", value="v")
    accepted, out_faulty = [], []
    for e in stream:
        try:
            out_faulty += faulty.process(e)
        except UdmInvocationError as exc:
            assert "thirteen" in str(exc) and "window [" in str(exc)
            continue
        except InvalidElementError:  # refers to an element skipped before
            continue
        accepted.append(e)
    clean = Host(window, fragile_median, key="k", value="v")
    out_clean = [o for e in accepted for o in clean.process(e)]
    assert out_faulty == out_clean


def feed(host: Host, elements: list[Element], batch: str) -> list[Element]:
    """``elements`` as one ``process_many`` batch or as columns."""
    if batch == "many":
        return host.process_many(elements)
    inserts: list[Any] = elements
    return host.process_inserts(
        [e.id for e in inserts],
        [e.start for e in inserts],
        [e.end for e in inserts],
        [e.payload for e in inserts],
    )


@pytest.mark.parametrize("batch", ["many", "columns"])
def test_a_window_failing_when_a_batch_insert_makes_it_due_undoes_that_insert(batch: str) -> None:
    """In a batch, the slice mode emits the windows an in-order insert makes
    due inside its loop: when the UDM fails on one, the insert is undone
    (its slices, counts and outputs), the error names it and its position,
    and the host goes on as one that never saw it."""

    def ins(ident: str, t: int, v: int) -> Insert:
        return Insert(ident, t, t + 1, {"k": 0, "v": v})

    before = [ins("a", 1, 1), ins("b", 11, 13), ins("c", 15, 2)]
    failing = ins("d", 25, 3)
    faulty = Host(TumblingWindow(10), fragile_median, key="k", value="v")
    with pytest.raises(UdmInvocationError, match="thirteen") as info:
        feed(faulty, [*before, failing], batch)
    assert info.value.position == 3  # type: ignore[attr-defined]
    assert info.value.element == failing
    assert info.value.window == "[10, 20)"
    # [0, 10) was emitted when b arrived: 1, its only member
    assert [(o.start, o.end, o.payload) for o in info.value.outputs] == [(0, 10, 1)]  # type: ignore[attr-defined]
    clean = Host(TumblingWindow(10), fragile_median, key="k", value="v")
    assert feed(clean, before, batch) == info.value.outputs  # type: ignore[attr-defined]
    assert faulty.memory_size == clean.memory_size
    rest = [Retract("b", 11, 12, 11), ins("d", 25, 5), ins("e", 31, 4)]
    out = faulty.process_many(rest) + faulty.flush()
    assert out == clean.process_many(rest) + clean.flush()
    assert [(o.start, o.payload) for o in out if isinstance(o, Insert)] == [
        (10, 2),
        (20, 5),
        (30, 4),
    ]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@SETTINGS
@given(seed=st.integers(0, 10**6))
def test_batches_and_columns_emit_the_same_elements(window: Any, seed: int) -> None:
    """The batch loop's emission of due windows gives the very elements
    (ids, order) that the columnar loop gives, on streams with late events,
    retractions and CTIs."""
    stream = random_stream(random.Random(seed), 120, keys=4)
    a = outputs(Host(window, low_median, key="k", value="v"), stream, "many")
    b = outputs(Host(window, low_median, key="k", value="v"), stream, "columns")
    assert a == b


@operator
def at_least_median(values: list[int]) -> list[int]:
    """Zero or more outputs, duplicates among them: the members at or above
    the low median, in the order the UDM sees them (none for one member)."""
    if len(values) < 2:
        return []
    m = sorted(values)[(len(values) - 1) // 2]
    return [v for v in values if v >= m]


class Evens(IncrementalOperator):
    """Incremental, order-sensitive, with a lazy result (a generator over
    its state, read at once)."""

    properties = IncrementalOperator.properties.__class__(order_insensitive=False)

    def initial_state(self) -> tuple[int, ...]:
        return ()

    def add(self, state: tuple[int, ...], payload: int) -> tuple[int, ...]:
        return (*state, payload)

    def remove(self, state: tuple[int, ...], payload: int) -> tuple[int, ...]:
        i = state.index(payload)
        return state[:i] + state[i + 1 :]

    def result(self, state: tuple[int, ...]) -> Any:
        return (v for v in state if v % 2 == 0)


OPERATORS = [at_least_median, Evens]


def test_operators_are_read_as_slices() -> None:
    for udm in OPERATORS:
        fast = Host(HoppingWindow(6, 2), udm)._fast
        assert fast is not None and fast.slices and fast.operator, udm


def test_an_operator_window_changes_by_its_outputs_difference() -> None:
    """Hand-computed: tumbling 10, one key. The window [0, 10) holds 1, 5,
    5 (outputs 5, 5); a late 9 makes its outputs 5, 5, 9 (one insert); the
    retraction of a 5 leaves 1, 5, 9: outputs 5, 9 (one 5 retracted)."""
    host = Host(TumblingWindow(10), at_least_median)
    out = host.process_many(
        [Insert("a", 1, 2, 1), Insert("b", 3, 4, 5), Insert("c", 4, 5, 5), Insert("d", 11, 12, 0)]
    )
    assert [(type(o).__name__, o.id.n, o.payload) for o in out] == [
        ("Insert", 0, 5),
        ("Insert", 1, 5),
    ]
    out = host.process(Insert("e", 8, 9, 9))
    assert [(type(o).__name__, o.id.n, o.start, o.end, o.payload) for o in out] == [
        ("Insert", 2, 0, 10, 9)
    ]
    out = host.process(Retract("c", 4, 5, 4))
    assert [(type(o).__name__, o.id.n, o.payload) for o in out] == [("Retract", 1, 5)]
    assert sorted(e.payload for e in host.live_outputs()) == [5, 9]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("udm", OPERATORS, ids=lambda u: getattr(u, "__name__", repr(u)))
@SETTINGS
@given(data=st.data(), stream=physical_streams(max_size=60, keys=5))
def test_operators_on_many_keys_match_the_reference(
    window: Any, udm: Any, data: Any, stream: list[Any]
) -> None:
    """Operators in the slice mode, on streams with late events, every kind
    of retraction and CTIs, against the reference (and the general path)."""
    policy = data.draw(st.sampled_from(["align", "point_end"]), label="policy")
    consistency = data.draw(st.sampled_from(["speculative", "conservative"]), label="mode")
    batch = data.draw(st.sampled_from(["one", "many", "columns"]), label="batch")
    host = Host(window, udm, key="k", value="v", output_policy=policy, consistency=consistency)
    expected = reference(stream, window, udm, policy)
    assert output_cht_by_key(outputs(host, stream, batch)) == expected
    general = Host(
        window,
        udm,
        key="k",
        value="v",
        output_policy=policy,
        consistency=consistency,
        fast_path=False,
    )
    assert output_cht_by_key(outputs(general, stream, "one")) == expected


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), cut=st.floats(0, 1))
def test_an_operator_resumes_from_a_snapshot_identically(seed: int, cut: float) -> None:
    resumes_identically(at_least_median, seed, cut)


def test_the_slices_keep_a_bounded_number_of_events() -> None:
    """The slice mode retires a key's events in bulk (once half of them end
    before every open window), not at every CTI: a long in-order stream
    still keeps at most about twice the events a CTI cannot retire (here
    10 ticks of windows plus 10 of CTI lag: 21 events) plus the 10 that
    arrive between CTIs and those of the ``LINGER`` hops a key's visit may
    wait, and the outputs are the reference's."""
    window = HoppingWindow(10, 2)
    host = Host(window, low_median, key="k", value="v")
    fast = host._fast
    assert fast is not None and fast.slices
    stream: list[Element] = []
    held = []
    for t in range(1000):
        stream.append(Insert(t, t, t + 1, {"k": 0, "v": t % 7}))
        if t % 10 == 9:
            stream.append(Cti(t - 10))
    out: list[Element] = []
    for element in stream:
        out.extend(host.process_many([element]))
        kev = fast.keys[0].events
        assert kev is not None
        held.append(len(kev))
    out.extend(host.flush())
    assert max(held) <= 2 * 21 + 10 + LINGER * 2
    assert min(held[500:]) >= 19  # what the open windows and the CTI lag keep
    cht = [IntervalEvent(t, t + 1, t % 7) for t in range(1000)]
    assert output_cht(out) == evaluate(cht, window, low_median)


@pytest.mark.parametrize("udm", [low_median, at_least_median], ids=lambda u: u.__name__)
def test_a_window_emptied_before_it_is_due_emits_nothing(udm: Any) -> None:
    """The slice mode's windows record only that they exist: a window whose
    every event was retracted before it became due has an empty slice, so
    it emits nothing and is forgotten; its neighbour emits its own."""
    host = Host(TumblingWindow(10), udm, key="k", value="v")
    assert host._fast is not None and host._fast.slices
    stream: list[Element] = [
        Insert("a", 1, 2, {"k": 0, "v": 4}),
        Insert("b", 3, 4, {"k": 0, "v": 5}),
        Retract("a", 1, 2, 1),
        Retract("b", 3, 4, 3),
        Insert("c", 12, 13, {"k": 0, "v": 6}),
        Insert("d", 25, 26, {"k": 0, "v": 7}),
    ]
    out = host.process_many(stream)
    assert [(o.start, o.end) for o in out if isinstance(o, Insert)] == (
        [(10, 20)] if udm is low_median else []  # at_least_median: none for one member
    )
    assert 0 not in host._fast.keys[0].wins
    out += host.flush()
    cht = derive_cht(stream)[0]
    assert output_cht(out) == evaluate(cht, TumblingWindow(10), udm, value="v")
