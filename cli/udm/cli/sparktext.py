"""Results as text, laid out as Spark's CSV and JSON writers lay them out.

``udm-cli run --engine local`` promises each result "as Spark lays it
out", so a file it writes reads back the same as one ``--engine spark``
wrote, types included: a double keeps its decimal point (``7.0``, not
``7``, which a reader inferring types would take for an integer), CSV
fields are quoted only where Spark's writer (univocity, Spark's default
options) quotes them, and JSON is compact UTF-8 (``{"k":"ünï"}``). The
layout was read off Spark 4 with Java 17 (``tests/test_local_engine.py``
compares the two on the same query):

* numbers as Java prints them: ``1.0``, ``1.0E7``, ``1.0E-4``, ``NaN``,
  ``Infinity`` (in JSON ``"NaN"``, ``"Infinity"``, as strings);
* times from their ticks, six fraction digits, ``Z`` for a time with a
  zone, a ``+`` before a year past 9999 (the end of time is
  ``+294247-01-10T04:00:54.775807Z``); a ``timestamp[ns]`` column (from
  pandas; Spark has none) with nine fraction digits, every nanosecond kept;
* a CSV text field keeps its leading and trailing whitespace (udm writes
  Spark's CSV with ``ignoreLeadingWhiteSpace`` and
  ``ignoreTrailingWhiteSpace`` off: Spark's writer would trim it), is
  ``""`` when empty, and is quoted when it holds
  ``,``, ``"`` or a line break or starts with ``#``, with ``\\`` and ``"``
  escaped by ``\\`` inside the quotes; a null is an empty field.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "UnwritableColumnError",
    "csv_text",
    "java_double",
    "json_lines",
    "nanos_text",
    "tick_text",
]


class UnwritableColumnError(ValueError):
    """A column CSV cannot hold (a struct, list or map), as in Spark."""


# ------------------------------------------------------------ numbers


def _java_layout(shortest: str) -> str:
    """A shortest round-trip repr (``1e-05``, ``123.5``) in the layout of
    Java's ``Double.toString``: plain from 10^-3 up to 10^7, else
    ``d.dddEn``; always a digit after the point."""
    sign = "-" if shortest.startswith("-") else ""
    mantissa, _, exp = shortest.lstrip("-").partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    significant = digits.lstrip("0")
    # the value is 0.DIGITS * 10**point
    point = len(whole) + int(exp or 0) - (len(digits) - len(significant))
    digits = significant.rstrip("0") or "0"
    exponent = point - 1
    if -3 <= exponent < 7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


#: Java 17's ``FloatingDecimal.insignificantDigitsNumber``: decimal digits
#: of a whole double it drops, by the double's trailing power of two
_INSIGNIFICANT = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7]
_INSIGNIFICANT += [8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14]
_INSIGNIFICANT += [14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19]


def _java17_whole(whole: int, precision: int) -> str:
    """A whole number below 2**63, as Java 17's ``Double.toString`` and
    ``Float.toString`` write it (Spark 4 runs on Java 17). They do not
    write the shortest digits that read back as the number, as for other
    values (and as Java 19 and later do): they round the whole number to
    a count of digits set by its binary exponent and ``precision`` (53 bits
    for a double, 24 for a float)."""
    exponent = whole.bit_length() - 1
    p2 = exponent - precision - 1
    drop = _INSIGNIFICANT[p2] if exponent > precision and 1 < p2 < len(_INSIGNIFICANT) else 0
    if drop:
        whole, residue = divmod(whole, 10**drop)
        whole += residue >= 10**drop // 2
    return _java_layout(f"{whole}e{drop}")


def java_double(value: float, single: bool = False) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` for a
    ``single``-precision column) writes it, which is how Spark writes a
    double to CSV and JSON: ``7.0``, ``1.0E10``, ``NaN``, ``-Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if value.is_integer() and abs(value) < 2**63:
        return ("-" if value < 0 else "") + _java17_whole(int(abs(value)), 24 if single else 53)
    if single:
        import numpy as np

        shortest = str(np.float32(value))  # the shortest digits of a float32
    else:
        shortest = repr(value)
    # Double.MIN_VALUE and Float.MIN_VALUE, which Java writes with two digits
    shortest = {"5e-324": "4.9e-324", "1e-45": "1.4e-45"}.get(shortest.lstrip("-"), shortest)
    return _java_layout(("-" if value < 0 else "") + shortest.lstrip("-"))


# ------------------------------------------------------------ times

_DAY = 86_400_000_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _civil(days: int) -> tuple[int, int, int]:
    """Year, month and day of a day count since 1970-01-01 (proleptic
    Gregorian, any year; Python's ``date`` stops at 9999, a tick at 294247)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _date_text(days: int) -> str:
    year, month, day = _civil(days)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):04d}"
    return f"{shown}-{month:02d}-{day:02d}"


def tick_text(ticks: int, zoned: bool = True) -> str:
    """A tick (microseconds since 1970-01-01 UTC) as Spark writes a
    timestamp under ``udm.host.spark.output.EXACT_TIME_OPTIONS``:
    ``2023-11-14T22:13:20.000001Z`` (no ``Z`` unless ``zoned``)."""
    days, micros = divmod(ticks, _DAY)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    clock = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{fraction:06d}"
    return f"{_date_text(days)}T{clock}{'Z' if zoned else ''}"


def nanos_text(nanos: int, zoned: bool = True) -> str:
    """A ``timestamp[ns]`` value (nanoseconds since 1970-01-01 UTC) as
    :func:`tick_text` writes a tick, with nine fraction digits, so that
    no nanosecond is lost: ``2024-01-01T00:00:00.000000001Z``. (Spark has
    no nanoseconds; such a column comes from pandas in a Python query.)"""
    ticks, rest = divmod(nanos, 1000)
    text = tick_text(ticks, zoned)
    return f"{text[:-1]}{rest:03d}Z" if zoned else f"{text}{rest:03d}"


# ------------------------------------------------------------ columns


def _json_string(text: str) -> str:
    """``text`` as Jackson writes it: raw UTF-8, control characters as
    ``\\n`` or ``\\u001F`` (upper-case hex, where Python writes lower)."""
    encoded = json.dumps(text, ensure_ascii=False)
    return re.sub(r"\\u00([0-9a-f]{2})|\\.", _upper_hex, encoded)


def _upper_hex(match: re.Match[str]) -> str:
    """A ``\\u00xx`` escape with upper-case hex; any other escape as it is
    (matched so that the ``u`` of an escaped backslash is not taken)."""
    return "\\u00" + match.group(1).upper() if match.group(1) else match.group(0)


def _csv_field(text: str) -> str:
    """A text field as Spark's CSV writer writes it with udm's options (see
    the module doc)."""
    quote = any(c in text for c in ',"\n\r') or text.startswith("#")
    if not text:
        return '""'
    if quote:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _formatter(kind: Any, json_out: bool) -> Callable[[Any], str]:
    """How one non-null value of an Arrow type is written; time and date
    columns arrive as ticks and days (see :func:`_values`)."""
    import pyarrow as pa

    if pa.types.is_floating(kind):
        single = kind.bit_width < 64

        def number(v: Any) -> str:
            text = java_double(v, single)
            return f'"{text}"' if json_out and text[-1].isalpha() else text

        return number
    if pa.types.is_boolean(kind):
        return lambda v: "true" if v else "false"
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        return str
    if not (pa.types.is_timestamp(kind) or pa.types.is_date(kind)):
        return _formatter_of_rest(kind, json_out)
    zoned = getattr(kind, "tz", None) is not None
    quote = '"' if json_out else ""

    nanos = getattr(kind, "unit", None) == "ns"

    def time(v: Any) -> str:
        if pa.types.is_date(kind):
            return f"{quote}{_date_text(_days(v))}{quote}"
        if nanos and not isinstance(v, dt.datetime):  # a top-level column's int nanoseconds
            return f"{quote}{nanos_text(v, zoned)}{quote}"
        return f"{quote}{tick_text(_ticks(v), zoned)}{quote}"

    return time


def _formatter_of_rest(kind: Any, json_out: bool) -> Callable[[Any], str]:
    """:func:`_formatter` for what is neither a number nor a time."""
    import pyarrow as pa

    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return lambda v: _json_string(base64.b64encode(v).decode("ascii"))
    if not json_out:
        return lambda v: _csv_field(str(v))
    if pa.types.is_struct(kind):
        fields = [(_json_string(f.name), f.name, _formatter(f.type, True)) for f in kind]
        return lambda v: "{" + ",".join(f"{k}:{_or_null(w, v[n])}" for k, n, w in fields) + "}"
    if pa.types.is_map(kind):
        item = _formatter(kind.item_type, True)
        return lambda v: (
            "{" + ",".join(f"{_json_string(str(k))}:{_or_null(item, x)}" for k, x in v) + "}"
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        each = _formatter(kind.value_type, True)
        return lambda v: "[" + ",".join(_or_null(each, x) for x in v) + "]"
    return lambda v: _json_string(str(v))


def _ticks(value: Any) -> int:
    """A tick from a top-level column's int or a nested field's datetime."""
    if isinstance(value, dt.datetime):
        epoch = _EPOCH if value.tzinfo is not None else _EPOCH.replace(tzinfo=None)
        return (value - epoch) // dt.timedelta(microseconds=1)
    return int(value)


def _days(value: Any) -> int:
    """Days since 1970-01-01 from a top-level column's int or a nested date."""
    return value.toordinal() - _EPOCH.toordinal() if isinstance(value, dt.date) else int(value)


def _or_null(write: Callable[[Any], str], value: Any) -> str:
    return "null" if value is None else write(value)


def _values(column: Any) -> list[Any]:
    """A column's values, times as ticks and dates as days: formatted from
    the numbers, every time is written, even past Python's year 9999."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_timestamp(kind):
        # nanoseconds kept (nanos_text writes nine digits): two values that
        # differ by a nanosecond stay apart
        unit = "ns" if kind.unit == "ns" else "us"
        column = column.cast(pa.timestamp(unit, kind.tz)).cast(pa.int64())
    elif pa.types.is_date(kind):
        column = column.cast(pa.date32()).cast(pa.int32())
    return list(column.to_pylist())


def csv_text(table: Any) -> str:
    """``table`` as Spark writes CSV with a header (a header alone for no
    rows). Raises :class:`UnwritableColumnError` for a nested column."""
    import pyarrow as pa

    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_nested(field.type) or pa.types.is_binary(field.type):
            raise UnwritableColumnError(
                f"CSV cannot hold column {field.name!r} of type {field.type}; "
                "use --format json or parquet"
            )
        write = _formatter(field.type, json_out=False)
        columns.append(["" if v is None else write(v) for v in _values(column)])
    lines = [",".join(_csv_field(name) for name in table.column_names)]
    lines += [",".join(row) for row in zip(*columns, strict=True)]
    return "\n".join(lines) + "\n"


def json_lines(table: Any) -> str:
    """``table`` as Spark writes line-delimited JSON with
    ``ignoreNullFields=false``: one compact object per row, every field
    (``"end":null``), in column order."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        write = _formatter(field.type, json_out=True)
        key = _json_string(field.name)
        columns.append([f"{key}:{_or_null(write, v)}" for v in _values(column)])
    return "".join("{" + ",".join(row) + "}\n" for row in zip(*columns, strict=True))
