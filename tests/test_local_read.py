"""`udm-cli run --engine local` reads its sources as Spark's readers do,
udm's own output included, every value exact (black-box round 11).

It could not read back what it wrote: a year past 9999 (``+10000-...``,
in CSV, JSON and Parquet) and a JSON double ``"Infinity"``; its CSV
reader took ``NA``, ``null``, ``N/A``, ``nan`` and ``NaN`` for null and
read ``"x\\"y"`` as ``x\\y"``; one bad row made a tick column a double
(``1234567890123456789`` read as ``...768``) and a JSON integer past
int64 was rounded; a file that did not parse was blamed on
``source.where``. The expected values are hand-computed, and one test
compares the two engines on the same files.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from udm.cli.localread import csv_records
from udm.cli.main import app
from udm.host.time import INFINITY, MIN_TIME, iso_ticks, to_ticks

runner = CliRunner()
#: 10000-01-01T00:00:00Z, the first tick a Python datetime cannot hold
Y10K = 253_402_300_800_000_000


def _run(tmp_path: Path, spec: str, *args: str, name: str = "q") -> Any:
    """Run the YAML ``spec`` (written as ``NAME.yaml`` in ``tmp_path``)
    with ``--engine local``; the CLI's result."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(spec, encoding="utf-8")
    out = str(tmp_path / "out")
    return runner.invoke(app, ["run", str(path), "-o", out, "--engine", "local", *args])


def _part(tmp_path: Path, name: str, fmt: str) -> str:
    return (tmp_path / "out" / name / f"part-00000.{fmt}").read_text(encoding="utf-8")


def test_to_ticks_reads_years_with_a_sign_as_udm_writes_them() -> None:
    """``iso_ticks`` (and Spark) write a year past 9999 or before 1 with a
    sign; ``to_ticks`` refused them ("neither an ISO 8601 datetime")."""
    assert to_ticks("+10000-01-01T00:00:00Z") == Y10K
    assert to_ticks("+10000-01-01T05:30:00+05:30") == Y10K
    assert to_ticks("-0001-12-31T23:59:59.999999Z") == -62_167_219_200_000_001
    assert to_ticks("0000-01-01T00:00:00Z") == -62_167_219_200_000_000
    for tick in (INFINITY - 1, MIN_TIME + 1, Y10K - 1, -62_135_596_800_000_001, 0):
        assert to_ticks(iso_ticks(tick)) == tick
    with pytest.raises(ValueError, match="beyond the int64 tick range"):
        to_ticks("+294248-01-01T00:00:00Z")


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_a_result_past_the_year_9999_reads_back(tmp_path: Path, fmt: str) -> None:
    """A snapshot at 9999's last tick ends in the year 10000: its output,
    read back as a source, gives the same lifetime (it failed: "'end' is
    not a valid time" in CSV and JSON, "date value out of range" at
    ``aggregate:`` in Parquet)."""
    (tmp_path / "d.csv").write_text("ts,temp\n9999-12-31T23:59:59.999999Z,4.0\n")
    first = "source: {path: d.csv, start: ts}\nwindow: {kind: snapshot}\n"
    result = _run(tmp_path, first + "aggregate: stats.mean\nvalue: temp\n", "--format", fmt)
    assert result.exit_code == 0, result.output
    if fmt == "csv":
        assert _part(tmp_path, "q", fmt) == (
            "start,end,mean\n9999-12-31T23:59:59.999999Z,+10000-01-01T00:00:00.000000Z,4.0\n"
        )
    back = (
        f"source: {{path: out/q, format: {fmt}, start: start, end: end}}\n"
        "window: {kind: snapshot}\naggregate: stats.max\nvalue: mean\n"
    )
    result = _run(tmp_path, back, "--format", "parquet", name="back")
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "out" / "back" / "part-00000.parquet")
    ticks = {c: table.column(c).cast(pa.int64()).to_pylist() for c in ("start", "end")}
    assert ticks == {"start": [Y10K - 1], "end": [Y10K]}
    assert table.column("max").to_pylist() == [4.0]


def test_a_json_infinity_reads_back_as_a_double(tmp_path: Path) -> None:
    """udm writes an infinite double to JSON as ``"Infinity"`` (as Spark
    does); reading it back failed with "changed from number to string",
    blamed on ``source.where``."""
    (tmp_path / "d.csv").write_text("ts,v\n1,1.5\n5,Infinity\n7,-Infinity\n9,NaN\n")
    first = "source: {path: d.csv, start: ts}\nwindow: {kind: snapshot}\n"
    result = _run(tmp_path, first + "aggregate: stats.max\nvalue: v\n", "--format", "json")
    assert result.exit_code == 0, result.output
    written = [
        '{"start":1,"end":2,"max":1.5}',
        '{"start":5,"end":6,"max":"Infinity"}',
        '{"start":7,"end":8,"max":"-Infinity"}',
        '{"start":9,"end":10,"max":"NaN"}',
    ]
    assert _part(tmp_path, "q", "json").splitlines() == written
    back = (
        "source: {path: out/q, format: json, start: start, end: end}\n"
        "window: {kind: snapshot}\naggregate: stats.max\nvalue: max\n"
    )
    result = _run(tmp_path, back, "--format", "json", name="back")
    assert result.exit_code == 0, result.output
    assert _part(tmp_path, "back", "json").splitlines() == written


def test_csv_text_is_null_only_when_empty(tmp_path: Path) -> None:
    """pyarrow's CSV reader took NA, null, N/A, nan and NaN for null: four
    sensors merged into one null key, and a NaN reading became null. As
    Spark reads them: text, and NaN in a double column is NaN."""
    (tmp_path / "d.csv").write_text(
        'ts,sensor,temp\n1,NA,1.0\n2,null,2.0\n3,N/A,3.0\n4,nan,4.0\n5,"",5.0\n6,NaN,NaN\n'
    )
    spec = (
        "source: {path: d.csv, start: ts, key: sensor, on_null_key: keep}\n"
        "window: {kind: tumbling, size: 100}\naggregate: stats.max\nvalue: temp\n"
    )
    result = _run(tmp_path, spec, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert _part(tmp_path, "q", "csv") == (
        "start,end,sensor,max\n0,100,NA,1.0\n0,100,null,2.0\n0,100,N/A,3.0\n"
        "0,100,nan,4.0\n0,100,,5.0\n0,100,NaN,NaN\n"
    )


def test_csv_fields_are_split_as_spark_splits_them() -> None:
    """Spark's reader (univocity, escape ``\\``), read off Spark 4: ``\\"``
    and ``\\\\`` are escapes inside quotes only; an empty field is null."""
    text = 'a,b,c\n"x\\"y",a\\b,"a\\b"\n"p\\\\q","",\n\n"q""r"," s ","l\nm"\n'
    assert list(csv_records(text, ",")) == [
        (1, ["a", "b", "c"]),
        (2, ['x"y', "a\\b", "a\\b"]),
        (3, ["p\\q", None, None]),
        (5, ['"q""r"', " s ", "l\nm"]),
    ]


def test_a_csv_value_with_a_quote_reads_back(tmp_path: Path) -> None:
    """The key ``x"y`` is written ``"x\\"y"``; it was read back ``x\\y"``."""
    (tmp_path / "d.json").write_text(
        '{"ts": 1, "k": "x\\"y", "v": 1.0}\n{"ts": 2, "k": "a\\\\b,c", "v": 2.0}\n'
    )
    first = "source: {path: d.json, start: ts, key: k}\nwindow: {kind: tumbling, size: 100}\n"
    result = _run(tmp_path, first + "aggregate: stats.max\nvalue: v\n", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert (
        _part(tmp_path, "q", "csv") == 'start,end,k,max\n0,100,"x\\"y",1.0\n0,100,"a\\\\b,c",2.0\n'
    )
    back = (
        "source: {path: out/q, format: csv, start: start, end: end, key: k}\n"
        "window: {kind: tumbling, size: 100}\naggregate: stats.max\nvalue: max\n"
    )
    result = _run(tmp_path, back, "--format", "json", name="back")
    assert result.exit_code == 0, result.output
    assert _part(tmp_path, "back", "json").splitlines() == [
        '{"start":0,"end":100,"k":"x\\"y","max":1.0}',
        '{"start":0,"end":100,"k":"a\\\\b,c","max":2.0}',
    ]


def test_integer_ticks_stay_exact_beside_a_bad_row(tmp_path: Path) -> None:
    """One row ``2.5`` made the tick column a double: the tick
    1234567890123456789 became ...768, with no warning. The bad row is
    invalid (dropped and counted, or reported with its data row)."""
    (tmp_path / "t.csv").write_text("s,v\n1234567890123456789,1.0\n2.5,2.0\n")
    (tmp_path / "t.json").write_text('{"s": 1234567890123456789, "v": 1.0}\n{"s": 2.5, "v": 2.0}\n')
    for fmt in ("csv", "json"):
        spec = (
            f"source: {{path: t.{fmt}, start: s, on_invalid: drop}}\n"
            "window: {kind: snapshot}\naggregate: stats.max\nvalue: v\n"
        )
        result = _run(tmp_path, spec, "--format", "csv", "--max-dropped", "1")
        assert result.exit_code == 0, result.output
        assert "dropped 1 of 2 input rows as invalid: 1 's' is not a valid time" in result.output
        assert _part(tmp_path, "q", "csv") == (
            "start,end,max\n1234567890123456789,1234567890123456790,1.0\n"
        )
    spec = "source: {path: t.csv, start: s}\nwindow: {kind: snapshot}\naggregate: stats.max\n"
    result = _run(tmp_path, spec + "value: v\n")
    assert result.exit_code == 1
    assert "q.yaml:1: source.start: invalid event: 's' is not a valid time; data row 2: " in (
        result.output.replace("\n", "")
    )


def test_a_json_integer_past_int64_stays_exact(tmp_path: Path) -> None:
    """A JSON integer beyond int64 was read as a double and written
    ``1.8446744073709552E19``; Spark infers ``decimal(20,0)``. One that a
    double column would round is refused, with its column and row."""
    (tmp_path / "h.json").write_text('{"ts": 1, "n": 18446744073709551617}\n{"ts": 2, "n": 3}\n')
    spec = "source: {path: h.json, start: ts}\nwindow: {kind: snapshot}\naggregate: stats.max\n"
    result = _run(tmp_path, spec + "value: n\n", "--format", "json")
    assert result.exit_code == 0, result.output
    assert _part(tmp_path, "q", "json").splitlines() == [
        '{"start":1,"end":2,"max":18446744073709551617}',
        '{"start":2,"end":3,"max":3}',
    ]
    (tmp_path / "h.json").write_text('{"ts": 1, "n": 18446744073709551617}\n{"ts": 2, "n": 1.5}\n')
    result = _run(tmp_path, spec + "value: n\n")
    assert result.exit_code == 1
    assert (
        "q.yaml:1: source.path: column 'n' holds 18446744073709551617 (data row 1), an integer "
        "a double would round (1.8446744073709552e+19)"
    ) in result.output.replace("\n", "")


def test_nanosecond_payloads_are_written_and_previewed(tmp_path: Path) -> None:
    """A ``timestamp[ns]`` payload: the preview died with ArrowInvalid, CSV
    and JSON wrote ``...000000001`` and ``...000000002`` both as
    ``...000000``."""
    query = tmp_path / "ns.py"
    query.write_text(
        "import pandas as pd\nfrom udm.host import Stream\n\ndef query(spark):\n"
        "    seen = pd.to_datetime(['2024-01-01T00:00:00.000000001', "
        "'2024-01-01T00:00:00.000000002'])\n"
        "    df = pd.DataFrame({'ts': [1, 2], 'seen': seen})\n"
        "    return Stream.from_pandas(df, start='ts').where(lambda p: True)\n"
    )
    written = {}
    for fmt in ("csv", "json"):
        out = tmp_path / "out"
        args = ["run", str(query), "-o", str(out), "--engine", "local", "--format", fmt]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "2024-01-01 00:00:00.000000002" in result.output
        written[fmt] = _part(tmp_path, "ns", fmt).splitlines()
    assert written == {
        "csv": [
            "start,end,seen",
            "1,2,2024-01-01T00:00:00.000000001",
            "2,3,2024-01-01T00:00:00.000000002",
        ],
        "json": [
            '{"start":1,"end":2,"seen":"2024-01-01T00:00:00.000000001"}',
            '{"start":2,"end":3,"seen":"2024-01-01T00:00:00.000000002"}',
        ],
    }


@pytest.mark.parametrize(
    ("file", "text", "options", "line", "message"),
    [
        (
            "s.csv",
            "ts,k,n\n1,a,1\n2,a\n3,a,3\n",
            "",
            2,
            "source.path: line 3 of s.csv (data row 2) has 2 field(s) where its header has 3; "
            "fix that line (a field holding ',' goes in double quotes)",
        ),
        (
            "b.jsonl",
            '{"ts": 1, "n": 1}\n\n{"ts": 2, "n": 2}\nnot json\n',
            "",
            2,
            "source.path: line 4 of b.jsonl (data row 3) is not a JSON object (Expecting value: "
            "line 1 column 1 (char 0)); line-delimited JSON holds one object per line: fix or "
            "remove that line",
        ),
        (
            "m.json",
            '{"ts": 1, "n": 1}\n{"ts": 2, "n": "x"}\n',
            "",
            2,
            "source.path: column 'n' holds a number and, at line 2 (data row 2), text; a column "
            "holds one kind of value: fix that line",
        ),
        (
            "o.csv",
            "ts;n\n1;1\n",
            '\n  options: {delimiter: ";", timestampFormat: "dd/MM/yyyy"}',
            4,
            "source.options: ['timestampFormat'] are Spark reader options the local engine does "
            "not take; use --engine spark",
        ),
        (
            "p.parquet",
            "not parquet",
            "",
            2,
            "source.path: cannot read p.parquet as parquet: ",
        ),
    ],
    ids=["csv-row", "json-line", "json-kind", "options", "parquet"],
)
def test_a_source_that_does_not_read_is_reported_at_its_field(
    tmp_path: Path, file: str, text: str, options: str, line: int, message: str
) -> None:
    """They were reported at ``source.where`` (the spec had none) or at
    ``aggregate:``, with pyarrow's 0-based row and no file line or hint."""
    (tmp_path / file).write_text(text)
    spec = (
        f"source:\n  path: {file}\n  start: ts{options}\n"
        "window: {kind: snapshot}\naggregate: stats.max\nvalue: n\n"
    )
    result = _run(tmp_path, spec)
    assert result.exit_code == 1
    assert f"q.yaml:{line}: {message}" in result.output.replace("\n", "")


def test_a_negative_preview_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("ts,v\n1,1.0\n")
    spec = "source: {path: d.csv, start: ts}\nwindow: {kind: snapshot}\naggregate: stats.max\n"
    result = _run(tmp_path, spec + "value: v\n", "--preview", "-1")
    assert result.exit_code == 2
    assert "--preview -1: give the rows to preview, 0 or more (0: none)" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_local_and_spark_read_the_same_csv(spark: Any, tmp_path: Path) -> None:
    """The same CSV source (text Spark's reader and pyarrow's took
    differently: NA and NaN, escapes, spaces, a key needing quotes) run on
    both engines: the same output, byte for byte."""
    (tmp_path / "d.csv").write_text(
        'ts,k,v\n2024-01-01T00:00:00Z,NA,1.0\n2024-01-01T00:00:01Z,"x\\"y",2.0\n'
        "2024-01-01T00:00:02Z,a\\b,3.0\n2024-01-01T00:00:03Z, s ,NaN\n"
        '2024-01-01T00:00:04Z,"a,b",Infinity\n2024-01-01T00:00:05Z,nan,-Inf\n'
    )
    (tmp_path / "q.yaml").write_text(
        "source: {path: d.csv, start: ts, key: k}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.max\nvalue: v\n"
    )
    written = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        args = ["run", str(tmp_path / "q.yaml"), "-o", str(out), "--format", "csv"]
        result = runner.invoke(app, [*args, "--engine", engine, "--preview", "0"])
        assert result.exit_code == 0, result.output
        text = "".join(p.read_text() for p in sorted((out / "q").glob("part-*.csv")))
        written[engine] = sorted(set(text.splitlines()))
    m0, m1 = "2024-01-01T00:00:00.000000Z", "2024-01-01T00:01:00.000000Z"
    assert written["local"] == sorted(
        ["start,end,k,max"]
        + [f"{m0},{m1},{k},{v}" for k, v in (("NA", "1.0"), ('"x\\"y"', "2.0"), ("a\\b", "3.0"))]
        + [f"{m0},{m1}, s ,NaN", f'{m0},{m1},"a,b",Infinity', f"{m0},{m1},nan,-Infinity"]
    )
    assert written["local"] == written["spark"]


def test_iso_ticks_and_to_ticks_agree_on_every_era() -> None:
    """Exact both ways on the 400-year cycle's edges (a leap day)."""
    leap = to_ticks("+10400-02-29T12:00:00Z")
    assert iso_ticks(leap) == "+10400-02-29T12:00:00.000000Z"
    assert leap - to_ticks("2000-02-29T12:00:00Z") == 21 * 146_097 * 86_400_000_000
    assert to_ticks(dt.datetime(1, 1, 1, tzinfo=dt.UTC)) == to_ticks("0001-01-01T00:00:00Z")
