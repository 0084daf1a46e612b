"""The fast path of the incremental host: grid windows, invertible UDAs.

Hopping and tumbling windows never split or merge, so when the UDM is an
incremental, invertible, order-insensitive, time-insensitive aggregate the
host needs no event index at all: each event adds its payload to the states
of the windows it overlaps (``add``), a retraction removes it from the
windows it leaves (``remove``), and a window's value is ``result(state)``.
This module does exactly that with plain dicts, which is what makes a
million events a second-scale job in pure Python. It produces the same
output CHT and output CTIs as :class:`udm.host.engine.Host`'s general
algorithm (the tests run both against the reference evaluator); the outputs
answering one element may come in another order.

:class:`GridPath` adds to the per-element algorithm of
:class:`~udm.host.gridcore.GridCore` the batch loops that apply the
plainest inserts without building elements (:meth:`GridPath.run`,
:meth:`GridPath.insert_raw`), the undo of a failed element, and
:meth:`GridPath.dump` / :meth:`GridPath.load` for host snapshots.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from itertools import compress, repeat
from operator import attrgetter, ge
from typing import Any

from udm.host.errors import UdmInvocationError
from udm.host.gridcolumns import GridColumns
from udm.host.gridrecords import PendingRecords
from udm.host.gridslicerun import SliceRun
from udm.host.gridstate import (
    DONE,
    ExpiredId,
    GridKey,
    eligible,
    held_between,
    slice_eligible,
    undo_note,
)
from udm.host.hoststate import OutputId
from udm.host.invoke import key_failed
from udm.host.rows import NORMALIZED, nan_free
from udm.host.stream import Cti, Element, Insert, Retract, insert_of
from udm.host.time import INFINITY, MIN_TIME

__all__ = ["DONE", "GridPath", "eligible", "slice_eligible"]

_END = attrgetter("end")


class GridPath(GridColumns, SliceRun):
    """The grid path of one query: :class:`~udm.host.gridcore.GridCore`
    with batches (also columnar: :class:`~udm.host.gridcolumns.GridColumns`),
    undo and persistence."""

    def insert_quick(
        self, e: Insert, live: dict[Hashable, Any], make_live: Any, out: list[Element]
    ) -> bool:
        """The common case without journaling: a valid insert at or after the
        CTI. Returns False (having changed nothing) when the element needs the
        general path (validation errors, CTI policy, long events).

        On a UDM error the payload is removed again from the windows it was
        added to (the UDM is invertible) and the outputs are restored."""
        self.current = e
        return self.insert_raw(e.id, e.start, e.end, e.payload, live, make_live, out)

    def insert_raw(
        self,
        ident: Hashable,
        start: int,
        end: int,
        payload: Any,
        live: dict[Hashable, Any],
        make_live: Any,
        out: list[Element],
    ) -> bool:
        """:meth:`insert_quick` of an insert given by its fields, for callers
        that hold columns rather than elements: the element is built only
        when an error message needs it (``current`` is None then).

        Its complexity (over 20) is deliberate: one flat function with the
        window arithmetic inlined, since it runs once per event."""
        if (
            end <= start
            or start < self.floor
            or end > self.max_end
            or type(ident) not in (str, int)
        ):
            return False  # late, outside the grid's time bounds, open, or an odd id
        keep = self.keep_events
        events = self.events  # (the property: once a call)
        if keep and (ident in live or ident in events):
            return False  # a duplicate, or the reused id of an expired event
        try:
            key = self.key_fn(payload) if self.key_fn is not None else None
            if type(key) in NORMALIZED:  # every NaN one key (docs/concepts.md)
                key = nan_free(key)
            ks = self.keys.get(key)  # TypeError: an unhashable key
        except Exception as exc:
            raise key_failed(Insert(ident, start, end, payload), exc) from None
        if ks is None or ks.long:
            return False
        try:
            value = self.value_fn(payload) if self.value_fn is not None else payload
        except Exception as exc:
            raise self._value_failed(ks, (ident, start, end, payload), exc) from exc
        m_old = ks.max_start if ks.max_start > self.cti else self.cti
        m = start if start > m_old else m_old
        hop, off = self.hop, self.offset
        lo = (start - self.size - off) // hop + 1
        hi = -((off - end) // hop) - 1
        if hi > (m - off) // hop:
            return False  # reaches windows that have not begun
        wins = ks.wins
        add = self.ops.add
        k = lo
        try:
            if self.slices:  # windows only count their events
                self._count(wins, lo, hi)
                k = hi + 1
            while k <= hi:
                w = wins.get(k)
                if w is None:
                    w = wins[k] = [self.ops.initial_state(), 0, []]
                w[0] = add(w[0], value)
                w[1] += 1
                k += 1
        except Exception as exc:
            raise self._add_failed(ks, lo, k, (ident, start, end, payload), value, exc) from exc
        if lo <= hi and lo * hop + off + self.size < ks.due:
            self._push(ks, lo * hop + off + self.size)
        record = [start, end, value, key]
        if ks.events is not None:  # in the slices before any window is computed
            ks.events.add(record, ident, payload)
        emitted = ks.emitted_k
        saved_outputs: list[tuple[list[Any], list[Any]]] = []
        mark = len(out)
        last = (m - self.size - off) // hop
        emits = not self.conservative and (
            (emitted is not None and lo <= emitted)
            or (m > m_old and (emitted is None or last > emitted))
        )
        if emits and self.current is None:
            self.current = Insert(ident, start, end, payload)  # named if the UDM fails
        try:
            if not self.conservative and emitted is not None and lo <= emitted:
                for kk in range(lo, min(hi, emitted) + 1):
                    saved_outputs.append((wins[kk], wins[kk][2]))
                    self._refresh(ks, key, kk, out)
            if m > m_old:
                if not self.conservative and (emitted is None or last > emitted):
                    first = emitted if emitted is not None else min(wins, default=last + 1) - 1
                    for kk in held_between(wins, first, last):
                        w = wins[kk]
                        saved_outputs.append((w, w[2]))
                        self._refresh(ks, key, kk, out)
                    ks.emitted_k = last
                elif emitted is None or last > emitted:
                    ks.emitted_k = last
        except Exception as failed:
            self.withdraw(out, mark)
            for w, outputs in saved_outputs:
                w[2] = outputs
            ks.emitted_k = emitted
            try:
                self._compensate(ks, lo, hi, value)
            except Exception as undo:  # remove failed too: the UDM's error, told
                failed.add_note(undo_note(undo))
            if ks.events is not None:
                ks.events.remove(record)
            raise
        if start > ks.max_start:
            ks.max_start = start
        if keep:
            events[ident] = record
            self.pending((ident, start, end, payload))  # see settle()
        return True

    def _add_failed(
        self,
        ks: GridKey,
        lo: int,
        k: int,
        fields: tuple[Hashable, int, int, Any],
        value: Any,
        exc: Exception,
    ) -> UdmInvocationError:
        """The UDM failed adding a new event's value to window ``k``: take
        the value out of windows ``lo .. k - 1`` again, rebuild window
        ``k``'s state from the kept events (the failing ``add`` may have
        changed it in place), and name the event (built from its ``fields``
        if the caller held no element)."""
        if self.current is None:
            self.current = Insert(*fields)
        failed = self._fail(k, exc, ks)
        try:
            self._compensate(ks, lo, k - 1, value)
        except Exception as undo:  # remove failed too: told, not raised
            failed.add_note(undo_note(undo))
        if self.keep_events:  # (without them, a change in place stays: docs/host.md)
            self.rebuild(ks, k)
        return failed

    def run(
        self,
        rows: Iterator[Any],
        as_elements: bool,
        live: dict[Hashable, Any],
        make_live: Any,
        out: list[Element] | None = None,
    ) -> tuple[int, Any]:
        """Apply inserts from ``rows`` while each is the plainest case: a
        key without long events (or a new key's first event that opens no
        window the watermark passed), at or after the CTI, a fresh id, and
        no output due (it neither reaches an emitted window nor moves its
        key's watermark past an unemitted window's end; past none, the
        key's emitted index just moves up). Rows are
        elements (``as_elements``) or (id, start, end, payload) tuples.

        Returns how many it applied and the row that stopped it (taken from
        the iterator, for :meth:`insert_raw` or the general path; ``_DONE``
        when the rows ran out), so one iterator serves a whole batch. Per
        event this is the key, the window arithmetic and the UDM's ``add``
        (in the slice mode a count and an append), no more: deliberately
        one flat loop with its checks inline (complexity over 20).

        Given ``out``, the slice mode with speculative output takes its own
        loop, :meth:`~udm.host.gridslicerun.SliceRun.run_slices`, which
        also takes an insert that moves its key's watermark past windows'
        ends and emits those windows: over in-order data nearly every
        insert does, and handing each to :meth:`insert_raw` would repeat
        its checks."""
        if out is not None and self.lazy:  # the slice mode's own loop
            return self.run_slices(rows, as_elements, live, out)
        cti, size, hop, off = self.cti, self.size, self.hop, self.offset
        floor, max_end = self.floor, self.max_end
        keep = self.keep_events
        conservative = self.conservative
        key_fn, value_fn = self.key_fn, self.value_fn
        key_field, value_field = self.key_field, self.value_field
        add, initial = self.ops.add, self.ops.initial_state
        slices = self.slices
        keys, events = self.keys, self.events
        pending = self.pending
        single = keys.get(None) if key_fn is None else None
        key: Hashable = None
        applied = 0
        for row in rows:
            if as_elements:
                if type(row) is not Insert:
                    return applied, row
                ident, start, end, payload = row.id, row.start, row.end, row.payload
            else:
                ident, start, end, payload = row
            if (
                end <= start
                or start < floor
                or end > max_end
                or (keep and (type(ident) not in (str, int) or ident in live or ident in events))
            ):
                return applied, row
            try:
                if key_field is not None:
                    key = payload[key_field]
                    ks = keys.get(key)
                elif key_fn is None:
                    ks = single
                else:
                    key = key_fn(payload)
                    ks = keys.get(key)
                value = payload[value_field] if value_field is not None else payload
            except Exception:
                return applied, row  # the slower paths name the element
            lo = (start - size - off) // hop + 1
            hi = -((off - end) // hop) - 1
            if ks is None:
                # a new key's first event: what insert() does when it opens
                # no window that has begun to end (speculative, after the CTI)
                if conservative or key_fn is None or start <= cti or type(key) in NORMALIZED:
                    return applied, row  # (a new float or tuple key: a NaN is normalized there)
                m = start
                last = (m - size - off) // hop
                if hi > (m - off) // hop or lo <= last:
                    return applied, row
                moved = True
            else:
                if ks.long:
                    return applied, row
                emitted = ks.emitted_k
                if emitted is None:
                    return applied, row
                m = ks.max_start if ks.max_start > cti else cti
                # as insert_raw: windows become due only when the insert
                # moves the watermark (a stale emitted index alone, the
                # watermark unmoved, is left as it is)
                moved = start > m
                if moved:
                    m = start
                last = (m - size - off) // hop
                if hi > (m - off) // hop:
                    return applied, row  # reaches an unbegun window
                if moved and last > emitted and (ks.wins or lo <= last):
                    return applied, row  # windows become due: insert_raw emits them
                if lo <= emitted and not conservative:
                    return applied, row  # changes an emitted window's output
            if value_fn is not None and value_field is None:
                try:
                    value = value_fn(payload)
                except Exception as exc:
                    if ks is None:
                        return applied, row  # the slower path names it, for a new key too
                    self.run_applied = applied
                    raise self._value_failed(ks, (ident, start, end, payload), exc) from exc
            fresh = ks is None
            if ks is None:
                ks = self._new_key(key)
            wins = ks.wins
            k = lo
            try:
                if slices:  # windows only need to exist (OperatorWindows)
                    if start >= ks.max_start:
                        # the windows from lo up to the last that exists
                        # exist: an event starting at or before this one
                        # made that one, and all before it from its own
                        # first (<= lo) up; only a refresh (of emitted ones:
                        # lo is after them) or a CTI (of final ones) forgets
                        j = hi
                        while j >= lo and j not in wins:
                            j -= 1
                        made = list(range(j + 1, hi + 1))
                    else:
                        made = [k for k in range(lo, hi + 1) if k not in wins]
                    for k in made:
                        wins[k] = [None, 1, []]
                    k = hi + 1
                elif k == hi:  # one window (tumbling): no loop
                    w = wins.get(k)
                    if w is None:
                        wins[k] = [add(initial(), value), 1, []]
                    else:
                        w[0] = add(w[0], value)
                        w[1] += 1
                    k += 1
                while k <= hi:
                    w = wins.get(k)
                    if w is None:
                        w = wins[k] = [initial(), 0, []]
                    w[0] = add(w[0], value)
                    w[1] += 1
                    k += 1
            except Exception as exc:
                self.run_applied = applied
                error = self._add_failed(ks, lo, k, (ident, start, end, payload), value, exc)
                if fresh:  # as the rollback of insert() would
                    del keys[key]
                    self._created -= 1
                raise error from exc
            record = [start, end, value, key]
            kev = ks.events
            if kev is not None:
                starts = kev.starts
                if starts and start > starts[-1] and end - start <= kev.maxdur:
                    # KeyEvents.add's in-order case inline: the key's next event
                    starts.append(start)
                    kev.records.append(record)
                    kev.vals.append(value)
                    kev.ids.append(ident)
                    kev.payloads.append(payload)
                else:
                    kev.add(record, ident, payload)
            if lo <= hi and lo * hop + off + size < ks.due:
                self._push(ks, lo * hop + off + size)
            if moved and (ks.emitted_k is None or last > ks.emitted_k):  # None: a new key
                # emitted above (due), or nothing to emit in between: the key
                # has no window, and the event's own windows end after the
                # watermark
                ks.emitted_k = last
            if start > ks.max_start:
                ks.max_start = start
            if keep:
                events[ident] = record
                pending(row)  # into the validator's index at settle()
            applied += 1
        return applied, DONE

    def settle(
        self, live: dict[Hashable, Any], make_live: Any, cti: int | None = None
    ) -> list[Any]:
        """Register the events :meth:`run` applied in the validator's index
        of live events (``live``), which it leaves to this call: building
        each one's record there costs a fifth of a plain insert, and most
        are never needed. The host settles before any element the
        validator checks and at the end of each batch; before a CTI at
        ``cti`` the events ending before it are skipped, as the validator
        may forget them once the CTI is accepted (its prune): they are
        returned (with the others), for :meth:`register` if the CTI fails.
        (Duplicate ids in a run are found in the grid's own index, which
        holds them all.)"""
        rows = self.pending_rows
        if not rows:
            return []
        self.pending_rows = []
        self.pending = self.pending_rows.append
        bound = MIN_TIME if cti is None else cti
        if cti is not None and type(rows[0]) is Insert:
            # before a CTI most rows end before it: those that do not are
            # picked at C level (all elements: the columnar loop's rows)
            try:
                keep = list(map(ge, map(_END, rows), repeat(bound)))
            except AttributeError:  # a row of insert_raw's among them
                pass
            else:
                for row in compress(rows, keep):
                    live[row.id] = make_live(row.start, row.end, row.payload, row.start)
                return rows
        for row in rows:
            if type(row) is Insert:
                if row.end >= bound:
                    live[row.id] = make_live(row.start, row.end, row.payload, row.start)
            else:
                ident, start, end, payload = row
                if end >= bound:
                    live[ident] = make_live(start, end, payload, start)
        return rows

    def register(self, rows: list[Any], live: dict[Hashable, Any], make_live: Any) -> None:
        """Register the rows :meth:`settle` returned before a CTI that failed
        (those it registered are registered again, unchanged)."""
        self.pending_rows = rows + self.pending_rows
        self.pending = self.pending_rows.append
        self.settle(live, make_live)

    def begin(self, element: Element) -> None:
        """Start applying ``element``: from here on every change is journalled,
        so :meth:`rollback` can put the state back if the UDM fails."""
        self._undo = []
        self._key_saves = {}
        self._saved_cti = self.cti
        record = None if isinstance(element, Cti) else self.events.get(element.id)
        self._saved_event = None if record is None else list(record)
        self._saved_record = record
        self._inserted = None
        self._removed = None

    def commit(self) -> None:
        """``element`` applied: drop the journal."""
        self._undo = None
        self._key_saves = None

    def rollback(self, element: Element) -> None:
        """Undo what the journal holds since :meth:`begin` (a UDM failed):
        the path is as if ``element`` never arrived."""
        undo = self._undo or []
        self._undo = None
        touched: dict[tuple[int, int], tuple[GridKey, int]] = {}
        for ks, k, saved in reversed(undo):
            if saved is None:
                ks.wins.pop(k, None)
            else:
                ks.wins[k] = saved
            touched[(id(ks), k)] = (ks, k)
        self._set_cti(self._saved_cti)
        for key, saved_key in (self._key_saves or {}).items():
            if saved_key is None:
                self.keys.pop(key, None)
            else:
                ks = self.keys[key]
                ks.max_start, ks.emitted_k, long = saved_key
                ks.long = {} if long is None else long  # None: saved empty
                if ks.long:
                    self._long_keys.add(key)
        ident = getattr(element, "id", None)
        if self._inserted is not None:
            ks, record = self._inserted
            self._inserted = None
            if ks.events is not None:
                ks.events.remove(record)
        if isinstance(element, Insert):
            self.events.pop(ident, None)
            for ks in self.keys.values():
                ks.long.pop(ident, None)
            expired = self._saved_event
            if expired is not None:  # the insert took an expired event's id
                self.events[ident] = self.events.pop(ExpiredId(ident, expired[0]), expired)
        elif isinstance(element, Retract) and self._saved_event is not None:
            current = self.events.get(ident)
            original = self._saved_record
            assert original is not None
            original[:] = self._saved_event
            if current is None:  # fully retracted: back into the index and its slices
                self.events[ident] = original
                owner = self.keys.get(original[3])
                if owner is not None and owner.events is not None and self._removed is not None:
                    owner.events.add(original, ident, self._removed[0])
        # states may have been mutated in place: rebuild touched ones (from
        # the kept events; without them the saved states are copies, and in
        # the slice mode there are none: the saved counts are exact)
        rebuild = self.keep_events and not self.slices
        for ks, k in touched.values() if rebuild else ():
            self.rebuild(ks, k)

    def dump(self) -> dict[str, Any]:
        """The path's state as plain data, for :meth:`Host.snapshot`."""
        slices = None
        if self.slices:
            # a record the id index holds is saved once, as its position there
            pos = {id(r): n for n, r in enumerate(self.events.values())}
            slices = [
                (
                    key,
                    [
                        (pos.get(id(r), (r[0], r[1], r[2])), i, p)
                        for i, r, p in zip(
                            ks.events.ids, ks.events.records, ks.events.payloads, strict=True
                        )
                    ],
                )
                for key, ks in self.keys.items()
                if ks.events is not None
            ]
        final = self.final_window()
        return {
            "slices": slices,
            "cti": self.cti,
            "swept": self._swept,
            "events": [(i, *r) for i, r in self.events.items()],
            "keys": [
                (
                    key,
                    ks.max_start,
                    ks.emitted_k,
                    list(ks.long),
                    [
                        (k, w[0], w[1], [(tuple(o.id), o.start, o.end, o.payload) for o in w[2]])
                        for k, w in ks.wins.items()
                        if final is None or k > final  # (see final_window)
                    ],
                )
                for key, ks in self.keys.items()
            ],
        }

    def load(self, data: dict[str, Any]) -> None:
        """Put back a :meth:`dump` (replacing this path's state)."""
        self._set_cti(data["cti"])
        self._swept, self._swept_at = data["swept"], MIN_TIME
        self._events = {i: [s, e, v, k] for i, s, e, v, k in data["events"]}
        self.unwritten = PendingRecords()
        self.reused = any(type(i) is ExpiredId for i in self.events)
        self.keys = {}
        self._due_times, self._due_buckets = [], {}
        self._long_keys, self._created = set(), 0
        for key, max_start, emitted_k, long_ids, wins in data["keys"]:
            ks = self._new_key(key)
            ks.max_start, ks.emitted_k = max_start, emitted_k
            ks.long = {i: self.events[i] for i in long_ids}
            if ks.long:
                self._long_keys.add(key)
            for k, state, n, outputs in wins:
                ks.wins[k] = [
                    state,
                    max(n, 1) if self.slices else n,  # slices: >= 1 (see _compensate)
                    [insert_of(OutputId(*o), s, e, p) for o, s, e, p in outputs],
                ]
            if ks.wins:
                self._push(ks, self.window.end_of(min(ks.wins)))
        records = list(self.events.values())
        for key, entries in data.get("slices") or []:
            kev = self.keys[key].events
            assert kev is not None
            for entry, ident, payload in entries:
                record = records[entry] if isinstance(entry, int) else [*entry, key]
                kev.add(record, ident, payload)
            end = kev.min_end()
            if end is not None and end < INFINITY and not self.keys[key].wins:
                self._push(self.keys[key], end + 1)
