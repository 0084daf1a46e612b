"""Row-level logic every engine shares: lifetimes of input rows, CHT
payloads of output rows, result columns of window operations, group keys
and UDF calls over payload dicts.

Engines pass events between plan nodes as rows ``(start, end, columns)``
(:data:`udm.host.plan.Row`); this module says how a row becomes an event
of a CHT and back, once, so that every engine agrees to the value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from udm.host.cht import Cht
from udm.host.errors import InvalidEventError
from udm.host.invoke import PLAIN_TYPES
from udm.host.plan import SCALAR_COL, Row, Shape, UdmCall, WindowOp
from udm.host.time import INFINITY, SubMicrosecondError, to_ticks
from udm.sdk.events import IntervalEvent

__all__ = [
    "NAN_KEY",
    "NORMALIZED",
    "NUMPY_FLOATS",
    "OPEN_BY_SHAPE",
    "OPEN_IN_MEMORY",
    "SUB_MICROSECOND",
    "Layout",
    "UdfError",
    "adapt_op",
    "check_output_names",
    "check_row",
    "group_key",
    "invalid_event",
    "is_datetime",
    "key_of",
    "nan_free",
    "normalize_value",
    "note_numpy_keys",
    "op_layout",
    "reason_end_of_time",
    "reason_no_end",
    "reason_null",
    "reason_order",
    "reason_sub_microsecond",
    "reason_unparsable",
    "result_columns",
    "returns_is_struct",
    "rounding_advice",
    "rows_to_cht",
    "start_of",
    "struct_fields",
    "udf_input",
    "udf_of_payload",
    "why_not_a_time",
]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a CHT payload is made from an output row: one column's value
    (``scalar``) or a dict of fields read from columns."""

    scalar: str | None
    fields: tuple[tuple[str, str], ...]

    def payload(self, row: Mapping[str, Any]) -> Any:
        """The payload of an output row as users get it: the scalar itself for
        a scalar stream, else a dict under the user's column names."""
        if self.scalar is not None:
            return row[self.scalar]
        return {name: row[col] for name, col in self.fields}


def udf_input(fn: Callable[[Any], Any], scalar: bool) -> Callable[[Any], Any]:
    """A UDF of the row dict: scalar streams pass the scalar payload."""
    if not scalar:
        return fn

    def on_scalar(row: Any) -> Any:
        return fn(row[SCALAR_COL])

    return on_scalar


def udf_of_payload(fn: Callable[[Any], Any], scalar: bool, where: str) -> Callable[[Any], Any]:
    """A ``where``/``select`` UDF as called on each row: its failure names
    the UDF and the payload, and says how the payload is passed, since a
    UDF written for one column (``fahrenheit(celsius)``) gets the dict."""
    call = udf_input(fn, scalar)
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or repr(fn)

    def called(row: Any) -> Any:
        try:
            return call(row)
        except Exception as exc:
            shown = row[SCALAR_COL] if scalar else row
            hint = (
                ""
                if scalar
                else "; a UDF here is called with the event's payload dict (column -> value): "
                f"for a UDF of one column write lambda p: {name}(p['<column>'])"
            )
            raise UdfError(
                f"UDF {name!r} in {where} failed on payload {shown!r:.200}: "
                f"{type(exc).__name__}: {exc}{hint}"
            ) from exc

    return called


class UdfError(ValueError):
    """A UDF in ``where`` or ``select`` raised."""


def adapt_op(op: WindowOp, scalar: bool) -> WindowOp:
    """The window operation as run on rows: on a scalar stream a UDM (or a
    value function) receives the scalar payload, not the row dict."""
    if not scalar:
        return op
    calls = []
    for c in op.calls:
        if c.value is None:
            c = dataclasses.replace(c, value=SCALAR_COL)
        elif callable(c.value):
            c = dataclasses.replace(c, value=udf_input(c.value, True))
        calls.append(c)
    return dataclasses.replace(op, calls=tuple(calls))


def reason_null(col: str) -> str:
    """Why a row is invalid when time column ``col`` is null; one wording on
    every engine, so fixtures can compare messages."""
    return f"{col!r} is null"


def reason_unparsable(col: str) -> str:
    """Why a row is invalid when time column ``col`` cannot be read as a time
    (same wording on every engine)."""
    return f"{col!r} is not a valid time"


#: what a reason for sub-microsecond times says: one fix for every such row
SUB_MICROSECOND = "has sub-microsecond precision"


def reason_sub_microsecond(col: str) -> str:
    """Why a row is invalid when time column ``col`` has a part finer than
    a tick: a reason of its own, since rounding the column fixes every such
    row where dropping would lose them all."""
    return f"{col!r} {SUB_MICROSECOND} (udm ticks are microseconds)"


def rounding_advice(columns: Iterable[str]) -> str:
    """How to round time columns with nanoseconds to microseconds, pandas and
    Arrow, for the error that refuses them."""
    col = next(iter(columns), "ts")
    return (
        f"round the times to microseconds first: df[{col!r}] = df[{col!r}].dt.floor('us') "
        f"(pandas), or pyarrow.compute.floor_temporal(table[{col!r}], unit='microsecond') (Arrow)"
    )


def reason_end_of_time(col: str) -> str:
    """Why a point event starting at the end of time is invalid (same wording
    on every engine)."""
    return f"{col!r} is the end of time (a point event cannot start there)"


#: how a query says that an event has not ended, for a null end's reason
OPEN_BY_SHAPE = "interval events need an end; use shape='edge' for open events"
OPEN_IN_MEMORY = "an event that has not ended ends at INFINITY, 'inf'"


def reason_no_end(col: str, open_end: str = OPEN_BY_SHAPE) -> str:
    """Why a row without an end is invalid, with how the query could have said
    the event is open (``open_end``)."""
    return f"{col!r} is null ({open_end})"


def reason_order(start: str, end: str) -> str:
    """Why a row whose end is not after its start is invalid (same wording on
    every engine)."""
    return f"{end!r} is not after {start!r}"


def check_row(
    start: Any,
    end: Any,
    shape: Shape,
    start_col: str,
    end_col: str | None,
    open_end: str = OPEN_BY_SHAPE,
) -> tuple[int, int] | str:
    """Ticks of one in-memory row's lifetime, or the reason it is invalid
    (``open_end``: how the caller's input writes an event that has not
    ended, for a null end)."""
    if start is None:
        return reason_null(start_col)
    s = _tick_or_reason(start, start_col)
    if type(s) is str:
        return s
    assert isinstance(s, int)
    if shape == "point" or end_col is None:
        if s >= INFINITY:
            return reason_end_of_time(start_col)
        return s, s + 1
    if end is None:
        if shape == "edge":
            return s, INFINITY
        return reason_no_end(end_col, open_end)
    e = _tick_or_reason(end, end_col)
    if type(e) is str:
        return e
    assert isinstance(e, int)
    if e <= s:
        return reason_order(start_col, end_col)
    return s, e


def _tick_or_reason(value: Any, column: str) -> int | str:
    """``value`` (not None) in ticks, or why column ``column`` cannot hold it."""
    try:
        return to_ticks(value)
    except SubMicrosecondError:
        return reason_sub_microsecond(column)
    except (ValueError, TypeError):
        return reason_unparsable(column)


def start_of(event: Any) -> Any:
    """The start of an in-memory event (an IntervalEvent or a tuple), or None
    for a malformed one, which ``from_cht`` then reports."""
    if isinstance(event, IntervalEvent):
        return event.start
    try:
        return event[0]
    except (TypeError, IndexError, KeyError):
        return None  # from_cht reports the malformed event


def is_datetime(value: Any) -> bool:
    """Whether an in-memory time is a datetime rather than int ticks: a
    ``datetime``/``date`` (pandas ``Timestamp`` too), an ISO string, a numpy
    ``datetime64`` or an Arrow timestamp or date scalar."""
    if isinstance(value, (dt.date, str)):
        return True
    dtype = getattr(value, "dtype", None)  # numpy datetime64
    if dtype is not None and getattr(dtype, "kind", None) == "M":
        return True
    arrow_type = str(getattr(value, "type", ""))  # pyarrow scalars
    return arrow_type.startswith(("timestamp", "date"))


def why_not_a_time(*times: Any) -> str:
    """What :func:`to_ticks` says of the first of ``times`` it refuses
    (sub-microsecond precision, an unknown type ...), for an error message."""
    for t in times:
        if t is None:
            continue
        try:
            to_ticks(t)
        except (ValueError, TypeError) as exc:
            return f" ({exc})"
    return ""


def invalid_event(reason: str, row: Any, index: int | None = None) -> InvalidEventError:
    """The error for an invalid event, showing the row (``#index`` in its
    list, from 0, when given) and how to drop such rows instead."""
    if SUB_MICROSECOND in reason:
        fix = "Round the times to microseconds first (ts.floor('us'), ts.dt.floor('us') in pandas)"
    else:
        fix = (
            "Fix the data, or pass on_invalid='drop' to drop such rows and count them "
            "(stream.metrics.invalid_rows())"
        )
    at = "row" if index is None else f"row #{index}"
    return InvalidEventError(f"invalid event: {reason}; {at}: {row!r}. {fix}")


# ----------------------------------------------------------------- streams


def normalize_value(value: Any) -> Any:
    """A result in plain Python terms: dataclasses and named tuples become
    dicts, numpy scalars Python numbers, recursively."""
    if type(value) in PLAIN_TYPES or isinstance(value, str | bytes | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): normalize_value(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {str(k): normalize_value(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and callable(item):
        return normalize_value(item())
    return value


def returns_is_struct(returns: Any) -> bool | None:
    """Whether an explicit ``returns=`` names a struct (``None``: not given)."""
    if returns is None:
        return None
    if isinstance(returns, str):
        return returns.strip().lower().startswith("struct")
    return type(returns).__name__ == "StructType" or (
        isinstance(returns, type)
        and (dataclasses.is_dataclass(returns) or hasattr(returns, "__required_keys__"))
    )


def result_columns(
    op: WindowOp, structs: Sequence[Sequence[str] | None]
) -> list[tuple[str, str, str | None]]:
    """Output columns of a window operation: (column, call name, struct
    field or None), given each call's struct fields (None: not a struct)."""
    out: list[tuple[str, str, str | None]] = []
    for call, fields in zip(op.calls, structs, strict=True):
        if fields is None:
            out.append((call.name, call.name, None))
        else:
            for f in fields:
                out.append((f"{call.name}_{f}" if op.multi else f, call.name, f))
    return out


def op_layout(op: WindowOp, columns: Sequence[tuple[str, str, str | None]]) -> Layout:
    """The CHT payload of a window operation's output rows."""
    if not op.multi:
        if columns and columns[0][2] is None:
            return Layout(columns[0][0], ())
        return Layout(None, tuple((f or c, c) for c, _, f in columns))
    return Layout(None, tuple((c, c) for c, _, _ in columns))


def check_output_names(
    keys: Sequence[str], op: WindowOp, columns: Sequence[tuple[str, str, str | None]]
) -> None:
    """Refuse result columns (from :func:`result_columns`) that clash with
    the lifetime, the keys or each other, with a fix that applies."""
    seen = {"start", "end", *keys}
    for c, call, part in columns:
        if c in seen:
            if part is None:
                fix = "name the result with alias= (or aggregate(name=...))"
            elif op.kind == "aggregate":
                fix = (
                    f"give the aggregate a name, aggregate(name=(uda, value)), so its fields "
                    f"become name_{part}"
                )
            else:
                fix = (
                    f"the operator's output field {part!r} keeps its name: rename the field "
                    "in the UDO, or the key column before the window"
                )
            raise ValueError(
                f"result column {c!r} of {call!r} clashes with the start/end or key columns; {fix}"
            )
        seen.add(c)


class _NanKey(float):
    """The one NaN group key: NaN equals NaN as a key (docs/concepts.md,
    "Group keys"), as Spark SQL groups and joins it and .NET's ``Equals``
    (StreamInsight's group-by) compares it. Python's NaN is unequal to
    itself, and since 3.10 each NaN object hashes apart, so two NaN keys
    would be two groups in a dict; every NaN key becomes this float,
    equal to any NaN, of one hash, and itself again when unpickled (an
    engine's saved state, a Spark worker's)."""

    def __eq__(self, other: object) -> bool:
        # math.isnan, not ``other != other``: that calls this __ne__ again
        # when ``other`` is NAN_KEY itself (a join comparing two keys)
        return isinstance(other, float) and math.isnan(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return 0x7FF8  # (NaN's exponent bits)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _nan_key, ()

    def __repr__(self) -> str:
        return "nan"


#: the value every NaN group key becomes (see :class:`_NanKey`)
NAN_KEY = _NanKey("nan")


def _nan_key() -> float:
    return NAN_KEY


def key_of(p: Mapping[str, Any], keys: Sequence[str]) -> Hashable:
    """A row's group as a dict key: the key column's value (a tuple for
    several), an array key as a tuple and a struct key as a tuple of
    (field, value) pairs, since lists and dicts cannot be dict keys; a
    NaN (anywhere in it) is :data:`NAN_KEY`, so all NaN keys are one."""

    if len(keys) == 1:
        return group_key(p[keys[0]])
    return tuple(group_key(p[k]) for k in keys)


#: numpy's float types, once :func:`note_numpy_keys` has seen numpy loaded:
#: a NaN of theirs is a NaN key too (``numpy.float32`` is no ``float``)
NUMPY_FLOATS: set[type[Any]] = set()

#: key types that :func:`nan_free` may change (a NaN in them). The engines'
#: loops test ``type(key) in NORMALIZED`` (a C-level set lookup, where an
#: ``isinstance`` chain would cost every event) and hand such a key to
#: :func:`nan_free`; :func:`note_numpy_keys` adds numpy's float types in
#: place (the loops hold this very set), since udm does not import numpy.
NORMALIZED: set[type[Any]] = {float, tuple}


def note_numpy_keys() -> None:
    """Add numpy's float types to :data:`NORMALIZED` and
    :data:`NUMPY_FLOATS` once numpy is loaded. A numpy key exists only
    after its caller loaded numpy, so the entry points that take keys
    (``Host.process*``, ``evaluate_by_key``) call this first: without it a
    ``numpy.float64`` NaN, from a pandas or numpy column, skipped
    :func:`nan_free` and each NaN made a group of its own.

    >>> import numpy as np
    >>> note_numpy_keys()
    >>> np.float32 in NORMALIZED and nan_free(np.float32("nan")) is NAN_KEY
    True
    """
    if NUMPY_FLOATS:
        return
    np = sys.modules.get("numpy")
    if np is None:
        return
    floats = {np.float16, np.float32, np.float64, np.longdouble}
    NORMALIZED.update(floats)
    NUMPY_FLOATS.update(floats)


def nan_free(value: Any) -> Any:
    """A key with every NaN in it (itself, or inside a tuple) made
    :data:`NAN_KEY`, the one NaN key; anything else as it is (a list stays
    a list, so an unhashable key is still refused as such).

    >>> nan_free((1, float("nan"))) == (1, NAN_KEY), nan_free([1])
    (True, [1])
    """
    if (isinstance(value, float) or type(value) in NUMPY_FLOATS) and value != value:
        return NAN_KEY
    if isinstance(value, tuple):
        return tuple(map(nan_free, value))
    if not NUMPY_FLOATS and type(value).__module__ == "numpy":
        # the first numpy value (a caller that skipped note_numpy_keys:
        # the query engines' key_of); asked once, not per key, after that
        note_numpy_keys()
        return nan_free(value)
    return value


def group_key(value: Any) -> Hashable:
    """A key value as a dict key: :func:`nan_free`, and (as Spark rows hold
    array and struct keys) a list a tuple and a dict a tuple of (field,
    value) pairs, NaNs in them too.

    >>> group_key(float("nan")) is NAN_KEY, group_key([1, {"a": 2}])
    (True, (1, (('a', 2),)))
    """
    if isinstance(value, (list, tuple)):
        return tuple(map(group_key, value))
    if isinstance(value, dict):
        return tuple((f, group_key(x)) for f, x in value.items())
    found: Hashable = nan_free(value)  # a float NaN
    return found


def rows_to_cht(
    rows: Iterable[Row], keys: Sequence[str], layout: Layout
) -> Cht | dict[Hashable, Cht]:
    """Engine output rows as users get them from ``to_cht``: one Cht, or
    ``{key: Cht}`` with the key's value (a tuple for several key columns)."""
    if not keys:
        return Cht(IntervalEvent(s, e, layout.payload(p)) for s, e, p in rows)
    groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
    for s, e, p in rows:
        k = key_of(p, keys)
        groups.setdefault(k, []).append(IntervalEvent(s, e, layout.payload(p)))
    return {k: Cht(v) for k, v in groups.items()}


# -------------------------------------------------------- reference engine


def struct_fields(call: UdmCall, results: Iterable[Any]) -> list[str] | None:
    """Fields of a struct result (dicts, dataclasses), or None for scalars."""
    declared = returns_is_struct(call.returns)
    fields: dict[str, None] = {}
    saw_struct = False
    for r in results:
        v = normalize_value(r)
        if isinstance(v, dict):
            saw_struct = True
            fields.update(dict.fromkeys(v))
    if declared is False or not saw_struct:
        return None
    return list(fields)
