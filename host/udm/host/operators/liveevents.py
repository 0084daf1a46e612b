"""One side's live events of a join or anti-join (CEDR 4.3): by id, by key,
and by end for cleanup at CTIs.

>>> side = LiveEvents(lambda p: p["k"])
>>> side.add(side.admit("a"), 0, 5, {"k": 1})
[0, 5, {'k': 1}, 1]
>>> [ident for ident, _ in side.overlapping(1, 4, 9)]
['a']
>>> side.expire(6)
['a']
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from udm.host.operators.ids import InputIds

__all__ = ["KeyFn", "LiveEvents"]

KeyFn = Callable[[Mapping[str, Any]], Hashable]

#: the saved state's names of the index's attributes (see :meth:`LiveEvents.get_state`)
SAVED = {"events": "events", "by_key": "by_key", "ends": "_ends", "seq": "_seq"}


class LiveEvents:
    """One side's live events: by id, by key, and by end for cleanup.

    Each key's events are a small dict scanned in full for overlaps: the
    CTIs bound what a key holds (events still live or retractable), and a
    scan of a handful of entries is cheaper in Python than any tree. A
    workload with thousands of live events per key would want an interval
    index here (CEDR's "multidimensional structure").
    """

    def __init__(self, key_fn: KeyFn) -> None:
        self.key_fn = key_fn
        self.events: dict[Any, list[Any]] = {}  # id -> [start, end, payload, key]
        self.by_key: dict[Hashable, dict[Any, list[Any]]] = {}
        self._ends: list[tuple[int, int, Any]] = []
        self._seq = 0
        self.ids = InputIds()

    def get_state(self) -> dict[str, Any]:
        """The index as plain data (a streaming query saves it between micro-batches)."""
        saved = {name: getattr(self, attribute) for name, attribute in SAVED.items()}
        return {**saved, "reused": self.ids.newest}

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back a :meth:`get_state` (one saved before ids could be reused has none)."""
        for name, attribute in SAVED.items():
            setattr(self, attribute, state[name])
        self.ids.newest = state.get("reused", {})

    def admit(self, ident: Any) -> Any:
        """The key under which a new input event ``ident`` is held: its id,
        or a :class:`~udm.host.operators.ids.Reused` one while an earlier
        event under the id is still held (the input may reuse an id its
        own CTI has freed, while the other side's CTI keeps it here)."""
        return self.ids.admit(ident, self.events)

    def key(self, ident: Any) -> Any:
        """The key of input id ``ident``'s newest event (for retractions)."""
        return self.ids.key(ident)

    def add(self, ident: Any, start: int, end: int, payload: Any) -> list[Any]:
        """Hold event ``ident`` (a key from :meth:`admit`); returns its record
        ``[start, end, payload, key]``, which the index shares."""
        return self.add_keyed(ident, start, end, payload, self.key_fn(payload))

    def add_keyed(self, ident: Any, start: int, end: int, payload: Any, key: Hashable) -> list[Any]:
        """:meth:`add` with the join key already computed."""
        record = [start, end, payload, key]
        self.events[ident] = record
        group = self.by_key.get(key)
        if group is None:
            group = self.by_key[key] = {}
        group[ident] = record
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, ident))
        return record

    def set_end(self, ident: Any, end: int) -> None:
        """A retraction moved held event ``ident``'s end (the heap keeps the
        old entry; :meth:`expire` skips it)."""
        self.events[ident][1] = end
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, ident))

    def remove(self, ident: Any) -> None:
        """Forget held event ``ident`` (fully retracted or expired)."""
        record = self.events.pop(ident)
        self.ids.forget(ident)
        group = self.by_key[record[3]]
        del group[ident]
        if not group:
            del self.by_key[record[3]]

    def overlapping(self, key: Hashable, start: int, end: int) -> list[tuple[Any, list[Any]]]:
        """Live events of ``key`` whose lifetimes overlap ``[start, end)``."""
        group = self.by_key.get(key)
        if not group:
            return []
        return [(i, r) for i, r in group.items() if r[0] < end and r[1] > start]

    def expire(self, time: int) -> list[Any]:
        """Forget the events that ended before ``time``; returns their ids."""
        gone = []
        ends = self._ends
        events = self.events
        while ends and ends[0][0] < time:
            end, _, ident = heapq.heappop(ends)
            record = events.get(ident)
            if record is not None and record[1] == end:
                self.remove(ident)
                gone.append(ident)
        return gone
