"""Spark batch benchmarks: udm's Python UDAs against Spark's native aggregates
and against pandas UDFs, and partial aggregation on hopping windows.

One case, ``spark.batch``, runs every contender in one local Spark session
(2 cores) over the same cached DataFrame: 1M point events, 1,000 keys, one
event per millisecond. Every contender is run once to warm up, then all are
timed round-robin ``REPEATS`` times, the order rotating each round (the best
is kept), with the ``noop`` sink, which computes every row and column and
writes nothing.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd  # pandas_udf reads the type hints from this module's globals

from udm.sdk import IncrementalAggregate, aggregate

HERE = Path(__file__).resolve().parent
EVENTS = 1_000_000
KEYS = 1_000
REPEATS = 5
#: runs per contender of ``spark.hopping_layouts``
LAYOUT_REPEATS = 6
TUMBLING = timedelta(seconds=60)
HOP_SIZE, HOP = timedelta(seconds=60), timedelta(seconds=6)  # size / hop = 10


class MeanByAdd(IncrementalAggregate):
    """A user-written incremental mean: invertible and mergeable."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] - value, state[1] - 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class Mean(MeanByAdd):
    """The same mean, also adding a window's (or pane's) values in one call."""

    def add_many(self, state: tuple[float, int], values: Sequence[float]) -> tuple[float, int]:
        return (state[0] + sum(values), state[1] + len(values))


class MeanVector(Mean):
    """The same mean, also declaring its vectorized form: the states of many
    windows at once from numpy segment sums (``add_segments``)."""

    def add_segments(self, values: Any, bounds: Any) -> list[tuple[float, int]]:
        import numpy as np

        sums = np.add.reduceat(values, bounds[:-1]).tolist()
        return list(zip(sums, np.diff(bounds).tolist(), strict=True))


def noop(batches: Any) -> Any:
    """The transfer floor: a ``mapInArrow`` function that reads every batch
    and returns nothing."""
    for _ in batches:
        pass
    yield from ()


@aggregate
def median(values: Sequence[float]) -> float:
    """A user-written median: a plain function over the window's values."""
    return float(statistics.median(values))


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    from udm.host.spark.session import local_session

    return local_session("udm-bench", conf={"spark.driver.memory": "4g"})


def _events(spark: Any) -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.range(EVENTS)
        .select(
            (F.col("id") % KEYS).alias("key"),
            F.timestamp_micros(F.col("id") * 1000).alias("ts"),
            (F.rand(seed=7) * 100).alias("v"),
        )
        .repartition(4)
        .cache()
    )
    df.count()
    return df


def _time_all(
    builds: dict[str, Callable[[], Any]],
    cpu: dict[str, float] | None = None,
    repeats: int = REPEATS,
) -> dict[str, float]:
    """Best of ``repeats`` timed runs per contender, after one warm-up run of
    every contender; the timed runs go round-robin, so JIT warm-up and
    machine noise are shared alike. Each run plans anew. ``cpu``: filled
    with each contender's least CPU seconds of this process, its JVM and
    its Python workers (``/proc``; what a loaded machine does not inflate).
    The round-robin order rotates from one round to the next."""
    from udm.cli.timings import tree_cpu

    def run(build: Callable[[], Any]) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), tree_cpu() or 0.0
        build().write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t0, (tree_cpu() or 0.0) - c0

    for build in builds.values():
        run(build)
    best = dict.fromkeys(builds, float("inf"))
    least = dict.fromkeys(builds, float("inf"))
    names = list(builds)
    for r in range(repeats):
        # the order rotates each round: a contender does not always follow
        # the same one (whose garbage and caches it would inherit)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            build = builds[name]
            wall, used = run(build)
            best[name] = min(best[name], wall)
            least[name] = min(least[name], used)
    if cpu is not None:
        cpu.update(least)
    return best


#: the contenders of ``spark.floor``: the transfer floor, the mean and the
#: median three ways each (native, udm, pandas_udf), in one run
FLOOR_CONTENDERS = (
    "floor",
    "native_avg",
    "udm_mean",
    "udm_mean_sliced",
    "udm_mean_vector",
    "pandas_udf_mean",
    "native_median",
    "udm_median",
    "pandas_udf_median",
)


def _contenders(df: Any) -> dict[str, Callable[[], Any]]:
    """Every contender of ``spark.batch`` over the cached events ``df``."""
    from pyspark.sql import functions as F

    from udm.host.plan import agg
    from udm.host.query import Stream

    win = F.window("ts", "60 seconds")
    hopping = F.window("ts", "60 seconds", "6 seconds")

    @F.pandas_udf("double")  # type: ignore[call-overload, untyped-decorator]
    def pandas_mean(v: pd.Series) -> float:
        return float(v.mean())

    @F.pandas_udf("double")  # type: ignore[call-overload, untyped-decorator]
    def pandas_median(v: pd.Series) -> float:
        return float(v.median())

    def udm(uda: Any, size: timedelta, hop: timedelta, partial: bool | None = None) -> Any:
        stream = Stream.from_dataframe(df, start="ts", key="key").hopping_window(size, hop)
        return stream.aggregate(uda, value="v", partial=partial).to_dataframe()

    return {
        # the same input columns of the same cached DataFrame, read by Python
        "floor": lambda: df.select("key", "ts", "v").mapInArrow(noop, "n long"),
        "native_avg": lambda: df.groupBy("key", win).agg(F.avg("v")),
        "native_median": lambda: df.groupBy("key", win).agg(F.median("v")),
        "udm_mean": lambda: udm(Mean, TUMBLING, TUMBLING),
        # the same mean forced to the path without partial states (the
        # planner's choice for it before issue #32's fold from one sort)
        "udm_mean_sliced": lambda: udm(Mean, TUMBLING, TUMBLING, partial=False),
        "udm_mean_by_add": lambda: udm(MeanByAdd, TUMBLING, TUMBLING),
        "udm_mean_vector": lambda: udm(MeanVector, TUMBLING, TUMBLING),
        "udm_median": lambda: udm(median, TUMBLING, TUMBLING),
        "pandas_udf_mean": lambda: df.groupBy("key", win).agg(pandas_mean("v")),
        "pandas_udf_median": lambda: df.groupBy("key", win).agg(pandas_median("v")),
        "native_avg_and_median": lambda: df.groupBy("key", win).agg(F.avg("v"), F.median("v")),
        "udm_mean_and_median": lambda: (
            Stream.from_dataframe(df, start="ts", key="key")
            .tumbling_window(TUMBLING)
            .aggregate(mean=agg(Mean, "v"), median=agg(median, "v"))
            .to_dataframe()
        ),
        "native_median_hopping": lambda: df.groupBy("key", hopping).agg(F.median("v")),
        "udm_median_hopping": lambda: udm(median, HOP_SIZE, HOP),
        "udm_mean_hopping_partial": lambda: udm(Mean, HOP_SIZE, HOP, partial=True),
        "udm_mean_hopping_no_partial": lambda: udm(Mean, HOP_SIZE, HOP, partial=False),
    }


def _floor_ratios(s: dict[str, float]) -> dict[str, float]:
    """The mean and median against the floor, native and pandas_udf."""
    return {
        "udm_mean_vs_floor": s["udm_mean"] / s["floor"],
        "udm_mean_sliced_vs_floor": s["udm_mean_sliced"] / s["floor"],
        "udm_mean_vector_vs_floor": s["udm_mean_vector"] / s["floor"],
        "native_avg_vs_floor": s["native_avg"] / s["floor"],
        "udm_mean_vs_native_avg": s["udm_mean"] / s["native_avg"],
        "udm_mean_vector_vs_native_avg": s["udm_mean_vector"] / s["native_avg"],
        "udm_median_vs_native_median": s["udm_median"] / s["native_median"],
        "pandas_udf_mean_vs_udm_mean": s["pandas_udf_mean"] / s["udm_mean"],
        "pandas_udf_mean_vs_udm_mean_vector": s["pandas_udf_mean"] / s["udm_mean_vector"],
        "pandas_udf_median_vs_udm_median": s["pandas_udf_median"] / s["udm_median"],
    }


def floor() -> dict[str, Any]:
    """The mean and the median against the transfer floor (a ``mapInArrow``
    that does nothing over the same input columns), Spark's native
    aggregates and ``pandas_udf`` GROUPED_AGG, round-robin in one session;
    seconds and CPU seconds (this process, its JVM and Python workers)."""
    spark = _session()
    df = _events(spark)
    every = _contenders(df)
    cpu: dict[str, float] = {}
    seconds = _time_all({name: every[name] for name in FLOOR_CONTENDERS}, cpu)
    spark.stop()
    cpu_ratios = {
        "udm_mean_vs_floor": cpu["udm_mean"] / cpu["floor"],
        "udm_mean_sliced_vs_floor": cpu["udm_mean_sliced"] / cpu["floor"],
        "udm_mean_vector_vs_floor": cpu["udm_mean_vector"] / cpu["floor"],
        "native_avg_vs_floor": cpu["native_avg"] / cpu["floor"],
    }
    return {
        "events": EVENTS,
        "keys": KEYS,
        "seconds": seconds,
        "cpu_seconds": cpu,
        **_floor_ratios(seconds),
        "cpu_ratios": cpu_ratios,
    }


def one_row(batches: Any) -> Any:
    """Reads every batch like :func:`noop`, then returns one row: a stage
    whose output is next to nothing to shuffle."""
    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"n": pa.array([1], pa.int64())})


def mean_parts() -> dict[str, Any]:
    """Where the vectorized mean's time goes against the floor: the floor
    followed by a second stage shuffling one row per partition (what a
    plan with partial states costs before any Python work), and the mean
    by ``add_segments`` and by ``add_many`` with partial states and
    without (the sliced path, which shuffles every event), round-robin in
    one session; seconds and CPU seconds."""
    from udm.host.query import Stream

    spark = _session()
    df = _events(spark)
    cols = df.select("key", "ts", "v")

    def mean(partial: bool, uda: Any = MeanVector) -> Any:
        stream = Stream.from_dataframe(df, start="ts", key="key").tumbling_window(TUMBLING)
        return stream.aggregate(uda, value="v", partial=partial).to_dataframe()

    cpu: dict[str, float] = {}
    seconds = _time_all(
        {
            "floor": lambda: cols.mapInArrow(noop, "n long"),
            "floor_then_stage": lambda: (
                cols.mapInArrow(one_row, "n long").repartition("n").mapInArrow(noop, "n long")
            ),
            "udm_mean_vector_partial": lambda: mean(True),
            "udm_mean_vector_sliced": lambda: mean(False),
            "udm_mean_partial": lambda: mean(True, Mean),
            "udm_mean_sliced": lambda: mean(False, Mean),
        },
        cpu,
    )
    spark.stop()
    return {
        "events": EVENTS,
        "keys": KEYS,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "vs_floor": {name: s / seconds["floor"] for name, s in seconds.items()},
        "cpu_vs_floor": {name: c / cpu["floor"] for name, c in cpu.items()},
    }


def batch() -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = _session()
    df = _events(spark)
    seconds = _time_all(_contenders(df))
    windows = df.groupBy("key", F.window("ts", "60 seconds")).count().count()
    spark.stop()
    return {
        "events": EVENTS,
        "keys": KEYS,
        "tumbling_windows": windows,
        "seconds": seconds,
        **_floor_ratios(seconds),
        "udm_mean_by_add_vs_native_avg": seconds["udm_mean_by_add"] / seconds["native_avg"],
        "udm_mean_and_median_vs_native": (
            seconds["udm_mean_and_median"] / seconds["native_avg_and_median"]
        ),
        "udm_median_hopping_vs_native": (
            seconds["udm_median_hopping"] / seconds["native_median_hopping"]
        ),
        "hopping_no_partial_vs_partial": (
            seconds["udm_mean_hopping_no_partial"] / seconds["udm_mean_hopping_partial"]
        ),
    }


INTERVALS = 200_000
INTERVAL_KEYS = 100


def endpoints() -> dict[str, Any]:
    """Snapshot and count windows: assigned and evaluated in the worker (the
    default) against assigned in Spark SQL with partial aggregation
    (``partial=True``), the same query, over 200k interval events of 100
    keys (each lasting 2.5 ms, one starting every millisecond)."""
    from pyspark.sql import functions as F

    from udm.host.query import Stream

    spark = _session()
    df = (
        spark.range(INTERVALS)
        .select(
            (F.col("id") % INTERVAL_KEYS).alias("key"),
            F.timestamp_micros(F.col("id") * 1000).alias("ts"),
            F.timestamp_micros(F.col("id") * 1000 + 2500).alias("te"),
            (F.rand(seed=7) * 100).alias("v"),
        )
        .repartition(4)
        .cache()
    )
    df.count()

    def udm(window: str, uda: Any, partial: bool | None = None) -> Any:
        stream = Stream.from_dataframe(df, start="ts", end="te", key="key")
        windowed = stream.snapshot_window() if window == "snapshot" else stream.count_window(10)
        return windowed.aggregate(uda, value="v", partial=partial).to_dataframe()

    seconds = _time_all(
        {
            "snapshot_mean_worker": lambda: udm("snapshot", Mean),
            "snapshot_mean_sql_partial": lambda: udm("snapshot", Mean, partial=True),
            "snapshot_median_worker": lambda: udm("snapshot", median),
            "count_mean_worker": lambda: udm("count", Mean),
            "count_mean_sql_partial": lambda: udm("count", Mean, partial=True),
            "count_median_worker": lambda: udm("count", median),
        }
    )
    spark.stop()
    return {
        "events": INTERVALS,
        "keys": INTERVAL_KEYS,
        "seconds": seconds,
        "snapshot_sql_partial_vs_worker": (
            seconds["snapshot_mean_sql_partial"] / seconds["snapshot_mean_worker"]
        ),
        "count_sql_partial_vs_worker": (
            seconds["count_mean_sql_partial"] / seconds["count_mean_worker"]
        ),
    }


#: key layouts of the same 1M events for :func:`hopping_layouts` (the
#: issue's four, and 100 keys, between them, to place the crossover)
LAYOUTS = ("1 key", "10 keys", "100 keys", "1 hot key + 999", "1000 keys")


def hopping_layouts() -> dict[str, Any]:
    """Partial aggregation on hopping windows (size / hop = 10, mergeable
    mean) over the same 1M events with the keys laid out five ways, forced
    on (``partial=True``), off (``partial=False``) and chosen by the planner
    (``partial=None``, from a sample of the input's head): what partial
    aggregation buys depends on how many events of one (key, pane) an input
    partition holds, and on skew (a hot key without partial aggregation
    sits on one worker). Reports each layout's seconds, the planner's
    choice and its reason (the sample's figures), and chosen / the faster
    forced path."""
    from pyspark.sql import functions as F

    from udm.host.query import Stream

    spark = _session()
    ident = F.col("id")
    keys = {
        "1 key": F.lit(0),
        "10 keys": ident % 10,
        "100 keys": ident % 100,
        "1 hot key + 999": F.when(ident % 2 == 0, F.lit(0)).otherwise(ident % 999 + 1),
        "1000 keys": ident % 1000,
    }
    seconds: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    reasons: dict[str, str] = {}
    for layout in LAYOUTS:
        df = (
            spark.range(EVENTS)
            .select(
                keys[layout].alias("key"),
                F.timestamp_micros(ident * 1000).alias("ts"),
                (F.rand(seed=7) * 100).alias("v"),
            )
            .repartition(4)
            .cache()
        )
        df.count()

        def query(partial: bool | None, df: Any = df) -> Any:
            stream = Stream.from_dataframe(df, start="ts", key="key")
            windowed = stream.hopping_window(HOP_SIZE, HOP)
            return windowed.aggregate(Mean, value="v", partial=partial)

        explained = query(None).explain()
        reasons[layout] = next(
            line.strip() for line in explained.splitlines() if "partial states:" in line
        )
        cpu[layout] = {}
        seconds[layout] = _time_all(
            {
                "partial": lambda: query(True).to_dataframe(),
                "none": lambda: query(False).to_dataframe(),
                "chosen": lambda: query(None).to_dataframe(),
            },
            cpu[layout],
            # the chosen plan is one of the forced two: best of more runs,
            # since two runs of one plan differ by up to 15% in one session
            LAYOUT_REPEATS,
        )
        df.unpersist()
    spark.stop()
    return {
        "events": EVENTS,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "choice": reasons,
        "no_partial_vs_partial": {
            layout: s["none"] / s["partial"] for layout, s in seconds.items()
        },
        "chosen_vs_faster": {
            layout: s["chosen"] / min(s["none"], s["partial"]) for layout, s in seconds.items()
        },
        "chosen_vs_faster_cpu": {
            layout: c["chosen"] / min(c["none"], c["partial"]) for layout, c in cpu.items()
        },
    }


CASES = {
    "spark.batch": batch,
    "spark.floor": floor,
    "spark.mean_parts": mean_parts,
    "spark.endpoints": endpoints,
    "spark.hopping_layouts": hopping_layouts,
}


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def row(name: str, value: float, target: str, ok: bool | None) -> dict[str, Any]:
        return {"figure": name, "value": value, "target": target, "met": ok}

    rows = []
    p = results.get("spark.endpoints", {})
    if "seconds" in p:
        for kind in ("snapshot", "count"):
            rows.append(
                row(
                    f"spark: {kind} windows (200k intervals), SQL-assigned partial / in the worker",
                    p[f"{kind}_sql_partial_vs_worker"],
                    "reported",
                    None,
                )
            )
    h = results.get("spark.hopping_layouts", {})
    for layout, ratio in h.get("no_partial_vs_partial", {}).items():
        rows.append(
            row(
                f"spark: hopping, 1M events, {layout}: without / with partial aggregation",
                ratio,
                "reported",
                None,
            )
        )
    for layout, ratio in h.get("chosen_vs_faster_cpu", {}).items():
        rows.append(
            row(
                f"spark: hopping, 1M events, {layout}: choice / faster forced path, CPU seconds",
                ratio,
                "reported",
                None,
            )
        )
    for layout, ratio in h.get("chosen_vs_faster", {}).items():
        rows.append(
            row(
                f"spark: hopping, 1M events, {layout}: planner's choice / faster forced path",
                ratio,
                "<= 1.1",
                ratio <= 1.1,
            )
        )
    for case in ("spark.floor", "spark.batch"):
        if "seconds" in results.get(case, {}):
            rows += _floor_rows(case, results[case], row)
    r = results.get("spark.batch", {})
    if "seconds" not in r:
        return rows
    e = r["hopping_no_partial_vs_partial"]
    return [
        *rows,
        row(
            "spark: udm mean and median in one query / native avg and median in one query",
            r["udm_mean_and_median_vs_native"],
            "reported",
            None,
        ),
        row(
            "spark: udm median / native median, hopping (size/hop=10)",
            r["udm_median_hopping_vs_native"],
            "reported",
            None,
        ),
        row("spark: hopping (size/hop=10) without / with partial aggregation", e, ">= 3", e >= 3),
    ]


def _floor_rows(case: str, r: dict[str, Any], row: Callable[..., dict[str, Any]]) -> list[Any]:
    """The targets of issue #32 measured against the floor, and the
    pandas_udf ones, from one case's run."""
    tag = f"spark ({case})"
    a, v = r["udm_mean_vs_floor"], r["udm_mean_vector_vs_floor"]
    b = r["udm_median_vs_native_median"]
    c, d = r["pandas_udf_mean_vs_udm_mean"], r["pandas_udf_median_vs_udm_median"]
    return [
        row(f"{tag}: udm mean (add_many) time / no-op mapInArrow floor", a, "<= 1.5", a <= 1.5),
        row(f"{tag}: udm mean (add_segments) time / floor", v, "<= 1.5", v <= 1.5),
        row(
            f"{tag}: udm mean (add_many) forced sliced (partial=False) / floor",
            r["udm_mean_sliced_vs_floor"],
            "reported",
            None,
        ),
        row(f"{tag}: native avg / floor", r["native_avg_vs_floor"], "reported", None),
        row(f"{tag}: udm mean / native avg", r["udm_mean_vs_native_avg"], "reported", None),
        row(f"{tag}: udm Python median time / native median", b, "<= 1.5", b <= 1.5),
        row(f"{tag}: pandas_udf mean time / udm mean time", c, ">= 5", c >= 5),
        row(f"{tag}: pandas_udf median time / udm median time", d, ">= 5", d >= 5),
    ]
