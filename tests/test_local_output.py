"""`udm-cli run --engine local` writes CSV and JSON as Spark does.

The local engine wrote whole doubles as ``7`` (read back with type
inference, a column of them became integers) and quoted every CSV field;
its JSON escaped non-ASCII text and had spaces. The expected texts below
were read off Spark 4 on Java 17 (the writer options of
``udm.host.spark.output``), and one test compares the two engines' files
on the same query.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.cli.sparktext import csv_text, java_double, json_lines, tick_text
from udm.host import INFINITY

runner = CliRunner()
T0 = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)
US = dt.timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("value", "single", "text"),
    [
        (1.0, False, "1.0"),
        (7.0, False, "7.0"),
        (-0.0, False, "-0.0"),
        (0.1, False, "0.1"),
        (2.5, False, "2.5"),
        (0.001, False, "0.001"),
        (1e-4, False, "1.0E-4"),
        (-1.5e-7, False, "-1.5E-7"),
        (9999999.0, False, "9999999.0"),
        (1e7, False, "1.0E7"),
        (123456789.0, False, "1.23456789E8"),
        (1 / 3, False, "0.3333333333333333"),
        (1.7976931348623157e308, False, "1.7976931348623157E308"),
        (5e-324, False, "4.9E-324"),
        (float("nan"), False, "NaN"),
        (float("-inf"), False, "-Infinity"),
        # Java 17 writes whole numbers past 2**53 with more digits than needed
        (7.3556212886998671e18, False, "7.3556212886998671E18"),
        (-9.4002425453663328e16, False, "-9.4002425453663328E16"),
        (0.1, True, "0.1"),
        (9.4701568e9, True, "9.4701568E9"),
        (-9169413.0, True, "-9169413.0"),
    ],
)
def test_numbers_are_written_as_java_writes_them(value: float, single: bool, text: str) -> None:
    if single:
        value = float(pa.array([value], pa.float32())[0].as_py())
    assert java_double(value, single) == text


def test_times_are_written_from_their_ticks_past_python_dates() -> None:
    assert tick_text(1_700_000_000_000_001) == "2023-11-14T22:13:20.000001Z"
    assert tick_text(-1, zoned=False) == "1969-12-31T23:59:59.999999"
    # Python's datetime stops at 9999; Spark writes the end of time so
    assert tick_text(INFINITY) == "+294247-01-10T04:00:54.775807Z"


def test_csv_fields_are_quoted_as_spark_does_and_keep_their_whitespace() -> None:
    values = ["plain", "", None, "a,b", 'a"b', "a\\b", " lead", "\tx\n", "#c", "\t#x", "a\\\n"]
    values += ["'q'", "ünï", "x\ry"]
    table = pa.table({"s": pa.array(values, pa.string()), "a,b": list(range(len(values)))})
    lines = [
        's,"a,b"',
        "plain,0",
        '"",1',
        ",2",
        '"a,b",3',
        '"a\\"b",4',
        "a\\b,5",
        " lead,6",
        '"\tx\n",7',  # quoted for the line break
        '"#c",8',
        "\t#x,9",
        '"a\\\\\n",10',
        "'q',11",
        "ünï,12",
        '"x\ry",13',
    ]
    assert csv_text(table) == "\n".join(lines) + "\n"


def test_json_is_compact_utf8_with_every_field() -> None:
    table = pa.table(
        {
            "s": ["ünï", 'a"\\\n\x01'],
            "v": [7.0, float("nan")],
            "end": pa.array([None, INFINITY - 1], pa.int64()).cast(pa.timestamp("us", "UTC")),
            "st": pa.array(
                [{"x": 1.0, "t": T0}, None],
                pa.struct([("x", pa.float64()), ("t", pa.timestamp("us", "UTC"))]),
            ),
            "l": pa.array([[1.0, None], []], pa.list_(pa.float64())),
        }
    )
    assert json_lines(table).splitlines() == [
        '{"s":"ünï","v":7.0,"end":null,"st":{"x":1.0,"t":"2023-11-14T22:13:20.000000Z"},'
        '"l":[1.0,null]}',
        '{"s":"a\\"\\\\\\n\\u0001","v":"NaN","end":"+294247-01-10T04:00:54.775806Z",'
        '"st":null,"l":[]}',
    ]


def _query(tmp_path: Path) -> Path:
    """A spec both engines run: doubles whole and not, a key needing CSV
    quotes and one that is not ASCII."""
    import pyarrow.parquet as pq

    times = [T0, T0 + US, T0 + 70_000_000 * US, T0 + 2 * US, T0 + 3 * US]
    pq.write_table(
        pa.table(
            {
                "ts": pa.array(times, pa.timestamp("us", "UTC")),
                "k": ["a,b", "a,b", "a,b", "ünï", "ünï"],
                "v": [1.0, 13.0, 5.0, 7.0, 0.5],
            }
        ),
        tmp_path / "r.parquet",
    )
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.parquet, start: ts, key: k}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.mean\nvalue: v\n",
        encoding="utf-8",
    )
    return spec


def _written(folder: Path, fmt: str) -> tuple[list[str], list[str]]:
    """A result folder's header lines and sorted rows (Spark may write
    several part files, each CSV one with the header)."""
    lines = [
        line
        for part in sorted(folder.glob(f"part-*.{fmt}"))
        for line in part.read_text(encoding="utf-8").splitlines()
    ]
    headers = sorted(set(lines[:1] + [x for x in lines if x.startswith("start,")]))
    return (headers if fmt == "csv" else []), sorted(x for x in lines if x not in headers)


@pytest.mark.spark
def test_local_and_spark_write_the_same_text(spark: Any, tmp_path: Path) -> None:
    """The same query, written by both engines in CSV and JSON, times as
    ISO text and as ticks: the same header and rows, byte for byte."""
    spec = _query(tmp_path)
    for fmt, times in (("csv", "iso"), ("json", "iso"), ("csv", "ticks"), ("json", "ticks")):
        written = {}
        for engine in ("local", "spark"):
            out = tmp_path / f"{engine}-{fmt}-{times}"
            args = ["run", str(spec), "-o", str(out), "--format", fmt, "--times", times]
            result = runner.invoke(app, [*args, "--engine", engine, "--preview", "0"])
            assert result.exit_code == 0, result.output
            written[engine] = _written(out / "q", fmt)
        assert written["local"] == written["spark"], (fmt, times)
        if (fmt, times) == ("csv", "iso"):  # hand-computed: means 7.0, 3.75, 5.0
            m13, m14, m15 = (f"2023-11-14T22:{m}:00.000000Z" for m in (13, 14, 15))
            assert written["local"] == (
                ["start,end,k,mean"],
                [f'{m13},{m14},"a,b",7.0', f"{m13},{m14},ünï,3.75", f'{m14},{m15},"a,b",5.0'],
            )


@pytest.mark.spark
def test_spark_csv_keeps_leading_and_trailing_whitespace(spark: Any, tmp_path: Path) -> None:
    """Spark's CSV writer trims text fields by default ("  a " written as
    "a"): udm's writes keep every value, and read it back the same."""
    from udm.host.spark.output import read_result, write_result

    values = ["  a ", "\tb", " ", "x\n y", "plain"]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, s string")
    out = tmp_path / "ws"
    write_result(df.coalesce(1), str(out), "csv")
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(out.glob("part-*.csv")))
    assert text == 'i,s\n0,  a \n1,\tb\n2, \n3,"x\n y"\n4,plain\n'
    back = read_result(spark, str(out), "csv", df.schema).orderBy("i").collect()
    assert [r.s for r in back] == values
