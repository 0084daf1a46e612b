"""Errors a user can act on (issue #29): udm's own error classes and
messages from every path, the line of the UDM's code that raised, and no
Java stack traces in the terminal unless asked for."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import Stream, UdmInvocationError
from udm.host.query import InvalidEventError
from udm.sdk import aggregate

runner = CliRunner()
HERE = Path(__file__)


@aggregate
def too_big(values: list[float]) -> float:
    total = sum(values)
    if total > 5:
        raise ValueError(f"too big: {total}")  # the line the errors must show
    return total


RAISING_LINE = next(
    i for i, line in enumerate(HERE.read_text().splitlines(), 1) if "the line the errors" in line
)


def test_a_udm_that_raises_shows_the_line_in_the_users_code() -> None:
    stream = Stream.from_cht([(1, 2, 2.0), (3, 4, 4.0)]).tumbling_window(10)
    with pytest.raises(UdmInvocationError) as info:
        stream.aggregate(too_big).to_cht()
    assert str(info.value) == (
        "UDM 'too_big' failed on window [0, 10): ValueError: too big: 6.0; raised at "
        f'{HERE}:{RAISING_LINE} in too_big: raise ValueError(f"too big: {{total}}")  '
        "# the line the errors must show"
    )


@pytest.mark.spark
def test_to_dataframe_actions_raise_udms_errors_without_java_traces(spark: Any, capfd: Any) -> None:
    """to_cht() raised udm's error, to_dataframe().collect() a raw
    PythonException / SparkRuntimeException; every failed job logged a
    Java stack trace (about 40 lines) on stderr."""
    df = spark.createDataFrame([("a", 1, 2.0), ("a", 3, 4.0)], "k string, ts long, v double")
    query = Stream.from_dataframe(df, start="ts", key="k").tumbling_window(10)
    out = query.aggregate(too_big, value="v").to_dataframe()
    expected = (
        "UDM 'too_big' failed on window [0, 10) of key 'a': ValueError: too big: 6.0; "
        f"values from column 'v'; raised at {HERE}:{RAISING_LINE} in too_big"
    )
    for action in (
        out.collect,
        out.count,
        lambda: out.orderBy("start").toPandas(),  # derived frames too
        lambda: out.write.mode("overwrite").parquet("/nonexistent/never/written"),
    ):
        with pytest.raises(UdmInvocationError) as info:
            action()
        assert str(info.value).startswith(expected)
        assert info.value.__cause__ is None and info.value.__suppress_context__
        assert "SQLSTATE" not in str(info.value)
    bad = spark.createDataFrame([("a", None, 2.0)], "k string, ts long, v double")
    invalid = Stream.from_dataframe(bad, start="ts").tumbling_window(10)
    with pytest.raises(InvalidEventError) as err:
        invalid.aggregate("stats.mean", value="v").to_dataframe().collect()
    assert str(err.value).startswith("invalid event: 'ts' is null; row: {")
    assert "USER_RAISED_EXCEPTION" not in str(err.value)
    captured = capfd.readouterr()
    assert "at org.apache" not in captured.err and "ERROR Executor" not in captured.err


@pytest.mark.spark
def test_run_shows_udms_message_and_spark_traces_only_with_verbose(
    spark: Any, tmp_path: Path, capfd: Any
) -> None:
    query = tmp_path / "q.py"
    query.write_text(
        textwrap.dedent(
            """\
            from udm.host import Stream
            from test_errors_ux import too_big

            def query(spark):
                df = spark.createDataFrame([(1, 2.0), (3, 4.0)], "ts long, v double")
                s = Stream.from_dataframe(df, start="ts").tumbling_window(10)
                return s.aggregate(too_big, value="v")
            """
        )
    )
    result = runner.invoke(app, ["run", str(query), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert (
        "error: query 'q' failed: UDM 'too_big' failed on window [0, 10): ValueError: too big: "
        f"6.0; values from column 'v'; raised at {HERE}:{RAISING_LINE} in too_big"
    ) in text
    for noise in ("SQLSTATE", "PYTHON_EXCEPTION", "Traceback", "An error occurred while calling"):
        assert noise not in text
    captured = capfd.readouterr()
    assert "at org.apache" not in captured.err and "Traceback" not in captured.err
    verbose = runner.invoke(app, ["run", str(query), "-o", str(tmp_path / "out"), "--verbose"])
    assert verbose.exit_code == 1
    captured = capfd.readouterr()
    assert "PythonException" in captured.err + verbose.output  # Spark's error, asked for


def test_spark_messages_never_show_py4j() -> None:
    from udm.host.spark.errors import spark_message

    exc = RuntimeError(
        "An error occurred while calling o41.load.\n: org.apache.spark.SparkException: boom"
    )
    assert spark_message(exc) == "boom"


def test_a_spec_reports_every_mistake_at_once_in_line_order(tmp_path: Path) -> None:
    """A bad window.size hid the unknown UDM and the missing source until
    the next runs."""
    spec = tmp_path / "a.yaml"
    spec.write_text(
        "source:\n  path: nothere.parquet\n  start: ts\nwindow:\n  kind: tumbling\n"
        "  size: ten\naggregate: stats.meadian\nvalue: temp\n"
    )
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    lines = result.output.removeprefix("error: ").splitlines()
    assert [line.split(": ")[0:2] for line in lines[:3]] == [
        [f"{spec}:2", "source.path"],
        [f"{spec}:6", "window.size"],
        [f"{spec}:7", "aggregate"],
    ]
    assert "no UDM is registered as 'stats.meadian'; did you mean stats.median" in lines[2]


def test_a_fixture_reports_a_misspelt_udm_beside_other_mistakes(tmp_path: Path) -> None:
    """`kind: tumblin` hid a misspelt `udm:`."""
    from udm.testing import FixtureError, load_fixture

    fixture = tmp_path / "b.udm.yaml"
    fixture.write_text(
        "udm: stats.meen\nwindow: {kind: tumblin, size: 10}\ninput: []\nexpected: []\n"
    )
    with pytest.raises(FixtureError) as info:
        load_fixture(fixture)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{fixture}:1: udm: no UDM is registered as 'stats.meen'")
    assert lines[1].startswith(f"{fixture}:2: window.kind: Input should be 'hopping'")
    assert lines[1].endswith("(did you mean 'tumbling'?)")


@pytest.mark.spark
def test_spec_hints_use_the_specs_own_syntax(spark: Any, tmp_path: Path) -> None:
    """An invalid row in a YAML spec's source said on_invalid='drop'."""
    (tmp_path / "r.csv").write_text("ts,v\n1,1.0\n,2.0\n")
    spec = tmp_path / "r.yaml"
    spec.write_text(
        "source:\n  path: r.csv\n  format: csv\n  start: ts\n"
        "window: {kind: tumbling, size: 10}\naggregate: stats.mean\nvalue: v\n"
    )
    result = runner.invoke(app, ["run", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert "invalid event: 'ts' is null" in text
    assert "set source.on_invalid: drop to drop such rows" in text
    assert "on_invalid='drop'" not in text and "stream.metrics" not in text
