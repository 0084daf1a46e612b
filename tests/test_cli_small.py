"""The small things users of Spark and pandas expect from udm-cli (issue #29)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app

runner = CliRunner()


def test_version_flag() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == "0.1.0"


@pytest.mark.parametrize("command", ["run", "test", "list", "explain", "new", "show"])
def test_help_has_no_type_noise(command: str) -> None:
    """Flags read `--verbose <bool>` and arguments `<list[Path]>`."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for noise in ("<bool>", "<list[", "<path>  A Python"):
        assert noise not in result.output


def test_source_format_from_the_extension(tmp_path: Path) -> None:
    from udm.cli.queryfile import infer_format

    (tmp_path / "a.csv").write_text("ts\n1\n")
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "part-0.json").write_text("{}\n")
    (folder / "_SUCCESS").write_text("")
    assert infer_format(tmp_path / "a.csv") == "csv"
    assert infer_format(tmp_path / "x.JSONL") == "json"
    assert infer_format(folder) == "json"
    assert infer_format(tmp_path / "data") == "parquet"


@pytest.mark.spark
def test_a_csv_source_without_format_is_read_as_csv(spark: Any, tmp_path: Path) -> None:
    """q.yaml:7: aggregate: An error occurred while calling o41.load (Spark
    tried Parquet)."""
    (tmp_path / "r.csv").write_text("ts,v\n1,1.0\n2,3.0\n")
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts}\nwindow: {kind: tumbling, size: 10}\n"
        "aggregate: stats.mean\nvalue: v\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(spec), "-o", str(out), "--preview", "0"])
    assert result.exit_code == 0, result.output
    assert "calling o" not in result.output
    assert [tuple(r) for r in spark.read.parquet(str(out / "q")).collect()] == [(0, 10, 2.0)]


def test_fixture_reports_show_durations_as_written(tmp_path: Path) -> None:
    """The summary showed size=60000000 for `size: 1m`."""
    fixture = tmp_path / "m.udm.yaml"
    fixture.write_text(
        "udm: stats.mean\nwindow: {kind: hopping, size: 1m, hop: 30s}\n"
        "input:\n  - {insert: a, start: 0, payload: 1.0}\n"
        "expected:\n  - {start: -30000000, end: 30000000, payload: 1.0}\n"
        "  - {start: 0, end: 60000000, payload: 1.0}\n"
    )
    result = runner.invoke(app, ["test", str(fixture), "--no-pytest"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "kind=hopping, size=1m, hop=30s" in result.output, result.output


def test_a_library_not_installed_yet_is_named_as_such(tmp_path: Path) -> None:
    """udm-cli test in a new package before pip install suggested stats.*."""
    fixture = tmp_path / "rms.udm.yaml"
    fixture.write_text(
        "udm: tsx.rms\nwindow: {kind: tumbling, size: 10}\n"
        "input:\n  - {insert: a, start: 0, payload: 1.0}\nexpected: []\n"
    )
    result = runner.invoke(app, ["test", str(fixture), "--no-pytest"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    text = result.output.replace("\n", " ")
    assert "no UDM is registered as 'tsx.rms': no library 'tsx' is installed" in text
    assert "pip install -e" in text and "did you mean" not in text


def test_the_minimal_failing_stream_is_valid_yaml_when_narrow_and_is_saved(
    tmp_path: Path,
) -> None:
    """It was a rich panel: borders on every line and wrapped lines in a
    narrow terminal, so the copied text was no YAML."""
    import yaml

    from udm.testing import load_fixture

    fixture = tmp_path / "leaky.udm.yaml"
    fixture.write_text(
        "name: a leaky sum with a long name that a narrow terminal would wrap somewhere\n"
        "udm: test_fixtures:LeakySum\nwindow: {kind: tumbling, size: 10}\n"
        "check_properties: false\n"
        "generate: {events: 200, duration: short, overlap: high, speculation: 0.3, seed: 3}\n"
    )
    result = runner.invoke(app, ["test", str(fixture), "--no-pytest"], env={"COLUMNS": "40"})
    assert result.exit_code == 1
    text = result.output
    start = text.index("# minimal failing stream")
    block = text[start:].split("# saved to ")[0]
    assert "│" not in block and "╭" not in block
    doc = yaml.safe_load(block)
    assert doc["udm"] == "test_fixtures:LeakySum" and doc["input"]
    saved = tmp_path / "leaky.minimal.yaml"
    assert f"# saved to {saved}; rename it to *.udm.yaml" in text.replace("\n", "")
    renamed = tmp_path / "leaky_min.udm.yaml"
    renamed.write_text(saved.read_text())
    (minimal,) = load_fixture(renamed)
    assert minimal.udm == "test_fixtures:LeakySum"


def test_test_json_for_ci(tmp_path: Path) -> None:
    import json

    good = tmp_path / "good.udm.yaml"
    good.write_text(
        "udm: stats.mean\nwindow: {kind: tumbling, size: 10}\n"
        "input:\n  - {insert: a, start: 1, payload: 2.0}\n"
        "expected:\n  - {start: 0, end: 10, payload: 2.0}\n"
    )
    bad = tmp_path / "bad.udm.yaml"
    bad.write_text("udm: stats.mean\nwindow: {kind: tumblin}\ninput: []\nexpected: []\n")
    stream = tmp_path / "stream.udm.yaml"  # valid fields, an invalid input stream
    stream.write_text(
        "udm: stats.mean\nwindow: {kind: tumbling, size: 10}\n"
        "input:\n  - {retract: c, new_end: 2}\nexpected: []\n"
    )
    result = runner.invoke(app, ["test", str(tmp_path), "--no-pytest", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)  # stdout is the JSON alone
    assert (doc["passed"], doc["failed"], doc["invalid"]) == (1, 0, 2)
    keys = {"fixture", "file", "line", "udm", "window", "streams", "result", "failures", "minimal"}
    assert all(set(f) == keys for f in doc["fixtures"])  # every entry, every key (cli.md)
    invalid = {Path(f["file"]).name: f for f in doc["fixtures"]}["stream.udm.yaml"]
    assert (invalid["result"], invalid["udm"], invalid["streams"]) == ("invalid", "stats.mean", 0)
    assert invalid["window"] == "kind=tumbling, size=10" and invalid["minimal"] is None
    by_file = {Path(f["file"]).name: f for f in doc["fixtures"]}
    assert by_file["good.udm.yaml"]["result"] == "pass"
    assert by_file["good.udm.yaml"]["window"] == "kind=tumbling, size=10"
    assert by_file["bad.udm.yaml"]["result"] == "invalid"
    assert by_file["bad.udm.yaml"]["failures"][0].startswith(f"{bad}:2: window.kind:")


@pytest.mark.spark
def test_run_json_for_ci(spark: Any, tmp_path: Path) -> None:
    import json

    rows = "2026-11-27T10:00:00,1.0\n2026-11-27T10:00:01,3.0\nx,5.0\n"
    (tmp_path / "r.csv").write_text("ts,v\n" + rows)
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts, on_invalid: drop}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.mean\nvalue: v\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(spec), "-o", str(out), "--json", "--format", "csv"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (query,) = doc["queries"]
    assert query["name"] == "q" and query["rows"] == 1 and query["format"] == "csv"
    assert query["rows_read"] == 3 and query["dropped"] == {"'ts' is not a valid time": 1}
    assert query["times"] == "iso"
    assert doc["ok"] is True


@pytest.mark.parametrize(
    "column, times, written",
    [
        ("1,1.0\n2,3.0\n", "iso", "ticks"),
        ("2026-11-27T10:00:00,1.0\n", "iso", "iso"),
        ("1,1.0\n2,3.0\n", "ticks", "ticks"),
        ("2026-11-27T10:00:00,1.0\n", "ticks", "ticks"),
    ],
)
def test_run_json_says_how_times_were_written(
    tmp_path: Path, column: str, times: str, written: str
) -> None:
    """A query over integer ticks writes ticks whatever --times says; the
    summary said "iso" (the option) for it."""
    import json

    (tmp_path / "r.csv").write_text("ts,v\n" + column)
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts}\n"
        "window: {kind: tumbling, size: 10}\naggregate: stats.mean\nvalue: v\n"
        if column[0] == "1"
        else "source: {path: r.csv, start: ts}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.mean\nvalue: v\n"
    )
    args = ["run", str(spec), "-o", str(tmp_path / "out"), "--json", "--engine", "local"]
    result = runner.invoke(app, [*args, "--times", times])
    assert result.exit_code == 0, result.output
    (query,) = json.loads(result.stdout)["queries"]
    assert query["times"] == written


def test_progress_shows_the_running_stage_and_its_tasks() -> None:
    """A long run showed a spinner alone."""
    import threading
    from types import SimpleNamespace

    from udm.cli.progress import describe_stages, spark_progress

    class Tracker:
        def getActiveStageIds(self) -> list[int]:
            return [7, 3]

        def getStageInfo(self, stage: int) -> Any:
            return SimpleNamespace(numCompletedTasks=stage - 2, numTasks=8)

    assert describe_stages(Tracker()) == "stage 3: 1/8 tasks, stage 7: 5/8 tasks"
    seen: list[str | None] = []
    polled = threading.Event()

    def update(text: str | None) -> None:
        seen.append(text)
        if text:
            polled.set()

    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=Tracker))
    with spark_progress(spark, update, every=0.01):
        assert polled.wait(5)
    assert seen[0] == "stage 3: 1/8 tasks, stage 7: 5/8 tasks" and seen[-1] is None


def test_piped_previews_show_struct_values_whole_on_one_line(monkeypatch: Any) -> None:
    import io

    monkeypatch.delenv("COLUMNS", raising=False)
    from pyspark.sql import Row
    from rich.console import Console

    from udm.cli.views import preview_table as _preview_table

    out = io.StringIO()
    value = Row(first_bottom=8.0, peak=9.5, second_bottom=8.1, breakout=10.0, note="W" * 40)
    _preview_table(Console(file=out, width=60), "w: 1 rows", ["start", "match"], [[0, value]])
    lines = out.getvalue().splitlines()
    row = next(line for line in lines if "first_bottom" in line)
    assert '{"first_bottom": 8.0, "peak": 9.5, "second_bottom": 8.1, "breakout": 10.0' in row
    assert "W" * 40 in row  # not wrapped onto a second line


@pytest.mark.spark
def test_run_refuses_a_streaming_dataframe_in_one_line(spark: Any, tmp_path: Path) -> None:
    """A query file returning a streaming DataFrame (the changelog of
    to_stream(), or spark.readStream itself) died with a 67-line
    traceback ending in CALL_ON_STREAMING_DATASET_UNSUPPORTED (black-box
    round 16)."""
    path = tmp_path / "streaming.py"
    path.write_text("def query(spark):\n    return spark.readStream.format('rate').load()\n")
    result = runner.invoke(app, ["run", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"{path}: query 'streaming': is a streaming DataFrame (spark.readStream, or the " in text
    assert "start_stream (docs/streaming.md)" in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()
