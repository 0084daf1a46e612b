"""The grid path's batch loop in the slice mode with speculative output.

Over in-order data nearly every insert of a hopping window's key moves its
watermark past one window's end, which it then emits: the window, read as
a slice of the key's sorted events (:mod:`udm.host.gridslices`), goes to
the UDM and its result becomes one output ``Insert``.
:meth:`SliceRun.run_slices` is :meth:`GridPath.run
<udm.host.gridpath.GridPath.run>` for that mode alone, with what the
general loop reaches through calls written inline: the one window an
in-order point event makes due is sliced, computed and emitted here (the
short path of :meth:`~udm.host.gridoperator.OperatorWindows._emit_slice`),
and the key is registered for its next due time in the due heap's bucket
here (:meth:`~udm.host.gridcore.GridCore._push`). It has no ``add`` of
its own (windows only need to exist) and no conservative output. Every
other case (several windows due, an operator, events that are not points
or share a start, a journal open) takes the general loop's calls, and
what the loop declines (a late event, a new key reaching an emitted
window, a long event) stops it as it stops the general loop: outputs, ids,
their order and errors are those of :meth:`GridPath.run`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from heapq import heappush
from operator import is_
from typing import Any

from udm.host.gridcore import GridCore
from udm.host.griddue import LINGER
from udm.host.gridslices import KeyEvents
from udm.host.gridstate import DONE, NEVER, GridKey, forget_retired
from udm.host.hoststate import OutputId, id_counter
from udm.host.invoke import PLAIN_TYPES, detached
from udm.host.rows import NORMALIZED
from udm.host.stream import Element, Insert, InsertDraft, insert_of
from udm.host.time import INFINITY, MIN_TIME
from udm.sdk.decorators import aggregate

__all__ = ["SliceRun", "direct"]


@aggregate
def _probe(values: list[Any]) -> Any:
    """Never called: its class's ``compute_result`` is the code every
    ``@aggregate`` of one data parameter shares."""
    return None


#: the code of ``@aggregate``'s ``compute_result`` (``fn(payloads, **args)``)
DECORATED = _probe.__dict__["compute_result"].__code__


def direct(udm: Any, from_slice: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    """The function that computes a window's result from its slice:
    ``from_slice`` (the UDM's ``compute_result``), or, for an
    ``@aggregate`` without arguments, the decorated function itself, which
    that ``compute_result`` would call with the same values and nothing
    else (a call and an empty ``**kwargs`` less per window). Only the
    decorator's own ``compute_result`` (its code, bound to this UDM) is
    replaced: a class of its own, or a subclass overriding it, keeps it."""
    cls = type(udm)
    fn = cls.__dict__.get("__wrapped__")
    method = getattr(from_slice, "__func__", None)
    if (
        fn is not None
        and method is cls.__dict__.get("compute_result")
        and getattr(method, "__code__", None) is DECORATED
        and getattr(from_slice, "__self__", None) is udm
        and getattr(udm, "args", None) == {}
    ):
        return fn  # type: ignore[no-any-return]
    return from_slice


class SliceRun(GridCore):
    """:class:`~udm.host.gridcore.GridCore` with :meth:`run_slices`."""

    def run_slices(
        self,
        rows: Iterator[Any],
        as_elements: bool,
        live: dict[Hashable, Any],
        out: list[Element],
    ) -> tuple[int, Any]:
        """:meth:`GridPath.run <udm.host.gridpath.GridPath.run>` (given
        ``out``) in the slice mode with speculative output (``self.lazy``):
        the same inserts applied, declined and emitted, in the same order.

        Deliberately one flat loop with its checks and the common
        emission inline (complexity over 20): it runs once per event, and
        each call it saves is a few percent of the hopping median's time."""
        cti, size, hop, off = self.cti, self.size, self.hop, self.offset
        floor, max_end = self.floor, self.max_end
        keep = self.keep_events
        key_fn, value_fn = self.key_fn, self.value_fn
        key_field, value_field = self.key_field, self.value_field
        keys, events = self.keys, self.events
        pending = self.pending
        single = keys.get(None) if key_fn is None else None
        from_slice, new_id, point_end = self._from_slice, self.new_id, self.point_end
        from_slice = direct(self.udm, from_slice)
        # the host's own ids: issued here, inline (see id_counter); the
        # counter is written back before a call that may issue one, and at
        # the end (the finally below)
        counter = id_counter(new_id)
        nxt = counter.next_out if counter is not None else 0
        new_draft: Any = object.__new__
        make_id = tuple.__new__
        buckets, times = self._due_buckets, self._due_times
        # the bucket the last registration went to (no CTI pops one while
        # this loop runs, and nothing else here registers keys)
        last_due: int | None = None
        last_bucket: list[GridKey] = []
        # the common emission inline: an aggregate, no journal open (a batch
        # never has one; an operator's outputs are matched by payload)
        inline = self._undo is None and not self.operator
        linger = LINGER * hop
        key: Hashable = None
        applied = 0
        try:
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
                    or (
                        keep and (type(ident) not in (str, int) or ident in live or ident in events)
                    )
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
                due = False
                if ks is None:
                    # a new key's first event that opens no window that has
                    # begun to end (after the CTI): as GridPath.run
                    if key_fn is None or start <= cti or type(key) in NORMALIZED:
                        return applied, row  # (a new float or tuple key: a NaN is normalized there)
                    last = (start - size - off) // hop
                    if hi > (start - off) // hop or lo <= last:
                        return applied, row
                    moved = True
                    emitted = None
                    ms = MIN_TIME
                else:
                    emitted = ks.emitted_k
                    if ks.long or emitted is None:
                        return applied, row
                    ms = ks.max_start
                    m = ms if ms > cti else cti
                    moved = start > m
                    if moved:  # the watermark moves to start: windows up to lo - 1 end by it
                        if hi > (start - off) // hop or lo <= emitted:
                            return applied, row  # an unbegun window, or an emitted one
                        last = lo - 1
                        if last > emitted and ks.wins:
                            due = True
                    else:
                        if hi > (m - off) // hop or lo <= emitted:
                            return applied, row
                        last = (m - size - off) // hop
                if value_fn is not None and value_field is None:
                    try:
                        value = value_fn(payload)
                    except Exception as exc:
                        if ks is None:
                            return applied, row  # the slower path names it, for a new key too
                        self.run_applied = applied
                        raise self._value_failed(ks, (ident, start, end, payload), exc) from exc
                if ks is None:
                    ks = self._new_key(key)
                wins = ks.wins
                # windows lo .. hi must exist (entries only: OperatorWindows);
                # in order, those up to the last that exists do (see GridPath.run)
                made: Any = ()  # the windows made, for _unmake (an int: that one)
                if lo > hi:
                    pass  # in a gap between windows (hop > size): none to make
                elif hi not in wins:
                    if start >= ms and (hi == lo or hi - 1 in wins):
                        # the one window an in-order event opens; no outputs yet: the
                        # shared empty tuple (outputs are replaced, never appended to)
                        wins[hi] = [None, 1, ()]
                        made = hi
                    else:
                        if start >= ms:
                            j = hi
                            while j >= lo and j not in wins:
                                j -= 1
                            made = range(j + 1, hi + 1)
                        else:
                            made = [k for k in range(lo, hi + 1) if k not in wins]
                        for k in made:
                            wins[k] = [None, 1, []]
                elif start < ms:  # late: any of lo .. hi - 1 may be missing
                    made = [k for k in range(lo, hi) if k not in wins]
                    for k in made:
                        wins[k] = [None, 1, []]
                # the key object the key's state holds (equal to the payload's): a
                # record then keeps no reference into the payload, whose memory
                # is cold by the time the record is forgotten
                record = [start, end, value, ks.key]
                kev: KeyEvents = ks.events  # type: ignore[assignment]  # the slice mode's
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
                if due:
                    w = wins.get(last)
                    if (
                        inline
                        and last == emitted + 1  # type: ignore[operator]  # not None: due
                        and w is not None
                        and not w[2]
                        and kev.maxdur <= 1
                        and not kev.ties
                    ):
                        # _emit_slice inline: point events, no ties, one window
                        ws = last * hop + off
                        we = ws + size
                        values = kev.vals[bisect_left(starts, ws) : bisect_left(starts, we)]
                        if values:
                            try:
                                new = from_slice(values)
                                if type(new) not in PLAIN_TYPES:
                                    new = detached(new)
                            except Exception as exc:
                                self.current = (
                                    row if as_elements else Insert(ident, start, end, payload)
                                )
                                error = self._fail(last, exc, ks)
                                self.run_applied = applied
                                self._unmake(ks, made, record)
                                raise error from exc
                            if counter is None:
                                o = insert_of(new_id(ks.key), we - 1 if point_end else ws, we, new)
                            else:  # insert_of(new_id(ks.key), ...) inline
                                o = new_draft(InsertDraft)
                                o.id = make_id(OutputId, (ks.key, nxt))
                                nxt += 1
                                o.start = we - 1 if point_end else ws
                                o.end = we
                                o.payload = new
                                o.__class__ = Insert
                            out.append(o)
                            w[2] = (o,)  # (replaced, never appended to: one object less)
                        else:  # its events were retracted: no output, no window
                            del wins[last]
                    else:
                        self.run_applied = applied  # if it fails
                        if counter is not None:
                            counter.next_out = nxt
                        try:
                            self._emit_general(
                                ks,
                                emitted,  # type: ignore[arg-type]  # not None: due
                                last,
                                row,
                                as_elements,
                                out,
                                made,
                                record,
                            )
                        finally:
                            if counter is not None:
                                nxt = counter.next_out
                    # due: the insert moved the watermark (start > max_start)
                    # past windows up to last, now emitted
                    ks.emitted_k = last
                    ks.max_start = start
                    # due when lo (the first not emitted) ends, or to forget (_register)
                    nd = lo * hop + off + size
                    if ks.forget == NEVER:
                        ks.forget = nd + linger
                    elif ks.forget < nd:
                        nd = ks.forget
                else:
                    if moved and (ks.emitted_k is None or last > ks.emitted_k):  # None: a new key
                        # nothing to emit in between: the key has no window, and
                        # the event's own windows end after the watermark
                        ks.emitted_k = last
                    if start > ms:
                        ks.max_start = start
                    nd = lo * hop + off + size if lo <= hi else NEVER
                    if nd >= ks.due:
                        nd = ks.due
                if nd != ks.due:  # GridCore._push inline
                    ks.due = nd
                    if nd == last_due:  # most keys of a hop register at one time
                        last_bucket.append(ks)
                    else:
                        bucket = buckets.get(nd)
                        if bucket is None:
                            bucket = buckets[nd] = [ks]
                            heappush(times, nd)
                        else:
                            bucket.append(ks)
                        last_due, last_bucket = nd, bucket
                if keep:
                    events[ident] = record
                    pending(row)  # into the validator's index at settle()
                applied += 1
            return applied, DONE
        finally:
            if counter is not None:
                counter.next_out = nxt  # the ids issued here

    def _emit_general(
        self,
        ks: Any,
        emitted: int,
        last: int,
        row: Any,
        as_elements: bool,
        out: list[Element],
        made: Any,
        record: list[Any],
    ) -> None:
        """:meth:`run_slices`' emission of the windows after ``emitted`` up
        to ``last`` when it is not the common case, as :meth:`GridPath.run
        <udm.host.gridpath.GridPath.run>` emits them; on a UDM error the
        insert is taken back (the windows it made, its slice entry)."""
        ident, start, end, payload = (
            (row.id, row.start, row.end, row.payload) if as_elements else row
        )
        self.current = row if as_elements else Insert(ident, start, end, payload)  # named on error
        try:
            w = ks.wins.get(last)
            if last == emitted + 1 and w is not None and not w[2]:
                if self.operator:
                    self._refresh(ks, ks.key, last, out)
                else:  # emit_due's common case: one window
                    self._emit_slice(ks, last, w, out)
            else:
                self.emit_due(ks, emitted, last, out)
        except Exception:
            self._unmake(ks, made, record)
            raise
        self.current = None

    def _unmake(self, ks: Any, made: Any, record: list[Any]) -> None:
        """Take back an insert :meth:`run_slices` applied to ``ks`` whose
        emission failed: the windows it made (none emitted; an int: that
        one window) and its entry in the key's sorted events."""
        for k in (made,) if type(made) is int else made:
            del ks.wins[k]
        assert ks.events is not None
        ks.events.remove(record)

    def _forget_final(self, visit: list[GridKey], c: int, k_final: int | None) -> int:
        """:meth:`GridCore._forget_final <udm.host.gridcore.GridCore._forget_final>`
        in the slice mode with speculative output (the others, and the end
        of time, go there): a visited key's final windows are dropped at
        once (a new dict of the rest, rather than a deletion each), its
        events that end before ``bound`` are retired in bulk once half of
        them can go (or its last window went), and it is registered again
        (:meth:`_register`). A key visited only every ``LINGER`` hops has
        that many final windows and events to drop here, so the per-window
        and per-event work is what this saves."""
        if not self.lazy or k_final is None:
            return super()._forget_final(visit, c, k_final)
        lowest = (k_final + 1) * self.hop + self.offset  # HoppingWindow.start_of, inlined
        bound = lowest if lowest < c else c
        events, reused = self.events, self.reused
        get, forget = events.get, events.__delitem__
        register, push = self._register, self._push
        for ks in visit:
            wins = ks.wins
            kept = {k: w for k, w in wins.items() if k > k_final}
            if len(kept) != len(wins):
                ks.wins = wins = kept
            kev: KeyEvents = ks.events  # type: ignore[assignment]  # the slice mode's
            starts = kev.starts
            point = kev.maxdur <= 1
            j = bisect_left(starts, bound - 1 if point else bound) if starts else 0
            # retired in bulk, once half can go (or no window is left), not
            # at every visit; those kept end before every open window's slice
            if j and (not wins or 2 * j >= len(starts)):
                if point and not reused:  # KeyEvents.retire's common case
                    ids, records = kev.cut(j)
                    if all(map(is_, map(get, ids), records)):  # each id still its record's
                        deque(map(forget, ids), 0)  # (C-level loops: no bytecode per event)
                    else:
                        for ident, record in zip(ids, records, strict=True):
                            if get(ident) is record:  # (None: pruned by a CTI already)
                                del events[ident]
                else:
                    forget_retired(events, kev, bound, reused)
            if wins:
                register(ks)
            elif starts:
                end = kev.min_end()
                if end is not None and end < INFINITY:
                    push(ks, end + 1)
            else:
                self._spent(ks, c)  # nothing left: the key goes
        return bound
