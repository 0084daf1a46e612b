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
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

from udm.host.errors import UdmInvocationError
from udm.host.gridslices import KeyEvents
from udm.host.hoststate import OutputId
from udm.host.invoke import detached, key_failed
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME, format_time
from udm.host.windows import HoppingWindow
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent

__all__ = ["DONE", "GridPath", "eligible", "grid_path", "slice_eligible"]

#: a window without events has no output (a UDA's result may be None)
_EMPTY: Any = object()
#: what :meth:`GridPath.run` returns when its rows ran out
DONE: Any = object()
#: a key's due time when it has no window (later than every window's end)
_NEVER = INFINITY + 1


def eligible(window: Any, udm: Udm, policy: OutputPolicy, clipping: InputClipping) -> bool:
    """Whether the fast path computes exactly what the general one does."""
    props = udm.properties
    return (
        window.is_grid
        and udm.kind == "aggregate"
        and udm.incremental
        and not udm.time_sensitive
        and bool(props.invertible)
        and props.order_insensitive
        and policy in (OutputPolicy.ALIGN, OutputPolicy.POINT_END)
    )


def slice_eligible(window: Any, udm: Udm, policy: OutputPolicy) -> bool:
    """Whether the grid path computes exactly what the general one does
    with windows read as slices of each key's events (``slices=True``):
    any time-insensitive aggregate over hopping or tumbling windows whose
    output is the window's lifetime or its last tick. It sees payloads in
    canonical order (start, then payload) and no lifetimes, so a window's
    result depends only on its slice; clipping changes nothing it sees."""
    return (
        window.is_grid
        and udm.kind == "aggregate"
        and not udm.time_sensitive
        and policy in (OutputPolicy.ALIGN, OutputPolicy.POINT_END)
    )


def grid_path(
    window: HoppingWindow,
    *,
    udm: Udm,
    policy: OutputPolicy,
    clipping: InputClipping,
    conservative: bool,
    key_fn: Callable[[Any], Hashable] | None,
    value_fn: Callable[[Any], Any] | None,
    label: str,
    new_id: Callable[[Hashable], OutputId],
    keep_events: bool = True,
    fields: tuple[str | None, str | None] = (None, None),
) -> GridPath | None:
    """The grid path for a query it computes exactly (states updated by
    ``add``/``remove`` when :func:`eligible`, else windows read as slices
    when :func:`slice_eligible`), or None: the general path runs it."""
    invertible = eligible(window, udm, policy, clipping)
    if not (invertible or slice_eligible(window, udm, policy)):
        return None
    return GridPath(
        window,
        udm,
        policy,
        conservative,
        key_fn,
        value_fn,
        label,
        new_id,
        keep_events=keep_events,
        slices=not invertible,
        fields=fields,
    )


class _NoState:
    """The window "state" of the slice mode: windows keep only their event
    counts (for emptiness) and outputs; results come from the slices."""

    def initial_state(self) -> None:
        return None

    def add(self, state: None, value: Any) -> None:
        return None

    def remove(self, state: None, value: Any) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _ExpiredId:
    """Where an expired event is kept once a new event reuses its id (its
    start tells it from later reuses: they start after it ended)."""

    ident: Hashable
    start: int

    def __repr__(self) -> str:
        return repr(self.ident)


class _Key:
    """Per-key state: window index k -> [state, n_events, outputs]."""

    __slots__ = ("due", "emitted_k", "events", "key", "long", "max_start", "order", "wins")

    def __init__(self, key: Hashable, slices: bool, order: int) -> None:
        self.key = key
        self.order = order  # the keys' order of arrival: CTIs visit keys in it
        self.wins: dict[int, list[Any]] = {}
        self.max_start = MIN_TIME
        # windows <= this index are emitted; a key no CTI visited since its
        # windows ended keeps an older index (no window lies in between)
        self.emitted_k: int | None = None
        self.long: dict[Hashable, list[Any]] = {}  # events reaching unbegun windows
        #: the end of its earliest window as registered in the due heap
        self.due = _NEVER
        self.events: KeyEvents | None = KeyEvents() if slices else None


class GridPath:
    """Window states for one grid query, grouped by key."""

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
        self.ops: Any = _NoState() if slices else udm
        self.point_end = policy is OutputPolicy.POINT_END
        self.conservative = conservative
        self.key_fn, self.value_fn = key_fn, value_fn
        # the payload fields key_fn and value_fn pick, if they do: read
        # inline by :meth:`run` (the functions still make the errors)
        self.key_field, self.value_field = fields
        self.label = label
        self.new_id = new_id
        self.keep_events = keep_events  # False: an insert-only stream, nothing to retract
        self.keys: dict[Hashable, _Key] = {}
        self.events: dict[Hashable, list[Any]] = {}  # id -> [start, end, value, key]
        self.cti, self.floor = MIN_TIME, self.min_start  # as _set_cti(MIN_TIME)
        self._swept = 0
        # keys by the end of their earliest window: a CTI visits the keys
        # it makes something final for, not every key
        self._heap: list[tuple[int, int, _Key]] = []
        self._pushes = 0
        self._created = 0
        self._long_keys: set[Hashable] = set()  # keys that may hold long events
        self._saved_record: list[Any] | None = None
        self._inserted: tuple[_Key, list[Any]] | None = None
        self._removed: tuple[Any] | None = None  # the payload a full retraction took out
        #: inserts :meth:`run` applied before the one it failed on
        self.run_applied = 0
        self._undo: list[tuple[_Key, int, list[Any] | None]] | None = None
        self._key_saves: dict[Hashable, Any] | None = None
        self._saved_cti = MIN_TIME
        self._saved_event: list[Any] | None = None
        self.current: Element | None = None

    # -- helpers ----------------------------------------------------------

    def _k_range(self, start: int, end: int) -> tuple[int, int]:
        k_lo, k_hi = self.window.index_range(start, end)
        return k_lo, k_hi

    def _begun(self, m: int) -> int:
        k: int = self.window.last_begun(m)
        return k

    def _push(self, ks: _Key, due: int) -> None:
        """Register ``ks`` as due at time ``due`` (an earlier window end)."""
        ks.due = due
        heappush(self._heap, (due, self._pushes, ks))
        self._pushes += 1

    def _new_key(self, key: Hashable) -> _Key:
        ks = self.keys[key] = _Key(key, self.slices, self._created)
        self._created += 1
        return ks

    def _fail(self, k: int, exc: Exception, ks: _Key | None = None) -> UdmInvocationError:
        start, end = self.window.start_of(k), self.window.end_of(k)
        events: list[str] = []
        if ks is not None and ks.events is not None:
            events = ks.events.described(start, end)
        elif ks is not None:  # the window's events, found by a scan: errors are rare
            key = next((key for key, v in self.keys.items() if v is ks), None)
            events = [
                f"id={ident!r} [{r[0]}, {format_time(r[1])}) {r[2]!r}"
                for ident, r in self.events.items()
                if r[3] == key and r[0] < end and start < r[1]
            ]
        return UdmInvocationError(
            self.label,
            f"[{start}, {format_time(end)})",
            f"{type(exc).__name__}: {exc}",
            element=self.current,
            events=events,
        )

    def _save_key(self, key: Hashable, ks: _Key | None) -> None:
        saves = self._key_saves
        if saves is None or key in saves:
            return
        saves[key] = None if ks is None else (ks.max_start, ks.emitted_k, dict(ks.long))

    def _win(self, ks: _Key, k: int) -> list[Any]:
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
            end = self.window.end_of(k)
            if end < ks.due:
                self._push(ks, end)
        return w

    def _add(self, ks: _Key, lo: int, hi: int, value: Any) -> None:
        add = self.ops.add
        for k in range(lo, hi + 1):
            w = self._win(ks, k)
            try:
                w[0] = add(w[0], value)
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
            w[1] += 1

    def _remove(self, ks: _Key, lo: int, hi: int, value: Any) -> None:
        remove = self.ops.remove
        for k in range(lo, hi + 1):
            w = self._win(ks, k)
            try:
                w[0] = remove(w[0], value)
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
            w[1] -= 1

    def _refresh(self, ks: _Key, key: Hashable, k: int, out: list[Element]) -> None:
        """Emit the difference between window k's cached and current output."""
        w = ks.wins.get(k)
        old = w[2] if w is not None else []
        start, end = self.window.start_of(k), self.window.end_of(k)
        new: Any = _EMPTY
        if w is not None and w[1] > 0:
            try:
                if ks.events is not None:
                    new = detached(self._from_slice(ks.events.values(start, end)))
                else:
                    new = detached(self.udm.result(w[0]))
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
        if old and new is not _EMPTY and _same(old[0][1].payload, new):
            return
        if self._undo is not None and w is not None:
            self._undo.append((ks, k, [w[0], w[1], list(w[2])]))
        for oid, ev in old:
            out.append(Retract(oid, ev.start, ev.end, ev.start, ev.payload))
        if w is None:
            return
        if new is _EMPTY:  # the window has no events left
            w[2] = []
            if w[1] == 0:
                del ks.wins[k]
            return
        oid = self.new_id(key)
        ev = IntervalEvent(end - 1, end, new) if self.point_end else IntervalEvent(start, end, new)
        out.append(Insert(oid, ev.start, ev.end, new))
        w[2] = [(oid, ev)]

    @staticmethod
    def _count(wins: dict[int, list[Any]], lo: int, hi: int) -> None:
        """The slice mode's ``add`` of one event to windows ``lo .. hi``."""
        for k in range(lo, hi + 1):
            w = wins.get(k)
            if w is None:
                wins[k] = [None, 1, []]
            else:
                w[1] += 1

    def _from_slice(self, values: list[Any]) -> Any:
        """A window's result from its members' values (canonical order)."""
        u = self.udm
        if u.incremental:
            return u.result(u.add_many(u.initial_state(), values))
        return u.compute_result(values)

    # -- elements ---------------------------------------------------------

    def _set_cti(self, c: int) -> None:
        self.cti = c
        self.floor = max(c, self.min_start)

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
        when an error message needs it (``current`` is None then)."""
        if (
            end <= start
            or start < self.floor
            or end > self.max_end
            or type(ident) not in (str, int)
        ):
            return False  # late, outside the grid's time bounds, open, or an odd id
        keep = self.keep_events
        if keep and (ident in live or ident in self.events):
            return False  # a duplicate, or the reused id of an expired event
        try:
            key = self.key_fn(payload) if self.key_fn is not None else None
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
                    for kk in range(first + 1, last + 1):
                        w = wins.get(kk)
                        if w is not None:
                            saved_outputs.append((w, w[2]))
                            self._refresh(ks, key, kk, out)
                    ks.emitted_k = last
                elif emitted is None or last > emitted:
                    ks.emitted_k = last
        except Exception:
            del out[mark:]
            for w, outputs in saved_outputs:
                w[2] = outputs
            ks.emitted_k = emitted
            self._compensate(ks, lo, hi, value)
            if ks.events is not None:
                ks.events.remove(record)
            raise
        if start > ks.max_start:
            ks.max_start = start
        if keep:
            self.events[ident] = record
            live[ident] = make_live(start, end, payload, start)
        return True

    def run(
        self, rows: Iterator[Any], as_elements: bool, live: dict[Hashable, Any], make_live: Any
    ) -> tuple[int, Any]:
        """Apply inserts from ``rows`` while each is the plainest case: a
        key that exists without long events, at or after the CTI, a fresh
        id, and no output due (it neither reaches an emitted window nor
        moves its key's watermark past an unemitted window's end). Rows are
        elements (``as_elements``) or (id, start, end, payload) tuples.

        Returns how many it applied and the row that stopped it (taken from
        the iterator, for :meth:`insert_raw` or the general path; ``_DONE``
        when the rows ran out), so one iterator serves a whole batch. Per
        event this is the key, the window arithmetic and the UDM's ``add``
        (in the slice mode a count and an append), no more: deliberately
        one flat loop with its checks inline (complexity over 20)."""
        cti, size, hop, off = self.cti, self.size, self.hop, self.offset
        floor, max_end = self.floor, self.max_end
        keep = self.keep_events
        conservative = self.conservative
        key_fn, value_fn = self.key_fn, self.value_fn
        key_field, value_field = self.key_field, self.value_field
        add, initial = self.ops.add, self.ops.initial_state
        slices = self.slices
        keys, events = self.keys, self.events
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
            if ks is None or ks.long:
                return applied, row
            emitted = ks.emitted_k
            if emitted is None:
                return applied, row
            m = ks.max_start if ks.max_start > cti else cti
            if start > m:
                m = start
            lo = (start - size - off) // hop + 1
            hi = -((off - end) // hop) - 1
            if hi > (m - off) // hop or (m - size - off) // hop > emitted:
                return applied, row  # reaches an unbegun window, or windows become due
            if lo <= emitted and not conservative:
                return applied, row  # changes an emitted window's output
            if value_fn is not None and value_field is None:
                try:
                    value = value_fn(payload)
                except Exception as exc:
                    self.run_applied = applied
                    raise self._value_failed(ks, (ident, start, end, payload), exc) from exc
            wins = ks.wins
            k = lo
            try:
                if slices:  # windows only count their events
                    while k <= hi:
                        w = wins.get(k)
                        if w is None:
                            wins[k] = [None, 1, []]
                        else:
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
                raise self._add_failed(ks, lo, k, (ident, start, end, payload), value, exc) from exc
            if lo <= hi and lo * hop + off + size < ks.due:
                self._push(ks, lo * hop + off + size)
            if start > ks.max_start:
                ks.max_start = start
            record = [start, end, value, key]
            if ks.events is not None:
                ks.events.add(record, ident, payload)
            if keep:
                events[ident] = record
                live[ident] = make_live(start, end, payload, start)
            applied += 1
        return applied, DONE

    def _add_failed(
        self,
        ks: _Key,
        lo: int,
        k: int,
        fields: tuple[Hashable, int, int, Any],
        value: Any,
        exc: Exception,
    ) -> UdmInvocationError:
        """The UDM failed adding a new event's value to window ``k``: take
        the value out of windows ``lo .. k - 1`` again and name the event
        (built from its ``fields`` if the caller held no element)."""
        self._compensate(ks, lo, k - 1, value)
        if self.current is None:
            self.current = Insert(*fields)
        return self._fail(k, exc, ks)

    def _value_failed(
        self, ks: _Key, fields: tuple[Hashable, int, int, Any], exc: Exception
    ) -> UdmInvocationError:
        """The value function (``value=``) failed on a new event's payload:
        reported, as by the reference evaluator, as the UDM failing on the
        first window that holds the event."""
        if self.current is None:
            self.current = Insert(*fields)
        return self._fail(self.window.index_range(fields[1], fields[2])[0], exc, ks)

    def _compensate(self, ks: _Key, lo: int, hi: int, value: Any) -> None:
        remove = self.ops.remove
        for k in range(lo, hi + 1):
            w = ks.wins[k]
            w[0] = remove(w[0], value)
            w[1] -= 1
            if w[1] == 0 and not w[2]:
                del ks.wins[k]

    def insert(self, e: Insert, out: list[Element]) -> None:
        payload = e.payload
        try:
            key = self.key_fn(payload) if self.key_fn is not None else None
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
            self.events[_ExpiredId(e.id, expired[0])] = expired
        self.events[e.id] = record
        if ks.events is not None:
            ks.events.add(record, e.id, payload)
            self._inserted = (ks, record)
        is_long = hi > begun
        if is_long:
            hi = begun
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
        record = self.events.get(r.id)
        if record is None:
            return  # retired: it can no longer touch an open window
        start, old_end, value, key = record
        ks = self.keys[key]
        self._save_key(key, ks)
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

    def _advance(self, ks: _Key, key: Hashable, m_old: int, m_new: int, out: list[Element]) -> None:
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
            wins = ks.wins
            if last - first > len(wins):
                ready = sorted(k for k in wins if first < k <= last)
            else:
                ready = [k for k in range(first + 1, last + 1) if k in wins]
            for k in ready:
                self._refresh(ks, key, k, out)
        if ks.emitted_k is None or last > ks.emitted_k:
            ks.emitted_k = last

    def cti_advance(self, c: int, out: list[Element]) -> int:
        """Apply CTI ``c``; return the output CTI it allows."""
        # every live event, not only the long ones: an open event near the
        # end of time may reach no window that has not begun, yet its
        # windows past INFINITY cannot be closed either
        if c >= INFINITY and any(r[1] >= INFINITY for r in self.events.values()):
            raise ValueError(
                "cannot close hopping/tumbling windows at the end of time: an event that never "
                "ends overlaps infinitely many windows; end it with a retraction first, "
                "or send a finite CTI"
            )
        previous = self.cti
        self._set_cti(c)
        k_final = self.window.last_index_before(c) if c < INFINITY else None
        visit = self._due_keys(c, k_final)
        size, hop, off = self.size, self.hop, self.offset
        try:
            for ks in visit:
                m_new = c if c > ks.max_start else ks.max_start
                emitted = ks.emitted_k
                if (
                    not self.conservative
                    and not ks.long
                    and emitted is not None
                    and m_new < INFINITY
                    and emitted >= (m_new - size - off) // hop
                ):
                    continue  # its final windows were emitted: only forgotten below
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
        # forget final windows (no UDM calls from here on)
        lowest = self.window.start_of(k_final + 1) if k_final is not None else INFINITY
        bound = min(lowest, c)
        for ks in visit:
            if k_final is None:
                ks.wins.clear()
            else:
                for k in [k for k in ks.wins if k <= k_final]:
                    del ks.wins[k]
            self._reschedule(ks, bound)
        # retire events that end before the first open window (amortized)
        # and before the CTI: a retraction may still extend an event that
        # ends at or after the CTI into a later window (one past a gap
        # between windows, hop > size)
        if len(self.events) > 2 * self._swept + 64:
            self.events = {i: r for i, r in self.events.items() if r[1] >= bound}
            self._swept = len(self.events)
        if self.point_end or k_final is None:  # at the end of time nothing can follow
            return c
        return min(c, self.window.first_open_start(c))

    def _due_keys(self, c: int, k_final: int | None) -> list[_Key]:
        """The keys CTI ``c`` has work for: those with a window ending at or
        before it (to emit or finalize and forget), from the due heap, and
        those with long events (windows begin for them); at the end of time
        every key. A key with nothing due is not visited: the windows it
        has not emitted end after ``c``, and it has none the CTI could make
        final, so its only change would be its emitted index, which stays
        behind (no window lies between: none ends at or before the CTI)."""
        if k_final is None:
            self._heap = []
            return list(self.keys.values())
        visit: dict[int, _Key] = {}
        heap = self._heap
        keys = self.keys
        while heap and heap[0][0] <= c:
            due, _, ks = heappop(heap)
            if ks.due == due and keys.get(ks.key) is ks:
                ks.due = _NEVER
                visit[id(ks)] = ks
        for key in list(self._long_keys):
            holder = keys.get(key)
            if holder is None or not holder.long:
                self._long_keys.discard(key)
            else:
                visit[id(holder)] = holder
        # in the keys' order of arrival, as a pass over all keys would: the
        # outputs' order (and ids) then survive a snapshot and restore
        return sorted(visit.values(), key=_order)

    def _reschedule(self, ks: _Key, bound: int) -> None:
        """After a CTI visit: retire the key's sorted events that end before
        ``bound`` and register it again by its earliest window's end (or,
        with no window left, when its remaining events can retire)."""
        kev = ks.events
        if kev is not None and kev.records:
            events = self.events
            for ident, record in kev.retire(bound):
                if events.get(ident) is record:
                    del events[ident]
                else:  # kept aside when its id was reused
                    expired = _ExpiredId(ident, record[0])
                    if events.get(expired) is record:
                        del events[expired]
        if ks.wins:
            k = min(ks.wins)
            self._push(ks, self.window.end_of(k))
        elif kev is not None and kev.records:
            end = kev.min_end()
            if end is not None and end < INFINITY:
                self._push(ks, end + 1)

    # -- rollback and snapshots --------------------------------------------

    def begin(self, element: Element) -> None:
        self._undo = []
        self._key_saves = {}
        self._saved_cti = self.cti
        record = None if isinstance(element, Cti) else self.events.get(element.id)
        self._saved_event = None if record is None else list(record)
        self._saved_record = record
        self._inserted = None
        self._removed = None

    def commit(self) -> None:
        self._undo = None
        self._key_saves = None

    def rollback(self, element: Element) -> None:
        undo = self._undo or []
        self._undo = None
        touched: dict[tuple[int, int], tuple[_Key, int]] = {}
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
                ks.max_start, ks.emitted_k, ks.long = saved_key
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
                self.events[ident] = self.events.pop(_ExpiredId(ident, expired[0]), expired)
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
            w = ks.wins.get(k)
            if w is None:
                continue
            start = self.window.start_of(k)
            key = next(kk for kk, v in self.keys.items() if v is ks)
            state = self.udm.initial_state()
            n = 0
            m = max(ks.max_start, self.cti)
            for s, e, value, rkey in self.events.values():
                if rkey == key and s < start + self.size and start < e and start <= m:
                    state = self.udm.add(state, value)
                    n += 1
            w[0], w[1] = state, n

    def dump(self) -> dict[str, Any]:
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
                        (k, w[0], w[1], [(tuple(o), e.start, e.end, e.payload) for o, e in w[2]])
                        for k, w in ks.wins.items()
                    ],
                )
                for key, ks in self.keys.items()
            ],
        }

    def load(self, data: dict[str, Any]) -> None:
        self._set_cti(data["cti"])
        self._swept = data["swept"]
        self.events = {i: [s, e, v, k] for i, s, e, v, k in data["events"]}
        self.keys = {}
        self._heap, self._long_keys, self._created = [], set(), 0
        for key, max_start, emitted_k, long_ids, wins in data["keys"]:
            ks = self._new_key(key)
            ks.max_start, ks.emitted_k = max_start, emitted_k
            ks.long = {i: self.events[i] for i in long_ids}
            if ks.long:
                self._long_keys.add(key)
            for k, state, n, outputs in wins:
                ks.wins[k] = [
                    state,
                    n,
                    [(OutputId(*o), IntervalEvent(s, e, p)) for o, s, e, p in outputs],
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

    def live_outputs(self) -> list[IntervalEvent[Any]]:
        """The outputs of the windows still open."""
        return [ev for ks in self.keys.values() for w in ks.wins.values() for _, ev in w[2]]

    def memory_size(self) -> tuple[int, int]:
        return len(self.events), sum(len(ks.wins) for ks in self.keys.values())


def _order(ks: _Key) -> int:
    return ks.order


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False
