"""A join's ``select=`` on Spark batch: the output payload of every joined
pair built by a Python function of the two payloads.

The reference engine's output payload of a pair is the ``on`` columns, then
the columns of the dict ``select(l, r)`` returns (a dict naming an ``on``
column overrides it); over all pairs, a column some dicts lack is null
there. A Spark table needs those columns and their types before it holds a
row, so each dict becomes one struct column, whose fields are then the
output columns:

* a ``TypedDict`` return annotation declares the fields: the dicts are
  built into the struct in the same worker pass (a column the annotation
  does not declare is an error, not silently dropped);
* otherwise, as for a ``.select`` UDF without a declared type, the dicts
  are pickled, one job unifies the types of their values over all pairs,
  and a second pass runs the select again, building its dicts into the
  struct found (it must be a pure function of the payloads, as everywhere).
  The second pass reads the joined pairs, not the first pass's output:
  decoding that output in a Python step failed under Spark Connect
  (``getBinary`` on an Arrow vector, inside Spark).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.plan import E_COL, S_COL
from udm.host.rows import UdfError, normalize_value
from udm.host.spark.errors import udm_errors
from udm.host.spark.evaluate import to_arrow_column
from udm.host.spark.frame import map_in_arrow, quoted
from udm.host.spark.types import (
    JOIN_TYPE_HINT,
    arrow_schema,
    concrete,
    dumps,
    infer_type,
    unify,
)

__all__ = ["select_pairs"]

_MADE, _HAS = "__udm_made", "__udm_has_"


def select_pairs(
    joined: DataFrame,
    select: Callable[[Any, Any], Any],
    declared: T.DataType | None,
    on: Sequence[str],
    payloads: Callable[[Mapping[str, Any]], tuple[Any, Any]],
    label: str,
) -> DataFrame:
    """The rows of ``joined`` (times, ``on`` columns and both sides'
    payload columns) as output rows: times, ``on`` columns, the select's.

    Args:
        select: the join's select, failing with a :class:`UdfError` that
            names the join (:func:`udm.host.algebra.pair_udf`).
        declared: the Spark type of its return annotation, if any.
        payloads: what ``select`` receives for a joined row.
        label: who built the payload, for errors.
    """
    flags = [_HAS + str(i) for i in range(len(on))]
    kept = [S_COL, E_COL, *on]  # what the output keeps of a joined row
    schema = {f.name: f for f in joined.schema.fields}

    def pairs(struct: T.StructType | None) -> DataFrame:
        """The kept columns, the select's dicts (as ``struct``, or pickled
        when None) and whether each dict names each ``on`` column."""

        def build(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                made = [normalize_value(dict(select(*payloads(r)))) for r in batch.to_pylist()]
                if struct is None:
                    column = pa.array([dumps(m) for m in made], pa.binary())
                else:
                    column = _struct_array(_declared(made, struct, label), struct, label)
                arrays = [column, *[pa.array([k in m for m in made], pa.bool_()) for k in on]]
                yield pa.RecordBatch.from_arrays(
                    [*(batch.column(c) for c in kept), *arrays], names=[*kept, _MADE, *flags]
                )

        fields = [schema[c] for c in kept]
        fields += [T.StructField(_MADE, struct or T.BinaryType(), True)]
        fields += [T.StructField(f, T.BooleanType(), False) for f in flags]
        return map_in_arrow(joined, build, T.StructType(fields))

    struct = declared if isinstance(declared, T.StructType) else None
    built = pairs(struct)
    if struct is None:
        struct = _inferred(built, label)
        if struct.fields:  # the select again, its dicts built into the struct found
            built = pairs(struct)
    names = [f.name for f in struct.fields]
    out = [F.col(S_COL), F.col(E_COL)]
    for k, flag in zip(on, flags, strict=True):
        column = F.col(quoted(k))
        if k in names:  # the select's value where its dict names the column
            column = F.when(F.col(flag), F.col(_MADE).getField(k)).otherwise(column)
        out.append(column.alias(k))
    out += [F.col(_MADE).getField(n).alias(n) for n in names if n not in on]
    return built.select(*out)


def _struct_array(dicts: list[dict[str, Any]], struct: T.StructType, label: str) -> pa.Array:
    arrow_type = arrow_schema(T.StructType([T.StructField(_MADE, struct, True)])).field(0).type
    return to_arrow_column(dicts, arrow_type, lambda i: label, JOIN_TYPE_HINT)


def _declared(made: list[dict[str, Any]], struct: T.StructType, label: str) -> list[dict[str, Any]]:
    """The dicts with every field of ``struct`` (null where a dict lacks
    it); a column ``struct`` does not have is an error."""
    names = struct.fieldNames()
    for m in made:
        extra = [c for c in m if c not in names]
        if extra:
            raise UdfError(
                f"{label} returned the column(s) {extra} that its return annotation does "
                f"not declare (it declares {names}); declare them or leave them out"
            )
    return [{n: m.get(n) for n in names} for m in made]


def _inferred(built: DataFrame, label: str) -> T.StructType:
    """The struct holding every pickled dict of ``built`` (one job)."""

    def types_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found: T.DataType | None = None
        for batch in batches:
            for blob in batch.column(_MADE).to_pylist():
                try:
                    found = unify(found, infer_type(pickle.loads(blob)))
                except TypeError as exc:  # in a worker: the driver's wording
                    raise TypeError(f"{label}: {exc}; {JOIN_TYPE_HINT}") from None
        yield pa.RecordBatch.from_pydict({"type": [None if found is None else found.json()]})

    with udm_errors():  # the select runs here, while the query is planned
        rows = map_in_arrow(built.select(_MADE), types_of, "type string").collect()
    found: T.DataType | None = None
    for r in rows:
        t = None if r["type"] is None else T.StructType.fromJson(json.loads(r["type"]))
        try:
            found = unify(found, t)
        except TypeError as exc:
            raise TypeError(f"{label}: {exc}; {JOIN_TYPE_HINT}") from None
    typed = concrete(found) if found is not None else T.StructType([])
    assert isinstance(typed, T.StructType)
    return typed
