"""Event ids when an input reuses one: operators keep their streams valid.

A physical stream may reuse an id once its event is fully retracted or
ends before the latest CTI (see docs/concepts.md, "Physical streams"). An
operator that passes ids through can break that rule in its output even
when its input keeps it:

* a union's output CTI is the least of its inputs' CTIs, so an id one
  input may reuse is still live in the output while another input lags;
* a lifetime change can lengthen an event, so the earlier event under the
  id is still live in the output when the input reuses the id;
* a join and an anti-join hold an event until the CTIs of *both* sides
  pass its end, so the earlier event under a reused id is still in their
  state (and a pair with it may still be retracted).

:class:`OutputIds` renames an output event whose id is still live in the
operator's output to :class:`Reused` ``(id, n)``; :class:`InputIds` gives an
input event whose id the operator still holds a key of its own. Both keep
only ids that may still matter, so they cost nothing for a stream that
never reuses an id beyond a dict lookup per element.

>>> ids = OutputIds()
>>> ids.insert("a", 3)
'a'
>>> ids.advance(2)  # "a" ends at 3, after the CTI at 2: still live
>>> ids.insert("a", 9)
Reused(id='a', n=1)
>>> ids.retract("a", 5, 7)  # a retraction names the newest event
Reused(id='a', n=1)
>>> ids.advance(4)  # the first "a" ended before 4: its id is free again
>>> ids.insert("a", 12)
'a'
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Hashable
from dataclasses import dataclass
from typing import Any

from udm.host.time import MIN_TIME

__all__ = ["InputIds", "OutputIds", "Reused"]


@dataclass(frozen=True, slots=True)
class Reused:
    """The id of a later event under ``id`` while an earlier one is still
    live (``n`` counts from 1). Not a tuple, so it never equals an id of
    the user's."""

    id: Any
    n: int


#: "no entry" for ``dict.get``: ``None`` is an id like any other
_NONE = object()


def _fresh(ident: Any, taken: Container[Any]) -> Any:
    """``ident`` if it is free in ``taken``, else the first free
    :class:`Reused` of it."""
    if ident not in taken:
        return ident
    n = 1
    while Reused(ident, n) in taken:
        n += 1
    return Reused(ident, n)


class OutputIds:
    """The ids live in one operator's output stream.

    ``insert`` returns the id to emit, ``retract`` the id a retraction of
    the newest event under an id must name, and ``advance`` frees the ids
    of events that ended before the output CTI. Memory: one entry per event
    live in the output; each operation O(log n) for the ends' heap.
    """

    def __init__(self) -> None:
        self.live: dict[Any, int] = {}  # output id -> its end
        self.newest: dict[Any, Any] = {}  # operator's id -> its newest output id
        self.ends: list[tuple[int, int, Any, Any]] = []  # (end, seq, id, output id)
        self.cti = MIN_TIME
        self.seq = 0

    def insert(self, ident: Hashable, end: int) -> Any:
        """The output id of a new event ``ident`` ending at ``end``."""
        name = _fresh(ident, self.live)
        self.live[name] = end
        if name != ident or ident in self.newest:
            self.newest[ident] = name
        self._push(end, ident, name)
        return name

    def retract(self, ident: Hashable, start: int, new_end: int) -> Any:
        """The output id of a retraction of ``ident``'s newest event (its
        new end ``new_end``; ``start`` for a full one)."""
        name = self.newest.get(ident, ident)
        if name in self.live:
            if new_end <= start:
                del self.live[name]
                if self.newest.get(ident, _NONE) == name:
                    del self.newest[ident]
            else:
                self.live[name] = new_end
                self._push(new_end, ident, name)
        return name

    def advance(self, cti: int) -> None:
        """The output CTI moved to ``cti``: ids of events ending before it
        are free again."""
        self.cti = cti
        ends, live, newest = self.ends, self.live, self.newest
        while ends and ends[0][0] < cti:
            end, _, ident, name = heapq.heappop(ends)
            if live.get(name) == end:
                del live[name]
                if newest.get(ident, _NONE) == name:
                    del newest[ident]

    def _push(self, end: int, ident: Any, name: Any) -> None:
        self.seq += 1
        heapq.heappush(self.ends, (end, self.seq, ident, name))


class InputIds:
    """An operator's own keys for its input events: an event whose id the
    operator still holds (an earlier event, kept for the other side's
    sake) gets a :class:`Reused` key; retractions find the newest."""

    def __init__(self) -> None:
        self.newest: dict[Any, Any] = {}  # input id -> its newest key, when not the id

    def admit(self, ident: Hashable, held: Container[Any]) -> Any:
        """The key of a new input event ``ident``, given the keys ``held``."""
        key = _fresh(ident, held)
        if key != ident:
            self.newest[ident] = key
        else:
            self.newest.pop(ident, None)
        return key

    def key(self, ident: Hashable) -> Any:
        """The key of ``ident``'s newest event (for a retraction)."""
        return self.newest.get(ident, ident) if self.newest else ident

    def forget(self, key: Any) -> None:
        """``key``'s event left the operator's state."""
        if isinstance(key, Reused) and self.newest.get(key.id) == key:
            del self.newest[key.id]
