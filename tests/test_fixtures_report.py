"""Reading fixture results: the side-by-side diff (a multiset, times as the
file wrote them), --plot when there is no output, the pytest summary line, and
udm-cli test's refusal of a named file that is no fixture."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host.cht import Cht
from udm.sdk import IncrementalAggregate, Operator
from udm.testing import load_fixture, run_fixture
from udm.testing.report import diff_table, render_failure

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "f.udm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def lines(renderable: object, width: int = 120) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def cells(shown: list[str]) -> list[list[str]]:
    """The cells of a table's rows (header included), padding stripped."""
    return [
        [c.strip() for c in line[1:-1].replace("┃", "│").split("│")]
        for line in shown
        if line[:1] in ("│", "┃")
    ]


class Twice(Operator):
    """Outputs every payload twice (a duplicate-output bug)."""

    def compute_result(self, payloads: list[int]) -> list[int]:
        return [p for p in payloads for _ in range(2)]


class LeakyMean(IncrementalAggregate):
    """remove() forgets to decrement the count."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] - value, state[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


# ------------------------------------------------------------ the diff


def test_the_diff_counts_duplicate_rows() -> None:
    expected = Cht([(0, 10, 7), (0, 10, 8), (10, 20, 1)])
    actual = Cht([(0, 10, 8), (0, 10, 7), (0, 10, 7), (0, 10, 8), (0, 10, 8), (20, 30, 2)])
    assert lines(diff_table(expected, actual, 0.0, 0.0)) == [
        "       expected vs actual",
        "┏━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━┓",
        "┃ expected       ┃ actual      ┃",
        "┡━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━┩",
        "│ [0, 10)  7     │ [0, 10)  7  │",
        "│ [0, 10)  8     │ [0, 10)  8  │",
        "│ [10, 20)  1    │ (missing)   │",
        "│ (not expected) │ [0, 10)  7  │",
        "│ (not expected) │ [0, 10)  8  │",
        "│ (not expected) │ [0, 10)  8  │",
        "│ (not expected) │ [20, 30)  2 │",
        "└────────────────┴─────────────┘",
    ]


def test_a_fixture_with_duplicate_outputs_shows_its_matched_rows(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: test_fixtures_report:Twice
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 7}
          - {insert: b, start: 2, payload: 8}
        expected:
          - {start: 0, end: 10, payload: 7}
          - {start: 0, end: 10, payload: 8}
        """,
    )
    (f,) = load_fixture(path)
    result = run_fixture(f)
    assert result.failures[0] == "host differs from expected: 0 missing, 2 extra"
    shown = lines(_failure(result))
    assert shown[shown.index("┃ expected       ┃ host       ┃") + 2 :] == [
        "│ [0, 10)  7     │ [0, 10)  7 │",
        "│ [0, 10)  8     │ [0, 10)  8 │",
        "│ (not expected) │ [0, 10)  7 │",
        "│ (not expected) │ [0, 10)  8 │",
        "└────────────────┴────────────┘",
    ]


class _failure:
    """render_failure as a rich renderable, for :func:`lines`."""

    def __init__(self, result: object) -> None:
        self.result = result

    def __rich_console__(self, console: Console, options: object) -> list[str]:
        render_failure(self.result, console)  # type: ignore[arg-type]
        return []


def test_times_written_as_datetimes_are_shown_as_datetimes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: leaky mean over minutes
        udm: test_fixtures_report:LeakyMean
        window: {kind: tumbling, size: 1m}
        input:
          - {insert: a, start: 2024-05-01T12:00:00, end: 2024-05-01T12:00:30, payload: 10}
          - {insert: b, start: 2024-05-01T12:00:10, end: 2024-05-01T12:00:20, payload: 20}
          - {cti: 2024-05-01T12:02:00}
        expected:
          - {start: 2024-05-01T12:00:00, end: 2024-05-01T12:01:00, payload: 15.0}
        """,
    )
    (f,) = load_fixture(path)
    result = run_fixture(f)
    assert result.failures == [
        "reordered differs from expected: 1 missing, 1 extra",
        "declared invertible, but in window [1714564800000000, 1714564860000000) removing 10 "
        "gives 10.0 instead of 20.0",
    ]
    shown = lines(_failure(result), width=140)
    assert shown[1:5] == [
        f"FAIL f.udm.yaml: leaky mean over minutes  ({path}:1)",
        "  - reordered differs from expected: 1 missing, 1 extra",
        "  - declared invertible, but in window [2024-05-01T12:00:00Z, 2024-05-01T12:01:00Z) "
        "removing 10 gives 10.0 instead of 20.0",
        "expected vs reordered".center(len(shown[5])).rstrip(),
    ]
    assert cells(shown) == [
        ["expected", "reordered"],
        ["[2024-05-01T12:00:00Z, 2024-05-01T12:01:00Z)  15.0", "(missing)"],
        ["(not expected)", "[2024-05-01T12:00:00Z, 2024-05-01T12:01:00Z)  10.0"],
    ]
    # a fixture written in ticks is shown in ticks
    ticks = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 3}
        expected:
          - {start: 0, end: 10, payload: 4.0}
        """,
        "ticks.udm.yaml",
    )
    (g,) = load_fixture(ticks)
    shown = lines(_failure(run_fixture(g)))
    assert shown[-3:] == [
        "│ [0, 10)  4.0   │ (missing)    │",
        "│ (not expected) │ [0, 10)  3.0 │",
        "└────────────────┴──────────────┘",
    ]


# ------------------------------------------------------------ --plot


def test_plot_without_output_draws_or_says_why(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"COLUMNS": "300"}
    png = tmp_path / "t.png"
    # every way fails as expected_error says: the input and windows, no outputs
    errors = ROOT / "docs" / "examples" / "fixtures" / "errors.udm.yaml"
    ok = runner.invoke(app, ["test", str(errors), "--plot", str(png), "--no-pytest"], env=env)
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[-1] == (
        f"timeline of errors.udm.yaml: a mapping payload without field= is a clear error "
        f"written to {png}"
    )
    assert png.read_bytes()[:4] == b"\x89PNG"
    # an unknown UDM ran nothing: still drawn
    unknown = write(
        tmp_path,
        """\
        udm: stats.meen
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 2}
        expected: []
        """,
        "unknown.udm.yaml",
    )
    png.unlink()
    failed = runner.invoke(app, ["test", str(unknown), "--plot", str(png), "--no-pytest"], env=env)
    assert failed.exit_code == 1
    assert "Traceback" not in failed.output
    assert failed.output.splitlines()[-1] == f"timeline of unknown.udm.yaml written to {png}"
    assert png.read_bytes()[:4] == b"\x89PNG"
    # an invalid input stream makes the fixture invalid: it does not run,
    # its element is named file:line and nothing is drawn
    dup = write(
        tmp_path,
        """\
        udm: stats.median
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, end: 5, payload: 2}
          - {insert: a, start: 3, end: 5, payload: 6}
        expected: []
        """,
        "dup.udm.yaml",
    )
    png.unlink()
    skipped = runner.invoke(app, ["test", str(dup), "--plot", str(png), "--no-pytest"], env=env)
    assert skipped.exit_code == 1
    assert "Traceback" not in skipped.output
    assert f"{dup}:5: input.1: event id 'a' is already live with lifetime [1, 5)" in (
        skipped.output.replace("\n", "")
    )
    assert "0 passed, 0 failed, 1 invalid" in skipped.output
    assert skipped.output.splitlines()[-1] == (
        f"no timeline written to {png}: no fixture ran (all invalid)"
    )
    assert not png.exists()


# ------------------------------------------------------------ udm-cli test PATHS


def test_a_named_file_that_is_no_fixture_is_an_error(tmp_path: Path) -> None:
    good = ROOT / "docs" / "examples" / "fixtures" / "first.udm.yaml"
    misnamed = write(tmp_path, good.read_text(), "wrong.yaml")
    notes = write(tmp_path, "notes\n", "notes.txt")
    runner = CliRunner()
    env = {"COLUMNS": "300"}
    refused = runner.invoke(
        app, ["test", str(misnamed), str(good), str(notes), "--no-pytest"], env=env
    )
    assert refused.exit_code == 1
    assert refused.output.splitlines() == [
        f"error: {misnamed} is not a fixture file: fixture files are named *.udm.yaml; rename "
        "it to wrong.udm.yaml",
        f"{notes} is not a fixture or test file: udm-cli test takes fixture files (*.udm.yaml), "
        "Python test files (*.py) and directories",
    ]
    # a directory is searched for *.udm.yaml files only
    write(tmp_path, good.read_text(), "right.udm.yaml")
    searched = runner.invoke(app, ["test", str(tmp_path), "--no-pytest"], env=env)
    assert searched.exit_code == 0, searched.output
    assert searched.output.splitlines()[-1] == "1 passed, 0 failed"


# ------------------------------------------------------------ pytest


def test_the_pytest_summary_line_names_the_first_failure(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: wrong mean
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 3}
        expected:
          - {start: 0, end: 10, payload: 4.0}
        """,
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "FAILED f.udm.yaml::wrong mean - host differs from expected: 1 missing, 1 extra "
        "(and 3 more)"
    ) in run.stdout.splitlines()
