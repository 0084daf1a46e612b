"""Column types that differ across the inputs of a union or a join on Spark.

The in-process engines keep every payload value as the Python value it
is: a union of a stream whose ``v`` is the int ``2**53 + 1`` with one whose
``v`` is ``0.5`` keeps the int exactly, keys ``1`` and ``"1"`` stay two
groups, and a join compares keys with Python's ``==``. A Spark column has
one type, and Spark silently coerces the inputs of a union or a join
condition to a common one: the int becomes a double (and changes), ``"1"``
and ``1`` merge, a string key meets an int one. udm's rule is that nothing
accepted is lost or silently changed, so before the job runs:

* a union column that is an integer in one stream and a floating-point
  number in another is widened to double only when every integer of it is
  exact as a double (magnitude at most 2**53; one small job finds out),
  else it is refused naming the value;
* any other pair of different types (string and number, boolean and
  number, ...) in a union column or a join/anti-join key is refused,
  naming the column, the two types and what to do (cast one input).

A column of an empty in-memory stream (type ``void``) takes any type.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.errors import OperatorError
from udm.host.spark.frame import quoted

__all__ = ["check_join_keys", "check_union_columns"]

#: the largest magnitude up to which every integer is exact as a double
EXACT_IN_DOUBLE = 2**53

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType)


def _family(t: T.DataType) -> str:
    """Types Spark widens between without changing a value share a family."""
    if isinstance(t, _INTEGRAL):
        return "integer"
    if isinstance(t, _FRACTIONAL):
        return "floating"
    if isinstance(t, T.DecimalType):
        return "decimal"
    return t.simpleString()


def _types(df: DataFrame) -> dict[str, T.DataType]:
    return {f.name: f.dataType for f in df.schema.fields}


def _ordinal(i: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(i, f"#{i}")


def _first_inexact(df: DataFrame, column: str) -> int | None:
    """An integer of ``column`` a double cannot hold exactly, if any."""
    col = F.col(quoted(column))
    found = df.where(F.abs(col) > F.lit(EXACT_IN_DOUBLE)).select(col).limit(1).collect()
    return int(found[0][0]) if found else None


def check_union_columns(frames: Sequence[DataFrame], payload: Sequence[str]) -> None:
    """Refuse (``OperatorError``) a union whose streams give a payload
    column types Spark would reconcile by changing values (module doc)."""
    typed = [_types(df) for df in frames]
    for column in payload:
        seen = [
            (i, t[column])
            for i, t in enumerate(typed, 1)
            if column in t and not isinstance(t[column], T.NullType)
        ]
        families = {_family(t) for _, t in seen}
        if len(families) < 2:
            continue
        (i, a), (j, b) = next((x, y) for x in seen for y in seen if _family(x[1]) != _family(y[1]))
        if families == {"integer", "floating"}:
            for n, t in seen:
                if _family(t) != "integer":
                    continue
                value = _first_inexact(frames[n - 1], column)
                if value is not None:
                    raise OperatorError(
                        "union",
                        f"column {column!r} is {t.simpleString()} in the {_ordinal(n)} stream "
                        "and double in another; Spark holds one type per column, and the "
                        f"integer {value} is not exact as a double (it would change); cast "
                        "the column to one type in every stream (e.g. float, or str to keep "
                        "the digits), or run on an in-process engine",
                    )
            continue
        raise OperatorError(
            "union",
            f"column {column!r} is {a.simpleString()} in the {_ordinal(i)} stream and "
            f"{b.simpleString()} in the {_ordinal(j)}; Spark holds one type per column and "
            "would convert one into the other (so '1' and 1 would become one value); cast the "
            "column to one type in every stream (select()) before the union, or run on an "
            "in-process engine",
        )


def check_join_keys(where: str, on: Sequence[str], left: DataFrame, right: DataFrame) -> None:
    """Refuse (``OperatorError``) join keys whose types differ in kind:
    Spark would compare them under its own coercion (``"1"`` meets ``1``,
    a large integer meets the double next to it), not Python's ``==``."""
    lt, rt = _types(left), _types(right)
    for k in on:
        a, b = lt.get(k), rt.get(k)
        if a is None or b is None or isinstance(a, T.NullType) or isinstance(b, T.NullType):
            continue
        if _family(a) != _family(b):
            raise OperatorError(
                where,
                f"key column {k!r} is {a.simpleString()} in the left stream and "
                f"{b.simpleString()} in the right; Spark would compare them by converting "
                "one into the other, not as Python compares them; cast the key to one type "
                "in both streams (select()) before the join, or run on an in-process engine",
            )
