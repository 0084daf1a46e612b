"""udm-cli on a real Spark cluster and through Spark Connect, on loopback.

A standalone master with two one-core workers and a Spark Connect server
run from the pip-installed PySpark on 127.0.0.1 (tests/cluster_support.py,
always stopped). The servers' environment has no PYTHONPATH: the
executors run this venv's interpreter (which has udm and the bundled
plugins) and import anything else only if it was shipped. Each run's
Parquet output is compared row by row with a local run of the same query.

Marked ``cluster``: ``UDM_SKIP_CLUSTER=1`` skips them on a developer's
machine; CI (``CI=true``) runs them whatever it says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from cluster_support import connect_server, server_env, standalone_cluster
from conftest import _java_missing

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
UDM_CLI = str(Path(sys.executable).parent / "udm-cli")
S = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def _java() -> None:
    reason = _java_missing()
    if reason:
        pytest.skip(reason)


def cli_env(**extra: str) -> dict[str, str]:
    """A user's shell: no master configured, no code path but ``extra``'s."""
    env = server_env(**extra)
    env.pop("SPARK_NO_DAEMONIZE", None)
    return env


def udm_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [UDM_CLI, *args],
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def ran(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}"
    return done.stdout


def rows(folder: Path) -> list[tuple[Any, ...]]:
    """A Parquet output's rows, sorted (Spark writes them in any order)."""
    table = pq.read_table(str(folder))
    return sorted(tuple(r.values()) for r in table.to_pylist())


def same_outputs(got: Path, want: Path, names: list[str]) -> None:
    for name in names:
        expected = rows(want / name)
        assert expected, f"{name}: the local run wrote no rows; the comparison would prove nothing"
        assert rows(got / name) == expected, name


# ------------------------------------------------------------------ inputs


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/demo.py and sensor_udms.py in a folder of their own, over a
    slice of the sample data: two sensors, nine hours, one overheating."""
    folder = tmp_path_factory.mktemp("demo")
    for name in ("demo.py", "sensor_udms.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    data = ds.dataset(str(EXAMPLES / "data" / "readings.parquet"))
    first = data.to_table(columns=["ts"]).column("ts")[0].value  # 2024-05-01 00:00:07
    day = first - first % (86_400 * S)
    field = ds.field
    wanted = field("sensor").isin(["boiler-2", "lab"])
    sliced = data.to_table(filter=wanted & (field("ts").cast("int64") < day + 9 * 3600 * S))
    (folder / "data").mkdir()
    pq.write_table(sliced, folder / "data" / "readings.parquet")
    return folder


DEMO_OUTPUTS = ["hourly_median", "fleet_average", "overheating"]


@pytest.fixture(scope="module")
def demo_local(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    done = udm_cli("run", str(demo / "demo.py"), "-o", str(out), "--preview", "0")
    ran(done)
    (out.parent / "stderr.txt").write_text(done.stderr)
    return out


def test_a_local_run_prints_no_spark_or_jvm_startup_lines(demo_local: Path) -> None:
    """Spark's WARN/INFO start-up lines (loopback address, native Hadoop,
    default log4j profile, default log level) and the Java runtime's
    incubator-module notice stay out of `udm-cli run`'s output."""
    stderr = (demo_local.parent / "stderr.txt").read_text()
    noise = re.compile(r"\bWARN(ING)?\b|log4j|Setting default log level|incubator")
    assert not [line for line in stderr.splitlines() if noise.search(line)], stderr


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A UDM library on the driver's path only (its entry point makes it
    ``drvlib``): a namespace package (no ``__init__.py``), which imports
    from a zip only through the zip's directory entries."""
    lib = tmp_path_factory.mktemp("lib")
    (lib / "drvns").mkdir()
    (lib / "drvns" / "udms.py").write_text(
        textwrap.dedent(
            '''
            from udm.sdk import aggregate, hookimpl

            @aggregate(name="spread")
            def spread(values):
                """Largest minus smallest value."""
                return max(values) - min(values)

            @hookimpl
            def udm_udms():
                return [spread]
            '''
        )
    )
    info = lib / "drvlib-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: drvlib\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[udm]\ndrvlib = drvns.udms\n")
    return lib


@pytest.fixture(scope="module")
def lib_query(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A query naming drvlib.spread, in a folder without the library."""
    folder = tmp_path_factory.mktemp("query")
    table = {
        "k": ["a", "a", "b", "a", "b", "b"],
        "t": [1, 4, 2, 12, 13, 19],
        "v": [1.0, 7.5, 2.0, 3.0, -4.0, 10.0],
    }
    import pyarrow as pa

    pq.write_table(pa.table(table), folder / "events.parquet")
    (folder / "spreads.py").write_text(
        textwrap.dedent(
            f"""
            from udm.host.query import Stream

            def query(spark):
                df = spark.read.parquet({str(folder / "events.parquet")!r})
                return (
                    Stream.from_dataframe(df, start="t", key="k")
                    .tumbling_window(10)
                    .aggregate("drvlib.spread", value="v")
                )
            """
        )
    )
    return folder / "spreads.py"


# ------------------------------------------------------------------ servers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as url:
        yield url


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        yield url


# ------------------------------------------------------------------ tests


def test_the_demo_on_a_cluster_equals_the_local_run(
    demo: Path, demo_local: Path, cluster: str, tmp_path: Path
) -> None:
    """sensor_udms.py is next to the query file only: shipped, it imports."""
    out = tmp_path / "out"
    stdout = ran(
        udm_cli("run", str(demo / "demo.py"), "--master", cluster, "-o", str(out), "--preview", "0")
    )
    assert "shipped to the executors: demo, sensor_udms" in stdout
    same_outputs(out, demo_local, DEMO_OUTPUTS)


def test_a_library_on_the_driver_only_is_shipped_to_the_cluster(
    library: Path, lib_query: Path, cluster: str, tmp_path: Path
) -> None:
    env = cli_env(PYTHONPATH=str(library))
    out = tmp_path / "out"
    stdout = ran(udm_cli("run", str(lib_query), "--master", cluster, "-o", str(out), env=env))
    assert "drvns" in stdout
    # windows [0, 10) and [10, 20) per key, hand-computed
    assert rows(out / "spreads") == [
        (0, 10, "a", 6.5),
        (0, 10, "b", 0.0),
        (10, 20, "a", 0.0),
        (10, 20, "b", 14.0),
    ]


def test_without_shipping_the_worker_import_error_names_the_module(
    library: Path, lib_query: Path, cluster: str, tmp_path: Path
) -> None:
    env = cli_env(PYTHONPATH=str(library))
    done = udm_cli(
        "run", str(lib_query), "--master", cluster, "--no-ship",
        "--conf", "spark.task.maxFailures=1", "-o", str(tmp_path / "out"), env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "a Spark Python worker could not import module 'drvns'" in message, message
    assert "The worker said: ModuleNotFoundError: No module named 'drvns'" in message
    assert "--py-files" in message


def test_the_demo_through_spark_connect_equals_the_local_run(
    demo: Path, demo_local: Path, remote: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    stdout = ran(
        udm_cli("run", str(demo / "demo.py"), "--remote", remote, "-o", str(out), "--preview", "0")
    )
    assert "shipped to the executors: demo, sensor_udms" in stdout
    same_outputs(out, demo_local, DEMO_OUTPUTS)


def test_spark_remote_in_the_environment_is_honoured(
    library: Path, lib_query: Path, remote: str, tmp_path: Path
) -> None:
    """SPARK_REMOTE alone picks the Connect server; the driver-only library
    is shipped as an artifact."""
    env = cli_env(PYTHONPATH=str(library), SPARK_REMOTE=remote)
    out = tmp_path / "out"
    ran(udm_cli("run", str(lib_query), "-o", str(out), "--preview", "0", env=env))
    assert rows(out / "spreads")[-1] == (10, 20, "b", 14.0)


_CONNECT_QUERIES = """
from typing import TypedDict
from udm.host import Insert
from udm.host.query import Stream
from udm.host.spark.session import session

spark = session("connect-queries")
a = Stream.from_events([Insert("a", 1, 9, {"k": "x", "v": 10})], key="k")
b = Stream.from_events([Insert("p", 0, 6, {"k": "x", "w": 1})], key="k")

class Out(TypedDict):
    s: int

def typed(l, r) -> Out:
    return {"s": l["v"] + r["w"]}

for name, q in [
    ("untyped select", a.join(b, select=lambda l, r: {"s": l["v"] + r["w"]})),
    ("typed select", a.join(b, select=typed)),
]:
    assert q.to_cht(engine="spark") == q.to_cht(engine="reference"), name
    print("OK", name)
"""


def test_a_joins_select_through_spark_connect_equals_the_reference(
    remote: str, tmp_path: Path
) -> None:
    """An untyped select= failed under Connect (getBinary on an Arrow
    vector); every Connect session printed a CANNOT_MODIFY_CONFIG warning
    (udm set spark.ui.showConsoleProgress, a static setting)."""
    script = tmp_path / "queries.py"
    script.write_text(_CONNECT_QUERIES)
    done = subprocess.run(
        [sys.executable, str(script)],
        env=cli_env(SPARK_REMOTE=remote),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert ran(done).split("\n")[:2] == ["OK untyped select", "OK typed select"]
    assert "CANNOT_MODIFY_CONFIG" not in done.stderr, done.stderr[-2000:]


_SUBMITTED = """
import runpy, sys
demo = runpy.run_path(sys.argv[1], run_name="submitted")
spark = demo["spark_session"]()  # what `spark-submit ... demo.py` runs first
print("MASTER", spark.sparkContext.master)
print("PARTITIONS", spark.conf.get("spark.sql.shuffle.partitions"))
print("ZONE", spark.conf.get("spark.sql.session.timeZone"))
spark.stop()
"""


def test_the_demo_under_spark_submit_takes_its_master(
    demo: Path, cluster: str, tmp_path: Path
) -> None:
    """Not local[2] with local settings: the cluster spark-submit names,
    with Spark's own shuffle partitions and udm's UTC time zone."""
    script = tmp_path / "submitted.py"
    script.write_text(_SUBMITTED)
    submit = Path(sys.executable).parent.parent / "lib"
    spark_submit = next(submit.glob("python3*/site-packages/pyspark/bin/spark-submit"))
    done = subprocess.run(
        [str(spark_submit), "--master", cluster, str(script), str(demo / "demo.py")],
        env=cli_env(PYSPARK_DRIVER_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert f"MASTER {cluster}" in lines
    assert "PARTITIONS 200" in lines and "ZONE UTC" in lines


# ---------------------------------------------------- streaming, kill -9

_STREAM_DRIVER = """
import json, os, signal, sys
from udm.host import TumblingWindow
from udm.host.spark.session import session
from udm.host.spark.streaming import (
    changelog_cht, read_changelog, start_stream, stream_changelog, write_changelog,
)

master, folder, out, ck, mode = sys.argv[1:6]
spark = session("udm-stream-test", master=master, conf={
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
})
schema = "kind string, id long, start long, end long, k string, v double, seq long"
source = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(folder)
changelog = stream_changelog(
    source, TumblingWindow(10_000_000), "stats.mean", key="k", value="v", input="elements",
    seq="seq",
)
if mode == "crash":
    write = write_changelog(out)

    def sink(batch, batch_id):
        write(batch, batch_id)
        if batch_id == 1:  # written, not yet committed: the driver dies
            os.kill(os.getpid(), signal.SIGKILL)

    q = changelog.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()
    q.awaitTermination()
else:
    start_stream(changelog, out, ck, trigger={"availableNow": True}).awaitTermination()
    log = read_changelog(spark, out)
    changes = log.where("kind in ('insert', 'retract')")
    once = changes.select("k", "id", "kind", "new_end").distinct().count()
    print("DOUBLED", changes.count() - once)  # rows the replayed batch wrote twice
    cht = changelog_cht(log, ["k"]).collect()
    print("CHT", json.dumps(sorted([r["k"], r["start"], r["end"], r["mean"]] for r in cht)))
"""


def test_a_streaming_query_killed_on_the_cluster_resumes_to_the_batch_cht(
    cluster: str, tmp_path: Path
) -> None:
    """The driver dies by SIGKILL after the sink wrote micro-batch 1 and
    before Spark committed it; a new driver resumes from the checkpoint
    (batch 0's state restored, batch 1 replayed): the batch CHT, exactly."""
    from udm.host.query import Stream
    from udm.host.stream import Cti, Insert

    # three files, one micro-batch each; the last ends with a CTI
    batches = [
        [("a", 1, 1.0), ("b", 2, 2.0), ("a", 4, 3.0)],
        [("a", 11, 5.0), ("b", 9, 4.0)],
        [("b", 15, 6.0), ("a", 23, 13.0)],
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    seq = 0
    for i, batch in enumerate(batches):
        path = folder / f"part-{i:03d}.json"
        with path.open("w") as f:
            for k, t, v in batch:
                row = {"kind": "insert", "id": seq, "start": t * S, "end": (t + 1) * S}
                f.write(json.dumps({**row, "k": k, "v": v, "seq": seq}) + "\n")
                seq += 1
            if i == len(batches) - 1:
                f.write(json.dumps({"kind": "cti", "start": 100 * S, "k": None, "seq": seq}) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # oldest first
    script = tmp_path / "driver.py"
    script.write_text(_STREAM_DRIVER)
    out, ck = tmp_path / "out", tmp_path / "ck"

    def drive(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), cluster, str(folder), str(out), str(ck), mode],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    crashed = drive("crash")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert sorted(p.name for p in out.glob("batch_id=*")) == ["batch_id=0", "batch_id=1"]
    resumed = drive("resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    line = next(x for x in resumed.stdout.splitlines() if x.startswith("CHT "))
    assert "DOUBLED 0" in resumed.stdout.splitlines()
    got = sorted((k, s, e, m) for k, s, e, m in json.loads(line[4:]))
    events = [Insert(i, t * S, (t + 1) * S, {"k": k, "v": v}) for i, (k, t, v) in
              enumerate(x for b in batches for x in b)]  # fmt: skip
    stream = Stream.from_events([*events, Cti(100 * S)], key="k")
    want = stream.tumbling_window(10 * S).aggregate("stats.mean", value="v").to_cht("reference")
    expected = sorted((k, e.start, e.end, e.payload) for k, cht in want.items() for e in cht)
    assert got == expected
    assert ("a", 0, 10 * S, 2.0) in got
