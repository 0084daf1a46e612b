"""``udm-cli test``: run fixture files and the project's pytest suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

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
    targets = paths or [Path(".")]
    extra_args = _checked_arguments(targets, plot, pytest_args)
    console = make_console(err=as_json)  # --json: stdout is the JSON alone
    files, results, invalid, why_invalid = _run_fixture_files(targets, console)
    failed = bool(invalid) or not all(r.passed for r in results)
    _report(results, invalid, plot, console)
    code: int | None = None
    python_targets = [p for p in targets if p.is_dir() or p.suffix == ".py"]
    if run_pytest and python_targets:
        code = _run_pytest(python_targets, extra_args, as_json, bool(files), targets)
        failed = failed or code != 0
    elif not files:
        raise fail(_nothing_to_run(targets))
    if as_json:
        typer.echo(json.dumps(views.test_json(results, invalid, why_invalid, code), indent=2))
    raise typer.Exit(1 if failed else 0)


def _checked_arguments(targets: list[Path], plot: Path | None, pytest_args: str) -> list[str]:
    """Refuse missing or misnamed targets and an unwritable --plot before
    any work; the extra pytest arguments, split as a shell would."""
    import shlex

    missing = [p for p in targets if not p.exists()]
    if missing:
        raise fail(f"no such file or directory: {', '.join(map(str, missing))}")
    misnamed = [p for p in targets if p.is_file() and not _test_file(p)]
    if misnamed:
        raise fail("\n".join(_not_a_fixture(p) for p in misnamed))
    if plot is not None:
        check_plot_path(plot)
    try:
        return shlex.split(pytest_args)
    except ValueError as exc:
        raise fail(
            f"--pytest-args {pytest_args!r}: {exc}; quote it as one shell string", 2
        ) from None


def _run_fixture_files(
    targets: list[Path], console: Console
) -> tuple[list[Path], list[Any], list[Any], list[str]]:
    """Load and run every fixture file under ``targets``: the files, the
    results, and what was invalid with why. Files that do not load and
    fixtures that cannot run are counted apart from failures, which are
    fixtures that ran and got a wrong answer."""
    from udm.testing import FixtureError, fixture_files, load_fixture, run_fixture

    files = fixture_files(list(targets))
    results: list[Any] = []
    invalid: list[Any] = []
    why_invalid: list[str] = []

    def refused(what: Any, exc: FixtureError) -> None:
        console.print(f"[red]invalid fixture[/red]\n{escape(str(exc))}", markup=True)
        invalid.append(what)
        why_invalid.append(str(exc))

    for path in files:
        try:
            fixtures = load_fixture(path)
        except FixtureError as exc:
            refused(path, exc)
            continue
        for fixture in fixtures:
            try:
                results.append(run_fixture(fixture))
            except FixtureError as exc:  # e.g. a retraction of an id never inserted
                refused(fixture, exc)
    return files, results, invalid, why_invalid


def _report(results: list[Any], invalid: list[Any], plot: Path | None, console: Console) -> None:
    """The summary table, each failure's diff (and minimal stream, saved),
    and the --plot timeline of the first failing (else first) fixture."""
    from udm.testing.report import NoPlot, plot_result, render_failure, render_summary

    if results or invalid:
        render_summary(results, console, invalid)
    if not results:
        if plot is not None and invalid:
            console.print(
                f"no timeline written to {plot}: no fixture ran (all invalid)", markup=False
            )
        return
    saved: dict[Path, int] = {}
    for result in results:
        if not result.passed:
            render_failure(result, console)
            if result.minimal:
                views.save_minimal(result, console, saved)
    if plot is None:
        return
    chosen = next((r for r in results if not r.passed), results[0])
    try:
        plot_result(chosen, plot)
    except OSError as exc:
        raise fail(f"cannot write --plot {plot}: {exc}") from None
    except NoPlot as exc:
        console.print(f"no timeline of {chosen.fixture.title}: {exc}", markup=False)
    else:
        console.print(f"timeline of {chosen.fixture.title} written to {plot}", markup=False)


def _run_pytest(
    python_targets: list[Path],
    extra_args: list[str],
    as_json: bool,
    had_fixtures: bool,
    targets: list[Path],
) -> int:
    """pytest over the Python targets: its exit code, 0 when it found no
    Python tests but fixtures ran (refused when there was nothing at all)."""
    # -p no:udm: the fixtures above already ran; do not collect them twice
    cmd = [sys.executable, "-m", "pytest", "-p", "no:udm", *map(str, python_targets)]
    code = subprocess.call([*cmd, *extra_args], stdout=sys.stderr if as_json else None)
    if code == 5:  # pytest collected no Python tests
        if not had_fixtures:
            raise fail(f"no *.udm.yaml fixtures or Python tests in {', '.join(map(str, targets))}")
        return 0  # fixtures only
    return code


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
