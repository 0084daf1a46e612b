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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


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
