"""A session the user built: local workers run the driver's interpreter and
import the driver's code (share_driver_python)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import _java_missing

from udm.host.spark.session import share_driver_python


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, name: str) -> str | None:
        return self.values.get(name)


class _Context:
    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.pythonExec = "python3"
        self.environment: dict[str, str] = {"PYTHONPATH": "/opt/mine"}
        self._conf = _Conf(conf or {})

    def getConf(self) -> _Conf:
        return self._conf


class _Session:
    def __init__(self, sc: _Context) -> None:
        self.sparkContext = sc


def test_a_local_session_gets_this_interpreter_and_the_drivers_code_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    sc = _Context("local[2]")
    share_driver_python(_Session(sc))  # type: ignore[arg-type]
    assert sc.pythonExec == sys.executable
    paths = sc.environment["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == "/opt/mine"  # the user's own entries stay first
    assert os.path.realpath(tmp_path) in paths
    # the interpreter's own directories are not shared
    assert not any(p.startswith(os.path.realpath(sys.base_prefix) + os.sep) for p in paths)


def test_a_chosen_interpreter_and_a_cluster_master_are_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    chosen = _Context("local[2]", {"spark.pyspark.python": "/usr/bin/python3.11"})
    share_driver_python(_Session(chosen))  # type: ignore[arg-type]
    assert chosen.pythonExec == "python3"  # Spark reads the conf itself
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3.11")
    by_env = _Context("local[2]")
    share_driver_python(_Session(by_env))  # type: ignore[arg-type]
    assert by_env.pythonExec == "python3"
    cluster = _Context("spark://head:7077")
    share_driver_python(_Session(cluster))  # type: ignore[arg-type]
    assert cluster.pythonExec == "python3"
    assert cluster.environment == {"PYTHONPATH": "/opt/mine"}


_SCRIPT = """
import sys
sys.path.insert(0, {code!r})
from pyspark.sql import SparkSession
from udm.host.query import Stream
import my_udms

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
rows = [("a", t, float(t * t)) for t in range(10)]
df = spark.createDataFrame(rows, "k string, t long, v double")
out = Stream.from_dataframe(df, start="t", key="k").tumbling_window(5).aggregate(
    my_udms.spread, value="v"
)
print("ROWS", sorted(map(tuple, out.to_dataframe().collect())))
"""


def test_a_plain_local_session_runs_udms_from_the_drivers_modules(tmp_path: Path) -> None:
    """No PYSPARK_PYTHON, ``python3`` on PATH an interpreter without udm, and
    the UDM in a module only the driver's sys.path finds: the query runs."""
    reason = _java_missing()
    if reason:
        pytest.skip(reason)
    code = tmp_path / "code"
    code.mkdir()
    (code / "my_udms.py").write_text(
        textwrap.dedent(
            """
            from udm.sdk import aggregate

            @aggregate(name="my.spread")
            def spread(values):
                return max(values) - min(values)
            """
        )
    )
    script = tmp_path / "query.py"
    script.write_text(_SCRIPT.format(code=str(code)))
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(os.path.realpath(sys._base_executable))  # type: ignore[attr-defined]
    env: dict[str, Any] = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = os.pathsep.join([str(bare), env.get("PATH", "")])
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("ROWS")]
    assert rows == ["ROWS [(0, 5, 'a', 16.0), (5, 10, 'a', 56.0)]"], done.stderr[-3000:]
