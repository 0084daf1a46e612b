"""Every code example of the documentation and the README runs, and says what it shows.

The documentation includes its examples from docs/examples/*.py (pymdownx.snippets);
each file ends with hand-computed asserts, so running it checks the documented
results. The README shows examples/first_uda.py verbatim, with its output.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from udm.host import Cht, cht_equal

ROOT = Path(__file__).resolve().parent.parent
DOC_EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)
S = 1_000_000


def fenced_blocks(text: str, language: str) -> list[str]:
    """The contents of the ```language fenced blocks of a Markdown text."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def run_script(path: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, f"{path.name} failed:\n{result.stderr}"
    return result.stdout


def test_there_are_doc_examples() -> None:
    assert len(DOC_EXAMPLES) >= 20


@pytest.mark.parametrize(
    "path", [p for p in DOC_EXAMPLES if not p.name.startswith("spark_")], ids=lambda p: p.name
)
def test_doc_example_runs(path: Path) -> None:
    runpy.run_path(str(path), run_name="__main__")


@pytest.mark.spark
@pytest.mark.parametrize(
    "path", [p for p in DOC_EXAMPLES if p.name.startswith("spark_")], ids=lambda p: p.name
)
def test_spark_doc_example_runs(path: Path, spark: Any) -> None:
    """Examples named spark_*.py get the shared session from getOrCreate()."""
    runpy.run_path(str(path), run_name="__main__")


def test_every_doc_example_is_shown_and_every_snippet_exists() -> None:
    included = set()
    for page in (ROOT / "docs").glob("*.md"):
        for target in SNIPPET.findall(page.read_text()):
            assert (ROOT / target).is_file(), f"{page.name} includes missing {target}"
            included.add(ROOT / target)
    orphans = [p.name for p in DOC_EXAMPLES if p not in included]
    assert orphans == [], f"examples no page includes: {orphans}"


def test_readme_shows_first_uda_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "first_uda.py").read_text()
    assert fenced_blocks(readme, "python")[0] == source


def test_first_uda_prints_what_readme_and_getting_started_show() -> None:
    stdout = run_script(ROOT / "examples" / "first_uda.py")
    assert stdout == "[0, 5) median=21.0\n[5, 10) median=25.5\n"
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        assert fenced_blocks(page.read_text(), "text")[0] == stdout, page.name


def in_process_results() -> tuple[dict[str, Any], dict[str, dict[Any, Cht]]]:
    demo = runpy.run_path(str(ROOT / "examples" / "in_process.py"), run_name="demo")
    stream = demo["sensor_stream"]()
    cht, stats = demo["host"].derive_cht(stream, cti_policy="adjust")
    assert len(cht) == 17  # 6 + 6 + 5 readings; the glitch replaced, the late one dropped
    assert stats.dropped_inserts == 1 and stats.adjusted == 0
    return demo, demo["queries"](cht, 60 * S)


def close(actual: Cht, expected: list[tuple[int, int, Any]]) -> bool:
    """Equal within float rounding; ``expected`` lifetimes are in seconds."""
    return cht_equal(actual, Cht((a * S, b * S, v) for a, b, v in expected), rel_tol=1e-12)


def test_in_process_results_are_the_hand_computed_ones() -> None:
    _, results = in_process_results()
    median, mean, twa, last3, snapshot = results.values()
    assert close(median["s1"], [(0, 20, 20.75), (20, 40, 22.5), (40, 60, 20.75)])
    # s2's glitch 35.0 at 30 s was replaced by 19.2
    assert close(median["s2"], [(0, 20, 18.25), (20, 40, 19.1), (40, 60, 19.75)])
    # s3's last reading was cut to [40 s, 45 s)
    assert close(median["s3"], [(0, 20, 24.5), (20, 40, 26.75), (40, 60, 26.0)])
    # hopping windows [10k s, 10k s + 20 s) from k = -1 to the last one ending by 60 s
    assert close(
        mean["s2"],
        [
            (-10, 10, 18.0),
            (0, 20, 18.25),
            (10, 30, 18.75),
            (20, 40, 19.1),
            (30, 50, 19.35),
            (40, 60, 19.75),
        ],
    )
    # full clipping: [0 s, 15 s) holds 20.0 for 10 s and 21.5 for 5 s
    assert close(
        twa["s1"],
        [
            (0, 15, (20.0 * 10 + 21.5 * 5) / 15),
            (15, 30, (21.5 * 5 + 23.0 * 10) / 15),
            (30, 45, (22.0 * 10 + 21.0 * 5) / 15),
            (45, 60, (21.0 * 5 + 20.5 * 10) / 15),
        ],
    )
    # s3 has no reading in [45 s, 60 s): no output for that window
    assert close(
        twa["s3"],
        [
            (0, 15, (25.0 * 10 + 24.0 * 5) / 15),
            (15, 30, (24.0 * 5 + 26.5 * 10) / 15),
            (30, 45, (27.0 * 10 + 26.0 * 5) / 15),
        ],
    )
    # count by start, 3 readings: a point (one tick) on the third reading's start
    assert cht_equal(
        last3["s3"],
        Cht(
            [
                (20 * S, 20 * S + 1, (25.0 + 24.0 + 26.5) / 3),
                (30 * S, 30 * S + 1, (24.0 + 26.5 + 27.0) / 3),
                (40 * S, 40 * S + 1, (26.5 + 27.0 + 26.0) / 3),
            ]
        ),
        rel_tol=1e-12,
    )
    windows = list(pairwise([0, 10, 20, 30, 40, 45, 50, 60]))
    counts = [3, 3, 3, 3, 3, 2, 2]
    spreads = [25 - 18, 24 - 18.5, 26.5 - 19, 27 - 19.2, 26 - 19.5, 21 - 19.5, 20.5 - 20]
    rows = list(zip(windows, counts, spreads, strict=True))
    assert close(snapshot["readings"], [(a, b, n) for (a, b), n, _ in rows])
    assert close(snapshot["spread"], [(a, b, v) for (a, b), _, v in rows])


def test_in_process_example_prints_its_tables() -> None:
    stdout = run_script(ROOT / "examples" / "in_process.py")
    assert stdout.startswith(
        "Physical stream: 24 elements -> CHT of 17 events; "
        "CTI policy 'adjust' dropped 1 late insert(s).\n"
    )
    assert "│ [0s, 20s)       │ 20.75 │ 18.25 │ 24.50 │" in stdout
    assert "│ [-10s, 10s)     │ 20.00 │ 18.00 │ 25.00 │" in stdout
    assert "│ point 50s       │ 21.17 │ 19.57 │     - │" in stdout
    assert "│ [45s, 50s)      │        2 │   1.50 │" in stdout
    assert stdout.endswith("Only windows ending by the last CTI (60s) are output.\n")
    assert run_script(ROOT / "examples" / "in_process.py") == stdout  # deterministic


def _markdown_tables_are_whole(text: str) -> list[str]:
    """Lines that look like table rows but follow a paragraph line: a table
    broken by a merge renders them as text."""
    lines = text.splitlines()
    return [
        f"line {n + 1}: {line}"
        for n, (before, line) in enumerate(pairwise(["", *lines]))
        if line.startswith("|") and before.strip() and not before.startswith("|")
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_tables_are_not_broken(path: Path) -> None:
    assert _markdown_tables_are_whole(path.read_text()) == []


def test_cli_reference_table_names_real_commands_and_options() -> None:
    """docs/cli.md's command table lists every command once, and every
    option it shows exists in that command's --help."""
    from typer.testing import CliRunner

    from udm.cli.main import app

    text = (ROOT / "docs" / "cli.md").read_text()
    rows = re.findall(r"^\| `udm-cli (\w+)([^`]*)`", text, re.MULTILINE)
    commands = [name for name, _ in rows]
    assert len(commands) == len(set(commands)), commands
    runner = CliRunner()
    for name, usage in rows:
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0, name
        for option in re.findall(r"--[a-z-]+", usage):
            assert option in result.output, f"udm-cli {name}: {option} is not an option"
