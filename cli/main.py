"""udm-cli entry point (typer).

Exit codes: 0 success; 1 a command failed (unknown UDM, failing fixtures or
tests, an invalid fixture or query file, a query that failed on Spark,
libraries that could not be loaded with ``list --strict``, a directory that
already exists); 2 bad usage (typer's own code for wrong options).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from udm.cli import views
from udm.cli.cluster import (
    ConfOption,
    MasterOption,
    PyFilesOption,
    RemoteOption,
    ShipOption,
    is_stream,
)

app = typer.Typer(
    help="udm: user-defined temporal modules on Spark.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    add_completion=True,
)


views.quiet_flag_types()


def _template() -> Path:
    """The cookiecutter template, from a checkout or an installed wheel."""
    from importlib.resources import files

    return Path(str(files("udm.templates") / "udm-package"))


def _console(err: bool = False) -> Console:
    return Console(stderr=err, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 1) -> typer.Exit:
    # messages quote user text (file names, YAML keys, ids) that may look
    # like rich markup ("[min, max]", "[/oops]"): escape it
    _console(err=True).print(f"[red]error:[/red] {escape(message)}", markup=True)
    return typer.Exit(code)


def _registry() -> Any:
    import warnings

    from udm.host.registry import UdmPluginWarning, get_registry

    registry = get_registry()
    with warnings.catch_warnings():
        # list/show report failed libraries themselves, with tracebacks
        warnings.simplefilter("ignore", UdmPluginWarning)
        try:
            registry.load()
        except ValueError as exc:  # duplicate libraries or UDM names
            raise _fail(str(exc)) from None
    return registry


def _print_version(value: bool) -> None:
    if value:
        from udm.sdk import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the udm version and exit.",
        ),
    ] = False,
) -> None:
    """udm: user-defined temporal modules on Spark."""


@app.command()
def version() -> None:
    """Print the udm version.

    [bold]Examples[/bold]

      udm-cli version
    """
    from udm.sdk import __version__

    typer.echo(__version__)


@app.command("list")
def list_udms(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    library: Annotated[
        str | None, typer.Option("--library", "-l", help="Only this library's UDMs.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if any library failed to load.")
    ] = False,
) -> None:
    """List the UDMs of every installed library, and libraries that failed to load.

    [bold]Examples[/bold]

      udm-cli list

      udm-cli list --library stats --json
    """
    import difflib

    registry = _registry()
    entries = [e for e in registry.entries if library is None or e.library == library]
    failures = [f for f in registry.failures if library is None or f.library == library]
    if library is not None and not entries and not failures:
        known = sorted(
            {e.library for e in registry.entries} | {f.library for f in registry.failures}
        )
        close = difflib.get_close_matches(library, known, n=3) or known
        raise _fail(
            f"no library {library!r} is installed; installed: {', '.join(known) or 'none'}"
            + (f" (did you mean {', '.join(close)}?)" if close and close != known else "")
        )
    if as_json:
        doc = {
            "udms": [e.as_dict() for e in entries],
            "failed": [f.as_dict() for f in failures],
        }
        typer.echo(json.dumps(doc, indent=2))
    elif _too_narrow(_console(), entries):
        _stacked(_console(), entries, failures)
    else:
        console = _console()
        table = Table(title="UDMs")
        # names are what users copy: never wrapped, nor the other single
        # words; a narrow terminal wraps the flavor and the properties
        for col in ("name", "kind", "flavor", "properties", "library", "version"):
            if col in ("flavor", "properties"):
                table.add_column(col, overflow="fold")
            else:
                widest = max((len(getattr(e, col) or "-") for e in entries), default=0)
                table.add_column(col, no_wrap=True, min_width=max(widest, len(col)))
        for e in entries:
            cells = (e.name, e.kind, e.flavor, ", ".join(e.properties), e.library, e.version or "-")
            table.add_row(*(Text(c) for c in cells))  # Text: no markup in names
        if not console.is_terminal and "COLUMNS" not in os.environ:
            # piped or redirected: one line per UDM, whatever its length
            wide = console.measure(table, options=console.options.update_width(10_000))
            console.width = max(console.width, wide.maximum)
        console.print(table)
        _print_failures(console, failures)
    if strict and failures:
        raise typer.Exit(1)


#: the narrowest flavor and properties columns worth a table
_WRAPPED_MIN = 22


def _too_narrow(console: Any, entries: list[Any]) -> bool:
    """Whether the table would squeeze the flavor and properties columns
    below readable width (a word a column, broken mid-word): a terminal
    that narrow gets :func:`_stacked` instead. Piped output is never."""
    if not console.is_terminal and "COLUMNS" not in os.environ:
        return False
    fixed = sum(
        max((len(getattr(e, col) or "-") for e in entries), default=0)
        for col in ("name", "kind", "library", "version")
    )
    return console.width < fixed + 2 * _WRAPPED_MIN + 3 * 6 + 1  # cells' padding, borders


def _stacked(console: Any, entries: list[Any], failures: list[Any]) -> None:
    """``list`` for a narrow terminal: a UDM's name, kind, library and
    version on one line (never broken), its flavor and properties below,
    wrapped between words."""
    import textwrap

    console.print("UDMs", markup=False)
    for e in entries:
        console.print(f"{e.name}  {e.kind}  {e.library} {e.version or '-'}", markup=False)
        detail = e.flavor + (f"; {', '.join(e.properties)}" if e.properties else "")
        indent = " " * 4
        wrapped = textwrap.fill(
            detail,
            width=max(console.width, 20),
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        console.print(wrapped, markup=False)
    _print_failures(console, failures)


def _print_failures(console: Any, failures: list[Any]) -> None:
    for f in failures:
        dist = f" ({f.distribution} {f.version})" if f.distribution else ""
        console.print(
            f"[red]failed to load[/red] {escape(f'{f.library}{dist}: {f.error}')}",
            markup=True,
        )
        if f.traceback:
            console.print(f.traceback, markup=False)


@app.command()
@app.command("inspect", hidden=True)  # the verb users reach for first
def show(
    name: Annotated[str, typer.Argument(help="A UDM name such as stats.median.", metavar="NAME")],
) -> None:
    """Show a UDM: flavor, signature, properties, docstring and where it comes from.

    [bold]Examples[/bold]

      udm-cli show stats.median

      udm-cli show stats.quantile
    """
    from udm.host.registry import DuplicateUdmError, UnknownUdmError

    registry = _registry()
    try:
        entry = registry.entry(name)
    except (UnknownUdmError, DuplicateUdmError) as exc:
        raise _fail(str(exc)) from None
    console = _console()
    console.print(f"[bold]{escape(entry.name)}[/bold]  ({escape(entry.flavor)})", markup=True)
    console.print(f"signature:  {entry.signature}", markup=False)
    console.print(f"properties: {', '.join(entry.properties) or '-'}", markup=False)
    dist = f"{entry.distribution} {entry.version}" if entry.distribution else "in-process"
    console.print(f"library:    {entry.library} ({dist})", markup=False)
    console.print(f"defined in: {entry.source}", markup=False)
    if entry.doc:
        console.print("")
        console.print(entry.doc, markup=False)
    console.print("")
    console.print("example:", markup=False)
    if entry.kind == "function":
        call = ", ".join(f'p["{p}"]' for p in _udf_params(registry.resolve(entry.name)))
        console.print(
            f"  from udm.host.registry import get_registry\n"
            f'  {entry.name.split(".")[-1]} = get_registry().resolve("{entry.name}")\n'
            f"  stream.select(out=lambda p: {entry.name.split('.')[-1]}({call}))",
            markup=False,
        )
    else:
        verb = "aggregate" if entry.kind == "aggregate" else "apply"
        required = entry.required_arguments()
        args = "".join(f", {p}=<{p}>" for p in required)
        console.print(
            f'  Stream.from_cht(events).tumbling_window(10).{verb}("{entry.name}"{args})'
            '.to_cht(engine="reference")',
            markup=False,
        )
        if required:
            console.print(
                f"  (replace the <...> placeholders: {', '.join(required)} "
                f"{'has' if len(required) == 1 else 'have'} no default)",
                markup=False,
            )


def _udf_params(udf: Any) -> list[str]:
    """The names of a UDF's positional parameters (for a usage example)."""
    import inspect

    try:
        params = inspect.signature(udf).parameters.values()
    except (TypeError, ValueError):
        return ["value"]
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds] or ["value"]


@app.command()
def test(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Fixture files, packages or test directories (default: .).",
            metavar="PATHS",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Draw the first failing (else the first) fixture's timeline here."
        ),
    ] = None,
    run_pytest: Annotated[
        bool, typer.Option("--pytest/--no-pytest", help="Also run the Python tests in PATHS.")
    ] = True,
    pytest_args: Annotated[
        str, typer.Option("--pytest-args", help="Extra pytest arguments, quoted.")
    ] = "",
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the results as JSON on stdout (for CI); the report goes to stderr.",
        ),
    ] = False,
) -> None:
    """Run windowed fixtures (*.udm.yaml) and a package's pytest tests.

    Each fixture runs several ways that must agree (incremental host,
    speculative and conservative, a reordered stream, the reference
    evaluator); a failure prints a side-by-side diff, and for generated
    scenarios the minimal failing stream as a fixture. Python tests under
    PATHS run with pytest. Exit code 0 only if everything passed.

    [bold]Examples[/bold]

      udm-cli test

      udm-cli test fixtures/median.udm.yaml --plot median.png

      udm-cli test my-udms --pytest-args "-x -q"
    """
    import shlex

    from udm.host.fixtures import (
        Fixture,
        FixtureError,
        fixture_files,
        load_fixture,
        run_fixture,
    )
    from udm.host.fixtures.report import NoPlot, plot_result, render_failure, render_summary

    targets = paths or [Path(".")]
    missing = [p for p in targets if not p.exists()]
    if missing:
        raise _fail(f"no such file or directory: {', '.join(map(str, missing))}")
    misnamed = [p for p in targets if p.is_file() and not _test_file(p)]
    if misnamed:
        raise _fail("\n".join(_not_a_fixture(p) for p in misnamed))
    if plot is not None:
        _check_plot_path(plot)
    try:
        extra_args = shlex.split(pytest_args)
    except ValueError as exc:
        raise _fail(
            f"--pytest-args {pytest_args!r}: {exc}; quote it as one shell string", 2
        ) from None
    console = _console(err=as_json)  # --json: stdout is the JSON alone
    files = fixture_files(list(targets))
    results = []
    # files that do not load and fixtures that cannot run: counted apart
    # from failures, which are fixtures that ran and got a wrong answer
    invalid: list[Path | Fixture] = []
    why_invalid: list[str] = []
    for path in files:
        try:
            fixtures = load_fixture(path)
        except FixtureError as exc:
            console.print(f"[red]invalid fixture[/red]\n{escape(str(exc))}", markup=True)
            invalid.append(path)
            why_invalid.append(str(exc))
            continue
        for fixture in fixtures:
            try:
                results.append(run_fixture(fixture))
            except FixtureError as exc:  # e.g. a retraction of an id never inserted
                console.print(f"[red]invalid fixture[/red]\n{escape(str(exc))}", markup=True)
                invalid.append(fixture)
                why_invalid.append(str(exc))
    failed = bool(invalid)
    if results or invalid:
        render_summary(results, console, invalid)
    if results:
        saved: dict[Path, int] = {}
        for result in results:
            if not result.passed:
                render_failure(result, console)
                if result.minimal:
                    views.save_minimal(result, console, saved)
        failed = failed or not all(r.passed for r in results)
        if plot is not None:
            chosen = next((r for r in results if not r.passed), results[0])
            try:
                plot_result(chosen, plot)
            except OSError as exc:
                raise _fail(f"cannot write --plot {plot}: {exc}") from None
            except NoPlot as exc:
                console.print(f"no timeline of {chosen.fixture.title}: {exc}", markup=False)
            else:
                console.print(f"timeline of {chosen.fixture.title} written to {plot}", markup=False)
    elif plot is not None and invalid:
        console.print(f"no timeline written to {plot}: no fixture ran (all invalid)", markup=False)
    python_targets = [p for p in targets if p.is_dir() or p.suffix == ".py"]
    code: int | None = None
    if run_pytest and python_targets:
        # -p no:udm: the fixtures above already ran; do not collect them twice
        cmd = [sys.executable, "-m", "pytest", "-p", "no:udm", *map(str, python_targets)]
        code = subprocess.call([*cmd, *extra_args], stdout=sys.stderr if as_json else None)
        if code == 5:  # pytest collected no Python tests
            if not files:
                raise _fail(
                    f"no *.udm.yaml fixtures or Python tests in {', '.join(map(str, targets))}"
                )
            code = 0  # fixtures only
        failed = failed or code != 0
    elif not files:
        raise _fail(_nothing_to_run(targets))
    if as_json:
        typer.echo(json.dumps(views.test_json(results, invalid, why_invalid, code), indent=2))
    raise typer.Exit(1 if failed else 0)


def _nothing_to_run(targets: list[Path]) -> str:
    """Why ``test --no-pytest`` found nothing to run in ``targets``."""
    py_files = [p for p in targets if p.suffix == ".py"]
    if py_files and len(py_files) == len(targets):
        names = ", ".join(map(str, py_files))
        what = "is a Python test file" if len(py_files) == 1 else "are Python test files"
        return (
            f"nothing to run: {names} {what}, skipped because of --no-pytest "
            "(drop --no-pytest to run Python tests)"
        )
    return (
        f"no *.udm.yaml fixtures in {', '.join(map(str, targets))} "
        "(Python tests were skipped because of --no-pytest)"
    )


@app.command(
    short_help="Create a UDM package from the template (entry point, example UDA and UDO, tests)."
)
def new(
    name: Annotated[
        str, typer.Argument(help="Library name (the UDM prefix), e.g. my_udms.", metavar="NAME")
    ],
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Where to create the package.")
    ] = Path("."),
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Do not prompt; use defaults and options.")
    ] = False,
    description: Annotated[
        str | None, typer.Option(help="One-line description of the package.")
    ] = None,
    author: Annotated[str | None, typer.Option(help="Author name.")] = None,
    version: Annotated[str | None, typer.Option(help="Initial version.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing directory.")] = False,
) -> None:
    """Create a UDM package from the template: pyproject with the udm entry
    point, an example UDA and UDO, tests, README and ruff config.

    [bold]Examples[/bold]

      udm-cli new my_udms --no-input

      udm-cli new sensors --output-dir ~/src --author "Ada" --no-input
    """
    import json
    import keyword
    import re

    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise _fail(
            f"library name {name!r} must be a lowercase Python identifier (letters, digits, _) "
            "that is not a Python keyword, e.g. my_udms"
        )
    distribution = name.replace("_", "-") if "_" in name else f"{name}-udms"
    taken = _name_taken(name, output_dir / distribution)
    if taken:
        raise _fail(f"library name {name!r} {taken}; pick another name, e.g. {name}_udms")
    if output_dir.exists() and not output_dir.is_dir():
        raise _fail(f"--output-dir {output_dir} is a file, not a folder; name a folder", 2)
    from cookiecutter.exceptions import OutputDirExistsException
    from cookiecutter.main import cookiecutter

    defaults = json.loads((_template() / "cookiecutter.json").read_text())
    context: dict[str, Any] = {"library": name}
    for key, val in (("description", description), ("author", author), ("version", version)):
        if val is None and not no_input:  # the name is the argument: ask only for the rest
            # an answer that is refused is asked for again, with the reason
            val = typer.prompt(
                key.capitalize(), default=defaults[key], value_proc=_answer_check(key)
            )
        elif val is not None:
            problem = _template_value_problem(key, val)
            if problem:
                raise _fail(f"--{key} {val!r}: {problem}", 2)
        if val is not None:
            # cookiecutter renders every value as a Jinja template: a "{" of
            # the user's text must stay a "{"
            context[key] = val.strip().replace("{", "{{ '{' }}")
    try:
        out = cookiecutter(
            str(_template()),
            no_input=True,
            extra_context=context,
            output_dir=str(output_dir),
            overwrite_if_exists=force,
        )
    except OutputDirExistsException as exc:
        reason = str(exc).removeprefix("Error: ")
        raise _fail(f"{reason}; pass --force to overwrite or pick another --output-dir") from None
    typer.echo(out)
    _console(err=True).print(
        f"next: pip install -e {out} && udm-cli list && udm-cli test {out}\n"
        "(in this environment, where udm is installed: the package depends on udm, "
        "and the PyPI project named udm is an unrelated one)",
        markup=False,
    )


def _name_taken(name: str, target: Path) -> str | None:
    """Why a scaffolded package named ``name`` (its module and its library,
    created in ``target``) could not work here, or None: its module would
    shadow or be shadowed by an importable one (``udm``, ``json``), or its
    library name is already an installed library's (``stats``). Its own
    earlier copy in ``target`` (``--force``) is no clash."""
    import importlib.util
    import sys

    clash = "which the package's module would clash with"
    if name in sys.stdlib_module_names:
        return f"is the name of a module of Python's standard library, {clash}"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        places = [spec.origin, *(spec.submodule_search_locations or [])]
        found = [Path(p).resolve() for p in places if p and Path(p).exists()]
        if not any(p.is_relative_to(target.resolve()) for p in found):
            at = f" (at {found[0]})" if found else ""
            return f"is the name of a module that is already importable here{at}, {clash}"
        return None  # this package itself, installed from target
    registry = _registry()
    libraries = {e.library: e.distribution for e in registry.entries}
    libraries |= {f.library: f.distribution for f in registry.failures}
    if name in libraries:
        dist = libraries[name]
        return f"is already an installed UDM library's name ({dist or 'registered in-process'})"
    return None


#: PEP 440's version pattern (its appendix), which pip and setuptools follow
_PEP440 = r"""
    v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_\.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_\.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_\.]?(?P<post_l>post|rev|r)[-_\.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_\.]?(?P<dev_l>dev)[-_\.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?
"""


def _template_value_problem(key: str, value: str) -> str | None:
    """Why ``udm-cli new`` refuses a description, author or version, or None."""
    import re

    text = value.strip()
    if not text:
        return "is empty"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        return "must be one line of text, without control characters"
    if key == "version" and not re.fullmatch(_PEP440, text, re.VERBOSE | re.IGNORECASE):
        return (
            "is not a PEP 440 version, which pip needs to install the package; "
            "use e.g. 0.1.0, 1.0rc1 or 2024.5.1"
        )
    return None


def _answer_check(key: str) -> Any:
    """A typer.prompt value_proc that asks again for a refused answer."""

    def check(value: str) -> str:
        problem = _template_value_problem(key, value)
        if problem:
            raise typer.BadParameter(f"{key} {problem}")
        return value

    return check


PLOT_FORMATS = (".png", ".svg", ".pdf")


def _test_file(path: Path) -> bool:
    """A file ``udm-cli test`` runs: a fixture, or Python tests for pytest."""
    return path.name.endswith(".udm.yaml") or path.suffix == ".py"


def _not_a_fixture(path: Path) -> str:
    """Why a file named on the command line is refused, and what to do: a
    fixture under another name would otherwise be skipped without a word."""
    if path.suffix in (".yaml", ".yml"):
        stem = path.name.removesuffix(path.suffix).removesuffix(".udm")
        return (
            f"{path} is not a fixture file: fixture files are named *.udm.yaml; "
            f"rename it to {stem}.udm.yaml"
        )
    return (
        f"{path} is not a fixture or test file: udm-cli test takes fixture files "
        "(*.udm.yaml), Python test files (*.py) and directories"
    )


def _check_plot_path(plot: Path) -> None:
    """Refuse a --plot target that cannot be written before any work."""
    if plot.suffix.lower() not in PLOT_FORMATS:
        raise _fail(f"--plot {plot}: use a file ending in {', '.join(PLOT_FORMATS)}", 2)
    folder = plot.parent if str(plot.parent) else Path(".")
    if not folder.is_dir():
        raise _fail(f"--plot {plot}: folder {folder} does not exist")


# ---------------------------------------------------------------- Spark queries


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
        raise _fail(str(exc)) from None
    options.shipped = ship_folder(spark, query_file, options)
    return spark


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
        raise _fail(str(exc), code=2) from None


def _ship_libraries(console: Console, options: Any, query_file: Path, spark: Any) -> None:
    """Ship the UDM libraries the queries use by name and say what went."""
    from udm.cli.cluster import describe, ship_libraries

    if spark is None:  # --engine local: nothing runs on executors
        return
    shipment = options.shipped
    shipment.merge(ship_libraries(spark, query_file, options))
    for line in describe(shipment, query_file):
        console.print(line, markup=False, style="dim")


def _check_query_file(query_file: Path) -> None:
    """What can be checked before Spark starts (which takes seconds)."""
    from udm.cli.queryfile import QueryFileError, check_query_file

    try:
        check_query_file(query_file)
    except QueryFileError as exc:
        raise _fail(str(exc)) from None


def _queries(query_file: Path, spark: Any) -> dict[str, Any]:
    from udm.cli.queryfile import QueryFileError, load_queries

    try:
        return load_queries(query_file, spark)
    except QueryFileError as exc:
        raise _fail(str(exc)) from None


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
    from udm.cli.queryfile import in_spec_words, literal_path
    from udm.cli.timings import Profile

    if engine == "spark":
        from udm.host.spark.output import read_result, write_result

    if fmt not in ("parquet", "csv", "json"):
        raise _fail(f"unknown --format {fmt!r}; use parquet, csv or json", code=2)
    if times not in ("iso", "ticks"):
        raise _fail(f"unknown --times {times!r}; use iso or ticks", code=2)
    if engine not in ("spark", "local"):
        raise _fail(f"unknown --engine {engine!r}; use spark or local", code=2)
    local = engine == "local"
    options = _spark_options(master, remote, conf, py_files, ship)
    _check_query_file(query_file)
    console = _console(err=as_json)  # --json: stdout is the JSON alone
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
                raise _fail(f"{query_file}: query {name!r}: {problem}")
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
                if verbose:
                    import traceback

                    spark_error = getattr(exc, "spark_error", exc)
                    traceback.print_exception(spark_error, file=sys.stderr)
                message = _spark_message(exc)
                if query_file.suffix in (".yaml", ".yml"):
                    message = in_spec_words(message, query_file)
                raise _fail(f"query {name!r} failed: {message}") from None
            # (a Spark Connect DataFrame answers any attribute with a Column)
            metrics = query.metrics if is_stream(query) else None
            drops, read = None, None
            if metrics is not None:
                # reported below, with the output: not also as a log warning
                metrics._logged = True
                drops = metrics.invalid_rows(wait=True)
                read = metrics.rows_read(wait=True)
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
        if drops:
            why = ", ".join(f"{n:,} {reason}" for reason, n in drops.items())
            dropped = sum(drops.values())
            of = f" of {read:,}" if read else ""
            console.print(f"dropped {dropped:,}{of} input rows as invalid: {why}", markup=False)
            problem = views.too_many_dropped(dropped, read, max_dropped)
            if problem:
                too_many.append(f"query {name!r}: {problem}")
        report.append(
            {
                "name": name,
                "path": str(path),
                "format": fmt,
                "times": times,
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
        raise _fail("\n".join(too_many))
    for line in timings.lines() if profile else []:
        console.print(line, markup=False)
    console.print(f"done in {time.perf_counter() - started:.1f} s", markup=False)


def _spark_message(exc: Exception) -> str:
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
        _check_plot_path(plot)
    console = _console()
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
                raise _fail(f"cannot plot {name!r}: {why}") from None
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
        raise _fail(f"--output {output}: the package is a .zip file", code=2)
    built = build_package(output)
    size = output.stat().st_size
    console = _console()
    console.print(
        f"wrote {output} ({size / 1e6:.1f} MB): {', '.join(built.contents)}", markup=False
    )
    for name, why in built.skipped.items():
        console.print(f"not included: {name} {why}", markup=False)
