"""What a long ``udm-cli run`` is doing: the Spark stage and its tasks.

A spinner alone says nothing for minutes on a large input. While a query
runs, :func:`spark_progress` polls Spark's status tracker (no cost to the
job) and shows the running stages and how many of their tasks are done,
next to the query's name. Without a driver-side SparkContext (Spark
Connect) the spinner keeps its plain description.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["describe_stages", "spark_progress"]


def describe_stages(tracker: Any) -> str | None:
    """``stage 3: 5/8 tasks`` for the running stages, or None."""
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is None:
            continue
        parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts) or None


@contextmanager
def spark_progress(
    spark: Any, update: Callable[[str | None], None], every: float = 0.5
) -> Iterator[None]:
    """Call ``update`` with :func:`describe_stages` every ``every`` seconds
    while the body runs (and with None at the end)."""
    try:
        tracker = spark.sparkContext.statusTracker()
    except Exception:  # Spark Connect: no status tracker here
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(every):
            try:
                update(describe_stages(tracker))
            except Exception:  # the JVM went away: the body reports it
                return

    try:  # PySpark's thread: its JVM side ends with it (pinned thread mode)
        from pyspark import InheritableThread

        thread: threading.Thread = InheritableThread(target=poll, name="udm-progress")
        thread.daemon = True
    except ImportError:  # pragma: no cover - pyspark is there whenever Spark runs
        thread = threading.Thread(target=poll, name="udm-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        update(None)
