"""The grid path's window refresh: a window's output compared with its
cached one; in the slice mode a window's first output from its slice (the
common case, emitted on a short path), and the windows of a
time-insensitive operator: zero or more outputs a window, all with its
lifetime, kept by the window and matched with its new result's items by
payload.

In the slice mode a window's entry (``[None, n, outputs]``) only records
that it exists: its events are its slice of the key's sorted events, so a
refresh finds an emptied window by its slice, not by a count, and forgets
it then. Keeping no exact count saves an in-order event the update of
every window it falls in (ten for a window of ten hops). ``n`` is at
least 1 but for the windows a failed insert made, which its undo
(:meth:`~udm.host.gridcore.GridCore._compensate`) finds at 0.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable
from typing import Any

from udm.host.errors import UdmInvocationError
from udm.host.gridstate import EMPTY, GridKey, held_between, refuse_open
from udm.host.hoststate import OutputId
from udm.host.invoke import PLAIN_TYPES, detached, stamp_result
from udm.host.policies import OutputPolicy
from udm.host.sameoutput import exact_key, same_output
from udm.host.stream import Element, Insert, insert_of, retract_of
from udm.host.time import format_time
from udm.host.windows import HoppingWindow
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["OperatorWindows"]


class OperatorWindows:
    """The window refresh of :class:`~udm.host.gridcore.GridCore`, a base
    class of it: the window arithmetic, UDM and undo log are the core's
    (declared here for the type checker)."""

    size: int
    hop: int
    offset: int
    udm: Any
    policy: OutputPolicy
    new_id: Callable[[Hashable], OutputId]
    point_end: bool
    operator: bool
    _undo: list[tuple[GridKey, int, list[Any] | None]] | None
    _from_slice: Callable[[list[Any]], Any]
    label: str
    window: HoppingWindow
    current: Element | None
    value_fn: Callable[[Any], Any] | None
    keys: dict[Hashable, GridKey]
    cti: int
    slices: bool
    #: gives back the last n output ids ``new_id`` issued (:meth:`withdraw`
    #: returns a failed element's ids, as ``process`` does)
    return_ids: Callable[[int], None]

    @property
    def events(self) -> dict[Hashable, list[Any]]:
        """The grid path's id index (:class:`~udm.host.gridcore.GridCore`'s)."""
        raise NotImplementedError

    def _fail(self, k: int, exc: Exception, ks: GridKey | None = None) -> UdmInvocationError:
        """The error of the UDM failing on window ``k`` (of key ``ks``), with
        the window's events and the element being applied."""
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
        cur = self.current
        if type(cur) is Insert and cur.start < end and start < cur.end:
            # a batch records an insert after its add: list it, as one element at a time does
            try:
                value = self.value_fn(cur.payload) if self.value_fn is not None else cur.payload
            except Exception:  # the insert failing is one without the value: show its payload
                value = cur.payload
            line = f"id={cur.id!r} [{cur.start}, {format_time(cur.end)}) {value!r}"
            if line not in events:
                events.append(line)
        return UdmInvocationError(
            self.label,
            f"[{start}, {format_time(end)})",
            f"{type(exc).__name__}: {exc}",
            element=self.current,
            events=events,
        )

    def _refuse_open(self, start: int, end: int, lo: int, hi: int) -> None:
        """:func:`~udm.host.gridstate.refuse_open` for the event ``[start,
        end)`` joining windows ``lo`` to ``hi``."""
        refuse_open(self.window, start, end, hi - lo + 1)

    def withdraw(self, out: list[Element], mark: int) -> None:
        """Delete the outputs ``out[mark:]`` a failing element made and give
        their ids back, so the outputs after it carry the ids that feeding
        the elements one at a time gives them (an output insert takes a new
        id, a retraction reuses its insert's)."""
        self.return_ids(sum(type(o) is Insert for o in out[mark:]))
        del out[mark:]

    def _refresh(self, ks: GridKey, key: Hashable, k: int, out: list[Element]) -> None:
        """Emit the difference between window k's cached and current output
        (the window's list of emitted outputs, ``w[2]``, holds the output
        :class:`Insert` elements still live)."""
        if self.operator:
            self._refresh_items(ks, key, k, out)
            return
        w = ks.wins.get(k)
        old = w[2] if w is not None else []
        start = k * self.hop + self.offset  # HoppingWindow.start_of, inlined: per output
        end = start + self.size
        new: Any = EMPTY
        kev = ks.events
        if w is not None and (kev is not None or w[1] > 0):
            try:
                if kev is not None:  # the slice mode: the slice tells emptiness
                    values = kev.values(start, end)
                    if values:
                        new = detached(self._from_slice(values))
                else:
                    new = detached(self.udm.result(w[0]))
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
        if old and new is not EMPTY and same_output(old[0].payload, new):
            return
        if self._undo is not None and w is not None:
            self._undo.append((ks, k, [w[0], w[1], list(w[2])]))
        for o in old:
            out.append(retract_of(o.id, o.start, o.end, o.start, o.payload))
        if w is None:
            return
        if new is EMPTY:  # the window has no events left
            w[2] = []
            if kev is not None or w[1] == 0:
                del ks.wins[k]
            return
        # the window keeps the output element itself: its retraction needs
        # its id, lifetime and payload, and nothing else is built per output
        emitted = insert_of(self.new_id(key), end - 1 if self.point_end else start, end, new)
        out.append(emitted)
        w[2] = [emitted]

    def emit_due(self, ks: GridKey, emitted: int, last: int, out: list[Element]) -> None:
        """Emit key ``ks``'s windows after ``emitted`` up to ``last``, which
        its watermark passed (:meth:`~udm.host.gridpath.GridPath.run` emits
        the common case, one window, itself). On a UDM error nothing is
        emitted and the windows keep their outputs."""
        wins = ks.wins
        ready = held_between(wins, emitted, last)
        mark = len(out)
        saved = [(wins[k], wins[k][2]) for k in ready]
        try:
            for k in ready:
                self._refresh(ks, ks.key, k, out)
        except Exception:
            self.withdraw(out, mark)
            for w, outputs in saved:
                w[2] = outputs
            raise

    def _emit_slice(self, ks: GridKey, k: int, w: list[Any], out: list[Element]) -> None:
        """:meth:`~udm.host.gridcore.GridCore._refresh` of an aggregate's
        window ``w`` (index ``k``) that has events and no output yet: the
        one window an in-order event makes due, at nearly every event.
        The same result, output and journal entry, without the general
        refresh's comparison with cached outputs; the point events' values
        are sliced here, without a call. On a UDM error nothing changed."""
        start = k * self.hop + self.offset  # HoppingWindow.start_of, inlined
        end = start + self.size
        kev = ks.events
        assert kev is not None
        try:
            if kev.maxdur <= 1 and not kev.ties:  # KeyEvents.values' first case
                starts = kev.starts
                values = kev.vals[bisect_left(starts, start) : bisect_left(starts, end)]
            else:
                values = kev.values(start, end)
            if not values:  # its events were retracted: no output, no window
                del ks.wins[k]
                return
            new = self._from_slice(values)
            if type(new) not in PLAIN_TYPES:
                new = detached(new)
        except Exception as exc:
            raise self._fail(k, exc, ks) from exc
        if self._undo is not None:
            self._undo.append((ks, k, [w[0], w[1], []]))
        emitted = insert_of(self.new_id(ks.key), end - 1 if self.point_end else start, end, new)
        out.append(emitted)
        w[2] = [emitted]

    def _refresh_items(self, ks: GridKey, key: Hashable, k: int, out: list[Element]) -> None:
        """:meth:`_refresh` for an operator (the slice mode): its outputs are
        its result's items, all with the window's lifetime (or last tick),
        so the cached ones are matched with the new ones by payload: the
        unmatched old ones are retracted, the unmatched new ones inserted,
        as the general path's output difference does."""
        w = ks.wins.get(k)
        old = w[2] if w is not None else []
        start = k * self.hop + self.offset  # HoppingWindow.start_of, inlined
        end = start + self.size
        items: list[IntervalEvent[Any]] = []
        values = ks.events.values(start, end) if w is not None and ks.events is not None else []
        if values:
            desc = WindowDescriptor(start, end)
            try:
                result = self._from_slice(values)
                if self.udm.incremental:  # a lazy result over the state, read now
                    result = detached(result, operator=True)
                items = stamp_result(self.udm, desc, result, self.policy)
            except Exception as exc:
                raise self._fail(k, exc, ks) from exc
        slots: dict[Any, list[int]] = {}
        for i, e in enumerate(items):
            slots.setdefault(exact_key(e.payload), []).append(i)
        kept: list[Insert] = []
        gone: list[Insert] = []
        for o in old:
            found = slots.get(exact_key(o.payload))
            if found:
                found.pop()
                kept.append(o)
            else:
                gone.append(o)
        fresh = [i for i_list in slots.values() for i in i_list]
        if not gone and not fresh:
            if w is not None and not old and not values:  # emptied: forgotten
                del ks.wins[k]
            return
        if self._undo is not None and w is not None:
            self._undo.append((ks, k, [w[0], w[1], list(w[2])]))
        for o in gone:
            out.append(retract_of(o.id, o.start, o.end, o.start, o.payload))
        if w is None:
            return
        for i in sorted(fresh):  # in the result's order
            e = items[i]
            emitted = insert_of(self.new_id(key), e.start, e.end, e.payload)
            out.append(emitted)
            kept.append(emitted)
        w[2] = kept
        if not kept and not values:
            del ks.wins[k]

    def live_outputs(self) -> list[IntervalEvent[Any]]:
        """The outputs of the windows still open (not final windows a key
        keeps until its next visit: their outputs end by the CTI)."""
        return [
            IntervalEvent(o.start, o.end, o.payload)
            for ks in self.keys.values()
            for w in ks.wins.values()
            for o in w[2]
            if o.end > self.cti
        ]

    def memory_size(self) -> tuple[int, int]:
        """(events held, windows held): what a long run keeps in memory.
        Outside the slice mode a final window a key still holds is not
        counted: the columnar loop leaves an emitted window to the key's
        next move (:meth:`final_window`)."""
        final = self.final_window()
        return len(self.events), sum(
            len(ks.wins) if final is None else sum(k > final for k in ks.wins)
            for ks in self.keys.values()
        )

    def final_window(self) -> int | None:
        """The last window index the CTI made final, outside the slice mode
        (where final windows linger and count); None: none to leave out.
        The columnar loop forgets a key's final window when the key moves
        on, not at the CTI's visit, so a key may hold one no visit found;
        every other path forgets them at the visit."""
        if self.slices:
            return None
        return int(self.window.last_index_before(self.cti))
