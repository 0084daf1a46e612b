"""The grid path's batch loop at many keys (issue 31): a new key's first
event and a key with no window left to emit stay in the loop, the loop
leaves its events out of the validator's index until something reads it
(``settle``), and outputs are built without the dataclass ``__init__``.
Each is compared exactly: outputs (ids and order included) with feeding the
same elements one at a time, output CHTs with the reference evaluator, and
hand-computed values."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random
from typing import Any

import pytest
from engine_support import Mean, Sum, random_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
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
from udm.host.stream import insert_of, retract_of
from udm.sdk import IncrementalAggregate, aggregate, operator


class Fourteen(IncrementalAggregate):
    """A sum whose result fails at 14 (a CTI can fail)."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def result(self, state: int) -> int:
        if state == 14:
            raise ValueError("fourteen")
        return state


def test_built_elements_equal_the_constructed_ones() -> None:
    assert insert_of("a", 1, 5, {"v": 2}) == Insert("a", 1, 5, {"v": 2})
    assert repr(insert_of(3, 0, 1, 2.5)) == "Insert(id=3, start=0, end=1, payload=2.5)"
    assert retract_of("a", 1, 5, 3, 7) == Retract("a", 1, 5, 3, 7)
    assert hash(insert_of(1, 2, 3, 4)) == hash(Insert(1, 2, 3, 4))


def test_built_elements_are_frozen_elements_with_their_fields_in_place() -> None:
    """insert_of and retract_of fill a plain class's slots and then switch
    the object's class: it must be the element class itself (the host
    checks types by identity), frozen, each field in its own slot (a
    swapped slot order would swap the values), and behave as a constructed
    element for pickling, copying and ``dataclasses.replace``."""
    e = insert_of(("k", 1), 5, 6, {"a": 1})
    r = retract_of("x", 1, 9, 4, 2.5)
    assert type(e) is Insert and type(r) is Retract
    assert (e.id, e.start, e.end, e.payload) == (("k", 1), 5, 6, {"a": 1})
    assert (r.id, r.start, r.old_end, r.new_end, r.payload) == ("x", 1, 9, 4, 2.5)
    for element, field in ((e, "start"), (r, "new_end")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(element, field, 0)
    assert pickle.loads(pickle.dumps(e)) == e and type(pickle.loads(pickle.dumps(r))) is Retract
    assert copy.deepcopy(r) == r
    assert dataclasses.replace(e, id=2) == Insert(2, 5, 6, {"a": 1})


def test_new_keys_and_keys_without_windows_in_one_batch() -> None:
    """Keys 0..3 each get a point every 4 ticks, tumbling windows of 4: each
    key's second event (a new key's first one stays in the batch loop) and
    each CTI emit; key 9 comes back after its window was forgotten."""
    host = Host(TumblingWindow(4), Mean, key="k", value="v")
    rows = [Insert(t, t, t + 1, {"k": t % 4, "v": float(t)}) for t in range(12)]
    batch = [*rows[:8], Cti(8), Insert("x", 9, 10, {"k": 9, "v": 1.0}), *rows[8:]]
    batch += [Cti(12), Insert("y", 25, 26, {"k": 9, "v": 5.0}), Cti(30)]
    out = host.process_many(batch)
    inserts = [(o.id.key, o.start, o.end, o.payload) for o in out if isinstance(o, Insert)]
    # window [0, 4) holds keys 0..3 once each, window [4, 8) again: each
    # key's mean is its one value; key 9's [8, 12) is 1.0, [24, 28) 5.0;
    # the CTI at 12 visits keys in their order of arrival: keys 0..3, left
    # with nothing at the CTI at 8, were dropped there, so they arrive again
    # after key 9
    assert inserts == [
        (0, 0, 4, 0.0),
        (1, 0, 4, 1.0),
        (2, 0, 4, 2.0),
        (3, 0, 4, 3.0),
        (0, 4, 8, 4.0),
        (1, 4, 8, 5.0),
        (2, 4, 8, 6.0),
        (3, 4, 8, 7.0),
        (9, 8, 12, 1.0),
        (0, 8, 12, 8.0),
        (1, 8, 12, 9.0),
        (2, 8, 12, 10.0),
        (3, 8, 12, 11.0),
        (9, 24, 28, 5.0),
    ]
    assert [o.id.n for o in out if isinstance(o, Insert)] == list(range(14))
    expected = evaluate_by_key(derive_cht(batch)[0], "k", TumblingWindow(4), Mean, value="v")
    got = output_cht_by_key(out + host.flush())
    assert got == {k: c for k, c in expected.items() if len(c)}


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("window", [TumblingWindow(4), HoppingWindow(6, 2)], ids=repr)
@SETTINGS
@given(seed=st.integers(0, 10**6), keys=st.sampled_from([2, 5, 40]), cut=st.floats(0, 1))
def test_a_batch_gives_the_outputs_of_one_element_at_a_time(
    window: Any, seed: int, keys: int, cut: float
) -> None:
    """Exactly the same output elements (ids, order, values) as feeding
    the elements one by one, also when the batch is cut in two."""
    stream = random_stream(random.Random(seed), 150, keys=keys)
    one = Host(window, Sum, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    batched = Host(window, Sum, key="k", value="v")
    at = int(len(stream) * cut)
    got = batched.process_many(stream[:at]) + batched.process_many(stream[at:])
    assert got + batched.flush() == expected


@aggregate
def low_median(values: list[int]) -> int:
    """Non-incremental: the grid path's slice mode, whose batch loop also
    emits the windows an insert makes due."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


@operator
def above_low(values: list[int]) -> list[int]:
    """An operator (slice mode): zero or more outputs a window, matched
    with the window's previous ones by payload."""
    if len(values) < 2:
        return []
    m = sorted(values)[(len(values) - 1) // 2]
    return [v for v in values if v > m]


@pytest.mark.parametrize("udm", [low_median, above_low], ids=["median", "operator"])
@pytest.mark.parametrize("window", [TumblingWindow(4), HoppingWindow(6, 2)], ids=repr)
@SETTINGS
@given(seed=st.integers(0, 10**6), keys=st.sampled_from([2, 5, 40]), cut=st.floats(0, 1))
def test_the_slice_mode_batch_gives_the_outputs_of_one_element_at_a_time(
    udm: Any, window: Any, seed: int, keys: int, cut: float
) -> None:
    """The slice mode's loop (new keys, keys without windows and inserts
    that make windows due, emitted in the loop) gives exactly the output
    elements of feeding the elements one by one, cut batch or not."""
    stream = random_stream(random.Random(seed), 150, keys=keys)
    one = Host(window, udm, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    batched = Host(window, udm, key="k", value="v")
    assert batched._fast is not None and batched._fast.slices
    at = int(len(stream) * cut)
    got = batched.process_many(stream[:at]) + batched.process_many(stream[at:])
    assert got + batched.flush() == expected


def test_an_event_left_out_of_the_validators_index_is_there_after_a_failed_cti() -> None:
    """Event "b" is applied by the batch loop; the CTI at 12 fails (window [0, 10)
    sums to 14), so the validator keeps its CTI and "b", which ends before
    12, must still be known: its retraction is accepted, and the CTI then
    gives 13."""
    host = Host(TumblingWindow(10), Fourteen)
    stream = [Insert("a", 1, 2, 13), Insert("b", 3, 4, 1), Cti(12)]
    with pytest.raises(UdmInvocationError, match="fourteen"):
        host.process_many(stream)
    assert "b" in host.validator.live
    out = host.process_many([Retract("b", 3, 4, 3), Cti(12)])
    assert [(o.start, o.end, o.payload) for o in out if isinstance(o, Insert)] == [(0, 10, 13)]
    accepted = [stream[0], stream[1], Retract("b", 3, 4, 3), Cti(12)]
    assert output_cht(out) == evaluate(derive_cht(accepted)[0], TumblingWindow(10), Fourteen)


def test_a_batch_still_refuses_a_duplicate_id_it_applied_itself() -> None:
    host = Host(TumblingWindow(10), Sum, key="k", value="v")
    batch = [Insert(i, i, i + 1, {"k": i % 3, "v": i}) for i in range(6)]
    with pytest.raises(InvalidElementError, match="already live"):
        host.process_many([*batch, Insert(4, 7, 8, {"k": 1, "v": 0})])
    assert set(host.validator.live) == set(range(6))  # settled at the error
