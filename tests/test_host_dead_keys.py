"""A long-running host keeps state only for keys with data between CTIs
(issue bb17 B1): once a key has no live event and no open window, a CTI
drops its per-key state on the general and the grid paths, so memory and
snapshots do not grow with the number of keys ever seen. Checked exactly:
the per-key dicts and ``Host.holds_key`` after the keys died, and the
output CHT (keys coming back after they were dropped, retractions of a
dropped key's event) against the reference evaluator. Count windows keep
the last ``count - 1`` events of every key, by definition (docs/host.md)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import Sum, cht_of, total

from udm.host import (
    CountByEndWindow,
    CountByStartWindow,
    Cti,
    HoppingWindow,
    Host,
    Insert,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    evaluate_by_key,
    output_cht_by_key,
)
from udm.host.stream import Element

#: (window, udm, host options): the general path, both grid modes, conservative
CONFIGS = [
    (TumblingWindow(10), Sum, {}),  # grid path, states by add/remove
    (TumblingWindow(10), total, {}),  # grid path, slices
    (HoppingWindow(10, 5), total, {}),
    (TumblingWindow(10), Sum, {"fast_path": False}),
    (HoppingWindow(10, 5), Sum, {"fast_path": False}),
    (SnapshotWindow(), total, {}),
    (CountByStartWindow(1), total, {}),
    (TumblingWindow(10), Sum, {"consistency": "conservative"}),
    (SnapshotWindow(), total, {"consistency": "conservative"}),
]


def key_states(host: Host) -> dict[Any, Any]:
    """The host's per-key state, on whichever path runs the query."""
    fast = host._fast
    return host.keys if fast is None else fast.keys  # type: ignore[return-value]


def churn(seed: int, generations: int, returning: bool) -> list[Element]:
    """Keys live for one generation of 100 ticks (events end by tick 80 of
    it, so a CTI at its end makes every window final), with retractions; a
    CTI ends each generation. With ``returning`` some keys come back in a
    later generation (after their state was dropped)."""
    rng = random.Random(seed)
    stream: list[Element] = []
    for g in range(generations):
        base = 100 * g
        names = [f"g{g}k{j}" for j in range(3)]
        if returning and g >= 2:
            names.append(f"g{rng.randrange(g - 1)}k{rng.randrange(3)}")
        live: list[Insert] = []
        for i in range(12):
            start = base + rng.randrange(60)
            key = rng.choice(names)
            live.append(Insert(f"{g}-{i}", start, start + rng.randint(1, 20), {"k": key, "v": i}))
        stream += sorted(live, key=lambda e: e.start)
        for e in rng.sample(live, 3):  # shortened or fully retracted, before the CTI
            new_end = rng.choice([e.start, e.start + (e.end - e.start) // 2])
            stream.append(Retract(e.id, e.start, e.end, new_end, e.payload))
        stream.append(Cti(base + 100))
    return stream


def reference(
    stream: list[Element], window: Any, udm: Any, policy: str | None = None
) -> dict[Any, Any]:
    ref = evaluate_by_key(cht_of(stream), "k", window, udm, value="v", output_policy=policy)
    return {k: c for k, c in ref.items() if c}


def _split_generations(stream: list[Element]) -> list[list[Element]]:
    runs: list[list[Element]] = [[]]
    for el in stream:
        runs[-1].append(el)
        if isinstance(el, Cti):
            runs.append([])
    return [r for r in runs if r]


@pytest.mark.parametrize(("window", "udm", "options"), CONFIGS, ids=repr)
@pytest.mark.parametrize("batched", [False, True])
def test_dead_keys_are_dropped_and_returning_keys_answer_as_the_reference(
    window: Any, udm: Any, options: dict[str, Any], batched: bool
) -> None:
    stream = churn(7, 12, returning=True)
    host = Host(window, udm, key="k", value="v", **options)
    out: list[Element] = []
    for run in _split_generations(stream):
        out += host.process_many(run) if batched else [o for el in run for o in host.process(el)]
        # every event of the generation ended by its CTI, every window is final
        assert key_states(host) == {}
        # (the grid path's id index of events forgets them amortized, as
        # the validator does: a live-event count of it is not per key)
        assert host.memory_size[1] == 0
        if host._fast is None:
            assert host.memory_size == (0, 0)
    keys = {el.payload["k"] for el in stream if isinstance(el, Insert)}
    assert not any(host.holds_key(k) for k in keys)
    out += host.flush()
    assert output_cht_by_key(out) == reference(stream, window, udm)


@pytest.mark.parametrize(("window", "udm", "options"), CONFIGS[1:7], ids=repr)
def test_a_snapshot_after_the_keys_died_is_the_size_of_one_that_never_saw_them(
    window: Any, udm: Any, options: dict[str, Any]
) -> None:
    """Nothing per key ever seen is saved: the snapshot of a host that saw
    3,000 short-lived keys has the size of one that saw 300 (the same
    options, the same CTI, its counters of one width). (The invertible grid
    mode's id index forgets ended events amortized: not per key either, but
    its size depends on when it last swept.)"""
    sizes = []
    for n in (300, 3000):
        host = Host(window, udm, key="k", value="v", **options)
        for k in range(n):
            t = 100 * k
            host.process(Insert(f"e{k}", t + 1, t + 2, {"k": f"key{k}", "v": 1}))
            host.process(Cti(t + 100))
        host.process(Cti(10**6))
        host.next_out = 0  # (the output counter's width is not per key)
        host.validator.position = 0
        sizes.append(len(host.snapshot()))
    assert sizes[0] == sizes[1]


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize(
    ("window", "event", "new_end"),
    [
        # its window is final at the CTI, the event ends exactly there: the
        # key (left with no window) is dropped, the event is live
        (TumblingWindow(4), (1, 8), 13),
        # a hopping gap: windows [0, 4), [10, 14); the event reaches no
        # window after the CTI until the retraction extends it
        (HoppingWindow(4, 10), (1, 10), 13),
    ],
)
def test_a_retraction_extending_an_event_of_a_dropped_key_answers_as_the_reference(
    fast_path: bool, window: Any, event: tuple[int, int], new_end: int
) -> None:
    start, end = event
    stream: list[Element] = [
        Insert("a", start, end, {"k": "x", "v": 5}),
        Insert("b", 2, 3, {"k": "y", "v": 1}),
        Cti(end),
        Retract("a", start, end, new_end, {"k": "x", "v": 5}),
        Insert("c", 12, 13, {"k": "x", "v": 2}),
        Cti(40),
    ]
    host = Host(window, Sum, key="k", value="v", fast_path=fast_path)
    out = host.process_many(stream[:3])
    if fast_path:
        assert not host.holds_key("x") and not host.holds_key("y")
    out += host.process_many(stream[3:]) + host.flush()
    assert output_cht_by_key(out) == reference(stream, window, Sum)


def test_count_windows_keep_the_last_count_minus_one_events_of_every_key() -> None:
    """By definition a later event of the key may still form a window with
    them (docs/host.md, Cleanup): 2 events per key for count 3, whatever
    the CTI; a key coming back forms that window."""
    window = CountByStartWindow(3)
    host = Host(window, total, key="k", value="v")
    stream: list[Element] = []
    for k in range(5):
        t = 100 * k
        stream += [Insert(f"{k}-{i}", t + i, t + i + 1, {"k": k, "v": i}) for i in range(4)]
        stream.append(Cti(t + 100))
    out = host.process_many(stream)
    assert host.memory_size[0] == 2 * 5
    assert len(key_states(host)) == 5
    late = [Insert("back", 1000, 1001, {"k": 0, "v": 100}), Cti(2000)]
    out += host.process_many(late) + host.flush()
    stream += late
    assert output_cht_by_key(out) == reference(stream, window, total)


@pytest.mark.parametrize("window", [CountByStartWindow(3), CountByEndWindow(2)], ids=repr)
@pytest.mark.parametrize("policy", ["align", "point_end"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_cti_leaves_quiet_count_window_keys_out_with_the_same_output(
    window: Any, policy: str, seed: int
) -> None:
    """A count-window key whose events all ended by the CTI, with no window
    open, has nothing for later CTIs to do until an event of it arrives
    (``WindowKind.quiet``): a CTI visits the other keys only. The output,
    output CTIs included, equals that of a host restored from a snapshot
    before every element (a restored host visits every key at its next
    CTI), and the reference's CHT."""
    stream = churn(seed, 10, returning=True)
    host = Host(window, total, key="k", value="v", output_policy=policy)
    restored = Host(window, total, key="k", value="v", output_policy=policy)
    out: list[Element] = []
    again: list[Element] = []
    for element in stream:
        out += host.process(element)
        fresh = Host(window, total, key="k", value="v", output_policy=policy)
        fresh.restore(restored.snapshot())
        restored = fresh
        again += restored.process(element)
        if isinstance(element, Cti):
            # the keys of earlier generations are quiet, kept for their last
            # count - 1 times: a CTI visits none of them
            assert len(host._active) <= 4
    assert len(host.keys) > 20
    assert out == again
    assert any(isinstance(o, Cti) for o in out)
    out += host.flush()
    assert output_cht_by_key(out) == reference(stream, window, total, policy)
