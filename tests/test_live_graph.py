"""The operator graph fed from outside and saved between elements
(:class:`udm.host.engines.livegraph.LiveGraph`, what a streaming query runs per
key): a graph restored from its snapshot after every element emits exactly
what one kept alive emits, and both converge to the reference CHT."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_operators import keyed_stream, queries

from udm.host import INFINITY, Cti, Insert
from udm.host.cht import derive_cht
from udm.host.engines.livegraph import LiveGraph
from udm.host.plan import sources
from udm.host.query import Stream


def _interleaved(*streams: list[Any]) -> list[tuple[int, Any]]:
    """(source, element) alternately, each source ended by a CTI at infinity."""
    feeds = [[*s, Cti(INFINITY)] for s in streams]
    out = []
    for i in range(max(len(f) for f in feeds)):
        out += [(n, f[i]) for n, f in enumerate(feeds) if i < len(f)]
    return out


def _run(
    query: Stream, feed: list[tuple[int, Any]], restart: bool, consistency: Any = None
) -> list[Any]:
    graph = LiveGraph(query.plan, consistency)
    out = []
    for source, element in feed:
        out += graph.push(source, element)
        if restart:
            blob = graph.snapshot()
            graph = LiveGraph(query.plan, consistency)
            graph.restore(blob)
    return out


def _outcome(query: Stream, feed: list[tuple[int, Any]], restart: bool, consistency: Any) -> Any:
    """What :func:`_run` emits, or the error it raises: a weak level may
    forget the retraction that ended an event, and a tumbling window over an
    event that never ends then refuses the CTI at the end of time (as the
    reference does), restored or not."""
    try:
        return _run(query, feed, restart, consistency)
    except ValueError as exc:
        return f"ValueError: {exc}"


def _cht(elements: list[Any]) -> list[tuple[int, int, str]]:
    cht, _ = derive_cht(elements)
    return sorted((e.start, e.end, repr(sorted(e.payload.items()))) for e in cht)


@settings(max_examples=60, deadline=None)
@given(
    keyed_stream(),
    keyed_stream(),
    st.sampled_from(list(queries(Stream.from_cht([], key="k"), Stream.from_cht([], key="k")))),
)
def test_a_graph_restored_after_every_element_emits_what_a_live_one_does(
    l_el: Any, r_el: Any, name: str
) -> None:
    query = queries(Stream.from_events(l_el, key="k"), Stream.from_events(r_el, key="k"))[name]
    feed = _interleaved(*[list(src.elements or ()) for src in sources(query.plan)])
    live = _run(query, feed, restart=False)
    assert _run(query, feed, restart=True) == live
    rows = query.to_cht(engine="reference")
    assert isinstance(rows, dict)
    expected = sorted(
        (e.start, e.end, repr(sorted(e.payload.items())) if isinstance(e.payload, dict) else "")
        for cht in rows.values()
        for e in cht
    )
    if "window" not in name and "snapshot" not in name:  # payloads are whole rows
        assert _cht(live) == expected


@settings(max_examples=40, deadline=None)
@given(
    keyed_stream(),
    keyed_stream(),
    st.sampled_from(["join", "anti_join", "window_over_join", "snapshot_over_union"]),
    st.sampled_from(["strong", "middle", ("weak", 3), (2, 5)]),
)
def test_align_and_finalize_restore_alike_at_every_consistency_level(
    l_el: Any, r_el: Any, name: str, level: Any
) -> None:
    query = queries(Stream.from_events(l_el, key="k"), Stream.from_events(r_el, key="k"))[name]
    feed = _interleaved(*[list(src.elements or ()) for src in sources(query.plan)])
    live = _outcome(query, feed, restart=False, consistency=level)
    assert _outcome(query, feed, restart=True, consistency=level) == live


def test_a_snapshot_of_another_query_or_version_is_refused() -> None:
    left = Stream.from_events([Insert(0, 1, 5, {"k": 1, "x": 2})], key="k")
    graph = LiveGraph(left.shift(3).plan)
    blob = graph.snapshot()
    with pytest.raises(ValueError, match="another query"):
        LiveGraph(left.join(left).plan).restore(blob)
    data = pickle.loads(blob)
    data["version"] = 99
    with pytest.raises(ValueError, match="version 99 is not supported"):
        LiveGraph(left.shift(3).plan).restore(pickle.dumps(data))


def test_late_elements_are_dropped_by_the_policy_and_counted() -> None:
    src = Stream.from_events([], key="k")
    graph = LiveGraph(src.shift(1).plan, cti_policy="drop")
    graph.push(0, Cti(10))
    assert graph.push(0, Insert(0, 3, 5, {"k": 1})) == []
    assert graph.late == (1, 0)
    assert graph.cti == 10
