"""What udm-cli shows besides its commands' logic: previews of results,
``--json`` reports, the minimal failing stream saved to a file, help
without type noise, and the checks and logging around ``run``.

Kept apart from :mod:`udm.cli.main` (the commands and their options) so
each stays a readable size.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = [
    "cell",
    "local_problem",
    "preview",
    "preview_arrow",
    "preview_table",
    "quiet_flag_types",
    "save_minimal",
    "test_json",
    "too_many_dropped",
    "verbose_logs",
]


def quiet_flag_types() -> None:
    """Typer's help shows a type column for every option, ``<bool>`` for a
    flag (``--verbose <bool>``, ``--help <bool>``), which reads as if the
    flag took a value, and ``<list[Path]>`` beside an argument's name.
    Typer has no setting for it (an option's metavar is per option, and
    --help is Typer's own), so flags and arguments show no type."""
    from typer.core import TyperArgument, TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "udm_quiet", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    def no_type(self: TyperArgument, ctx: Any) -> str | None:
        return None  # an argument's metavar (PATHS, QUERY_FILE) says it

    display_type_rich.udm_quiet = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperArgument.display_type_rich = no_type  # type: ignore[method-assign,assignment]


def test_json(
    results: list[Any], invalid: list[Any], why: list[str], pytest_code: int | None
) -> dict[str, Any]:
    """``test --json``: every fixture's outcome, and pytest's exit code."""
    from udm.testing.report import summary_cells

    fixtures: list[dict[str, Any]] = []
    for r in results:
        title, udm, window = summary_cells(r.fixture)
        fixtures.append(
            {
                "fixture": title,
                "file": str(r.fixture.path) if r.fixture.path else None,
                "line": r.fixture.line,
                "udm": udm,
                "window": window,
                "streams": r.checked_streams,
                "result": "pass" if r.passed else "fail",
                "failures": list(r.failures),
                "minimal": r.minimal,
            }
        )
    for item, message in zip(invalid, why, strict=True):
        # every entry has every key (docs/cli.md): an invalid fixture checked
        # no stream; one whose file did not load has no udm or window either
        udm = window = None
        if isinstance(item, Path):
            entry = {"fixture": item.name, "file": str(item), "line": None}
        else:
            entry = {"fixture": item.title, "file": str(item.path), "line": item.line}
            try:  # as the summary table shows them
                _, udm, window = summary_cells(item)
            except Exception:  # a fixture too broken to describe
                udm = window = None
        fixtures.append(
            {
                **entry,
                "udm": udm,
                "window": window,
                "streams": 0,
                "result": "invalid",
                "failures": message.splitlines(),
                "minimal": None,
            }
        )
    failed = sum(not r.passed for r in results)
    return {
        "passed": len(results) - failed,
        "failed": failed,
        "invalid": len(invalid),
        "fixtures": fixtures,
        "pytest_exit_code": pytest_code,
    }


def save_minimal(result: Any, console: Console, saved: dict[Path, int]) -> None:
    """Write a shrunk failure next to its fixture as ``NAME.minimal.yaml``
    (not ``*.udm.yaml``: the next run does not collect it; rename it to
    keep it as a fixture); ``saved`` numbers several of one file."""
    path = result.fixture.path
    if path is None:
        return
    stem = path.name.removesuffix(".udm.yaml")
    n = saved.get(path, 0)
    saved[path] = n + 1
    target = path.with_name(f"{stem}.minimal{f'-{n + 1}' if n else ''}.yaml")
    try:
        target.write_text(result.minimal, encoding="utf-8")
    except OSError as exc:
        console.print(f"# (not saved: {exc})", markup=False, soft_wrap=True)
        return
    console.print(
        f"# saved to {target}; rename it to *.udm.yaml to keep it as a fixture",
        markup=False,
        soft_wrap=True,
    )


def cell(value: Any) -> tuple[str, bool]:
    """A preview cell and whether it was rounded for display: floats keep
    their ``.0`` and show up to 6 significant digits; times come as exact
    text from :func:`preview`."""
    if isinstance(value, float):
        exact = repr(value)
        if len(exact) <= 12 or not math.isfinite(value):
            return exact, False
        shown = f"{value:.6g}"
        if "e" not in shown and "." not in shown:
            shown += ".0"
        return shown, float(shown) != value
    if hasattr(value, "asDict"):  # a struct: its fields by name, as JSON shows them
        return json.dumps(value.asDict(recursive=True), default=str, ensure_ascii=False), False
    return str(value), False


def preview(console: Console, title: str, df: Any, n: int) -> None:
    """Print the first ``n`` rows of ``df`` as a table, ordered by time, with
    times as exact text in the session's time zone (as the output files have
    them)."""
    from pyspark.sql import types as T

    from udm.host.spark.frame import quoted

    order = [c for c in ("start", "end") if c in df.columns]
    # times as exact text, in the session's time zone as the files have
    # them (collect() would convert to this machine's zone), the fraction
    # shown when not zero
    shown = [
        f"regexp_replace(date_format({quoted(f.name)}, 'yyyy-MM-dd HH:mm:ss.SSSSSS'), "
        f"'\\\\.0+$', '') AS {quoted(f.name)}"
        if isinstance(f.dataType, T.TimestampType | T.TimestampNTZType)
        else quoted(f.name)
        for f in df.schema.fields
    ]
    rows = (df.orderBy(*order) if order else df).limit(n).selectExpr(*shown).collect()
    preview_table(console, title, list(df.columns), [list(r) for r in rows])


def preview_table(console: Console, title: str, columns: list[str], rows: list[Any]) -> None:
    """A preview table: data and names are never markup; times come as
    exact text; floats say when they were rounded for display."""
    table = Table(title=escape(title), title_justify="left")  # names are not markup
    for name in columns:
        table.add_column(escape(name))
    rounded = False
    for row in rows:
        cells = [cell(v) for v in row]
        rounded = rounded or any(r for _, r in cells)
        table.add_row(*(Text(c) for c, _ in cells))  # data, not markup
    width = console.width
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # piped or redirected: full width, one line per row (struct values
        # whole); a terminal's width is respected, cells wrap
        wide = console.measure(table, options=console.options.update_width(10_000))
        console.width = max(width, wide.maximum)
    try:
        console.print(table)
    finally:
        console.width = width
    if rounded:
        console.print(
            "(floats rounded to 6 significant digits for display; the written files are exact)",
            markup=False,
        )


def local_problem(query: Any) -> str | None:
    """Why ``--engine local`` cannot run ``query`` (it needs Spark), or None."""
    from udm.host.query import Stream

    if isinstance(query, Stream) and query.runs_in_process():
        return None
    what = "a Spark DataFrame" if not isinstance(query, Stream) else "a Stream over a DataFrame"
    return (
        f"is {what}, which --engine local cannot run; build it with Stream.from_pandas, "
        "from_arrow or from_cht (queries(spark) gets spark=None), or use --engine spark"
    )


def preview_arrow(console: Console, title: str, table: Any, n: int) -> None:
    """The preview of a result the local engine wrote (a pyarrow Table)."""
    import pyarrow as pa

    from udm.cli.sparktext import nanos_text
    from udm.host.time import iso_ticks

    # times as int64 ticks, shown from them: a Python datetime stops at the
    # year 9999, where an open window's last tick (INFINITY - 1) is not;
    # a timestamp[ns] column (from pandas) as nanoseconds, every one shown
    stamps = {f.name for f in table.schema if pa.types.is_timestamp(f.type)}
    nanos = {f.name for f in table.schema if pa.types.is_timestamp(f.type) and f.type.unit == "ns"}
    for name in stamps:
        i = table.schema.get_field_index(name)
        unit = "ns" if name in nanos else "us"
        ticks = table.column(i).cast(pa.timestamp(unit, tz=table.schema.field(i).type.tz))
        table = table.set_column(i, name, ticks.cast(pa.int64()))
    # sorted as the Spark preview is: by start, then end (an open end last)
    records = table.to_pylist()
    records.sort(key=lambda r: (r["start"], r["end"] is None, r["end"] or 0))

    def text(name: str, v: Any) -> Any:
        if name in nanos and v is not None:
            return nanos_text(v, zoned=False).replace("T", " ").removesuffix(".000000000")
        if name in stamps and v is not None:  # UTC, exact: the fraction when not zero
            return iso_ticks(v)[:-1].replace("T", " ").removesuffix(".000000")
        return v

    rows = [[text(k, v) for k, v in r.items()] for r in records[:n]]
    preview_table(console, title, list(table.column_names), rows)


def too_many_dropped(dropped: int, read: int | None, max_dropped: float) -> str | None:
    """Why a run that dropped ``dropped`` of ``read`` rows failed, or None:
    every row dropped, or more than the ``--max-dropped`` share, is almost
    always a reader or time-format mistake, not bad rows."""
    if not read:
        return None
    if dropped >= read:
        return (
            f"every one of the {read:,} input rows was invalid and dropped, so the result is "
            "empty; check the time columns and their format (source.options: "
            "timestampFormat, docs/cli.md)"
        )
    if dropped > max_dropped * read:
        return (
            f"{dropped:,} of {read:,} input rows ({dropped / read:.0%}) were invalid and "
            f"dropped, more than --max-dropped {max_dropped:g}; check the data and the "
            "time format, or raise --max-dropped"
        )
    return None


@contextmanager
def verbose_logs(spark: Any) -> Iterator[None]:
    """--verbose, while the queries run: Spark's task failure logs (Java
    traces) stay on, and the Spark error behind a udm error is logged
    (logger ``udm.spark``); both as before afterwards."""
    import logging

    from udm.host.spark.errors import LOGGER

    handler = logging.StreamHandler(sys.stderr)
    level = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    with suppress(Exception):  # Spark Connect: the server logs
        spark.sparkContext.setLogLevel("ERROR")
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
