"""Reading fixture results: the side-by-side diff counts duplicate rows."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

from rich.console import Console

from udm.host.cht import Cht
from udm.host.fixtures import load_fixture, run_fixture
from udm.host.fixtures.report import diff_table, render_failure
from udm.sdk import Operator


def write(tmp_path: Path, text: str, name: str = "f.udm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def lines(renderable: object, width: int = 120) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


class Twice(Operator):
    """Outputs every payload twice (a duplicate-output bug)."""

    def compute_result(self, payloads: list[int]) -> list[int]:
        return [p for p in payloads for _ in range(2)]


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
