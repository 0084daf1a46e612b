"""Spark batch at scale: the tumbling mean and Python median of
``spark.batch`` over 1M events of 1,000 keys and over 10M events of 10,000
keys, with Spark's default 1 GB driver.

The data is made on Spark (``spark.range`` and column expressions, nothing
built or collected on the driver), written to Parquet once and read back
for every run, as a user's query would. Both sizes keep each key's timeline
the same: a key has one event per second for 1,000 seconds, so 17 one-minute
windows of 60 events each. Ten times the events is then ten times the keys
and the windows, each window as big as before, so time per event measures
how udm's path scales, not how the UDMs do with bigger windows (the median's
sort is n log n in a window's size).

Local mode runs the executor inside the driver JVM, so "no executor or driver
memory error" is one JVM with Spark's default heap (``spark.driver.memory`` is
not set; the case reports the heap it got). Its peak RSS is the JVM's kernel
high-water mark (``VmHWM``); the Python driver's is the process's own, and the
Python workers' is sampled while the queries run (a worker's partition is one
Arrow table in its memory, so theirs is where the data's size shows).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cases_spark import TUMBLING, Mean, median

HERE = Path(__file__).resolve().parent
#: (events, keys) of the small and the large run: 1,000 events per key in both
SIZES = ((1_000_000, 1_000), (10_000_000, 10_000))
REPEATS = 2


def _session() -> Any:
    """A local session on 2 cores with udm's local settings and Spark's
    default driver memory (the only difference from ``spark.batch``'s,
    which asks for 4 GB)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    from udm.host.spark.session import local_session

    return local_session("udm-bench-scale")


def _write(spark: Any, events: int, keys: int, path: str) -> None:
    """``events`` point events of ``keys`` keys to Parquet at ``path``:
    event i is key ``i % keys`` at ``i * 1e6 / keys`` microseconds, so every
    key has one event per second whatever the size."""
    from pyspark.sql import functions as F

    step = 1_000_000 // keys
    ident = F.col("id")
    spark.range(events).select(
        (ident % keys).alias("key"),
        F.timestamp_micros(ident * step).alias("ts"),
        (F.rand(seed=7) * 100).alias("v"),
    ).write.parquet(path)


def _status_mb(pid: int, field: str) -> float | None:
    """``field`` (``VmHWM``, ``VmRSS``) of process ``pid`` in MB, or None
    when it is gone or not Linux."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the JVM's: PySpark's daemon and the
    Python workers it forks)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # the command may hold spaces and parentheses: ppid follows the last ')'
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class _WorkerPeak(threading.Thread):
    """Samples the peak RSS of the JVM's Python workers every half second:
    a worker may end before the query does, so reading them at the end
    would miss it."""

    def __init__(self, jvm_pid: int) -> None:
        super().__init__(daemon=True)
        self.jvm_pid = jvm_pid
        self.peak = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            for pid in _children(self.jvm_pid):
                self.peak = max(self.peak, _status_mb(pid, "VmHWM") or 0.0)


def _jvm_pid(spark: Any) -> int:
    """The driver JVM's process id, asked through the py4j gateway."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _reset_peak(pid: int) -> None:
    """Reset ``pid``'s VmHWM to its current RSS (Linux: ``clear_refs`` 5),
    so a peak read later is that of what ran since; a no-op elsewhere."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def _run(build: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    build().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def scale() -> dict[str, Any]:
    from udm.host.query import Stream

    spark = _session()
    sc = spark.sparkContext
    jvm = _jvm_pid(spark)
    heap_mb = sc._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20
    folder = tempfile.mkdtemp(prefix="udm-bench-scale-")
    try:
        paths = {}
        t0 = time.perf_counter()
        for events, keys in SIZES:
            paths[events] = os.path.join(folder, f"events-{events}")
            _write(spark, events, keys, paths[events])
        write_seconds = time.perf_counter() - t0
        files = {
            n: len([f for f in os.listdir(p) if f.endswith(".parquet")]) for n, p in paths.items()
        }
        splits = {n: spark.read.parquet(p).rdd.getNumPartitions() for n, p in paths.items()}

        def query(events: int, uda: Any) -> Callable[[], Any]:
            def build() -> Any:
                df = spark.read.parquet(paths[events])
                windowed = Stream.from_dataframe(df, start="ts", key="key").tumbling_window(
                    TUMBLING
                )
                return windowed.aggregate(uda, value="v").to_dataframe()

            return build

        runs = {
            f"{name}_{size}": query(events, uda)
            for size, (events, _) in zip(("small", "large"), SIZES, strict=True)
            for name, uda in (("mean", Mean), ("median", median))
        }
        sampler = _WorkerPeak(jvm)
        sampler.start()
        _reset_peak(jvm)
        small = [n for n in runs if n.endswith("_small")]
        for name in small:  # warm-up, and the JVM's peak with only the small runs behind it
            _run(runs[name])
        jvm_peak_1m = _status_mb(jvm, "VmHWM")
        worker_peak_1m = sampler.peak
        for name in runs:
            if name not in small:
                _run(runs[name])
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(REPEATS):  # round-robin: both sizes share the machine's noise
            for name, build in runs.items():
                best[name] = min(best[name], _run(build))
        sampler.done.set()
        sampler.join()
        jvm_peak = _status_mb(jvm, "VmHWM")
        memory_conf = sc.getConf().get("spark.driver.memory", "(default)")
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)
    (n1, _), (n2, _) = SIZES
    per_event = {name: s / (n1 if name.endswith("_small") else n2) for name, s in best.items()}
    return {
        "sizes": [{"events": n, "keys": k, "windows": k * 17} for n, k in SIZES],
        "driver_max_heap_mb": heap_mb,
        "spark_driver_memory_conf": memory_conf,
        "parquet_files": files,
        "input_partitions": splits,
        "write_seconds": write_seconds,
        "seconds": best,
        "microseconds_per_event": {n: v * 1e6 for n, v in per_event.items()},
        "mean_per_event_10M_vs_1M": per_event["mean_large"] / per_event["mean_small"],
        "median_per_event_10M_vs_1M": per_event["median_large"] / per_event["median_small"],
        "jvm_peak_rss_mb_small_only": jvm_peak_1m,
        "jvm_peak_rss_mb": jvm_peak,
        "python_worker_peak_rss_mb_small_only": worker_peak_1m,
        "python_worker_peak_rss_mb": sampler.peak,
        "python_driver_peak_rss_mb": _status_mb(os.getpid(), "VmHWM"),
    }


CASES = {"spark.scale": scale}


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def row(name: str, value: Any, target: str, ok: bool | None) -> dict[str, Any]:
        return {"figure": name, "value": value, "target": target, "met": ok}

    if "spark.scale" not in results:
        return []
    r = results["spark.scale"]
    done = "error" not in r
    rows = [
        row(
            "spark scale: 1M and 10M events run with Spark's default 1 GB driver",
            "ran" if done else "failed",
            "no error",
            done,
        )
    ]
    if not done:
        return rows
    a, b = r["mean_per_event_10M_vs_1M"], r["median_per_event_10M_vs_1M"]
    return [
        *rows,
        row(
            "spark scale: udm mean time per event, 10M/10k keys / 1M/1k keys", a, "<= 1.3", a <= 1.3
        ),
        row(
            "spark scale: udm median time per event, 10M/10k keys / 1M/1k keys",
            b,
            "<= 1.3",
            b <= 1.3,
        ),
        row(
            "spark scale: peak driver JVM RSS (MB), 1M and 10M",
            r["jvm_peak_rss_mb"],
            "reported",
            None,
        ),
        row(
            "spark scale: peak Python driver RSS (MB)",
            r["python_driver_peak_rss_mb"],
            "reported",
            None,
        ),
        row(
            "spark scale: peak Python worker RSS (MB), 10M",
            r["python_worker_peak_rss_mb"],
            "reported",
            None,
        ),
    ]
