"""Results typed from their values, on the driver.

A call whose Spark result type is unknown (no ``returns=``, no usable
annotation) writes pickled results; :func:`decode_pickled` infers their
type from the values and decodes the column, caching the pickled table
while the output is in use (:func:`tracking_persisted`, :func:`release`).
"""

from __future__ import annotations

import pickle
import secrets
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.plan import E_COL, S_COL
from udm.host.spark.arrowio import to_arrow_column
from udm.host.spark.frame import map_in_arrow
from udm.host.spark.types import (
    UDM_TYPE_HINT,
    arrow_schema,
    concrete,
    infer_column,
    unify,
)
from udm.host.windows import describe_window, of_key
from udm.sdk.events import WindowDescriptor

__all__ = ["decode_pickled", "release", "released_with", "tracking_persisted"]


def _collect_types(
    columns: list[str], labels: dict[str, str], hint: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def types_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found: dict[str, T.DataType | None] = dict.fromkeys(columns)
        for batch in batches:
            for c in columns:
                values = (pickle.loads(b) for b in batch.column(c).to_pylist() if b is not None)
                try:
                    found[c] = unify(found[c], infer_column(values))
                except TypeError as exc:  # in a worker: the driver's wording, hint and all
                    raise TypeError(_untyped(labels, c, exc, hint)) from None
        yield pa.RecordBatch.from_pydict(
            {
                "column": list(found),
                "type": [None if t is None else t.json() for t in found.values()],
            }
        )

    return types_of


def _untyped(labels: dict[str, str], column: str, exc: TypeError, hint: str) -> str:
    """Why the results of ``column`` have no Spark type, and how to give one."""
    return f"{labels.get(column, f'the results in {column}')}: {exc}; {hint}"


def _decode(
    schema: pa.Schema, columns: list[str], labels: dict[str, str], keys: list[str], hint: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            arrays = []
            for f in schema:
                col = batch.column(f.name)
                if f.name in columns:
                    values = [None if b is None else pickle.loads(b) for b in col.to_pylist()]
                    what = _result_of(batch, labels.get(f.name, f"the result in {f.name}"), keys)
                    col = to_arrow_column(values, f.type, what, hint)
                arrays.append(col)
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return decode


def _result_of(batch: pa.RecordBatch, label: str, keys: list[str]) -> Callable[[int], str]:
    """Names row ``i``'s result in a type error: who computed it, and the
    output lifetime and key it belongs to (when the batch has them)."""
    names = batch.schema.names

    def what(i: int) -> str:
        if S_COL not in names or E_COL not in names:
            return label
        s, e = batch.column(S_COL)[i].as_py(), batch.column(E_COL)[i].as_py()
        key = [batch.column(k)[i].as_py() for k in keys if k in names]
        return f"{label} (output {describe_window(WindowDescriptor(s, e))}{of_key(key)})"

    return what


_persisted: ContextVar[list[DataFrame] | None] = ContextVar("udm_persisted", default=None)
_NONCE = "__udm_nonce"


@contextmanager
def tracking_persisted() -> Iterator[list[DataFrame]]:
    """Collect the tables :func:`decode_pickled` persists while planning,
    for the caller to release with :func:`released_with`."""
    got: list[DataFrame] = []
    token = _persisted.set(got)
    try:
        yield got
    finally:
        _persisted.reset(token)


def release(tables: list[DataFrame]) -> None:
    """Unpersist ``tables`` (their results have been collected, or nothing
    reads them any more)."""
    for t in tables:
        with suppress(Exception):  # the session may be gone (at exit)
            t.unpersist(blocking=False)


def released_with(owner: DataFrame, tables: list[DataFrame]) -> DataFrame:
    """``owner``, with ``tables`` released once it is garbage collected."""
    if tables:
        weakref.finalize(owner, release, list(tables))
    return owner


def decode_pickled(
    df: DataFrame,
    columns: list[str],
    labels: dict[str, str] | None = None,
    keys: Sequence[str] = (),
    hint: str = UDM_TYPE_HINT,
) -> tuple[DataFrame, dict[str, T.DataType]]:
    """Type pickled result columns from their values (``labels``: who
    computed each column, and ``keys``, for an error naming a result;
    ``hint``: how the caller's user gives the type instead, for values
    no one Spark type holds).

    The pickled table is persisted (the UDMs run once), one job unifies
    the value types of every column over all rows, and a ``mapInArrow``
    decodes them. Give ``returns=`` or annotate the UDM to skip this.

    The persisted plan carries a random constant column, so no other query
    (the same query built again over changed data, say) is ever answered
    from this cache; it is registered with :func:`tracking_persisted`, and
    released when the query's output DataFrame is garbage collected.
    """
    from udm.host.spark.errors import udm_errors

    private = df.select("*", F.lit(secrets.randbits(62)).alias(_NONCE))
    private = private.persist(StorageLevel.MEMORY_AND_DISK)
    tracked = _persisted.get()
    if tracked is not None:
        tracked.append(private)
    df = private.drop(_NONCE)
    found: dict[str, T.DataType | None] = dict.fromkeys(columns)
    labels = labels or {}
    types_of = _collect_types(columns, labels, hint)
    rows = map_in_arrow(df.select(*columns), types_of, "column string, type string")
    with udm_errors():  # the UDMs run here, while the query is planned
        collected = rows.collect()
    for r in collected:
        t = None if r["type"] is None else T._parse_datatype_json_string(r["type"])
        try:
            found[r["column"]] = unify(found[r["column"]], t)
        except TypeError as exc:
            raise TypeError(_untyped(labels, r["column"], exc, hint)) from None
    types = {c: concrete(t) for c, t in found.items()}
    fields = [
        T.StructField(f.name, types[f.name], True) if f.name in types else f
        for f in df.schema.fields
    ]
    schema = T.StructType(fields)
    decode = _decode(arrow_schema(schema), columns, labels, list(keys), hint)
    decoded = map_in_arrow(df, decode, schema)
    return decoded, types
