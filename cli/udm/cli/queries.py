"""``udm-cli run``, ``explain`` and ``package``: query files on Spark."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import typer
from rich.console import Console
from rich.markup import escape

from udm.cli import views
from udm.cli.app import (
    app,
    check_plot_path,
    fail,
    make_console,
)
from udm.cli.cluster import (
    ConfOption,
    MasterOption,
    PyFilesOption,
    RemoteOption,
    ShipOption,
    is_stream,
)


def _spark(options: Any, query_file: Path) -> Any:
    """The session the options, the environment or this process give (a
    quiet local one by default, whose Python workers run this interpreter
    and can import modules next to the query file), with the query
    file's folder shipped to a cluster's executors."""
    from udm.cli.cluster import ship_folder, start_session
    from udm.cli.queryfile import worker_path

    worker_path(query_file)
    import logging

    from pyspark.logger import PySparkLogger

    from udm.host.spark.session import SessionError

    # PySpark logs an analysis error's query context with its Java trace
    # at ERROR, before the CLI's one-line report of the same error
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    # a failing task logs its Java stack trace at ERROR; the CLI reports
    # the failure itself (UDM, window and key), so only FATAL logs remain
    try:
        spark = start_session(f"udm-cli {query_file.name}", options)
    except SessionError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # no JVM: Java or Spark missing or misconfigured
        raise fail(_no_spark(exc)) from None
    options.shipped = ship_folder(spark, query_file, options)
    return spark


def _no_spark(exc: Exception) -> str:
    """The one-line error for a Spark that did not start (PySpark raises a
    ``PySparkRuntimeError`` when the Java gateway exits, an ``OSError`` for
    a ``SPARK_HOME`` without its scripts), with what to check."""
    import os

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    java = os.environ.get("JAVA_HOME")
    where = f"JAVA_HOME={java}" if java else "JAVA_HOME is not set"
    return (
        f"Spark did not start ({type(exc).__name__}: {first}). Spark needs Java 17 "
        f"({where}; `java -version` should work) and, if SPARK_HOME is set, a Spark "
        "there; `udm-cli run --engine local` runs a query file in-process, without Spark"
    )


def _spark_options(
    master: str | None,
    remote: str | None,
    conf: list[str] | None,
    py_files: list[str] | None,
    ship: bool,
) -> Any:
    from udm.cli.cluster import SparkOptionsError, spark_options

    try:
        return spark_options(master, remote, conf, py_files, ship)
    except SparkOptionsError as exc:
        raise fail(str(exc), code=2) from None


def _ship_libraries(console: Console, options: Any, query_file: Path, spark: Any) -> None:
    """Ship the UDM libraries the queries use by name and say what went."""
    from udm.cli.cluster import describe, ship_libraries

    if spark is None:  # --engine local: nothing runs on executors
        return
    shipment = options.shipped
    shipment.merge(ship_libraries(spark, query_file, options))
    for line in describe(shipment, query_file):
        console.print(line, markup=False, style="dim")


def _check_query_file(query_file: Path, local: bool = False) -> None:
    """What can be checked before Spark starts (which takes seconds)."""
    from udm.cli.queryfile import QueryFileError, check_query_file

    try:
        check_query_file(query_file, local)
    except QueryFileError as exc:
        raise fail(str(exc)) from None


def _queries(query_file: Path, spark: Any) -> dict[str, Any]:
    from udm.cli.queryfile import QueryFileError, load_queries

    try:
        return load_queries(query_file, spark)
    except QueryFileError as exc:
        raise fail(str(exc)) from None


@app.command(short_help="Run a query file on Spark: write each result and preview it.")
def run(
    query_file: Annotated[
        Path,
        typer.Argument(help="A Python query file or a YAML query spec.", metavar="QUERY_FILE"),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the results (one per query).")
    ] = Path("out"),
    fmt: Annotated[
        str, typer.Option("--format", help="Output format: parquet, csv or json.")
    ] = "parquet",
    preview: Annotated[int, typer.Option(help="Rows to preview per result (0: none).")] = 8,
    master: MasterOption = None,
    remote: RemoteOption = None,
    conf: ConfOption = None,
    py_files: PyFilesOption = None,
    ship: ShipOption = True,
    times: Annotated[
        str,
        typer.Option(
            "--times",
            help="How CSV/JSON/Parquet files hold times: iso (timestamps, ISO text with "
            "microseconds in CSV and JSON) or ticks (int64 microseconds since 1970).",
        ),
    ] = "iso",
    max_dropped: Annotated[
        float,
        typer.Option(
            "--max-dropped",
            min=0.0,
            max=1.0,
            help="Fail when a dropping policy (on_invalid: drop, on_null_key: drop) drops "
            "more than this share of the input rows (every row always fails).",
        ),
    ] = 0.5,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="On failure, also show Spark's error and Java stack traces."
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print what was written as JSON on stdout (for CI); the report goes to stderr.",
        ),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="spark, or local: in-process without Spark, for small data (no Spark start-up).",
        ),
    ] = "spark",
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="Print where each query's time went: plan, write (Spark jobs, Python "
            "workers), read back (see docs/performance.md).",
        ),
    ] = False,
) -> None:
    """Run a query file on Spark: write each result under OUTPUT/NAME and
    preview it.

    A Python query file defines [bold]queries(spark)[/bold] (a dict of name to
    Stream or DataFrame, run in order) or [bold]query(spark)[/bold]; a YAML spec
    names a source, a window and a UDM (see docs/cli.md).

    [bold]Examples[/bold]

      udm-cli run examples/demo.py

      udm-cli run examples/hourly_median.yaml --output /tmp/out --format csv

      udm-cli run examples/demo.py --master spark://head:7077 --conf spark.executor.memory=2g

      udm-cli run examples/demo.py --remote sc://head:15002
    """
    import time

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from udm.cli.local import write_table
    from udm.cli.progress import spark_progress
    from udm.cli.queryfile import literal_path
    from udm.cli.timings import Profile

    if engine == "spark":
        from udm.host.spark.output import read_result, write_result

    _refuse_run_choices(fmt, times, engine)
    if preview < 0:
        raise fail(f"--preview {preview}: give the rows to preview, 0 or more (0: none)", code=2)
    local = engine == "local"
    options = _spark_options(master, remote, conf, py_files, ship)
    _check_query_file(query_file, local)
    console = make_console(err=as_json)  # --json: stdout is the JSON alone
    started = time.perf_counter()
    timings = Profile(profile)
    with (
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress,
        ExitStack() as scoped,
    ):
        starting = "loading" if local else "starting Spark and loading"
        task = progress.add_task(escape(f"{starting} {query_file}"), total=None)
        with timings.setup("load (Spark start, queries(spark))"):
            spark = None if local else _spark(options, query_file)
            timings.attach(spark)
            if verbose and spark is not None:
                scoped.enter_context(views.verbose_logs(spark))
            queries = _queries(query_file, spark)
        _ship_libraries(console, options, query_file, spark)
        for name, query in queries.items():
            problem = _output_problem(name, query, output / name) or (
                views.local_problem(query) if local else None
            )
            if problem:
                raise fail(f"{query_file}: query {name!r}: {problem}")
        written: list[tuple[str, Path, float, dict[str, int] | None, int | None, Any]] = []
        for name, query in queries.items():
            progress.update(task, description=escape(f"running {name}"))
            t = time.perf_counter()
            path = output / name
            running = escape(f"running {name}")

            def show(stages: str | None, running: str = running) -> None:
                progress.update(task, description=running + (f" ({stages})" if stages else ""))

            try:
                if local:
                    df = write_table(query.to_arrow(), path, fmt, times)
                else:
                    timed = timings.query(name)
                    with spark_progress(spark, show):  # the stage and its tasks done
                        with timings.phase(timed, "plan"):
                            df = query.to_dataframe() if is_stream(query) else query
                        # times exact to the tick in every format
                        with timings.phase(timed, "write"):
                            df = write_result(df, str(path), fmt, times)
            except Exception as exc:
                raise _query_failed(exc, name, query_file, verbose) from None
            drops, read = _observed_drops(query)
            # Spark: the schema to read the files back with; local: the table
            shown = df if local else df.schema
            written.append((name, path, time.perf_counter() - t, drops, read, shown))
    too_many: list[str] = []
    report: list[dict[str, Any]] = []
    for name, path, seconds, drops, read, schema in written:
        # read back with the written schema: its column order and types
        # (JSON would come back sorted by name, times as text); Hadoop
        # takes [ ] { } * ? in a path as a pattern
        if spark is None:
            rows = schema.num_rows
            if preview > 0:
                views.preview_arrow(console, f"{name}: {rows:,} rows", schema, preview)
        else:
            with timings.phase(timings.query(name), "read back"):
                result = read_result(spark, literal_path(path), fmt, schema)
                rows = result.count()
                if preview > 0:
                    views.preview(console, f"{name}: {rows:,} rows", result, preview)
        console.print(f"wrote {path}/ ({fmt}, {rows:,} rows) in {seconds:.1f} s", markup=False)
        problem = _report_drops(console, drops, read, max_dropped)
        if problem:
            too_many.append(f"query {name!r}: {problem}")
        report.append(
            {
                "name": name,
                "path": str(path),
                "format": fmt,
                "times": _times_written(schema, times),
                "rows": rows,
                "seconds": round(seconds, 3),
                "rows_read": read,
                "dropped": drops or {},
            }
        )
    if as_json:
        total = round(time.perf_counter() - started, 3)
        typer.echo(json.dumps({"queries": report, "seconds": total, "ok": not too_many}, indent=2))
    if too_many:
        raise fail("\n".join(too_many))
    for line in timings.lines() if profile else []:
        console.print(line, markup=False)
    console.print(f"done in {time.perf_counter() - started:.1f} s", markup=False)


def _times_written(written: Any, times: str) -> str:
    """How a result's times were written: ``ticks`` when asked, or when
    its ``start`` column holds integer ticks (a query over integer ticks
    writes ticks whatever ``--times`` says); else ``times``. ``written``:
    the Arrow table written (local) or the Spark schema read back."""
    if times == "ticks":
        return times
    if hasattr(written, "column_names"):  # a pyarrow Table (--engine local)
        if "start" not in written.column_names:
            return times
        integral = pa.types.is_integer(written.schema.field("start").type)
    else:  # a Spark StructType
        if "start" not in written.fieldNames():
            return times
        integral = written["start"].dataType.typeName() in ("long", "integer")
    return "ticks" if integral else times


def _refuse_run_choices(fmt: str, times: str, engine: str) -> None:
    """Refuse an unknown --format, --times or --engine (bad usage: code 2)."""
    if fmt not in ("parquet", "csv", "json"):
        raise fail(f"unknown --format {fmt!r}; use parquet, csv or json", code=2)
    if times not in ("iso", "ticks"):
        raise fail(f"unknown --times {times!r}; use iso or ticks", code=2)
    if engine not in ("spark", "local"):
        raise fail(f"unknown --engine {engine!r}; use spark or local", code=2)


def _query_failed(exc: Exception, name: str, query_file: Path, verbose: bool) -> typer.Exit:
    """The exit for a query that failed, its message in udm's words (a
    YAML query file's in the spec's words); with --verbose, the traceback."""
    from udm.cli.queryfile import in_spec_words, run_error_place

    if verbose:
        import traceback

        spark_error = getattr(exc, "spark_error", exc)
        traceback.print_exception(spark_error, file=sys.stderr)
    message = spark_message(exc)
    if query_file.suffix in (".yaml", ".yml"):
        message = run_error_place(message, query_file) + in_spec_words(message, query_file)
    return fail(f"query {name!r} failed: {message}")


def _observed_drops(query: Any) -> tuple[dict[str, int] | None, int | None]:
    """The invalid input rows a query dropped, by reason, and the rows it
    read (None when nothing was observed), marked as reported by the CLI."""
    # (a Spark Connect DataFrame answers any attribute with a Column)
    metrics = query.metrics if is_stream(query) else None
    if metrics is None:
        return None, None
    # reported with the output: not also as a log warning
    metrics.mark_reported()
    return metrics.invalid_rows(wait=True), metrics.rows_read(wait=True)


def _report_drops(
    console: Console, drops: dict[str, int] | None, read: int | None, max_dropped: Any
) -> str | None:
    """Print the dropped rows of one query; why there were too many, if so."""
    if not drops:
        return None
    why = ", ".join(f"{n:,} {reason}" for reason, n in drops.items())
    dropped = sum(drops.values())
    of = f" of {read:,}" if read else ""
    console.print(f"dropped {dropped:,}{of} input rows as invalid: {why}", markup=False)
    return views.too_many_dropped(dropped, read, max_dropped)


def spark_message(exc: Exception) -> str:
    """udm's message for a failed query (UDM failures name the UDM, window,
    key and the line of the UDM's code; a cluster's executors lacking code
    say what to ship), never Spark's wrappers or Py4J's."""
    from udm.host.spark.errors import spark_message
    from udm.host.spark.shipping import worker_import_problem

    problem = worker_import_problem(str(exc))  # a cluster's executors lack code
    return problem or spark_message(exc)


def _output_problem(name: str, query: Any, path: Path) -> str | None:
    """Why ``run`` cannot write query ``name`` to ``path``: a name that is
    not one folder name (``..``, ``a/b``, empty) would write elsewhere, and
    a folder holding files that are not an earlier output would be lost."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return (
            f"the output name {name!r} is not a folder name (it would write outside "
            "the output folder); name the query with letters, digits, - and _"
        )
    if not is_stream(query) and getattr(query, "isStreaming", False) is True:
        # before hasattr(query, "write"), which a streaming DataFrame raises on
        return (
            "is a streaming DataFrame (spark.readStream, or the changelog of to_stream()); "
            "run writes batch results: start a streaming query in Python with "
            "udm.host.spark.streaming.start_stream (docs/streaming.md)"
        )
    # not hasattr: a Spark Connect DataFrame has every attribute (a column)
    if not (is_stream(query) or hasattr(query, "write")):
        return (
            f"is a {type(query).__name__}, not a Stream or a DataFrame; query(spark) and "
            "queries(spark) return Streams or DataFrames"
        )
    if path.is_dir() and any(path.iterdir()) and not (path / "_SUCCESS").exists():
        return (
            f"{path} exists and is not an earlier output of Spark (no _SUCCESS file), so "
            "run would replace what it holds; pick another --output or remove the folder"
        )
    if path.exists() and not path.is_dir():
        return f"{path} is a file; pick another --output"
    return None


@app.command(short_help="Print each query's plan; with --plot, draw a sample's events and windows.")
def explain(
    query_file: Annotated[
        Path,
        typer.Argument(help="A Python query file or a YAML query spec.", metavar="QUERY_FILE"),
    ],
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw each query's timeline for a sample (PNG/SVG/PDF)."),
    ] = None,
    rows: Annotated[int, typer.Option(help="Sample size for --plot (source rows).")] = 200,
    where: Annotated[
        str | None,
        typer.Option(
            help="Spark SQL condition on the source for the sample, e.g. \"sensor = 's1'\"."
        ),
    ] = None,
    master: MasterOption = None,
    remote: RemoteOption = None,
    conf: ConfOption = None,
    py_files: PyFilesOption = None,
    ship: ShipOption = True,
) -> None:
    """Print each query's plan; with --plot, draw its input events, windows
    and output events for a small sample (the first ROWS source rows, after
    WHERE, computed by the reference evaluator).

    [bold]Examples[/bold]

      udm-cli explain examples/demo.py

      udm-cli explain examples/hourly_median.yaml --plot median.png --where "sensor = 's1'"
    """
    from udm.host.query import Stream

    options = _spark_options(master, remote, conf, py_files, ship)
    _check_query_file(query_file)
    if plot is not None:
        check_plot_path(plot)
    console = make_console()
    spark = _spark(options, query_file)
    queries = _queries(query_file, spark)
    _ship_libraries(console, options, query_file, spark)
    for i, (name, query) in enumerate(queries.items()):
        console.print(f"[bold]{escape(name)}[/bold]", markup=True)
        if not isinstance(query, Stream):
            console.print("  (a DataFrame, not a udm Stream: nothing to explain)", markup=False)
            continue
        console.print(query.explain(), markup=False)
        if plot is not None:
            target = (
                plot if len(queries) == 1 else plot.with_name(f"{plot.stem}-{name}{plot.suffix}")
            )
            try:
                query.sample(rows, where).plot(target)
            except Exception as exc:
                from udm.host.spark.shipping import worker_import_problem

                why = worker_import_problem(str(exc)) or f"{type(exc).__name__}: {exc}"
                raise fail(f"cannot plot {name!r}: {why}") from None
            console.print(f"timeline of a {rows}-row sample written to {target}", markup=False)
        if i < len(queries) - 1:
            console.print("")


@app.command(short_help="Build the zip a cluster's executors need: udm, the UDM libraries.")
def package(
    output: Annotated[Path, typer.Option("--output", "-o", help="The zip to write.")] = Path(
        "udm-executors.zip"
    ),
) -> None:
    """Build one zip of what a Spark cluster's executors import to run udm
    queries: udm's engine (udm.sdk, udm.host), every installed UDM library
    and udm's pure-Python runtime (pluggy, sortedcontainers). Ship it with
    --py-files; numpy, pandas and pyarrow (compiled) must be on the
    executors, as PySpark's Arrow support needs them (docs/cluster.md).

    [bold]Examples[/bold]

      udm-cli package -o udm-executors.zip

      spark-submit --py-files udm-executors.zip --master spark://head:7077 job.py
    """
    from udm.cli.package import build_package

    if output.suffix != ".zip":
        raise fail(f"--output {output}: the package is a .zip file", code=2)
    built = build_package(output)
    size = output.stat().st_size
    console = make_console()
    console.print(
        f"wrote {output} ({size / 1e6:.1f} MB): {', '.join(built.contents)}", markup=False
    )
    for name, why in built.skipped.items():
        console.print(f"not included: {name} {why}", markup=False)
