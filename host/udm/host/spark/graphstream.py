"""Streaming a whole query: its operator graph per key in Structured Streaming.

``Stream.to_stream()`` runs a query of several operators (where/select,
group_apply, union, join and left_anti_join, lifetime changes, align and
finalize, window operations with one or several UDMs, chains of them) over
one or several streaming DataFrames as one
:class:`~udm.host.engines.livegraph.LiveGraph` per key, inside the same
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
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.engines.livegraph import LiveGraph
from udm.host.plan import (
    AntiJoinNode,
    FinalizeNode,
    GroupNode,
    JoinNode,
    PlanNode,
    SelectNode,
    Source,
    WindowOp,
    is_column,
    rewrite_nodes,
    rewrite_sources,
    sources,
    walk,
)
from udm.host.spark.arrowio import call_type
from udm.host.spark.frame import TimeKind, map_in_arrow, output, quoted
from udm.host.spark.graphstate import (
    E_COL,
    ID_COL,
    KIND_COL,
    NE_COL,
    S_COL,
    SRC_COL,
    GraphProcessor,
)
from udm.host.spark.streamoptions import AdvanceTime
from udm.host.spark.streamrows import (
    CTI_COL,
    GROUP_COL,
    OWN_COLUMNS,
    PACKED_SCHEMA,
    SEQ_COL,
    WHY_COL,
    changelog_schema,
    integer_fields,
    mark_state_buckets,
    pack_rows,
    stateful_changelog,
    time_problem,
    time_ticks,
)
from udm.host.spark.types import function_result_type
from udm.host.time import INFINITY

__all__ = ["partition_keys", "stream_query"]


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
    for k in keys:  # rows of a key must hash alike in every source to meet
        types = {src.df.schema[k].dataType.simpleString() for src in srcs if k in src.df.columns}
        if len(types) > 1:
            raise TypeError(
                f"key column {k!r} has the types {sorted(types)} in the query's sources; cast "
                "it to one type in every source, so that a key's rows meet in one graph"
            )
    policy = advance.policy if advance is not None else cti_policy
    LiveGraph(plan, consistency, policy)  # the query compiles: errors on the driver
    spark = srcs[0].df.sparkSession
    normalized = [
        _normalized(src, i, keys, input, kind, id, new_end, seq) for i, src in enumerate(srcs)
    ]
    payloads = [payload for _, payload, _ in normalized]
    out_fields = _output_fields(plan, spark, payloads)
    clash = [f.name for f in out_fields if f.name in OWN_COLUMNS]
    if clash:
        raise ValueError(
            f"output column {clash[0]!r} has the name of one of the changelog's own columns "
            f"({', '.join(OWN_COLUMNS)}); rename it in the query (select) before streaming"
        )
    packed: DataFrame | None = None
    kinds: set[TimeKind] = set()
    for norm, _, time_kind in normalized:
        kinds.add(time_kind)
        # each source its own watermark: the query's is the least of them
        part = map_in_arrow(
            norm.withColumn(GROUP_COL, _bucket(keys, state_buckets)), pack_rows, PACKED_SCHEMA
        ).withWatermark(CTI_COL, "0 seconds")
        packed = part if packed is None else packed.unionByName(part)
    assert packed is not None
    if len(kinds) > 1:
        raise TypeError(
            f"the sources' times are of different kinds {sorted(kinds)}: every source's "
            "times must be timestamps, every source's timestamp_ntz, or every source's "
            "integer ticks; convert one"
        )
    out_schema = changelog_schema(out_fields)
    # the workers' copy of the plan: sources without their DataFrames
    # (a DataFrame cannot travel; the graph's sources are fed by the processor)
    shipped = rewrite_sources(
        plan, lambda src: dataclasses.replace(src, df=None, rows=(), latest=[])
    )
    processor = GraphProcessor(
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
        integer_fields=integer_fields(out_fields),
    )
    changelog = stateful_changelog(
        packed, processor, out_schema, kinds.pop(), [f.name for f in out_fields]
    )
    mark_state_buckets(changelog, state_buckets)
    return changelog


def _bucket(keys: Sequence[str], buckets: int) -> Column:
    if not keys:
        return F.lit(0)
    return F.pmod(F.hash(*[F.col(quoted(k)) for k in keys]), F.lit(buckets))


def _output_fields(plan: PlanNode, spark: Any, payloads: list[list[str]]) -> list[T.StructField]:
    """The query's output columns and types, as ``to_dataframe()`` gives
    them: the batch plan over empty DataFrames of the sources' event
    columns (times and ``payloads``; nothing runs, the types are static)."""
    from udm.host.spark.execute import SparkEngine

    for node in walk(plan):  # results typed from data would be typed from no data
        if (
            isinstance(node, JoinNode)
            and node.select is not None
            and not isinstance(function_result_type(node.select), T.StructType)
        ):
            raise TypeError(
                f"the output columns of {node.describe().splitlines()[0]}'s select= are "
                "not declared; a streaming query cannot infer them from data: annotate "
                "the function's return type with a TypedDict of the columns"
            )
        if isinstance(node, SelectNode):
            _refuse_undeclared_udfs(node)
        for call in node.calls if isinstance(node, WindowOp) else ():
            if call_type(call) is None:
                raise TypeError(
                    f"the result type of {call.name!r} ({node.describe().splitlines()[0]}) is "
                    "not declared; a streaming query cannot infer it from data: annotate the "
                    "UDM's return type or pass returns= (e.g. 'double')"
                )
    srcs = sources(plan)

    def empty(node: PlanNode) -> PlanNode:
        if isinstance(node, FinalizeNode):
            # a Finalize changes no column, and the batch engines run a
            # bounded one only over an in-memory physical stream
            return dataclasses.replace(node, remember=INFINITY)
        if not isinstance(node, Source):
            return node
        at = next(i for i, s in enumerate(srcs) if s is node)
        names = {node.start, node.end, *payloads[at]}
        schema = T.StructType([f for f in node.df.schema.fields if f.name in names])
        return dataclasses.replace(node, df=spark.createDataFrame([], schema), latest=[])

    table, _ = SparkEngine(spark).table(rewrite_nodes(plan, empty))
    frame = output(table.frame)
    fields = [f for f in frame.schema.fields if f.name not in ("start", "end")]
    untyped = [f.name for f in fields if isinstance(f.dataType, T.NullType | T.BinaryType)]
    if untyped:
        raise TypeError(
            f"the type of output column {untyped[0]!r} is not declared; a streaming query "
            "cannot infer it from data: annotate the UDM's or UDF's return type or pass "
            "returns= (e.g. 'double')"
        )
    return fields


def _refuse_undeclared_udfs(node: SelectNode) -> None:
    """Refuse a ``select`` UDF column without a declared type: the batch
    engine types it from the data (pickled results, then a job), which a
    streaming query, whose schema is fixed before any row, cannot do; over
    no data it would be typed ``string`` and fail in the first micro-batch."""
    for name, expr, returns in node.named:
        if is_column(expr) or returns is not None or function_result_type(expr) is not None:
            continue
        raise TypeError(
            f"the type of select({name}=...) ({node.describe().splitlines()[0]}) is not "
            "declared; a streaming query cannot infer it from data: declare it as a "
            f"(udf, type) tuple, select({name}=(udf, 'double')), or annotate the "
            "function's return type"
        )


def _normalized(
    src: Source,
    index: int,
    keys: list[str],
    input: str,
    kind: str,
    id: str,
    new_end: str,
    seq: str | None,
) -> tuple[DataFrame, list[str], TimeKind]:
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
        if (e_kind == "long") != (time_kind == "long"):  # as batch: the start's kind shows
            raise TypeError(f"{src.start!r} and {end!r} must both be ticks or both timestamps")
    elif src.shape == "point" or input == "elements":
        e_ticks = s_ticks + F.lit(1)
    else:
        e_ticks = F.lit(None).cast("long")
    special = {src.start, end, seq}
    if input == "elements":
        special |= {kind, id, new_end}
    payload = [c for c in cols if c not in special]
    shipped = [F.lit(index).alias(SRC_COL)]
    if input == "elements":
        kind_col = F.lower(F.col(quoted(kind)))
        ne_col = time_ticks(df, new_end)[0] if new_end in cols else F.lit(None).cast("long")
        shipped += [kind_col.alias(KIND_COL), F.col(quoted(id)).alias(ID_COL), ne_col.alias(NE_COL)]
        no_key: Column = F.lit(True)
        for k in keys:
            no_key = no_key & F.col(quoted(k)).isNull()
        cti = F.when((kind_col == "cti") & no_key, F.timestamp_micros(s_ticks))
    else:
        cti = F.lit(None).cast("timestamp")
    shipped += [s_ticks.alias(S_COL), e_ticks.alias(E_COL)]
    if seq is not None:
        shipped.append(F.col(quoted(seq)).cast("long").alias(SEQ_COL))
    shipped.append(cti.alias(CTI_COL))
    why = time_problem(df, [c for c in (src.start, end, new_end) if c is not None and c in cols])
    if why is not None:  # string times: checked as batch checks them
        shipped.append(why.alias(WHY_COL))
    return df.select(*shipped, *[F.col(quoted(c)) for c in payload]), payload, time_kind
