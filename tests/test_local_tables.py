"""pandas and Arrow tables in and out, in-process: times beyond Python's
datetime, values Arrow cannot hold, and outputs without rows (black-box
round 11: B1, B9, B10)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import INFINITY, Cht
from udm.host.query import InvalidEventError, Stream

YEAR_10000 = 253_402_300_800_000_000  # 10000-01-01T00:00:00Z in ticks
YEAR_MINUS_100 = -65_322_892_800_000_000  # -0100-01-01T00:00:00Z (proleptic Gregorian)


# ------------------------------------------------ B1: every tick is read


def test_from_arrow_and_pandas_read_ticks_beyond_the_years_1_to_9999() -> None:
    """A raw pyarrow OverflowError ("date value out of range"): the time
    columns were read as Python datetimes, which hold the years 1-9999."""
    utc = pa.timestamp("us", tz="UTC")
    table = pa.table({"ts": pa.array([YEAR_10000, YEAR_MINUS_100], utc), "v": [1, 2]})
    expected = Cht(
        [(YEAR_MINUS_100, YEAR_MINUS_100 + 1, {"v": 2}), (YEAR_10000, YEAR_10000 + 1, {"v": 1})]
    )
    assert Stream.from_arrow(table, start="ts").to_cht() == expected
    df = pd.DataFrame(
        {
            "ts": np.array(
                ["10000-01-01T00:00:00", "-0100-01-01T00:00:00"], dtype="datetime64[us]"
            ),
            "v": [1, 2],
        }
    )
    assert Stream.from_pandas(df, start="ts").to_cht() == expected


def test_to_arrow_output_at_times_last_tick_reads_back() -> None:
    """The documented point_end result [INFINITY - 1, INFINITY) that
    to_arrow writes (294247-01-10 04:00:54.775806) could not be read back."""
    df = pd.DataFrame(
        {
            "s": pd.to_datetime(["2024-01-01"], utc=True),
            "e": pd.to_datetime([None], utc=True),
            "v": [2.0],
        }
    )
    q = Stream.from_pandas(df, start="s", end="e", shape="edge").snapshot_window()
    out = q.aggregate("stats.mean", value="v", output_policy="point_end").to_arrow()
    back = Stream.from_arrow(out, start="start", end="end", shape="edge")
    assert back.to_cht() == Cht([(INFINITY - 1, INFINITY, {"mean": 2.0})])
    assert back.to_arrow().column("start").cast(pa.int64()).to_pylist() == [INFINITY - 1]


def test_time_units_are_scaled_exactly_and_minus_2_63_is_no_time() -> None:
    table = pa.table(
        {
            "s": pa.array([1, 2], pa.timestamp("s")),
            "ms": pa.array([5, 6], pa.timestamp("ms")),
            "ns": pa.array([7_000, 8_000], pa.timestamp("ns")),
            "d32": pa.array([3, 4], pa.date32()),
            "d64": pa.array([86_400_000, 0], pa.date64()),
        }
    )
    starts = {
        c: sorted(e.start for e in Stream.from_arrow(table, start=c).to_cht())
        for c in table.column_names
    }
    assert starts == {
        "s": [1_000_000, 2_000_000],
        "ms": [5_000, 6_000],
        "ns": [7, 8],
        "d32": [259_200_000_000, 345_600_000_000],
        "d64": [0, 86_400_000_000],
    }
    nothing = pa.table({"ts": pa.array([5, -(2**63)], pa.timestamp("us", tz="UTC")), "v": [1, 2]})
    with pytest.raises(InvalidEventError) as info:
        Stream.from_arrow(nothing, start="ts")
    assert str(info.value).startswith(
        "invalid event: 'ts' is not a valid time; row 1: "
        "{'ts': '-290308-12-21T19:59:05.224192Z', 'v': 2}. 1 invalid row in all"
    )
    dropped = Stream.from_arrow(nothing, start="ts", on_invalid="drop")
    assert dropped.to_cht() == Cht([(5, 6, {"v": 1})])
    assert dropped.metrics.invalid_rows() == {"'ts' is not a valid time": 1}
    # seconds beyond the tick range: no time either (not wrapped around)
    far = pa.table({"ts": pa.array([2**62], pa.timestamp("s")), "v": [1]})
    with pytest.raises(InvalidEventError, match="'ts' is not a valid time; row 0"):
        Stream.from_arrow(far, start="ts")


def test_a_payload_timestamp_beyond_datetime_is_named_by_column_and_row() -> None:
    """A UDM gets a payload timestamp as a datetime, which cannot hold it:
    refused with the column, the row, the exact value and the way out."""
    seen = pa.array([0, 2**62], pa.timestamp("us", tz="UTC"))
    table = pa.table({"ts": pa.array([1, 2], pa.int64()), "seen": seen})
    with pytest.raises(InvalidEventError) as info:
        Stream.from_arrow(table, start="ts")
    assert str(info.value).startswith(
        "column 'seen', row 1: +148108-07-06T14:00:27.387904Z is outside the years 1-9999 "
        "a Python datetime holds"
    )
    assert "table['seen'].cast(pa.timestamp('us')).cast('int64')" in str(info.value)
    # as the error says: int64 microseconds keep the value exactly
    ticks = table.set_column(1, "seen", table["seen"].cast(pa.timestamp("us")).cast("int64"))
    assert Stream.from_arrow(ticks, start="ts").to_cht() == Cht(
        [(1, 2, {"seen": 0}), (2, 3, {"seen": 2**62})]
    )
    # a date64 (milliseconds) too, its value shown and the same way out
    days = pa.array([0, 253402300800000], pa.int64()).cast(pa.date64())
    dated = pa.table({"ts": pa.array([1, 2], pa.int64()), "seen": days})
    with pytest.raises(InvalidEventError, match=r"row 1: \+10000-01-01T00:00:00\.000000Z is"):
        Stream.from_arrow(dated, start="ts")
    as_ticks = dated.set_column(1, "seen", dated["seen"].cast(pa.timestamp("us")).cast("int64"))
    assert Stream.from_arrow(as_ticks, start="ts").to_cht() == Cht(
        [(1, 2, {"seen": 0}), (2, 3, {"seen": 253402300800000000})]
    )
    within = pa.table(
        {"ts": [1], "seen": pa.array([dt.datetime(9999, 12, 31)], pa.timestamp("us"))}
    )
    assert Stream.from_arrow(within, start="ts").to_cht() == Cht(
        [(1, 2, {"seen": dt.datetime(9999, 12, 31)})]
    )


# -------------------------------------- B10: an int beyond int64 in pandas


def test_an_int_beyond_int64_in_a_pandas_column_is_named() -> None:
    """A raw "OverflowError: Python int too large to convert to C long"."""
    df = pd.DataFrame({"ts": [1, 2], "n": [1, 2**70]})
    with pytest.raises(InvalidEventError) as info:
        Stream.from_pandas(df, start="ts")
    assert str(info.value).startswith(
        f"column 'n', row 1: the integer {2**70} is beyond int64, the widest integer"
    )
    assert "df['n'] = df['n'].map(decimal.Decimal)" in str(info.value)
    # the way out the error gives keeps the value exact
    df["n"] = df["n"].map(decimal.Decimal)
    assert Stream.from_pandas(df, start="ts").to_cht() == Cht(
        [(1, 2, {"n": decimal.Decimal(1)}), (2, 3, {"n": decimal.Decimal(2**70)})]
    )
    mixed = pd.DataFrame({"ts": [1, 2], "n": [-1, 2**63]})  # uint64 alone would do
    with pytest.raises(
        InvalidEventError, match=f"column 'n', row 1: the integer {2**63} is beyond"
    ):
        Stream.from_pandas(mixed, start="ts")


# ---------------------------- B9: an output without rows keeps its columns


def dropped_all() -> Stream:
    df = pd.DataFrame({"ts": [None], "k": ["a"], "v": [1.0]})
    return Stream.from_pandas(df, start="ts", key="k", on_invalid="drop")


def test_an_empty_output_has_the_key_and_result_columns_typed() -> None:
    """Only start and end were left when every row was dropped."""
    q = dropped_all().tumbling_window(10).aggregate("stats.mean", value="v")
    assert q.to_arrow().schema == pa.schema(
        [("start", pa.int64()), ("end", pa.int64()), ("k", pa.string()), ("mean", pa.float64())]
    )
    frame = q.to_pandas()
    assert list(frame.columns) == ["start", "end", "k", "mean"] and len(frame) == 0
    # as with one row
    one = pd.DataFrame({"ts": [1], "k": ["a"], "v": [1.0]})
    q1 = Stream.from_pandas(one, start="ts", key="k").tumbling_window(10)
    assert q1.aggregate("stats.mean", value="v").to_arrow().schema.names == frame.columns.tolist()
    # no window: the source's columns; a named aggregate and an untyped
    # result (stats.max returns Any): null type; a declared record's fields
    assert dropped_all().to_arrow().schema.names == ["start", "end", "k", "v"]
    named = dropped_all().tumbling_window(10).aggregate(m=("stats.mean", "v"), x=("stats.max", "v"))
    assert [(f.name, str(f.type)) for f in named.to_arrow().schema][2:] == [
        ("k", "string"),
        ("m", "double"),
        ("x", "null"),
    ]
    df = pd.DataFrame({"t": pd.to_datetime(["2024-01-01"], utc=True), "p": [1.0]})
    none = Stream.from_pandas(df, start="t").where(lambda p: False).tumbling_window(100)
    out = none.apply("patterns.double_bottom", value="p").to_arrow()
    assert [(f.name, str(f.type)) for f in out.schema] == [
        ("start", "timestamp[us, tz=UTC]"),
        ("end", "timestamp[us, tz=UTC]"),
        ("first_bottom", "double"),
        ("peak", "double"),
        ("second_bottom", "double"),
        ("breakout", "double"),
        ("first_bottom_at", "timestamp[us, tz=UTC]"),
        ("second_bottom_at", "timestamp[us, tz=UTC]"),
    ]


def test_run_engine_local_writes_the_columns_of_an_empty_result(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("ts,k,v\nbad,a,1.0\n")
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts, key: k, on_invalid: drop}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.mean\nvalue: v\n"
    )
    for fmt in ("csv", "parquet"):
        out = tmp_path / fmt
        args = ["run", str(spec), "-o", str(out), "--engine", "local", "--format", fmt]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1  # every row dropped: an error, the files written
        part = out / "q" / f"part-00000.{fmt}"
        if fmt == "csv":
            assert part.read_text() == "start,end,k,mean\n"
        else:
            assert pq.read_table(part).schema.names == ["start", "end", "k", "mean"]
            assert str(pq.read_table(part).schema.field("mean").type) == "double"


class Picked(TypedDict):
    x: float


def pick(left: dict[str, Any], right: dict[str, Any]) -> Picked:
    return {"x": left["v"]}


def test_an_empty_join_has_its_columns_typed() -> None:
    """A join without pairs kept no column with ``select=`` (even a declared
    one) and typed its payload columns ``null`` without it (black-box round 10)."""
    a = pa.table({"ts": pa.array([1, 20], pa.int64()), "k": ["a", "b"], "v": [1.0, 2.0]})
    b = pa.table({"ts": pa.array([5], pa.int64()), "k": ["a"], "v": [3.0]})  # no pair
    left = Stream.from_arrow(a, start="ts", key="k")
    right = Stream.from_arrow(b, start="ts", key="k")
    picked = left.join(right, on="k", select=pick).to_arrow()
    assert picked.num_rows == 0
    assert [(f.name, str(f.type)) for f in picked.schema][2:] == [("k", "string"), ("x", "double")]
    plain = left.join(right, on="k").to_arrow()
    assert [(f.name, str(f.type)) for f in plain.schema][2:] == [
        ("k", "string"),
        ("v_left", "double"),
        ("v_right", "double"),
    ]
    # a select without a declared record: the on columns; the rest only rows could show
    untyped = left.join(right, on="k", select=lambda a, b: {"x": a["v"]}).to_arrow()
    assert untyped.schema.names == ["start", "end", "k"]
    ab = pa.table({"ts": pa.array([1], pa.int64()), "k": ["a"], "v": [3.0]})  # one pair
    partner = Stream.from_arrow(ab, start="ts", key="k")
    one = left.join(partner, on="k", select=lambda a, b: {"x": 1})
    assert one.to_arrow().schema.names == ["start", "end", "k", "x"]
