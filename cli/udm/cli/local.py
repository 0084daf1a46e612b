"""``udm-cli run --engine local``: a query file run in-process, no Spark.

For a small file, starting Spark costs far more than the query (about a
minute on a loaded machine). The local engine reads a YAML spec's source
with pyarrow, runs the query in the reference evaluator (the oracle every
engine is tested against, so the results are the same) and writes each
result as Spark would lay it out (``OUTPUT/NAME/part-00000.*`` and
``_SUCCESS``, CSV and JSON text as Spark writes it, see
:mod:`udm.cli.sparktext`), times exact to the tick in every format. A Python query
file gets ``spark=None`` and returns in-memory streams
(``Stream.from_pandas``/``from_arrow``/``from_cht``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["LocalEngineError", "read_table", "write_table"]


class LocalEngineError(ValueError):
    """Something the local engine cannot do; the message says to use Spark."""


#: source.options the local CSV reader understands (Spark's names)
_CSV_OPTIONS = ("delimiter", "sep", "header", "inferSchema")


def read_table(path: Path, fmt: str, options: dict[str, str], where: str | None) -> Any:
    """A source file or folder as a pyarrow Table (Parquet, CSV with a
    header, line-delimited JSON, ORC)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if where:
        raise LocalEngineError(
            "source.where is a Spark SQL condition, which the local engine cannot run; "
            "use --engine spark, or filter in a Python query file (pandas)"
        )
    unknown = [k for k in options if fmt != "csv" or k not in _CSV_OPTIONS]
    if unknown:
        raise LocalEngineError(
            f"source.options {unknown} are Spark reader options the local engine does not "
            "take; use --engine spark"
        )
    if options.get("header", "true") != "true":
        raise LocalEngineError("source.options header: false needs --engine spark")
    files = [path] if path.is_file() else _data_files(path)
    if fmt == "csv":
        import pyarrow.csv as pcsv

        delimiter = options.get("delimiter", options.get("sep", ","))
        parse = pcsv.ParseOptions(delimiter=delimiter)
        # as Spark's CSV reader (pyspark 4) reads them: an empty field and a
        # quoted empty field "" are null (a null key meets on_null_key)
        convert = pcsv.ConvertOptions(strings_can_be_null=True)
        return pa.concat_tables(
            [pcsv.read_csv(str(f), parse_options=parse, convert_options=convert) for f in files],
            promote_options="default",
        )
    if fmt == "json":
        import pyarrow.json as pjson

        return pa.concat_tables([pjson.read_json(str(f)) for f in files], promote_options="default")
    return ds.dataset([str(f) for f in files], format=fmt).to_table()


def _data_files(folder: Path) -> list[Path]:
    """A folder's data files, as Spark reads them (no ``_``/``.`` files)."""
    return sorted(
        f
        for f in folder.rglob("*")
        if f.is_file() and not f.name.startswith(("_", ".")) and not f.name.endswith(".crc")
    )


def _ticks_times(table: Any) -> Any:
    """Timestamp columns as int64 ticks; a null ``end`` is INFINITY."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from udm.host.time import INFINITY

    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            ticks = table.column(i).cast(pa.timestamp("us", tz=field.type.tz)).cast(pa.int64())
            if field.name == "end":
                ticks = pc.fill_null(ticks, INFINITY)
            table = table.set_column(i, field.name, ticks)
    return table


def write_table(table: Any, path: Path, fmt: str, times: str = "iso") -> Any:
    """Write ``table`` to the folder ``path`` as Spark would (replacing an
    earlier output): one ``part-00000`` file and ``_SUCCESS``; returns what
    was written."""
    import shutil

    import pyarrow.parquet as pq

    from udm.cli.sparktext import UnwritableColumnError, csv_text, json_lines

    if times == "ticks":
        table = _ticks_times(table)
    if path.is_dir():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    part = path / f"part-00000.{fmt}"
    if fmt == "parquet":
        pq.write_table(table, str(part))
    elif fmt in ("csv", "json"):
        # as Spark's writers lay the values out (7.0, not 7), not as pyarrow's
        try:
            text = csv_text(table) if fmt == "csv" else json_lines(table)
        except UnwritableColumnError as exc:
            raise LocalEngineError(str(exc)) from None
        part.write_text(text, encoding="utf-8")
    else:
        raise LocalEngineError(f"--format {fmt} is not written by the local engine")
    (path / "_SUCCESS").write_text("")
    return table
