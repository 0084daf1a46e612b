"""The grid path's columnar loop (issue 31): ``process_many`` of a list
takes each run of inserts between two CTIs through
``GridColumns.run_columns``, and a CTI whose visited keys are all plain
emits through ``emit_plain``. Compared exactly: the output elements (ids,
order, values) with feeding the same elements one at a time, errors (type,
position, outputs so far, the host after them) likewise, and output CHTs
with the reference evaluator."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import Mean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    Retract,
    TumblingWindow,
    derive_cht,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.gridcolumns import COLUMN_CHUNK, COLUMN_CHUNK_MAX, MIN_COLUMN_RUN, GridColumns
from udm.host.gridpath import GridPath
from udm.host.stream import Element


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


def run_stream(
    rng: random.Random,
    runs: int,
    keys: int,
    size: int,
    *,
    odd: float = 0.0,
    length: tuple[int, int] = (max(32, MIN_COLUMN_RUN), max(96, 3 * MIN_COLUMN_RUN)),
) -> list[Element]:
    """Runs of 32 to 96 inserts (at least ``MIN_COLUMN_RUN``) between
    CTIs, over ``keys`` keys (new ones keep coming), mostly points in
    order; with probability ``odd`` an element is something the columnar
    loop leaves to the element loop: a late point (before its key's
    newest), an event over two windows, a retraction, a duplicate id."""
    out: list[Element] = []
    live: list[tuple[int, int, int, dict[str, Any]]] = []
    t = 0
    cti = 0
    n = 0
    for _ in range(runs):
        for _ in range(rng.randint(*length)):
            t += rng.randint(0, 2)
            payload = {"k": rng.randrange(keys), "v": float(rng.randint(0, 20))}
            start, end = t, t + 1
            r = rng.random()
            if r < odd / 4:
                start = max(cti, t - rng.randint(1, 2 * size))
                end = start + 1
            elif r < odd / 2:
                end = start + rng.randint(2, 2 * size)
            elif r < 3 * odd / 4 and live:
                j = rng.randrange(len(live))
                ident, s, e, p = live[j]
                if s >= cti and e >= cti:
                    out.append(Retract(ident, s, e, s, p))
                    live[j] = live[-1]
                    live.pop()
                continue
            elif r < odd and out and type(out[-1]) is Insert:
                out.append(out[-1])  # a duplicate id: refused, as one at a time
                return out
            ident = n
            n += 1
            out.append(Insert(ident, start, end, payload))
            live.append((ident, start, end, payload))
        cti = max(cti, t - rng.randint(0, size))
        out.append(Cti(cti))
        live = [x for x in live if x[2] >= cti]
    return out


def one_at_a_time(host: Host, stream: list[Element]) -> tuple[list[Element], Any]:
    """Outputs of feeding ``stream`` element by element up to the first
    error, and that error (or None)."""
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
def column_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of inserts each ``run_columns`` call applied."""
    calls: list[int] = []
    original = GridColumns.run_columns

    def spy(self: GridColumns, *args: Any) -> int:
        applied = original(self, *args)
        calls.append(applied)
        return applied

    monkeypatch.setattr(GridColumns, "run_columns", spy)
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
    odd=st.sampled_from([0.0, 0.05, 0.3]),
)
def test_columns_give_the_outputs_of_one_element_at_a_time(
    window: Any, seed: int, keys: int, odd: float, column_calls: list[int]
) -> None:
    """Exactly the output elements of feeding the elements one by one (and
    the same error at the same position, with the same outputs before
    it); the output CHT is the reference evaluator's."""
    column_calls.clear()  # (one fixture for all of hypothesis's examples)
    stream = run_stream(random.Random(seed), 6, keys, window.size, odd=odd)
    one = Host(window, Mean, key="k", value="v")
    expected, error = one_at_a_time(one, stream)
    host = Host(window, Mean, key="k", value="v")
    got, got_error = batched(host, stream)
    assert got == expected
    assert got_error == error
    flushed = host.flush()
    assert flushed == one.flush()
    if odd == 0.0:
        # nearly all of them (a new key's first event at the CTI's time is
        # the element loop's)
        assert sum(column_calls) >= 0.9 * sum(type(e) is Insert for e in stream)
        cht = derive_cht(stream)[0]
        reference = evaluate_by_key(cht, "k", window, Mean, value="v")
        assert output_cht_by_key(got + flushed) == {k: c for k, c in reference.items() if len(c)}


@SETTINGS
@given(seed=st.integers(0, 10**6), keys=st.sampled_from([1, 4]))
def test_a_failing_udm_in_a_run_fails_as_one_element_at_a_time(
    seed: int, keys: int, column_calls: list[int]
) -> None:
    """A UDM error in ``add`` (a value of 13) or ``result`` (a mean of 7.5)
    inside a run: the same error, position and earlier outputs, and the
    host afterwards gives the same outputs for the rest."""
    column_calls.clear()
    stream = run_stream(random.Random(seed), 5, keys, 6)
    one = Host(TumblingWindow(6), Picky, key="k", value="v")
    host = Host(TumblingWindow(6), Picky, key="k", value="v")
    expected, error = one_at_a_time(one, stream)
    got, got_error = batched(host, stream)
    assert column_calls
    assert got == expected
    # the same message as feeding one at a time, which lists the window's
    # events with the failing insert (a batch records it only after its add)
    assert got_error == error
    assert element_loop_batch(stream)[1] == error
    if error is None:
        return
    rest = stream[error[2] + 1 :]
    assert batched(host, rest) == batched(one, rest)


def element_loop_batch(stream: list[Element]) -> tuple[list[Element], Any]:
    """``process_many`` with the columnar loop off: the batch path before it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GridColumns, "columnar", property(lambda self: False))
        return batched(Host(TumblingWindow(6), Picky, key="k", value="v"), stream)


def test_one_key_and_whole_payloads() -> None:
    """No ``key`` and no ``value``: the payload is the value, one key."""
    stream: list[Element] = []
    for i in range(200):
        stream.append(Insert(i, i, i + 1, float(i % 7)))
        if i % 50 == 49:
            stream.append(Cti(i - 3))
    one = Host(TumblingWindow(10), Mean)
    host = Host(TumblingWindow(10), Mean)
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    got = host.process_many(stream) + host.flush()
    assert got == expected
    # the windows' means, by hand: window j holds i = 10j .. 10j + 9
    means = [o.payload for o in got if type(o) is Insert]
    assert means == [sum((10 * j + d) % 7 for d in range(10)) / 10 for j in range(20)]


def test_an_unhashable_key_in_a_run_is_named_as_one_element_at_a_time() -> None:
    stream: list[Element] = [Insert(i, i, i + 1, {"k": i % 3, "v": 1.0}) for i in range(40)]
    stream.insert(35, Insert("bad", 35, 36, {"k": [1], "v": 1.0}))
    one = Host(TumblingWindow(4), Mean, key="k", value="v")
    host = Host(TumblingWindow(4), Mean, key="k", value="v")
    assert batched(host, stream) == one_at_a_time(one, stream)
    assert batched(host, stream)[1] is not None


def test_hopping_windows_keep_the_element_loop(column_calls: list[int]) -> None:
    """Overlapping windows put an event in several: the columnar loop
    declines the run (0 applied) and the outputs are unchanged."""
    stream: list[Element] = [Insert(i, i, i + 1, {"k": i % 3, "v": 1.0}) for i in range(64)]
    stream.append(Cti(60))
    one = Host(HoppingWindow(6, 2), Mean, key="k", value="v")
    host = Host(HoppingWindow(6, 2), Mean, key="k", value="v")
    assert host.process_many(stream) == one_at_a_time(one, stream)[0]
    assert column_calls == []


def points(first: int, n: int, keys: int, value: float = 1.0) -> list[Element]:
    """Point events ``first .. first + n - 1``, key ``i % keys``."""
    return [Insert(i, i, i + 1, {"k": i % keys, "v": value}) for i in range(first, first + n)]


@pytest.mark.parametrize(
    "stream",
    [
        # key 0's long event (the element loop takes that run) leaves the
        # key with events reaching unbegun windows: the next run stops there
        [
            *points(0, 39, 3),
            Insert("long", 39, 70, {"k": 0, "v": 2.0}),
            Cti(30),
            *points(40, 40, 3),
        ],
        # a payload without the value field
        [*points(0, 40, 3), Insert("x", 40, 41, {"k": 1}), *points(41, 5, 3)],
        # inserts before the CTI, dropped by the CTI policy
        [
            *points(0, 40, 4),
            Cti(38),
            Insert("late", 30, 31, {"k": 1, "v": 5.0}),
            *points(40, 40, 4),
        ],
        # the CTI emits key 9's only window, whose mean (7.5) fails
        [
            Insert("a", 0, 1, {"k": 9, "v": 7.0}),
            Insert("b", 1, 2, {"k": 9, "v": 8.0}),
            *points(2, 40, 3),
            Cti(12),
        ],
    ],
    ids=["long-event", "no-value", "late-dropped", "cti-result-fails"],
)
def test_what_the_columnar_loop_leaves_to_the_element_loop(stream: list[Element]) -> None:
    one = Host(TumblingWindow(6), Picky, key="k", value="v", cti_policy="drop")
    host = Host(TumblingWindow(6), Picky, key="k", value="v", cti_policy="drop")
    expected, error = one_at_a_time(one, stream)
    got, got_error = batched(host, stream)
    assert got == expected
    assert (got_error is None) == (error is None)
    if error is not None:
        assert (got_error[0], got_error[2]) == (error[0], error[2])
    # the hosts are alike afterwards (a failing window fails both again)
    assert one_at_a_time(host, [Cti(100)]) == one_at_a_time(one, [Cti(100)])


def test_an_unhashable_id_in_a_run_is_refused_as_one_element_at_a_time() -> None:
    stream = [*points(0, 40, 3), Insert(["odd"], 40, 41, {"k": 1, "v": 1.0})]  # type: ignore[arg-type]
    one = Host(TumblingWindow(6), Mean, key="k", value="v")
    host = Host(TumblingWindow(6), Mean, key="k", value="v")
    expected = one_at_a_time(one, stream)
    assert expected[1] is not None
    assert batched(host, stream) == expected


def test_keys_back_after_their_windows_were_forgotten(
    column_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 keys in turn over windows of 4 ticks: a key's next event comes 10
    windows later, after CTIs emitted and forgot its window; the columnar
    loop takes it (no per-event ``insert_raw``), with the outputs of one
    element at a time."""
    raw: list[int] = []
    original = GridPath.insert_raw
    monkeypatch.setattr(
        GridPath, "insert_raw", lambda self, *a: raw.append(1) or original(self, *a)
    )
    stream: list[Element] = []
    for i in range(400):
        stream.append(Insert(i, i, i + 1, {"k": i % 40, "v": float(i % 5)}))
        if i % 10 == 9:  # (CTIs pass each key's window before it is back)
            stream.append(Cti(i - 2))
    one = Host(TumblingWindow(4), Mean, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    raw.clear()
    host = Host(TumblingWindow(4), Mean, key="k", value="v")
    got = host.process_many(stream) + host.flush()
    assert got == expected
    assert sum(column_calls) == 400  # new keys' first events too
    assert raw == []


@settings(SETTINGS, max_examples=8)
@given(seed=st.integers(0, 10**6), odd=st.sampled_from([0.0, 0.003, 0.03]))
def test_long_runs_take_growing_chunks(seed: int, odd: float, column_calls: list[int]) -> None:
    """Runs of thousands of inserts between CTIs: a chunk grows past
    ``COLUMN_CHUNK`` while whole chunks apply and is small again after an
    element the loop leaves; the outputs, errors and positions are those
    of one element at a time."""
    column_calls.clear()
    stream = run_stream(random.Random(seed), 3, 40, 50, odd=odd, length=(2500, 4000))
    one = Host(TumblingWindow(50), Mean, key="k", value="v")
    expected, error = one_at_a_time(one, stream)
    host = Host(TumblingWindow(50), Mean, key="k", value="v")
    assert batched(host, stream) == (expected, error)
    assert host.flush() == one.flush()
    assert max(column_calls, default=0) <= COLUMN_CHUNK_MAX
    if odd == 0.0:
        assert max(column_calls) > COLUMN_CHUNK
        assert sum(column_calls) == sum(type(e) is Insert for e in stream)


class Shared(Mean):
    """A mean whose list state changes in place and whose result is that
    state itself: the host must emit a copy (``detached``), or a later
    ``add`` would change an output already emitted."""

    def initial_state(self) -> list[float]:  # type: ignore[override]
        return [0.0, 0]

    def add(self, state: list[float], payload: float) -> list[float]:  # type: ignore[override]
        state[0] += payload
        state[1] += 1
        return state

    def result(self, state: list[float]) -> list[float]:  # type: ignore[override]
        return state


def test_a_result_that_is_the_state_is_emitted_as_a_copy(column_calls: list[int]) -> None:
    """The windows in-order inserts make due are emitted inside the run,
    and a late insert refreshes an emitted one there: each output a copy
    of the state at its time, as one element at a time (by hand: key 1's
    window [10, 20) holds five 3.0 values, then the late 9.0 too)."""
    late = Insert("late", 15, 16, {"k": 1, "v": 9.0})
    stream: list[Element] = [*points(0, 60, 2, 3.0), Cti(12), late, *points(60, 40, 2, 5.0)]
    one = Host(TumblingWindow(10), Shared, key="k", value="v")
    expected = [o for e in stream for o in one.process(e)] + one.flush()
    host = Host(TumblingWindow(10), Shared, key="k", value="v")
    got = host.process_many(stream) + host.flush()
    assert got == expected
    assert sum(column_calls) == 101
    first = [o.payload for o in got if type(o) is Insert and o.start == 10 and o.id[0] == 1]
    assert first == [[15.0, 5], [24.0, 6]]


@pytest.mark.parametrize(
    "ids",
    [
        [*range(40), *range(30, 70)],  # consecutive runs, the second reusing live ids
        [*range(20), 5, *range(21, 40)],  # a duplicate inside one run
        [*range(20), True, *range(21, 40)],  # a bool among int ids
        [*range(20), "20", *range(21, 40)],  # a str among int ids
    ],
    ids=["reused", "duplicate", "bool", "str"],
)
def test_ids_of_a_run_checked_as_one_element_at_a_time(ids: list[Any]) -> None:
    """A run of consecutive int ids skips the set of its ids: what it must
    still refuse (an id of a live event, a duplicate, a bool) is refused
    at the same element, with the same outputs, as one at a time."""
    stream: list[Element] = [
        Insert(ident, t, t + 1, {"k": t % 3, "v": float(t % 5)}) for t, ident in enumerate(ids)
    ]
    one = Host(TumblingWindow(6), Mean, key="k", value="v")
    host = Host(TumblingWindow(6), Mean, key="k", value="v")
    expected = one_at_a_time(one, stream)
    assert batched(host, stream) == expected
    assert (expected[1] is None) == (ids[20] == "20")


def test_the_id_index_is_swept_once_the_retirement_bound_moves() -> None:
    """The records of events ending before the first open window and the
    CTI retire at a CTI once enough piled up and that bound moved since the
    last sweep; a CTI that leaves it where it was sweeps nothing (all that
    came since ends after it), so a sweep waits for the next that moves it
    (points: event i is [i, i + 1), windows of 100 ticks)."""
    host = Host(TumblingWindow(100), Mean, key="k", value="v")
    host.process_many(points(0, 300, 3))
    host.process(Cti(150))  # the bound: window [100, 200)'s start; i >= 99 kept
    assert host.memory_size[0] == 201
    host.process_many(points(300, 500, 3))
    host.process(Cti(160))  # the same bound: no sweep
    assert host.memory_size[0] == 701
    host.process(Cti(250))  # the bound 200: i >= 199 kept
    assert host.memory_size[0] == 601
