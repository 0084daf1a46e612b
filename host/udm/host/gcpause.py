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

After a host's batch, :func:`promote_young` moves what the batch kept to
the collector's oldest generation without scanning it.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

__all__ = ["PROMOTE_AT", "gc_paused", "paused_batches", "promote_young"]


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


#: objects :func:`promote_young` moved to the oldest generation since it
#: last ran a full collection
_promoted = 0
#: fewer young objects than this are left to the collector (a young
#: collection of them costs about a millisecond)
PROMOTE_AT = 10_000


def promote_young() -> None:
    """Move the objects the batch allocated (and every other young one)
    to the collector's oldest generation, without scanning them, before it
    runs again: its next young collection would otherwise traverse every
    object allocated and kept during the pause (the outputs, the window
    states, the validator's records), a fifth of a million-event batch's
    time, and move them only one generation up. ``freeze`` then
    ``unfreeze`` is that move (two list splices); skipped for a few young
    objects, and when the caller has frozen objects (``unfreeze`` would
    release them). Objects moved so do not count towards the collector's
    own trigger for full collections, so once the moved objects outnumber
    the allocated memory blocks (``sys.getallocatedblocks``, more than the
    tracked objects) a full collection runs here: a reference cycle a UDM
    makes during batches is collected by then (a long stream of batches
    stays bounded)."""
    global _promoted
    young = gc.get_count()[0]
    # (get_freeze_count walks the frozen objects: asked only for a batch)
    if young < PROMOTE_AT or gc.get_freeze_count():
        return
    gc.freeze()
    gc.unfreeze()
    _promoted += young
    if _promoted > sys.getallocatedblocks():
        _promoted = 0
        gc.collect()
