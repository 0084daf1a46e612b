"""The grid path's id index, written lazily: a run's records kept as its columns.

The grid path keeps a record ``[start, end, value, key]`` per live event
(its id index), which a retraction, the rebuild of a window after a UDM
error, an error message and a snapshot read. Over in-order data nearly
none is ever read: a CTI soon retires it. Building the records (a list per
event, a dict entry) and sweeping them out again cost the columnar loop
(:meth:`~udm.host.gridcolumns.GridColumns.run_columns`) about a quarter of
its time at many keys. So a run whose ids are consecutive ints keeps its
columns (the lists the loop built anyway) here instead, and the records
are written only when something reads the index: the grid path's
``events`` property writes them first (see
:class:`~udm.host.gridcore.GridCore`). A sweep drops the columns of whole
runs that end before its bound without a record ever being built.

Pending columns always come after every record of the index (whoever
writes the index writes them first), and their ids are disjoint from the
index's and from each other's (the loop checks, against :attr:`lo` and
:attr:`hi`), so writing them in order gives exactly the index the loop
would have written at once, sweeps included.
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import compress, repeat
from operator import ge
from typing import Any

__all__ = ["PendingRecords"]


class PendingRecords:
    """Runs of the columnar loop whose records are not written yet: per run
    its ids (consecutive ints), starts, ends, values and keys (a list, or
    ``repeat(None)`` without a key), and its latest end."""

    __slots__ = ("chunks", "count", "hi", "lo")

    def __init__(self) -> None:
        self.chunks: list[tuple[list[Any], list[int], list[int], Any, Any, int]] = []
        #: how many records the chunks hold (the index's size counts them)
        self.count = 0
        #: every pending id is in range(lo, hi) (after a sweep, not each one of it)
        self.lo = self.hi = 0

    def add(
        self, ids: list[int], starts: list[int], ends: list[int], values: Any, keys: Any, last: int
    ) -> None:
        """Keep a run's columns: ``ids`` are consecutive ints (``ids[0]``
        up), disjoint from :attr:`lo` .. :attr:`hi` and from the index;
        ``last`` is the latest of ``ends``."""
        first, stop = ids[0], ids[-1] + 1
        if self.chunks:
            self.lo, self.hi = min(self.lo, first), max(self.hi, stop)
        else:
            self.lo, self.hi = first, stop
        self.chunks.append((ids, starts, ends, values, keys, last))
        self.count += len(ids)

    def apart(self, first: int, n: int) -> bool:
        """Whether ids ``first .. first + n - 1`` are surely none of the pending ones."""
        return first + n <= self.lo or first >= self.hi

    def write(self, index: dict[Hashable, list[Any]]) -> None:
        """Write the pending records into ``index``, in order (as the loop's
        ``_records`` writes a whole run), and forget them."""
        chunks = self.chunks
        self.chunks, self.count = [], 0
        for ids, starts, ends, values, keys, _ in chunks:
            records = zip(starts, ends, values, keys, strict=False)  # keys may be repeat(None)
            index.update(zip(ids, map(list, records), strict=True))

    def sweep(self, bound: int) -> None:
        """Drop the records that end before ``bound``, as the index's sweep
        drops its own: whole runs that end before it without a look, a run
        that straddles it filtered column by column."""
        kept: list[tuple[list[Any], list[int], list[int], Any, Any, int]] = []
        count = 0
        for chunk in self.chunks:
            ids, starts, ends, values, keys, last = chunk
            if last < bound:
                continue
            if min(ends) < bound:
                keep = list(map(ge, ends, repeat(bound)))
                ids, starts = list(compress(ids, keep)), list(compress(starts, keep))
                ends, values = list(compress(ends, keep)), list(compress(values, keep))
                if type(keys) is not repeat:
                    keys = list(compress(keys, keep))
                chunk = (ids, starts, ends, values, keys, last)
            kept.append(chunk)
            count += len(ids)
        self.chunks, self.count = kept, count
