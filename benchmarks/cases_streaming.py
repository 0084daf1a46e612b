"""Spark Structured Streaming benchmarks (issue: streaming on Spark).

One case, ``spark.streaming``, streams STREAM_EVENTS point events of KEYS keys
(each key one event per second of application time) from a Parquet file
source, FILES_PER_TRIGGER files of FILE_EVENTS per micro-batch, through a
tumbling 60 s window with the
incremental ``stats.mean``; CTIs are generated per key every 10 s of
application time. The changelog goes to Parquet through ``write_changelog``
(the sink is part of what is timed). It reports:

* sustained throughput (the events of the micro-batches after the first,
  which also starts the Python workers and the state store, over their
  processing time), the whole run's events / wall time, and the whole run's
  time against the same query in batch mode over the same files;
* per micro-batch processing time (Spark's ``triggerExecution``): median and
  maximum, i.e. the delay between a batch's arrival and its output;
* the state store after 1M events and at the end (5M by default): rows
  (keys), memory used and the RocksDB sizes Spark reports.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from cases_spark import _session

STREAM_EVENTS = int(os.environ.get("UDM_BENCH_STREAM_EVENTS", 5_000_000))
FILE_EVENTS = 100_000
FILES_PER_TRIGGER = int(os.environ.get("UDM_BENCH_FILES_PER_TRIGGER", 5))
KEYS = 1_000
WINDOW = timedelta(seconds=60)
CTI_EVERY = timedelta(seconds=10)


def _write_files(folder: Path, events: int) -> None:
    """Event i: key i % KEYS at i ms (so each key has one event per second)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    for n, lo in enumerate(range(0, events, FILE_EVENTS)):
        i = np.arange(lo, min(lo + FILE_EVENTS, events), dtype=np.int64)
        table = pa.table(
            {
                "key": pa.array(i % KEYS),
                "ts": pa.array(i * 1000, pa.timestamp("us", tz="UTC")),
                "v": pa.array(rng.random(len(i)) * 100),
            }
        )
        pq.write_table(table, folder / f"part-{n:04d}.parquet")


def _state(progress: dict[str, Any]) -> dict[str, Any]:
    ops = progress.get("stateOperators") or []
    if not ops:
        return {}
    op = ops[0]
    custom = {k: v for k, v in (op.get("customMetrics") or {}).items() if "Size" in k}
    return {
        "rows": op.get("numRowsTotal"),
        "memory_used_bytes": op.get("memoryUsedBytes"),
        **custom,
    }


def streaming() -> dict[str, Any]:
    from udm.host import TumblingWindow
    from udm.host.query import Stream
    from udm.host.spark.streaming import AdvanceTime, start_stream, stream_changelog

    spark = _session()
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    tmp = Path(tempfile.mkdtemp(prefix="udm-bench-stream-"))
    try:
        data = tmp / "in"
        _write_files(data, STREAM_EVENTS)
        schema = spark.read.parquet(str(data)).schema

        # batch: the same query over the same files
        def batch_query() -> Any:
            df = spark.read.parquet(str(data))
            stream = Stream.from_dataframe(df, start="ts", key="key").tumbling_window(WINDOW)
            return stream.aggregate("stats.mean", value="v").to_dataframe()

        batch_query().write.format("noop").mode("overwrite").save()  # warm-up
        t0 = time.perf_counter()
        batch_query().write.format("noop").mode("overwrite").save()
        batch_seconds = time.perf_counter() - t0

        reader = spark.readStream.schema(schema).option("maxFilesPerTrigger", FILES_PER_TRIGGER)
        src = reader.parquet(str(data))
        changelog = stream_changelog(
            src,
            TumblingWindow(WINDOW),
            "stats.mean",
            key="key",
            value="v",
            start="ts",
            advance=AdvanceTime(every=CTI_EVERY),
        )
        t0 = time.perf_counter()
        q = start_stream(
            changelog, str(tmp / "out"), str(tmp / "ck"), trigger={"availableNow": True}
        )
        q.awaitTermination()
        stream_seconds = time.perf_counter() - t0
        progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
        durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
        rows = [p["numInputRows"] for p in progress]
        seen = 0
        state_1m: dict[str, Any] = {}
        for p in progress:
            seen += p["numInputRows"]
            if seen >= 1_000_000 and not state_1m:
                state_1m = _state(p)
        outputs = spark.read.parquet(str(tmp / "out")).where("kind = 'insert'").count()
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    events_per_s = STREAM_EVENTS / stream_seconds
    # after the first micro-batch (JVM, Python workers and state store warm-up)
    sustained = sum(rows[1:]) / sum(durations[1:]) if len(rows) > 1 else float("nan")
    return {
        "events": STREAM_EVENTS,
        "keys": KEYS,
        "micro_batches": len(progress),
        "events_per_batch": FILE_EVENTS * FILES_PER_TRIGGER,
        "stream_seconds": stream_seconds,
        "batch_seconds": batch_seconds,
        "events_per_s": events_per_s,
        "sustained_events_per_s": sustained,
        "first_batch_seconds": durations[0],
        "stream_vs_batch_time": stream_seconds / batch_seconds,
        "batch_seconds_median": statistics.median(durations),
        "batch_seconds_max": max(durations),
        "output_inserts": outputs,
        "state_at_1M": state_1m,
        "state_at_end": _state(progress[-1]),
    }


CASES = {"spark.streaming": streaming}


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    r = results.get("spark.streaming", {})
    if "events_per_s" not in r:
        return []
    a, b = r["state_at_1M"], r["state_at_end"]
    mem_a, mem_b = a.get("memory_used_bytes") or 0, b.get("memory_used_bytes") or 0
    growth = mem_b / mem_a if mem_a else float("nan")
    return [
        {
            "figure": "streaming: sustained events/s (1k keys, tumbling 60 s, incremental mean)",
            "value": r["sustained_events_per_s"],
            "target": ">= 100,000",
            "met": r["sustained_events_per_s"] >= 100_000,
        },
        {
            "figure": "streaming: events/s over the whole run, first micro-batch included",
            "value": r["events_per_s"],
            "target": "reported",
            "met": None,
        },
        {
            "figure": "streaming time / batch time, same query and data",
            "value": r["stream_vs_batch_time"],
            "target": "reported",
            "met": None,
        },
        {
            "figure": f"streaming: micro-batch processing time, median s "
            f"({r['events_per_batch']:,} events)",
            "value": r["batch_seconds_median"],
            "target": "reported",
            "met": None,
        },
        {
            "figure": f"streaming: state memory at {r['events'] // 1_000_000}M / at 1M events",
            "value": growth,
            "target": "bounded",
            "met": None,
        },
    ]
