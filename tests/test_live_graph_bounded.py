"""A long-running operator graph (:class:`udm.host.engines.livegraph.LiveGraph`,
what a streaming query runs per key) holds what its CTIs leave open, not
the stream (issue bb17 B2): its sources prune their validators (amortized,
and before a snapshot), the window operator forgets keys its hosts dropped
and, with several UDMs, the outputs every call made final. Also: a source
number out of range is refused (B3), and an element after a CTI at the end
of time says the stream ended (D2)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from udm.host import INFINITY, Cti, Host, Insert, Retract, StreamValidator, TumblingWindow
from udm.host.engines.livegraph import LiveGraph
from udm.host.errors import CtiViolationError
from udm.host.operators.window import WindowOperator
from udm.host.query import Stream
from udm.sdk import aggregate


@aggregate
def total(values: list[int]) -> int:
    return sum(values)


@aggregate
def biggest(values: list[int]) -> int:
    return max(values)


def source() -> Stream:
    return Stream.from_events([], key="k")


def window_state(graph: LiveGraph) -> dict[str, Any]:
    operators = pickle.loads(graph.snapshot())["operators"]
    return next(state for name, state in operators if name.startswith("window"))


def test_a_source_validator_forgets_events_its_ctis_passed() -> None:
    """Point events, a CTI every 100: the validator prunes when its live set
    doubled (past 1,024), so it never holds more than 1,024 events plus
    twice what the last prune kept (at most the 100 since the CTI); a
    snapshot prunes first and keeps exactly the events the CTI has not passed."""
    graph = LiveGraph(source().clip_to(2).plan)
    validator = graph.entries[0].validator
    sizes = []
    for i in range(1, 5001):
        graph.push(0, Insert(i, i, i + 1, {"k": "a", "v": 1}))
        if i % 100 == 0:
            graph.push(0, Cti(i))
        sizes.append(len(validator.live))
    assert max(sizes) <= 1024 + 2 * 100
    graph.push(0, Insert("late", 5000, 5010, {"k": "a", "v": 1}))
    graph.snapshot()
    # [4999, 5000), [5000, 5001) and [5000, 5010) end at or after the CTI, 5000
    assert sorted(validator.live, key=str) == [4999, 5000, "late"]


def test_a_bare_validator_keeps_every_event_until_pruned() -> None:
    """``check`` never prunes (``derive_cht`` reads the whole stream from
    ``live``); ``prune`` is amortized, ``force`` prunes at once."""
    v = StreamValidator()
    for i in range(1, 2001):
        v.check(Insert(i, i, i + 1, 1))
    v.check(Cti(2000))
    assert len(v.live) == 2000
    v.prune()  # doubled past 1,024 since the last prune (none): runs
    assert sorted(v.live) == [1999, 2000]
    v.check(Insert("x", 2000, 2002, 1))
    v.check(Cti(2001))
    v.prune()  # 3 live events, not double the 2 kept plus 1,024: waits
    assert len(v.live) == 3
    v.prune(force=True)
    assert sorted(v.live, key=str) == [2000, "x"]


def test_the_window_operator_forgets_keys_and_final_combined_outputs() -> None:
    """Keys live for 50 ticks; after a CTI past them all nothing of them is
    kept: the hosts drop them, the operator their columns and (several
    UDMs) the outputs and windows combined window by window."""
    single = LiveGraph(source().tumbling_window(10).aggregate(total, value="v").plan)
    combined = LiveGraph(
        source().tumbling_window(10).aggregate(s=(total, "v"), m=(biggest, "v")).plan
    )
    hosts = next(op for op in single._ops if isinstance(op, WindowOperator)).hosts
    for graph in (single, combined):
        for i in range(1, 3001):
            graph.push(0, Insert(i, i, i + 1, {"k": f"k{i // 50}", "v": i}))
            if i % 100 == 0:
                graph.push(0, Cti(i))
    # the CTI at 3000 leaves k60's window [3000, 3010) open; k59 keeps its event
    # [2999, 3000), which a retraction may still extend; k58 is done
    assert [hosts[0].holds_key(k) for k in ("k58", "k59", "k60")] == [False, True, True]
    for graph in (single, combined):
        graph.push(0, Cti(4000))
    state = window_state(single)
    assert state["key_values"] == {}
    assert not any(hosts[0].holds_key(f"k{j}") for j in range(61))
    state = window_state(combined)
    assert state["key_values"] == {}
    assert state["slots"] == {} and state["slot_ids"] == {}
    assert state["live"] == [{}, {}]


def test_the_combined_window_operator_still_joins_results_after_forgetting() -> None:
    """Outputs are forgotten only once every call's CTI passed them: the
    combined rows equal the reference's, however the CTIs interleave."""
    s = source()
    query = s.tumbling_window(10).aggregate(s=(total, "v"), m=(biggest, "v"))
    events = [Insert(i, i, i + 3, {"k": f"k{i % 3}", "v": i}) for i in range(1, 1500)]
    graph = LiveGraph(query.plan)
    out: list[Any] = []
    for e in events:
        out += graph.push(0, e)
        if e.start % 7 == 0:
            out += graph.push(0, Retract(e.id, e.start, e.end, e.start + 1, e.payload))
        if e.start % 40 == 0:
            out += graph.push(0, Cti(e.start - 5))
    out += graph.push(0, Cti(INFINITY))
    elements: list[Any] = []
    for e in events:
        elements.append(e)
        if e.start % 7 == 0:
            elements.append(Retract(e.id, e.start, e.end, e.start + 1, e.payload))
    expected = Stream.from_events(elements, key="k")
    reference = expected.tumbling_window(10).aggregate(s=(total, "v"), m=(biggest, "v"))
    got = sorted(
        (ev.payload["k"], ev.start, ev.end, ev.payload["s"], ev.payload["m"]) for ev in _cht(out)
    )
    cht = reference.to_cht(engine="reference")
    assert isinstance(cht, dict)
    want = sorted(
        (key, ev.start, ev.end, ev.payload["s"], ev.payload["m"])
        for key, events in cht.items()
        for ev in events
    )
    assert got == want and len(got) > 100


def _cht(elements: list[Any]) -> list[Any]:
    from udm.host.cht import derive_cht

    return list(derive_cht(elements)[0])


@pytest.mark.parametrize("number", [2, -1, True, "0", 1.0])
def test_a_source_number_out_of_range_is_refused(number: Any) -> None:
    left, right = source(), source()
    graph = LiveGraph(left.join(right, on="k").plan)
    with pytest.raises(
        ValueError, match=r"no source .*: this query has 2 source\(s\), numbered 0 to 1"
    ):
        graph.push(number, Insert("a", 1, 5, {"k": 1}))
    assert graph.push(1, Insert("b", 1, 5, {"k": 1})) == []  # nothing was fed


def test_an_element_after_the_end_of_time_says_the_stream_ended() -> None:
    host = Host(TumblingWindow(10), total)
    host.process(Insert("a", 1, 2, 5))
    host.flush()
    for element in (Insert("b", 20, 21, 1), Retract("a", 1, 2, 1, 5), Cti(30)):
        with pytest.raises(
            CtiViolationError, match="the stream has ended: a CTI at the end of time"
        ):
            host.process(element)
    assert host.flush() == []
    dropping = Host(TumblingWindow(10), total, cti_policy="drop")
    dropping.flush()
    for element in (Insert("c", 20, 21, 1), Insert("d", 5, 9, 1), Retract("c", 20, 21, 20, 1)):
        assert dropping.process(element) == []
    assert dropping.process(Cti(30)) == []
    stats = dropping.stats
    assert (stats.dropped_inserts, stats.dropped_retractions, stats.dropped_ctis) == (2, 1, 1)
    assert stats.adjusted == 0
