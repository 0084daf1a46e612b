"""Writing query results to files exactly: every time to the tick.

Spark writes timestamps to CSV and JSON with its default pattern, which
keeps milliseconds: a point event ``[12:03:00, 12:03:00.000001)`` would be
written with its start equal to its end. :func:`write_result` writes
times as ISO 8601 strings with six fraction digits (and the offset, ``Z``
under a UTC session), or, with ``times="ticks"``, as integer ticks
(microseconds since 1970-01-01 UTC; the end of time as
:data:`~udm.host.INFINITY`). Parquet and ORC keep microseconds natively.
:func:`read_result` reads such a file back with the same options.
"""

from __future__ import annotations

from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from udm.host.spark.frame import quoted
from udm.host.time import INFINITY

__all__ = ["EXACT_TIME_OPTIONS", "TimeFormat", "read_result", "ticks_times", "write_result"]

TimeFormat = Literal["iso", "ticks"]

#: Reader and writer options that keep every microsecond of a timestamp in
#: CSV and JSON (Spark's default patterns stop at milliseconds)
EXACT_TIME_OPTIONS: dict[str, str] = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}

_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


def ticks_times(df: DataFrame) -> DataFrame:
    """``df`` with its timestamp columns as int64 ticks; a null ``end`` (an
    event that never ends) becomes :data:`~udm.host.INFINITY`, as in a CHT."""
    exprs = []
    for field in df.schema.fields:
        c = quoted(field.name)
        if isinstance(field.dataType, T.TimestampType):
            ticks = f"unix_micros({c})"
        elif isinstance(field.dataType, T.TimestampNTZType):
            ticks = f"timestampdiff(MICROSECOND, {_EPOCH_NTZ}, {c})"
        else:
            exprs.append(c)
            continue
        if field.name == "end":
            ticks = f"coalesce({ticks}, {INFINITY}L)"
        exprs.append(f"{ticks} AS {c}")
    return df.selectExpr(*exprs)


def _options(fmt: str) -> dict[str, str]:
    options = dict(EXACT_TIME_OPTIONS) if fmt in ("csv", "json") else {}
    if fmt == "csv":
        options["header"] = "true"
        # Spark's CSV writer trims leading and trailing whitespace by
        # default: a value "  a " would be written (and read back) as "a"
        options["ignoreLeadingWhiteSpace"] = "false"
        options["ignoreTrailingWhiteSpace"] = "false"
        options["multiLine"] = "true"  # (reading) a quoted field may hold a line break
    if fmt == "json":
        options["ignoreNullFields"] = "false"  # "end": null, not a missing key
    return options


def write_result(df: DataFrame, path: str, fmt: str, times: TimeFormat | str = "iso") -> DataFrame:
    """Write ``df`` to ``path`` (replacing an earlier output) as ``fmt``
    (``parquet``, ``csv``, ``json``, ``orc``), times exact; returns what
    was written (``df``, or ``df`` with ticks)."""
    if times not in ("iso", "ticks"):
        raise ValueError(f"unknown times {times!r}; use 'iso' or 'ticks'")
    out = ticks_times(df) if times == "ticks" else df
    out.write.mode("overwrite").options(**_options(fmt)).format(fmt).save(path)
    return out


def read_result(spark: SparkSession, path: str, fmt: str, schema: Any) -> DataFrame:
    """A file :func:`write_result` wrote, read back with its schema (JSON
    would otherwise come back with sorted columns and times as text)."""
    reader = spark.read.format(fmt).schema(schema).options(**_options(fmt))
    return reader.load(path)
