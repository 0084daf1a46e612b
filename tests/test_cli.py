"""udm-cli: list, show, version, new's checks, run and explain (test is in
test_fixtures.py, new's full round trip in test_template.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app

runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_help_lists_every_command_and_completion() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("list", "show", "test", "new", "run", "explain", "version"):
        assert command in result.output
    assert "--install-completion" in result.output


def test_every_command_has_examples_in_its_help() -> None:
    for command in ("list", "show", "test", "new", "run", "explain"):
        result = invoke(command, "--help")
        assert result.exit_code == 0 and "Examples" in result.output, command


def test_list_table_and_json() -> None:
    table = invoke("list", "--library", "stats")
    assert table.exit_code == 0
    assert "stats.median" in table.output and "stats.mean" in table.output
    doc = json.loads(invoke("list", "--json").output)
    by_name = {u["name"]: u for u in doc["udms"]}
    assert by_name["stats.mean"]["flavor"] == "time-insensitive incremental aggregate"
    assert {"invertible", "mergeable"} <= set(by_name["stats.mean"]["properties"])
    assert by_name["patterns.double_bottom"]["library"] == "patterns"
    assert doc["failed"] == []


def test_list_an_unknown_library() -> None:
    result = invoke("list", "--library", "stat")
    assert result.exit_code == 1
    assert "no library 'stat' is installed; installed: " in result.output
    assert "(did you mean stats?)" in result.output


def test_show_and_unknown_names() -> None:
    shown = invoke("show", "stats.quantile")
    assert shown.exit_code == 0
    assert "stats.quantile  (time-insensitive non-incremental aggregate)" in shown.output
    assert "library:    stats (udm-stats 0.1.0)" in shown.output
    assert '.aggregate("stats.quantile")' in shown.output
    unknown = invoke("show", "stats.medain")
    assert unknown.exit_code == 1
    assert "no UDM is registered as 'stats.medain'; did you mean stats.median" in unknown.output
    assert invoke("inspect", "stats.quantile").output == shown.output  # a hidden alias
    udf = invoke("show", "stats.zscore")
    assert udf.exit_code == 0
    assert 'zscore = get_registry().resolve("stats.zscore")\n' in udf.output
    assert 'stream.select(out=lambda p: zscore(p["x"], p["mean"], p["stdev"]))' in udf.output


def test_the_command_list_has_one_line_per_command() -> None:
    listing = invoke("--help").output
    assert "Create a UDM package from the template (entry point," in listing
    assert "inspect" not in listing


def test_new_refuses_bad_names(tmp_path: Path) -> None:
    """A name PyPI would not take is refused saying what it may hold (a
    name of non-ASCII letters was refused as "not an identifier", which
    it is in Python), with a name that would do."""
    rule = (
        "must be a Python identifier of lowercase ASCII letters (a-z), digits and _, starting "
        "with a letter, not ending with _ and not a Python keyword, e.g. "
    )
    # a leading or trailing _ became a leading or trailing - of the
    # distribution's name, which PEP 508 refuses (the package did not build)
    bad = [("My-Udms", "my_udms"), ("ünï", "uni"), ("class", "class_udms")]
    bad += [("_x", "x"), ("x_", "x"), ("__x", "x"), ("1x", "udms_1x")]
    for name, example in bad:
        result = invoke("new", name, "--no-input", "-o", str(tmp_path))
        assert result.exit_code == 1
        assert f"error: library name {name!r} {rule}{example}" in " ".join(result.output.split())
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("udm", "is the name of a module that is already importable here"),
        ("numpy", "is the name of a module that is already importable here (at "),
        ("json", "is the name of a module of Python's standard library"),
        ("stats", "is already an installed UDM library's name (udm-stats)"),
    ],
)
def test_new_refuses_names_that_clash_before_writing(
    tmp_path: Path, name: str, reason: str
) -> None:
    """A package named udm or json shadowed (or was shadowed by) a module,
    and one named stats clashed with udm-stats: each installed but never
    worked. Refused before anything is written, saying what to pick."""
    result = invoke("new", name, "--no-input", "-o", str(tmp_path))
    assert result.exit_code == 1
    assert f"error: library name {name!r} {reason}" in result.output
    assert f"pick another name, e.g. {name}_udms" in result.output
    assert list(tmp_path.iterdir()) == []


def test_new_refuses_an_output_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").touch()
    result = invoke("new", "lab", "--no-input", "-o", str(tmp_path / "afile"))
    assert result.exit_code == 2
    assert "is a file, not a folder; name a folder" in result.output
    assert "Traceback" not in result.output


def test_new_asks_only_for_what_the_arguments_do_not_say(tmp_path: Path) -> None:
    """The library name is the argument (never asked again, so never
    unchecked); --author is given; description and version are asked."""
    result = runner.invoke(
        app,
        ["new", "sensors", "-o", str(tmp_path), "--author", "Ada"],
        input="Sensor UDMs\n0.2.0\n",
    )
    assert result.exit_code == 0, result.output
    assert "Library" not in result.output and "Author" not in result.output
    assert "Description [User-defined temporal modules for udm]: " in result.output
    pyproject = (tmp_path / "sensors-udms" / "pyproject.toml").read_text()
    assert 'version = "0.2.0"' in pyproject and 'name = "Ada"' in pyproject
    assert f"udm-cli test {tmp_path / 'sensors-udms'}\n" in result.output


def test_list_never_breaks_a_name_nor_a_word() -> None:
    """In a wide terminal the flavor and properties wrap between words,
    never a name (nor a kind, library or version). In a narrow one (where
    they were squeezed to a few letters a line, or to nothing at 70
    columns) each UDM is a line with its flavor and properties below;
    piped, the table is one line per UDM."""
    names = json.loads(invoke("list", "--json").output)["udms"]
    wide = runner.invoke(app, ["list"], env={"COLUMNS": "120"})
    assert wide.exit_code == 0
    assert max(len(line) for line in wide.output.splitlines()) <= 120
    rows = [line for line in wide.output.splitlines() if line.startswith("│")]
    first_cells = [line.split("│")[1].strip() for line in rows]
    assert [c for c in first_cells if c] == [u["name"] for u in names]
    words = {w for line in rows for cell in line.split("│")[3:5] for w in cell.split()}
    assert "empty_preserving," in words and "time-sensitive" in words  # whole words
    for columns in ("70", "80"):
        narrow = runner.invoke(app, ["list"], env={"COLUMNS": columns})
        assert narrow.exit_code == 0
        lines = narrow.output.splitlines()
        assert lines[0] == "UDMs"
        assert max(len(line) for line in lines) <= int(columns)
        heads = [line for line in lines[1:] if not line.startswith(" ")]
        assert heads == [f"{u['name']}  {u['kind']}  {u['library']} {u['version']}" for u in names]
        between = lines[lines.index("patterns.between  function  patterns 0.1.0") + 1 :][:2]
        text = " ".join(line.strip() for line in between)
        assert text.startswith("function; deterministic, empty_preserving, order_insensitive")
    piped = runner.invoke(app, ["list"], env={"COLUMNS": None})
    rows = [line for line in piped.output.splitlines() if line.startswith("│")]
    assert len(rows) == len(names)  # one line each: nothing wrapped
    between = next(r for r in rows if "patterns.between " in r)
    assert [c.strip() for c in between.split("│")[1:-1]] == [
        "patterns.between",
        "function",
        "function",
        "deterministic, empty_preserving, order_insensitive",
        "patterns",
        "0.1.0",
    ]


def test_show_gives_required_arguments_as_placeholders() -> None:
    shown = invoke("show", "patterns.followed_by")
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    example = lines[lines.index("example:") + 1 :]
    assert example == [
        '  Stream.from_cht(events).tumbling_window(10).apply("patterns.followed_by", '
        'first=<first>, then=<then>, within=<within>).to_cht(engine="reference")',
        "  (replace the <...> placeholders: first, then, within have no default)",
    ]
    one = invoke("show", "patterns.threshold_crossing").output
    assert '.apply("patterns.threshold_crossing", high=<high>).to_cht(' in one
    assert "(replace the <...> placeholders: high has no default)" in one
    # a UDM whose arguments all have defaults: a runnable example, no note
    quantile = invoke("show", "stats.quantile").output
    assert '.aggregate("stats.quantile").to_cht(engine="reference")\n' in quantile
    assert "placeholders" not in quantile


def test_messages_print_brackets_as_written(tmp_path: Path) -> None:
    """Text such as [min, max] or [/oops] in a message is text, not rich
    markup (which dropped the first and crashed on the second)."""
    key = tmp_path / "key.udm.yaml"
    key.write_text('udm: stats.mean\nwindow: {kind: tumbling, size: 10}\n"[/oops]": 1\ninput: []\n')
    choice = tmp_path / "choice.udm.yaml"
    choice.write_text(
        textwrap.dedent(
            """\
            udm: stats.mean
            window: {kind: tumbling, size: 10}
            generate:
              payload: {type: choice, choices: [1, 2], min: 0}
            """
        )
    )
    retract = tmp_path / "retract.udm.yaml"
    retract.write_text(
        "udm: stats.mean\nwindow: {kind: tumbling, size: 10}\n"
        'input:\n  - {retract: "[/b]", new_end: 3}\n'
    )
    result = runner.invoke(app, ["test", str(tmp_path), "--no-pytest"], env={"COLUMNS": "300"})
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # not a MarkupError
    lines = result.output.splitlines()
    assert f"{key}:3: [/oops]: Extra inputs are not permitted" in lines
    assert (
        f"{choice}:4: generate.payload.min: type choice picks from choices and does not use "
        "min; drop min, or use type int or float for values in [min, max]"
    ) in lines
    assert f"{retract}:4: input.0: retract '[/b]' of an event not inserted earlier" in (
        result.output
    )
    failing = tmp_path / "failing"
    failing.mkdir()
    (failing / "n.udm.yaml").write_text(
        textwrap.dedent(
            """\
            name: "[/oops] [bold]not bold[/bold]"
            udm: stats.mean
            window: {kind: tumbling, size: 10}
            input:
              - {insert: a, start: 1, payload: 1}
            expected: []
            """
        )
    )
    result = runner.invoke(app, ["test", str(failing), "--no-pytest"], env={"COLUMNS": "300"})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "│ n.udm.yaml: [/oops] [bold]not bold[/bold] │" in result.output
    assert "FAIL n.udm.yaml: [/oops] [bold]not bold[/bold]  (" in result.output
    unknown = invoke("show", "[/x]")
    assert unknown.exit_code == 1
    assert unknown.output.startswith("error: no UDM is registered as '[/x]'")


def test_run_previews_data_and_names_as_written() -> None:
    """Query names, column names and values in `run`'s preview are data:
    "[INFO]" in a value or "[/x]" in a name is printed, not taken for markup."""
    import io

    from pyspark.sql import types as T
    from rich.console import Console

    from udm.cli.views import preview as _preview

    class FakeFrame:  # the DataFrame methods _preview uses
        columns = ("[b]level[/b]", "msg")
        schema = T.StructType([T.StructField(c, T.StringType()) for c in columns])

        def orderBy(self, *cols: str) -> FakeFrame:
            return self

        def selectExpr(self, *exprs: str) -> FakeFrame:
            return self

        def limit(self, n: int) -> FakeFrame:
            return self

        def collect(self) -> list[tuple[str, str]]:
            return [("[INFO]", "[/x] closed"), ("[bold]", "[min, max]")]

    out = io.StringIO()
    _preview(Console(file=out, width=100), "[/q]: 2 rows", FakeFrame(), 8)
    text = out.getvalue()
    for shown in ("[/q]: 2 rows", "[b]level[/b]", "[INFO]", "[/x] closed", "[bold]", "[min, max]"):
        assert shown in text


def test_new_writes_descriptions_and_authors_as_valid_toml_and_python(tmp_path: Path) -> None:
    import ast
    import tomllib

    description = 'He said "hi" \\ there {{ x }} {% if %} é'
    author = 'Ada "the first" \\ Lovelace'
    result = invoke(
        "new",
        "quoted",
        "--no-input",
        "-o",
        str(tmp_path),
        "--description",
        f"  {description}  ",  # the ends are trimmed
        "--author",
        author,
        "--version",
        "1.0rc1",
    )
    assert result.exit_code == 0, result.output
    pkg = tmp_path / "quoted-udms"
    project = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]
    assert project["description"] == description
    assert project["authors"] == [{"name": author}]
    assert project["version"] == "1.0rc1"
    module = ast.parse((pkg / "quoted" / "__init__.py").read_text())
    assert ast.get_docstring(module, clean=False).splitlines()[0] == f"{description}."  # type: ignore[union-attr]
    readme = (pkg / "README.md").read_text()
    assert f"\n{description}.\n" in readme
    ruff = str(Path(sys.executable).parent / "ruff")
    for check in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [ruff, *check, "--no-cache", "."], cwd=pkg, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--version",
            "not a version",
            "error: --version 'not a version': is not a PEP 440 version, which pip needs to "
            "install the package; use e.g. 0.1.0, 1.0rc1 or 2024.5.1",
        ),
        (
            "--description",
            "two\nlines",
            "error: --description 'two\\nlines': must be one line of text, without control "
            "characters",
        ),
        ("--author", " ", "error: --author ' ': is empty"),
    ],
)
def test_new_refuses_unusable_metadata_before_writing(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    args = ["new", "lab", "--no-input", "-o", str(tmp_path), option, value]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert result.output.splitlines() == [message]
    assert list(tmp_path.iterdir()) == []


def test_new_asks_again_for_a_version_pip_cannot_install(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["new", "sensors", "-o", str(tmp_path), "--author", "Ada", "--description", "D"],
        input="next week\n0.3\n",
    )
    assert result.exit_code == 0, result.output
    assert (
        "Error: version is not a PEP 440 version, which pip needs to install the package; "
        "use e.g. 0.1.0, 1.0rc1 or 2024.5.1\nVersion [0.1.0]: "
    ) in result.output
    assert 'version = "0.3"' in (tmp_path / "sensors-udms" / "pyproject.toml").read_text()


# ------------------------------------------------------------ run and explain

ROWS = [("a", 1, 2.0), ("a", 3, 4.0), ("a", 12, 1.0), ("b", 5, 7.0), ("b", 15, 3.0), ("b", 16, 5.0)]


@pytest.fixture
def readings(spark: Any, tmp_path: Path) -> Path:
    path = tmp_path / "readings.parquet"
    spark.createDataFrame(ROWS, "sensor string, ts long, temp double").write.parquet(str(path))
    return path


def spec(tmp_path: Path, body: str, name: str = "median.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


MEDIAN = """\
    source: {path: readings.parquet, start: ts, key: sensor}
    window: {kind: tumbling, size: 10}
    aggregate: stats.median
    value: temp
    """


@pytest.mark.spark
def test_run_a_yaml_spec(spark: Any, readings: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("run", str(spec(tmp_path, MEDIAN)), "--output", str(out), "--preview", "3")
    assert result.exit_code == 0, result.output
    assert "median: 4 rows" in result.output
    assert f"wrote {out}/median/ (parquet, 4 rows)" in result.output
    rows = spark.read.parquet(str(out / "median")).orderBy("sensor", "start").collect()
    # hand-computed: a: [0,10) 2,4 -> 3; [10,20) 1; b: [0,10) 7; [10,20) 3,5 -> 4
    assert [tuple(r) for r in rows] == [
        (0, 10, "a", 3.0),
        (10, 20, "a", 1.0),
        (0, 10, "b", 7.0),
        (10, 20, "b", 4.0),
    ]


@pytest.mark.spark
def test_run_writes_only_inside_output_name_and_reads_back_as_written(
    spark: Any, readings: Path, tmp_path: Path
) -> None:
    """name: ".." replaced the output folder's parent (its files lost); a
    folder of the user's under OUTPUT/NAME was silently replaced; a path
    with [ ] was written, then read back as a pattern and failed; the JSON
    preview came back with sorted columns and times as text."""
    parent = tmp_path / "parent"
    (parent / "o").mkdir(parents=True)
    (parent / "canary.txt").write_text("keep")
    dots = spec(tmp_path, 'name: ".."\n' + textwrap.dedent(MEDIAN), "dots.yaml")
    result = invoke("run", str(dots), "-o", str(parent / "o"))
    assert result.exit_code == 1
    assert "the output name '..' is not a folder name" in result.output.replace("\n", "")
    assert (parent / "canary.txt").read_text() == "keep"
    mine = tmp_path / "o2" / "median"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    result = invoke("run", str(spec(tmp_path, MEDIAN)), "-o", str(tmp_path / "o2"))
    assert result.exit_code == 1 and "is not an earlier output of Spark" in result.output.replace(
        "\n", ""
    )
    assert (mine / "notes.txt").read_text() == "mine"
    odd = tmp_path / "o [1]"
    result = invoke(
        "run", str(spec(tmp_path, MEDIAN)), "-o", str(odd), "--format", "json", "--preview", "1"
    )
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "start" in line and "end" in line)
    assert [c.strip() for c in header.strip("┃│ ").split("┃" if "┃" in header else "│")] == [
        "start",
        "end",
        "sensor",
        "median",
    ]
    again = invoke("run", str(spec(tmp_path, MEDIAN)), "-o", str(odd))  # its own output: replaced
    assert again.exit_code == 0, again.output


@pytest.mark.spark
def test_run_reports_an_unresolved_where_once_at_its_line(
    spark: Any, readings: Path, tmp_path: Path, capfd: Any
) -> None:
    """PySpark first logged the error's query context with a Java trace at
    ERROR (about 5 KB), then the CLI reported it."""
    bad = spec(
        tmp_path,
        MEDIAN.replace("key: sensor}", 'key: sensor, where: "nosuch > 1"}'),
        "where.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert f"{bad}:1: source.where: [UNRESOLVED_COLUMN" in result.output.replace("\n", "")
    captured = capfd.readouterr()
    assert "SQLQueryContextLogger" not in captured.err + captured.out + result.output


@pytest.mark.spark
def test_run_reports_every_missing_csv_column_at_its_line(spark: Any, tmp_path: Path) -> None:
    """CSV columns are known once Spark reads the file: a missing value
    column had no file:line, and the columns came one run at a time."""
    (tmp_path / "small.csv").write_text("ts,sensor,temp\n1,a,1.0\n")
    bad = spec(
        tmp_path,
        """\
        source: {path: small.csv, format: csv, start: tss, key: sensor}
        window: {kind: tumbling, size: 10}
        aggregate: stats.median
        value: tempp
        """,
        "csv.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    columns = "its columns are ['ts', 'sensor', 'temp']"
    assert f"{bad}:1: source.start: start column 'tss' is not in small.csv; {columns}" in text
    assert f"{bad}:4: value: value column 'tempp' is not in small.csv; {columns}" in text


@pytest.mark.spark
def test_run_a_python_file_with_two_outputs_as_csv(
    spark: Any, readings: Path, tmp_path: Path
) -> None:
    query = tmp_path / "two.py"
    query.write_text(
        textwrap.dedent(
            f"""\
            from udm.host import Stream

            def queries(spark):
                df = spark.read.parquet({str(readings)!r})
                s = Stream.from_dataframe(df, start="ts", key="sensor")
                return {{
                    "means": s.tumbling_window(10).aggregate("stats.mean", value="temp"),
                    "maxima": s.tumbling_window(20).aggregate("stats.max", value="temp"),
                }}
            """
        )
    )
    out = tmp_path / "out"
    result = invoke("run", str(query), "-o", str(out), "--format", "csv", "--preview", "0")
    assert result.exit_code == 0, result.output
    maxima = spark.read.option("header", "true").csv(str(out / "maxima")).orderBy("sensor")
    assert [tuple(r) for r in maxima.collect()] == [
        ("0", "20", "a", "4.0"),
        ("0", "20", "b", "7.0"),
    ]
    means = spark.read.option("header", "true").csv(str(out / "means"))
    assert means.count() == 4


@pytest.mark.spark
def test_run_profile_shows_each_querys_phases_and_spark_work(
    spark: Any, readings: Path, tmp_path: Path
) -> None:
    query = tmp_path / "one.py"
    query.write_text(
        textwrap.dedent(
            f"""\
            from udm.host import Stream

            def query(spark):
                df = spark.read.parquet({str(readings)!r})
                s = Stream.from_dataframe(df, start="ts", key="sensor")
                return s.tumbling_window(10).aggregate("stats.mean", value="temp")
            """
        )
    )
    out = tmp_path / "out"
    result = invoke("run", str(query), "-o", str(out), "--preview", "0", "--profile")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("profile (wall seconds")))
    assert lines[start + 1].startswith("  load (Spark start, queries(spark)): ")
    phases = [x.split(":")[0].strip() for x in lines[start + 3 : start + 6]]
    assert phases == ["plan", "write", "read back"]
    write = lines[start + 4]
    assert "SQL executions" in write and "jobs" in write and "Python workers" in write


@pytest.mark.spark
def test_run_reports_bad_specs_with_file_line_and_field(
    spark: Any, readings: Path, tmp_path: Path
) -> None:
    bad = spec(
        tmp_path,
        """\
        source: {path: readings.parquet, start: ts, key: sensor}
        window: {kind: tumbling, size: ten}
        aggregate: stats.median
        aply: stats.top_k
        """,
        "bad.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert f"{bad}:2: window.size: 'ten' is not a duration" in result.output
    assert f"{bad}:4: aply: Extra inputs are not permitted" in result.output
    nosource = spec(tmp_path, MEDIAN.replace("readings.parquet", "nope.parquet"), "nosrc.yaml")
    result = invoke("run", str(nosource), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1 and "nope.parquet does not exist" in result.output
    result = invoke("run", str(tmp_path / "missing.py"))
    assert result.exit_code == 1 and "no such query file" in result.output
    result = invoke("run", str(spec(tmp_path, MEDIAN)), "--format", "xml")
    assert result.exit_code == 2 and "unknown --format 'xml'" in result.output


@pytest.mark.parametrize(
    ("field", "name", "message"),
    [
        (
            "aggregate",
            "stats.top_k",
            "'stats.top_k' is a time-insensitive non-incremental operator; use apply: for it",
        ),
        (
            "apply",
            "stats.median",
            "'stats.median' is a time-insensitive non-incremental aggregate; use aggregate: for it",
        ),
    ],
)
def test_run_refuses_a_udm_of_the_wrong_kind_before_spark(
    tmp_path: Path, field: str, name: str, message: str
) -> None:
    """A UDO under aggregate: (or a UDA under apply:) was found only once
    Spark had started, in Spark's words."""
    bad = spec(
        tmp_path,
        f"""\
        source: {{path: readings.parquet, start: ts, key: sensor}}
        window: {{kind: tumbling, size: 10}}
        {field}: {name}
        value: temp
        """,
        "kind.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert f"{bad}:3: {field}: {message}" in result.output.replace("\n", "")
    assert "Spark" not in result.output  # refused before Spark started


def test_run_reports_every_pre_spark_mistake_at_once(tmp_path: Path) -> None:
    """An unknown UDM hid a missing source path (fixed one, the next run
    showed the other)."""
    bad = spec(
        tmp_path,
        """\
        source: {path: nothere.parquet, start: ts}
        window: {kind: tumbling, size: 10}
        aggregate: stats.nope
        value: temp
        """,
        "mix.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert f"{bad}:3: aggregate: no UDM is registered as 'stats.nope'" in text
    assert f"{bad}:1: source.path: {tmp_path / 'nothere.parquet'} does not exist" in text


def test_a_field_of_several_forms_is_one_mistake_naming_the_field(tmp_path: Path) -> None:
    """key and value take a name or a list of names: a wrong one read as
    two lines for the internal fields source.key.str and
    source.key.list[str].0."""
    bad = spec(
        tmp_path,
        """\
        source: {path: r.parquet, start: ts, key: [1, sensor]}
        window: {kind: tumbling, size: 10}
        aggregate: stats.max
        value: {a: temp}
        """,
        "forms.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        f"error: {bad}:1: source.key: as str: Input should be a valid string; as list[str]: "
        "item 0: Input should be a valid string",
        f"{bad}:1: source.path: {tmp_path / 'r.parquet'} does not exist",  # at once, too
        f"{bad}:4: value: as str: Input should be a valid string; as list[str]: Input should "
        "be a valid list",
    ]


def test_a_missing_parquet_column_is_reported_with_field_mistakes(tmp_path: Path) -> None:
    """A misspelt window kind hid the Parquet column the data lacks until
    the next run (the column check needed a valid spec)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"ts": [1], "sensor": ["a"], "temp": [1.0]}), tmp_path / "r.parquet")
    bad = spec(
        tmp_path,
        """\
        source: {path: r.parquet, start: tss, key: sensr}
        window: {kind: tumblin, size: 10}
        aggregate: stats.mean
        value: temp
        """,
        "two.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    columns = "its columns are ['ts', 'sensor', 'temp']"
    assert lines[:2] == [
        f"error: {bad}:1: source.start: column 'tss' is not in r.parquet; {columns}",
        f"{bad}:1: source.key: column 'sensr' is not in r.parquet; {columns}",
    ]
    assert lines[2].startswith(f"{bad}:2: window.kind: Input should be 'hopping'")
    assert len(lines) == 3


@pytest.mark.parametrize("kind", ["tumblin", "tumbling"])
def test_an_output_policy_the_udm_cannot_take_is_reported_at_its_line(
    tmp_path: Path, kind: str
) -> None:
    """``output_policy: clip`` on an aggregate was reported only once the
    other field mistakes were fixed, and then at the ``aggregate:`` line."""
    bad = spec(
        tmp_path,
        f"""\
        source: {{path: nothere.parquet, start: ts}}
        window: {{kind: {kind}, size: 10}}
        aggregate: stats.mean
        value: temp
        output_policy: clip
        """,
        "policy.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"), "--engine", "local")
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert (
        f"{bad}:5: output_policy: output policy 'clip' keeps timestamps chosen by the UDM, but "
        "'mean' is a time-insensitive incremental aggregate and does not timestamp its output; "
        "use 'align' or 'point_end'"
    ) in text
    assert f"{bad}:1: source.path: " in text  # with the others, in line order
    assert (f"{bad}:2: window.kind: " in text) == (kind == "tumblin")
    assert ": aggregate:" not in text
    ok = spec(tmp_path, bad.read_text().replace("clip", "point_end"), "ok.yaml")
    assert ": output_policy:" not in invoke("run", str(ok), "-o", str(tmp_path / "o")).output


def test_an_input_the_stream_refuses_is_invalid_unless_expected(tmp_path: Path) -> None:
    """An insert before a CTI and a retraction ending before its start were
    counted FAIL while an insert ending before its start was INVALID; an
    input that is no valid physical stream is INVALID (docs/testing.md),
    and under expected_error it is the error checked."""
    for name, element in (
        ("late", "{cti: 5}\n  - {insert: a, start: 1, payload: 1.0}"),
        ("back", "{insert: a, start: 1, payload: 1.0}\n  - {retract: a, new_end: 0}"),
    ):
        path = tmp_path / f"{name}.udm.yaml"
        body = f"udm: stats.mean\nwindow: {{kind: tumbling, size: 10}}\ninput:\n  - {element}\n"
        path.write_text(body + "expected: []\n")
        result = invoke("test", str(path), "--no-pytest")
        assert result.exit_code == 1
        assert "0 passed, 0 failed, 1 invalid" in result.output
        assert f"{path}:5: input.1: " in result.output.replace("\n", "")
        reason = "before the latest CTI 5" if name == "late" else "is before the event's start 1"
        assert reason in result.output.replace("\n", "")
        path.write_text(body + f"expected_error: {reason!r}\n")
        result = invoke("test", str(path), "--no-pytest")
        assert result.exit_code == 0, result.output
        assert "1 passed, 0 failed" in result.output


def test_run_errors_name_the_field_at_fault_and_the_data_row(tmp_path: Path) -> None:
    """An invalid time in the start column and an argument the UDM does not
    take were blamed on the ``aggregate:`` line, and the row was the
    table's 0-based index (``row 1`` for the second data row)."""
    (tmp_path / "r.csv").write_text("ts,sensor,temp\n2024-01-01T00:00:00Z,a,1.0\nnotatime,b,2.0\n")
    bad = spec(
        tmp_path,
        """\
        name: bad
        source:
          path: r.csv
          start: ts
        window: {kind: tumbling, size: 10s}
        aggregate: stats.mean
        value: temp
        """,
        "row.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"), "--engine", "local")
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert (
        f"{bad}:4: source.start: invalid event: 'ts' is not a valid time; data row 2: "
        "{'ts': 'notatime', 'sensor': 'b', 'temp': 2.0}."
    ) in text
    args = spec(
        tmp_path,
        """\
        source: {path: r.csv, start: ts}
        window: {kind: tumbling, size: 10s}
        aggregate: stats.quantile
        value: temp
        args: {qq: 0.5}
        """,
        "args.yaml",
    )
    (tmp_path / "r.csv").write_text("ts,sensor,temp\n2024-01-01T00:00:00Z,a,1.0\n")
    result = invoke("run", str(args), "-o", str(tmp_path / "out"), "--engine", "local")
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert f"{args}:5: args: cannot create UDM 'quantile' with arguments {{'qq': 0.5}}" in text


def test_a_local_runs_spark_only_source_settings_are_reported_with_the_rest(
    tmp_path: Path,
) -> None:
    """``source.where`` under --engine local was refused only once the
    spec's other mistakes were fixed (black-box round 14)."""
    (tmp_path / "r.csv").write_text("ts,sensor,temp\n2024-01-01T00:00:00Z,a,1.0\n")
    bad = spec(
        tmp_path,
        """\
        source:
          path: r.csv
          start: ts
          where: "sensor = 's1'"
        window: {kind: tumbling, size: 10m}
        apply: stats.top_k
        value: temp
        output_policy: clip
        """,
        "both.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"), "--engine", "local")
    assert result.exit_code == 1
    text = result.output.replace("\n", " ")
    assert f"{bad}:4: source.where: \"sensor = 's1'\" is a Spark SQL condition" in text
    assert f"{bad}:8: output_policy: output policy 'clip'" in text
    assert text.index(":4: source.where") < text.index(":8: output_policy")


@pytest.mark.parametrize("engine", [[], ["--engine", "local"]], ids=["spark", "local"])
def test_a_csv_time_finer_than_a_microsecond_is_invalid_on_both_engines(
    tmp_path: Path, engine: list[str]
) -> None:
    """Spark's CSV schema inference typed the column as timestamps and its
    parser dropped the seventh fraction digit silently (the event moved);
    the local reader refused it."""
    (tmp_path / "r.csv").write_text(
        "ts,temp\n2024-01-01T00:00:00.0000009Z,1.0\n2024-01-01T00:00:00.000002Z,3.0\n"
    )
    query = spec(
        tmp_path,
        """\
        name: fine
        source: {path: r.csv, start: ts, on_invalid: drop}
        window: {kind: tumbling, size: 10s}
        aggregate: stats.mean
        value: temp
        """,
        "fine.yaml",
    )
    out = tmp_path / "out"
    result = invoke("run", str(query), "-o", str(out), "--format", "csv", *engine)
    assert result.exit_code == 0, result.output
    text = result.output.replace("\n", "")
    assert "'ts' has sub-microsecond precision (udm ticks are microseconds)" in text
    rows = "".join(p.read_text() for p in sorted((out / "fine").glob("*.csv")))
    assert rows.splitlines()[1:] == ["2024-01-01T00:00:00.000000Z,2024-01-01T00:00:10.000000Z,3.0"]
    # raised, the advice is in the spec's words, not pandas' (docs/cli.md)
    query.write_text(query.read_text().replace(", on_invalid: drop", ""))
    result = invoke("run", str(query), "-o", str(tmp_path / "out2"), *engine)
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert "round the times" in text and "microseconds (at most six fraction digits)" in text
    assert "df[" not in text and "floor" not in text


@pytest.mark.parametrize("engine", [[], ["--engine", "local"]], ids=["spark", "local"])
def test_a_returns_naming_no_type_is_refused_before_spark(
    tmp_path: Path, engine: list[str]
) -> None:
    """``returns: notatype`` failed on Spark without file:line and ran on
    ``--engine local``; valid one-word DDL types are left alone."""
    bad = spec(
        tmp_path,
        """\
        source: {path: nothere.parquet, start: ts}
        window: {kind: tumbling, size: 10}
        aggregate: stats.mean
        value: temp
        returns: notatype
        """,
        "ret.yaml",
    )
    result = invoke("run", str(bad), "-o", str(tmp_path / "out"), *engine)
    assert result.exit_code == 1
    text = result.output.replace("\n", "")
    assert f"{bad}:5: returns: 'notatype' is not a Spark type; give one in Spark's DDL" in text
    assert "Spark" not in text.split("returns:")[0]  # refused before Spark started
    for ok in ("double", "bigint", "timestamp_ltz", "decimal(10,2)", "array<double>"):
        good = spec(tmp_path, f"source: {{path: x.parquet, start: ts}}\nreturns: {ok}\n", "ok.yaml")
        assert ": returns:" not in invoke("run", str(good), "-o", str(tmp_path / "o")).output


@pytest.mark.spark
def test_run_names_query_mistakes_without_a_traceback(
    spark: Any, readings: Path, tmp_path: Path
) -> None:
    """Names the data does not have, in a YAML spec (file:line: field) or a
    Python query file (file:line of the user's code)."""
    unknown = spec(tmp_path, MEDIAN.replace("stats.median", "stats.meadian"), "unk.yaml")
    result = invoke("run", str(unknown), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert f"{unknown}:3: aggregate: no UDM is registered as 'stats.meadian'; did you mean " in (
        result.output.replace("\n", "")
    )
    nokey = spec(tmp_path, MEDIAN.replace("key: sensor", "key: sensr"), "nokey.yaml")
    result = invoke("run", str(nokey), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert (
        f"{nokey}:1: source.key: column 'sensr' is not in readings.parquet; its columns are "
        "['sensor', 'ts', 'temp']"
    ) in result.output.replace("\n", "")
    query = tmp_path / "pyunk.py"
    query.write_text(
        textwrap.dedent(
            f"""\
            from udm.host import Stream

            def query(spark):
                df = spark.read.parquet({str(readings)!r})
                s = Stream.from_dataframe(df, start="ts", key="sensor")
                return s.tumbling_window(10).aggregate("stats.nope", value="temp")
            """
        )
    )
    result = invoke("run", str(query), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert f"{query}:6: UnknownUdmError: no UDM is registered as 'stats.nope'" in (
        result.output.replace("\n", "")
    )
    assert "Traceback" not in result.output


def test_bad_plot_targets_and_pytest_args_are_refused_first(tmp_path: Path) -> None:
    fixture = tmp_path / "f.udm.yaml"
    fixture.write_text("udm: stats.mean\nwindow: {kind: snapshot}\ninput: []\nexpected: []\n")
    result = invoke("test", str(fixture), "--plot", str(tmp_path / "t.xyz"))
    assert result.exit_code == 2
    assert "use a file ending in .png, .svg, .pdf" in result.output
    result = invoke("test", str(fixture), "--plot", str(tmp_path / "no" / "t.png"))
    assert result.exit_code == 1 and "does not exist" in result.output
    result = invoke("test", str(fixture), "--pytest-args", '"x')
    assert result.exit_code == 2 and "No closing quotation" in result.output


@pytest.mark.spark
def test_run_names_the_failing_udm(spark: Any, readings: Path, tmp_path: Path) -> None:
    failing = spec(tmp_path, MEDIAN.replace("value: temp\n", ""), "nofield.yaml")
    result = invoke("run", str(failing), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "query 'nofield' failed: " in result.output and "UDM 'median'" in result.output


@pytest.mark.spark
def test_explain_and_plot(spark: Any, readings: Path, tmp_path: Path) -> None:
    path = spec(tmp_path, MEDIAN)
    text = invoke("explain", str(path))
    assert text.exit_code == 0, text.output
    assert "Stream plan" in text.output and "aggregate" in text.output
    png = tmp_path / "median.png"
    plotted = invoke("explain", str(path), "--plot", str(png), "--where", "sensor = 'b'")
    assert plotted.exit_code == 0, plotted.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"timeline of a 200-row sample written to {png}" in plotted.output
    frame = tmp_path / "frame.py"
    frame.write_text(f"def query(spark):\n    return spark.read.parquet({str(readings)!r})\n")
    shown = invoke("explain", str(frame), "--plot", str(tmp_path / "f.png"))
    assert shown.exit_code == 0, shown.output
    assert "(a DataFrame, not a udm Stream: nothing to explain)" in shown.output


def test_shipped_yaml_example_is_valid() -> None:
    from udm.cli.queryfile import QuerySpec
    from udm.testing.schema import yaml_documents

    root = Path(__file__).resolve().parent.parent
    ((data, _),) = yaml_documents(root / "examples" / "hourly_median.yaml")
    spec = QuerySpec.model_validate(data)
    assert spec.aggregate == "stats.median" and spec.window.build().hop == 15 * 60 * 1_000_000


@pytest.mark.spark
def test_the_documented_python_query_file(spark: Any, tmp_path: Path) -> None:
    import datetime as dt

    t0 = dt.datetime(2026, 1, 1, 12, 0)
    m = dt.timedelta(minutes=1)
    temps = [29.0, 31.0, 29.0, 32.0, 27.0]
    spark.createDataFrame(
        [("a", t0 + i * m, t) for i, t in enumerate(temps)],
        "sensor string, ts timestamp, temp double",
    ).createOrReplaceTempView("readings")
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    result = invoke("run", str(root / "docs" / "examples" / "cli_query.py"), "-o", str(out))
    assert result.exit_code == 0, result.output
    medians = spark.read.parquet(str(out / "medians")).collect()
    assert [tuple(r) for r in medians] == [(t0, t0 + 10 * m, "a", 29.0)]
    alarms = spark.read.parquet(str(out / "alarms")).collect()
    # above 30 at 12:01 until below 28 at 12:04; 29 at 12:02 keeps it on
    assert [tuple(r) for r in alarms] == [(t0 + m, t0 + 4 * m, "a", 32.0, 3)]


def test_csv_sources_infer_types_unless_the_options_say_otherwise(tmp_path: Path) -> None:
    from udm.cli.queryfile import QuerySpec

    class Stop(Exception):
        pass

    class Reader:
        def __init__(self) -> None:
            self.options_seen: dict[str, str] = {}

        def format(self, fmt: str) -> Reader:
            return self

        def options(self, **opts: str) -> Reader:
            self.options_seen.update(opts)
            return self

        def load(self, path: str) -> Any:
            raise Stop

    class Spark:
        read = Reader()

    (tmp_path / "r.csv").write_text("ts,temp\n1,2.0\n")
    for options, want in (
        ({}, {"header": "true", "inferSchema": "true"}),
        ({"inferSchema": "false"}, {"header": "true", "inferSchema": "false"}),
    ):
        spark = Spark()
        spark.read = Reader()
        query = QuerySpec.model_validate(
            {
                "source": {"path": "r.csv", "format": "csv", "start": "ts", "options": options},
                "window": {"kind": "snapshot"},
                "aggregate": "stats.mean",
            }
        )
        with pytest.raises(Stop):
            query.stream(spark, tmp_path)
        assert spark.read.options_seen == want


@pytest.mark.parametrize("command", ["explain", "run"])
def test_a_spark_that_does_not_start_is_one_line(tmp_path: Path, command: str) -> None:
    """Without Java the CLI printed PySpark's 100-line traceback (black-box
    round 14); a new process, so no session of the test run is reused."""
    query = tmp_path / "q.py"
    query.write_text(
        "from udm.host import Stream\n\n\ndef queries(spark):\n"
        "    s = Stream.from_cht([(0, 1, {'v': 1.0})])\n"
        "    return {'m': s.tumbling_window(10).aggregate('stats.mean', value='v')}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_REMOTE"))}
    env["JAVA_HOME"] = str(tmp_path / "no-java")
    cli = Path(sys.executable).parent / "udm-cli"
    args = [str(cli), command, str(query), *(["-o", str(tmp_path / "out")] * (command == "run"))]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert "error: Spark did not start (PySparkRuntimeError: [JAVA_GATEWAY_EXITED]" in done.stderr
    assert f"JAVA_HOME={tmp_path / 'no-java'}" in done.stderr.replace("\n", "")


def test_an_unknown_udm_in_a_spec_is_reported_before_spark_starts(tmp_path: Path) -> None:
    """The registry needs no Spark: the name is checked with the spec's
    fields, not after a Spark session has been started and the data read."""
    from udm.cli.queryfile import QueryFileError, check_query_file

    unknown = spec(tmp_path, MEDIAN.replace("stats.median", "stats.meadian"), "unk.yaml")
    with pytest.raises(QueryFileError) as err:
        check_query_file(unknown)
    assert any(
        line.startswith(f"{unknown}:3: aggregate: no UDM is registered as 'stats.meadian'; ")
        for line in str(err.value).splitlines()
    )


def test_a_spec_naming_two_udms_is_reported_beside_its_other_mistakes(tmp_path: Path) -> None:
    """Another field's mistake skipped the model's check: "give exactly one
    of aggregate or apply" came only after it was fixed."""
    from udm.cli.queryfile import QueryFileError, check_query_file

    both = MEDIAN.replace("tumbling", "tumblng").rstrip(" ") + "    apply: stats.median\n"
    path = spec(tmp_path, both, "both.yaml")
    with pytest.raises(QueryFileError) as err:
        check_query_file(path)
    lines = str(err.value).splitlines()
    assert lines[0] == (
        f"{path}:1: (top level): give exactly one of aggregate (a UDA name) or apply (a UDO name)"
    )
    assert any(line.startswith(f"{path}:2: window.kind: Input should be") for line in lines)
    alone = spec(tmp_path, MEDIAN.rstrip(" ") + "    apply: stats.median\n", "alone.yaml")
    with pytest.raises(QueryFileError) as err:
        check_query_file(alone)
    assert str(err.value).count("give exactly one of aggregate") == 1


def test_source_mistakes_in_a_spec_are_all_reported_before_spark_starts(tmp_path: Path) -> None:
    """A Parquet source's columns are read from its footer: every column the
    spec names that the data lacks is reported at its own line, at once
    (before, Spark started and the first mistake was blamed on source:)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from udm.cli.queryfile import QueryFileError, check_query_file

    pq.write_table(
        pa.table({"sensor": ["a"], "ts": [1], "temp": [2.0]}), tmp_path / "readings.parquet"
    )
    body = """\
        source:
          path: readings.parquet
          start: tss
          end: te
          key: [sensor, line]
        window: {kind: tumbling, size: 10}
        aggregate: stats.median
        value: tmp
        """
    with pytest.raises(QueryFileError) as err:
        check_query_file(spec(tmp_path, body, "cols.yaml"))
    where = tmp_path / "cols.yaml"
    have = "is not in readings.parquet; its columns are ['sensor', 'ts', 'temp']"
    assert str(err.value).splitlines() == [
        f"{where}:3: source.start: column 'tss' {have}",
        f"{where}:4: source.end: column 'te' {have}",
        f"{where}:5: source.key: column 'line' {have}",
        f"{where}:8: value: column 'tmp' {have}",
    ]
    with pytest.raises(QueryFileError) as err:
        check_query_file(spec(tmp_path, body.replace("readings.parquet", "nope.parquet"), "p.yaml"))
    assert str(err.value) == (
        f"{tmp_path / 'p.yaml'}:2: source.path: {tmp_path / 'nope.parquet'} does not exist"
    )
    # a CSV's columns depend on Spark's reader options: left to Spark
    (tmp_path / "r.csv").write_text("sensor,ts,temp\na,1,2.0\n")
    check_query_file(
        spec(
            tmp_path,
            body.replace("readings.parquet", "r.csv").replace(
                "  start: tss", "  format: csv\n          start: tss"
            ),
            "csv.yaml",
        )
    )


def test_a_key_given_twice_in_a_spec_hides_no_other_mistake(tmp_path: Path) -> None:
    """The YAML loader notes a key given twice and reads on: the spec's
    other mistakes are reported with it (it once stopped the loading)."""
    from udm.cli.queryfile import QueryFileError, check_query_file

    body = MEDIAN.replace("size: 10}", "size: 10x}").replace("key: sensor}", "key: a, key: b}")
    path = spec(tmp_path, body, "twice.yaml")
    with pytest.raises(QueryFileError) as err:
        check_query_file(path)
    assert str(err.value).splitlines() == [
        f"{path}:1: key: given twice (first on line 1); keep one",
        f"{path}:1: source.path: {tmp_path / 'readings.parquet'} does not exist",
        f"{path}:2: window.size: '10x' is not a duration; use int ticks or a number with a "
        "unit: us, ms, s, m, h, d",
    ]
