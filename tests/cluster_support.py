"""Real Spark servers on loopback for the cluster tests: a standalone
master with two one-core workers, and a Spark Connect server, both started
from the pip-installed PySpark (``spark-class``) and always stopped.

Every process gets its own log file and a clean environment (no
``PYTHONPATH``), so a module the executors import must have been shipped
to them or be installed in the interpreter they run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"

#: how long a server may take to come up on a busy two-core machine
STARTUP_SECONDS = 180


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server process: this one's, less anything
    that would put code on the executors' import path or pick a master."""
    drop = {"PYTHONPATH", "SPARK_REMOTE", "SPARK_MASTER", "MASTER", "PYSPARK_SUBMIT_ARGS"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    env.update(extra)
    return env


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it moments later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One started JVM and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, pattern: str, timeout: float = STARTUP_SECONDS) -> re.Match[str]:
        """The first match of ``pattern`` in the log; fails with the log's
        tail when the process exits or the time is up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.25)
        raise RuntimeError(f"{self.name} did not start ({pattern!r}):\n{self.text()[-4000:]}")

    def stop(self) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL), whatever state it is in."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)


def start(name: str, args: list[str], logs: Path, env: dict[str, str]) -> Server:
    """Start ``spark-class ARGS`` in its own process group (so stopping it
    also stops what it started), logging to ``logs/NAME.log``."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_CLASS), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return Server(name, process, log)


@contextlib.contextmanager
def standalone_cluster(work: Path, workers: int = 2) -> Iterator[str]:
    """A standalone master and ``workers`` one-core workers on 127.0.0.1;
    yields the master URL (``spark://127.0.0.1:PORT``)."""
    servers: list[Server] = []
    env = server_env(SPARK_WORKER_DIR=str(work / "work"))
    try:
        port = free_port()
        master = start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0",
            ],
            work / "logs",
            env,
        )  # fmt: skip
        servers.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://\S+)").group(1)
        for i in range(workers):
            worker = start(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                    "--webui-port", "0", "--work-dir", str(work / "work"), url,
                ],
                work / "logs",
                env,
            )  # fmt: skip
            servers.append(worker)
        for worker in servers[1:]:
            worker.wait_for(r"Successfully registered with master")
        yield url
    finally:
        for server in reversed(servers):
            server.stop()


@contextlib.contextmanager
def connect_server(work: Path, master: str = "local[2]") -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1 whose driver runs ``master``;
    yields its URL (``sc://127.0.0.1:PORT``)."""
    port = free_port()
    args = [
        "org.apache.spark.deploy.SparkSubmit",
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", "udm-tests-connect",
        "--master", master,
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.driver.memory=1g",
        "spark-internal",
    ]  # fmt: skip
    # the workers' Python as docs/cluster.md starts a server: PYSPARK_PYTHON
    # in its environment (server_env), no spark.pyspark.python
    server = start("connect", args, work / "logs", server_env())
    try:
        server.wait_for(r"Spark Connect server started|SparkConnectServer.*started|port\W+\d+")
        _wait_port(port, server)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.stop()


def _wait_port(port: int, server: Server) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if server.process.poll() is not None:
            break
        time.sleep(0.25)
    raise RuntimeError(f"{server.name} does not listen on {port}:\n{server.text()[-4000:]}")
