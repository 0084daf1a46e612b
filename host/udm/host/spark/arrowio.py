"""Arrow in and out of the Spark workers that evaluate window operations.

The helpers every worker route shares (:mod:`udm.host.spark.evaluate`,
:mod:`udm.host.spark.grid`, :mod:`udm.host.spark.endpoints`): the Spark
type of a call's results, results written as typed (or pickled) Arrow
columns with errors that name the UDM and window, a group's rows read
lazily as Python values, and the output batch's layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from udm.host.errors import UdmInvocationError
from udm.host.invoke import udm_label
from udm.host.plan import UdmCall, WindowOp
from udm.host.spark.types import (
    UDM_TYPE_HINT,
    arrow_schema,
    declared_result_type,
    dumps,
    from_returns,
)
from udm.host.windows import describe_window, of_key
from udm.sdk.base import Udm
from udm.sdk.events import WindowDescriptor

__all__ = [
    "STATE",
    "ChunkColumns",
    "Columns",
    "arrow_schema_with_marks",
    "call_type",
    "holds_integers",
    "output_batch",
    "output_columns",
    "pickled_field",
    "plain_numbers",
    "result_col",
    "result_labels",
    "same_key",
    "to_arrow_column",
    "udm_failure",
    "value_column",
]

STATE = "__udm_state"


def result_col(i: int) -> str:
    """The output column of call ``i``'s results (before renaming)."""
    return f"__udm_r{i}"


def call_type(call: UdmCall) -> T.DataType | None:
    """The declared Spark type of a call's results (None: infer from data)."""
    if call.returns is not None:
        return from_returns(call.returns)
    return declared_result_type(call.udm)


def to_arrow_column(
    values: list[Any],
    dtype: pa.DataType | None,
    what: Callable[[int], str],
    hint: str = UDM_TYPE_HINT,
) -> pa.Array:
    """Values as an Arrow array of ``dtype`` (None: pickled binary);
    ``hint``: how the caller's user gives another type, for a value that
    does not fit (each call site has its own option)."""
    if dtype is None:
        return pa.array([None if v is None else dumps(v) for v in values], pa.binary())
    try:
        array = pa.array(values, type=dtype)
        if holds_integers(dtype) and not kept_values(array.to_pylist(), values):
            # pyarrow truncates floats into integer types (21.5 -> 21)
            raise ValueError("a float does not fit an integer type")
        return array
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        for i, v in enumerate(values):
            try:
                one = pa.array([v], type=dtype)
                if holds_integers(dtype) and not kept_values(one.to_pylist(), [v]):
                    raise ValueError("truncated")
            except Exception:
                raise TypeError(
                    f"{what(i)} returned {v!r:.80}, which does not fit the result type "
                    f"{dtype}; {hint}"
                ) from None
        raise TypeError(f"results do not fit the result type {dtype}: {exc}") from None


def holds_integers(dtype: pa.DataType) -> bool:
    """Whether a value of ``dtype`` has an integer part anywhere."""
    if pa.types.is_integer(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(holds_integers(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return holds_integers(dtype.value_type)
    if pa.types.is_map(dtype):
        return holds_integers(dtype.key_type) or holds_integers(dtype.item_type)
    return False


def kept_values(got: Any, given: Any) -> bool:
    """Whether Arrow kept the values (NaN equal to NaN, 2.0 equal to 2)."""
    if isinstance(got, float) and isinstance(given, float) and got != got and given != given:
        return True
    if isinstance(got, list) and isinstance(given, Mapping):  # a map: (key, value) pairs
        got = dict(got)
    if isinstance(got, dict) and isinstance(given, Mapping):
        return got.keys() == given.keys() and all(kept_values(got[k], given[k]) for k in got)
    if isinstance(got, list) and isinstance(given, list | tuple):
        return len(got) == len(given) and all(map(kept_values, got, given))
    return bool(got == given)


def udm_failure(
    udm: Udm, window: WindowDescriptor, key: list[Any], exc: BaseException, column: Any = None
) -> Exception:
    """The UDM's failure on a window of a group; ``column``: the call's
    ``value=``, named when it is a column, since a value of the wrong type
    is the usual cause."""
    cause = exc.__cause__ if isinstance(exc, UdmInvocationError) and exc.__cause__ else exc
    where = describe_window(window) + of_key(key)
    note = f"; values from column {column!r}" if isinstance(column, str) else ""
    return UdmInvocationError(udm_label(udm), where, f"{type(cause).__name__}: {cause}{note}")


def value_column(op: WindowOp, udm: Any) -> Any:
    """The ``value=`` of the call running ``udm`` (for :func:`udm_failure`)."""
    return next((c.value for c in op.calls if c.udm is udm), None)


class Columns:
    """One group's rows as Python values, read lazily per column."""

    def __init__(self, table: pa.Table, payload: list[str]) -> None:
        self.table = table
        self.payload = payload
        self._cache: dict[str, list[Any]] = {}
        self._rows: list[dict[str, Any]] | None = None

    def col(self, name: str) -> list[Any]:
        """A column as a Python list, converted once however many UDM calls
        read it."""
        got = self._cache.get(name)
        if got is None:
            got = self._cache[name] = self.table.column(name).to_pylist()
        return got

    def rows(self) -> list[dict[str, Any]]:
        """The payload columns as one dict per row, converted once, for UDMs
        that read the whole payload."""
        if self._rows is None:
            self._rows = self.table.select(self.payload).to_pylist()
        return self._rows

    def values(self, call: UdmCall) -> tuple[list[Any], Any]:
        """The call's raw input values per row and the value function still
        to apply to them."""
        if isinstance(call.value, str):
            return self.col(call.value), None
        return self.rows(), call.value_fn


def plain_numbers(column: pa.ChunkedArray) -> bool:
    """Whether a column is integers or floats without nulls: numpy holds it
    as it is, and its ``tolist()`` gives the Python values Arrow would."""
    kind = column.type
    wide = pa.types.is_integer(kind) or kind in (pa.float32(), pa.float64())
    return wide and not column.null_count


class ChunkColumns:
    """The Python values of a chunk's rows (``rows`` of ``table``) per
    call: a column of numbers without nulls by a numpy gather and
    ``tolist`` (its numpy array made once per partition, in ``numbers``),
    several times faster than Arrow's ``take`` and ``to_pylist``; other
    columns and whole payloads by Arrow (:class:`Columns`)."""

    def __init__(
        self,
        table: pa.Table,
        payload: list[str],
        numbers: dict[str, np.ndarray | None],
        rows: np.ndarray,
    ) -> None:
        self.table, self.payload, self.numbers, self.rows = table, payload, numbers, rows
        self.made: dict[str, list[Any]] = {}
        self.arrow: Columns | None = None

    def values(self, call: Any) -> tuple[list[Any], Any]:
        """The call's raw values and the value function still to apply."""
        name = call.value if isinstance(call.value, str) else None
        if name is not None:
            got = self.made.get(name)
            if got is not None:
                return got, None
            if name not in self.numbers:
                column = self.table.column(name)
                self.numbers[name] = column.to_numpy() if plain_numbers(column) else None
            array = self.numbers[name]
            if array is not None:
                got = self.made[name] = array[self.rows].tolist()
                return got, None
        if self.arrow is None:
            picked = pa.array(self.rows, pa.int64())
            self.arrow = Columns(self.table.select(self.payload).take(picked), self.payload)
        return self.arrow.values(call)


def column_label(what: Callable[[int, int], str], j: int) -> Callable[[int], str]:
    """``what`` bound to output column ``j``: how an error names a value of
    that column by its row."""
    return lambda i: what(j, i)


def output_batch(
    rows: list[tuple[int, int, list[Any]]],
    key_columns: list[list[Any]],
    schema: pa.Schema,
    what: Callable[[int, int], str],
) -> pa.RecordBatch:
    """Output rows (lifetime and results) with their key values, one list
    per key column."""
    n_results = len(schema) - 2 - len(key_columns)
    return output_columns(
        [r[0] for r in rows],
        [r[1] for r in rows],
        key_columns,
        [[r[2][j] for r in rows] for j in range(n_results)],
        schema,
        what,
    )


def output_columns(
    starts: Any,
    ends: Any,
    key_columns: list[list[Any]],
    results: list[list[Any]],
    schema: pa.Schema,
    what: Callable[[int, int], str],
) -> pa.RecordBatch:
    """The output batch from its columns: lifetimes, one list per key
    column and one per result column."""
    n_keys = len(key_columns)
    arrays: list[pa.Array] = [pa.array(starts, pa.int64()), pa.array(ends, pa.int64())]
    for i, values in enumerate(key_columns):
        arrays.append(pa.array(values, schema.field(2 + i).type))
    for j, values in enumerate(results):
        field = schema.field(2 + n_keys + j)
        dtype = None if field.metadata and b"udm.pickled" in field.metadata else field.type
        arrays.append(to_arrow_column(values, dtype, column_label(what, j)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def same_key(keys: list[Any], n: int) -> list[list[Any]]:
    """Key columns of ``n`` rows of one group."""
    return [[k] * n for k in keys]


def result_labels(
    op: WindowOp, window_of: Callable[[int], WindowDescriptor]
) -> Callable[[int, int], str]:
    """Names result ``i`` of call ``j`` in type errors (``window_of(i)``:
    the window of output row ``i``)."""

    def what(j: int, i: int) -> str:
        return f"UDM {op.calls[j].udm.name!r} on window {describe_window(window_of(i))}"

    return what


def pickled_field(name: str) -> T.StructField:
    """A binary column of pickled results, marked for :func:`decode_pickled`."""
    return T.StructField(name, T.BinaryType(), True, metadata={"udm.pickled": True})


def arrow_schema_with_marks(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of ``schema``; pickled columns keep a metadata mark
    so the worker knows to pickle them."""
    base = arrow_schema(schema)
    fields = []
    for f, sf in zip(base, schema.fields, strict=True):
        if sf.metadata.get("udm.pickled"):
            f = f.with_metadata({b"udm.pickled": b"1"})
        fields.append(f)
    return pa.schema(fields)


# ----------------------------------------------------- typing pickled data
