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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from udm.cli.localread import LocalEngineError, read_csv, read_json, times_as_text

__all__ = ["LocalEngineError", "read_table", "write_table"]


#: source.options the local CSV reader understands (Spark's names)
_CSV_OPTIONS = ("delimiter", "sep", "header", "inferSchema")


def spark_only(fmt: str, options: dict[str, Any], where: str | None) -> list[tuple[str, str]]:
    """``(message, field)`` for each source setting only Spark's reader
    takes: checked with the spec's other fields before a local run, and
    again by :func:`read_table`."""
    found: list[tuple[str, str]] = []
    if where:
        found.append(
            (
                f"{where!r} is a Spark SQL condition, which the local engine cannot run; "
                "use --engine spark, or filter in a Python query file (pandas)",
                "source.where",
            )
        )
    unknown = [k for k in options if fmt != "csv" or k not in _CSV_OPTIONS]
    if unknown:
        found.append(
            (
                f"{unknown} are Spark reader options the local engine does not take; "
                "use --engine spark",
                "source.options",
            )
        )
    elif options.get("header", "true") != "true":
        found.append(("header: false needs --engine spark", "source.options"))
    return found


def read_table(
    path: Path, fmt: str, options: dict[str, str], where: str | None, times: Sequence[str] = ()
) -> Any:
    """A source file or folder as a pyarrow Table (Parquet, CSV with a
    header, line-delimited JSON, ORC), read as Spark reads it, the time
    columns ``times`` exact (:mod:`udm.cli.localread`). Raises
    :class:`LocalEngineError` naming the spec field at fault."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    refused = spark_only(fmt, options, where)
    if refused:  # the first (the spec check before the run reports them all)
        raise LocalEngineError(*refused[0])
    files = [path] if path.is_file() else _data_files(path)
    if fmt == "csv":
        delimiter = options.get("delimiter", options.get("sep", ","))
        tables = [read_csv(f, delimiter, times) for f in files]
    elif fmt == "json":
        tables = [read_json(f, times) for f in files]
    else:
        try:
            tables = [ds.dataset([str(f) for f in files], format=fmt).to_table()]
        except (pa.ArrowInvalid, OSError) as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LocalEngineError(
                f"cannot read {path.name} as {fmt}: {why}; check source.path and source.format",
                "source.path",
            ) from None
    if not tables:
        return pa.table({})
    try:
        table = pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise LocalEngineError(
            f"the files of {path.name} do not share their columns' types ({exc}); "
            "read them one by one or make their types agree",
            "source.path",
        ) from None
    return times_as_text(table, times)


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
            try:
                ticks = table.column(i).cast(pa.timestamp("us", tz=field.type.tz))
            except pa.ArrowInvalid:  # a timestamp[ns] column with nanoseconds
                raise LocalEngineError(
                    f"column {field.name!r} holds times with nanoseconds, which ticks "
                    "(microseconds) cannot hold; use --times iso (nine fraction digits "
                    "for such a column), or round it to microseconds in the query "
                    "(ts.dt.floor('us'))"
                ) from None
            ticks = ticks.cast(pa.int64())
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
