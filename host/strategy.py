"""How the Spark engine runs a window operation: decisions, no Spark.

These are the Spark engine's planning choices for a :class:`WindowOp`
(partial aggregation, panes, which worker route), kept free of pyspark so
that ``explain()`` can show them for any query.
"""

from __future__ import annotations

from typing import Literal

from udm.host.plan import WindowOp
from udm.host.windows import CountByStartWindow, HoppingWindow, SnapshotWindow

__all__ = ["describe_strategy", "spark_route", "use_partial", "uses_panes"]


def uses_panes(op: WindowOp) -> bool:
    """Whether partial states of point events are kept per pane of
    gcd(size, hop): overlapping hopping windows of time-insensitive
    UDAs, whose states do not depend on the window, so a pane's state
    serves every window holding it ("No pane, no gain", Li et al.)."""
    w = op.window
    return (
        isinstance(w, HoppingWindow)  # panes of gcd(size, hop): grid windows' own notion
        and w.size > w.hop
        and all(not c.udm.time_sensitive for c in op.calls)
    )


def use_partial(op: WindowOp) -> bool:
    """Whether Spark folds partial states per input partition. By
    default on hopping and tumbling windows whenever every UDA can
    merge. Snapshot and count windows only on request: their windows
    depend on every endpoint of a key, so assigning them sends each key
    to one worker anyway, where evaluating them directly is far cheaper
    than assigning them in Spark SQL for partial states."""
    if op.partial is None:
        return op.window.is_grid and op.mergeable()
    op.check_partial()
    return op.partial


def spark_route(op: WindowOp) -> Literal["grid", "endpoints", "assigned"]:
    """How Spark runs the operation: hopping and tumbling windows in the
    worker (``grid``), snapshot and count windows in the worker unless
    partially aggregated (``endpoints``), else windows assigned in Spark
    SQL (``assigned``: partial snapshot/count windows, ``emit_empty``)."""
    if op.window.is_grid:
        return "assigned" if op.emit_empty else "grid"
    return "assigned" if use_partial(op) else "endpoints"


def describe_strategy(op: WindowOp, keys: tuple[str, ...]) -> str:
    """How Spark runs ``op`` over groups by ``keys``, for ``explain``."""
    by = ", ".join([*keys, "window"])
    w = op.window
    route = spark_route(op)
    if route == "grid":
        if use_partial(op):
            run = "partial states folded per partition and per window in the worker (mapInArrow)"
            if uses_panes(op):
                run += ", point events folded once per pane of gcd(size, hop)"
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
        if isinstance(w, CountByStartWindow):
            points = op.kind == "operator" or any(c.udm.time_sensitive for c in op.calls)
            over = "over point events " if points else ""
            run += f"; {over}each window is a slice of the events sorted by start"
        return run
    if isinstance(w, HoppingWindow):
        assign = "explode a generated array of window starts per event"
    elif isinstance(w, SnapshotWindow):
        assign = "distinct endpoints per key + lead() give windows; join events by endpoint rank"
    else:
        edge = "start" if isinstance(w, CountByStartWindow) else "end"
        assign = f"dense rank of distinct {edge} times per key + lead(); join members by rank"
    if use_partial(op):
        run = f"partial states per partition (mapInArrow), shuffle, merge per ({by}) (applyInArrow)"
    else:
        run = f"groupBy({by}).applyInArrow, events sorted canonically per window"
    return f"{assign}; {run}"


# ------------------------------------------------------- shared row logic
