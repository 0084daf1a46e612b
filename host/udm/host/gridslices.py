"""One key's live events sorted by start, for grid windows read as slices.

A hopping or tumbling window of a time-insensitive aggregate needs only the
values of its members in canonical order (start, then payload). Kept sorted
by start, one key's events make every window a slice found by two
bisections, as on Spark (:mod:`udm.host.spark.grid`): no per-window event
lists, no index of ends, and an in-order event is one ``append``. The grid
path (:mod:`udm.host.gridpath`) keeps one :class:`KeyEvents` per key when
its UDM cannot be updated by ``add``/``remove`` (a Python median, an
order-sensitive or non-invertible incremental aggregate).

Records are the grid path's mutable ``[start, end, value, key]`` lists,
shared with its id index, so a retraction that moves an end is seen here
without a lookup.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from typing import Any

from udm.host.time import format_time
from udm.sdk.payloads import payload_key

__all__ = ["KeyEvents"]


def _canonical(record: list[Any]) -> tuple[Any, ...]:
    return (record[0], payload_key(record[2]))


class KeyEvents:
    """Live events of one key by start (ties in arrival order)."""

    __slots__ = ("ids", "maxdur", "payloads", "records", "starts", "ties", "vals")

    def __init__(self) -> None:
        self.records: list[list[Any]] = []
        self.starts: list[int] = []
        self.ids: list[Hashable] = []  # each record's event id, to forget it by id too
        self.payloads: list[Any] = []  # each record's payload, for error messages
        #: each record's value (``record[2]``, which never changes): a window
        #: of point events is then one list slice, with no pass over records
        self.vals: list[Any] = []
        #: the longest lifetime added since the key last had no events: a
        #: window's members start less than this before it
        self.maxdur = 0
        #: two events share a start: slices must be put in canonical order
        self.ties = False

    def __len__(self) -> int:
        return len(self.records)

    def add(self, record: list[Any], ident: Hashable, payload: Any) -> None:
        """Keep an event (its ``record``, id and payload) in start order; an
        event arriving in order is an append, a late one is inserted."""
        start = record[0]
        starts = self.starts
        if not starts or start > starts[-1]:
            starts.append(start)
            self.records.append(record)
            self.vals.append(record[2])
            self.ids.append(ident)
            self.payloads.append(payload)
        else:
            i = bisect_right(starts, start)
            if (i and starts[i - 1] == start) or (i < len(starts) and starts[i] == start):
                self.ties = True
            starts.insert(i, start)
            self.records.insert(i, record)
            self.vals.insert(i, record[2])
            self.ids.insert(i, ident)
            self.payloads.insert(i, payload)
        self.widen(record)

    def widen(self, record: list[Any]) -> None:
        """Note a record's (possibly extended) lifetime."""
        if record[1] - record[0] > self.maxdur:
            self.maxdur = record[1] - record[0]

    def remove(self, record: list[Any]) -> tuple[Any] | None:
        """Take ``record`` (this very object) out; returns its payload (in a
        1-tuple), or None if it is not here."""
        starts, records = self.starts, self.records
        i = bisect_left(starts, record[0])
        while i < len(starts) and starts[i] == record[0]:
            if records[i] is record:
                payload = self.payloads[i]
                del starts[i], records[i], self.ids[i], self.payloads[i], self.vals[i]
                return (payload,)
            i += 1
        return None

    def values(self, start: int, end: int) -> list[Any]:
        """The values of the events overlapping ``[start, end)``, in
        canonical order (start, then payload; ties of both in arrival
        order, which a time-insensitive UDM cannot tell apart)."""
        starts = self.starts
        hi = bisect_left(starts, end)
        if self.maxdur <= 1:  # point events: a member starts inside the window
            if not self.ties:
                return self.vals[bisect_left(starts, start) : hi]
            chosen = self.records[bisect_left(starts, start) : hi]
        else:
            lo = bisect_left(starts, start - self.maxdur + 1)
            chosen = [r for r in self.records[lo:hi] if r[1] > start]
        if self.ties:
            chosen = sorted(chosen, key=_canonical)
        return [r[2] for r in chosen]

    def retirable(self, bound: int, all_of_them: bool) -> bool:
        """Whether :meth:`retire` is worth its cost at ``bound``: half the
        events or more end before it (or ``all_of_them``, any)."""
        starts = self.starts
        j = bisect_left(starts, bound - 1 if self.maxdur <= 1 else bound)
        return j > 0 and (all_of_them or 2 * j >= len(starts))

    def cut(self, j: int) -> tuple[list[Hashable], list[list[Any]]]:
        """Forget the first ``j`` events (in start order): their ids and
        records, as two lists (a caller may forget them by id at C level)."""
        ids, records = self.ids[:j], self.records[:j]
        del self.ids[:j], self.records[:j], self.starts[:j], self.payloads[:j], self.vals[:j]
        if not self.records:
            self.maxdur, self.ties = 0, False
        return ids, records

    def retire(self, bound: int) -> list[tuple[Hashable, list[Any]]]:
        """Forget the events ending before ``bound`` (they start before it);
        returns their ids and records."""
        if self.maxdur <= 1:  # point events: those starting before bound - 1
            j = bisect_left(self.starts, bound - 1)
            return list(zip(*self.cut(j), strict=True)) if j else []
        j = bisect_left(self.starts, bound)
        if not j:
            return []
        pairs = list(zip(self.ids[:j], self.records[:j], strict=True))
        keep = [r[1] >= bound for r in self.records[:j]]
        kept = [(i, r) for (i, r), k in zip(pairs, keep, strict=True) if k]
        self.payloads[:j] = [p for p, k in zip(self.payloads[:j], keep, strict=True) if k]
        self.records[:j] = [r for _, r in kept]
        self.vals[:j] = [r[2] for _, r in kept]
        self.ids[:j] = [i for i, _ in kept]
        self.starts[:j] = [r[0] for _, r in kept]
        if not self.records:
            self.maxdur, self.ties = 0, False
        return [(i, r) for i, r in pairs if r[1] < bound]

    def described(self, start: int, end: int) -> list[str]:
        """The events overlapping ``[start, end)`` as error messages list
        them: id, lifetime, payload."""
        return [
            f"id={i!r} [{r[0]}, {format_time(r[1])}) {p!r}"
            for i, r, p in zip(self.ids, self.records, self.payloads, strict=True)
            if r[0] < end and start < r[1]
        ]

    def min_end(self) -> int | None:
        """The earliest end of the key's kept events (None without any): until
        then nothing of them can be dropped."""
        return min((r[1] for r in self.records), default=None)
