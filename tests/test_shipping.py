"""Without servers: where the session's master comes from, the Spark
options of run/explain, the zips shipped to executors (namespace packages
included), and the message for a module a worker could not import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.cluster import SparkOptionsError, spark_options
from udm.cli.main import app
from udm.host.registry import Registry
from udm.host.spark.session import (
    SessionError,
    configured_master,
    is_local_master,
    session,
)
from udm.host.spark.shipping import folder_zip, module_zip, worker_import_problem

_MASTER_VARS = (
    "SPARK_REMOTE",
    "SPARK_MASTER",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_SUBMIT_ARGS",
    "MASTER",
    "SPARK_CONF_DIR",
    "SPARK_HOME",
)


@pytest.fixture
def no_master(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _MASTER_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_where_the_master_comes_from_in_order(
    no_master: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = no_master
    assert configured_master() is None
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.executor.memory 2g\nspark.master   spark://defaults:7077\n"
    )
    env.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert configured_master() == ("spark://defaults:7077", "spark-defaults.conf")
    env.setenv("MASTER", "yarn")
    assert configured_master() == ("yarn", "MASTER")
    env.setenv("PYSPARK_SUBMIT_ARGS", "--master local[3] --conf a=b pyspark-shell")
    assert configured_master() == ("local[3]", "PYSPARK_SUBMIT_ARGS")
    env.setenv("SPARK_MASTER", "spark://head:7077")
    assert configured_master() == ("spark://head:7077", "SPARK_MASTER")
    env.setenv("SPARK_REMOTE", "sc://head:15002")
    assert configured_master() == ("sc://head:15002", "SPARK_REMOTE")
    env.setenv("PYSPARK_GATEWAY_PORT", "4242")  # running under spark-submit
    assert configured_master() == ("(spark-submit)", "spark-submit")


def test_local_masters() -> None:
    assert is_local_master("local") and is_local_master("local[2]")
    assert is_local_master("local[*, 3]")
    for cluster in ("local-cluster[2,1,1024]", "spark://h:7077", "yarn", "k8s://h", None):
        assert not is_local_master(cluster)


class _Built(Exception):
    """Raised where the session would be created: the settings are made."""


class _RecordingBuilder:
    """SparkSession.builder's calls, recorded; nothing starts."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}
        self.where: tuple[str, str] | None = None

    def appName(self, name: str) -> _RecordingBuilder:
        return self

    def master(self, master: str) -> _RecordingBuilder:
        self.where = ("master", master)
        return self

    def remote(self, url: str) -> _RecordingBuilder:
        self.where = ("remote", url)
        return self

    def config(self, name: str, value: str) -> _RecordingBuilder:
        self.conf[name] = value
        return self

    def getOrCreate(self) -> Any:
        raise _Built


def _settings(env: pytest.MonkeyPatch) -> _RecordingBuilder:
    from pyspark.sql import SparkSession

    builder = _RecordingBuilder()
    env.setattr(SparkSession, "builder", builder)
    env.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):  # session() sets them
        env.setenv(name, sys.executable)
    with pytest.raises(_Built):
        session("settings")
    return builder


@pytest.mark.parametrize(
    "variable, value",
    [
        ("SPARK_MASTER", "local[1]"),
        ("PYSPARK_SUBMIT_ARGS", "--master local[1] pyspark-shell"),
        ("MASTER", "local[1]"),
    ],
)
def test_a_local_master_from_anywhere_gets_the_local_settings(
    no_master: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """From PYSPARK_SUBMIT_ARGS the UI stayed on with 200 shuffle partitions."""
    no_master.setenv(variable, value)
    conf = _settings(no_master).conf
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "4"


def test_a_cluster_master_gets_no_local_settings(no_master: pytest.MonkeyPatch) -> None:
    no_master.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://head:7077 pyspark-shell")
    conf = _settings(no_master).conf
    assert "spark.ui.enabled" not in conf and "spark.sql.shuffle.partitions" not in conf


def test_a_connect_session_sets_no_static_setting(no_master: pytest.MonkeyPatch) -> None:
    """spark.ui.showConsoleProgress printed CANNOT_MODIFY_CONFIG on every run."""
    no_master.setenv("SPARK_REMOTE", "sc://head:15002")
    builder = _settings(no_master)
    assert builder.where == ("remote", "sc://head:15002")
    assert builder.conf == {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }


def test_session_refuses_contradictory_requests() -> None:
    with pytest.raises(SessionError, match="not both"):
        session("x", master="local[1]", remote="sc://h:15002")
    with pytest.raises(SessionError, match="starts with sc://"):
        session("x", remote="http://h:15002")


@pytest.mark.spark
def test_a_running_session_is_used_and_another_master_refused(spark: Any) -> None:
    assert session("again") is spark
    assert session("again", master=spark.sparkContext.master, conf={"spark.x.y": "1"}) is spark
    assert spark.conf.get("spark.x.y") == "1"
    with pytest.raises(SessionError, match="already running in this process"):
        session("other", master="spark://elsewhere:7077")
    with pytest.raises(SessionError, match="already running in this process"):
        session("other", remote="sc://elsewhere:15002")
    with pytest.raises(SessionError, match=r"spark\.executor\.memory=2g cannot be applied"):
        session("again", conf={"spark.executor.memory": "2g"})


def test_spark_options_report_every_problem(tmp_path: Path) -> None:
    good = tmp_path / "helpers.py"
    good.write_text("X = 1\n")
    options = spark_options(
        "spark://h:7077",
        None,
        ["spark.executor.memory=2g", "spark.a=b=c"],
        [f"{good},{good}"],
        False,
    )
    assert options.conf == {"spark.executor.memory": "2g", "spark.a": "b=c"}
    assert options.py_files == [good.resolve(), good.resolve()] and not options.ship
    with pytest.raises(SparkOptionsError) as err:
        spark_options(
            "local[1]",
            "sc://h:1",
            ["novalue", "spark.master=yarn"],
            [str(tmp_path / "missing.py"), str(tmp_path)],
            True,
        )
    lines = str(err.value).splitlines()
    assert lines[0] == "--master and --remote: give one of them (--remote is Spark Connect)"
    assert "--conf novalue: write KEY=VALUE, e.g. spark.executor.memory=2g" in lines
    assert "--conf spark.master=yarn: use --master for it" in lines
    assert f"--py-files {tmp_path / 'missing.py'}: no such file" in lines
    assert len(lines) == 5


def test_bad_spark_options_are_usage_errors_before_spark_starts(tmp_path: Path) -> None:
    query = tmp_path / "q.py"
    query.write_text("def query(spark):\n    raise AssertionError('not reached')\n")
    for command in ("run", "explain"):
        result = CliRunner().invoke(app, [command, str(query), "--remote", "http://h"])
        assert result.exit_code == 2, result.output
        assert "--remote http://h: a Spark Connect URL starts with sc://" in result.output


# ------------------------------------------------------------------ zips


def _names(path: Path) -> set[str]:
    return set(zipfile.ZipFile(path).namelist())


def test_a_folder_ships_its_python_code_only(tmp_path: Path) -> None:
    (tmp_path / "query.py").write_text("import helpers\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "mod.py").write_text("Y = 2\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.parquet").write_bytes(b"\0" * 1000)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text("")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("")
    (tmp_path / "venv" / "site.py").write_text("")
    zipped = folder_zip(tmp_path)
    assert zipped is not None
    assert _names(zipped) == {"query.py", "helpers.py", "pkg/", "pkg/sub/", "pkg/sub/mod.py"}
    # the same code gives the same file; changed code another
    assert folder_zip(tmp_path) == zipped
    (tmp_path / "helpers.py").write_text("X = 2\n")
    assert folder_zip(tmp_path) != zipped
    empty = tmp_path / "empty"
    empty.mkdir()
    assert folder_zip(empty) is None


def test_a_namespace_package_imports_from_its_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No __init__.py: only the zip's directory entries make it importable."""
    lib = tmp_path / "lib"
    (lib / "nsonly" / "inner").mkdir(parents=True)
    (lib / "nsonly" / "inner" / "udms.py").write_text("VALUE = 42\n")
    (lib / "nsonly" / "inner" / "__pycache__").mkdir()
    (lib / "nsonly" / "inner" / "__pycache__" / "udms.cpython-311.pyc").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(lib))
    zipped, why = module_zip("nsonly.inner.udms")
    assert zipped is not None, why
    assert _names(zipped) == {"nsonly/", "nsonly/inner/", "nsonly/inner/udms.py"}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import nsonly.inner.udms as m; print(m.VALUE)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(zipped)], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "42", done.stderr


def test_what_is_not_shipped_and_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert module_zip("udm.host.query") == (None, "must be installed on the cluster")
    assert module_zip("numpy")[0] is None
    assert module_zip("json") == (None, "is part of Python")
    assert module_zip("udm_query")[0] is None  # a query file's own UDMs travel by value
    assert module_zip("__main__")[0] is None  # so do a script's
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "__init__.py").write_text("")
    (tmp_path / "fast" / "core.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    monkeypatch.syspath_prepend(str(tmp_path))
    zipped, why = module_zip("fast")
    assert zipped is None and "has compiled extensions" in why and "install it" in why


def test_the_registry_records_the_modules_of_udms_resolved_by_name() -> None:
    from udm.sdk import aggregate

    @aggregate(name="total")
    def total(values: list[float]) -> float:
        return sum(values)

    registry = Registry(autoload=False)
    registry.register(total, library="mine")
    assert registry.resolved_modules() == []
    registry.resolve(total)  # an object, not a name: nothing to record
    assert registry.resolved_modules() == []
    registry.resolve("mine.total")
    registry.resolve("mine.total")
    assert registry.resolved_modules() == [__name__]


# ------------------------------------------------------------------ errors

_WORKER_TRACE = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 483, in loads
    return cloudpickle.loads(obj, encoding=encoding)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ModuleNotFoundError: No module named 'sensor_udms'
 SQLSTATE: 38000
"""


def test_a_worker_import_error_names_the_module_and_what_to_do() -> None:
    message = worker_import_problem(_WORKER_TRACE)
    assert message is not None
    assert message.startswith("a Spark Python worker could not import module 'sensor_udms': ")
    assert "--no-ship" in message and "--py-files" in message
    assert message.endswith("The worker said: ModuleNotFoundError: No module named 'sensor_udms'")
    udm = worker_import_problem(_WORKER_TRACE.replace("'sensor_udms'", "'udm'"))
    assert udm is not None and "udm must be importable by the executors' Python" in udm
    assert "udm-cli package" in udm
    assert worker_import_problem("ZeroDivisionError: division by zero") is None


def test_the_cli_reports_a_worker_import_error_with_its_cause() -> None:
    from udm.cli.main import spark_message

    text = textwrap.dedent(_WORKER_TRACE)
    assert "No module named 'sensor_udms'" in spark_message(RuntimeError(text))


# ------------------------------------------------------------------ package


def test_the_executors_package_imports_without_the_installed_udm(tmp_path: Path) -> None:
    """A Python with only numpy and pyarrow (no site-packages, so no
    installed udm) runs a UDM of a bundled library from the zip alone."""
    import numpy
    import pyarrow

    target = tmp_path / "udm-executors.zip"
    result = CliRunner().invoke(app, ["package", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert "udm, udm_patterns, udm_stats, pluggy, sortedcontainers" in result.output
    names = _names(target)
    assert {"udm/", "udm/sdk/__init__.py", "udm/host/query.py", "udm_stats/__init__.py"} <= names
    assert not any(n.startswith("udm/cli") for n in names)  # the CLI is not needed there
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for module in (numpy, pyarrow):
        folder = Path(module.__file__ or "").parent
        (runtime / folder.name).symlink_to(folder)
    code = textwrap.dedent(
        """
        import sys
        sys.path[:0] = sys.argv[1:3]
        import udm.sdk, udm_stats
        from udm.host.query import Stream
        from udm.host.stream import Cti, Insert
        assert udm.sdk.__file__.startswith(sys.argv[1]), udm.sdk.__file__
        rows = [(1, 3.0), (2, 1.0), (4, 2.0)]
        events = [Insert(i, t, t + 1, {"v": v}) for i, (t, v) in enumerate(rows)]
        cht = Stream.from_events([*events, Cti(10)]).tumbling_window(5).aggregate(
            udm_stats.median, value="v").to_cht(engine="reference")
        print([(e.start, e.end, e.payload) for e in cht])
        """
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(target), str(runtime)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip() == "[(0, 5, 2.0)]", done.stderr[-3000:]


def test_package_refuses_another_suffix(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["package", "-o", str(tmp_path / "udm.tar.gz")])
    assert result.exit_code == 2 and "the package is a .zip file" in result.output
