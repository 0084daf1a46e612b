"""Streaming execution: the incremental host per key inside Structured Streaming.

A streaming DataFrame of events (point or interval rows) or of physical
stream elements (``insert``/``retract``/``cti`` rows) is grouped by key and
fed, micro-batch after micro-batch, to one :class:`udm.host.Host` per key
running inside ``transformWithStateInPandas``. Keys are hashed into
buckets; each bucket keeps exactly one value in the state store (its keys'
pickled :meth:`Host.snapshot` blobs plus a few counters) and at most one
event-time timer: the per-call state API is slow, so everything else lives
in that one blob.

CTIs reach a key in three ways:

* in-band: a CTI row carrying the key (or any CTI row when there are no
  keys) is processed in order with the key's other rows, in the same
  micro-batch, so a window's output appears in the micro-batch in which the
  CTI passing its end arrives;
* generated: :class:`AdvanceTime` settings make CTIs from each key's own
  events (every N events or every duration of application time, minus a
  delay), as StreamInsight's advance-time settings do for a stream;
* broadcast: a CTI row with null keys sets the nullable CTI column, on which
  the query's watermark is defined (rows with a null CTI column, i.e. all
  events, are never late for Spark: nothing is silently dropped). Every key
  receives ``Cti(watermark)`` before its rows of the next micro-batch, or from
  its timer when it has no rows.

The output is a changelog: ``kind`` (``insert``, ``retract``, ``cti`` or
``stats``), ``seq`` (output order within the key and micro-batch), ``id``
(unique within the key), ``start``, ``end``, ``new_end``, the key columns,
the result column(s), and the counts ``late_dropped``, ``late_adjusted`` and
``invalid_dropped`` (set on ``stats`` rows only). :func:`write_changelog`
stores it idempotently per batch id and :func:`changelog_cht` turns it back
into the current CHT.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from udm.host.engine import Host
from udm.host.invoke import instantiate
from udm.host.plan import UdmCall
from udm.host.registry import resolve_udm
from udm.host.spark.evaluate import call_type
from udm.host.spark.frame import TimeKind, map_in_arrow, quoted
from udm.host.spark.hostprocessor import HostProcessor
from udm.host.spark.replay import refuse_batch_options
from udm.host.spark.streamoptions import AdvanceTime, StreamOptions, with_settings
from udm.host.spark.streamrows import (
    COUNT_COLUMNS,
    CTI_COL,
    E_COL,
    GROUP_COL,
    ID_COL,
    KIND_COL,
    NE_COL,
    OWN_COLUMNS,
    PACKED_SCHEMA,
    S_COL,
    SEQ_COL,
    WHY_COL,
    changelog_schema,
    integer_fields,
    mark_state_buckets,
    pack_rows,
    state_buckets_of,
    stateful_changelog,
    time_problem,
    time_ticks,
)
from udm.host.windows import WindowSpec

__all__ = [
    "AdvanceTime",
    "StreamOptions",
    "changelog_cht",
    "read_changelog",
    "start_stream",
    "stream_changelog",
    "stream_counts",
    "write_changelog",
]

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def stream_changelog(
    df: DataFrame,
    window: WindowSpec,
    udm: Any,
    options: StreamOptions | None = None,
    **settings: Any,
) -> DataFrame:
    """The output changelog of a windowed UDM over a streaming DataFrame.

    ``options`` (a :class:`StreamOptions`) says how to read the input and
    run the UDM; any of its fields may be given as a keyword argument
    instead (``key="sensor"``), and the other keyword arguments are the
    UDM's own.

    ``input="events"``: one event per row, ``start`` and ``end`` columns
    (no ``end``: point events); ``input="elements"``: physical stream rows
    with ``kind``, ``id``, ``start``, ``end`` (insert) / old end (retract),
    ``new_end`` and payload columns; a ``cti`` row with null keys reaches
    every key (through the watermark), one with keys only that key. ``seq``
    orders rows within a micro-batch (default: events by start time, elements
    in the order Spark delivers them, which is arbitrary: give elements a
    ``seq`` when a batch can hold several elements of one key).
    ``advance`` generates CTIs per key (then its policy is the CTI policy).
    The UDM's result type must be declared (annotation or ``returns=``):
    a streaming query cannot infer it from data. Keys are hashed into
    ``state_buckets`` buckets, each one state value and one timer (more
    buckets: less state rewritten per micro-batch when few keys are active;
    fewer: fewer state-store calls).
    """
    opts, udm_args = with_settings(options or StreamOptions(), settings)
    _refuse_settings(window, opts, udm_args)
    opts = _resolved_columns(df, opts)
    call = _udm_call(window, udm, opts, udm_args)
    norm, payload, time_kind = _shipped_rows(df, opts)
    packed = map_in_arrow(norm, pack_rows, PACKED_SCHEMA).withWatermark(CTI_COL, "0 seconds")
    result_fields, result_struct = _result_struct(call)
    keys = opts.keys
    _refuse_clashes(keys, result_struct)
    schema_of = {f.name: f.dataType for f in df.schema.fields}
    out_schema = changelog_schema(
        [
            *[T.StructField(k, schema_of[k], True) for k in keys],
            *[T.StructField(f.name, f.dataType, True) for f in result_struct],
        ]
    )
    processor = HostProcessor(
        window,
        call,
        opts.host_options,
        keys,
        [*keys, *payload],  # the keys are shipped as their own columns
        opts.shape or "edge",
        opts.advance,
        opts.on_invalid,
        out_schema.fieldNames(),
        result_fields,
        timers=opts.elements,  # only element streams carry broadcast CTIs
        events=not opts.elements,
        buckets=opts.state_buckets,
        input_names=_input_names(opts),
        integer_fields=integer_fields(result_struct),
    )
    changelog = stateful_changelog(
        packed, processor, out_schema, time_kind, [*keys, *(f.name for f in result_struct)]
    )
    mark_state_buckets(changelog, opts.state_buckets)
    return changelog


def _refuse_settings(window: Any, opts: StreamOptions, udm_args: dict[str, Any]) -> None:
    """The mistakes seen before any column is read."""
    if not isinstance(window, WindowSpec):
        raise TypeError(
            f"window must be a window spec such as TumblingWindow(size) or "
            f"HoppingWindow(size, hop), not {window!r}"
        )
    refuse_batch_options(udm_args, "a streaming query runs", "CTIs (advance= or cti rows)")
    if opts.on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid={opts.on_invalid!r}: use 'raise' or 'drop'")
    if opts.shape == "point" and opts.end is not None:
        raise ValueError(
            f"shape='point' takes no end column (got end={opts.end!r}); a point lasts one tick"
        )


def _resolved_columns(df: DataFrame, opts: StreamOptions) -> StreamOptions:
    """The options with ``end`` and ``shape`` resolved against the
    DataFrame's columns (an element stream's ``end`` column is used when
    there is one), after checking every named column is there."""
    cols = list(df.columns)
    end = opts.end
    needed = [opts.start, *opts.keys]
    if opts.input == "elements":
        needed += [opts.kind, opts.id]
        if end is None and "end" in cols:
            end = "end"
    elif opts.input != "events":
        raise ValueError(f"input is 'events' or 'elements', not {opts.input!r}")
    needed += [c for c in (end, opts.seq) if c is not None]
    if isinstance(opts.value, str):
        needed.append(opts.value)
    missing = [c for c in needed if c not in cols]
    if missing:
        raise KeyError(f"columns {missing} are not in the streaming DataFrame; columns: {cols}")
    if opts.input == "events":
        shape = opts.shape or ("point" if end is None else "interval")
    else:
        shape = opts.shape or "edge"
    return dataclasses.replace(opts, end=end, shape=shape)


def _udm_call(window: WindowSpec, udm: Any, opts: StreamOptions, args: dict[str, Any]) -> UdmCall:
    """The UDM, resolved and instantiated, with its declared result type;
    the host options are checked on the driver (a worker would fail late)."""
    instance = instantiate(resolve_udm(udm), args or None)
    name = opts.name or (instance.name or type(instance).__name__).replace(".", "_")
    call = UdmCall(name, instance, opts.value, opts.returns)
    Host(window, instance, value=call.value_fn, **opts.host_options)  # validate on the driver
    if call_type(call) is None:
        raise TypeError(
            f"the result type of {name!r} is not declared; a streaming query cannot infer it "
            "from data: annotate the UDM's return type or pass returns= (e.g. 'double')"
        )
    return call


def _shipped_rows(df: DataFrame, opts: StreamOptions) -> tuple[DataFrame, list[str], TimeKind]:
    """The rows as the processor reads them: bucket, keys, (element
    columns), times in ticks, (order), the broadcast CTI column, then the
    payload columns; with the payload columns and the input's time kind."""
    start, end, keys = opts.start, opts.end, opts.keys
    cols = list(df.columns)
    s_ticks, time_kind = time_ticks(df, start)
    if end is not None:
        e_ticks, e_kind = time_ticks(df, end)
        if (e_kind == "long") != (time_kind == "long"):  # as batch: the start's kind shows
            raise TypeError(f"{start!r} and {end!r} must both be ticks or both timestamps")
    elif opts.shape == "point":
        e_ticks = s_ticks + F.lit(1)
    else:
        e_ticks = F.lit(None).cast("long")
    # the payload is the row's other columns, key columns included, as in
    # batch queries (events) and replay (elements, whose kind, id and
    # new_end describe the element, not the event)
    special = {start, end, opts.seq, *keys}
    if opts.elements:
        special |= {opts.kind, opts.id, opts.new_end}
    payload = [c for c in cols if c not in special]
    if opts.elements:
        kind_col = F.lower(F.col(quoted(opts.kind)))
        id_col = F.col(quoted(opts.id))
        ne_col = (
            time_ticks(df, opts.new_end)[0] if opts.new_end in cols else F.lit(None).cast("long")
        )
    else:
        kind_col = F.lit("insert")
    if opts.state_buckets < 1:
        raise ValueError(f"state_buckets must be at least 1, not {opts.state_buckets}")
    group = (
        F.pmod(F.hash(*[F.col(quoted(k)) for k in keys]), F.lit(opts.state_buckets))
        if keys
        else F.lit(0)
    )
    no_key: Column = F.lit(True)
    for k in keys:
        no_key = no_key & F.col(quoted(k)).isNull()
    is_cti = kind_col == "cti"
    # an event stream ships no kind, id or new end (every row is an insert
    # without id) and no order column unless given (the processor sorts
    # by start): every column costs per row on the way to Python
    shipped = [group.alias(GROUP_COL), *[F.col(quoted(k)) for k in keys]]
    if opts.elements:
        shipped += [kind_col.alias(KIND_COL), id_col.alias(ID_COL), ne_col.alias(NE_COL)]
    shipped += [s_ticks.alias(S_COL), e_ticks.alias(E_COL)]
    if opts.seq:
        # rows of a key reach the host in this order within a micro-batch;
        # Spark delivers them in no particular order, and a generated CTI
        # would make the earlier-starting events of the same batch late
        shipped.append(F.col(quoted(opts.seq)).cast("long").alias(SEQ_COL))
    shipped.append(F.when(is_cti & no_key, F.timestamp_micros(s_ticks)).alias(CTI_COL))
    why = time_problem(df, [c for c in (start, end, opts.new_end) if c is not None and c in cols])
    if why is not None:  # string times: checked as batch checks them
        shipped.append(why.alias(WHY_COL))
    return df.select(*shipped, *[F.col(quoted(c)) for c in payload]), payload, time_kind


def _result_struct(call: UdmCall) -> tuple[list[str] | None, list[T.StructField]]:
    """The result's fields (None for a single value) and its columns."""
    rtype = call_type(call)
    assert rtype is not None  # refused by _udm_call
    if isinstance(rtype, T.StructType):
        return rtype.fieldNames(), list(rtype.fields)
    return None, [T.StructField(call.name, rtype, True)]


def _refuse_clashes(keys: list[str], result_struct: list[T.StructField]) -> None:
    """A key or result column may not take a name of the changelog's own."""
    clash = [c for c in [*keys, *(f.name for f in result_struct)] if c in OWN_COLUMNS]
    if clash:
        what = "key column" if clash[0] in keys else "result column"
        raise ValueError(
            f"{what} {clash[0]!r} has the name of one of the changelog's own columns "
            f"({', '.join(OWN_COLUMNS)}); rename it: a key column with withColumnRenamed before "
            "streaming, a result with name= (a struct result's fields in the UDM)"
        )


def _input_names(opts: StreamOptions) -> dict[str, str]:
    """The internal columns by the names the input gave them (for errors)."""
    names = {S_COL: opts.start}
    if opts.end is not None:
        names[E_COL] = opts.end
    if opts.seq:
        names[SEQ_COL] = opts.seq
    if opts.elements:
        names.update({KIND_COL: opts.kind, ID_COL: opts.id, NE_COL: opts.new_end})
    return names


# ------------------------------------------------------------------ sinks


def write_changelog(path: str) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function appending each micro-batch's changelog to
    Parquet under ``path/batch_id=N``, overwriting that directory: a batch
    replayed after a failure replaces its first attempt (exactly once)."""
    root = path.rstrip("/")

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(f"{root}/batch_id={batch_id}")

    return write


def start_stream(
    changelog: DataFrame,
    path: str,
    checkpoint: str,
    *,
    trigger: dict[str, Any] | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start writing a changelog (from :func:`stream_changelog`) to ``path``
    with :func:`write_changelog`, checkpointing to ``checkpoint``.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g.
    ``{"availableNow": True}`` or ``{"processingTime": "5 seconds"}``).
    Sets the session's state store to RocksDB, which
    ``transformWithStateInPandas`` requires.
    """
    buckets = state_buckets_of(changelog)
    if buckets is not None:
        _check_state_buckets(checkpoint, buckets)
    spark = changelog.sparkSession
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    writer = changelog.writeStream.foreachBatch(write_changelog(path)).option(
        "checkpointLocation", checkpoint
    )
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


def _check_state_buckets(checkpoint: str, buckets: int) -> None:
    """Refuse to restart a local checkpoint with another ``state_buckets``:
    keys would hash to other buckets and lose their state without a word.
    (The worker also checks each bucket it loads, for other sinks.)"""
    from pathlib import Path

    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return
    marker = Path(checkpoint.removeprefix("file:")) / "udm-state-buckets"
    if marker.exists():
        written = int(marker.read_text().strip() or buckets)
        if written != buckets:
            raise ValueError(
                f"checkpoint {checkpoint!r} holds state written with state_buckets={written}; "
                f"restart with state_buckets={written}, or use a new checkpoint"
            )
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{buckets}\n")


def read_changelog(spark: Any, path: str) -> DataFrame:
    """The changelog written by :func:`write_changelog` (with ``batch_id``)."""
    frame: DataFrame = spark.read.parquet(path)
    return frame


def changelog_cht(changelog: DataFrame, keys: Sequence[str] = ()) -> DataFrame:
    """The current CHT of a changelog: each insert whose latest retraction
    (by ``batch_id``, then ``seq``) gives its end; fully retracted events
    are gone. Columns: ``start``, ``end``, the keys, the result columns."""
    keys = list(keys)
    skip = {"kind", "seq", "id", "start", "end", "new_end", "batch_id", *COUNT_COLUMNS, *keys}
    results = [c for c in changelog.columns if c not in skip]
    k = [F.col(quoted(c)) for c in keys]
    inserts = changelog.where(F.col("kind") == "insert").select(
        *k, "id", "start", "end", *[F.col(quoted(c)) for c in results]
    )
    order = (
        F.struct(F.col("batch_id"), F.col("seq"))
        if "batch_id" in changelog.columns
        else (F.struct(F.col("seq")))
    )
    last = (
        changelog.where(F.col("kind") == "retract")
        .groupBy(*k, "id")
        .agg(F.max_by(F.col("new_end"), order).alias("__udm_new_end"))
        .select(
            *[F.col(quoted(c)).alias(f"__udm_k{i}") for i, c in enumerate(keys)],
            F.col("id").alias("__udm_id"),
            "__udm_new_end",
        )
    )
    # null-safe on the keys: null is a key value of its own
    match = F.col("id") == F.col("__udm_id")
    for i, c in enumerate(keys):
        match = match & F.col(quoted(c)).eqNullSafe(F.col(f"__udm_k{i}"))
    joined = inserts.join(last, match, "left")
    end_col = F.coalesce(F.col("__udm_new_end"), F.col("end"))
    joined = joined.withColumn(
        "end", F.when(F.col("__udm_new_end").isNull(), F.col("end")).otherwise(end_col)
    )
    return joined.where(F.col("end").isNull() | (F.col("end") > F.col("start"))).select(
        "start", "end", *k, *[F.col(quoted(c)) for c in results]
    )


def stream_counts(changelog: DataFrame) -> dict[str, int]:
    """Totals of the ``stats`` rows: late events dropped or adjusted by the
    CTI policy and invalid rows dropped by ``on_invalid='drop'``."""
    row = (
        changelog.where(F.col("kind") == "stats")
        .agg(*[F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in COUNT_COLUMNS])
        .first()
    )
    return {c: int(row[c]) if row is not None else 0 for c in COUNT_COLUMNS}
