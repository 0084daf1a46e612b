"""How the Spark engine runs a window operation: decisions, no Spark.

These are the Spark engine's planning choices for a :class:`WindowOp`
(partial aggregation, panes, which worker route), kept free of pyspark so
that ``explain()`` can show them for any query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from udm.host.plan import WindowOp

__all__ = [
    "HEAVY_KEY_SHARE",
    "PARTIAL_MIN_HEAVY",
    "PARTIAL_MIN_PER_GROUP",
    "SAMPLE_ROWS",
    "KeySample",
    "PartialChoice",
    "choose_partial",
    "describe_strategy",
    "folds_by_segments",
    "folds_by_sort",
    "partial_is_open",
    "sample_unit",
    "spark_route",
    "use_partial",
    "uses_panes",
]

#: events the planner reads from the head of the input (its first partition)
SAMPLE_ROWS = 10_000
#: a key holding at least this share of the sample is heavy (200 balanced
#: keys or fewer: every key is heavy; 1,000 balanced keys: none is)
HEAVY_KEY_SHARE = 0.005
#: partial states when at least this share of the sample is in heavy keys ...
PARTIAL_MIN_HEAVY = 0.75
#: ... and the sample's (key, pane) groups hold at least this many events on
#: average. Both measured: docs/performance.md, "Partial aggregation and key layout"
PARTIAL_MIN_PER_GROUP = 1.5


@dataclass(frozen=True)
class KeySample:
    """What the planner read cheaply about a window operation's input: the
    first ``rows`` events of its first partition (Spark's ``limit``, no
    pass over the data), their distinct keys, the share of the most
    frequent key, their distinct (key, pane) groups -- the states the
    partial fold would make from them -- and the share of the events in
    heavy keys (each holding at least :data:`HEAVY_KEY_SHARE` of them).

    Key shares do not depend on how the head was drawn; events per group
    do: a head in time order holds whole panes, a head in random order
    (after a round-robin repartition) a thinned sample of them, so
    ``per_group`` is a lower bound of what the fold sees."""

    rows: int
    keys: int
    hottest: float
    groups: int
    heavy: float

    @property
    def per_group(self) -> float:
        """Events per (key, pane) state: how much the partial fold reduces."""
        return self.rows / self.groups if self.groups else 0.0


@dataclass(frozen=True)
class PartialChoice:
    """Whether Spark folds partial states, and why (shown by ``explain``)."""

    partial: bool
    reason: str


def uses_panes(op: WindowOp) -> bool:
    """Whether partial states of point events are kept per pane of
    gcd(size, hop): overlapping hopping windows of time-insensitive
    UDAs, whose states do not depend on the window, so a pane's state
    serves every window holding it ("No pane, no gain", Li et al.)."""
    grid = op.window.grid  # panes of gcd(size, hop): grid windows' own notion
    return (
        grid is not None
        and grid.size > grid.hop
        and all(not c.udm.time_sensitive for c in op.calls)
    )


def folds_by_segments(op: WindowOp) -> bool:
    """Whether the partial fold may run vectorized (:mod:`udm.host.spark.partialfold`):
    every call a time-insensitive UDA defining ``add_segments`` over a
    column. It does where each event is in one state -- tumbling windows,
    point events under panes -- over numbers without nulls (checked per
    partition: otherwise the per-event fold)."""
    return op.kind == "aggregate" and all(
        c.udm.incremental
        and not c.udm.time_sensitive
        and c.udm.implements("add_segments")
        and isinstance(c.value, str)
        for c in op.calls
    )


def folds_by_sort(op: WindowOp) -> bool:
    """Whether the partial fold may run from one sort of a partition's
    events by (key, start) (:func:`udm.host.spark.partialfold.sorted_fold`):
    every call a time-insensitive incremental UDA, which folds a state's
    values by ``add_segments``, ``add_many`` or ``add`` without reading
    lifetimes. It does where each event is in one state -- tumbling
    windows, point events under panes (checked per partition: otherwise
    the per-event fold)."""
    return op.kind == "aggregate" and all(
        c.udm.incremental and not c.udm.time_sensitive for c in op.calls
    )


def partial_is_open(op: WindowOp) -> bool:
    """Whether the planner chooses between partial states and the sliced
    path from a sample of the input: ``partial=None`` on hopping and
    tumbling windows (without ``emit_empty``) of mergeable UDAs."""
    return op.partial is None and op.window.is_grid and not op.emit_empty and op.mergeable()


def sample_unit(op: WindowOp) -> int:
    """The width (ticks) of the time slots whose (key, slot) groups the
    partial fold turns into one state each: panes of gcd(size, hop) when
    panes are used, else one slot per hop (per window)."""
    grid = op.window.require_grid("sampling the partial fold's groups")
    return grid.pane if uses_panes(op) else grid.hop


def choose_partial(
    op: WindowOp, sample: KeySample | None, unsampled: str = "the input was not sampled"
) -> PartialChoice:
    """Partial states or not, and why. ``partial=True/False`` decides;
    snapshot and count windows, and UDAs that cannot merge, go without;
    ``emit_empty`` grid windows (assigned in Spark SQL) keep partial states.
    Otherwise the sample decides: partial states when most of its events
    (:data:`PARTIAL_MIN_HEAVY`) are in heavy keys and its (key, pane)
    groups hold at least :data:`PARTIAL_MIN_PER_GROUP` events on average
    (few keys, densely: the fold shrinks what is shuffled, and no key
    sits on one worker), else the sliced path (many keys, or a hot key
    among many cold ones: a state per cold (key, pane) costs more than the
    shuffle it saves). Where every UDA folds from one sort of the
    partition (:func:`folds_by_sort`: time-insensitive, by
    ``add_segments``, ``add_many`` or ``add``) over windows that do not
    overlap, a state costs one call per UDA and is merged into one window,
    so the key shares do not matter: dense groups alone choose partial
    states (measured: docs/performance.md, "Against the transfer floor" and
    "Where a udm mean's time goes"; under panes each state is merged into
    every window holding it, and a hot key among cold ones still goes
    sliced). Without a sample the sliced path, which is faster on many
    keys."""
    if op.partial is not None:
        op.check_partial()
        return PartialChoice(op.partial, f"partial={op.partial} forces it")
    if not op.window.is_grid:
        return PartialChoice(False, "snapshot and count windows: only with partial=True")
    if not op.mergeable():
        return PartialChoice(False, "not every UDA merges states in any order")
    if op.emit_empty:
        return PartialChoice(True, "emit_empty: windows assigned in Spark SQL, states merged")
    if sample is None:
        return PartialChoice(False, f"{unsampled}: sliced path")
    if not sample.rows:
        return PartialChoice(False, "the sample of the input is empty: sliced path")
    per = sample.per_group
    # the fold from one sort over windows that do not overlap costs a call
    # per state and UDA, and each state is merged once per window; under
    # panes each state is merged into every window holding it
    by_sort = folds_by_sort(op) and not uses_panes(op)
    heavy_ok = by_sort or sample.heavy >= PARTIAL_MIN_HEAVY
    dense_ok = per >= PARTIAL_MIN_PER_GROUP
    unit = "pane" if uses_panes(op) else "window"
    heavy = f"{sample.heavy:.0%} of events in keys of >= {HEAVY_KEY_SHARE:.1%} each"
    if by_sort:
        heavy += " (any share: every UDA folds from one sort, windows do not overlap)"
    else:
        heavy += f" (>= {PARTIAL_MIN_HEAVY:.0%})" if heavy_ok else f" (< {PARTIAL_MIN_HEAVY:.0%})"
    dense = f"{per:.1f} events per (key, {unit}) group"
    dense += " (>= " if dense_ok else " (< "
    verdict = "partial states" if heavy_ok and dense_ok else "sliced path"
    return PartialChoice(
        heavy_ok and dense_ok,
        f"sample of {sample.rows} events (head of the first input partition): "
        f"{sample.keys} keys, hottest {sample.hottest:.0%}; "
        f"{heavy}, {dense}{PARTIAL_MIN_PER_GROUP:g}): {verdict}",
    )


def use_partial(op: WindowOp) -> bool:
    """Whether Spark folds partial states per input partition: as
    ``partial=`` says (the Spark engine sets it from :func:`choose_partial`
    before planning the operation), else as :func:`choose_partial` without
    a sample. Snapshot and count windows only on request: their windows
    depend on every endpoint of a key, so assigning them sends each key
    to one worker anyway, where evaluating them directly is far cheaper
    than assigning them in Spark SQL for partial states."""
    return choose_partial(op, None).partial


def spark_route(op: WindowOp) -> Literal["grid", "endpoints", "assigned"]:
    """How Spark runs the operation: hopping and tumbling windows in the
    worker (``grid``), snapshot and count windows in the worker unless
    partially aggregated (``endpoints``), else windows assigned in Spark
    SQL (``assigned``: partial snapshot/count windows, ``emit_empty``)."""
    if op.window.is_grid:
        return "assigned" if op.emit_empty else "grid"
    return "assigned" if use_partial(op) else "endpoints"


def describe_strategy(
    op: WindowOp, keys: tuple[str, ...], choice: PartialChoice | None = None
) -> str:
    """How Spark runs ``op`` over groups by ``keys``, for ``explain``;
    ``choice``: the planner's choice of partial states, when it made one."""
    partial = choice.partial if choice is not None else use_partial(op)
    by = ", ".join([*keys, "window"])
    w = op.window
    route = spark_route(op)
    if route == "grid":
        if partial:
            run = "partial states folded per partition and per window in the worker (mapInArrow)"
            if uses_panes(op):
                run += ", point events folded once per pane of gcd(size, hop)"
            if folds_by_segments(op):
                run += (
                    ", by one add_segments call per UDA over the partition's events sorted"
                    " by (key, start) where each event is in one state"
                )
            elif folds_by_sort(op):
                run += (
                    ", from the partition's events sorted by (key, start) where each event"
                    " is in one state (add_many or add per state and UDA, add_segments"
                    " where defined)"
                )
            return (
                f"{run}; shuffled by ({', '.join([*keys, 'bucket of windows'])}); "
                "merged per window (mapInArrow)"
            )
        by_what = ", ".join(keys) if keys else "bucket of windows"
        run = (
            f"events shuffled by ({by_what}); windows assigned, sorted and evaluated "
            "in the worker (mapInArrow)"
        )
        return f"{run}; over point events each window is a slice of the events sorted by start"
    if route == "endpoints":
        by_what = ", ".join(keys) if keys else "one partition"
        run = (
            f"events shuffled by ({by_what}); distinct endpoints numbered, windows assigned, "
            "sorted and evaluated in the worker (mapInArrow)"
        )
        if w.members_by_start:
            points = op.kind == "operator" or any(c.udm.time_sensitive for c in op.calls)
            over = "over point events " if points else ""
            run += f"; {over}each window is a slice of the events sorted by start"
        return run
    assign = w.sql_assignment
    if partial:
        run = f"partial states per partition (mapInArrow), shuffle, merge per ({by}) (applyInArrow)"
    else:
        run = f"groupBy({by}).applyInArrow, events sorted canonically per window"
    return f"{assign}; {run}"


# ------------------------------------------------------- shared row logic
