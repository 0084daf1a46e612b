"""A ``from_events`` stream with ExternalCTIs read twice, once through an
explicit ``finalize()``: every reader sees the repaired stream.

Regressions from a black-box differential tester (CHANGELOG.md, Unreleased,
Fixed): the host engine gave a source read directly by a Finalize its raw
elements, and compiled the source once, so the query's other readers of it
got the raw stream too (an InvalidElementError on a retraction before its
insert, or a silently wrong join when a retraction was lost). operators.md
"Consistency levels": a stream given to ``Stream.from_events`` with
ExternalCTIs is repaired by Finalize, and every engine gives the same
result. Expected values are hand-computed (the retraction chain applied in
order) or, for the randomized streams, the reference engine's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from udm.host import Cht, Insert, Retract
from udm.host.query import Stream
from udm.host.stream import ExternalCti

ENGINES = ["reference", "host"]

# e = [1, 7) cut to [1, 4); the cut arrives before the insert
CUT_FIRST: list[Any] = [Retract("e", 1, 7, 4), Insert("e", 1, 7, 5), ExternalCti(0, 9, 2)]
WITH_A: list[Any] = [Insert("a", 0, 20, 1), *CUT_FIRST[:2], ExternalCti(0, 9, 3)]


def _pair(left: Any, right: Any) -> dict[str, Any]:
    return {"l": left, "r": right}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_unfinalized_branch_of_a_union_is_repaired(engine: str) -> None:
    s = Stream.from_events(CUT_FIRST)
    assert s.finalize().union(s).to_cht(engine=engine) == Cht([(1, 4, 5), (1, 4, 5)])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_join_with_the_unfinalized_branch_keeps_its_retraction(engine: str) -> None:
    s = Stream.from_events(WITH_A)
    q = s.finalize().join(s.where(lambda v: v > 0), select=_pair)
    assert q.to_cht(engine=engine) == Cht(
        [
            (0, 20, {"l": 1, "r": 1}),
            (1, 4, {"l": 1, "r": 5}),  # [1, 7) before the fix: the cut 7 -> 4 was lost
            (1, 4, {"l": 5, "r": 1}),
            (1, 4, {"l": 5, "r": 5}),
        ]
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_shifted_unfinalized_branch_is_repaired(engine: str) -> None:
    s = Stream.from_events(WITH_A)
    assert s.finalize().union(s.shift(1)).to_cht(engine=engine) == Cht(
        [(0, 20, 1), (1, 4, 5), (1, 21, 1), (2, 5, 5)]
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bounded_finalize_reads_raw_while_the_other_branch_is_repaired(engine: str) -> None:
    # remember 3: f (at 10) makes time before 7 final in the Finalize's own
    # stream, so the late cut 7 -> 4 is dropped there (e stays [1, 7)); the
    # other branch repairs the chain in full (e is [1, 4))
    elements: list[Any] = [
        Insert("e", 1, 7, "P"),
        Insert("f", 10, 12, "Q"),
        Retract("e", 1, 7, 4, "P"),
        ExternalCti(20, 30, 0),
        ExternalCti(0, 19, 3),
    ]
    s = Stream.from_events(elements)
    q = s.finalize(3).union(s)
    assert q.to_cht(engine=engine) == Cht([(1, 7, "P"), (10, 12, "Q"), (1, 4, "P"), (10, 12, "Q")])
    assert q.metrics.invalid_rows() == {"late for finalize": 1}


def _sync(el: Any) -> int:
    return el.start if isinstance(el, Insert) else min(el.old_end, el.new_end)


def _stream(seed: int) -> list[Any]:
    """Retraction chains (sometimes a retraction with no insert) and tiling
    ExternalCTIs with exact counts, all shuffled."""
    rng = random.Random(5150 + seed)
    ordered: list[Any] = []
    for i in range(rng.randrange(1, 6)):
        s = rng.randrange(0, 20)
        cur = s + rng.randrange(1, 12)
        value = rng.randrange(-3, 6)
        ordered.append(Insert(f"e{i}", s, cur, value))
        for _ in range(rng.choice([0, 1, 2])):
            new = rng.randrange(s, cur)
            ordered.append(Retract(f"e{i}", s, cur, new, value))
            cur = new
            if new == s:
                break
    if rng.random() < 0.2:
        ordered.append(Retract("orphan", 3, 9, 5, 1))
    cuts = sorted(rng.sample(range(1, 40), rng.randrange(0, 4)))
    bounds, lo = [], 0
    for c in [*cuts, 40]:
        bounds.append((lo, c))
        lo = c + 1
    counts = [ExternalCti(a, b, sum(a <= _sync(x) <= b for x in ordered)) for a, b in bounds]
    stream = ordered + counts
    rng.shuffle(stream)
    return stream


SHAPES: dict[str, Callable[[Stream], Stream]] = {
    "union": lambda s: s.finalize().union(s),
    "join": lambda s: s.finalize().join(s.where(lambda v: v > 0), select=_pair),
    "shift": lambda s: s.finalize().union(s.shift(1)),
    "bounded union": lambda s: s.finalize(3).union(s),
    "bounded join": lambda s: s.join(s.finalize(5), select=_pair),
    "several finalizes": lambda s: s.finalize(3).union(s.finalize(8)).union(s.finalize()),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_random_streams_read_twice_agree_with_the_reference(shape: str) -> None:
    make = SHAPES[shape]
    for seed in range(60):
        stream = _stream(seed)
        ref = make(Stream.from_events(stream))
        host = make(Stream.from_events(stream))
        assert host.to_cht(engine="host") == ref.to_cht(engine="reference"), (seed, stream)
        assert host.metrics.invalid_rows() == ref.metrics.invalid_rows(), (seed, stream)
