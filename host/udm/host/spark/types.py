"""Spark types of UDM results and UDF outputs.

A result column's type comes from, in order: the query's explicit
``returns=`` (a DDL string, a Spark ``DataType`` or a Python type), the
return annotation of the UDM (``-> float``, ``-> list[int]``, a
``TypedDict``, a dataclass), or, when neither says, the values themselves:
the results are first computed into a pickled binary column, their types
unified across all rows (``int`` and ``float`` give ``double``), and then
decoded. Dict-like results become structs, which the query flattens into
columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import inspect
import pickle
import types
import typing
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from udm.host.rows import normalize_value
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent, is_time

__all__ = [
    "JOIN_TYPE_HINT",
    "SELECT_TYPE_HINT",
    "TIME_META",
    "UDM_TYPE_HINT",
    "annotation_type",
    "arrow_schema",
    "declared_result_type",
    "dumps",
    "from_returns",
    "infer_type",
    "normalize_value",
    "parse_without_jvm",
    "type_name",
    "unify",
]


def dumps(value: Any) -> bytes:
    """Pickle a value for a binary column (cloudpickle for what pickle cannot)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        from pyspark import cloudpickle

        dump: Callable[..., bytes] = cloudpickle.dumps
        return bytes(dump(value, protocol=pickle.HIGHEST_PROTOCOL))


#: what to do about results no one Spark type holds, or that do not fit
#: the declared one, by where they come from: a Spark column has one type,
#: and each call site declares it its own way (a window's UDM ``returns=``
#: or its annotation, ``select`` a ``(udf, type)`` tuple, a join's
#: ``select=`` a ``TypedDict``); appended to the errors of
#: :func:`infer_type`, :func:`unify` and ``to_arrow_column``, which know
#: none of them
UDM_TYPE_HINT = (
    "return values of one type and declare it: returns= in aggregate()/apply() "
    "(a DDL string such as 'string' or 'double'), or the UDM's return annotation"
)
SELECT_TYPE_HINT = (
    "return values of one type and declare it as a (udf, type) tuple: select(name=(udf, 'string'))"
)
JOIN_TYPE_HINT = (
    "return values of one type per column and declare them: annotate the select= "
    "function's return type with a TypedDict"
)


def type_name(t: T.DataType) -> str:
    """A Spark type as users write it (``bigint``, ``struct<a:int>``), for
    messages."""
    return str(t.simpleString())


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


# ----------------------------------------------------------------- values


def infer_type(value: Any) -> T.DataType | None:
    """The Spark type of one normalized value (``None`` for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        return T.LongType()
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    if isinstance(value, bytes | bytearray):
        return T.BinaryType()
    if isinstance(value, dt.datetime):
        return T.TimestampType() if value.tzinfo is not None else T.TimestampNTZType()
    if isinstance(value, dt.date):
        return T.DateType()
    if isinstance(value, dt.timedelta):
        return T.DayTimeIntervalType()
    if isinstance(value, decimal.Decimal):
        return T.DecimalType(38, 18)
    if isinstance(value, Mapping):
        fields = []
        for k, v in value.items():
            t = infer_type(v)
            fields.append(T.StructField(str(k), t if t is not None else T.NullType(), True))
        return T.StructType(fields)
    if isinstance(value, list):
        elem: T.DataType | None = None
        for v in value:
            elem = unify(elem, infer_type(v))
        return T.ArrayType(elem if elem is not None else T.NullType(), True)
    raise TypeError(
        f"cannot store a {type(value).__name__} ({value!r:.60}) in a Spark column; return "
        "numbers, strings, booleans, datetimes, lists, dicts or dataclasses"
    )


def unify(a: T.DataType | None, b: T.DataType | None) -> T.DataType | None:
    """The narrowest type holding values of both ``a`` and ``b``."""
    if a is None or isinstance(a, T.NullType):
        return b if b is not None else a
    if b is None or isinstance(b, T.NullType):
        return a
    if a == b:
        return a
    numeric = (T.LongType, T.DoubleType)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return T.DoubleType()
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        fields: dict[str, T.DataType | None] = {f.name: f.dataType for f in a.fields}
        for f in b.fields:
            fields[f.name] = unify(fields.get(f.name), f.dataType)
        return T.StructType(
            [
                T.StructField(n, t if t is not None else T.NullType(), True)
                for n, t in fields.items()
            ]
        )
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        elem = unify(a.elementType, b.elementType)
        return T.ArrayType(elem if elem is not None else T.NullType(), True)
    raise TypeError(f"results mix {type_name(a)} and {type_name(b)} values")


def concrete(t: T.DataType | None) -> T.DataType:
    """Replace null types left by all-null values (strings hold anything)."""
    if t is None or isinstance(t, T.NullType):
        return T.StringType()
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, concrete(f.dataType), True) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(concrete(t.elementType), True)
    return t


def infer_column(values: Iterable[Any]) -> T.DataType | None:
    """The Spark type of a column of Python values: the unified type of every
    value, None when all are None."""
    out: T.DataType | None = None
    for v in values:
        out = unify(out, infer_type(v))
    return out


# ------------------------------------------------------------ annotations

_SCALARS: dict[Any, Callable[[], T.DataType]] = {
    float: T.DoubleType,
    int: T.LongType,
    bool: T.BooleanType,
    str: T.StringType,
    bytes: T.BinaryType,
    dt.datetime: T.TimestampType,
    dt.date: T.DateType,
    dt.timedelta: T.DayTimeIntervalType,
}


def annotation_type(tp: Any) -> T.DataType | None:
    """The Spark type of a Python type annotation, or ``None`` if it does
    not say (``Any``, a bare ``dict``, a union of different types)."""
    if tp is None or tp is inspect.Parameter.empty or tp is Any:
        return None
    if typing.get_origin(tp) is typing.Annotated:  # Ticks: an int, marked as a time
        return annotation_type(typing.get_args(tp)[0])
    if tp in _SCALARS:
        return _SCALARS[tp]()
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return annotation_type(inner[0]) if len(inner) == 1 else None
    if origin in (list, tuple, Sequence, Iterable, Iterator, typing.Sequence, set, frozenset):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return None
        elem = annotation_type(args[0]) if args else None
        return T.ArrayType(elem, True) if elem is not None else None
    record = typing.is_typeddict(tp) or (
        isinstance(tp, type)
        and (dataclasses.is_dataclass(tp) or (issubclass(tp, tuple) and hasattr(tp, "_fields")))
    )
    if record:
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except Exception:
            return None
        fields = []
        for name, hint in hints.items():
            t = annotation_type(hint)
            if t is None:
                return None
            # a Ticks field keeps its mark into the output, where it is
            # shown as the stream shows times (see frame.output)
            meta = {TIME_META: True} if is_time(hint) and isinstance(t, T.LongType) else None
            fields.append(T.StructField(name, t, True, metadata=meta))
        return T.StructType(fields)
    return None


#: Spark field metadata marking a result column of ticks that is a time
TIME_META = "udm.time"


#: return annotations already read, per function: ``get_type_hints`` took
#: about 2 ms of every planned window operation
_RETURNS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _return_annotation(fn: Any) -> Any:
    target = getattr(fn, "__wrapped__", fn)
    try:
        return _RETURNS[target]
    except (KeyError, TypeError):  # not read yet, or not weakly referable
        pass
    try:
        got = typing.get_type_hints(target, include_extras=True).get("return")
    except Exception:
        return None
    with contextlib.suppress(TypeError):  # not weakly referable: read again next time
        _RETURNS[target] = got
    return got


def declared_time_result(udm: Udm) -> bool:
    """Whether an aggregate's result is declared ``-> Ticks`` (a time)."""
    if udm.kind != "aggregate":
        return False
    cls = type(udm)
    method = "result" if udm.incremental else "compute_result"
    return is_time(_return_annotation(getattr(cls, "__wrapped__", None) or getattr(cls, method)))


def declared_result_type(udm: Udm) -> T.DataType | None:
    """The Spark type of one result of ``udm`` from its annotations: an
    aggregate's value, or one output payload of an operator."""
    cls = type(udm)
    method = "result" if udm.incremental else "compute_result"
    ann = _return_annotation(getattr(cls, "__wrapped__", None) or getattr(cls, method))
    if udm.kind == "operator":
        origin = typing.get_origin(ann)
        if origin not in (list, tuple, Iterable, Iterator, Sequence, typing.Iterator):
            return None
        args = typing.get_args(ann)
        ann = args[0] if args else None
        if udm.time_sensitive:
            if typing.get_origin(ann) is not IntervalEvent:
                return None
            inner = typing.get_args(ann)
            ann = inner[0] if inner else None
    return annotation_type(ann)


def _element(tp: Any) -> Any:
    """``X`` of ``list[X]``, ``Sequence[X]``, ``IntervalEvent[X]``, ..."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, tuple, Sequence, Iterable, Iterator, IntervalEvent) and args:
        return _element(args[0]) if origin is not IntervalEvent else args[0]
    return tp


def expected_value_type(udm: Udm) -> type | None:
    """The scalar type (float, int, str, bool) a UDM's input payloads are
    annotated with, or ``None`` when the annotations do not say."""
    cls = type(udm)
    wrapped = getattr(cls, "__wrapped__", None)
    try:
        if wrapped is not None:
            hints = typing.get_type_hints(wrapped)
            params = list(inspect.signature(wrapped).parameters)
            ann = hints.get(params[0]) if params else None
        else:
            method = getattr(cls, "add" if udm.incremental else "compute_result")
            hints = typing.get_type_hints(method)
            params = [p for p in inspect.signature(method).parameters if p != "self"]
            index = 1 if udm.incremental else 0
            ann = hints.get(params[index]) if len(params) > index else None
    except Exception:
        return None
    elem = _element(ann)
    return elem if elem in (float, int, str, bool) else None


def accepts(expected: type, column: T.DataType) -> bool:
    """Whether values of a Spark column type can be UDM inputs of ``expected``.
    A ``void`` column (an in-memory stream whose inserts were all retracted)
    holds only nulls, as the in-process engines' missing values are: it
    takes any type, so a window over it outputs nothing, as theirs do."""
    if isinstance(column, T.NullType):
        return True
    if expected in (float, int):
        return isinstance(column, T.NumericType)
    if expected is str:
        return isinstance(column, T.StringType)
    return isinstance(column, T.BooleanType)


def function_result_type(fn: Any) -> T.DataType | None:
    """The Spark type a UDF's return annotation names."""
    return annotation_type(_return_annotation(getattr(fn, "fn", fn)))


_DDL_ALIASES = {
    "int": "integer",
    "bigint": "long",
    "smallint": "short",
    "tinyint": "byte",
    "real": "float",
    "bool": "boolean",
}


def parse_without_jvm(text: str) -> T.DataType | None:
    """Simple type names and JSON types, which SQL table functions' Python
    workers must parse without a JVM (DDL parsing needs the driver's)."""
    name = text.strip().lower()
    name = _DDL_ALIASES.get(name, name)
    try:
        if name.startswith("{"):
            parsed: T.DataType = T._parse_datatype_json_string(text)
        else:
            parsed = T._parse_datatype_json_value(name)
    except Exception:
        return None
    return parsed


def from_returns(returns: Any) -> T.DataType:
    """Parse an explicit ``returns=``: DDL string, ``DataType`` or Python type."""
    if isinstance(returns, T.DataType):
        return returns
    if isinstance(returns, str):
        simple = parse_without_jvm(returns)
        if simple is not None:
            return simple
        try:
            parsed: T.DataType = T._parse_datatype_string(returns)
        except Exception as exc:
            # Spark's parse errors start with a blank line: keep the first words
            why = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
            raise ValueError(
                f"returns={returns!r} is not a Spark type ({why or type(exc).__name__}). "
                "Python workers (the SQL "
                "returns => option) read simple type names such as 'double', 'bigint' or "
                "'decimal(10,2)' and JSON types; pass complex DDL to register_sql(returns=...)"
            ) from None
        return parsed
    t = annotation_type(returns)
    if t is None:
        raise ValueError(
            f"returns={returns!r} does not name a Spark type; use a DDL string such as "
            "'double' or 'struct<lo: double, hi: double>'"
        )
    return t
