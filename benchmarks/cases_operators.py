"""Benchmarks of the CEDR operators (issue: temporal operator algebra).

* ``operators.join_inprocess``: the incremental join of two keyed streams
  (``UDM_BENCH_JOIN_N`` events per side, default 1M; 1,000 keys; lifetimes
  about 10 events long; in order with a CTI every 1,000 events), fed a run
  at a time as the host engine feeds sources (its batched path; the
  output reaches the sink as columns), against the vectorized floor: the
  same pairs computed by pandas as a time-bucketed merge on (key, bucket)
  with the overlap condition. Also reported: the same with a sink that
  builds every output ``Insert``, the element-by-element path, and a
  faster vectorized floor than the issue's (a numpy searchsorted sweep).
* ``operators.join_memory``: peak RSS of the same join at N and 10 N events
  per side, fed from generators into a counting sink (state must stay
  bounded by the CTIs).
* ``operators.consistency``: one windowed query over a stream with 20% late
  events at strong, middle and weak consistency: output size (inserts +
  retractions) per level; CEDR's Theorem 9 says the more speculative level
  has the larger output.
* ``spark.temporal_join``: the Spark engine's bucketed interval join against
  a hand-written Spark SQL range join (equi-key, overlap, time buckets) over
  the same cached DataFrames.
"""

from __future__ import annotations

import os
import random
import resource
import time
from collections.abc import Callable, Iterator
from typing import Any

from measure import Targets, best_of

from udm.host import Cti, Insert
from udm.host.operators.base import Operator
from udm.host.operators.batch import InsertBatch, runs
from udm.host.operators.join import JoinOperator

KEYS = 1_000
SPAN = 10  # an event lasts about this many events' time
N_DEFAULT = int(os.environ.get("UDM_BENCH_JOIN_N", "1000000"))


def _side(n: int, seed: int, tag: str) -> Iterator[Any]:
    """n in-order interval events over KEYS keys, a CTI every 1,000."""
    rng = random.Random(seed)
    for i in range(n):
        start = i
        yield Insert(f"{tag}{i}", start, start + rng.randint(1, 2 * SPAN), {"k": i % KEYS})
        if i % 1000 == 999:
            yield Cti(start + 1)
    yield Cti(n + 10 * SPAN)


class _Count(Operator):
    """The sink: counts what arrives. ``objects``: it also builds each
    output :class:`Insert` of a batch (what a consumer that needs the
    objects, e.g. ``to_events``, pays); else a batch's inserts are
    counted from its columns."""

    def __init__(self, objects: bool = False) -> None:
        super().__init__(1)
        self.inserts = 0
        self.others = 0
        self.objects = objects

    def push(self, port: int, element: Any) -> None:
        if type(element) is Insert:
            self.inserts += 1
        else:
            self.others += 1

    def push_batch(self, port: int, elements: Any) -> None:
        if type(elements) is InsertBatch and not self.objects:
            self.inserts += len(elements)
            return
        for element in elements:
            self.push(port, element)


def _key(p: Any) -> Any:
    return p["k"]


def _combine(lp: Any, rp: Any) -> Any:
    return lp


def _run_join(
    n: int, materialized: bool = True, batched: bool = True, objects: bool = False
) -> tuple[float, int, int]:
    """Time the join alone (``materialized``: the inputs are built first;
    else generated on the fly, so memory holds only the operator's state).

    ``batched``: the sides are fed as the host engine feeds sources, a run
    at a time (up to each CTI, cut in the timed loop), alternately, into
    ``push_batch``; else element by element into ``push``."""
    join = JoinOperator(_key, _key, _combine)
    sink = _Count(objects)
    join.connect(sink)
    left: Iterator[Any] = _side(n, 1, "l")
    right: Iterator[Any] = _side(n, 2, "r")
    if materialized:
        left, right = iter(list(left)), iter(list(right))
    push = join.push_batch if batched else join.push
    t0 = time.perf_counter()
    if batched:
        left, right = runs(left), runs(right)
    for a, b in zip(left, right, strict=False):
        push(0, a)
        push(1, b)
    for a in left:
        push(0, a)
    for b in right:
        push(1, b)
    return time.perf_counter() - t0, sink.inserts, join.state_size()


def _pandas_join(n: int) -> tuple[float, int]:
    import numpy as np
    import pandas as pd

    def frame(seed: int, tag: str) -> pd.DataFrame:
        rows = [(e.start, e.end, e.payload["k"]) for e in _side(n, seed, tag) if type(e) is Insert]
        return pd.DataFrame(rows, columns=["s", "e", "k"])

    left, right = frame(1, "l"), frame(2, "r")
    t0 = time.perf_counter()
    width = 2 * SPAN

    def bucketed(df: pd.DataFrame) -> pd.DataFrame:
        first = df["s"].to_numpy() // width
        last = (df["e"].to_numpy() - 1) // width
        counts = last - first + 1
        out = df.loc[df.index.repeat(counts)].copy()
        out["b"] = np.repeat(first, counts) + (
            np.arange(len(out)) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return out

    merged = bucketed(left).merge(bucketed(right), on=["k", "b"], suffixes=("_l", "_r"))
    s = np.maximum(merged["s_l"].to_numpy(), merged["s_r"].to_numpy())
    e = np.minimum(merged["e_l"].to_numpy(), merged["e_r"].to_numpy())
    keep = (s < e) & (s // width == merged["b"].to_numpy())
    pairs = int(keep.sum())
    return time.perf_counter() - t0, pairs


def _numpy_sweep_join(n: int) -> tuple[float, int]:
    """A faster vectorized floor than the bucketed merge (reported beside
    it, not the issue's target): right events sorted by (key, start); each
    left event's candidates are the right starts of its key in
    ``(start - longest right duration, end)``, found by ``searchsorted``,
    then filtered by overlap. (It needs a finite longest duration.)"""
    import numpy as np

    def columns(seed: int, tag: str) -> tuple[Any, Any, Any]:
        rows = [(e.start, e.end, e.payload["k"]) for e in _side(n, seed, tag) if type(e) is Insert]
        s, e, k = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        return s, e, k

    (ls, le, lk), (rs, re, rk) = columns(1, "l"), columns(2, "r")
    t0 = time.perf_counter()
    shift = np.int64(1) << 40  # (key, start) as one sortable int64
    order = np.argsort(rk * shift + rs, kind="stable")
    keyed = (rk * shift + rs)[order]
    longest = int((re - rs).max())
    lo = np.searchsorted(keyed, lk * shift + ls - longest + 1, "left")
    count = np.searchsorted(keyed, lk * shift + le, "left") - lo
    li = np.repeat(np.arange(len(ls)), count)
    ri = order[np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))]
    keep = re[ri] > ls[li]
    li, ri = li[keep], ri[keep]
    np.maximum(ls[li], rs[ri]), np.minimum(le[li], re[ri])
    return time.perf_counter() - t0, len(li)


def join_inprocess() -> dict[str, Any]:
    """The batched join, pandas and the numpy sweep, round-robin, best of 3
    each; then, once each, the batched join whose sink builds every output
    Insert, and the element-by-element path (for comparison)."""
    n = N_DEFAULT
    t_pd = t_host = t_sweep = float("inf")
    for _ in range(3):
        t, pairs_pd = _pandas_join(n)
        t_pd = min(t_pd, t)
        t, pairs_host, state = _run_join(n)
        t_host = min(t_host, t)
        t, pairs_sweep = _numpy_sweep_join(n)
        t_sweep = min(t_sweep, t)
    assert pairs_host == pairs_pd == pairs_sweep, (pairs_host, pairs_pd, pairs_sweep)
    t_objects, pairs_objects, _ = _run_join(n, objects=True)
    t_single, pairs_single, _ = _run_join(n, batched=False)
    assert pairs_objects == pairs_single == pairs_pd
    return {
        "events_per_side": n,
        "pairs": pairs_host,
        "host_seconds": t_host,
        "pandas_seconds": t_pd,
        "input_events_per_s": 2 * n / t_host,
        "ratio_to_pandas": t_host / t_pd,
        "numpy_sweep_seconds": t_sweep,
        "ratio_to_numpy_sweep": t_host / t_sweep,
        "objects_seconds": t_objects,
        "objects_ratio_to_pandas": t_objects / t_pd,
        "per_event_seconds": t_single,
        "per_event_input_events_per_s": 2 * n / t_single,
        "per_event_ratio_to_pandas": t_single / t_pd,
        "state_at_end": state,
    }


def join_memory() -> dict[str, Any]:
    import subprocess
    import sys

    n = N_DEFAULT
    code = (
        "import resource, sys; sys.path.insert(0, {here!r}); import cases_operators as c; "
        "c._run_join({n}, materialized=False); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    peaks = {}
    for label, size in (("small", n), ("large", 10 * n)):
        out = subprocess.run(
            [sys.executable, "-c", code.format(here=here, n=size)],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks[label] = int(out.stdout.split()[-1]) / 1024
    return {
        "events_per_side_small": n,
        "events_per_side_large": 10 * n,
        "peak_rss_mb_small": peaks["small"],
        "peak_rss_mb_large": peaks["large"],
        "memory_ratio": peaks["large"] / peaks["small"],
        "self_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def consistency() -> dict[str, Any]:
    from udm.host import Retract
    from udm.host.query import Stream
    from udm.sdk import aggregate

    @aggregate
    def total(values: list[int]) -> int:
        return sum(values)

    rng = random.Random(7)
    elements: list[Any] = []
    n = 20_000
    late: list[Any] = []
    for i in range(n):
        event = Insert(i, i, i + 1, {"k": i % 10, "v": rng.randint(0, 9)})
        if rng.random() < 0.2:
            late.append(event)  # arrives up to 50 events late
        else:
            elements.append(event)
        if late and rng.random() < 0.1:
            elements.append(late.pop(0))
        if i % 100 == 99:
            pending = min([e.start for e in late], default=i + 1)
            elements.append(Cti(min(i + 1, pending)))
    elements += late
    elements.append(Cti(n + 100))
    query = Stream.from_events(elements, key="k").tumbling_window(50).aggregate(total, value="v")
    sizes = {}
    for label, level in (("strong", "strong"), ("middle", "middle"), ("weak", ("weak", 100))):
        t0 = time.perf_counter()
        out = query.to_events(consistency=level)
        sizes[label] = {
            "inserts": sum(type(e) is Insert for e in out),
            "retractions": sum(type(e) is Retract for e in out),
            "seconds": time.perf_counter() - t0,
        }
    size = {k: v["inserts"] + v["retractions"] for k, v in sizes.items()}
    return {
        "late_share": 0.2,
        "levels": sizes,
        "theorem_9_holds": size["strong"] <= size["middle"],
        "output_size": size,
    }


def spark_temporal_join() -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from udm.host.query import Stream

    n = int(os.environ.get("UDM_BENCH_SPARK_JOIN_N", "1000000"))
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    def frame(seed: int) -> Any:
        df = spark.range(n).selectExpr(
            "id AS s",
            f"id + 1 + CAST(rand({seed}) * {2 * SPAN} AS BIGINT) AS e",
            f"id % {KEYS} AS k",
        )
        return df.cache()

    left, right = frame(1), frame(2)
    left.count(), right.count()
    left.createOrReplaceTempView("l")
    right.createOrReplaceTempView("r")
    width = 2 * SPAN
    sql = f"""
        WITH lb AS (SELECT *, explode(sequence(s DIV {width}, (e - 1) DIV {width})) AS b FROM l),
             rb AS (SELECT *, explode(sequence(s DIV {width}, (e - 1) DIV {width})) AS b FROM r)
        SELECT greatest(lb.s, rb.s) AS s, least(lb.e, rb.e) AS e, lb.k
        FROM lb JOIN rb ON lb.k = rb.k AND lb.b = rb.b
        WHERE greatest(lb.s, rb.s) < least(lb.e, rb.e)
          AND greatest(lb.s, rb.s) DIV {width} = lb.b
    """
    query = Stream.from_dataframe(left, start="s", end="e", key="k").join(
        Stream.from_dataframe(right, start="s", end="e", key="k")
    )

    def write(make: Any) -> Callable[[], None]:
        return lambda: make().write.format("noop").mode("overwrite").save()

    best = best_of({"sql": write(lambda: spark.sql(sql)), "udm": write(query.to_dataframe)}, 3)
    udm, hand = best["udm"], best["sql"]
    return {"events_per_side": n, "udm_seconds": udm, "sql_seconds": hand, "ratio": udm / hand}


CASES = {
    "operators.join_inprocess": join_inprocess,
    "operators.join_memory": join_memory,
    "operators.consistency": consistency,
    "spark.temporal_join": spark_temporal_join,
}


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator figures issue #28 asks for, each with its target."""
    rows = Targets()
    j = results.get("operators.join_inprocess", {})
    if "input_events_per_s" in j:
        rows.at_least("in-process join: input events/s", j["input_events_per_s"], 200_000)
        rows.at_most("in-process join / pandas bucketed merge", j["ratio_to_pandas"], 3)
        for name, field in (
            ("in-process join / numpy searchsorted sweep", "ratio_to_numpy_sweep"),
            ("in-process join, sink building Insert objects / pandas", "objects_ratio_to_pandas"),
            ("in-process join, element by element / pandas", "per_event_ratio_to_pandas"),
        ):
            rows.add(name, j[field], "reported", None)
    m = results.get("operators.join_memory", {})
    if "memory_ratio" in m:
        rows.at_most("in-process join: peak RSS at 10N / at N", m["memory_ratio"], 1.2)
    c = results.get("operators.consistency", {})
    if "output_size" in c:
        sizes = c["output_size"]
        rows.add("consistency: output size strong", sizes["strong"], "reported", None)
        rows.add("consistency: output size middle", sizes["middle"], "reported", None)
        rows.add("consistency: output size weak", sizes["weak"], "reported", None)
        rows.add("Theorem 9: strong <= middle", None, "holds", c["theorem_9_holds"])
    s = results.get("spark.temporal_join", {})
    if "ratio" in s:
        rows.at_most("Spark temporal join / hand-written SQL range join", s["ratio"], 1.5)
    return rows.rows
