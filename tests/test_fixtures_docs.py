"""docs/testing.md: its fixture files (docs/examples/fixtures/) run and say
what the page says; the failure reports it shows are the real output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.testing import Fixture, FixtureError, load_fixture, run_fixture

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "fixtures"
PAGE = (ROOT / "docs" / "testing.md").read_text()
PASSING = sorted(EXAMPLES.glob("*.udm.yaml"))


def console_blocks() -> list[str]:
    return re.findall(r"^```console\n(.*?)^```$", PAGE, re.MULTILINE | re.DOTALL)


def as_fixture(tmp_path: Path, name: str) -> Path:
    """A deliberately failing example copied under tmp_path as *.udm.yaml
    (the repository keeps it under another suffix so pytest skips it)."""
    target = tmp_path / f"{Path(name).stem}.udm.yaml"
    shutil.copy(EXAMPLES / "failing" / name, target)
    return target


def test_every_example_file_is_shown_on_the_page() -> None:
    files = sorted(
        p.relative_to(ROOT).as_posix()
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".py")
    )
    assert len(files) == 14
    shown = re.findall(r'^--8<-- "([^"]+)"$', PAGE, re.MULTILINE)
    assert sorted(shown) == files


@pytest.mark.parametrize("path", PASSING, ids=lambda p: p.name)
def test_every_tutorial_fixture_passes(path: Path) -> None:
    fixtures = load_fixture(path)
    assert fixtures
    for fixture in fixtures:
        result = run_fixture(fixture)
        assert result.passed, (fixture.title, result.failures)


def test_the_tutorial_has_seventeen_fixtures_and_generated_ones_draw_streams() -> None:
    loaded = [f for p in PASSING for f in load_fixture(p)]
    assert len(loaded) == 17
    fixtures = [f for f in loaded if isinstance(f, Fixture)]
    assert len(fixtures) == 14  # and three query fixtures
    generated = [f for f in fixtures if f.generate is not None]
    assert [f.name for f in generated] == [
        "median, short overlapping events, slightly out of order, speculated",
        "two sensors, the second shifted and highly disordered",
    ]
    # the full-size stream plus `examples` streams drawn by hypothesis
    assert [run_fixture(f).checked_streams for f in generated] == [6, 4]


def test_first_fixture_with_udm_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(
        app,
        ["test", "docs/examples/fixtures/first.udm.yaml", "--no-pytest"],
        env={"COLUMNS": "100"},
    )
    assert result.exit_code == 0, result.output
    shown = console_blocks()[0].splitlines()
    assert shown[0] == "$ udm-cli test docs/examples/fixtures/first.udm.yaml"
    assert [line.rstrip() for line in result.output.splitlines()] == [
        line.rstrip() for line in shown[1:]
    ]


def test_reading_a_failure_diff_and_plot(tmp_path: Path) -> None:
    fixture = as_fixture(tmp_path, "wrong_expected.yaml")
    png = tmp_path / "wrong.png"
    result = CliRunner().invoke(
        app, ["test", str(fixture), "--plot", str(png), "--no-pytest"], terminal_width=100
    )
    assert result.exit_code == 1
    shown = console_blocks()[1]
    for line in [
        "host differs from expected: 1 missing, 1 extra",
        "host (conservative) differs from expected: 1 missing, 1 extra",
        "reordered differs from expected: 1 missing, 1 extra",
        "reference differs from expected: 1 missing, 1 extra",
        "│ [0, 10)  3.0   │ [0, 10)  3.0  │",
        "│ [10, 20)  8.0  │ (missing)     │",
        "│ (not expected) │ [10, 20)  9.0 │",
    ]:
        assert line in result.output
        assert line in shown
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_generated_failure_shrinks_to_one_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    (fixture,) = load_fixture(as_fixture(tmp_path, "leaky_mean.yaml"))
    result = run_fixture(fixture)
    assert not result.passed
    assert result.failures == ["reordered differs from reference: 1 missing, 1 extra"]
    assert result.minimal is not None
    saved = result.minimal.splitlines()
    assert "  - {insert: e0, start: 1, end: 10, payload: 3}" in saved
    shown = console_blocks()[2]
    for line in saved:
        assert line.strip() in shown
    # saved as a fixture, the minimal stream fails the same way
    again = tmp_path / "regression.udm.yaml"
    again.write_text(result.minimal)
    (regression,) = load_fixture(again)
    rerun = run_fixture(regression)
    assert rerun.failures == [
        "reordered differs from expected: 1 missing, 1 extra",
    ]


def test_mistakes_are_listed_with_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = as_fixture(tmp_path, "mistakes.yaml")
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    got = str(info.value).replace(str(path), "mistakes.udm.yaml").splitlines()
    shown = console_blocks()[3].splitlines()
    assert got == shown[2:7]
    assert len(got) == 5
    # the whole output the page shows: the mistakes, then the file counted as invalid
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["test", "mistakes.udm.yaml"], env={"COLUMNS": "100"})
    assert result.exit_code == 1
    assert shown[0] == "$ udm-cli test mistakes.udm.yaml"
    assert [line.rstrip() for line in result.output.splitlines()] == shown[1:]
    assert shown[-1] == "0 passed, 0 failed, 1 invalid"


def run_pytest(path: Path, cwd: Path, columns: int) -> subprocess.CompletedProcess[str]:
    """pytest on ``path`` in a subprocess, as a user runs it (the plugin on)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": str(columns)},
        check=False,
    )


def test_the_pytest_run_the_page_shows(tmp_path: Path) -> None:
    """The plugin's output on the page counts every fixture of the examples."""
    run = run_pytest(EXAMPLES, cwd=ROOT, columns=80)
    assert run.returncode == 0, run.stdout + run.stderr
    (block,) = [b for b in console_blocks() if b.startswith("$ pytest docs/examples/fixtures -q")]
    shown = block.splitlines()
    got = run.stdout.splitlines()
    fixtures = sum(len(load_fixture(p)) for p in PASSING)
    assert re.fullmatch(rf"\.{{{fixtures}}} +\[100%\]", shown[1])
    assert shown[1] in got  # the progress line, one dot per fixture
    assert re.fullmatch(rf"{fixtures} passed in \d+\.\d+s", shown[2])
    assert any(re.fullmatch(rf"{fixtures} passed in \d+\.\d+s", line) for line in got)


def test_pytest_plugin_collects_and_reports(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "first.udm.yaml", tmp_path / "first.udm.yaml")
    as_fixture(tmp_path, "wrong_expected.yaml")
    run = run_pytest(tmp_path, cwd=tmp_path, columns=200)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout
    assert "FAIL wrong_expected.udm.yaml: a wrong expectation" in run.stdout
    assert "(missing)" in run.stdout
    # the short test summary line the page quotes
    summary = (
        "FAILED wrong_expected.udm.yaml::a wrong expectation - host differs from expected: "
        "1 missing, 1 extra (and 3 more)"
    )
    assert summary in run.stdout.splitlines()
    assert summary in " ".join(PAGE.split())


def test_a_fixture_under_another_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES / "failing")
    result = CliRunner().invoke(
        app, ["test", "wrong_expected.yaml", "--no-pytest"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1
    shown = (
        "error: wrong_expected.yaml is not a fixture file: fixture files are named "
        "*.udm.yaml; rename it to wrong_expected.udm.yaml"
    )
    assert result.output.splitlines() == [shown]
    assert shown in " ".join(PAGE.split())
