"""The grid path's id index written lazily (``udm.host.gridrecords``): a
columnar run of consecutive int ids keeps its records as columns until
something reads the index. Compared exactly with the columnar loop off
(every record written at once): outputs, the grid path's whole state
(``dump``: the index's records in order, sweeps included), memory sizes,
and what a restored snapshot goes on to output."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import Mean

from udm.host import Cti, Host, Insert, Retract, TumblingWindow
from udm.host.gridcolumns import GridColumns
from udm.host.stream import Element


def stream_of(rng: random.Random, runs: int, keys: int, ids: int = 0, t: int = 0) -> list[Element]:
    """Runs of 10 to 60 points in order (consecutive int ids from ``ids``)
    over ``keys`` keys between CTIs that lag up to 20 ticks; now and then
    the full retraction of a live event of an earlier run, a late point or
    an id already used; times from ``t`` on."""
    out: list[Element] = []
    live: list[Insert] = []
    cti = t
    for _ in range(runs):
        for _ in range(rng.randint(10, 60)):
            t += rng.randint(0, 2)
            r = rng.random()
            if r < 0.03 and live:
                e = live.pop(rng.randrange(len(live)))
                if e.start >= cti:
                    out.append(Retract(e.id, e.start, e.end, e.start, e.payload))
                    continue
            start = max(cti, t - rng.randint(1, 12)) if r > 0.98 else t
            ident: Any = ids - rng.randint(1, 30) if r > 0.995 and ids > 30 else ids
            e = Insert(ident, start, start + 1, {"k": rng.randrange(keys), "v": float(t % 7)})
            out.append(e)
            live.append(e)
            ids += 1
        cti = max(cti, t - rng.randint(0, 20))
        out.append(Cti(cti))
        live = [e for e in live if e.end >= cti]
    return out


def feed(host: Host, parts: list[list[Element]]) -> list[Any]:
    """Each part through ``process_many`` (or, for one element, ``process``),
    with the state after each: what the outputs and the index must match."""
    seen: list[Any] = []
    for part in parts:
        try:
            got = host.process(part[0]) if len(part) == 1 else host.process_many(part)
        except Exception as exc:  # a reused id: refused alike
            got = [type(exc).__name__, getattr(exc, "outputs", None)]
        fast = host._fast
        assert fast is not None
        seen.append((got, host.memory_size, fast.dump()))
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_lazy_records_give_the_state_of_records_written_at_once(seed: int) -> None:
    """Batches, single elements and snapshots in between: the same outputs
    and the same state (the index's records, in order) at every step as
    with every record written at once, and a snapshot taken with records
    pending restores into a host that goes on alike."""
    rng = random.Random(seed)
    stream = stream_of(rng, 30, rng.choice([1, 5, 40]))
    cuts = sorted(rng.sample(range(1, len(stream)), 8))
    parts = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    parts = [p for p in parts if p]
    host = Host(TumblingWindow(10), Mean, key="k", value="v")
    lazy = feed(host, parts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GridColumns, "columnar", property(lambda self: False))
        eager = feed(Host(TumblingWindow(10), Mean, key="k", value="v"), parts)
    assert lazy == eager
    restored = Host(TumblingWindow(10), Mean, key="k", value="v")
    restored.restore(host.snapshot())
    rest = stream_of(rng, 6, 5, ids=10**6, t=host.cti + 1)
    assert batch(restored, rest) == batch(host, rest)


def batch(host: Host, elements: list[Element]) -> Any:
    """``process_many``'s outputs, or its error with the outputs before it."""
    try:
        return host.process_many(elements)
    except Exception as exc:
        return str(exc), exc.outputs  # type: ignore[attr-defined]


def test_a_run_reusing_a_pending_id_is_refused_at_the_same_element() -> None:
    """A run whose ids overlap those of an earlier run still pending as
    columns (not yet in the index): refused at the same element, with the
    same outputs, as one element at a time."""
    first = [Insert(i, i, i + 1, {"k": i % 3, "v": 1.0}) for i in range(40)]
    again = [Insert(i, 40 + i, 41 + i, {"k": i % 3, "v": 2.0}) for i in range(30, 50)]
    host = Host(TumblingWindow(6), Mean, key="k", value="v")
    one = Host(TumblingWindow(6), Mean, key="k", value="v")
    host.process_many(first)
    assert host._fast is not None and host._fast.unwritten.count == 40
    for e in first:
        one.process(e)
    with pytest.raises(Exception) as batch_error:
        host.process_many(again)
    with pytest.raises(Exception) as one_error:
        for e in again:
            one.process(e)
    assert str(batch_error.value) == str(one_error.value)
    assert batch_error.value.outputs == []  # type: ignore[attr-defined]


def test_final_windows_the_columnar_loop_leaves_are_forgotten_when_the_key_moves_on() -> None:
    """In order, a key that moves into its next window emits the one before
    and is due again only when the new one ends: the emitted window stays
    until the key's next move or that visit (not at the CTI passing its
    end), so it is never more than that one per key, and neither
    ``memory_size`` nor a snapshot counts it once final."""
    keys, size = 3, 10  # runs of ten events, a CTI per window
    host = Host(TumblingWindow(size), Mean, key="k", value="v")
    lingering = 0
    for run in range(40):
        first = run * 10
        host.process_many(
            [
                Insert(i, i, i + 1, {"k": i % keys, "v": float(i % 5)})
                for i in range(first, first + 10)
            ]
            + [Cti(first + 5)]
        )
        fast = host._fast
        assert fast is not None
        final = (host.cti - size) // size  # the last window ending at or before the CTI
        held = [sorted(ks.wins) for ks in fast.keys.values()]
        assert all(len(w) <= 3 for w in held), held  # the lingering one, the open ones
        assert all(sum(k <= final for k in w) <= 1 for w in held), held
        assert fast.memory_size()[1] == sum(k > final for w in held for k in w)
        lingering += sum(k <= final for w in held for k in w)
    assert lingering > 0  # (the case this test is about happens)
