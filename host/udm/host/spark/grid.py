"""Hopping and tumbling windows, assigned and evaluated in the worker.

Grid windows are a pure function of time, so Spark does not need to pair
every event with every window it belongs to (a ten-fold explode and
shuffle for size/hop = 10). Instead each event is sent once to the worker
owning its key (a stream without keys: its *bucket*, ``BUCKET`` consecutive
window indexes ``k``; an event whose windows straddle buckets goes to
each), and the worker assigns, sorts and groups events into windows with
numpy, then calls the UDMs per window exactly as
:func:`~udm.host.spark.evaluate.window_rows` does for every other window
kind. Over point events not even that: sorted by start, a window's events
are one run of its key's, so its values are a slice of one list
(:func:`_slices`) and no event is copied per window.

Mergeable, order-insensitive UDAs are partially aggregated before the
shuffle: each input partition folds its events into one state per (key,
window), or for point events under overlapping windows per (key, pane of
width gcd(size, hop)) (Li et al., "No pane, no gain": a point event is
folded once, not size/hop times); a partition's states of one (key,
bucket) are pickled together and shuffled by (key, bucket), so a hot
key's windows are merged on several workers, and a window's result merges
its panes' states in time order through a two-stack sliding queue, about
three merges a window whatever size/hop is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from udm.host.gcpause import paused_batches
from udm.host.plan import E_COL, S_COL, WindowOp
from udm.host.spark import (
    evaluate as spark_evaluate,  # BUCKET read at call time (tests set it)
)
from udm.host.spark.arrowio import STATE
from udm.host.spark.frame import WindowJob, map_in_arrow, quoted
from udm.host.spark.gridevents import BUCKET_COL, grid_events
from udm.host.spark.members import (
    Memberships,
    Slices,
    evaluate_runs,
    explode,
    key_codes,
    lexsort,
    run_starts,
    sliced_windows,
)
from udm.host.spark.panes import fold_fn, merge_fn
from udm.host.spark.session import task_slots
from udm.host.spark.windows import hopping_range
from udm.host.strategy import use_partial
from udm.host.windows import HoppingWindow

__all__ = ["BUCKET_COL", "grid_results"]


# ------------------------------------------------------------ numpy helpers


# ----------------------------------------------------------- Spark side


def _bucketed(source: DataFrame, w: HoppingWindow, watermark: int, columns: list[str]) -> DataFrame:
    """Events (``source``, of ``columns``) with each bucket of windows
    holding them (usually one)."""
    k_min, k_max = hopping_range(w, watermark)
    b = spark_evaluate.BUCKET
    ranged = source.select("*", k_min.alias("__udm_kmin"), k_max.alias("__udm_kmax")).where(
        F.col("__udm_kmin") <= F.col("__udm_kmax")
    )
    lo = F.expr(f"(__udm_kmin - pmod(__udm_kmin, {b}L)) div {b}L")
    hi = F.expr(f"(__udm_kmax - pmod(__udm_kmax, {b}L)) div {b}L")
    buckets = F.when(lo == hi, F.array(lo)).otherwise(F.sequence(lo, hi))
    return ranged.select(*[F.col(quoted(c)) for c in columns], F.explode(buckets).alias(BUCKET_COL))


def grid_results(job: WindowJob, points: bool = False) -> DataFrame:
    """The window operation's result rows (lifetime, keys, one column per
    call), evaluated on the grid. ``points``: every event is ``[s, s + 1)``,
    so the workers derive the end (unless Spark needs it to find buckets)."""
    keys, op, needed, out_schema = job.keys, job.op, job.needed, job.out_schema
    w = op.window.require_grid("the grid route")
    partial = use_partial(op)
    ends = [] if points and (partial or keys) else [E_COL]
    columns = list(dict.fromkeys([*keys, S_COL, *ends, *needed]))
    source = job.frame.select(columns)  # composed with the source's projection
    if partial:
        schema = T.StructType(
            [
                *job.key_fields,
                T.StructField(BUCKET_COL, T.LongType(), False),
                T.StructField(STATE, T.BinaryType(), False),
            ]
        )
        slots = task_slots(source.sparkSession)
        if slots is not None:
            # one fold task per core (input partitions joined, no shuffle;
            # fewer partitions are left as they are): a partition's
            # states are one per (key, window or pane) it holds, so fewer,
            # larger partitions make fewer states to build, pickle, shuffle
            # and merge (on 2 cores, 4 partitions of 1,000 keys: half the
            # UDA calls); the fold reads at most FOLD_BLOCK events at once
            source = source.coalesce(slots)
        states = map_in_arrow(source, fold_fn(op, list(keys), needed), schema, columns)
        # df[name] is one call into the JVM, F.col(name) thirteen
        part = [*[states[quoted(k)] for k in keys], states[BUCKET_COL]]
        # as many merge tasks as cores: the states are small, and Spark's
        # adaptive plan would otherwise merge them all in one task
        by_window = states.repartition(slots, *part) if slots else states.repartition(*part)
        return map_in_arrow(
            by_window,
            merge_fn(op, list(keys), job.pa_schema),
            out_schema,
            schema.fieldNames(),
        )
    evaluate = _evaluate_fn(op, list(keys), needed, job.pa_schema)
    if keys:
        # a key's events go to one worker, which finds their windows
        by_key = source.repartition(*[source[quoted(k)] for k in keys])
        return map_in_arrow(by_key, evaluate, out_schema, columns)
    # without keys, buckets of windows spread the stream over the workers
    bucketed = _bucketed(source, w, op.watermark, columns)
    return map_in_arrow(bucketed.repartition(bucketed[BUCKET_COL]), evaluate, out_schema)


# ----------------------------------------------------------- worker side


def _evaluate_fn(
    op: WindowOp, keys: list[str], payload: list[str], schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function evaluating every window of the (key, bucket)
    groups of a partition from their events: over point events, each
    window's run of the events sorted by start (:func:`_slices`), else its
    memberships."""
    w = op.window.require_grid("the grid route")
    watermark = op.watermark
    n_bucket = spark_evaluate.BUCKET  # as planned on the driver

    def evaluate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        events = grid_events(batches, w, watermark)
        if events is None:
            return
        table, s, e, k_min, k_max = events
        if BUCKET_COL in table.column_names:
            first = table.column(BUCKET_COL).to_numpy() * n_bucket
            k_min, k_max = np.maximum(k_min, first), np.minimum(k_max, first + n_bucket - 1)
        if not bool((k_min <= k_max).any()):
            return  # no event in any window (between windows, or after the watermark)
        groups = [*keys, BUCKET_COL] if BUCKET_COL in table.column_names else keys
        got = _slices(w, [key_codes(table.column(c)) for c in groups], s, e, k_min, k_max)
        if got is not None:
            yield from sliced_windows(op, table, keys, payload, got, s, schema)
            return
        rows, k = explode(k_min, k_max)
        codes = [key_codes(table.column(c))[rows] for c in keys]
        order = np.lexsort((e[rows], s[rows], k, *reversed(codes)))
        rows, k = rows[order], k[order]
        codes = [c[order] for c in codes]
        runs = run_starts(k, *codes)
        win_s = w.start_of(k[runs])
        members = Memberships(table, keys, payload, s, e, rows, runs)
        yield from evaluate_runs(op, members, win_s, win_s + w.size, schema)

    return paused_batches(evaluate)


def _slices(
    w: HoppingWindow,
    codes: list[np.ndarray],
    s: np.ndarray,
    e: np.ndarray,
    k_min: np.ndarray,
    k_max: np.ndarray,
) -> Slices | None:
    """Point events' grid windows (each holding any, by group then index)
    as runs of the events sorted by (group, start). A window's events are then
    one slice of a list, never copied per window in numpy or Arrow, which
    for size/hop = 10 would make ten memberships of every event.

    An event's windows ``k_min..k_max`` grow with its start, so sorted
    events hold each window in one run, found by binary search on group-
    major window indexes (where each event is in one window, the runs of
    equal window themselves: :func:`_single_slices`, less than half the
    search's time over 1M events of tumbling windows). Events starting
    together are in every window or none, so ordering each such run by
    payload keeps every window's values in canonical order (start, then
    payload). None where this does not apply: intervals, or indexes too
    wide for int64. At least one event must be in a window.
    """
    keep = np.flatnonzero(k_min <= k_max)
    if len(keep) == len(s):  # usually: no copies of the kept rows
        if not bool((e == s + 1).all()):
            return None
        order = lexsort((s, *reversed(codes)))
    else:
        if not bool((e[keep] == s[keep] + 1).all()):
            return None
        order = keep[lexsort((s[keep], *reversed([c[keep] for c in codes])))]
    ss, kmn = s[order], k_min[order]
    # each kept event in one window (tumbling windows, hopping ones with gaps)
    single = bool(((k_min == k_max) | (k_min > k_max)).all())
    kmx = kmn if single else k_max[order]
    head = np.zeros(len(order), dtype=bool)
    head[0] = True
    for c in codes:
        sc = c[order]
        head[1:] |= sc[1:] != sc[:-1]
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] = (ss[1:] == ss[:-1]) & ~head[1:]
    if single:
        return _single_slices(w, order, tied, head, kmn)
    group = np.cumsum(head) - 1
    base = kmn[head][group]
    span = int((kmx - base).max()) + 1
    if int(group[-1] + 1) * span >= 2**62:
        return None
    # every key's windows, each once: those an event holds that the one
    # before it in its group did not
    prev = np.concatenate([[0], kmx[:-1]])
    win_ev, win_k = explode(np.where(head, kmn, np.maximum(kmn, prev + 1)), kmx)
    at = group[win_ev] * span + (win_k - base[win_ev])
    firsts = np.searchsorted(group * span + (kmx - base), at, side="left")
    lasts = np.searchsorted(group * span + (kmn - base), at, side="right")
    win_s = w.start_of(win_k)
    return Slices(order, tied, order[win_ev], win_s, win_s + w.size, firsts, lasts)


def _single_slices(
    w: HoppingWindow, order: np.ndarray, tied: np.ndarray, head: np.ndarray, k: np.ndarray
) -> Slices:
    """:func:`_slices` where each sorted event is in one window ``k`` (a
    tumbling window, or hopping windows with gaps, over point events): a
    window is a run of equal (group, k), the runs are the windows in the
    order the general search lists them, and no window index is packed
    or searched for."""
    begins = head.copy()
    begins[1:] |= k[1:] != k[:-1]
    firsts = np.flatnonzero(begins)
    lasts = np.append(firsts[1:], len(order))
    win_s = w.start_of(k[firsts])
    return Slices(order, tied, order[firsts], win_s, win_s + w.size, firsts, lasts)
