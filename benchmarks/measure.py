"""What every benchmark case shares: timing a call, timing contenders
round-robin (best of N, so machine load hits them alike), and the rows of
figures checked against a target that ``run.py`` prints."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Targets", "best_of", "best_of_both", "timed"]

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds ``fn()`` took, and what it returned."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def best_of(contenders: dict[Any, Callable[[], Any]], rounds: int) -> dict[Any, float]:
    """Seconds of each contender (a no-argument callable), best of
    ``rounds`` round-robin rounds, in the order the dict gives them."""
    best = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            seconds, _ = timed(fn)
            best[name] = min(best[name], seconds)
    return best


def best_of_both(
    contenders: dict[Any, Callable[[], Any]], rounds: int
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Wall and CPU seconds (``time.process_time``) of each contender, each
    the best of ``rounds`` round-robin rounds. As in :func:`best_of`, a
    result is held until the next call has returned, so freeing it is not
    timed (a million outputs take a while to free)."""
    wall = {name: float("inf") for name in contenders}
    cpu = dict(wall)
    held = None
    for _ in range(rounds):
        for name, fn in contenders.items():
            w0, c0 = time.perf_counter(), time.process_time()
            result = fn()
            w, c = time.perf_counter() - w0, time.process_time() - c0
            held = result  # the previous result is freed here, untimed
            wall[name] = min(wall[name], w)
            cpu[name] = min(cpu[name], c)
    del held
    return wall, cpu


class Targets:
    """The rows of figures a benchmark module reports: each a value, its
    target as shown, and whether it is met (None: reported only)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, name: str, value: float | None, target: str, ok: bool | None) -> None:
        """A row as given."""
        self.rows.append({"figure": name, "value": value, "target": target, "met": ok})

    def at_most(self, name: str, value: float, limit: float, shown: str | None = None) -> None:
        """A row whose target is ``value <= limit`` (shown as ``<= limit``)."""
        self.add(name, value, shown or f"<= {limit:,}", value <= limit)

    def at_least(self, name: str, value: float, limit: float, shown: str | None = None) -> None:
        """A row whose target is ``value >= limit`` (shown as ``>= limit``)."""
        self.add(name, value, shown or f">= {limit:,}", value >= limit)
