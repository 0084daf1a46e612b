"""The grid path's per-element algorithm (see :mod:`udm.host.gridpath`)."""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections.abc import Callable, Hashable
from heapq import heappush
from typing import Any

from udm.host.errors import CLOSE_ADVICE, OpenEventError, UdmInvocationError
from udm.host.griddue import DueKeys
from udm.host.gridrecords import PendingRecords
from udm.host.gridstate import (
    NEVER,
    ExpiredId,
    GridKey,
    NoState,
    held_between,
)
from udm.host.hoststate import OutputId
from udm.host.invoke import detached, key_failed
from udm.host.policies import OutputPolicy
from udm.host.rows import NORMALIZED, nan_free
from udm.host.stream import Element, Insert, Retract, insert_of
from udm.host.time import INFINITY, MIN_TIME
from udm.host.windows import HoppingWindow
from udm.sdk.base import Udm

__all__ = ["GridCore"]



class GridCore(DueKeys):
    """Window states for one grid query, grouped by key: each element's
    effect on them (see :class:`~udm.host.gridpath.GridPath` for batches,
    undo and persistence)."""

    def __init__(
        self,
        window: HoppingWindow,
        udm: Udm,
        policy: OutputPolicy,
        conservative: bool,
        key_fn: Callable[[Any], Hashable] | None,
        value_fn: Callable[[Any], Any] | None,
        label: str,
        new_id: Callable[[Hashable], OutputId],
        return_ids: Callable[[int], None],
        keep_events: bool = True,
        slices: bool = False,
        fields: tuple[str | None, str | None] = (None, None),
    ) -> None:
        self.window = window
        # copied for the hot loops (run, insert_raw, cti_advance), which
        # inline the window's index arithmetic (HoppingWindow.index_range,
        # last_begun, last_index_before): a method call per event would cost
        # a few percent of the grid path's throughput
        self.size, self.hop, self.offset = window.size, window.hop, window.offset
        # events outside these bounds go to the general path, which refuses
        # them; ``floor`` (the CTI or min_start, whichever is later) makes the
        # start's check the one the CTI needs anyway
        self.min_start, self.max_end = window.time_bounds
        self.udm: Any = udm
        #: slices: windows are computed from each key's sorted events, and
        #: their "states" (``ops``) are nothing
        self.slices = slices
        #: keys are visited lazily (see _register): the slice mode, speculative
        self.lazy = slices and not conservative
        self.ops: Any = NoState() if slices else udm
        #: a window's result from its slice (see :meth:`_slice_result`)
        self._from_slice: Callable[[list[Any]], Any] = (
            self._slice_result if udm.incremental else getattr(udm, "compute_result")  # noqa: B009
        )
        self.point_end = policy is OutputPolicy.POINT_END
        self.policy = policy
        #: an operator (the slice mode only): zero or more outputs a window
        self.operator = udm.kind == "operator"
        self.conservative = conservative
        self.key_fn, self.value_fn = key_fn, value_fn
        # the payload fields key_fn and value_fn pick, if they do: read
        # inline by :meth:`run` (the functions still make the errors)
        self.key_field, self.value_field = fields
        self.label = label
        self.new_id, self.return_ids = new_id, return_ids
        self.keep_events = keep_events  # False: an insert-only stream, nothing to retract
        self.keys: dict[Hashable, GridKey] = {}
        self._events: dict[Hashable, list[Any]] = {}  # id -> [start, end, value, key]
        #: the columnar loop's records not written into it yet (see :attr:`events`)
        self.unwritten = PendingRecords()
        self.cti, self.floor = MIN_TIME, self.min_start  # as _set_cti(MIN_TIME)
        self._swept, self._swept_at = 0, MIN_TIME  # the index's size and bound at its last sweep
        # keys by the end of their earliest window, so a CTI visits the keys
        # it makes something final for: a bucket per time (windows end at
        # few), the times in a heap; a (due, key) heap's pop cost a
        # microsecond at 10,000 keys
        self._due_times: list[int] = []
        self._due_buckets: dict[int, list[GridKey]] = {}
        self._created = 0
        self._long_keys: set[Hashable] = set()  # keys that may hold long events
        #: an id was reused (an :class:`ExpiredId` key may be in ``events``):
        #: until then a retired event missing from ``events`` (pruned by a
        #: CTI) is not looked for under one
        self.reused = False
        self._saved_record: list[Any] | None = None
        self._inserted: tuple[GridKey, list[Any]] | None = None
        self._removed: tuple[Any] | None = None  # the payload a full retraction took out
        #: rows :meth:`GridPath.run` applied, not yet in the validator's
        #: index of live events (see :meth:`GridPath.settle`)
        self.pending_rows: list[Any] = []
        self.pending = self.pending_rows.append
        #: inserts :meth:`run` applied before the one it failed on
        self.run_applied = 0
        self._undo: list[tuple[GridKey, int, list[Any] | None]] | None = None
        self._key_saves: dict[Hashable, Any] | None = None
        self._saved_cti = MIN_TIME
        self._saved_event: list[Any] | None = None
        self.current: Element | None = None

    @property
    def events(self) -> dict[Hashable, list[Any]]:
        """The id index: id -> ``[start, end, value, key]`` of each event
        not retired, with the columnar loop's pending records written first
        (:mod:`udm.host.gridrecords`): everything but that loop and the
        sweep reads and writes the index through here."""
        if self.unwritten.chunks:
            self.unwritten.write(self._events)
        return self._events

    # -- helpers ----------------------------------------------------------

    def _k_range(self, start: int, end: int) -> tuple[int, int]:
        # HoppingWindow.index_range inlined: it runs per late insert and
        # per retraction, where a method call costs several percent
        hop, off = self.hop, self.offset
        return (start - self.size - off) // hop + 1, -((off - end) // hop) - 1

    def _begun(self, m: int) -> int:
        return (m - self.offset) // self.hop  # HoppingWindow.last_begun, inlined

    def _new_key(self, key: Hashable) -> GridKey:
        ks = self.keys[key] = GridKey(key, self.slices, self._created)
        self._created += 1
        return ks

    def _save_key(self, key: Hashable, ks: GridKey | None) -> None:
        saves = self._key_saves
        if saves is None or key in saves:
            return
        # (no copy of an empty dict of long events: most keys have none)
        long = dict(ks.long) if ks is not None and ks.long else None
        saves[key] = None if ks is None else (ks.max_start, ks.emitted_k, long)

    def _win(self, ks: GridKey, k: int) -> list[Any]:
        w = ks.wins.get(k)
        undo = self._undo
        if undo is not None:
            if w is None:
                undo.append((ks, k, None))
            else:
                # without kept events a state cannot be rebuilt after a UDM
                # error mutated it in place: save a copy instead
                state = w[0] if self.keep_events else copy.deepcopy(w[0])
                undo.append((ks, k, [state, w[1], list(w[2])]))
        if w is None:
            w = ks.wins[k] = [self.ops.initial_state(), 0, []]
            end = k * self.hop + self.offset + self.size  # HoppingWindow.end_of, inlined
            if end < ks.due:
                self._push(ks, end)
        return w

    def _add(self, ks: GridKey, lo: int, hi: int, value: Any) -> None:
        add = self.ops.add
        for k in range(lo, hi + 1):
            w = self._win(ks, k)
            try:
                w[0] = add(w[0], value)
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
            w[1] += 1

    def _remove(self, ks: GridKey, lo: int, hi: int, value: Any) -> None:
        if self.slices:  # windows stay until refreshed empty (see OperatorWindows)
            return
        remove = self.ops.remove
        for k in range(lo, hi + 1):
            w = self._win(ks, k)
            try:
                w[0] = remove(w[0], value)
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
            w[1] -= 1

    def _emit_first(self, ks: GridKey, k: int, w: list[Any], out: list[Element]) -> None:
        """:meth:`_refresh` of a window with events, from its state, that has
        emitted nothing yet: a CTI emits one per key at many keys."""
        try:
            new = detached(self.udm.result(w[0]))
        except Exception as exc:
            raise self._fail(k, exc, ks) from exc
        if self._undo is not None:
            self._undo.append((ks, k, [w[0], w[1], []]))
        start = k * self.hop + self.offset  # HoppingWindow.start_of, inlined
        end = start + self.size
        emitted = insert_of(self.new_id(ks.key), end - 1 if self.point_end else start, end, new)
        out.append(emitted)
        w[2] = [emitted]

    @staticmethod
    def _count(wins: dict[int, list[Any]], lo: int, hi: int) -> None:
        """The slice mode's ``add`` of one event to windows ``lo .. hi``."""
        for k in range(lo, hi + 1):
            try:  # most exist already (free in 3.11 when they do)
                wins[k][1] += 1
            except KeyError:
                wins[k] = [None, 1, []]

    def _slice_result(self, values: list[Any]) -> Any:
        """A window's result from its members' values (canonical order), for
        an incremental UDM (a non-incremental one's ``compute_result`` is
        :attr:`_from_slice` itself, one call less per window)."""
        u = self.udm
        return u.result(u.add_many(u.initial_state(), values))

    # -- elements ---------------------------------------------------------

    def _set_cti(self, c: int) -> None:
        self.cti = c
        self.floor = max(c, self.min_start)

    def _value_failed(
        self, ks: GridKey, fields: tuple[Hashable, int, int, Any], exc: Exception
    ) -> UdmInvocationError:
        """The value function (``value=``) failed on a new event's payload:
        reported, as by the reference evaluator, as the UDM failing on the
        first window that holds the event."""
        if self.current is None:
            self.current = Insert(*fields)
        return self._fail(self.window.index_range(fields[1], fields[2])[0], exc, ks)

    def _compensate(self, ks: GridKey, lo: int, hi: int, value: Any) -> None:
        remove = self.ops.remove
        for k in range(lo, hi + 1):
            w = ks.wins[k]
            w[0] = remove(w[0], value)
            w[1] -= 1
            if w[1] == 0 and not w[2]:
                del ks.wins[k]

    def insert(self, e: Insert, out: list[Element]) -> None:
        """Apply one validated insert: count or fold it into every window it
        belongs to, re-emitting the emitted windows it changes into ``out``."""
        payload = e.payload
        try:
            key = self.key_fn(payload) if self.key_fn is not None else None
            if type(key) in NORMALIZED:  # every NaN one key (docs/concepts.md)
                key = nan_free(key)
            ks = self.keys.get(key)  # TypeError: an unhashable key
        except Exception as exc:
            raise key_failed(e, exc) from None
        self._save_key(key, ks)
        if ks is None:
            ks = self._new_key(key)
        try:
            value = self.value_fn(payload) if self.value_fn is not None else payload
        except Exception as exc:
            raise self._value_failed(ks, (e.id, e.start, e.end, payload), exc) from exc
        start, end = e.start, e.end
        m_old = ks.max_start if ks.max_start > self.cti else self.cti
        if start > ks.max_start:
            ks.max_start = start
        m = ks.max_start if ks.max_start > self.cti else self.cti
        lo, hi = self._k_range(start, end)
        begun = self._begun(m)
        record = [start, end, value, key]
        expired = self.events.get(e.id)
        if expired is not None:
            # the reused id of an expired event: open windows still hold it,
            # and rebuilding their states after a UDM error needs it
            self.events[ExpiredId(e.id, expired[0])] = expired
            self.reused = True
        self.events[e.id] = record
        if ks.events is not None:
            ks.events.add(record, e.id, payload)
            self._inserted = (ks, record)
        is_long = hi > begun
        if is_long:
            hi = begun
        self._refuse_open(start, end, lo, hi)
        self._add(ks, lo, hi, value)
        if not self.conservative:
            emitted = ks.emitted_k
            if emitted is not None:
                for k in range(lo, min(hi, emitted) + 1):
                    self._refresh(ks, key, k, out)
        if m > m_old:
            self._advance(ks, key, m_old, m, out)  # before it joins the long events
        if is_long:
            ks.long[e.id] = record
            self._long_keys.add(key)

    def retract(self, r: Retract, out: list[Element]) -> None:
        """Apply one validated retraction to the windows the old and new
        lifetimes touch (a retired event can no longer reach an open window)."""
        record = self.events.get(r.id)
        if record is None:
            return  # retired: it can no longer touch an open window
        start, old_end, value, key = record
        ks = self.keys.get(key)
        self._save_key(key, ks)
        if ks is None:  # dropped with no window left (see _spent): the event lives on
            ks = self._new_key(key)
        new_end = r.new_end
        m = ks.max_start if ks.max_start > self.cti else self.cti
        begun = self._begun(m)
        old_lo, old_hi = self._k_range(start, old_end)
        new_hi = old_lo - 1 if new_end == start else self._k_range(start, new_end)[1]
        old_hi, new_hi = min(old_hi, begun), min(new_hi, begun)
        if new_hi < old_hi:
            self._remove(ks, new_hi + 1, old_hi, value)
            changed = (new_hi + 1, old_hi)
        else:
            # a retraction to the end of time after a start far ahead: refused
            # as the same event inserted open is
            self._refuse_open(start, new_end, old_hi + 1, new_hi)
            self._add(ks, old_hi + 1, new_hi, value)
            changed = (old_hi + 1, new_hi)
        if new_end == start:
            del self.events[r.id]
            ks.long.pop(r.id, None)
            if ks.events is not None:
                self._removed = ks.events.remove(record)
        else:
            record[1] = new_end
            if ks.events is not None:
                ks.events.widen(record)
            if self._k_range(start, new_end)[1] > begun:
                ks.long[r.id] = record
                self._long_keys.add(key)
            else:
                ks.long.pop(r.id, None)
        if not self.conservative and ks.emitted_k is not None:
            for k in range(changed[0], min(changed[1], ks.emitted_k) + 1):
                self._refresh(ks, key, k, out)

    def _advance(
        self, ks: GridKey, key: Hashable, m_old: int, m_new: int, out: list[Element]
    ) -> None:
        if ks.long:
            if m_new >= INFINITY:
                finite = [r[1] for r in ks.long.values() if r[1] < INFINITY]
                m_new_begun = max(finite, default=m_old)
            else:
                m_new_begun = m_new
            k_from, k_to = self._begun(m_old) + 1, self._begun(m_new_begun)
            if k_to >= k_from:
                for ident, record in list(ks.long.items()):
                    lo, hi = self._k_range(record[0], record[1])
                    self._refuse_open(record[0], record[1], max(lo, k_from), min(hi, k_to))
                    self._add(ks, max(lo, k_from), min(hi, k_to), record[2])
                    if hi <= k_to:
                        del ks.long[ident]
        if self.conservative:
            return
        # windows ending at or before the watermark are emitted
        last = self.window.last_index_before(m_new) if m_new < INFINITY else None
        first = ks.emitted_k
        if last is None:
            last = max(ks.wins, default=first if first is not None else 0)
        if first is None:
            first = min(ks.wins, default=last + 1) - 1
        if last > first:
            for k in held_between(ks.wins, first, last):
                self._refresh(ks, key, k, out)
        if ks.emitted_k is None or last > ks.emitted_k:
            ks.emitted_k = last

    def cti_advance(self, c: int, out: list[Element]) -> int:
        """Apply CTI ``c``; return the output CTI it allows."""
        # every live event, not only the long ones: an open event near the
        # end of time may reach no window that has not begun, yet its
        # windows past INFINITY cannot be closed either
        if c >= INFINITY and any(r[1] >= INFINITY for r in self.events.values()):
            raise OpenEventError(
                "cannot close hopping/tumbling windows at the end of time: an event that never "
                "ends overlaps infinitely many windows",
                CLOSE_ADVICE,
            )
        previous = self.cti
        self._set_cti(c)
        k_final = self.window.last_index_before(c) if c < INFINITY else None
        visit = self._due_keys(c, k_final)
        size, hop, off = self.size, self.hop, self.offset
        plain = not self.conservative and c < INFINITY
        refresh = self._refresh
        try:
            for ks in () if plain and self.emit_plain(visit, c, previous, out) else visit:
                m_new = c if c > ks.max_start else ks.max_start
                emitted = ks.emitted_k
                if plain and not ks.long and emitted is not None:
                    # _advance's common case inline: the windows up to the
                    # watermark's last one are emitted, in index order
                    last = (m_new - size - off) // hop
                    if emitted >= last:
                        continue  # its final windows were emitted: only forgotten below
                    if m_new > (previous if previous > ks.max_start else ks.max_start):
                        self._save_key(ks.key, ks)
                        ready = [k for k in ks.wins if emitted < k <= last]
                        if len(ready) > 1:
                            ready.sort()
                        wins = ks.wins
                        for k in ready:
                            w = wins[k]
                            if ks.events is not None and not w[2] and not self.operator:
                                self._emit_slice(ks, k, w, out)
                            elif w[2] or w[1] <= 0 or ks.events is not None:
                                refresh(ks, ks.key, k, out)
                            else:
                                self._emit_first(ks, k, w, out)
                        ks.emitted_k = last
                    continue
                key = ks.key
                self._save_key(key, ks)
                m_old = max(previous, ks.max_start)
                m_new = max(c, ks.max_start)
                if m_new > m_old:
                    self._advance(ks, key, m_old, m_new, out)
                if self.conservative:
                    final = sorted(k for k in ks.wins if k_final is None or k <= k_final)
                    for k in final:
                        self._refresh(ks, key, k, out)
        except BaseException:
            for ks in visit:  # still due: the rollback restores their windows
                self._push(ks, MIN_TIME)
            raise
        bound = self._forget_final(visit, c, k_final)
        # retire events that end before the first open window and the CTI
        # (amortized; a retraction may still extend an event ending at or
        # after the CTI past a gap, hop > size), once the bound moved: what
        # came since ends at or after the CTI, so a sweep finds nothing new
        # (the pending records count, and are swept alike, unwritten); not in
        # the lazy slice mode, whose _forget_final retires each visited key's
        # events by id at C level (every key with events is visited): a sweep
        # there only sent that down its per-event path (issue 31)
        pending = self.unwritten
        if not self.lazy and (
            len(self._events) + pending.count > 2 * self._swept + 64 and bound > self._swept_at
        ):
            self._events = {i: r for i, r in self._events.items() if r[1] >= bound}
            pending.sweep(bound)
            self._swept, self._swept_at = len(self._events) + pending.count, bound
        if self.point_end or k_final is None:  # at the end of time nothing can follow
            return c
        return min(c, self.window.first_open_start(c))

    def emit_plain(self, visit: list[GridKey], c: int, previous: int, out: list[Element]) -> bool:
        """CTI ``c``'s emissions when every key it visits is plain (see
        :class:`~udm.host.gridcolumns.GridColumns`); False: none made."""
        return False

    def _forget_final(self, visit: list[GridKey], c: int, k_final: int | None) -> int:
        """After CTI ``c`` visited ``visit``: forget their final windows (no
        UDM calls from here on) and reschedule them; return the time before
        which events may be retired."""
        size, hop, off = self.size, self.hop, self.offset
        lowest = self.window.start_of(k_final + 1) if k_final is not None else INFINITY
        bound = min(lowest, c)
        push = self._push
        # the bucket keys went into last (_push inline): at many keys the
        # keys a CTI visits mostly go into one, their next window's end
        times, buckets = self._due_times, self._due_buckets
        due, bucket = NEVER, None
        for ks in visit:
            wins = ks.wins
            first: int | None = None
            n = len(wins)
            if k_final is None:
                wins.clear()
            elif n == 2:  # in order: the final window and the next (unrolled: one per key)
                a, b = wins
                if b < a:
                    a, b = b, a
                if b <= k_final:
                    wins.clear()
                elif a <= k_final:
                    del wins[a]
                    first = b
                else:
                    first = a
            elif n <= 8:  # a few windows, sorted at once
                for k in sorted(wins):
                    if k > k_final:
                        first = k
                        break
                    del wins[k]
            else:
                for k in [k for k in wins if k <= k_final]:
                    del wins[k]
                first = min(wins, default=None)
            kev = ks.events
            if kev is None:  # _reschedule's case without sorted events, inline
                if first is not None:
                    end = first * hop + off + size
                    if end != due or bucket is None:
                        due, bucket = end, buckets.get(end)
                        if bucket is None:
                            bucket = buckets[end] = []
                            heappush(times, end)
                    ks.due = end
                    bucket.append(ks)
                elif not wins:
                    self._spent(ks, c)
            elif first is not None and (
                2 * bisect_left(kev.starts, bound - 1 if kev.maxdur <= 1 else bound)
                < len(kev.starts)
            ):
                # slice mode with too few events to retire (KeyEvents.retirable)
                if self.lazy:
                    self._register(ks)
                else:
                    push(ks, first * hop + off + size)
            else:
                self._reschedule(ks, bound)
        return bound
