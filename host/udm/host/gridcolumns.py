"""The grid path's columnar loop: the inserts and retractions between two CTIs.

:meth:`GridPath.run <udm.host.gridpath.GridPath.run>` checks each insert
inline (its fields, time bounds, id, key, window arithmetic, due windows)
before the UDM's ``add``; at many keys that bookkeeping, not the ``add``,
is most of the host's time. :meth:`GridColumns.run_columns` takes a whole
run of ``Insert`` and ``Retract`` elements (a list slice between two CTIs)
and checks what it can for the run's inserts at once with C-level
builtins (``map``, ``set``, ``min``/``max``, dict views: no numpy, which
the in-process host does not require): times within the grid's bounds and
after the CTI, fresh unique ids, one tumbling window per event, the key
and value fields. Its per-event loop is then the key's state, the window
and the ``add``. The records a retraction needs (the grid's id index and
the validator's pending rows) are written a slice at a time.

A late insert into an emitted window is added there and the window's
output retracted and inserted again in the loop; a retraction between the
inserts, where it is the plain case (the full retraction of a live event
within one window, quoting its lifetime, at or after the CTI), is removed
from its window's state, likewise (:meth:`GridColumns._retract_plain`).
An event whose key has windows to emit, or any other insert, goes to
:meth:`~udm.host.gridpath.GridPath.insert_raw` inline (in order, so
outputs, ids and their order stay exactly those of the per-event path);
an element that needs the general path ends the loop, and the host hands
it to the element loop, then the rest of the run to this loop again. A UDM
error does too: nothing of the failing element is applied (a state the UDM
may have changed in place is rebuilt from the window's events), and the
element loop applies it again, which raises with the usual undo and
message.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from heapq import heappush
from itertools import compress, count, repeat
from operator import add as add_ints
from operator import floordiv, gt, is_, itemgetter, sub
from typing import Any

from udm.host.gridcore import GridCore
from udm.host.gridstate import EMPTY, GridKey
from udm.host.invoke import PLAIN_TYPES, detached
from udm.host.rows import NORMALIZED
from udm.host.sameoutput import same_output
from udm.host.stream import Element, Insert, Retract, insert_of, retract_of

__all__ = ["COLUMN_CHUNK", "COLUMN_CHUNK_MAX", "MIN_COLUMN_RUN", "GridColumns"]

#: shorter runs take the element loop: the run's checks cost a few list
#: passes, which a handful of events does not repay
MIN_COLUMN_RUN = 8
#: the longest run one call takes: an element the loop leaves to the
#: element loop costs a new call, whose column passes are over the chunk
#: left, not the whole run up to the next CTI
COLUMN_CHUNK = 256
#: the longest a chunk grows to while whole chunks apply (see Host._columns)
COLUMN_CHUNK_MAX = 2048

_ID_TYPES = {int, str}


class GridColumns(GridCore):
    """:class:`~udm.host.gridcore.GridCore` with :meth:`run_columns`."""

    @property
    def columnar(self) -> bool:
        """Whether :meth:`run_columns` can take this query's runs: tumbling
        windows of an invertible UDA (not the slice mode), speculative
        output, and the key and value (if any) payload fields, so reading
        them calls no user function that could fail or be called twice."""
        return (
            not self.slices
            and not self.conservative
            and self.hop == self.size
            and (self.key_fn is None or self.key_field is not None)
            and (self.value_fn is None or self.value_field is not None)
        )

    #: one insert given by its fields: (id, start, end, payload, live,
    #: make_live, out) -> applied; :meth:`GridPath.insert_raw
    #: <udm.host.gridpath.GridPath.insert_raw>` defines it
    insert_raw: Callable[[Hashable, int, int, Any, dict[Hashable, Any], Any, list[Element]], bool]
    #: (live, make_live) -> rows: the validator's entries of the events a
    #: run applied (:meth:`GridPath.settle <udm.host.gridpath.GridPath.settle>`)
    settle: Callable[..., list[Any]]
    #: the window whose state a failing ``remove`` or ``result`` may have
    #: changed in place (see :meth:`_retract_plain`)
    spoiled: tuple[GridKey, int] | None = None

    def run_columns(
        self,
        elements: list[Element],
        a: int,
        b: int,
        live: dict[Hashable, Any],
        make_live: Any,
        out: list[Element],
        kinds: list[type] | None = None,
    ) -> int:
        """Apply ``elements[a:b]`` (of types ``Insert`` and ``Retract``
        only: the caller checks, nothing between them the validator must
        see; ``kinds``, if given, are the types of ``elements``) as
        :meth:`GridPath.run`, :meth:`GridPath.insert_raw` and
        :meth:`~udm.host.gridcore.GridCore.retract` would, one after the
        other; return how many were applied (from the first). Fewer than
        ``b - a`` means the next one needs the element loop: the run's
        checks failed (then 0), the element needs the general path, or the
        UDM failed on it.

        The inserts' checks and fields are columns (one pass each); a
        retraction is taken between them where it falls
        (:meth:`_retract_plain`). The loop's branches are the cases of
        :meth:`GridPath.run` it keeps and the late insert into an emitted
        window (complexity over 20, deliberately one flat loop)."""
        seg = elements[a:b]
        types = list(map(type, seg)) if kinds is None else kinds[a:b]
        if Retract in types:
            rpos = list(compress(count(), map(is_, types, repeat(Retract))))
            rets: list[Any] = [seg[p] for p in rpos]
            # the number of inserts before each retraction, and a sentinel
            r_at = [*map(sub, rpos, count()), -1]
            ins: list[Any] = list(compress(seg, map(is_, types, repeat(Insert))))
        else:
            rets, r_at, ins = [], [-1], seg
        n = len(ins)
        # one comprehension a field: three times faster than zip(*map(attrgetter))
        ids = [e.id for e in ins]
        starts = [e.start for e in ins]
        ends = [e.end for e in ins]
        payloads = [e.payload for e in ins]
        size, off = self.size, self.offset
        last = max(ends) if n else 0
        if n and (min(starts) < self.floor or last > self.max_end):
            return 0  # late, or outside the grid's time bounds
        keep = self.keep_events
        # consecutive ints (the common case) are unique without a set, and
        # their records may stay columns until read (udm.host.gridrecords)
        span = keep and n and type(ids[0]) is int and ids == list(range(ids[0], ids[0] + n))
        unwritten = self.unwritten
        if unwritten.chunks and not (span and unwritten.apart(ids[0], n)):
            unwritten.write(self._events)  # (then checked against the index)
        events = self._events
        if keep and (
            not set(map(type, ids)) <= _ID_TYPES  # first: set() needs hashable ids
            or (not span and len(set(ids)) != n)
            # (a view's isdisjoint walks the list, not the whole index)
            or not live.keys().isdisjoint(ids)
            or (events and not events.keys().isdisjoint(ids))
        ):
            return 0  # an odd, duplicate or reused id: the element loop checks it
        # the window of each event's start; its last tick must be in it too
        # (point events, the common case, need no second pass)
        shifted = starts if off == 0 else map(sub, starts, repeat(off))
        wins_of = list(map(floordiv, shifted, repeat(size)))
        if ends != list(map(add_ints, starts, repeat(1))) and (
            not all(map(gt, ends, starts))
            or wins_of != list(map(floordiv, map(sub, ends, repeat(off + 1)), repeat(size)))
        ):
            return 0  # an empty event, or one over two windows
        try:
            keys_col: Any = (
                repeat(None)
                if self.key_field is None
                else list(map(itemgetter(self.key_field), payloads))
            )
            values: Any = (
                payloads
                if self.value_field is None
                else list(map(itemgetter(self.value_field), payloads))
            )
        except Exception:
            return 0  # the element loop names the payload
        cti = self.cti
        grouped = self.key_fn is not None
        keys = self.keys
        keys_get = keys.get
        add, initial = self.ops.add, self.ops.initial_state
        result = self.udm.result
        new_id = self.new_id
        shift = size - 1 if self.point_end else 0
        insert_raw = self.insert_raw
        retract_plain = self._retract_plain
        # a key holds long events only if listed there (checked per event else)
        plain = not self._long_keys
        # the last window the CTI made final (HoppingWindow.last_index_before)
        k_final = (cti - off) // size - 1
        due_end, due_bucket = 0, None  # the due bucket keys moved into last (see below)
        done = 0  # records written for ins[:done]
        i = 0
        ri, r_next = 0, r_at[0]  # the next retraction, before insert r_next
        try:
            for i, key, value, k, s in zip(count(), keys_col, values, wins_of, starts):
                if i == r_next:  # retractions before this insert
                    ri = retract_plain(rets, r_at, ri, live, make_live, out)
                    if ri < 0:  # one retracts an event of this run: its record first
                        done = self._records(ins, done, i, ids, starts, ends, values, keys_col)
                        ri = retract_plain(rets, r_at, ~ri, live, make_live, out)
                        ri = ri if ri >= 0 else ~ri
                    r_next = r_at[ri]
                    if r_next == i:
                        done = self._unspoil(ins, done, i, ids, starts, ends, values, keys_col)
                        break  # a retraction the element loop takes
                ks = keys_get(key)
                if ks is None:
                    if not grouped or s <= cti or type(key) in NORMALIZED:
                        break  # what run() leaves to the general path (a NaN key too)
                    ks = self._new_key(key)
                    try:
                        ks.wins[k] = [add(initial(), value), 1, []]
                    except Exception:
                        del keys[key]
                        self._created -= 1
                        raise
                    self._push(ks, k * size + off + size)
                    ks.emitted_k = k - 1
                    ks.max_start = s
                elif ks.emitted_k == k - 1 and (plain or not ks.long):
                    # the key's windows before k are emitted: nothing is due
                    wins = ks.wins
                    w = wins.get(k)
                    if w is None:
                        wins[k] = [add(initial(), value), 1, []]
                        end = k * size + off + size
                        if end < ks.due:
                            self._push(ks, end)
                    else:
                        try:
                            w[0] = add(w[0], value)
                        except Exception:  # (a state the add may have changed in place)
                            if keep:
                                done = self._records(
                                    ins, done, i, ids, starts, ends, values, keys_col
                                )
                                self.rebuild(ks, k)
                            raise
                        w[1] += 1
                    if s > ks.max_start:
                        ks.max_start = s
                elif (
                    s > ks.max_start
                    and s > cti
                    and not ks.long
                    and ks.emitted_k is not None
                    and (
                        (ks.emitted_k == k - 2 and (k - 1 not in ks.wins or ks.wins[k - 1][1] > 0))
                        or (ks.emitted_k < k - 2 and not ks.wins)
                    )
                ):
                    # in order: the key moves into window k, which makes
                    # window k - 1 (if it has events) due, as insert_raw
                    # would emit it (a key back after its windows were
                    # forgotten has none to emit); the add first, so a
                    # failing result leaves nothing applied
                    wins = ks.wins
                    w = wins.get(k)
                    state = add(initial() if w is None else w[0], value)
                    before = wins.get(k - 1)
                    if before is not None:  # _emit_first inline (no journal in a run)
                        new = result(before[0])
                        if type(new) not in PLAIN_TYPES:
                            new = detached(new)
                        first = k * size + off - size
                        emitted = insert_of(new_id(ks.key), first + shift, first + size, new)
                        out.append(emitted)
                        before[2] = [emitted]
                    if w is None:
                        wins[k] = [state, 1, []]
                        end = k * size + off + size
                        if k - 2 <= k_final:  # (the CTI's visit would have)
                            wins.pop(k - 2, None)
                        if len(wins) == 1 or (before is not None and len(wins) == 2):
                            # the key is due when window k ends, not k - 1
                            # (emitted: a CTI would only forget it): k - 1
                            # stays until the key's next move or that visit,
                            # and counts nowhere (memory_size, dump)
                            if end != due_end or due_bucket is None:
                                due_end, due_bucket = end, self._due_buckets.get(end)
                                if due_bucket is None:  # (_push inline, as at a CTI)
                                    due_bucket = self._due_buckets[end] = []
                                    heappush(self._due_times, end)
                            due_bucket.append(ks)
                            ks.due = end
                        elif end < ks.due:
                            self._push(ks, end)
                    else:
                        w[0] = state
                        w[1] += 1
                    ks.emitted_k = k - 1
                    ks.max_start = s
                elif (
                    ks.emitted_k is not None
                    and k <= ks.emitted_k
                    and s <= ks.max_start
                    and (plain or not ks.long)
                ):
                    # late, into an emitted window: its output is retracted
                    # and inserted again, as insert_raw's refresh does; the
                    # result first, so a failing UDM leaves nothing applied
                    wins = ks.wins
                    w = wins.get(k)
                    try:
                        state = add(initial() if w is None else w[0], value)
                        new = result(state)
                        if type(new) not in PLAIN_TYPES:
                            new = detached(new)
                    except Exception:
                        if w is not None:  # (a state the add changed in place)
                            done = self._records(ins, done, i, ids, starts, ends, values, keys_col)
                            self.rebuild(ks, k)
                        break
                    if w is None:
                        w = wins[k] = [state, 1, []]
                        end = k * size + off + size
                        if end < ks.due:
                            self._push(ks, end)
                    else:
                        w[0] = state
                        w[1] += 1
                    old = w[2]
                    if not (old and same_output(old[0].payload, new)):
                        for o in old:
                            out.append(retract_of(o.id, o.start, o.end, o.start, o.payload))
                        first = k * size + off
                        emitted = insert_of(new_id(key), first + shift, first + size, new)
                        out.append(emitted)
                        w[2] = [emitted]
                else:
                    # windows to emit (or a key insert_raw declines): in order
                    if keep:
                        done = self._records(ins, done, i, ids, starts, ends, values, keys_col)
                    self.current = ins[i]  # named if the UDM fails
                    if not insert_raw(ids[i], s, ends[i], payloads[i], live, make_live, out):
                        break
                    self.current = None
                    done = i + 1  # insert_raw wrote its own records
            else:
                i = n
                if r_next == n:  # retractions after the last insert
                    if keep:
                        done = self._records(ins, done, i, ids, starts, ends, values, keys_col)
                    ri = retract_plain(rets, r_at, ri, live, make_live, out)
                    ri = ri if ri >= 0 else ~ri
                    done = self._unspoil(ins, done, i, ids, starts, ends, values, keys_col)
        except Exception:
            self.current = None  # the element loop applies it again and raises
        if span and done == 0 and i == n:  # the whole run: its records wait as columns
            self.unwritten.add(ids, starts, ends, values, keys_col, last)
            self.pending_rows.extend(ins)
        elif keep:
            self._records(ins, done, i, ids, starts, ends, values, keys_col)
        return i + ri

    def _retract_plain(
        self,
        rets: list[Retract],
        r_at: list[int],
        ri: int,
        live: dict[Hashable, Any],
        make_live: Any,
        out: list[Element],
    ) -> int:
        """Apply ``rets[ri]`` and the retractions after it that come before
        the same insert (``r_at``), each as the element loop would, while
        each is the plain case: the full retraction of a live event within
        one window of a key without long events, quoting its lifetime, at
        or after the CTI (then the validator accepts it as it is). Returns
        the index of the first not applied; ``~index`` when the grid's index
        has no record of its event (the caller writes the run's records and
        asks again).

        Its effect is :meth:`~udm.host.gridcore.GridCore.retract`'s: the
        value removed from the window's state, the record and the
        validator's entry dropped, and, if the window was emitted, its
        output retracted and the new one (if it has events left)
        inserted. A UDM error applies nothing (the element loop then
        raises it): the window is left in :attr:`spoiled`, for the caller
        to rebuild once the run's records are written (:meth:`_unspoil`)."""
        at = r_at[ri]
        keep = self.keep_events
        events = self.events
        size, off = self.size, self.offset
        while r_at[ri] == at:
            r = rets[ri]
            ident = r.id
            if not keep or r.new_end != r.start or type(ident) not in _ID_TYPES:
                return ri  # a partial retraction or an odd id
            record = events.get(ident)
            if record is None:
                return ~ri  # its insert's record not written yet, or retired
            start, end, value, key = record
            if start != r.start or end != r.old_end or start < self.floor:
                return ri  # quoting another lifetime, or before the CTI
            ks = self.keys.get(key)
            k = (start - off) // size
            if ks is None or ks.long or (end - 1 - off) // size != k:
                return ri
            wins = ks.wins
            w = wins.get(k)
            if w is None:
                return ri
            if ident not in live:  # applied by a run, not settled yet
                self.settle(live, make_live)
                if ident not in live:
                    return ri
            emitted = ks.emitted_k is not None and k <= ks.emitted_k
            n = w[1] - 1
            new: Any = EMPTY
            try:
                state = self.ops.remove(w[0], value)
                if emitted and n > 0:
                    new = self.udm.result(state)
                    if type(new) not in PLAIN_TYPES:
                        new = detached(new)
            except Exception:
                self.spoiled = (ks, k)  # (a state the remove changed in place)
                return ri
            w[0], w[1] = state, n
            del events[ident]
            del live[ident]
            if emitted:
                old = w[2]
                if not (old and new is not EMPTY and same_output(old[0].payload, new)):
                    for o in old:
                        out.append(retract_of(o.id, o.start, o.end, o.start, o.payload))
                    if new is EMPTY:  # no events left: no output, no window
                        w[2] = []
                        if n == 0:
                            del wins[k]
                    else:
                        first = k * size + off
                        shift = size - 1 if self.point_end else 0
                        out_insert = insert_of(self.new_id(key), first + shift, first + size, new)
                        out.append(out_insert)
                        w[2] = [out_insert]
            ri += 1
        return ri

    def _unspoil(
        self,
        ins: list[Any],
        done: int,
        i: int,
        ids: list[Any],
        starts: list[int],
        ends: list[int],
        values: Any,
        keys_col: Any,
    ) -> int:
        """After a retraction the UDM failed on: write the run's records of
        ``ins[done:i]`` and rebuild the window it left in :attr:`spoiled`
        from them; return how many records are written."""
        spoiled = self.spoiled
        if spoiled is None:
            return done
        self.spoiled = None
        done = self._records(ins, done, i, ids, starts, ends, values, keys_col)
        self.rebuild(*spoiled)
        return done

    def rebuild(self, ks: GridKey, k: int) -> None:
        """Window ``k``'s state and count of ``ks`` again from the id index
        (as :meth:`GridPath.rollback <udm.host.gridpath.GridPath.rollback>`
        rebuilds them): after a UDM error, for a state it may have changed
        in place."""
        w = ks.wins.get(k)
        if w is None:
            return
        start = k * self.hop + self.offset
        end = start + self.size
        add = self.udm.add
        state = self.udm.initial_state()
        n = 0
        m = max(ks.max_start, self.cti)
        key = ks.key
        for s, e, value, rkey in self.events.values():
            if rkey == key and s < end and start < e and start <= m:
                state = add(state, value)
                n += 1
        w[0], w[1] = state, n

    def _records(
        self,
        seg: list[Any],
        lo: int,
        hi: int,
        ids: list[Any],
        starts: list[int],
        ends: list[int],
        values: Any,
        keys_col: Any,
    ) -> int:
        """Write the id index's records and the validator's pending rows of
        ``seg[lo:hi]``, in order; return ``hi``."""
        if hi <= lo:
            return lo
        if lo == 0 and hi == len(ids):  # the whole run (the usual case): no copies
            records = zip(starts, ends, values, keys_col, strict=False)
            self.events.update(zip(ids, map(list, records), strict=True))
            self.pending_rows.extend(seg)
            return hi
        # (keys_col is repeat(None) without a key: zip stops at the others)
        ks_col = repeat(None) if type(keys_col) is repeat else keys_col[lo:hi]
        vals = values[lo:hi]
        records = zip(starts[lo:hi], ends[lo:hi], vals, ks_col, strict=False)
        self.events.update(zip(ids[lo:hi], map(list, records), strict=True))
        self.pending_rows.extend(seg[lo:hi])
        return hi

    def emit_plain(self, visit: list[GridKey], c: int, previous: int, out: list[Element]) -> bool:
        """What :meth:`~udm.host.gridcore.GridCore.cti_advance` emits for a
        (finite, speculative) CTI ``c`` when each key it visits is plain:
        no long events, and its windows up to the new watermark's last one
        not emitted before (nor emptied, nor in the slice mode). Then every
        output is a window's first, from its state: the results are all
        computed before anything changes, so a failing one leaves nothing to
        undo and no journal is kept (which, with the output itself, is what
        a CTI costs per key at many keys). Returns False, having changed
        nothing, when a key is not plain or a result fails: the general
        loop then emits (and names the error)."""
        if self.slices or self.operator:
            return False
        size, hop, off = self.size, self.hop, self.offset
        todo: list[tuple[GridKey, int, list[Any]]] = []
        moves: list[tuple[GridKey, int]] = []
        for ks in visit:
            emitted = ks.emitted_k
            if ks.long or emitted is None:
                return False
            m_new = c if c > ks.max_start else ks.max_start
            last = (m_new - size - off) // hop
            if emitted >= last:
                continue
            if m_new <= (previous if previous > ks.max_start else ks.max_start):
                continue
            wins = ks.wins
            if last == emitted + 1:  # in order, one window at a time: no scan
                w = wins.get(last)
                if w is not None:
                    if w[2] or w[1] <= 0:
                        return False
                    todo.append((ks, last, w))
            else:
                for k in sorted(k for k in wins if emitted < k <= last):
                    w = wins[k]
                    if w[2] or w[1] <= 0:
                        return False
                    todo.append((ks, k, w))
            moves.append((ks, last))
        result = self.udm.result
        try:
            results = [result(w[0]) for _, _, w in todo]
            for j, new in enumerate(results):
                if type(new) not in PLAIN_TYPES:  # (the usual results need no copy)
                    results[j] = detached(new)
        except Exception:
            return False
        new_id = self.new_id
        shift = size - 1 if self.point_end else 0
        for (ks, k, w), new in zip(todo, results, strict=True):
            start = k * hop + off
            emitted_out = insert_of(new_id(ks.key), start + shift, start + size, new)
            out.append(emitted_out)
            w[2] = [emitted_out]
        for ks, last in moves:
            ks.emitted_k = last
        return True
