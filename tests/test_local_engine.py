"""In-process queries over pandas and Arrow tables, and `udm-cli run
--engine local` (issue #29): no Spark, the same answers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import INFINITY, MIN_TIME, Cht
from udm.host.query import InvalidEventError, Stream

runner = CliRunner()
BASE = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z
MINUTE = 60_000_000
M0 = BASE - BASE % MINUTE  # 22:13:00, the window BASE falls in
T0 = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)
US = dt.timedelta(microseconds=1)


def readings() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": [T0, T0 + US, T0 + 70 * 1_000_000 * US, T0 + 2 * US],
            "k": ["a", "a", "a", "b"],
            "v": [1.0, 3.0, 5.0, 7.0],
        }
    )


def test_from_pandas_runs_in_process_exactly() -> None:
    minute = MINUTE
    s = Stream.from_pandas(readings(), start="ts", key="k").tumbling_window(minute)
    q = s.aggregate("stats.mean", value="v")
    assert q.runs_in_process()
    assert q.to_cht() == {
        "a": Cht([(M0, M0 + minute, 2.0), (M0 + minute, M0 + 2 * minute, 5.0)]),
        "b": Cht([(M0, M0 + minute, 7.0)]),
    }
    out = q.to_pandas()
    assert list(out.columns) == ["start", "end", "k", "mean"]
    assert str(out["start"].dtype) == "datetime64[us, UTC]"
    assert list(out["mean"]) == [2.0, 7.0, 5.0]
    # an Arrow table or batch is the same stream
    table = pa.Table.from_pandas(readings(), preserve_index=False)
    for data in (table, table.to_batches()[0]):
        same = Stream.from_arrow(data, start="ts", key="k").tumbling_window(minute)
        assert same.aggregate("stats.mean", value="v").to_cht() == q.to_cht()


def test_from_pandas_intervals_edges_and_invalid_rows() -> None:
    df = pd.DataFrame(
        {"s": [1, 5, None, 9, None], "e": [3, None, 4, 8, None], "v": [1, 2, 3, 4, 5]}
    )
    edges = Stream.from_pandas(df, start="s", end="e", shape="edge", on_invalid="drop")
    assert edges.to_cht() == Cht([(1, 3, {"v": 1}), (5, INFINITY, {"v": 2})])
    assert edges.metrics.invalid_rows() == {"'s' is null": 2, "'e' is not after 's'": 1}
    assert edges.metrics.rows_read() == 5
    with pytest.raises(InvalidEventError) as info:
        Stream.from_pandas(df, start="s", end="e")
    text = str(info.value)
    assert text.startswith("invalid event: 'e' is null (interval events need an end")
    assert "4 invalid rows in all (" in text and "the first 3: row 1:" in text


def test_from_pandas_null_keys() -> None:
    df = pd.DataFrame({"t": [1, 2, 3], "k": ["a", None, "a"], "v": [1.0, 2.0, 3.0]})
    with pytest.raises(InvalidEventError, match="invalid event: key 'k' is null; row 1"):
        Stream.from_pandas(df, start="t", key="k")
    dropped = Stream.from_pandas(df, start="t", key="k", on_null_key="drop")
    assert dropped.tumbling_window(10).aggregate("stats.max", value="v").to_cht() == {
        "a": Cht([(0, 10, 3.0)])
    }
    kept = Stream.from_pandas(df, start="t", key="k", on_null_key="keep").tumbling_window(10)
    assert kept.aggregate("stats.max", value="v").to_cht() == {
        "a": Cht([(0, 10, 3.0)]),
        None: Cht([(0, 10, 2.0)]),
    }


@pytest.mark.parametrize("times", ["iso", "ticks"])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_run_engine_local_round_trips_exactly(tmp_path: Path, fmt: str, times: str) -> None:
    """A small file's query ran only on Spark (about a minute to start)."""
    from test_cli_output import _read_cht

    (tmp_path / "r.csv").write_text(
        "ts,k,v\n2023-11-14T22:13:20Z,a,1.0\n2023-11-14T22:13:20.000001Z,a,3.0\n"
        "2023-11-14T22:14:30Z,a,5.0\nbad,a,9.0\n"
    )
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts, key: k, on_invalid: drop}\n"
        "window: {kind: tumbling, size: 1m}\naggregate: stats.mean\nvalue: v\n"
    )
    out = tmp_path / "out"
    args = ["run", str(spec), "-o", str(out), "--engine", "local", "--format", fmt]
    result = runner.invoke(app, [*args, "--times", times])
    assert result.exit_code == 0, result.output
    assert "dropped 1 of 4 input rows as invalid: 1 'ts' is not a valid time" in result.output
    assert (out / "q" / "_SUCCESS").exists()
    got = _read_cht(out / "q", fmt)
    assert got == Cht(
        [
            (M0, M0 + MINUTE, {"k": "a", "mean": 2.0}),
            (M0 + MINUTE, M0 + 2 * MINUTE, {"k": "a", "mean": 5.0}),
        ]
    )
    again = runner.invoke(app, [*args, "--times", times])  # its own output: replaced
    assert again.exit_code == 0, again.output


def test_run_engine_local_refuses_what_needs_spark(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("ts,v\n1,1.0\n")
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts, where: 'v > 0'}\n"
        "window: {kind: tumbling, size: 10}\naggregate: stats.mean\nvalue: v\n"
    )
    result = runner.invoke(app, ["run", str(spec), "--engine", "local", "-o", str(tmp_path)])
    assert result.exit_code == 1
    # at the field's line (it was reported with no line, at the spec)
    assert f"{spec}:1: source.where: 'v > 0' is a Spark SQL condition" in result.output.replace(
        "\n", ""
    )
    py = tmp_path / "p.py"
    py.write_text("def query(spark):\n    return spark.range(3)\n")
    result = runner.invoke(app, ["run", str(py), "--engine", "local", "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "AttributeError" in result.output  # spark is None: the file's own line is named


def test_declared_time_fields_are_timestamps_in_process_too() -> None:
    """As on Spark: double_bottom's *_at fields follow the stream's times."""
    us = dt.timedelta(microseconds=1)
    df = pd.DataFrame({"t": [T0 + i * us for i in range(5)], "p": [10.0, 8.0, 9.5, 8.1, 10.0]})
    q = Stream.from_pandas(df, start="t").tumbling_window(3_600_000_000)
    out = q.apply("patterns.double_bottom", value="p", tolerance=0.05).to_arrow()
    assert str(out.schema.field("first_bottom_at").type) == "timestamp[us, tz=UTC]"
    (row,) = out.to_pylist()
    assert (row["first_bottom_at"], row["second_bottom_at"]) == (T0 + us, T0 + 3 * us)
    ticks = pd.DataFrame({"t": list(range(5)), "p": [10.0, 8.0, 9.5, 8.1, 10.0]})
    q = Stream.from_pandas(ticks, start="t").tumbling_window(100)
    (row,) = q.apply("patterns.double_bottom", value="p", tolerance=0.05).to_arrow().to_pylist()
    assert (row["first_bottom_at"], row["second_bottom_at"]) == (1, 3)


def test_to_pandas_keeps_integers_with_nulls_exact() -> None:
    """Found by black-box testing: an integer column with a null (a union's
    missing column) became float64, so 2**53 + 1 came back changed."""
    from udm.host.query import Stream

    a = Stream.from_cht([(1, 5, {"k": 1, "v": 2**53 + 1})], key="k")
    b = Stream.from_cht([(2, 6, {"k": 1, "w": 7})], key="k")
    frame = a.union(b).to_pandas()
    assert str(frame["v"].dtype) == "Int64" and str(frame["w"].dtype) == "Int64"
    assert frame["v"].iloc[0] == 2**53 + 1 and frame["w"].iloc[1] == 7
    assert frame["v"].isna().tolist() == [False, True]
    assert str(frame["k"].dtype) == "int64"  # no nulls: as pyarrow converts it


def open_edge_last_tick() -> Stream:
    """Found by black-box testing: a count-by-end window over an open edge
    event outputs time's last tick [INFINITY - 1, INFINITY) (concepts.md),
    the year 294247, which Python's datetime cannot hold: to_pandas,
    to_arrow and the local CLI raised OverflowError."""
    df = pd.DataFrame({"ts": [T0], "te": pd.to_datetime([None], utc=True), "v": [1.0]})
    s = Stream.from_pandas(df, start="ts", end="te", shape="edge")
    return s.count_window(1, by="end").aggregate("stats.max", value="v")


def test_the_last_tick_is_a_timestamp_exact_to_the_tick() -> None:
    q = open_edge_last_tick()
    assert q.to_cht() == Cht([(INFINITY - 1, INFINITY, 1.0)])
    table = q.to_arrow()
    assert str(table.schema.field("start").type) == "timestamp[us, tz=UTC]"
    assert table.column("start").cast(pa.int64()).to_pylist() == [INFINITY - 1]
    assert table.column("end").to_pylist() == [None]
    frame = q.to_pandas()
    assert frame["start"].astype("int64").tolist() == [INFINITY - 1]
    assert frame["end"].isna().all()
    # a snapshot window's point at its end, and MIN_TIME, exact too (as
    # Spark's timestamp_micros gives them, not datetime.min)
    s = Stream.from_cht([(T0, "inf", 1.0)], timestamps=True).snapshot_window()
    ends = s.aggregate("stats.max", output_policy="point_end").to_arrow()
    assert ends.column("start").cast(pa.int64()).to_pylist() == [INFINITY - 1]
    first = Stream.from_cht([(MIN_TIME, 5, 1)], timestamps=True).snapshot_window()
    out = first.aggregate("stats.max").to_arrow()
    assert out.column("start").cast(pa.int64()).to_pylist() == [MIN_TIME]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_run_engine_local_writes_the_last_tick(tmp_path: Path, fmt: str) -> None:
    py = tmp_path / "q.py"
    py.write_text(
        "from test_local_engine import open_edge_last_tick\n\n"
        "def queries(spark):\n    return {'last': open_edge_last_tick()}\n"
    )
    for times in ("iso", "ticks"):
        out = tmp_path / times
        args = ["run", str(py), "-o", str(out), "--engine", "local", "--format", fmt]
        result = runner.invoke(app, [*args, "--times", times])
        assert result.exit_code == 0, result.output
        part = out / "last" / f"part-00000.{fmt}"
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(part)
            assert table.column("start").cast(pa.int64()).to_pylist() == [INFINITY - 1]
            continue
        text = part.read_text()
        if times == "iso":  # as Spark writes it
            assert "+294247-01-10T04:00:54.775806Z" in text
            assert "+294247-01-10 04:00:54.775806" in result.output  # the preview
        else:
            assert str(INFINITY - 1) in text and str(INFINITY) in text


def test_nanosecond_times_are_refused_with_how_to_round_them() -> None:
    """Found by black-box testing: the error said only "'ts' is not a valid
    time ... pass on_invalid='drop'", where rounding keeps every row."""
    ts = pd.to_datetime(["2026-01-01 00:00:00.000000001", "2026-01-01 00:00:00.000001"], utc=True)
    df = pd.DataFrame({"ts": ts, "v": [1, 2]})
    for read in (Stream.from_pandas, Stream.from_arrow):
        data = df if read is Stream.from_pandas else pa.Table.from_pandas(df)
        with pytest.raises(InvalidEventError) as info:
            read(data, start="ts")
        text = str(info.value)
        assert text.startswith("invalid event: 'ts' has sub-microsecond precision")
        assert "df['ts'] = df['ts'].dt.floor('us')" in text
        assert "on_invalid" not in text
    df["ts"] = df["ts"].dt.floor("us")
    assert Stream.from_pandas(df, start="ts").to_cht() == Cht(
        [
            (1_767_225_600_000_000, 1_767_225_600_000_001, {"v": 1}),
            (1_767_225_600_000_001, 1_767_225_600_000_002, {"v": 2}),
        ]
    )


def test_run_engine_local_reads_empty_csv_fields_as_null_as_spark_does(tmp_path: Path) -> None:
    """An empty CSV key field was the key "" locally (a group of its own,
    uncounted) and null on Spark (refused, or dropped under
    ``on_null_key: drop``); Spark's reader reads a quoted "" as null too."""
    from test_cli_output import _read_cht

    (tmp_path / "r.csv").write_text(
        "k,ts,v\na,2024-01-01T00:00:00.000001Z,1.5\n,2024-01-01T00:00:03Z,2.5\n"
        '"",2024-01-01T00:00:04Z,3.5\n'
    )
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "source: {path: r.csv, start: ts, key: k}\n"
        "window: {kind: tumbling, size: 10s}\naggregate: stats.mean\nvalue: v\n"
    )
    out = tmp_path / "out"
    args = ["run", str(spec), "-o", str(out), "--engine", "local", "--format", "csv"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1
    assert "key 'k' is null" in refused.output
    spec.write_text(spec.read_text().replace("key: k}", "key: k, on_null_key: drop}"))
    result = runner.invoke(app, [*args, "--max-dropped", "1"])
    assert result.exit_code == 0, result.output
    assert "dropped 2 of 3 input rows as invalid: 2 key 'k' is null" in result.output
    w0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
    assert _read_cht(out / "q", "csv") == Cht([(w0, w0 + 10_000_000, {"k": "a", "mean": 1.5})])


# ---------------- black-box round 5: object columns and nanoseconds in pandas


def test_nanoseconds_in_an_object_time_column_are_refused_as_in_a_datetime_column() -> None:
    """pyarrow floored them to microseconds: the events moved, silently."""
    ts = [pd.Timestamp("2024-01-01 00:00:00.000001999"), pd.Timestamp("2024-01-01 00:00:00.000002")]
    for column in (pd.Series(ts), pd.Series(ts, dtype=object)):
        df = pd.DataFrame({"ts": column, "k": ["a", "a"]})
        with pytest.raises(InvalidEventError, match="'ts' has sub-microsecond precision"):
            Stream.from_pandas(df, start="ts", key="k")
    whole = pd.DataFrame({"k": ["a"], "ts": pd.Series(ts[1:], dtype=object)})
    cht = Stream.from_pandas(whole, start="ts", key="k").to_cht()
    assert cht == {"a": Cht([(1704067200000002, 1704067200000003, {"k": "a"})])}


def test_an_object_time_column_of_mixed_kinds_drops_and_counts_the_odd_rows() -> None:
    """ints with a string, or with a datetime, in one column: a raw
    ArrowInvalid, even with on_invalid="drop"."""
    df = pd.DataFrame({"s": [1, 5, 3], "e": [2, 9, "x"], "k": ["a"] * 3})
    s = Stream.from_pandas(df, start="s", end="e", key="k", on_invalid="drop")
    assert s.to_cht() == {"a": Cht([(1, 2, {"k": "a"}), (5, 9, {"k": "a"})])}
    assert s.metrics.invalid_rows() == {"'e' is not a valid time (str in a column of int ticks)": 1}
    mixed = pd.DataFrame({"s": [1, dt.datetime(2024, 1, 1), None], "k": ["a"] * 3})
    with pytest.raises(InvalidEventError, match=r"row 1: .*datetime in a column of int ticks"):
        Stream.from_pandas(mixed, start="s", key="k")


def test_to_pandas_and_to_arrow_keep_a_payloads_nanoseconds() -> None:
    """A payload Timestamp with nanoseconds came out floored to microseconds."""
    d = pd.Timestamp("2024-01-01 00:00:00.000000001", tz="UTC")
    p = pd.DataFrame({"ts": [1], "k": ["a"], "d": [d]})
    stream = Stream.from_pandas(p, start="ts", key="k")
    assert stream.to_pandas()["d"][0] == d
    assert stream.to_arrow().column("d").type == pa.timestamp("ns", tz="UTC")


def test_a_nan_from_pandas_is_pandas_missing_value_and_from_arrow_a_nan() -> None:
    """docs/concepts.md said NaN keys read from pandas are one NaN group;
    from_pandas reads pandas' missing value as null (documented now)."""
    import math

    df = pd.DataFrame({"ts": [1, 2], "k": [float("nan")] * 2, "v": [1.0, 2.0]})
    with pytest.raises(InvalidEventError, match="key 'k' is null"):
        Stream.from_pandas(df, start="ts", key="k")
    kept = Stream.from_pandas(df, start="ts", key="k", on_null_key="keep").to_cht()
    assert list(kept) == [None]
    table = pa.table({"ts": [1, 2], "k": [float("nan")] * 2, "v": [1.0, 2.0]})
    (key,) = Stream.from_arrow(table, start="ts", key="k").to_cht()
    assert math.isnan(key)


def test_explain_names_the_sources_null_key_policy() -> None:
    """explain() showed on_invalid=drop but not on_null_key=drop."""
    df = pd.DataFrame({"ts": [1, 2], "k": ["a", None]})
    stream = Stream.from_pandas(df, start="ts", key="k", on_null_key="drop")
    assert "source: 1 in-memory events; on_invalid=raise; on_null_key=drop" in stream.explain()
    assert "on_null_key" not in Stream.from_pandas(df, start="ts").explain()
