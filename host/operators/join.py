"""Temporal equijoin and anti-semijoin (CEDR 4.3), symmetric and incremental.

Each side keeps its live events per key, ordered by start. An insert on one
side is matched against the other side's events of the same key whose
lifetimes overlap it; a retraction recomputes the intersections it changes
and retracts (or, for an expansion, inserts) exactly those outputs. A join
output's id is ``(left id, right id)``; its lifetime is the intersection.

The anti-semijoin keeps, per left event, the pieces of its lifetime that no
matching right event covers, and answers every change on either side by
recomputing the pieces of the left events it touches and emitting the
difference. Speculatively by default (a right event arriving later cuts a
piece already emitted, by a retraction); ``conservative=True`` emits a
piece only once CTIs on both sides have passed its end, so the output
never retracts, and holds the output CTI at the first piece not yet final.

Both output the least of their inputs' CTIs, and forget an event once its
end is before that CTI: no later insert on the other side can overlap it,
and no retraction on either side can change an output it is part of.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from sortedcontainers import SortedList

from udm.host.algebra import subtract_intervals
from udm.host.operators.base import CtiTracker, Operator
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["AntiJoinOperator", "JoinOperator"]

Predicate = Callable[[Any, Any], Any]
Combine = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]
KeyFn = Callable[[Mapping[str, Any]], Hashable]


class _Live:
    """One side's live events: by id, by key ordered by start, by end."""

    def __init__(self, key_fn: KeyFn) -> None:
        self.key_fn = key_fn
        self.events: dict[Any, list[Any]] = {}  # id -> [start, end, payload, key]
        self.by_key: dict[Hashable, SortedList] = {}
        self._ends: list[tuple[int, int, Any]] = []
        self._seq = 0

    def get_state(self) -> dict[str, Any]:
        return {"events": self.events, "by_key": self.by_key, "ends": self._ends, "seq": self._seq}

    def set_state(self, state: dict[str, Any]) -> None:
        self.events, self.by_key = state["events"], state["by_key"]
        self._ends, self._seq = state["ends"], state["seq"]

    def add(self, ident: Any, start: int, end: int, payload: Any) -> list[Any]:
        key = self.key_fn(payload)
        record = [start, end, payload, key]
        self.events[ident] = record
        self.by_key.setdefault(key, SortedList()).add((start, self._bump(), ident))
        heapq.heappush(self._ends, (end, self._seq, ident))
        return record

    def _bump(self) -> int:
        self._seq += 1
        return self._seq

    def set_end(self, ident: Any, end: int) -> None:
        record = self.events[ident]
        record[1] = end
        heapq.heappush(self._ends, (end, self._bump(), ident))

    def remove(self, ident: Any) -> None:
        start, _, _, key = self.events.pop(ident)
        entries = self.by_key[key]
        i = entries.bisect_left((start,))
        while entries[i][2] != ident:
            i += 1
        del entries[i]
        if not entries:
            del self.by_key[key]

    def overlapping(self, key: Hashable, start: int, end: int) -> list[tuple[Any, list[Any]]]:
        """Live events of ``key`` whose lifetimes overlap ``[start, end)``."""
        entries = self.by_key.get(key)
        if not entries:
            return []
        found = []
        events = self.events
        for s, _, ident in entries.irange(maximum=(end,), inclusive=(True, False)):
            record = events[ident]
            if s < end and record[1] > start:
                found.append((ident, record))
        return found

    def expire(self, time: int) -> list[Any]:
        """Forget the events that ended before ``time``; returns their ids."""
        gone = []
        ends = self._ends
        while ends and ends[0][0] < time:
            end, _, ident = heapq.heappop(ends)
            record = self.events.get(ident)
            if record is not None and record[1] == end:
                self.remove(ident)
                gone.append(ident)
        return gone


class JoinOperator(Operator):
    """Temporal equijoin of port 0 (left) and port 1 (right)."""

    name = "join"

    def __init__(
        self,
        key_left: KeyFn,
        key_right: KeyFn,
        combine: Combine,
        predicate: Predicate | None = None,
        name: str = "join",
    ) -> None:
        super().__init__(2)
        self.sides = (_Live(key_left), _Live(key_right))
        self.combine = combine
        self.predicate = predicate
        self.name = name
        self.ctis = CtiTracker(2)

    def get_state(self) -> dict[str, Any]:
        return {
            "emitted": self.emitted,
            "ctis": self.ctis,
            "sides": [side.get_state() for side in self.sides],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.emitted, self.ctis = state["emitted"], state["ctis"]
        for side, saved in zip(self.sides, state["sides"], strict=True):
            side.set_state(saved)

    def _matches(self, port: int, payload: Any, other_payload: Any) -> bool:
        if self.predicate is None:
            return True
        if port == 0:
            return bool(self.predicate(payload, other_payload))
        return bool(self.predicate(other_payload, payload))

    def _pair(self, port: int, ident: Any, other: Any) -> tuple[Any, Any]:
        return (ident, other) if port == 0 else (other, ident)

    def _payload(self, port: int, payload: Any, other_payload: Any) -> Any:
        if port == 0:
            return self.combine(payload, other_payload)
        return self.combine(other_payload, payload)

    def on_insert(self, port: int, element: Insert) -> None:
        side, other = self.sides[port], self.sides[1 - port]
        key = side.key_fn(element.payload)
        s, e, p = element.start, element.end, element.payload
        for oid, (os, oe, op, _) in other.overlapping(key, s, e):
            if self._matches(port, p, op):
                self.emit(
                    Insert(
                        self._pair(port, element.id, oid),
                        max(s, os),
                        min(e, oe),
                        self._payload(port, p, op),
                    )
                )
        side.add(element.id, s, e, p)

    def on_retract(self, port: int, element: Retract) -> None:
        side, other = self.sides[port], self.sides[1 - port]
        record = side.events.get(element.id)
        if record is None:
            return  # never seen: nothing of it was output
        s, old, p, key = record
        new = element.new_end
        for oid, (os, oe, op, _) in other.overlapping(key, s, max(old, new)):
            if not self._matches(port, p, op):
                continue
            start = max(s, os)
            old_end, new_end = min(old, oe), min(new, oe)
            pair = self._pair(port, element.id, oid)
            if old_end > start and new_end > start:
                if new_end != old_end:
                    self.emit(Retract(pair, start, old_end, new_end))
            elif old_end > start:
                self.emit(Retract(pair, start, old_end, start))
            elif new_end > start:
                self.emit(Insert(pair, start, new_end, self._payload(port, p, op)))
        if element.is_full:
            side.remove(element.id)
        else:
            side.set_end(element.id, new)

    def on_cti(self, port: int, time: int) -> None:
        low = self.ctis.advance(port, time, self.emit)
        if low is not None:
            for side in self.sides:
                side.expire(low)

    def state_size(self) -> int:
        return sum(len(side.events) for side in self.sides)


class AntiJoinOperator(Operator):
    """Left anti-semijoin of port 0 (left) by port 1 (right)."""

    name = "left_anti_join"

    def __init__(
        self,
        key_left: KeyFn,
        key_right: KeyFn,
        predicate: Predicate | None = None,
        conservative: bool = False,
        name: str = "left_anti_join",
    ) -> None:
        super().__init__(2)
        self.left = _Live(key_left)
        self.right = _Live(key_right)
        self.predicate = predicate
        self.conservative = conservative
        self.name = name
        self.ctis = CtiTracker(2)
        self.pieces: dict[Any, list[tuple[int, int, Any]]] = {}  # left id -> emitted
        self._next = 0
        self.output_cti = MIN_TIME

    def get_state(self) -> dict[str, Any]:
        return {
            "emitted": self.emitted,
            "ctis": self.ctis,
            "pieces": self.pieces,
            "next": self._next,
            "output_cti": self.output_cti,
            "left": self.left.get_state(),
            "right": self.right.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.emitted, self.ctis, self.pieces = state["emitted"], state["ctis"], state["pieces"]
        self._next, self.output_cti = state["next"], state["output_cti"]
        self.left.set_state(state["left"])
        self.right.set_state(state["right"])

    def _holes(self, record: list[Any]) -> list[tuple[int, int]]:
        s, e, p, key = record
        return [
            (rs, re)
            for _, (rs, re, rp, _) in self.right.overlapping(key, s, e)
            if self.predicate is None or self.predicate(p, rp)
        ]

    def _wanted(self, record: list[Any]) -> list[tuple[int, int]]:
        pieces = subtract_intervals(record[0], record[1], self._holes(record))
        if self.conservative:
            low = min(self.ctis.latest)
            # final once both CTIs are past its end (an end at the CTI may still grow)
            pieces = [(a, b) for a, b in pieces if b < low or low >= INFINITY]
        return pieces

    def _refresh(self, ident: Any) -> None:
        record = self.left.events.get(ident)
        wanted = [] if record is None else self._wanted(record)
        had = self.pieces.get(ident, [])
        by_start = {a: (b, oid) for a, b, oid in had}
        kept: list[tuple[int, int, Any]] = []
        new_starts = {a for a, _ in wanted}
        for a, b, oid in had:
            if a not in new_starts:
                self.emit(Retract(oid, a, b, a))
        for a, b in wanted:
            found = by_start.get(a)
            if found is None:
                oid = (ident, self._next)
                self._next += 1
                self.emit(Insert(oid, a, b, record[2] if record else None))
                kept.append((a, b, oid))
            else:
                old_b, oid = found
                if old_b != b:
                    self.emit(Retract(oid, a, old_b, b))
                kept.append((a, b, oid))
        if kept:
            self.pieces[ident] = kept
        else:
            self.pieces.pop(ident, None)

    def on_insert(self, port: int, element: Insert) -> None:
        if port == 0:
            self.left.add(element.id, element.start, element.end, element.payload)
            self._refresh(element.id)
            return
        record = self.right.add(element.id, element.start, element.end, element.payload)
        self._touch(record[3], element.start, element.end)

    def _touch(self, key: Hashable, start: int, end: int) -> None:
        for lid, _ in self.left.overlapping(key, start, end):
            self._refresh(lid)

    def on_retract(self, port: int, element: Retract) -> None:
        side = self.left if port == 0 else self.right
        record = side.events.get(element.id)
        if record is None:
            return
        span = max(record[1], element.new_end)
        if element.is_full:
            side.remove(element.id)
        else:
            side.set_end(element.id, element.new_end)
        if port == 0:
            self._refresh(element.id)
        else:
            self._touch(record[3], record[0], span)

    def on_cti(self, port: int, time: int) -> None:
        before = min(self.ctis.latest)
        if time > self.ctis.latest[port]:
            self.ctis.latest[port] = time
        low = min(self.ctis.latest)
        if low <= before:
            return
        if self.conservative:
            for lid in list(self.left.events):
                self._refresh(lid)
        out = low
        if self.conservative:
            # hold the output CTI at the first piece not yet final
            for record in self.left.events.values():
                for a, b in subtract_intervals(record[0], record[1], self._holes(record)):
                    if not (b < low or low >= INFINITY):
                        out = min(out, a)
                        break
        for ident in self.left.expire(low):
            self.pieces.pop(ident, None)
        self.right.expire(low)
        if out > self.output_cti:
            self.output_cti = out
            self.emit(Cti(out))

    def state_size(self) -> int:
        return len(self.left.events) + len(self.right.events)
