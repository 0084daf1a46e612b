"""The columnar loop with late data and retractions (issue 31): ``process_many``
of a list takes the retractions between two CTIs and the late inserts into
emitted windows in ``GridColumns.run_columns`` too, where the element loop
took each alone (validation, journal, undo). Compared exactly: the output
elements (ids, order, values) with feeding the same elements one at a
time, errors (type, message, position, outputs so far, the host after
them) likewise, and output CHTs with the reference evaluator."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest
from engine_support import Mean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    OutputId,
    Retract,
    TumblingWindow,
    derive_cht,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.errors import UdmInvocationError
from udm.host.gridcore import GridCore
from udm.host.stream import Element
from udm.host.time import INFINITY
from udm.sdk import IncrementalAggregate


class Picky(Mean):
    """Fails adding 13 and on a window whose mean is exactly 7.5."""

    def add(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        if payload == 13:
            raise ValueError("thirteen")
        return super().add(state, payload)

    def result(self, state: tuple[float, int]) -> float:
        if state[0] / state[1] == 7.5:
            raise ValueError("seven and a half")
        return super().result(state)


class InPlace(Mean):
    """A list state changed in place, and Picky's failing result (a mean of
    7.5): a late insert or retraction whose new result fails must leave the
    state as it was, though ``add`` or ``remove`` changed it."""

    def initial_state(self) -> list[float]:  # type: ignore[override]
        return [0.0, 0]

    def add(self, state: list[float], payload: float) -> list[float]:  # type: ignore[override]
        state[0] += payload
        state[1] += 1
        return state

    def remove(self, state: list[float], payload: float) -> list[float]:  # type: ignore[override]
        state[0] -= payload
        state[1] -= 1
        return state

    def result(self, state: list[float]) -> float:  # type: ignore[override]
        if state[0] / state[1] == 7.5:
            raise ValueError("seven and a half")
        return state[0] / state[1]


def late_stream(
    rng: random.Random,
    n: int,
    keys: int,
    size: int,
    *,
    late: float = 0.2,
    retract: float = 0.1,
    partial: float = 0.0,
    values: int = 20,
) -> list[Element]:
    """About ``n`` point events of ``keys`` keys, one a tick; a share
    ``late`` of them up to 3 windows late; after an event, with probability
    ``retract``, the full retraction of an earlier live event (with
    probability ``partial`` instead an event over two windows and, later,
    its partial retraction: what the element loop keeps); a CTI every 40
    events, 4 windows behind (so nothing violates it)."""
    out: list[Element] = []
    live: list[tuple[int, int, int, dict[str, Any]]] = []
    cti = 0
    for i in range(n):
        t = i
        start = max(cti, t - rng.randrange(3 * size)) if rng.random() < late else t
        payload = {"k": rng.randrange(keys), "v": float(rng.randrange(values))}
        end = start + 1
        if rng.random() < partial:
            end = start + size + 1
        out.append(Insert(i, start, end, payload))
        live.append((i, start, end, payload))
        if rng.random() < retract and live:
            j = rng.randrange(max(len(live) - 200, 0), len(live))
            ident, s, e, p = live[j]
            if s >= cti:
                new_end = s if e == s + 1 else s + 1  # long events are shortened
                out.append(Retract(ident, s, e, new_end, p))
                if new_end == s:
                    live[j] = live[-1]
                    live.pop()
                else:
                    live[j] = (ident, s, new_end, p)
        if i % 40 == 39:
            cti = max(cti, t - 4 * size)
            out.append(Cti(cti))
            live = [x for x in live if x[2] >= cti]
    return out


def one_at_a_time(host: Host, stream: list[Element]) -> tuple[list[Element], Any]:
    """Outputs of feeding ``stream`` element by element up to the first
    error, and that error (type, message, position) or None."""
    out: list[Element] = []
    for i, element in enumerate(stream):
        try:
            out.extend(host.process(element))
        except Exception as exc:
            return out, (type(exc), str(exc), i)
    return out, None


def batched(host: Host, stream: list[Element]) -> tuple[list[Element], Any]:
    try:
        return host.process_many(stream), None
    except Exception as exc:
        return exc.outputs, (type(exc), str(exc), exc.position)  # type: ignore[attr-defined]


@pytest.fixture
def element_retractions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per retraction the element loop applied (``GridCore.retract``)."""
    calls: list[int] = []
    original = GridCore.retract

    def spy(self: GridCore, *args: Any) -> None:
        calls.append(1)
        original(self, *args)

    monkeypatch.setattr(GridCore, "retract", spy)
    return calls


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("window", [TumblingWindow(8), TumblingWindow(5, offset=2)], ids=repr)
@SETTINGS
@given(
    seed=st.integers(0, 10**6),
    keys=st.sampled_from([1, 3, 30]),
    partial=st.sampled_from([0.0, 0.05]),
    policy=st.sampled_from(["align", "point_end"]),
)
def test_late_data_and_retractions_give_the_outputs_of_one_element_at_a_time(
    window: Any,
    seed: int,
    keys: int,
    partial: float,
    policy: str,
    element_retractions: list[int],
) -> None:
    """Exactly the output elements of feeding the elements one by one; the
    output CHT is the reference evaluator's; without partial retractions
    the element loop applies none of the retractions."""
    stream = late_stream(random.Random(seed), 300, keys, window.size, partial=partial)
    one = Host(window, Mean, key="k", value="v", output_policy=policy)
    expected, error = one_at_a_time(one, stream)
    assert error is None
    element_retractions.clear()
    host = Host(window, Mean, key="k", value="v", output_policy=policy)
    got, got_error = batched(host, stream)
    assert got_error is None
    assert got == expected
    if partial == 0.0:
        assert element_retractions == []
    flushed = host.flush()
    assert flushed == one.flush()
    cht = derive_cht(stream)[0]
    reference = evaluate_by_key(cht, "k", window, Mean, value="v", output_policy=policy)
    assert output_cht_by_key(got + flushed) == {k: c for k, c in reference.items() if len(c)}


@pytest.mark.parametrize("udm", [Picky, InPlace])
@SETTINGS
@given(seed=st.integers(0, 10**6), keys=st.sampled_from([1, 4]))
def test_a_failing_udm_among_late_data_fails_as_one_element_at_a_time(
    udm: Any, seed: int, keys: int
) -> None:
    """A UDM error in ``add`` (13) or ``result`` (a mean of 7.5), on a late
    insert, a retraction or an in-order insert: the same
    error, message, position and earlier outputs, and the host afterwards
    gives the same outputs for the rest."""
    stream = late_stream(random.Random(seed), 200, keys, 6, late=0.3, retract=0.2, values=16)
    one = Host(TumblingWindow(6), udm, key="k", value="v")
    host = Host(TumblingWindow(6), udm, key="k", value="v")
    expected, error = one_at_a_time(one, stream)
    got, got_error = batched(host, stream)
    assert got == expected
    if error is None:
        assert got_error is None
        return
    assert got_error is not None
    assert (got_error[0], got_error[2]) == (error[0], error[2])
    rest = stream[error[2] + 1 :]
    assert batched(host, rest) == batched(one, rest)
    end: list[Element] = [Cti(INFINITY)]  # the flush: a failing window fails both again
    assert one_at_a_time(host, end) == one_at_a_time(one, end)


def test_late_events_and_retractions_by_hand(element_retractions: list[int]) -> None:
    """Key "a"'s window [0, 10) is emitted when its event at 11 arrives;
    a late event, then retractions change it: each change retracts the
    window's output and inserts the new mean, the last one only retracts.
    Key "b"'s events make the run long enough for the columnar loop."""
    b = [Insert(f"b{i}", i, i + 1, {"k": "b", "v": 0.0}) for i in range(20, 28)]
    stream: list[Element] = [
        Insert("a1", 1, 2, {"k": "a", "v": 2.0}),
        Insert("a2", 2, 3, {"k": "a", "v": 4.0}),
        *b[:4],
        Insert("a3", 11, 12, {"k": "a", "v": 6.0}),  # emits [0, 10): mean 3
        Insert("late", 3, 4, {"k": "a", "v": 6.0}),  # mean 4
        Retract("a1", 1, 2, 1),  # mean 5
        *b[4:],
        Retract("a2", 2, 3, 2),  # mean 6
        Retract("late", 3, 4, 3),  # empty: its output retracted, nothing new
        Retract("a3", 11, 12, 11),  # [10, 20) not emitted: no output
    ]
    host = Host(TumblingWindow(10), Mean, key="k", value="v")
    got = host.process_many(stream)
    ids = [OutputId("a", n) for n in range(4)]
    assert got == [
        Insert(ids[0], 0, 10, 3.0),
        Retract(ids[0], 0, 10, 0, 3.0),
        Insert(ids[1], 0, 10, 4.0),
        Retract(ids[1], 0, 10, 0, 4.0),
        Insert(ids[2], 0, 10, 5.0),
        Retract(ids[2], 0, 10, 0, 5.0),
        Insert(ids[3], 0, 10, 6.0),
        Retract(ids[3], 0, 10, 0, 6.0),
    ]
    assert element_retractions == []
    one = Host(TumblingWindow(10), Mean, key="k", value="v")
    assert one_at_a_time(one, stream) == (got, None)
    assert host.flush() == one.flush()


class NoRemove(Mean):
    """Fails removing 14."""

    def remove(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        if payload == 14:
            raise ValueError("fourteen")
        return super().remove(state, payload)


@pytest.mark.parametrize("emitted", [True, False], ids=["emitted", "open"])
def test_a_failing_remove_in_a_run_fails_as_one_element_at_a_time(emitted: bool) -> None:
    """The retraction is the element loop's, which names it; the host after
    it is as before it."""
    b = [Insert(f"b{i}", i, i + 1, {"k": "b", "v": 0.0}) for i in range(20, 28)]
    stream: list[Element] = [
        Insert("a1", 1, 2, {"k": "a", "v": 14.0}),
        Insert("a2", 2, 3, {"k": "a", "v": 4.0}),
        *b[:4],
        *([Insert("a3", 11, 12, {"k": "a", "v": 6.0})] if emitted else []),
        Retract("a1", 1, 2, 1),
        *b[4:],
    ]
    one = Host(TumblingWindow(10), NoRemove, key="k", value="v")
    host = Host(TumblingWindow(10), NoRemove, key="k", value="v")
    expected = one_at_a_time(one, stream)
    assert expected[1] is not None and "fourteen" in expected[1][1]
    assert batched(host, stream) == expected
    end: list[Element] = [Cti(INFINITY)]
    assert one_at_a_time(host, end) == one_at_a_time(one, end)


@pytest.mark.parametrize(
    "tail",
    [
        # quoting another end than the event's
        [Retract("a1", 1, 5, 1)],
        # a retraction of an id never inserted
        [Retract("nobody", 1, 2, 1)],
        # a retraction of an event inserted later in the run
        [Retract("b27", 27, 28, 27)],
        # the same id retracted twice
        [Retract("a1", 1, 2, 1), Retract("a1", 1, 2, 1)],
    ],
    ids=["wrong-end", "unknown", "not-yet", "twice"],
)
def test_invalid_retractions_in_a_run_fail_as_one_element_at_a_time(tail: list[Element]) -> None:
    """The columnar loop leaves them to the element loop, which names them."""
    b = [Insert(f"b{i}", i, i + 1, {"k": "b", "v": 0.0}) for i in range(20, 28)]
    stream: list[Element] = [
        Insert("a1", 1, 2, {"k": "a", "v": 2.0}),
        *b[:4],
        *tail,
        *b[4:],
    ]
    one = Host(TumblingWindow(10), Mean, key="k", value="v")
    host = Host(TumblingWindow(10), Mean, key="k", value="v")
    expected = one_at_a_time(one, stream)
    assert expected[1] is not None
    assert batched(host, stream) == expected


def test_a_retraction_of_an_event_the_run_applied_finds_it_settled() -> None:
    """An event applied by a run and retracted in the same run is gone from
    the validator's index afterwards (a new insert may take its id)."""
    stream: list[Element] = [Insert(i, i, i + 1, {"k": i % 2, "v": 1.0}) for i in range(20)]
    stream.insert(12, Retract(5, 5, 6, 5))
    host = Host(TumblingWindow(4), Mean, key="k", value="v")
    host.process_many(stream)
    assert 5 not in host.validator.live
    assert set(host.validator.live) == set(range(20)) - {5}
    one = Host(TumblingWindow(4), Mean, key="k", value="v")
    one_at_a_time(one, stream)
    more: list[Element] = [Insert(5, 30, 31, {"k": 0, "v": 2.0}), Cti(40)]
    assert host.process_many(more) == one_at_a_time(one, more)[0]


def test_a_batch_leaves_the_collector_running_and_the_callers_frozen_objects_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``process_many`` promotes what it allocated past the young
    collections (``gc.freeze`` then ``gc.unfreeze``): nothing stays in the
    permanent generation, the collector runs again, and objects the caller
    froze stay frozen (then nothing is promoted)."""
    import gc

    from udm.host import gcpause

    stream: list[Element] = [Insert(i, i, i + 1, {"k": i % 3, "v": 1.0}) for i in range(50)]
    assert gc.isenabled()
    monkeypatch.setattr(gcpause, "PROMOTE_AT", 0)  # (50 events make few objects)
    Host(TumblingWindow(4), Mean, key="k", value="v").process_many(stream)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    marker: list[object] = [object()]  # a tracked object of the caller's
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        Host(TumblingWindow(4), Mean, key="k", value="v").process_many(stream)
        # nothing promoted (a frozen object of the test run may die meanwhile,
        # so the count is compared one way), and the caller's stay frozen
        assert 0 < gc.get_freeze_count() <= frozen
        assert gc.is_tracked(marker)
        assert not any(o is marker for o in gc.get_objects())  # still permanent
    finally:
        gc.unfreeze()


def test_promoted_objects_get_a_full_collection_once_they_outnumber_the_tracked_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reference cycle made during a batch is promoted with the rest, and
    collected by the full collection that runs once the promoted objects
    outnumber all tracked ones."""
    import gc
    import weakref

    from udm.host import gcpause

    class Node:
        pass

    def cycle() -> weakref.ref[Node]:
        node = Node()
        node.me = node  # type: ignore[attr-defined]
        return weakref.ref(node)

    class Cyclic(Mean):
        """Makes a reference cycle (then drops it) at each result."""

        made: ClassVar[list[weakref.ref[Node]]] = []

        def result(self, state: tuple[float, int]) -> float:
            self.made.append(cycle())
            return super().result(state)

    stream: list[Element] = [Insert(i, i, i + 1, {"k": 0, "v": 1.0}) for i in range(50)]
    gc.collect()
    monkeypatch.setattr(gcpause, "PROMOTE_AT", 0)
    monkeypatch.setattr(gcpause, "_promoted", 0)
    Host(TumblingWindow(4), Cyclic, key="k", value="v").process_many(stream)
    assert Cyclic.made and all(ref() is not None for ref in Cyclic.made)  # promoted
    monkeypatch.setattr(gcpause, "_promoted", 10**12)  # as if they outnumbered all
    Host(TumblingWindow(4), Cyclic, key="k", value="v").process_many(stream)
    assert all(ref() is None for ref in Cyclic.made)


class _BrokenRemove(IncrementalAggregate):
    """An invertible-declared mean whose ``remove`` always fails, whose
    ``result`` fails on two events and whose ``add`` fails on 99 in an empty
    window."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        if value == 99 and not state[1]:
            raise ArithmeticError("add refuses 99 in an empty window")
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        raise ValueError("remove is broken")

    def result(self, state: tuple[float, int]) -> float:
        if state[1] == 2:
            raise ZeroDivisionError("two events")
        return state[0] / state[1]


@pytest.mark.parametrize(
    ("window", "elements", "cause"),
    [
        (  # c makes [0, 10) due, whose result fails; undoing c's add fails
            TumblingWindow(10),
            [
                Insert("a", 1, 2, {"k": 1, "v": 1.0}),
                Insert("b", 2, 3, {"k": 1, "v": 2.0}),
                Insert("c", 12, 13, {"k": 1, "v": 3.0}),
            ],
            "ZeroDivisionError: two events",
        ),
        (  # d's add fails in its second window; undoing the first fails
            HoppingWindow(10, 5),
            [
                Insert("a", 1, 2, {"k": 1, "v": 1.0}),
                Insert("d", 6, 7, {"k": 1, "v": 99.0}),
            ],
            "ArithmeticError: add refuses 99 in an empty window",
        ),
    ],
    ids=["result", "add"],
)
def test_a_failing_remove_while_undoing_leaves_the_udm_error(
    window: Any, elements: list[Any], cause: str
) -> None:
    """The batch path undoes a failed insert with the UDM's ``remove``; when
    that failed too, ``remove``'s own ValueError escaped instead of the UDM
    error the element path raises. Now the same UdmInvocationError, with a
    note that the undo failed."""
    errors = []
    for feed in ("process", "process_many"):
        host = Host(window, _BrokenRemove, key="k", value="v")
        with pytest.raises(UdmInvocationError) as err:
            if feed == "process":
                for e in elements:
                    host.process(e)
            else:
                host.process_many(elements)
        assert cause in str(err.value)
        errors.append(err.value)
    notes = [getattr(e, "__notes__", []) for e in errors]
    told = "undoing the insert failed too: the UDM's remove raised ValueError"
    assert any(n and told in n[0] for n in notes)
