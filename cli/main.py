"""udm-cli entry point (typer).

Exit codes: 0 success; 1 a command failed (unknown UDM, failing tests,
libraries that could not be loaded with ``list --strict``, a directory that
already exists); 2 bad usage (typer's own code for wrong options).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="udm: user-defined temporal modules on Spark.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)

def _template() -> Path:
    """The cookiecutter template, from a checkout or an installed wheel."""
    from importlib.resources import files

    return Path(str(files("udm.templates") / "udm-package"))


def _console(err: bool = False) -> Console:
    return Console(stderr=err, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 1) -> typer.Exit:
    _console(err=True).print(f"[red]error:[/red] {message}", markup=True)
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


@app.callback()
def main() -> None:
    """udm: user-defined temporal modules on Spark."""


@app.command()
def version() -> None:
    """Print the udm version."""
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
    registry = _registry()
    entries = [e for e in registry.entries if library is None or e.library == library]
    failures = [f for f in registry.failures if library is None or f.library == library]
    if as_json:
        doc = {
            "udms": [e.as_dict() for e in entries],
            "failed": [f.as_dict() for f in failures],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        console = _console()
        table = Table(title="UDMs")
        for col in ("name", "kind", "flavor", "properties", "library", "version"):
            table.add_column(col, overflow="fold")
        for e in entries:
            table.add_row(
                e.name, e.kind, e.flavor, ", ".join(e.properties), e.library, e.version or "-"
            )
        console.print(table)
        for f in failures:
            dist = f" ({f.distribution} {f.version})" if f.distribution else ""
            console.print(f"[red]failed to load[/red] {f.library}{dist}: {f.error}", markup=True)
            console.print(f.traceback, markup=False)
    if strict and failures:
        raise typer.Exit(1)


@app.command()
def show(name: Annotated[str, typer.Argument(help="A UDM name such as stats.median.")]) -> None:
    """Show a UDM: flavor, signature, properties, docstring and where it comes from.

    [bold]Examples[/bold]

      udm-cli show stats.median

      udm-cli show stats.quantile
    """
    from udm.host.registry import UnknownUdmError

    registry = _registry()
    try:
        entry = registry.entry(name)
    except UnknownUdmError as exc:
        raise _fail(str(exc)) from None
    console = _console()
    console.print(f"[bold]{entry.name}[/bold]  ({entry.flavor})", markup=True)
    console.print(f"signature:  {entry.signature}", markup=False)
    console.print(f"properties: {', '.join(entry.properties) or '-'}", markup=False)
    dist = f"{entry.distribution} {entry.version}" if entry.distribution else "in-process"
    console.print(f"library:    {entry.library} ({dist})", markup=False)
    console.print(f"defined in: {entry.source}", markup=False)
    if entry.doc:
        console.print("")
        console.print(entry.doc, markup=False)
    if entry.kind != "function":
        verb = "aggregate" if entry.kind == "aggregate" else "apply"
        console.print("")
        console.print("example:", markup=False)
        console.print(
            f'  Stream.from_cht(events).tumbling_window(10).{verb}("{entry.name}")'
            '.to_cht(engine="reference")',
            markup=False,
        )


@app.command()
def test(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Fixture files, packages or test directories (default: .)."),
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

    from udm.host.fixtures import FixtureError, fixture_files, load_fixture, run_fixture
    from udm.host.fixtures.report import plot_result, render_failure, render_summary

    targets = paths or [Path(".")]
    missing = [p for p in targets if not p.exists()]
    if missing:
        raise _fail(f"no such file or directory: {', '.join(map(str, missing))}")
    console = _console()
    failed = False
    files = fixture_files(list(targets))
    results = []
    for path in files:
        try:
            fixtures = load_fixture(path)
        except FixtureError as exc:
            console.print(f"[red]invalid fixture[/red]\n{exc}", markup=True)
            failed = True
            continue
        for fixture in fixtures:
            results.append(run_fixture(fixture))
    if results:
        render_summary(results, console)
        for result in results:
            if not result.passed:
                render_failure(result, console)
        failed = failed or not all(r.passed for r in results)
        if plot is not None:
            chosen = next((r for r in results if not r.passed), results[0])
            plot_result(chosen, plot)
            console.print(f"timeline of {chosen.fixture.title} written to {plot}", markup=False)
    python_targets = [p for p in targets if p.is_dir() or p.suffix == ".py"]
    if run_pytest and python_targets:
        # -p no:udm: the fixtures above already ran; do not collect them twice
        cmd = [sys.executable, "-m", "pytest", "-p", "no:udm", *map(str, python_targets)]
        code = subprocess.call([*cmd, *shlex.split(pytest_args)])
        if code == 5 and results:  # no Python tests collected: fixtures only
            code = 0
        failed = failed or code != 0
    elif not results:
        raise _fail(f"no *.udm.yaml fixtures or Python tests in {', '.join(map(str, targets))}")
    raise typer.Exit(1 if failed else 0)


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="Library name (the UDM prefix), e.g. my_udms.")],
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
    import re

    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise _fail(
            f"library name {name!r} must be a lowercase Python identifier (letters, digits, _), "
            "e.g. my_udms"
        )
    from cookiecutter.exceptions import OutputDirExistsException
    from cookiecutter.main import cookiecutter

    context: dict[str, Any] = {"library": name}
    for key, val in (("description", description), ("author", author), ("version", version)):
        if val is not None:
            context[key] = val
    try:
        out = cookiecutter(
            str(_template()),
            no_input=no_input,
            extra_context=context,
            output_dir=str(output_dir),
            overwrite_if_exists=force,
        )
    except OutputDirExistsException as exc:
        raise _fail(f"{exc}; pass --force to overwrite or pick another --output-dir") from None
    typer.echo(out)
    _console(err=True).print(
        f"next: pip install -e {out} && udm-cli list && udm-cli test {out}/tests",
        markup=False,
    )
