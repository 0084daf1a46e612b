"""The rows a streaming query ships to its stateful processor and back.

Both streaming processors (one host per key, :mod:`udm.host.spark.hostprocessor`;
one operator graph per key, :mod:`udm.host.spark.graphstate`) read the same
internal columns and the same packed rows: a bucket's rows of an Arrow batch
travel as one row holding an Arrow IPC stream, because
``transformWithStateInPandas`` regroups its input row by row in Python.
This module holds those columns, the packing, and the per-row checks and
messages both processors share. (Internal columns start with ``udm__``:
names with a leading underscore are renamed on their way into pandas.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from udm.host.rows import reason_unparsable
from udm.host.spark.arrowio import holds_integers
from udm.host.spark.frame import (
    TimeKind,
    ntz_ticks,
    quoted,
    show_time,
    sql_string,
    sub_microsecond_check,
)
from udm.host.spark.session import share_driver_python
from udm.host.spark.types import arrow_schema
from udm.host.time import to_ticks

__all__ = [
    "COUNT_COLUMNS",
    "CTI_COL",
    "E_COL",
    "GROUP_COL",
    "ID_COL",
    "KIND_COL",
    "MIN_BROADCAST",
    "NE_COL",
    "OWN_COLUMNS",
    "PACKED_SCHEMA",
    "ROWS_COL",
    "SEQ_COL",
    "S_COL",
    "WHY_COL",
    "changelog_schema",
    "early_broadcast",
    "integer_fields",
    "mark_state_buckets",
    "pack_rows",
    "python_id",
    "row_problem",
    "show_row",
    "state_buckets_of",
    "stateful_changelog",
    "stats_row",
    "time_problem",
    "time_ticks",
    "unpack_rows",
]

KIND_COL = "udm__kind"
ID_COL = "udm__id"
S_COL = "udm__s"
E_COL = "udm__e"
NE_COL = "udm__ne"
SEQ_COL = "udm__seq"
CTI_COL = "udm__cti"
GROUP_COL = "udm__group"
#: why a row's time strings are no valid time (shipped only for string times)
WHY_COL = "udm__why"
ROWS_COL = "udm__rows"
#: the counts a ``stats`` row of the changelog carries
COUNT_COLUMNS = ("late_dropped", "late_adjusted", "invalid_dropped")
#: the changelog's own columns, which no key or result column may be named
OWN_COLUMNS = ("kind", "seq", "id", "start", "end", "new_end", *COUNT_COLUMNS)


def time_ticks(df: DataFrame, name: str) -> tuple[Column, TimeKind]:
    """Column ``name`` as int64 ticks and the kind of time it held: a streaming
    source takes timestamps or integer ticks and the output gives the same kind
    back. A ``timestamp_ntz`` is its wall time in UTC, as in batch: not cast
    to ``timestamp``, which would read it in the session time zone."""
    dtype = df.schema[name].dataType
    c = F.col(quoted(name))
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(c), "timestamp"
    if isinstance(dtype, T.TimestampNTZType):
        return F.expr(ntz_ticks(quoted(name))), "timestamp_ntz"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return c.cast("long"), "long"
    if isinstance(dtype, T.StringType):  # checked by time_problem, as batch checks them
        return F.expr(f"unix_micros(try_to_timestamp({quoted(name)}))"), "timestamp"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; streaming times must be timestamps, "
        "integer ticks or ISO 8601 strings"
    )


def time_problem(df: DataFrame, names: list[str]) -> Column | None:
    """Why a row's string time columns among ``names`` are no valid time
    (null when they are), as batch says it: unparsable, or finer than a
    microsecond, which Spark's parser (and ``F.to_timestamp``) would drop
    silently; None when no column is a string (nothing to ship)."""
    whens = []
    for name in dict.fromkeys(names):
        if not isinstance(df.schema[name].dataType, T.StringType):
            continue
        c = quoted(name)
        finer, reason = sub_microsecond_check(name)
        # the text itself: the row an error shows has the time as ticks
        text = f"{sql_string(f': {name!r} = ')}, {c}"
        whens.append(f"WHEN {finer} THEN concat({sql_string(reason)}, {text})")
        bad = f"{c} IS NOT NULL AND try_to_timestamp({c}) IS NULL"
        whens.append(f"WHEN {bad} THEN concat({sql_string(reason_unparsable(name))}, {text})")
    if not whens:
        return None
    return F.expr(f"CASE {' '.join(whens)} ELSE CAST(NULL AS STRING) END")


#: the earliest broadcast CTI a Spark watermark carries: watermarks count
#: milliseconds from the epoch and never go below it
MIN_BROADCAST = 1000


def early_broadcast(ticks: int, seq: Any) -> str:
    """The error for a broadcast CTI before the first millisecond after the
    epoch, which Spark's watermark cannot carry."""
    where = f" (seq {seq})" if seq is not None else ""
    return (
        f"broadcast CTI at {ticks} ticks{where}: broadcast CTIs travel as Spark's watermark, "
        "which counts whole milliseconds from 1970-01-01 and never goes below it, so a CTI "
        f"before {MIN_BROADCAST} ticks (1970-01-01T00:00:00.001) would be lost; give the CTI "
        "row a key (an in-band CTI of that key) or use times after the epoch"
    )


def pack_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows to ship to the stateful processor, packed: one row per bucket
    and Arrow batch holding that bucket's rows as an Arrow IPC stream.

    ``transformWithStateInPandas`` regroups its input row by row in Python
    (about 10 us a row); a packed row costs that once for thousands of
    rows. A row with a CTI time (a broadcast CTI) travels alone with that
    time in the CTI column, so the watermark sees exactly what it would see
    unpacked."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        groups = batch.column(GROUP_COL).to_numpy(zero_copy_only=False)
        cti = batch.column(CTI_COL)
        has_cti = cti.is_valid().to_numpy(zero_copy_only=False)
        rows = pa.Table.from_batches([batch]).drop_columns([GROUP_COL, CTI_COL])
        out_groups: list[int] = []
        out_ctis: list[Any] = []
        blobs: list[bytes] = []
        for i in np.flatnonzero(has_cti).tolist():
            at = cti[i].as_py()
            if (ticks := to_ticks(at)) < MIN_BROADCAST:  # Spark would drop it as late
                seq = rows.column(SEQ_COL)[i].as_py() if SEQ_COL in rows.column_names else None
                raise ValueError(early_broadcast(ticks, seq))
            blob = ipc_bytes(rows.slice(i, 1))
            out_groups.append(int(groups[i]))
            out_ctis.append(at)
            blobs.append(blob)
            # and a copy that is never late, for the processor to check the
            # CTI's order: Spark silently drops the first when it is behind
            # the watermark, i.e. when the broadcast CTIs go backwards
            out_groups.append(int(groups[i]))
            out_ctis.append(None)
            blobs.append(blob)
        events = np.flatnonzero(~has_cti)
        if len(events):
            order = events[np.argsort(groups[events], kind="stable")]
            ordered = groups[order]
            cuts = (np.flatnonzero(np.diff(ordered)) + 1).tolist()
            taken = rows.take(pa.array(order))
            for lo, hi in zip([0, *cuts], [*cuts, len(order)], strict=True):
                out_groups.append(int(ordered[lo]))
                out_ctis.append(None)
                blobs.append(ipc_bytes(taken.slice(lo, hi - lo)))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(out_groups, pa.int32()),
                pa.array(out_ctis, cti.type),
                pa.array(blobs, pa.binary()),
            ],
            names=[GROUP_COL, CTI_COL, ROWS_COL],
        )


def ipc_bytes(table: pa.Table) -> bytes:
    """``table`` in Arrow's IPC stream format: how packed rows travel in one
    binary column."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def unpack_rows(frames: Iterator[Any]) -> pa.Table:
    """A bucket's rows of one micro-batch, from the packed rows. A packed
    row with a CTI time served the watermark; its copy without one (see
    :func:`pack_rows`) is the one taken."""
    tables = [
        pa.ipc.open_stream(blob).read_all()
        for pdf in frames
        for blob, cti in zip(pdf[ROWS_COL].tolist(), pdf[CTI_COL].isna().tolist(), strict=True)
        if cti
    ]
    return pa.concat_tables(tables)


def python_value(v: Any) -> Any:
    """A value from pandas or numpy as plain Python (NaN as None), for messages
    and state that must not depend on pandas' types."""
    item = getattr(v, "item", None)
    if item is not None and callable(item):
        try:
            return item()
        except (ValueError, TypeError):
            return v
    if isinstance(v, float) and v != v:
        return None
    return v


def python_id(v: Any) -> Any:
    """An event id as Python: a whole float id (a JSON source's ``5.0``)
    is the integer id it stands for."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def row_problem(
    kind: str,
    s: int | None,
    e: int | None,
    ne: int | None,
    shape: str,
    no_id: bool = False,
    why: str | None = None,
) -> str | None:
    """Why an input row is invalid, or None (``no_id``: an element row
    whose id is null; ``why``: its time strings' problem, see
    :func:`time_problem`, first: an unparsable start is null too)."""
    if why is not None:
        return why
    if s is None:
        return "null start"
    if kind in ("insert", "retract") and no_id:
        return "null id (every insert of an element stream needs an id, which its retractions name)"
    if kind == "retract" and ne is None:
        return "null new_end (a full retraction gives the start itself)"
    if kind == "insert" and shape == "interval" and e is None:
        return "null end (interval events need an end; use shape='edge' for open events)"
    if kind == "insert" and e is not None and e <= s:
        return f"end {e} is not after start {s}"
    return None


def show_row(row: dict[str, Any], names: dict[str, str]) -> str:
    """A row as the input wrote it: internal columns under the input's
    column names (``names``), those the input does not have left out."""
    shown = {}
    for k, v in row.items():
        if not k.startswith("udm__"):
            shown[k] = python_value(v)
        elif k in names:
            shown[names[k]] = python_value(v)
    return repr(shown)


def stats_row(counts: tuple[int, int, int], seq: int) -> dict[str, Any]:
    """A changelog row of kind ``stats``: what a key dropped or adjusted
    in a micro-batch (:data:`COUNT_COLUMNS`), so a streaming query reports
    what it did not show; both processors write it, the key columns and
    the result columns are theirs to fill."""
    row: dict[str, Any] = {
        "kind": "stats",
        "id": None,
        S_COL: None,
        E_COL: None,
        NE_COL: None,
        "seq": seq,
    }
    row.update(zip(COUNT_COLUMNS, counts, strict=True))
    return row


# ------------------------------------------------- the query around a processor

#: the packed rows' schema (see :func:`pack_rows`)
PACKED_SCHEMA = T.StructType(
    [
        T.StructField(GROUP_COL, T.IntegerType(), False),
        T.StructField(CTI_COL, T.TimestampType(), True),
        T.StructField(ROWS_COL, T.BinaryType(), False),
    ]
)


def changelog_schema(fields: list[T.StructField]) -> T.StructType:
    """What a processor yields: the changelog's own columns (times as
    internal tick columns), then ``fields`` (keys, results), then the counts."""
    return T.StructType(
        [
            T.StructField("kind", T.StringType(), False),
            T.StructField("seq", T.LongType(), False),
            T.StructField("id", T.LongType(), True),
            T.StructField(S_COL, T.LongType(), True),
            T.StructField(E_COL, T.LongType(), True),
            T.StructField(NE_COL, T.LongType(), True),
            *fields,
            *[T.StructField(c, T.LongType(), True) for c in COUNT_COLUMNS],
        ]
    )


def integer_fields(fields: list[T.StructField]) -> dict[str, pa.DataType]:
    """The result fields whose Arrow type holds integers, by name: a
    processor checks their values fit before pandas turns them to floats."""
    types = {f.name: arrow_schema(T.StructType([f])).field(0).type for f in fields}
    return {name: t for name, t in types.items() if holds_integers(t)}


def stateful_changelog(
    packed: DataFrame,
    processor: StatefulProcessor,
    out_schema: T.StructType,
    time_kind: TimeKind,
    columns: list[str],
) -> DataFrame:
    """Run ``processor`` per bucket of the packed rows and return the
    changelog: ``kind``, ``seq``, ``id``, the times as the input gave them
    (ticks or timestamps), ``columns`` (keys, results), then the counts."""
    share_driver_python(packed.sparkSession)
    result = packed.groupBy(F.col(GROUP_COL)).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
    )
    return result.select(
        "kind",
        "seq",
        "id",
        show_time(S_COL, time_kind).alias("start"),
        show_time(E_COL, time_kind).alias("end"),
        show_time(NE_COL, time_kind).alias("new_end"),
        *[F.col(quoted(c)) for c in columns],
        *COUNT_COLUMNS,
    )


def mark_state_buckets(changelog: DataFrame, buckets: int) -> None:
    """Remember on a changelog how many state buckets its query hashes keys
    into, for :func:`~udm.host.spark.streaming.start_stream` to check
    against the checkpoint (a DataFrame has no other place for it)."""
    changelog._udm_state_buckets = buckets  # type: ignore[attr-defined]


def state_buckets_of(changelog: DataFrame) -> int | None:
    """The state buckets :func:`mark_state_buckets` remembered, if any."""
    buckets = getattr(changelog, "_udm_state_buckets", None)
    return None if buckets is None else int(buckets)
