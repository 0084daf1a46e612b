"""udm-cli run writes every lifetime exactly, in every format (issue #29).

Each file is read back here with an independent reader (the csv and json
modules, pyarrow for Parquet), not with Spark's, and its events compared
with the query's CHT: a time cut to milliseconds, a start written equal to
its end or a payload time left as raw ticks beside timestamp lifetimes
fails the comparison.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import INFINITY, Cht
from udm.sdk import IntervalEvent, Ticks, TimeSensitiveAggregate

runner = CliRunner()
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
BASE = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z in ticks
#: payload fields double_bottom declares as times (Ticks)
TIME_FIELDS = {"first_bottom_at", "second_bottom_at"}

QUERY = """\
from pyspark.sql import functions as F

from udm.host import Stream

BASE = {base}


def queries(spark):
    events = spark.createDataFrame(
        [(BASE, BASE + 1, 1.5), (BASE + 1_000_001, None, 2.0), (BASE + 7, BASE + 999_999, 3.0)],
        "s long, e long, v double",
    ).select(F.timestamp_micros("s").alias("s"), F.timestamp_micros("e").alias("e"), "v")
    prices = spark.createDataFrame(
        [(BASE + i, p) for i, p in enumerate([10.0, 8.0, 9.5, 8.1, 10.0])], "t long, price double"
    ).select(F.timestamp_micros("t").alias("t"), "price")
    return {{
        "events": Stream.from_dataframe(events, start="s", end="e", shape="edge"),
        "w": Stream.from_dataframe(prices, start="t")
        .tumbling_window(3_600_000_000)
        .apply("patterns.double_bottom", value="price", tolerance=0.05),
    }}
"""


def _ticks(value: Any) -> Any:
    """Ticks of a time as a file holds it: ISO text, a datetime or ticks."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        value = dt.datetime.fromisoformat(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    return int(value)


def _records(path: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_table(str(path)).to_pylist())
    files = sorted(path.glob(f"part-*.{fmt}"))
    if fmt == "csv":
        return [dict(r) for f in files for r in csv.DictReader(f.open())]
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _number(text: str) -> Any:
    """A CSV cell as a float when it is a number (CSV has no types)."""
    try:
        return float(text)
    except ValueError:
        return text


def _read_cht(path: Path, fmt: str) -> Cht:
    """The events of a written result, payload times in ticks."""
    events = []
    for r in _records(path, fmt):
        start, end = _ticks(r.pop("start")), _ticks(r.pop("end"))
        payload = {
            k: (_ticks(v) if k in TIME_FIELDS else _number(v) if fmt == "csv" else v)
            for k, v in r.items()
        }
        events.append(IntervalEvent(start, INFINITY if end is None else end, payload))
    return Cht(events)


EXPECTED = {
    "events": Cht(
        [
            (BASE, BASE + 1, {"v": 1.5}),
            (BASE + 7, BASE + 999_999, {"v": 3.0}),
            (BASE + 1_000_001, INFINITY, {"v": 2.0}),
        ]
    ),
    # hand-computed: the docstring's W, one tick apart
    "w": Cht(
        [
            (
                BASE,
                BASE + 5,
                {
                    "first_bottom": 8.0,
                    "peak": 9.5,
                    "second_bottom": 8.1,
                    "breakout": 10.0,
                    "first_bottom_at": BASE + 1,
                    "second_bottom_at": BASE + 3,
                },
            )
        ]
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize("times", ["iso", "ticks"])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_run_round_trips_every_lifetime_exactly(
    spark: Any, tmp_path: Path, fmt: str, times: str
) -> None:
    """CSV and JSON cut times to milliseconds (a point event was written
    with start == end); double_bottom's *_at fields came out as raw ticks
    beside timestamp start/end columns."""
    query = tmp_path / "q.py"
    query.write_text(QUERY.format(base=BASE))
    out = tmp_path / "out"
    args = ["run", str(query), "-o", str(out), "--format", fmt, "--times", times, "--preview", "0"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    for name, expected in EXPECTED.items():
        records = _records(out / name, fmt)
        if times == "iso" and fmt != "parquet":
            # ISO text with six fraction digits, payload times too
            assert all(len(r["start"]) == len("2023-11-14T22:13:20.000000Z") for r in records)
            if name == "w":
                assert records[0]["first_bottom_at"] == "2023-11-14T22:13:20.000001Z"
        if times == "ticks":
            assert all(str(r["start"]).isdigit() for r in records)
            assert all(str(r["end"]).isdigit() for r in records)  # the end of time too
        assert _read_cht(out / name, fmt) == expected, name


class LastSeen(TimeSensitiveAggregate):
    """The latest start in a window: an aggregate declared -> Ticks."""

    def compute_result(self, events: Sequence[IntervalEvent[Any]], window: Any) -> Ticks:
        return max(e.start for e in events)


@pytest.mark.spark
def test_payload_times_follow_the_streams_time_type(spark: Any) -> None:
    """A result field declared Ticks is a timestamp when start/end are."""
    from pyspark.sql import functions as F

    from udm.host import Stream

    prices = spark.createDataFrame(
        [(BASE + i, p) for i, p in enumerate([10.0, 8.0, 9.5, 8.1, 10.0])], "t long, price double"
    )
    for time_col, kind in ((F.timestamp_micros("t"), "timestamp"), (F.col("t"), "bigint")):
        df = prices.select(time_col.alias("t"), "price")
        s = Stream.from_dataframe(df, start="t").tumbling_window(3_600_000_000)
        out = s.apply("patterns.double_bottom", value="price", tolerance=0.05).to_dataframe()
        types = dict(out.dtypes)
        assert types["start"] == kind and types["first_bottom_at"] == kind
        assert types["second_bottom_at"] == kind and types["peak"] == "double"
        last = s.aggregate(LastSeen(), value="price", alias="last").to_dataframe()
        assert dict(last.dtypes)["last"] == kind
        (row,) = last.selectExpr("last").collect()
        expected = BASE + 4 if kind == "bigint" else EPOCH + dt.timedelta(microseconds=BASE + 4)
        assert row.last == (expected if kind == "bigint" else expected.replace(tzinfo=None))


@pytest.mark.spark
def test_preview_shows_exact_times_and_floats_as_floats(spark: Any, tmp_path: Path) -> None:
    """The preview cut times to seconds and showed 3.0 as 3."""
    query = tmp_path / "q.py"
    query.write_text(QUERY.format(base=BASE))
    result = runner.invoke(app, ["run", str(query), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "2023-11-14 22:13:20.000001" in text  # the end of the first event
    assert "2023-11-14 22:13:20.999999" in text
    assert "│ 3.0 " in text and "│ 1.5 " in text
    assert "rounded" not in text  # nothing was


def test_preview_cells_say_when_they_round() -> None:
    from udm.cli.views import cell as _cell

    assert _cell(3.0) == ("3.0", False)
    assert _cell(0.1) == ("0.1", False)
    assert _cell(1 / 3) == ("0.333333", True)
    assert _cell(123456789.0) == ("123456789.0", False)
    assert _cell(1234567891234.0) == ("1.23457e+12", True)
    assert _cell(float("nan")) == ("nan", False)
