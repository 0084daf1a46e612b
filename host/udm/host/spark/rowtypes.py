"""In-memory rows as an Arrow table, or an error naming the mixed column.

The in-process engines keep every payload value as the Python value it
is, so one column may hold ``1`` in one event and ``"a"`` in another. A
Spark column has one type: the Spark engine reads in-memory events
through Arrow, which refuses such a column with a message naming neither
the column nor a way out (``Could not convert 'a' with type str: tried to
convert to int64``). :func:`arrow_table` says which column, which two
types, and what to do, as the union check of
:mod:`udm.host.spark.mixedtypes` does for columns that differ across
streams.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["arrow_table", "mixed_column"]

#: what Arrow raises for values it cannot put in one column
_UNCONVERTIBLE = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)


def arrow_table(records: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The records as a table with every column any of them has (in order
    of first appearance; null where a record lacks it, as the in-process
    engines' tables have it), or a ``TypeError`` naming the column whose
    values Arrow cannot hold in one type (see :func:`mixed_column`).
    ``pa.Table.from_pylist`` alone takes the first record's keys as the
    columns and silently drops the others."""
    columns = list(dict.fromkeys(c for r in records for c in r))
    try:
        return pa.Table.from_pydict({c: [r.get(c) for r in records] for c in columns})
    except _UNCONVERTIBLE as exc:
        raise mixed_column(records, exc) from None


def _type_name(value: Any) -> str:
    return type(value).__name__


def mixed_column(records: Sequence[Mapping[str, Any]], exc: BaseException) -> TypeError:
    """The error for rows Arrow refused: the first column Arrow cannot
    type on its own, with the first two Python types it holds (or the
    value Arrow refused, when one type is too large: an int beyond int64),
    and the ways out."""
    columns = list(dict.fromkeys(c for r in records for c in r))
    for column in columns:
        values = [r.get(column) for r in records]
        try:
            pa.array(values)
        except _UNCONVERTIBLE as err:
            return TypeError(_message(column, values, err))
    return TypeError(f"the events cannot be held as a Spark table: {exc}")


def _message(column: str, values: list[Any], err: BaseException) -> str:
    firsts: dict[str, Any] = {}
    for v in values:
        if v is not None:
            firsts.setdefault(_type_name(v), v)
    fix = (
        "; Spark holds one type per column; give the column one type in every event "
        "(e.g. str() every value), or run on an in-process engine "
        "(to_cht(engine='reference') or engine='host')"
    )
    if len(firsts) >= 2:
        (a, va), (b, vb) = list(firsts.items())[:2]
        return f"column {column!r} holds {a} and {b} values ({va!r} and {vb!r}; {err}){fix}"
    return f"column {column!r} cannot be one Spark type ({err}){fix}"
