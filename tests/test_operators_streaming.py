"""The CEDR operators in Structured Streaming against the reference engine,
on generated physical streams (the strategies of
``tests/test_operators_spark.py``).

Every operator and consistency level, and window operations after them,
run by ``to_stream()`` (the host engine's operator graph per key inside
the stateful processor) over two streaming sources, each query's output
tagged with its name and all of them unioned: one streaming query per
hypothesis example (a query's cost is mostly Spark's, per source and per
micro-batch, so the queries share their sources). The changelog's CHT is
compared with the reference's, query by query.

Bounded memory (``finalize(m)``, the weak level, a finite ``remember``)
drops by arrival order: the reference's Finalize reads the whole stream,
a streaming query's graph of a key only that key's elements, so "the
latest time seen" differs as soon as two keys interleave. Those queries
read two sources of their own, drawn with one key per pair: pair ``j``'s
elements all come before pair ``j + 1``'s, which are later, so a key's
order is its stream's order (and its latest time the stream's).

Each source is two JSON files, one micro-batch each, so key graphs are
restored from their snapshots and the first half's broadcast CTIs reach
the second as Spark's watermark. Pair ``j``'s CTIs are broadcast (null
key) when ``j`` is even and sent to each of the pair's keys when odd;
every source starts with a broadcast CTI (a source without one would not
hold Spark's watermark back) and ends with one after every event, which
brings every key to the end. Every batch starts with a fixed pair, so
that the first example hypothesis draws (the simplest: empty pairs)
tests something too. Events are finite: the final broadcast CTI must pass
every event for the blocking (strong) queries to output it. Two examples,
derandomized: each costs tens of seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_operators_spark import (
    SETTINGS,
    UNWINDOWED,
    WINDOWED,
    Query,
    declared_sum,
    moved,
    pairs,
)

from udm.host import Cht, Cti, Insert, Retract
from udm.host.query import Stream
from udm.host.stream import Element
from udm.host.time import INFINITY

pytestmark = pytest.mark.spark

Batch = list[tuple[list[Element], list[Element]]]

COLUMNS = "kind string, id long, start long, end long, new_end long, k string, x long, seq long"

#: arrival-order dependent (see the module docstring): over streams with
#: one key per pair
BOUNDED: dict[str, Query] = {
    name: UNWINDOWED[name] for name in ("finalize", "weak", "blocking_remember")
}

#: everything else; a streaming join's select= must declare its columns
UNBOUNDED: dict[str, Query] = {
    **{n: q for n, q in UNWINDOWED.items() if n not in BOUNDED and n != "join_select"},
    "join_select": lambda lhs, rhs, m: lhs.join(rhs, select=declared_sum),
    **WINDOWED,
}

#: each query's output columns besides the key ``k``
COLUMNS_OF: dict[str, tuple[str, ...]] = {
    **{name: ("x",) for name in UNWINDOWED},
    "join": ("x_left", "x_right"),
    "join_where": ("x_left", "x_right"),
    "join_select": ("s", "gap"),
    **{name: ("total",) for name in WINDOWED},
}

#: broadcast CTIs travel as Spark's watermark, whole milliseconds from
#: 1970-01-01 (1000 ticks): pair ``j`` is moved to ``(BASE + j) * SPAN``
#: (a multiple of every window size and start-function step of the queries)
BASE = 1_000

#: after every pair of every batch (at most 9 with the fixed one)
END = (BASE + 10) * 1000


def _fixed(keys: str) -> tuple[list[Element], list[Element]]:
    """A pair with retractions (one full), two keys (or ``keys[0]`` only)
    and CTIs, valid by hand: each CTI is at most every later sync time."""

    def p(k: str, x: int) -> dict[str, Any]:
        return {"k": k if k in keys else keys[0], "x": x}

    left: list[Element] = [
        Insert("f0", 0, 10, p("a", 1)),
        Insert("f1", 3, 8, p("b", 2)),
        Retract("f0", 0, 10, 5),
        Cti(3),
        Insert("f2", 4, 12, p("a", 3)),
        Retract("f1", 3, 8, 3),
    ]
    right: list[Element] = [
        Insert("r0", 2, 6, p("a", 4)),
        Insert("r1", 1, 20, p("b", 5)),
        Retract("r1", 1, 20, 4),
        Cti(2),
        Insert("r2", 5, 9, p("a", 6)),
    ]
    return left, right


def _last(streams: list[list[Element]], prefix: str) -> Insert:
    """An event after all pairs, so that no side is empty."""
    last = (len(streams) + BASE) * 1000
    return Insert("last", last, last + 1, {"k": f"{prefix}|last", "x": 0})


def _elements(streams: list[list[Element]], prefix: str) -> list[Element]:
    """The pairs' streams one after the other (as the Spark batch test
    does), ``BASE`` pairs later, keys prefixed; then the last event."""
    elements = [moved(e, j + BASE, prefix) for j, s in enumerate(streams) for e in s]
    return [*elements, _last(streams, prefix)]


def _rows(streams: list[list[Element]], prefix: str, keys: str) -> list[dict[str, Any]]:
    """The physical stream of ``_elements`` as a streaming source's rows
    (ids as longs), its CTIs broadcast or keyed (see the module docstring),
    between a first and a last broadcast CTI."""
    out: list[dict[str, Any]] = [{"kind": "cti", "start": (BASE - 1) * 1000, "k": None}]
    ids: dict[Hashable, int] = {}
    key_of: dict[Hashable, str] = {}  # a retraction is routed by its insert's key
    chunks: list[list[Element]] = [
        [moved(e, j + BASE, prefix) for e in s] for j, s in enumerate(streams)
    ]
    chunks.append([_last(streams, prefix)])
    for j, elements in enumerate(chunks):
        targets = [f"{prefix}|{j + BASE}{k}" for k in keys] if j % 2 else [None]
        for e in elements:
            if isinstance(e, Cti):
                out += [{"kind": "cti", "start": e.time, "k": k} for k in targets]
                continue
            ident = ids.setdefault(e.id, len(ids))
            if isinstance(e, Retract):
                row = {"kind": "retract", "end": e.old_end, "new_end": e.new_end}
                row["k"] = key_of[e.id]
            else:
                assert isinstance(e, Insert)
                key_of[e.id] = e.payload["k"]
                row = {"kind": "insert", "end": e.end, "k": e.payload["k"], "x": e.payload["x"]}
            out.append({**row, "id": ident, "start": e.start})
    out.append({"kind": "cti", "start": END, "k": None})
    return [{**row, "seq": seq} for seq, row in enumerate(out)]


def _source(spark: Any, folder: Path, rows: list[dict[str, Any]]) -> Stream:
    """A streaming source of ``rows``: two files, one micro-batch each."""
    folder.mkdir(parents=True)
    half = len(rows) // 2
    for i, part in enumerate((rows[:half], rows[half:])):
        path = folder / f"part-{i:03d}.json"
        with open(path, "w") as f:
            for row in part:
                f.write(json.dumps(row) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    df = spark.readStream.schema(COLUMNS).option("maxFilesPerTrigger", 1).json(str(folder))
    return Stream.from_dataframe(df, start="start", end="end", key="k")


def _tagged(queries: dict[str, Query], left: Stream, right: Stream, remember: int) -> list[Stream]:
    """Every query over ``left`` and ``right``, its output tagged with its
    name (column ``q``)."""
    return [
        build(left, right, remember).select(*COLUMNS_OF[name], q=(lambda p, n=name: n, "string"))
        for name, build in queries.items()
    ]


def _by_query(cht: dict[Hashable, Cht]) -> dict[str, dict[Hashable, Cht]]:
    """The tagged union's CHT split by query, without null fields (the
    union has every query's columns, null where a query has none)."""
    out: dict[str, dict[Hashable, list[Any]]] = {}
    for key, part in cht.items():
        for e in part:
            payload = {c: v for c, v in e.payload.items() if v is not None and c != "q"}
            row = (e.start, e.end, payload)
            out.setdefault(e.payload["q"], {}).setdefault(key, []).append(row)
    return {q: {k: Cht(rows) for k, rows in parts.items()} for q, parts in out.items()}


def _streamed(spark: Any, folder: Path, stream: Stream) -> dict[Hashable, Cht]:
    """The CHT of ``stream``'s changelog, run to the end of its sources."""
    from udm.host.spark.streaming import changelog_cht, read_changelog, start_stream

    changelog = stream.to_stream(input="elements", seq="seq")
    query = start_stream(
        changelog, str(folder / "out"), str(folder / "out.ck"), trigger={"availableNow": True}
    )
    query.awaitTermination()
    cht = changelog_cht(read_changelog(spark, str(folder / "out")), ["k"])
    payload = [c for c in cht.columns if c not in ("start", "end")]
    rows: dict[Hashable, list[tuple[int, int, Any]]] = {}
    for r in cht.collect():
        end = INFINITY if r["end"] is None else r["end"]
        rows.setdefault(r["k"], []).append((r["start"], end, {c: r[c] for c in payload}))
    return {k: Cht(v) for k, v in rows.items()}


def differential(
    spark: Any, folder: Path, parts: list[tuple[dict[str, Query], Batch, str]], remember: int
) -> None:
    """Each part's queries over its batch (its keys prefixed with its
    prefix and its sources its own), all in one streaming query: its CHT
    equals the reference's, query by query."""
    references: list[Stream] = []
    streamed: list[Stream] = []
    for queries, batch, prefix in parts:
        keys = "ab" if prefix == "" else "a"
        lefts = [lhs for lhs, _ in batch]
        rights = [rhs for _, rhs in batch]
        references += _tagged(
            queries,
            Stream.from_events(_elements(lefts, prefix), key="k"),
            Stream.from_events(_elements(rights, prefix), key="k"),
            remember,
        )
        streamed += _tagged(
            queries,
            _source(spark, folder / f"{prefix}left", _rows(lefts, prefix, keys)),
            _source(spark, folder / f"{prefix}right", _rows(rights, prefix, keys)),
            remember,
        )
    reference = references[0].union(*references[1:]).to_cht(engine="reference")
    assert isinstance(reference, dict)  # keyed by k
    expected = _by_query(reference)
    got = _by_query(_streamed(spark, folder, streamed[0].union(*streamed[1:])))
    for queries, _, _ in parts:
        for name in queries:
            assert got.get(name, {}) == expected.get(name, {}), name


@settings(SETTINGS, max_examples=2)
@given(pairs(infinite=False), pairs(infinite=False, keys="a"), st.integers(0, 10))
def test_operators_in_structured_streaming_equal_the_reference(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    batch: Batch,
    one_key: Batch,
    remember: int,
) -> None:
    differential(
        spark,
        tmp_path_factory.mktemp("ops"),
        [(UNBOUNDED, [_fixed("ab"), *batch], ""), (BOUNDED, [_fixed("a"), *one_key], "one")],
        remember,
    )
