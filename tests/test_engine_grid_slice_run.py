"""The slice mode's own batch loop (``udm.host.gridslicerun``, issue 31):
over point events in order it emits the window each insert makes due
inline (slice, UDM, output) and registers the key in the due heap inline.
Compared exactly with feeding the same elements one at a time (outputs,
ids and their order, errors), with the reference
evaluator, and with hand-computed medians; point streams, so the inline
emission is what runs, with late events, shared starts (ties), reused keys
and UDM errors that make it step aside or undo an insert."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    TumblingWindow,
    UdmInvocationError,
    derive_cht,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.hoststate import id_counter
from udm.host.stream import Element
from udm.sdk import aggregate, operator


@aggregate
def low_median(values: list[int]) -> int:
    """Non-incremental: the slice mode."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@aggregate
def first_minus_last(values: list[int]) -> int:
    """Order-sensitive: the canonical order (start, then payload) shows."""
    return values[0] - values[-1]


FAILING = {"on": True}


@aggregate
def fails_on_13(values: list[int]) -> int:
    """Fails on any window holding a 13 while ``FAILING["on"]``."""
    if 13 in values and FAILING["on"]:
        raise ValueError("thirteen")
    return sum(values)


@operator
def above_low(values: list[int]) -> list[int]:
    """An operator: the loop's general emission, outputs matched by payload."""
    if len(values) < 2:
        return []
    m = sorted(values)[(len(values) - 1) // 2]
    return [v for v in values if v > m]


def point_stream(rng: random.Random, n: int, keys: int, late: float, ties: float) -> list[Element]:
    """Point events of ``keys`` keys, mostly in order (``late``: the share
    starting up to 3 ticks back, at or after the CTI; ``ties``: the share at
    the previous event's start), a CTI a few ticks behind now and then."""
    out: list[Element] = []
    t = cti = 0
    for i in range(n):
        r = rng.random()
        if r < ties:
            s = max(t, cti)
        elif r < ties + late:
            s = max(cti, t - rng.randint(1, 3))
        else:
            t += rng.randint(0, 3)
            s = t
        out.append(Insert(i, s, s + 1, {"k": rng.randrange(keys), "v": rng.randint(0, 20)}))
        if rng.random() < 0.1:
            cti = max(cti, t - rng.randint(0, 4))
            out.append(Cti(cti))
    return out


def one_by_one(host: Host, stream: list[Element]) -> list[Element]:
    return [o for e in stream for o in host.process(e)]


SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("udm", [low_median, first_minus_last, above_low], ids=repr)
@pytest.mark.parametrize("window", [HoppingWindow(8, 2), TumblingWindow(4), HoppingWindow(3, 5)])
@SETTINGS
@given(
    seed=st.integers(0, 10**6),
    keys=st.sampled_from([1, 3, 30]),
    late=st.sampled_from([0.0, 0.1]),
    ties=st.sampled_from([0.0, 0.1]),
    cut=st.floats(0, 1),
)
def test_point_streams_in_a_batch_give_the_outputs_of_one_element_at_a_time(
    udm: Any, window: Any, seed: int, keys: int, late: float, ties: float, cut: float
) -> None:
    stream = point_stream(random.Random(seed), 120, keys, late, ties)
    one = Host(window, udm, key="k", value="v")
    expected = one_by_one(one, stream)
    batched = Host(window, udm, key="k", value="v")
    assert batched._fast is not None and batched._fast.lazy
    at = int(len(stream) * cut)
    got = batched.process_many(stream[:at]) + batched.process_many(stream[at:])
    assert got == expected
    got += batched.flush()
    assert got == expected + one.flush()
    reference = evaluate_by_key(derive_cht(stream)[0], "k", window, udm, value="v")
    assert output_cht_by_key(got) == {k: c for k, c in reference.items() if c}


@SETTINGS
@given(seed=st.integers(0, 10**6), keys=st.sampled_from([1, 5]))
def test_columns_in_the_slice_mode_give_the_outputs_of_elements(seed: int, keys: int) -> None:
    """``process_inserts`` (rows as tuples) takes the same loop."""
    inserts = [
        e for e in point_stream(random.Random(seed), 150, keys, 0.1, 0.1) if isinstance(e, Insert)
    ]
    window = HoppingWindow(6, 2)
    one = Host(window, low_median, key="k", value="v")
    expected = one_by_one(one, inserts)  # type: ignore[arg-type]
    columns = Host(window, low_median, key="k", value="v")
    got = columns.process_inserts(
        [e.id for e in inserts],
        [e.start for e in inserts],
        [e.end for e in inserts],
        [e.payload for e in inserts],
    )
    assert got == expected


def test_hand_computed_medians_of_one_key() -> None:
    """Hopping windows of 4 every 2 over points at 0..7 with values
    5, 1, 4, 2, 8, 3, 6, 7: window [-2, 2) holds 5, 1; [0, 4) 5, 1, 4, 2;
    [2, 6) 4, 2, 8, 3; [4, 8) 8, 3, 6, 7; [6, 10) 6, 7 (lower medians). Each
    insert at an even time makes the window ending there due; the batch
    emits them in the loop, with ids in order."""
    values = [5, 1, 4, 2, 8, 3, 6, 7]
    stream = [Insert(t, t, t + 1, {"k": "a", "v": v}) for t, v in enumerate(values)]
    host = Host(HoppingWindow(4, 2), low_median, key="k", value="v")
    out = host.process_many(stream)
    assert [(o.id.n, o.start, o.end, o.payload) for o in out] == [
        (0, -2, 2, 1),
        (1, 0, 4, 2),
        (2, 2, 6, 3),
    ]
    rest = host.flush()
    assert [(o.start, o.end, o.payload) for o in rest if isinstance(o, Insert)] == [
        (4, 8, 6),
        (6, 10, 6),
    ]


def test_the_loop_issues_the_host_s_own_ids_and_writes_the_counter_back() -> None:
    """The loop issues output ids itself when the grid path's id method is
    its host's own (``id_counter``), and writes the counter back: the next
    element, fed alone, takes the next id. The medians of
    :func:`test_hand_computed_medians_of_one_key`, then a point at 8 that
    makes window [4, 8) due (8, 3, 6, 7: lower median 6)."""
    values = [5, 1, 4, 2, 8, 3, 6, 7]
    stream = [Insert(t, t, t + 1, {"k": "a", "v": v}) for t, v in enumerate(values)]
    host = Host(HoppingWindow(4, 2), low_median, key="k", value="v")
    assert id_counter(host._new_id) is host
    assert id_counter(lambda key: None) is None
    assert [o.id for o in host.process_many(stream)] == [("a", 0), ("a", 1), ("a", 2)]
    assert host.next_out == 3
    out = host.process(Insert(8, 8, 9, {"k": "a", "v": 0}))
    assert [(o.id, o.start, o.end, o.payload) for o in out] == [(("a", 3), 4, 8, 6)]


@pytest.mark.parametrize("window", [HoppingWindow(6, 2), TumblingWindow(3)], ids=repr)
@pytest.mark.parametrize("seed", range(8))
def test_a_udm_error_in_the_loop_is_the_error_of_one_element_at_a_time(
    window: Any, seed: int
) -> None:
    """The UDM fails on the window an insert makes due: the batch raises
    the error feeding one element at a time raises (message, element), with
    the outputs before it and its position; both hosts are left as before
    that element, and give the same outputs once it is skipped."""
    rng = random.Random(seed)
    stream = point_stream(rng, 120, 3, 0.05, 0.05)
    # a 13 somewhere in the first half: its window fails when due
    at = next(i for i in range(rng.randrange(20, 60), len(stream)) if type(stream[i]) is Insert)
    e = stream[at]
    assert isinstance(e, Insert)
    stream[at] = Insert(e.id, e.start, e.end, {"k": e.payload["k"], "v": 13})
    one = Host(window, fails_on_13, key="k", value="v")
    batched = Host(window, fails_on_13, key="k", value="v")
    FAILING["on"] = True
    try:
        expected: list[Element] = []
        failed = None
        for i, el in enumerate(stream):
            try:
                expected.extend(one.process(el))
            except UdmInvocationError as exc:
                failed = (i, str(exc))
                break
        if failed is None:  # its windows were never due within the stream
            assert batched.process_many(stream) == expected
            return
        with pytest.raises(UdmInvocationError) as info:
            batched.process_many(stream)
        assert (info.value.position, str(info.value)) == failed  # type: ignore[attr-defined]
        assert info.value.outputs == expected  # type: ignore[attr-defined]
    finally:
        FAILING["on"] = False
    # both left as before the failing element: the same outputs from there
    rest = stream[failed[0] :]
    assert batched.process_many(rest) == one_by_one(one, rest)
    assert batched.flush() == one.flush()


def test_flush_pauses_the_garbage_collector_as_process_many_does() -> None:
    """Windows computed at the end of the stream run with the collector
    paused, and it runs again after (unless it was off already)."""
    import gc

    seen: list[bool] = []

    @aggregate
    def watching(values: list[int]) -> int:
        seen.append(gc.isenabled())
        return len(values)

    host = Host(TumblingWindow(4), watching, key="k", value="v")
    host.process_many([Insert(i, i, i + 1, {"k": 0, "v": i}) for i in range(3)])
    assert seen == []
    assert gc.isenabled()
    out = host.flush()
    assert [(o.start, o.end, o.payload) for o in out if isinstance(o, Insert)] == [(0, 4, 3)]
    assert seen == [False]
    assert gc.isenabled()
