"""Bad data (issue #29): how many rows are invalid and the first few; a
dropping run that drops every row (or too many) fails and says why; null
keys follow an explicit on_null_key policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import Cht, Stream
from udm.host.query import InvalidEventError

runner = CliRunner()
pytestmark = pytest.mark.spark


def test_an_invalid_row_error_counts_them_all_and_shows_the_first_few(spark: Any) -> None:
    """Only the first invalid row was named: one more per run."""
    df = spark.createDataFrame(
        [(1, 1.0), (None, 2.0), (None, 3.0), (5, 4.0), (None, 5.0), (None, 6.0)],
        "ts long, v double",
    ).coalesce(1)
    s = Stream.from_dataframe(df, start="ts").tumbling_window(10).aggregate("stats.max", value="v")
    for run in (s.to_cht, lambda: s.to_dataframe().collect()):
        with pytest.raises(InvalidEventError) as info:
            run()
        text = str(info.value)
        assert text.startswith("invalid event: 'ts' is null; row: {")
        assert "4 invalid rows in all (4 'ts' is null); the first 3: " in text
        assert text.count("('ts' is null)") == 3
        assert text.endswith("(stream.metrics.invalid_rows())")


def test_null_keys_raise_by_default_or_are_dropped_and_counted_or_kept(spark: Any) -> None:
    """A null key was silently a group of its own."""
    df = spark.createDataFrame(
        [("a", 1, 1.0), (None, 2, 2.0), ("a", 3, 3.0), (None, 4, 4.0)],
        "k string, ts long, v double",
    )

    def query(**policy: Any) -> Stream:
        s = Stream.from_dataframe(df, start="ts", key="k", **policy)
        return s.tumbling_window(10).aggregate("stats.max", value="v")

    with pytest.raises(InvalidEventError) as info:
        query().to_cht()
    assert str(info.value).startswith("invalid event: key 'k' is null; row: {")
    assert "pass on_null_key='drop' to drop such rows and count them" in str(info.value)
    dropped = query(on_null_key="drop")
    assert dropped.to_cht() == {"a": Cht([(0, 10, 3.0)])}
    assert dropped.metrics.invalid_rows() == {"key 'k' is null": 2}
    assert dropped.metrics.rows_read() == 4
    kept = query(on_null_key="keep").to_cht()
    assert kept == {"a": Cht([(0, 10, 3.0)]), None: Cht([(0, 10, 4.0)])}
    with pytest.raises(ValueError, match="unknown on_null_key 'skip'"):
        Stream.from_dataframe(df, start="ts", key="k", on_null_key="skip")  # type: ignore[arg-type]


def _spec(tmp_path: Path, rows: str, extra: str = "") -> Path:
    (tmp_path / "r.csv").write_text("ts,k,v\n" + rows)
    spec = tmp_path / "r.yaml"
    spec.write_text(
        "source:\n  path: r.csv\n  format: csv\n  start: ts\n  key: k\n  on_invalid: drop\n"
        + extra
        + "window: {kind: tumbling, size: 10}\naggregate: stats.max\nvalue: v\n"
    )
    return spec


def test_run_fails_when_drop_drops_every_row_or_too_many(spark: Any, tmp_path: Path) -> None:
    """A wrong time format dropped every row: an empty result and exit 0."""
    spec = _spec(tmp_path, "27/11/2026 10:00,a,1.0\n27/11/2026 10:01,a,2.0\n")
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    text = result.output.replace("\n", " ")
    assert "dropped 2 of 2 input rows as invalid: 2 'ts' is not a valid time" in text
    assert "query 'r': every one of the 2 input rows was invalid and dropped" in text
    assert "timestampFormat" in text
    spec = _spec(tmp_path, "2026-11-27T10:00:00,a,1.0\nx,a,2.0\ny,a,3.0\n")
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "2 of 3 input rows (67%) were invalid and dropped, more than --max-dropped 0.5" in (
        result.output.replace("\n", " ")
    )
    args = ["run", str(spec), "-o", str(tmp_path / "out"), "--max-dropped", "0.7"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "dropped 2 of 3 input rows as invalid" in result.output


def test_a_spec_takes_on_null_key(spark: Any, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "1,a,1.0\n2,,2.0\n3,a,3.0\n4,a,4.0\n", "  on_null_key: drop\n")
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "dropped 1 of 4 input rows as invalid: 1 key 'k' is null" in result.output
    spec = _spec(tmp_path, "1,a,1.0\n2,,2.0\n")
    spec.write_text(spec.read_text().replace("  on_invalid: drop\n", ""))
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert "invalid event: key 'k' is null" in text
    assert "set source.on_null_key: drop to drop such rows and count them, or keep" in text


def test_the_documented_non_iso_time_format_reads_exactly(spark: Any, tmp_path: Path) -> None:
    """docs/cli.md's timestampFormat example: day-first times are read, not dropped."""
    (tmp_path / "r.csv").write_text(
        "ts,k,v\n27/11/2026 10:00:00,a,1.0\n27/11/2026 10:00:05,a,2.0\n"
    )
    spec = tmp_path / "r.yaml"
    spec.write_text(
        "source:\n  path: r.csv\n  format: csv\n  start: ts\n  key: k\n"
        '  options:\n    timestampFormat: "dd/MM/yyyy HH:mm:ss"\n'
        "window: {kind: tumbling, size: 1m}\naggregate: stats.max\nvalue: v\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(spec), "-o", str(out), "--times", "ticks"])
    assert result.exit_code == 0, result.output
    (row,) = spark.read.parquet(str(out / "r")).collect()
    minute = 1_795_773_600_000_000  # 2026-11-27T10:00:00Z in ticks
    assert tuple(row) == (minute, minute + 60_000_000, "a", 2.0)
