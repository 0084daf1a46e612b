"""How ``udm-cli run`` reads a YAML spec's source on Spark.

CSV gets a header and inferred types unless the spec's ``options`` say
otherwise, as Spark users expect; a time column that inference typed as
ISO timestamps is read again as its text, so udm parses it (and refuses a
digit below a microsecond, which Spark's parser drops: docs/spark.md), as
``--engine local`` reads it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_source"]


def read_source(
    spark: Any, path: str, fmt: str, options: dict[str, Any], times: list[str]
) -> Any:
    """The source at ``path`` as a DataFrame, the ``times`` columns as
    written when Spark's CSV inference made ISO timestamps of them."""
    defaults = {"header": "true", "inferSchema": "true"} if fmt == "csv" else {}
    reader = spark.read.format(fmt).options(**{**defaults, **options})
    df = reader.load(path)
    own = {k.lower() for k in options}  # a format or zone of its own: Spark parses
    if fmt == "csv" and not own & {"timestampformat", "timezone", "schema"}:
        df = _times_as_written(df, reader, path, times)
    return df


def _times_as_written(df: Any, reader: Any, path: str, times: list[str]) -> Any:
    """``df`` read again with its time columns as the text in the file when
    Spark's CSV schema inference typed them as ISO timestamps: its parser
    drops digits below a microsecond silently there, where udm's own reading
    of the text (in the same session time zone) refuses them (docs/spark.md),
    as ``--engine local`` does. Other inferred types (ticks, dates) are kept;
    the schema is not inferred again. Not called when the options give a
    ``timestampFormat`` or ``timeZone``, which only Spark's reader applies."""
    from pyspark.sql import types as T

    fields = df.schema.fields
    if not any(f.name in times and isinstance(f.dataType, T.TimestampType) for f in fields):
        return df
    schema = T.StructType(
        [
            T.StructField(f.name, T.StringType(), f.nullable)
            if f.name in times and isinstance(f.dataType, T.TimestampType)
            else f
            for f in fields
        ]
    )
    return reader.schema(schema).load(path)
