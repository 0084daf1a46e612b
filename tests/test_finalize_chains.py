"""Finalize and broken retraction chains (CEDR 4.6), on every engine.

Regressions from a black-box acceptance tester (CHANGELOG.md, Unreleased,
Fixed): Finalize issued a CTI over a pending out-of-order retraction chain
and then dropped part of the chain as "late for finalize", changing the
stream's meaning with no memory bound asked for (the paper: Finalize with
``finalizetime()`` 0 "will not change the semantics (eventual state) of
its input stream"); and a retraction that never matched was counted as
late by one engine and not at all by the others. Expected values are
hand-computed from the paper's bitemporal converter (the chain applied in
order) and its rule that output CTIs come "no earlier than the earliest
correct time".
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host import Cht, Cti, Insert, Retract, derive_cht
from udm.host.operators.base import Collector
from udm.host.operators.finalize import LATE, UNMATCHED, FinalizeOperator
from udm.host.query import Stream
from udm.host.stream import ExternalCti
from udm.host.time import INFINITY

ENGINES = ["reference", "host"]

# e = [1, 7) cut to 4, then to 2; the second cut (sync time 2) arrives
# first. [0, 3] counts the insert and that cut, and completes before the
# first cut (sync time 4, inside [4, 9]) arrives: e is [1, 2) in the end
BROKEN_CHAIN = [
    Retract("e", 1, 4, 2, "P"),
    Insert("e", 1, 7, "P"),
    ExternalCti(0, 3, 2),
    Retract("e", 1, 7, 4, "P"),
    ExternalCti(4, 9, 1),
]

# a retraction whose insert never arrives: [0, 9] completes without it
ORPHAN = [Retract("a", 0, 10, 5), Insert("b", 1, 2, 1), ExternalCti(0, 9, 2)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("level", [None, "middle", "strong", ("weak", 100)])
def test_a_cti_waits_for_a_broken_chain_that_can_still_connect(engine: str, level: Any) -> None:
    q = Stream.from_events(BROKEN_CHAIN)
    if level is not None:
        q = q.with_consistency(level)
    assert q.to_cht(engine=engine) == Cht([(1, 2, "P")])
    assert q.metrics.invalid_rows() == {}


def test_the_cti_is_held_at_the_broken_retractions_sync_time() -> None:
    # [0, 3] completes: the CTI waits at 2, where 4 -> 2 will change e once
    # 7 -> 4 arrives; then the whole chain goes out as 7 -> 2, and the CTI moves on
    assert Stream.from_events(BROKEN_CHAIN).to_events() == [
        Insert("e", 1, 7, "P"),
        Cti(2),
        Retract("e", 1, 7, 2),
        Cti(3),
        Cti(9),
        Cti(INFINITY),
    ]


def test_a_cti_in_the_input_also_waits_for_a_broken_chain() -> None:
    # the input's own Cti(3) promises nothing earlier than 3 arrives, and 7 -> 4
    # (sync time 4) keeps it; 4 -> 2 arrived before it, and changes time 2
    s = [Retract("e", 1, 4, 2, "P"), Insert("e", 1, 7, "P"), Cti(3), Retract("e", 1, 7, 4, "P")]
    q = Stream.from_events([*s, ExternalCti(3, 9, 1)])
    assert q.to_events() == [
        Insert("e", 1, 7, "P"),
        Cti(2),
        Retract("e", 1, 7, 2),
        Cti(3),
        Cti(9),
        Cti(INFINITY),
    ]
    for engine in ENGINES:
        assert q.to_cht(engine=engine) == Cht([(1, 2, "P")])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_retraction_whose_insert_never_arrives_is_counted_as_unmatched(engine: str) -> None:
    q = Stream.from_events(ORPHAN)
    assert q.to_cht(engine=engine) == Cht([(1, 2, 1)])
    assert q.metrics.invalid_rows() == {UNMATCHED: 1}
    assert UNMATCHED == "unmatched retraction (finalize)"


def test_an_unmatched_retraction_is_discarded_once_its_time_is_complete() -> None:
    # the insert (sync time 0) can no longer arrive once [0, 9] is complete
    assert Stream.from_events(ORPHAN).to_events() == [Insert("b", 1, 2, 1), Cti(9), Cti(INFINITY)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_retraction_whose_predecessor_never_arrives_is_unmatched(engine: str) -> None:
    # 4 -> 2 needs e to end at 4 first; once [0, 9] is complete, nothing can
    # take e from 7 to 4 any more: e stays [1, 7)
    s = [Insert("e", 1, 7, "P"), Retract("e", 1, 4, 2, "P"), ExternalCti(0, 9, 2)]
    q = Stream.from_events(s)
    assert q.to_cht(engine=engine) == Cht([(1, 7, "P")])
    assert q.metrics.invalid_rows() == {UNMATCHED: 1}
    assert Stream.from_events(s).to_events() == [Insert("e", 1, 7, "P"), Cti(9), Cti(INFINITY)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bounded_finalize_still_drops_a_broken_chain_behind_its_cti(engine: str) -> None:
    # remember 3: f (at 10) makes time before 7 final; 4 -> 2 is behind it
    # (dropped with it), and so is 7 -> 4 when it arrives: e stays [1, 7)
    s = [
        Retract("e", 1, 4, 2, "P"),
        Insert("e", 1, 7, "P"),
        Insert("f", 10, 12, "Q"),
        Retract("e", 1, 7, 4, "P"),
        ExternalCti(20, 30, 0),
    ]
    q = Stream.from_events(s).finalize(3)
    assert q.to_cht(engine=engine) == Cht([(1, 7, "P"), (10, 12, "Q")])
    assert q.metrics.invalid_rows() == {LATE: 2}
    assert Stream.from_events(s).finalize(3).to_events() == [
        Cti(-1),
        Insert("e", 1, 7, "P"),
        Insert("f", 10, 12, "Q"),
        Cti(7),
        Cti(INFINITY),
    ]


def test_a_finalize_state_saved_before_ctis_waited_for_chains_still_loads() -> None:
    first = FinalizeOperator(INFINITY)
    for el in BROKEN_CHAIN[:2]:
        first.push(0, el)
    saved = first.get_state()
    for field in ("input_cti", "unmatched", "starts", "pending"):
        del saved[field]
    second = FinalizeOperator(INFINITY)
    second.set_state(saved)
    sink = Collector()
    second.connect(sink)
    for el in BROKEN_CHAIN[2:]:
        second.push(0, el)
    assert sink.elements == [Cti(2), Retract("e", 1, 7, 2), Cti(3), Cti(9)]


def _sync(el: Any) -> int:
    return el.start if isinstance(el, Insert) else min(el.old_end, el.new_end)


def _shuffled_chains(seed: int) -> tuple[list[Any], list[Any], int]:
    """Retraction chains and tiling ExternalCTIs with exact counts, all
    shuffled (the black-box tester's generator): the elements in order,
    the shuffled stream, and the last ExternalCTI's end."""
    rng = random.Random(606 + seed)
    ordered: list[Any] = []
    for i in range(rng.randrange(1, 7)):
        s = rng.randrange(0, 20)
        cur = s + rng.randrange(1, 12)
        ordered.append(Insert(f"e{i}", s, cur, f"P{i}"))
        for _ in range(rng.choice([0, 1, 2, 3])):
            if cur - 1 < s:
                break
            new = rng.randrange(s, cur)
            ordered.append(Retract(f"e{i}", s, cur, new, f"P{i}"))
            cur = new
            if new == s:
                break
    last = 40
    cuts = sorted(rng.sample(range(1, last), rng.randrange(0, 4)))
    bounds, lo = [], 0
    for c in [*cuts, last]:
        bounds.append((lo, c))
        lo = c + 1
    counts = [ExternalCti(a, b, sum(a <= _sync(x) <= b for x in ordered)) for a, b in bounds]
    stream = ordered + counts
    rng.shuffle(stream)
    return ordered, stream, last


def _valid(out: list[Any]) -> None:
    """CTIs never go back, and nothing after a CTI changes time before it."""
    cti = None
    for el in out:
        if isinstance(el, Cti):
            assert cti is None or el.time >= cti, out
            cti = el.time
        elif cti is not None:
            assert _sync(el) >= cti, (el, out)


def test_shuffled_chains_keep_their_meaning_on_the_in_process_engines() -> None:
    for seed in range(300):
        ordered, stream, last = _shuffled_chains(seed)
        expected = derive_cht(ordered)[0]
        for engine in ENGINES:
            q = Stream.from_events(stream)
            assert q.to_cht(engine=engine) == expected, (seed, engine, stream)
            assert q.metrics.invalid_rows() == {}
        out = Stream.from_events(stream).to_events()
        _valid(out)
        assert derive_cht(out)[0] == expected
        assert Cti(last) in out  # every ExternalCTI completed: its CTI is issued


@pytest.mark.spark
def test_broken_chains_on_spark(spark: Any) -> None:
    q = Stream.from_events(BROKEN_CHAIN)
    assert q.to_cht(engine="spark") == Cht([(1, 2, "P")])
    assert q.metrics.invalid_rows() == {}
    q = Stream.from_events(ORPHAN)
    assert q.to_cht(engine="spark") == Cht([(1, 2, 1)])
    assert q.metrics.invalid_rows() == {UNMATCHED: 1}
    weak = Stream.from_events(BROKEN_CHAIN).with_consistency(("weak", 100))
    assert weak.to_cht(engine="spark") == Cht([(1, 2, "P")])
    # shuffled chains, a few: one Spark evaluation each
    for seed in (3, 17, 41):
        ordered, stream, _ = _shuffled_chains(seed)
        assert Stream.from_events(stream).to_cht(engine="spark") == derive_cht(ordered)[0]
