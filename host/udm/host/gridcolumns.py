"""The grid path's columnar loop: a run of in-order inserts between two CTIs.

:meth:`GridPath.run <udm.host.gridpath.GridPath.run>` checks each insert
inline (its fields, time bounds, id, key, window arithmetic, due windows)
before the UDM's ``add``; at many keys that bookkeeping, not the ``add``,
is most of the host's time. :meth:`GridColumns.run_columns` takes a whole
run of ``Insert`` elements (a list slice between two CTIs) and checks what
it can for the run at once with C-level builtins (``map``, ``set``,
``min``/``max``, dict views: no numpy, which the in-process host does not
require): times within the grid's bounds and after the CTI, fresh unique
ids, one tumbling window per event, the key and value fields. Its
per-event loop is then the key's state, the window and the ``add``. The
records a retraction needs (the grid's id index and the validator's
pending rows) are written a slice at a time.

An event whose key has windows to emit, or any other case, goes to
:meth:`~udm.host.gridpath.GridPath.insert_raw` inline (in order, so
outputs, ids and their order stay exactly those of the per-event path);
one that needs the general path ends the loop, and the host hands the rest
of the run to the element loop. A UDM error does too: nothing of the
failing event is applied, and the element loop applies it again, which
raises with the usual undo and message.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from itertools import count, repeat
from operator import add as add_ints
from operator import floordiv, gt, itemgetter, sub
from typing import Any

from udm.host.gridcore import GridCore
from udm.host.gridstate import GridKey
from udm.host.invoke import PLAIN_TYPES, detached
from udm.host.rows import NORMALIZED
from udm.host.stream import Element, insert_of

__all__ = ["MIN_COLUMN_RUN", "GridColumns"]

#: shorter runs take the element loop: the run's checks cost a few list
#: passes, which a handful of events does not repay
MIN_COLUMN_RUN = 8

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

    def run_columns(
        self,
        elements: list[Element],
        a: int,
        b: int,
        live: dict[Hashable, Any],
        make_live: Any,
        out: list[Element],
    ) -> int:
        """Apply ``elements[a:b]`` (all of type ``Insert``: the caller
        checks, nothing between them the validator must see) as :meth:`GridPath.run` and
        :meth:`GridPath.insert_raw` would, one after the other; return how
        many were applied (from the first). Fewer than ``b - a`` means the
        next one needs the element loop: the run's checks failed (then 0),
        the event needs the general path, or the UDM failed on it.

        The loop's branches are the cases of :meth:`GridPath.run` it keeps
        (complexity over 20, deliberately one flat loop)."""
        seg = elements[a:b]
        n = len(seg)
        # one comprehension a field: three times faster than zip(*map(attrgetter))
        ids = [e.id for e in seg]  # type: ignore[union-attr]
        starts = [e.start for e in seg]  # type: ignore[union-attr]
        ends = [e.end for e in seg]  # type: ignore[union-attr]
        payloads = [e.payload for e in seg]  # type: ignore[union-attr]
        size, off = self.size, self.offset
        if min(starts) < self.floor or max(ends) > self.max_end:
            return 0  # late, or outside the grid's time bounds
        keep = self.keep_events
        events = self.events
        if keep and (
            not set(map(type, ids)) <= _ID_TYPES  # first: set() needs hashable ids
            or len(set(ids)) != n
            # (a view's isdisjoint walks the list, not the whole index)
            or not live.keys().isdisjoint(ids)
            or not events.keys().isdisjoint(ids)
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
        insert_raw = self.insert_raw
        # a key holds long events only if listed there (checked per event else)
        plain = not self._long_keys
        done = 0  # records written for seg[:done]
        i = 0
        try:
            for i, key, value, k, s in zip(count(), keys_col, values, wins_of, starts):
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
                        w[0] = add(w[0], value)
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
                    if before is not None:
                        self._emit_first(ks, k - 1, before, out)
                    if w is None:
                        wins[k] = [state, 1, []]
                        end = k * size + off + size
                        if end < ks.due:
                            self._push(ks, end)
                    else:
                        w[0] = state
                        w[1] += 1
                    ks.emitted_k = k - 1
                    ks.max_start = s
                else:
                    # windows to emit (or a key insert_raw declines): in order
                    if keep:
                        done = self._records(seg, done, i, ids, starts, ends, values, keys_col)
                    self.current = seg[i]  # named if the UDM fails
                    if not insert_raw(ids[i], s, ends[i], payloads[i], live, make_live, out):
                        break
                    self.current = None
                    done = i + 1  # insert_raw wrote its own records
            else:
                i = n
        except Exception:
            self.current = None  # the element loop applies it again and raises
        if keep:
            self._records(seg, done, i, ids, starts, ends, values, keys_col)
        return i

    def _records(
        self,
        seg: list[Element],
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
