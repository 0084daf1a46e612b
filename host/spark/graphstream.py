"""Streaming a whole query: its operator graph per key in Structured Streaming.

``Stream.to_stream()`` runs a query of several operators (where/select,
group_apply, union, join and left_anti_join, lifetime changes, align and
finalize, window operations with one or several UDMs, chains of them) over
one or several streaming DataFrames as one
:class:`~udm.host.engines.graph.LiveGraph` per key, inside the same
``transformWithStateInPandas`` processor machinery as
:mod:`udm.host.spark.streaming`: every source's rows are tagged with the
source's number, hashed by the key into buckets, packed, unioned and
grouped by bucket; the two sides of a join meet in the bucket of their
join key. A bucket keeps one state value: its keys' pickled graph
snapshots and counters.

Every operator that holds state by key must be keyed by (at least) the
query's key columns, so that one key's graph sees every event it needs;
anything else is refused naming the operator.

CTIs: each source's rows are a physical stream (``input="elements"``:
``kind``/``id``/``new_end`` columns; a ``cti`` row with the key columns
reaches that key's graph, one with null keys every key, through the
source's own watermark: Spark's watermark of several inputs is the least
of theirs, which is the time every source has reached) or events
(``input="events"``, with ``advance=`` generating CTIs per key and
source). The output is the changelog of :mod:`udm.host.spark.streaming`
with the query's output columns (``to_dataframe()``'s) as payload.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from udm.host.engines.graph import LiveGraph
from udm.host.errors import CtiViolationError
from udm.host.plan import (
    AntiJoinNode,
    GroupNode,
    JoinNode,
    PlanNode,
    Source,
    WindowOp,
    rewrite_sources,
    sources,
    walk,
)
from udm.host.spark.evaluate import _holds_integers, call_type, to_arrow_column
from udm.host.spark.frame import map_in_arrow, q, show_time
from udm.host.spark.session import share_driver_python
from udm.host.spark.streaming import (
    COUNT_COLUMNS,
    CTI_COL,
    GROUP_COL,
    ROWS_COL,
    SEQ_COL,
    AdvanceTime,
    pack_rows,
    python_id,
    row_problem,
    show_row,
    time_ticks,
)
from udm.host.spark.types import arrow_schema
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, format_time
from udm.host.validation import CtiPolicy

__all__ = ["partition_keys", "stream_query"]

_SRC = "udm__src"
_KIND = "udm__kind"
_ID = "udm__id"
_S = "udm__s"
_E = "udm__e"
_NE = "udm__ne"
_OWN = ("kind", "seq", "id", "start", "end", "new_end", *COUNT_COLUMNS)


def partition_keys(plan: PlanNode) -> tuple[str, ...]:
    """The columns a streaming query is partitioned by (its output keys),
    after checking that every operator holding state by key is keyed by
    all of them: a window's groups, a ``group_apply``, a join's ``on``."""
    keys = plan.keys()
    for node in walk(plan):
        own: tuple[str, ...] | None = None
        if isinstance(node, WindowOp):
            own = node.input.keys()
        elif isinstance(node, GroupNode):
            own = node.group_keys
        elif isinstance(node, JoinNode | AntiJoinNode):
            own = node.on
        if own is not None and not set(keys) <= set(own):
            name = node.describe().splitlines()[0]
            raise ValueError(
                f"to_stream() runs a query as one operator graph per key "
                f"{list(keys)}, but operator '{name}' is keyed by {list(own)}: its state "
                "would span several keys' graphs. Key every window, group_apply and join "
                f"by {list(keys)} (and possibly more columns), or run the query in batch"
            )
    return keys


def stream_query(
    plan: PlanNode,
    *,
    input: str = "events",
    kind: str = "kind",
    id: str = "id",
    new_end: str = "new_end",
    seq: str | None = None,
    advance: AdvanceTime | None = None,
    cti_policy: str = "raise",
    consistency: Any = None,
    state_buckets: int = 32,
) -> DataFrame:
    """The output changelog of ``plan`` over its streaming sources (see the
    module docstring); options as :func:`udm.host.spark.streaming.stream_changelog`'s,
    ``consistency`` as ``Stream.with_consistency``."""
    if input not in ("events", "elements"):
        raise ValueError(f"input is 'events' or 'elements', not {input!r}")
    if state_buckets < 1:
        raise ValueError(f"state_buckets must be at least 1, not {state_buckets}")
    if advance is not None and input == "elements":
        raise ValueError("advance= generates CTIs for events; an element stream carries its own")
    keys = list(partition_keys(plan))
    srcs = sources(plan)
    for i, src in enumerate(srcs):
        if src.df is None or not src.df.isStreaming:
            raise ValueError(
                f"to_stream(): source {i} of the query is not a streaming DataFrame "
                "(spark.readStream); every source of a streaming query must be one"
            )
    policy = advance.policy if advance is not None else cti_policy
    LiveGraph(plan, consistency, policy)  # the query compiles: errors on the driver
    spark = srcs[0].df.sparkSession
    normalized = [
        _normalized(src, i, keys, input, kind, id, new_end, seq) for i, src in enumerate(srcs)
    ]
    payloads = [payload for _, payload, _ in normalized]
    out_fields = _output_fields(plan, spark, payloads)
    clash = [f.name for f in out_fields if f.name in _OWN]
    if clash:
        raise ValueError(
            f"output column {clash[0]!r} has the name of one of the changelog's own columns "
            f"({', '.join(_OWN)}); rename it in the query (select) before streaming"
        )
    packed_schema = T.StructType(
        [
            T.StructField(GROUP_COL, T.IntegerType(), False),
            T.StructField(CTI_COL, T.TimestampType(), True),
            T.StructField(ROWS_COL, T.BinaryType(), False),
        ]
    )
    packed: DataFrame | None = None
    kinds = set()
    for norm, _, time_kind in normalized:
        kinds.add(time_kind)
        # each source its own watermark: the query's is the least of them
        part = map_in_arrow(
            norm.withColumn(GROUP_COL, _bucket(keys, state_buckets)), pack_rows, packed_schema
        ).withWatermark(CTI_COL, "0 seconds")
        packed = part if packed is None else packed.unionByName(part)
    assert packed is not None
    if len(kinds) > 1:
        raise TypeError("every source's times must be timestamps, or every source's integer ticks")
    out_schema = T.StructType(
        [
            T.StructField("kind", T.StringType(), False),
            T.StructField("seq", T.LongType(), False),
            T.StructField("id", T.LongType(), True),
            T.StructField(_S, T.LongType(), True),
            T.StructField(_E, T.LongType(), True),
            T.StructField(_NE, T.LongType(), True),
            *out_fields,
            *[T.StructField(c, T.LongType(), True) for c in COUNT_COLUMNS],
        ]
    )
    # the workers' copy of the plan: sources without their DataFrames
    # (a DataFrame cannot travel; the graph's sources are fed by the processor)
    shipped = rewrite_sources(
        plan, lambda src: dataclasses.replace(src, df=None, rows=(), latest=[])
    )
    processor = _GraphProcessor(
        shipped,
        keys,
        payloads,
        [f.name for f in out_fields],
        out_schema.fieldNames(),
        consistency=consistency,
        policy=policy,
        advance=advance,
        on_invalid=[src.on_invalid for src in srcs],
        shapes=[src.shape for src in srcs],
        events=input == "events",
        buckets=state_buckets,
        integer_fields={
            f.name: arrow_schema(T.StructType([f])).field(0).type
            for f in out_fields
            if _holds_integers(arrow_schema(T.StructType([f])).field(0).type)
        },
    )
    share_driver_python(spark)
    result = packed.groupBy(F.col(GROUP_COL)).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
    )
    time_kind = kinds.pop()
    changelog = result.select(
        "kind",
        "seq",
        "id",
        show_time(_S, time_kind).alias("start"),
        show_time(_E, time_kind).alias("end"),
        show_time(_NE, time_kind).alias("new_end"),
        *[F.col(q(f.name)) for f in out_fields],
        *COUNT_COLUMNS,
    )
    changelog._udm_state_buckets = state_buckets  # type: ignore[attr-defined]  # start_stream
    return changelog


def _bucket(keys: Sequence[str], buckets: int) -> Column:
    if not keys:
        return F.lit(0)
    return F.pmod(F.hash(*[F.col(q(k)) for k in keys]), F.lit(buckets))


def _output_fields(plan: PlanNode, spark: Any, payloads: list[list[str]]) -> list[T.StructField]:
    """The query's output columns and types, as ``to_dataframe()`` gives
    them: the batch plan over empty DataFrames of the sources' event
    columns (times and ``payloads``; nothing runs, the types are static)."""
    from udm.host.query import Stream

    for node in walk(plan):  # results typed from data would be typed from no data
        for call in node.calls if isinstance(node, WindowOp) else ():
            if call_type(call) is None:
                raise TypeError(
                    f"the result type of {call.name!r} ({node.describe().splitlines()[0]}) is "
                    "not declared; a streaming query cannot infer it from data: annotate the "
                    "UDM's return type or pass returns= (e.g. 'double')"
                )
    srcs = sources(plan)

    def empty(src: Source) -> PlanNode:
        at = next(i for i, s in enumerate(srcs) if s is src)
        names = {src.start, src.end, *payloads[at]}
        schema = T.StructType([f for f in src.df.schema.fields if f.name in names])
        return dataclasses.replace(src, df=spark.createDataFrame([], schema), latest=[])

    frame = Stream(rewrite_sources(plan, empty)).to_dataframe(spark)
    fields = [f for f in frame.schema.fields if f.name not in ("start", "end")]
    untyped = [f.name for f in fields if isinstance(f.dataType, T.NullType | T.BinaryType)]
    if untyped:
        raise TypeError(
            f"the type of output column {untyped[0]!r} is not declared; a streaming query "
            "cannot infer it from data: annotate the UDM's or UDF's return type or pass "
            "returns= (e.g. 'double')"
        )
    return fields


def _normalized(
    src: Source,
    index: int,
    keys: list[str],
    input: str,
    kind: str,
    id: str,
    new_end: str,
    seq: str | None,
) -> tuple[DataFrame, list[str], str]:
    """A source's rows as the processor reads them (internal columns, then
    the payload columns), its payload columns and its time kind."""
    df = src.df
    cols = list(df.columns)
    end = src.end
    needed = [src.start, *keys]
    if input == "elements":
        needed += [kind, id]
        if end is None and "end" in cols:
            end = "end"
    if end is not None:
        needed.append(end)
    if seq is not None:
        needed.append(seq)
    missing = [c for c in needed if c not in cols]
    if missing:
        raise KeyError(f"columns {missing} are not in source {index} of the query; columns: {cols}")
    s_ticks, time_kind = time_ticks(df, src.start)
    if end is not None:
        e_ticks, e_kind = time_ticks(df, end)
        if e_kind != time_kind:
            raise TypeError(f"{src.start!r} and {end!r} must both be ticks or both timestamps")
    elif src.shape == "point" or input == "elements":
        e_ticks = s_ticks + F.lit(1)
    else:
        e_ticks = F.lit(None).cast("long")
    special = {src.start, end, seq}
    if input == "elements":
        special |= {kind, id, new_end}
    payload = [c for c in cols if c not in special]
    shipped = [F.lit(index).alias(_SRC)]
    if input == "elements":
        kind_col = F.lower(F.col(q(kind)))
        ne_col = time_ticks(df, new_end)[0] if new_end in cols else F.lit(None).cast("long")
        shipped += [kind_col.alias(_KIND), F.col(q(id)).alias(_ID), ne_col.alias(_NE)]
        no_key: Column = F.lit(True)
        for k in keys:
            no_key = no_key & F.col(q(k)).isNull()
        cti = F.when((kind_col == "cti") & no_key, F.timestamp_micros(s_ticks))
    else:
        cti = F.lit(None).cast("timestamp")
    shipped += [s_ticks.alias(_S), e_ticks.alias(_E)]
    if seq is not None:
        shipped.append(F.col(q(seq)).cast("long").alias(SEQ_COL))
    shipped.append(cti.alias(CTI_COL))
    return df.select(*shipped, *[F.col(q(c)) for c in payload]), payload, time_kind


class _GraphProcessor(StatefulProcessor):
    """The operator graphs of one bucket of keys (one per key), kept as
    one pickled state value with the bucket's event-time timer."""

    def __init__(
        self,
        plan: PlanNode,
        keys: list[str],
        payloads: list[list[str]],
        out_columns: list[str],
        columns: list[str],
        *,
        consistency: Any,
        policy: str,
        advance: AdvanceTime | None,
        on_invalid: list[str],
        shapes: list[str],
        events: bool,
        buckets: int,
        integer_fields: dict[str, pa.DataType],
    ) -> None:
        self.plan = plan
        self.keys = keys
        self.payloads = payloads
        self.out_columns = out_columns
        self.columns = columns
        self.consistency = consistency
        self.policy = policy
        self.advance = advance
        self.on_invalid = on_invalid
        self.shapes = shapes
        self.events = events
        self.buckets = buckets
        self.integer_fields = integer_fields

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        schema = T.StructType([T.StructField("blob", T.BinaryType(), True)])
        self.state = handle.getValueState("graphs", schema)

    # -------------------------------------------------------- state blob

    def _load(self) -> dict[str, Any]:
        saved = self.state.get() if self.state.exists() else None
        if saved is None or saved[0] is None:
            return {"keys": {}, "timer": None, "buckets": self.buckets, "broadcast": {}}
        bucket: dict[str, Any] = pickle.loads(saved[0])
        if bucket["buckets"] != self.buckets:
            raise ValueError(
                f"this checkpoint's state was written with state_buckets={bucket['buckets']}, "
                f"but the query now has state_buckets={self.buckets}; restart with "
                f"state_buckets={bucket['buckets']}, or use a new checkpoint"
            )
        return bucket

    def _save(self, bucket: dict[str, Any]) -> None:
        if not self.events:  # broadcast CTIs reach idle keys through a timer
            wanted = min(
                (max(e["wm"], 0) // 1000 + 1 for e in bucket["keys"].values() if e["open"]),
                default=None,
            )
            if bucket["timer"] != wanted:
                if bucket["timer"] is not None:
                    self.handle.deleteTimer(bucket["timer"])
                if wanted is not None:
                    self.handle.registerTimer(wanted)
                bucket["timer"] = wanted
        self.state.update((pickle.dumps(bucket, pickle.HIGHEST_PROTOCOL),))

    def _graph(self, entry: dict[str, Any] | None) -> tuple[LiveGraph, dict[str, Any]]:
        graph = LiveGraph(self.plan, self.consistency, self.policy)
        if entry is None:
            meta = {
                "wm": -1,
                "ids": {},
                "next": 0,
                "n": [0] * len(self.payloads),
                "gen": [[0, None, None] for _ in self.payloads],  # count, max start, CTI
            }
            return graph, meta
        graph.restore(entry["graph"])
        return graph, entry

    def _store(
        self, bucket: dict[str, Any], kt: tuple[Any, ...], graph: LiveGraph, meta: dict[str, Any]
    ) -> None:
        meta["graph"] = graph.snapshot()
        meta["open"] = graph.cti < INFINITY
        bucket["keys"][kt] = meta

    # ---------------------------------------------------------- handlers

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Any]:
        collecting = gc.isenabled()
        gc.disable()  # many short-lived objects, no cycles (as the host's loops)
        try:
            yield from self._input(rows, timerValues)
        finally:
            if collecting:
                gc.enable()

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Any]:
        import pandas as pd

        bucket = self._load()
        bucket["timer"] = None  # a fired timer is gone
        out = self._advance(bucket, timerValues.getCurrentWatermarkInMs() * 1000, set())
        self._save(bucket)
        if out:
            yield pd.DataFrame(out, columns=self.columns, dtype=object)

    def close(self) -> None:
        pass

    def _input(self, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Any]:
        import pandas as pd

        bucket = self._load()
        wm_ms = timerValues.getCurrentWatermarkInMs()
        wm = wm_ms * 1000 if wm_ms > 0 else None
        by_key: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
        late = 0
        for src, row in self._rows(rows):
            kt = tuple(row[k] for k in self.keys)
            if self.keys and row.get(_KIND) == "cti" and all(v is None for v in kt):
                late += self._broadcast_order(bucket, src, row)
                continue  # it served the source's watermark
            by_key.setdefault(kt, []).append((src, row))
        out: list[dict[str, Any]] = []
        for kt, key_rows in by_key.items():
            out += self._key(bucket, kt, key_rows, wm)
        if late:
            out.append(self._stats([None] * len(self.keys), (late, 0, 0), 0))
        if wm is not None:
            out += self._advance(bucket, wm, set(by_key))
        self._save(bucket)
        if out:
            yield pd.DataFrame(out, columns=self.columns, dtype=object)

    def _rows(self, frames: Iterator[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The micro-batch's rows, source by source, each in its order
        (``seq``, else events by start, else as delivered)."""
        tables: dict[int, list[pa.Table]] = {}
        for pdf in frames:
            for blob, no_cti in zip(
                pdf[ROWS_COL].tolist(), pdf[CTI_COL].isna().tolist(), strict=True
            ):
                if no_cti:  # a broadcast CTI's copy with a time served the watermark
                    table = pa.ipc.open_stream(blob).read_all()
                    tables.setdefault(table.column(_SRC)[0].as_py(), []).append(table)
        for src in sorted(tables):
            table = pa.concat_tables(tables[src])
            names = table.column_names
            if SEQ_COL in names and table.column(SEQ_COL).null_count < table.num_rows:
                table = table.take(pc.sort_indices(table, sort_keys=[(SEQ_COL, "ascending")]))
            elif self.events:
                table = table.take(pc.sort_indices(table, sort_keys=[(_S, "ascending")]))
            for row in table.to_pylist():
                yield src, row

    def _broadcast_order(self, bucket: dict[str, Any], src: int, row: dict[str, Any]) -> int:
        """1 if a source's broadcast CTI goes backwards and the policy drops
        it (Spark dropped it from the watermark), else 0; raises under
        ``raise``."""
        t = row[_S]
        latest = bucket["broadcast"].get(src)
        if latest is None or t >= latest:
            bucket["broadcast"][src] = t
            return 0
        if CtiPolicy.parse(self.policy) is CtiPolicy.RAISE:
            raise CtiViolationError(
                Cti(t),
                row.get(SEQ_COL) or 0,
                f"broadcast CTI of source {src} goes backwards: its latest broadcast CTI is "
                f"{format_time(latest)}; fix the source, or use cti_policy='drop'",
            )
        return 1

    def _advance(self, bucket: dict[str, Any], wm: int, skip: set[Any]) -> list[dict[str, Any]]:
        """Bring every open key of the bucket to the watermark."""
        out = []
        for kt, entry in list(bucket["keys"].items()):
            if kt in skip or not entry["open"] or wm <= entry["wm"]:
                continue
            graph, meta = self._graph(entry)
            outputs = self._watermark(graph, meta, wm)
            self._store(bucket, kt, graph, meta)
            out += self._frame(outputs, list(kt), meta, (0, 0, 0))
        return out

    def _watermark(self, graph: LiveGraph, meta: dict[str, Any], wm: int) -> list[Any]:
        """Every source has reached the watermark (the least of theirs)."""
        meta["wm"] = wm
        out: list[Any] = []
        for src in range(len(self.payloads)):
            if graph.entries[src].validator.cti < wm:
                out += graph.push(src, Cti(wm))
        return out

    def _key(
        self,
        bucket: dict[str, Any],
        kt: tuple[Any, ...],
        rows: list[tuple[int, dict[str, Any]]],
        wm: int | None,
    ) -> list[dict[str, Any]]:
        """Feed one key's rows of the micro-batch to its graph."""
        graph, meta = self._graph(bucket["keys"].get(kt))
        before = graph.late
        outputs: list[Any] = []
        if wm is not None and wm > meta["wm"]:
            outputs += self._watermark(graph, meta, wm)
        invalid = 0
        for src, row in rows:
            element = self._element(src, row, meta, kt)
            if element is None:
                invalid += 1
                continue
            outputs += graph.push(src, element)
            if type(element) is Insert and self.advance is not None:
                cti = self._generate(meta["gen"][src], element.start)
                if cti is not None:
                    outputs += graph.push(src, Cti(cti))
        after = graph.late
        counts = (after[0] - before[0], after[1] - before[1], invalid)
        self._store(bucket, kt, graph, meta)
        return self._frame(outputs, list(kt), meta, counts)

    def _element(
        self, src: int, row: dict[str, Any], meta: dict[str, Any], kt: tuple[Any, ...]
    ) -> Element | None:
        """The row as a physical element (None: invalid and dropped)."""
        kind = row.get(_KIND) or "insert"
        s, e = row[_S], row[_E]
        if kind == "cti" and s is not None:
            return Cti(s)
        ident = row.get(_ID)
        reason = row_problem(
            kind, s, e, row.get(_NE), self.shapes[src], not self.events and ident is None
        )
        if reason is None and kind not in ("insert", "retract"):
            reason = f"row kind {kind!r} is not insert, retract or cti"
        if reason:
            if self.on_invalid[src] == "drop":
                return None
            shown = show_row({c: v for c, v in row.items() if c != _SRC}, {_S: "start", _E: "end"})
            raise ValueError(
                f"invalid input row of source {src} for key {list(kt)}: {reason}: {shown}; "
                "fix the row or use on_invalid='drop'"
            )
        end = INFINITY if e is None else e
        if kind == "retract":
            return Retract(python_id(ident), s, end, row[_NE])
        if ident is None:  # an event stream's rows have no ids
            ident = meta["n"][src]
            meta["n"][src] += 1
        else:
            ident = python_id(ident)
        return Insert(ident, s, end, {c: row[c] for c in self.payloads[src]})

    def _generate(self, gen: list[Any], start: int) -> int | None:
        """The CTI ``advance`` issues after an event starting at ``start``
        (``gen``: the source's count, latest start and latest CTI)."""
        adv = self.advance
        assert adv is not None
        gen[0] += 1
        if gen[1] is None or start > gen[1]:
            gen[1] = start
        candidate = gen[1] - adv.delay_ticks
        due = adv.every_events is not None and gen[0] % adv.every_events == 0
        step = adv.every_ticks
        if step is not None and (gen[2] is None or candidate >= gen[2] + step):
            due = True
        if due and (gen[2] is None or candidate > gen[2]):
            gen[2] = candidate
            return int(candidate)
        return None

    # ----------------------------------------------------------- output

    def _frame(
        self,
        outputs: list[Any],
        key_values: list[Any],
        meta: dict[str, Any],
        counts: tuple[int, int, int],
    ) -> list[dict[str, Any]]:
        """Changelog rows of one key's output; output ids become numbers
        unique within the key (kept until a CTI makes the event final)."""
        ids: dict[Any, list[int]] = meta["ids"]
        rows: list[dict[str, Any]] = []
        for el in outputs:
            kind = type(el)
            row: dict[str, Any]
            if kind is Cti:
                row = {"kind": "cti", "id": None, _S: el.time, _E: None, _NE: None}
                # an event ending before a CTI can no longer be retracted
                for ident in [i for i, (_, end) in ids.items() if end < el.time]:
                    del ids[ident]
            elif kind is Insert:
                n = meta["next"]
                meta["next"] += 1
                ids[el.id] = [n, el.end]
                row = {"kind": "insert", "id": n, _S: el.start, _E: el.end, _NE: None}
                self._payload(row, el.payload, key_values)
            elif kind is Retract:
                n, _ = ids[el.id]
                if el.new_end <= el.start:
                    del ids[el.id]
                else:
                    ids[el.id] = [n, el.new_end]
                row = {"kind": "retract", "id": n, _S: el.start, _E: el.old_end, _NE: el.new_end}
            else:
                continue  # ExternalCTIs are the graph's own business
            row["seq"] = len(rows)
            rows.append(self._complete(row, key_values))
        if any(counts):
            rows.append(self._stats(key_values, counts, len(rows)))
        return rows

    def _payload(self, row: dict[str, Any], payload: Any, key_values: list[Any]) -> None:
        for c in self.out_columns:
            row[c] = payload.get(c) if isinstance(payload, dict) else None
        for f, dtype in self.integer_fields.items():
            if row[f] is not None:
                to_arrow_column([row[f]], dtype, _label(f, row[_S], row[_E]))

    def _complete(self, row: dict[str, Any], key_values: list[Any]) -> dict[str, Any]:
        for c in self.out_columns:
            row.setdefault(c, None)
        row.update(zip(self.keys, key_values, strict=True))
        for c in COUNT_COLUMNS:
            row.setdefault(c, None)
        return row

    def _stats(
        self, key_values: list[Any], counts: tuple[int, int, int], seq: int
    ) -> dict[str, Any]:
        row: dict[str, Any] = {
            "kind": "stats",
            "id": None,
            _S: None,
            _E: None,
            _NE: None,
            "seq": seq,
        }
        row.update(zip(COUNT_COLUMNS, counts, strict=True))
        return self._complete(row, key_values)


def _label(column: str, start: int, end: int) -> Callable[[int], str]:
    """How an error names an output value (for :func:`to_arrow_column`)."""
    text = f"output column {column!r} of the event [{format_time(start)}, {format_time(end)})"
    return lambda _: text
