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

from collections.abc import Callable, Hashable, Mapping, Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from udm.host.algebra import subtract_intervals
from udm.host.operators.base import CtiTracker, Operator, PhysicalElement
from udm.host.operators.batch import InsertBatch
from udm.host.operators.liveevents import KeyFn, LiveEvents
from udm.host.stream import Cti, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME

if TYPE_CHECKING:
    from udm.host.operators.joinbatch import ColumnarSide

__all__ = ["AntiJoinOperator", "JoinOperator"]

Predicate = Callable[[Any, Any], Any]
Combine = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]

#: numpy is not one of udm's own dependencies (it comes with ``udm[spark]``):
#: without it every run takes the per-event path; with it, the batched path
#: imports it on first use (not at ``import udm.host``)
HAVE_NUMPY = find_spec("numpy") is not None
#: a run of inserts takes the batched path when it has at least this many
#: events (numpy's fixed cost per run is worth about that many per-event
#: calls) ...
BATCH_MIN = 64
#: ... and is at least 1/BATCH_RATIO of the live state (switching the state
#: between its per-event and columnar forms, and each run's numpy work, are
#: O(live): so they stay O(1) per event)
BATCH_RATIO = 4


class JoinOperator(Operator):
    """Temporal equijoin of port 0 (left) and port 1 (right).

    >>> from udm.host.operators.base import Collector
    >>> join = JoinOperator(lambda p: p["k"], lambda p: p["k"], lambda l, r: {**l, **r})
    >>> out = Collector()
    >>> join.connect(out)
    >>> join.push(0, Insert("a", 0, 10, {"k": 1, "x": 1}))
    >>> join.push(1, Insert("b", 5, 20, {"k": 1, "y": 2}))
    >>> out.elements
    [Insert(id=('a', 'b'), start=5, end=10, payload={'k': 1, 'x': 1, 'y': 2})]
    >>> join.push(0, Retract("a", 0, 10, 7))  # the left event ends earlier
    >>> out.elements[-1]
    Retract(id=('a', 'b'), start=5, old_end=10, new_end=7)
    """

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
        self.key_fns = (key_left, key_right)
        self.sides = (LiveEvents(key_left), LiveEvents(key_right))
        self.combine = combine
        self.predicate = predicate
        self.name = name
        self.ctis = CtiTracker(2)
        # the batched path's state: while not None, it holds the live
        # events (``sides`` are then empty); see :meth:`push_batch`
        self.columns: tuple[ColumnarSide, ColumnarSide] | None = None

    def get_state(self) -> dict[str, Any]:
        self._per_event()  # (one saved form, whichever path ran last)
        return {
            "emitted": self.emitted,
            "ctis": self.ctis,
            "sides": [side.get_state() for side in self.sides],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.columns = None
        self.emitted, self.ctis = state["emitted"], state["ctis"]
        for side, saved in zip(self.sides, state["sides"], strict=True):
            side.set_state(saved)

    # -------------------------------------------------- the batched path

    def push_batch(self, port: int, elements: Sequence[PhysicalElement]) -> None:
        """A run of elements: each maximal run of inserts in it that is long
        enough (:data:`BATCH_MIN`, :data:`BATCH_RATIO`) is joined at once
        against the other side's live events, with numpy, and its output
        emitted as one :class:`InsertBatch`; every other element (CTIs,
        retractions, short runs) takes the per-event path.

        Exactly the output of pushing the elements one by one, but for the
        order of the inserts a run produces: inserts on one port never
        match each other, so each new event meets the same live events of
        the other side either way, and the ``where`` predicate and
        ``combine`` are called on the same pairs.
        """
        if type(elements) is InsertBatch:
            if self._batchable(len(elements)):
                self._insert_run(
                    port, elements.ids, elements.starts, elements.ends, elements.payloads
                )
            else:
                super().push_batch(port, elements)
            return
        total = len(elements)
        kinds = list(map(type, elements))
        inserts = kinds.count(Insert)  # (a scan in C; the common runs need no other)
        if inserts == total:
            breaks: list[int] = []
        elif inserts == total - 1 and kinds[-1] is not Insert:
            breaks = [total - 1]
        else:
            breaks = [i for i, kind in enumerate(kinds) if kind is not Insert]
        begin = 0
        for stop in (*breaks, total):
            if stop > begin:
                run = elements[begin:stop]
                if self._batchable(stop - begin):
                    self._insert_run(
                        port,
                        [e.id for e in run],  # type: ignore[union-attr]
                        [e.start for e in run],  # type: ignore[union-attr]
                        [e.end for e in run],  # type: ignore[union-attr]
                        [e.payload for e in run],  # type: ignore[union-attr]
                    )
                else:
                    for el in run:
                        self.on_insert(port, el)  # type: ignore[arg-type]
            if stop < total:
                self.push(port, elements[stop])
            begin = stop + 1

    def _batchable(self, n: int) -> bool:
        return n >= BATCH_MIN and n * BATCH_RATIO >= self.state_size() and HAVE_NUMPY

    def _insert_run(
        self, port: int, ids: list[Any], starts: Any, ends: Any, payloads: list[Any]
    ) -> None:
        from udm.host.operators.joinbatch import join_run

        cols = self._columnar()
        if self._reuses(port, ids, cols[port].ids):
            for row in zip(ids, starts, ends, payloads, strict=True):
                self.on_insert(port, Insert(*row))
            return
        out = join_run(
            cols[port],
            cols[1 - port],
            port,
            (ids, starts, ends, payloads),
            self.key_fns[port],
            self.combine,
            self.predicate,
        )
        if out is not None:
            self.emit_batch(out)

    def _columnar(self) -> tuple[ColumnarSide, ColumnarSide]:
        """The live events as columns (moved out of the per-event form)."""
        if self.columns is not None:
            return self.columns
        from udm.host.operators.joinbatch import ColumnarSide

        made = [ColumnarSide.from_records(side.events) for side in self.sides]
        self.columns = (made[0], made[1])
        fresh = (LiveEvents(self.key_fns[0]), LiveEvents(self.key_fns[1]))
        for new, old in zip(fresh, self.sides, strict=True):
            new.ids = old.ids  # (which input ids name a Reused key)
        self.sides = fresh
        return self.columns

    def _reuses(self, port: int, ids: Sequence[Any], held: Any) -> bool:
        """Whether a run reuses an id this side still holds (or has given a
        Reused key): such a run takes the per-event path, which keys it."""
        reused = self.sides[port].ids.newest
        if reused and any(i in reused for i in ids):
            return True
        if not len(held):
            return False
        taken = set(held.tolist())
        return any(i in taken for i in ids)

    def _per_event(self) -> None:
        """Move the live events back to the per-event form, if columnar."""
        if self.columns is None:
            return
        for side, col in zip(self.sides, self.columns, strict=True):
            for ident, s, e, p, key in col.rows():
                side.add_keyed(ident, s, e, p, key)
        self.columns = None

    # ------------------------------------------------ the per-event path

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
        if self.columns is not None:
            self._per_event()
        side, other = self.sides[port], self.sides[1 - port]
        key = side.key_fn(element.payload)
        s, e, p = element.start, element.end, element.payload
        ident = side.admit(element.id)
        for oid, (os, oe, op, _) in other.overlapping(key, s, e):
            if self._matches(port, p, op):
                self.emit(
                    Insert(
                        self._pair(port, ident, oid),
                        max(s, os),
                        min(e, oe),
                        self._payload(port, p, op),
                    )
                )
        side.add_keyed(ident, s, e, p, key)

    def on_retract(self, port: int, element: Retract) -> None:
        if self.columns is not None:
            self._per_event()
        side, other = self.sides[port], self.sides[1 - port]
        ident = side.key(element.id)
        record = side.events.get(ident)
        if record is None:
            return  # never seen: nothing of it was output
        s, old, p, key = record
        new = element.new_end
        for oid, (os, oe, op, _) in other.overlapping(key, s, max(old, new)):
            if not self._matches(port, p, op):
                continue
            start = max(s, os)
            old_end, new_end = min(old, oe), min(new, oe)
            pair = self._pair(port, ident, oid)
            if old_end > start and new_end > start:
                if new_end != old_end:
                    self.emit(Retract(pair, start, old_end, new_end))
            elif old_end > start:
                self.emit(Retract(pair, start, old_end, start))
            elif new_end > start:
                self.emit(Insert(pair, start, new_end, self._payload(port, p, op)))
        if element.is_full:
            side.remove(ident)
        else:
            side.set_end(ident, new)

    def on_cti(self, port: int, time: int) -> None:
        low = self.ctis.advance(port, time, self.emit)
        if low is None:
            return
        if self.columns is None:
            for side in self.sides:
                side.expire(low)
            return
        for col in self.columns:
            col.expire(low)

    def state_size(self) -> int:
        if self.columns is not None:
            return len(self.columns[0]) + len(self.columns[1])
        return sum(len(side.events) for side in self.sides)


class AntiJoinOperator(Operator):
    """Left anti-semijoin of port 0 (left) by port 1 (right).

    Every change is answered within the time range it touches, which never
    starts before the output CTI: so a right event can be forgotten once
    that CTI passes its end, although a left event it cut is still live.
    """

    name = "left_anti_join"
    state_fields = ("emitted", "ctis", "pieces", "output_cti", "decided", "pending")

    def __init__(
        self,
        key_left: KeyFn,
        key_right: KeyFn,
        predicate: Predicate | None = None,
        conservative: bool = False,
        name: str = "left_anti_join",
    ) -> None:
        super().__init__(2)
        self.left = LiveEvents(key_left)
        self.right = LiveEvents(key_right)
        self.predicate = predicate
        self.conservative = conservative
        self.name = name
        self.ctis = CtiTracker(2)
        # left id -> pieces emitted, [(start, end, output id)] by start
        self.pieces: dict[Any, list[tuple[int, int, Any]]] = {}
        # conservative: left id -> time up to which its pieces are decided,
        # and the start of a piece that reached that time (it may go on)
        self.decided: dict[Any, int] = {}
        self.pending: dict[Any, int] = {}
        self._next = 0
        self.output_cti = MIN_TIME

    def get_state(self) -> dict[str, Any]:
        """The :attr:`state_fields`, the next piece number and both sides' indexes."""
        return {
            **super().get_state(),
            "next": self._next,
            "left": self.left.get_state(),
            "right": self.right.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back a :meth:`get_state`."""
        super().set_state(state)
        self._next = state["next"]
        self.left.set_state(state["left"])
        self.right.set_state(state["right"])

    def _uncovered(self, record: list[Any], lo: int, hi: int) -> list[tuple[int, int]]:
        """The left event's times in ``[lo, hi)`` no matching right event covers."""
        s, e, p, key = record
        lo, hi = max(lo, s), min(hi, e)
        if lo >= hi:
            return []
        holes = [
            (rs, re)
            for _, (rs, re, rp, _) in self.right.overlapping(key, lo, hi)
            if self.predicate is None or self.predicate(p, rp)
        ]
        return subtract_intervals(lo, hi, holes)

    def _refresh(self, ident: Any, lo: int, hi: int) -> None:
        """Recompute the left event's pieces within ``[lo, hi)`` and emit the
        difference; pieces outside the range stay as they are."""
        record = self.left.events.get(ident)
        had = self.pieces.get(ident, [])
        if record is None:
            wanted: list[tuple[int, int]] = []
        else:
            outside: list[tuple[int, int]] = []
            for a, b, _ in had:
                if a < lo:
                    outside.append((a, min(b, lo)))
                if b > hi:
                    outside.append((max(a, hi), b))
            wanted = _merged(sorted(outside + self._uncovered(record, lo, hi)))
        self._emit_diff(ident, record, had, wanted)

    def _emit_diff(
        self,
        ident: Any,
        record: list[Any] | None,
        had: list[tuple[int, int, Any]],
        wanted: list[tuple[int, int]],
    ) -> None:
        by_start = {a: (b, oid) for a, b, oid in had}
        new_starts = {a for a, _ in wanted}
        kept: list[tuple[int, int, Any]] = []
        for a, b, oid in had:
            if a not in new_starts:
                self.emit(Retract(oid, a, b, a))
        for a, b in wanted:
            found = by_start.get(a)
            if found is None:
                oid = (ident, self._next)
                self._next += 1
                self.emit(Insert(oid, a, b, record[2] if record else None))
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
        side = self.left if port == 0 else self.right
        ident = side.admit(element.id)
        record = side.add(ident, element.start, element.end, element.payload)
        if port == 0:
            if self.conservative:
                self.decided[ident] = element.start
            else:
                self._refresh(ident, element.start, element.end)
            return
        self._touch(record[3], element.start, element.end)

    def _touch(self, key: Hashable, start: int, end: int) -> None:
        if self.conservative:
            return  # nothing is decided past the CTI, where this change lies
        for lid, _ in self.left.overlapping(key, start, end):
            self._refresh(lid, start, end)

    def on_retract(self, port: int, element: Retract) -> None:
        side = self.left if port == 0 else self.right
        ident = side.key(element.id)
        record = side.events.get(ident)
        if record is None:
            return
        start, old = record[0], record[1]
        lo, hi = min(old, element.new_end), max(old, element.new_end)
        if element.is_full:
            side.remove(ident)
            lo = start
        else:
            side.set_end(ident, element.new_end)
        if port == 1:
            self._touch(record[3], lo, hi)
        elif not self.conservative:
            self._refresh(ident, lo, hi)
        elif element.is_full:  # (it starts after the CTI: nothing was decided)
            self.decided.pop(ident, None)
            self.pending.pop(ident, None)

    def on_cti(self, port: int, time: int) -> None:
        before = min(self.ctis.latest)
        if time > self.ctis.latest[port]:
            self.ctis.latest[port] = time
        low = min(self.ctis.latest)
        if low <= before:
            return
        out = self._decide(low) if self.conservative else low
        for ident in self.left.expire(low):
            self.pieces.pop(ident, None)
            self.decided.pop(ident, None)
            self.pending.pop(ident, None)
        self.right.expire(low)
        if out > self.output_cti:
            self.output_cti = out
            self.emit(Cti(out))

    def _decide(self, low: int) -> int:
        """Conservative: emit the pieces CTIs made final; return the output
        CTI, held at the first piece still open.

        A piece is final once it ends before ``low``: at a right event's
        start (which no later element can move, being before the CTI) or
        at its left event's end (which can no longer change). A piece that
        reaches ``low`` may go on, so it waits (``pending``).
        """
        out = low
        final = low >= INFINITY
        for ident, record in self.left.events.items():
            s, e = record[0], record[1]
            upto = self.decided.get(ident, s)
            hi = max(upto, e if final else min(e, low))
            found = self._uncovered(record, upto, hi) if hi > upto else []
            started = self.pending.pop(ident, None)
            if started is not None:
                if found and found[0][0] == upto:
                    found[0] = (started, found[0][1])
                elif upto < e or final or e < low:
                    # it ended where a right event begins, or with its left event
                    self._emit_piece(ident, record, started, upto)
                else:  # it reaches the left event's end at the CTI: may grow
                    self.pending[ident] = started
                    out = min(out, started)
            for a, b in found:
                if b < hi or final or (b == e and e < low):
                    self._emit_piece(ident, record, a, b)
                else:
                    self.pending[ident] = a
                    out = min(out, a)
            self.decided[ident] = hi
        return out

    def _emit_piece(self, ident: Any, record: list[Any], a: int, b: int) -> None:
        oid = (ident, self._next)
        self._next += 1
        self.emit(Insert(oid, a, b, record[2]))
        self.pieces.setdefault(ident, []).append((a, b, oid))

    def state_size(self) -> int:
        return len(self.left.events) + len(self.right.events)


def _merged(pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted intervals with touching or overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for a, b in pieces:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
