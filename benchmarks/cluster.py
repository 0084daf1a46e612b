"""The demo (``udm-cli run examples/demo.py``, the whole sample data) on
``local[2]``, on a two-worker standalone cluster on loopback, and through
a Spark Connect server (itself on ``local[2]``), all on this machine.

On one machine the cluster cannot be faster: the figures are the cost of
executors in other JVMs, of shipping the code and of Connect's gRPC hop,
as ratios against the local run measured in the same invocation. Run:
``.venv/bin/python benchmarks/cluster.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cluster_support import connect_server, server_env, standalone_cluster  # noqa: E402

UDM_CLI = str(Path(sys.executable).parent / "udm-cli")


def run_demo(out: Path, *spark: str) -> tuple[float, float]:
    """Wall seconds of one ``udm-cli run`` of the demo, and the seconds
    the CLI reports for its queries (``done in``, session start included)."""
    env = server_env()
    env.pop("SPARK_NO_DAEMONIZE", None)
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            UDM_CLI,
            "run",
            str(ROOT / "examples" / "demo.py"),
            "-o",
            str(out),
            "--preview",
            "0",
            *spark,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = re.search(r"done in ([0-9.]+) s", done.stdout)
    return wall, float(found.group(1)) if found else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="udm-bench-cluster-") as tmp:
        work = Path(tmp)
        with standalone_cluster(work / "cluster") as master, connect_server(work / "connect") as sc:
            for _ in range(args.repeat):
                for name, spark in (
                    ("local[2]", ("--master", "local[2]")),
                    ("cluster (2 workers x 1 core)", ("--master", master)),
                    ("Spark Connect (server on local[2])", ("--remote", sc)),
                ):
                    results.setdefault(name, []).append(run_demo(work / "out", *spark))
    base = statistics.median(w for w, _ in results["local[2]"])
    print(f"{'where':40} {'wall s':>8} {'CLI s':>8} {'vs local':>9}")
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cli = statistics.median(c for _, c in runs)
        print(f"{name:40} {wall:8.1f} {cli:8.1f} {wall / base:8.2f}x")


if __name__ == "__main__":
    main()
