"""The cyclic garbage collector paused while an evaluation allocates.

The host and the reference evaluator allocate millions of small, acyclic
objects (events, window descriptors, outputs) and keep many of them (the
outputs). CPython's generational collector runs a full collection whenever
the objects that survived its young collections grow by a quarter of the
heap, and each full collection scans every live object, the caller's input
included: over a million events that is a third of the time and grows
faster than the data (issue 31: the reference evaluator's 1M-event median
took 1.3x the time per event of its 100k-event run). Reference counting
still frees everything these evaluations drop; a cycle a UDM makes is
collected once the collector runs again after the pause.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

__all__ = ["gc_paused", "paused_batches"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the ``with`` block; enable it again
    after, unless it was disabled already (pauses nest)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def paused_batches(
    fn: Callable[[Iterator[In]], Iterator[Out]],
) -> Callable[[Iterator[In]], Iterator[Out]]:
    """``fn``, a Spark worker's batch function (``mapInArrow``), run with
    the cyclic collector paused until it has yielded its last batch.

    A grid worker folds or evaluates a partition's windows in Python: a
    million events make a list of a million values, tens of thousands of
    slices and states, each a tracked container that is dropped again
    (no cycles), and the collector's young and full collections over them
    took about a tenth of a fold's CPU time (issue 32). Pausing only while
    the function runs leaves the worker process's collector as it was
    between tasks."""

    def run(batches: Iterator[In]) -> Iterator[Out]:
        with gc_paused():
            yield from fn(batches)

    run.__doc__ = fn.__doc__
    return run
