"""Physical-stream replay: the incremental host run per key inside Spark.

A DataFrame of physical stream elements (one row per insert, retraction or
CTI, with an arrival sequence) is grouped by key; each group is replayed in
arrival order through its own :class:`udm.host.Host` in a Python worker
(``applyInArrow``), exactly as a live deployment would see it. The result
is the output physical stream as a changelog, or its CHT.

Input columns (names configurable):

* ``kind``: ``insert``, ``retract`` or ``cti`` (any case);
* ``id``: the event id (inserts and retractions);
* ``start``: the event start, or the CTI time;
* ``end``: an insert's end, a retraction's old end (null: never ends);
* ``new_end``: a retraction's new end (its start for a full retraction);
* ``seq``: the arrival order (any orderable column);
* the key columns; a CTI row with null keys applies to every key, and a
  retraction with null keys to the key of the insert with its id;
* the payload columns (of inserts).

Changelog output: ``seq`` (output order within the key), ``kind``, ``id``
(unique within the key), ``start``, ``end``, ``new_end``, the key columns,
then the result columns. Times come back as they went in (ticks, or
timestamps with null for the end of time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.engine import Host, output_cht
from udm.host.invoke import instantiate
from udm.host.plan import E_COL, S_COL, UdmCall, ValueArg
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.registry import resolve_udm
from udm.host.rows import normalize_value
from udm.host.spark.arrowio import (
    arrow_schema_with_marks,
    call_type,
    pickled_field,
    to_arrow_column,
)
from udm.host.spark.decode import decode_pickled, released_with, tracking_persisted
from udm.host.spark.frame import TimeKind, apply_in_arrow, quoted, show_time
from udm.host.spark.streamoptions import with_settings
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY
from udm.host.windows import WindowSpec

__all__ = ["ReplayOptions", "output_id", "refuse_batch_options", "replay"]

#: the :class:`ReplayOptions` every key's :class:`~udm.host.Host` is made with
HOST_OPTIONS = ("input_clipping", "output_policy", "consistency", "cti_policy")
_NE = "__udm_ne"
_KIND = "__udm_kind"
_SEQ = "__udm_seq"
_GROUP = "__udm_group"
_OUT_KINDS = {Insert: "insert", Retract: "retract", Cti: "cti"}


def _ticks(df: DataFrame, name: str) -> tuple[Column, TimeKind]:
    dtype = df.schema[name].dataType
    c = F.col(quoted(name))
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(c), "timestamp"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return c.cast("long"), "long"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; replay times must be timestamps "
        "or integer ticks"
    )


def refuse_batch_options(udm_args: dict[str, Any], who: str, ctis: str) -> None:
    """Refuse the batch options a run of the incremental host cannot honour
    (rather than pass them on to the UDM as its arguments)."""
    for option in ("emit_empty", "watermark"):
        if option in udm_args:
            raise ValueError(
                f"{option}= is a batch option; {who} the incremental host, which outputs "
                f"only non-empty windows and takes {ctis} instead of a watermark"
            )


def _elements(table: pa.Table, id_col: str, payload: list[str]) -> list[tuple[Element, int]]:
    kinds = table.column(_KIND).to_pylist()
    ids = table.column(id_col).to_pylist()
    starts = table.column(S_COL).to_pylist()
    ends = table.column(E_COL).to_pylist()
    new_ends = table.column(_NE).to_pylist()
    seqs = table.column(_SEQ).to_pylist()
    rows = table.select(payload).to_pylist()
    out: list[tuple[Element, int]] = []
    if None in seqs:
        i = seqs.index(None)
        raise ValueError(
            f"replay row ({kinds[i]}, id {ids[i]!r}, start {starts[i]!r}) has a null seq; "
            "every element needs its arrival position in the seq column"
        )
    for i in sorted(range(len(kinds)), key=lambda i: seqs[i]):
        kind, s = kinds[i], starts[i]
        if s is None:
            raise ValueError(f"replay row #{seqs[i]} ({kind}, id {ids[i]!r}) has a null start")
        element: Element
        if kind in ("insert", "retract") and ids[i] is None:
            raise ValueError(
                f"replay row #{seqs[i]} ({kind}, start {s!r}) has a null id; every insert needs "
                "an id, which its retractions name"
            )
        if kind == "insert":
            element = Insert(ids[i], s, INFINITY if ends[i] is None else ends[i], rows[i])
        elif kind == "retract":
            if new_ends[i] is None:
                raise ValueError(
                    f"replay row #{seqs[i]} retracts {ids[i]!r} without a new end; "
                    "give new_end (the start itself for a full retraction)"
                )
            element = Retract(ids[i], s, INFINITY if ends[i] is None else ends[i], new_ends[i])
        elif kind == "cti":
            element = Cti(s)
        else:
            raise ValueError(
                f"replay row #{seqs[i]} has kind {kind!r}; use 'insert', 'retract' or 'cti'"
            )
        out.append((element, i))
    return out


def _make_replay_fn(
    window: WindowSpec,
    call: UdmCall,
    options: dict[str, Any],
    keys: list[str],
    id_col: str,
    payload: list[str],
    schema: pa.Schema,
    as_cht: bool,
    flush: bool,
) -> Callable[..., Iterator[pa.RecordBatch]]:
    def replay_group(
        key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches))
        key_values = [k.as_py() for k in key[1:]]
        host = Host(window, call.udm, value=call.value_fn, **options)
        outputs: list[Element] = []
        for element, _ in _elements(table, id_col, payload):
            outputs.extend(host.process(element))
        if flush:
            outputs.extend(host.flush())
        columns: list[list[Any]] = [[] for _ in schema]
        n_fixed = 2 if as_cht else 6
        counts: list[Any] = [None, None]
        records: list[tuple[list[Any], Any]] = []
        if as_cht:
            for ev in sorted(output_cht(outputs), key=lambda e: (e.start, e.end)):
                records.append(([ev.start, ev.end], ev.payload))
        else:
            for n, el in enumerate(outputs):
                if isinstance(el, Cti):
                    records.append(([n, "cti", None, el.time, None, None], None))
                elif isinstance(el, Insert):
                    records.append(
                        ([n, "insert", output_id(el.id), el.start, el.end, None], el.payload)
                    )
                else:
                    fixed = [n, "retract", output_id(el.id), el.start, el.old_end, el.new_end]
                    records.append((fixed, el.payload))
            dropped, adjusted = host.stats.dropped, host.stats.adjusted
            if dropped or adjusted:  # the CTI policy's work, counted (never silent)
                records.append(([len(outputs), "stats", None, None, None, None], None))
                counts = [dropped, adjusted]
        for fixed, result in records:
            for j, v in enumerate(fixed):
                columns[j].append(v)
            for j, k in enumerate(key_values):
                columns[n_fixed + j].append(k)
            columns[n_fixed + len(keys)].append(normalize_value(result))
            if not as_cht:
                late = counts if fixed[1] == "stats" else [None, None]
                columns[-2].append(late[0])
                columns[-1].append(late[1])
        arrays = []
        for j, field in enumerate(schema):
            pickled = bool(field.metadata and b"udm.pickled" in field.metadata)
            arrays.append(to_arrow_column(columns[j], None if pickled else field.type, _what))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return replay_group


def _what(i: int) -> str:
    return "the UDM"


def output_id(ident: Any) -> Any:
    """An output event's id as the changelog's ``id`` column holds it: a
    host's :class:`~udm.host.engine.OutputId` by its number, others as
    they are."""
    return getattr(ident, "n", ident)


@dataclass(frozen=True)
class ReplayOptions:
    """How :func:`replay` reads its physical stream and runs the UDM (every
    field may also be given to it as a keyword argument).

    Attributes:
        key: the key column(s); each key is replayed through its own host.
        value: what the UDM reads of a payload (a column, or None for all).
        kind: the element kind column (``insert``, ``retract``, ``cti``).
        id: the event id column.
        start: the event start (or CTI time) column.
        end: an insert's end, a retraction's old end (null: never ends).
        new_end: a retraction's new end column.
        seq: the arrival order column.
        input_clipping: how events are clipped to their windows.
        output_policy: the lifetimes of the output events.
        consistency: the host's consistency level.
        cti_policy: what an element behind a CTI does.
        flush: end the stream after its last element (every window output).
        output: ``"changelog"`` or ``"cht"`` (each key's output CHT).
        returns: the UDM's result type when it is not annotated (else it
            is inferred from the results).
    """

    key: str | Sequence[str] | None = None
    value: ValueArg = None
    kind: str = "kind"
    id: str = "id"
    start: str = "start"
    end: str = "end"
    new_end: str = "new_end"
    seq: str = "seq"
    input_clipping: InputClipping | str = InputClipping.NONE
    output_policy: OutputPolicy | str | None = None
    consistency: str = "speculative"
    cti_policy: str = "raise"
    flush: bool = True
    output: Literal["changelog", "cht"] = "changelog"
    returns: Any = None

    @property
    def keys(self) -> list[str]:
        """The key columns as a list (none without keys)."""
        return [self.key] if isinstance(self.key, str) else list(self.key or [])

    @property
    def host_options(self) -> dict[str, Any]:
        """The options every key's :class:`~udm.host.Host` is made with."""
        return {name: getattr(self, name) for name in HOST_OPTIONS}


def replay(
    df: DataFrame,
    window: WindowSpec,
    udm: Any,
    options: ReplayOptions | None = None,
    **settings: Any,
) -> DataFrame:
    """Replay a physical stream per key through the incremental host.

    ``options`` (a :class:`ReplayOptions`) names the columns and sets the
    host; any of its fields may be given as a keyword argument instead
    (``key="sensor"``), and the other keyword arguments are the UDM's own.
    ``flush=True`` ends the stream after the last element (a CTI at the end
    of time), so every window is output; ``output="cht"`` returns each key's
    output CHT (``start``, ``end``, keys, results) instead of the changelog.
    Elements the CTI policy dropped or adjusted are counted on a ``stats``
    row per key at the end of its changelog (``late_dropped``,
    ``late_adjusted``).
    """
    opts, udm_args = with_settings(options or ReplayOptions(), settings)
    keys = opts.keys
    named = (opts.kind, opts.id, opts.start, opts.end, opts.new_end, opts.seq, *keys)
    missing = [c for c in named if c not in df.columns]
    if missing:
        raise KeyError(f"replay: columns {missing} are not in the DataFrame; columns: {df.columns}")
    refuse_batch_options(udm_args, "replay runs", "the stream's CTIs")
    instance = instantiate(resolve_udm(udm), udm_args or None)
    name = (instance.name or type(instance).__name__).replace(".", "_")
    call = UdmCall(name, instance, opts.value, opts.returns)
    Host(window, instance, value=call.value_fn, **opts.host_options)  # validate on the driver
    norm, payload, time_kind = _normalized(df, opts)
    if keys:
        norm = _keyed(norm, keys, opts.id)
    rtype = call_type(call)
    schema = _output_schema(df, opts, rtype)
    fn = _make_replay_fn(
        window,
        call,
        opts.host_options,
        keys,
        opts.id,
        payload,
        arrow_schema_with_marks(schema),
        opts.output == "cht",
        opts.flush,
    )
    result = apply_in_arrow(norm, [_GROUP, *keys], [], fn, schema)
    rtypes: T.DataType | None = rtype
    cached: list[DataFrame] = []
    if rtype is None:
        with tracking_persisted() as cached:
            label = {_RESULT: f"UDM {call.udm.name!r}"}
            result, inferred = decode_pickled(result, [_RESULT], label, keys)
        rtypes = inferred[_RESULT]
    result_cols: list[Column]
    if isinstance(rtypes, T.StructType):
        result_cols = [F.col(_RESULT).getField(f).alias(f) for f in rtypes.fieldNames()]
    else:
        result_cols = [F.col(_RESULT).alias(name)]

    # null is the end of time; so is a time past year 9999 (no datetime can
    # hold it), which only the flush's final CTI reaches: a grid window's
    # start just below the end of time
    def show(col: str) -> Column:
        return show_time(col, time_kind, end_of_time=_YEAR_10000)

    times_out = [show(S_COL).alias("start"), show(E_COL).alias("end")]
    key_cols = [F.col(quoted(k)) for k in keys]
    if opts.output == "cht":
        return released_with(result.select(*times_out, *key_cols, *result_cols), cached)
    out = result.select(
        "seq",
        "kind",
        "id",
        *times_out,
        show(_NE).alias("new_end"),
        *key_cols,
        *result_cols,
        "late_dropped",
        "late_adjusted",
    )
    return released_with(out, cached)


def _normalized(df: DataFrame, opts: ReplayOptions) -> tuple[DataFrame, list[str], TimeKind]:
    """The rows as a replay worker reads them (kind, seq, times in ticks,
    payload columns, id), the payload columns, and the input's time kind."""
    kind, id, start, end, new_end, seq = (
        opts.kind,
        opts.id,
        opts.start,
        opts.end,
        opts.new_end,
        opts.seq,
    )
    s_ticks, time_kind = _ticks(df, start)
    e_ticks, e_kind = _ticks(df, end)
    ne_ticks, ne_kind = _ticks(df, new_end)
    if len({time_kind, e_kind, ne_kind}) != 1:
        raise TypeError(f"{start!r}, {end!r} and {new_end!r} must all be ticks or all timestamps")
    times = {kind, start, end, new_end, seq}
    payload = [c for c in df.columns if c not in times and c != id]
    norm = df.select(
        F.lit(0).alias(_GROUP),
        F.lower(F.col(quoted(kind))).alias(_KIND),
        F.col(quoted(seq)).alias(_SEQ),
        s_ticks.alias(S_COL),
        e_ticks.alias(E_COL),
        ne_ticks.alias(_NE),
        *[F.col(quoted(c)) for c in payload],
        F.col(quoted(id)),
    )
    return norm, payload, time_kind


def _keyed(norm: DataFrame, keys: list[str], id: str) -> DataFrame:
    """The rows with keys for every key's replay: a CTI row with null keys
    goes to every key, and a retraction with null keys to the key of the
    latest insert of its id before it."""
    is_cti = F.col(_KIND) == "cti"
    no_key = F.lit(True)
    for k in keys:
        no_key = no_key & F.col(quoted(k)).isNull()
    # a retraction without keys belongs to the key of its insert
    orphan = (F.col(_KIND) == "retract") & no_key
    owners = norm.where(F.col(_KIND) == "insert").select(
        F.col(quoted(id)).alias("__udm_oid"),
        F.col(_SEQ).alias("__udm_oseq"),
        *[F.col(quoted(k)).alias(f"__udm_ok{i}") for i, k in enumerate(keys)],
    )
    # the latest insert of the id before the retraction: an id may be
    # reused (in another key, too) once its event is fully retracted
    orphans = norm.where(orphan).join(
        owners,
        (F.col(quoted(id)) == F.col("__udm_oid")) & (F.col("__udm_oseq") < F.col(_SEQ)),
        "left",
    )
    latest = Window.partitionBy(_SEQ, quoted(id)).orderBy(F.col("__udm_oseq").desc_nulls_last())
    orphans = orphans.withColumn("__udm_rank", F.row_number().over(latest)).where(
        F.col("__udm_rank") == 1
    )
    orphans = orphans.select(
        *[
            F.col(f"__udm_ok{keys.index(c)}").alias(c) if c in keys else F.col(quoted(c))
            for c in norm.columns
        ]
    )
    broadcast = norm.where(is_cti & no_key).drop(*keys)
    rest = norm.where(~(is_cti & no_key) & ~orphan).unionByName(orphans)
    key_values = rest.where(~is_cti).select(*[F.col(quoted(k)) for k in keys]).distinct()
    return rest.unionByName(key_values.crossJoin(broadcast))


def _output_schema(df: DataFrame, opts: ReplayOptions, rtype: T.DataType | None) -> T.StructType:
    """What the replay workers yield: the changelog's (or CHT's) own
    columns, the keys, the result (pickled when its type is not known),
    and the late counts of a changelog."""
    schema_of = {f.name: f.dataType for f in df.schema.fields}
    time_type: T.DataType = T.LongType()
    result_field = pickled_field(_RESULT) if rtype is None else T.StructField(_RESULT, rtype, True)
    key_fields = [T.StructField(k, schema_of[k], True) for k in opts.keys]
    if opts.output == "cht":
        fields = [
            T.StructField(S_COL, time_type, False),
            T.StructField(E_COL, time_type, False),
        ]
    elif opts.output == "changelog":
        fields = [
            T.StructField("seq", T.LongType(), False),
            T.StructField("kind", T.StringType(), False),
            T.StructField("id", T.LongType(), True),
            T.StructField(S_COL, time_type, True),
            T.StructField(E_COL, time_type, True),
            T.StructField(_NE, time_type, True),
        ]
    else:
        raise ValueError(f"output is 'changelog' or 'cht', not {opts.output!r}")
    late = (
        []
        if opts.output == "cht"
        else [
            T.StructField("late_dropped", T.LongType(), True),
            T.StructField("late_adjusted", T.LongType(), True),
        ]
    )
    return T.StructType([*fields, *key_fields, result_field, *late])


_RESULT = "__udm_result"
_YEAR_10000 = 253_402_300_800_000_000  # 10000-01-01T00:00:00Z in microseconds
