"""The incremental host's general path: windows of any kind, any UDM.

Per element it follows the paper's phases: find the affected windows (the
window spec's :meth:`~udm.host.windows.WindowSpec.affected` ranges), update
the event index, derive the windows of that range before and after (the
kind's strategy, :mod:`udm.host.kinds`), update per-window state
(incrementally where the window kept its shape, from its members where it
was created, split or reshaped, or where the UDM cannot ``remove``), and
emit the difference between each window's previous and new output. The last
output of every window is cached, so retracting it never re-invokes the UDM.

When a CTI passes, windows that can no longer change are finalized and
forgotten, and events that belong to no open window are retired, so memory
is bounded by the data between CTIs. Every change is journaled so that a
failing UDM leaves the host as it was.

:class:`GeneralPath` is the part of :class:`~udm.host.engine.Host` that
runs it; the host (the orchestrator) validates elements, picks the grid
fast path when the kind offers one, and saves and restores the state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from heapq import heappush
from typing import Any

from udm.host.errors import CLOSE_ADVICE, OpenEventError, UdmInvocationError
from udm.host.hoststate import (
    Consistency,
    Journal,
    KeyState,
    OutputId,
    WindowState,
    arrival,
)
from udm.host.indexes import IndexedEvent
from udm.host.invoke import detached, key_failed, prepare, stamp_result
from udm.host.kinds import WindowKind
from udm.host.outputcti import OutputCtis
from udm.host.rows import NORMALIZED, nan_free
from udm.host.sameoutput import exact_key, same_output
from udm.host.stream import Element, Insert, Retract
from udm.host.time import INFINITY, format_time
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["GeneralPath"]


class GeneralPath(OutputCtis):
    """The general algorithm's methods, over the attributes
    :class:`~udm.host.engine.Host` sets up (declared here and in
    :class:`~udm.host.hoststate.HostAttributes` for the type checker)."""

    kind: WindowKind[Any]
    udm: Any
    _key_fn: Callable[[Any], Hashable] | None
    _value_fn: Callable[[Any], Any] | None
    _current: Element | None
    _incremental: bool
    _ts: bool
    _can_remove: bool
    _order_free: bool
    _time_bound: bool
    _eager: bool
    _sees_ends: bool
    _final_waits: bool
    _holds: Callable[[int, int, int, int], Any] | None

    # ------------------------------------------------------------ changes

    def _key_state(self, key: Hashable, journal: Journal) -> KeyState:
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState(order=self._created)
            self._created += 1
            journal.new_keys.append(key)
        # a quiet key has CTI work again (left active if the element fails:
        # a visit to a quiet key changes nothing)
        self._active[key] = ks
        return ks

    def _insert(self, e: Insert, out: list[Element], journal: Journal) -> None:
        if self._key_fn is None:
            key: Hashable = None
        else:
            try:
                key = self._key_fn(e.payload)
                if type(key) in NORMALIZED:  # every NaN one key (docs/concepts.md)
                    key = nan_free(key)
                hash(key)
            except Exception as exc:
                raise key_failed(e, exc) from None
        ks = self._key_state(key, journal)
        self.kind.refuse_open(e.start, e.end, max(self.cti, ks.max_start))
        ev = IndexedEvent(e.id, e.start, e.end, e.payload, self._seq)
        self._seq += 1
        if e.id in self._key_of:
            # The id of an expired event (the validator frees those): it
            # stays for the windows still open, but is no longer found by id.
            old_key = self._key_of[e.id]
            old_index = self.keys[old_key].index
            journal.detached.append((old_index, old_index.by_id.pop(e.id)))
            journal.key_of.append((e.id, True, old_key))
        else:
            journal.key_of.append((e.id, False, None))
        self._key_of[e.id] = key
        self._change(ks, key, None, ev, out, journal)

    def _retract(self, r: Retract, out: list[Element], journal: Journal) -> None:
        if r.id not in self._key_of:
            # retired at cleanup: no open window can see this change (a
            # count-by-start member whose end a time-insensitive UDM ignores)
            return
        key = self._key_of[r.id]
        ks = self._active[key] = self.keys[key]
        old = ks.index.by_id[r.id]
        new = None if r.new_end == old.start else replace(old, end=r.new_end)
        if new is not None and new.end == old.end:
            return
        if new is not None:  # extended to the end of time: as an open insert
            self.kind.refuse_open(new.start, new.end, max(self.cti, ks.max_start))
        if new is None:
            journal.key_of.append((r.id, True, key))
            del self._key_of[r.id]
        self._change(ks, key, old, new, out, journal)

    def _dirty_ranges(
        self, old: IndexedEvent | None, new: IndexedEvent | None
    ) -> list[tuple[int, int]]:
        """Time ranges whose windows may change when ``old`` becomes ``new``."""
        return self.window.affected(
            None if old is None else (old.start, old.end),
            None if new is None else (new.start, new.end),
            self._sees_ends,
        )

    def _windows_in(self, ks: KeyState, ranges: list[tuple[int, int]]) -> dict[int, int]:
        m = max(self.cti, ks.max_start)
        found: dict[int, int] = {}
        derive = self.kind.derive
        for lo, hi in ranges:
            for s, e in derive(ks.index, lo, hi, m):
                if e > ks.final_upto:
                    found[s] = e
        return found

    def _existing_in(self, ks: KeyState, ranges: list[tuple[int, int]]) -> dict[int, int]:
        found: dict[int, int] = {}
        wins, ends = ks.wins, ks.win_ends
        for lo, hi in ranges:
            # windows overlapping [lo, hi): end > lo and start < hi; ends and
            # starts are both increasing, so scan ends from lo
            for end in ends.irange(minimum=lo, inclusive=(False, True)):
                start = ends[end]
                if start >= hi:
                    break
                found[start] = wins[start].end
        return found

    def _change(
        self,
        ks: KeyState,
        key: Hashable,
        old: IndexedEvent | None,
        new: IndexedEvent | None,
        out: list[Element],
        journal: Journal,
    ) -> None:
        ranges = self._dirty_ranges(old, new)
        journal.touch_key(ks)
        m_old = max(self.cti, ks.max_start)
        before = self._existing_in(ks, ranges)
        if old is not None:
            ks.index.remove(old)
        if new is not None:
            ks.index.add(new)
        journal.events.append((ks, old, new))
        if new is not None and old is None and new.start > ks.max_start:
            ks.max_start = new.start
        after = self._windows_in(ks, ranges)
        starts = sorted(before.keys() | after.keys())
        # structure first (ends are unique, so move all of them before
        # re-inserting any), then states, then output
        dropped: list[tuple[int, WindowState]] = []
        for start in starts:
            journal.touch(ks, start)
            end_before, end_after = before.get(start), after.get(start)
            if end_before is not None and end_before != end_after:
                del ks.win_ends[end_before]
                if end_after is None:
                    dropped.append((start, ks.wins.pop(start)))
        for start in starts:
            end_before, end_after = before.get(start), after.get(start)
            if end_after is None:
                continue
            if end_before is None:
                ks.wins[start] = WindowState(end_after)
                ks.win_ends[end_after] = start
            elif end_before != end_after:
                ks.wins[start].end = end_after
                ks.win_ends[end_after] = start
        for start, w in dropped:
            if old is not None and self.window.is_grid:
                self._remove_last(ks, start, w, old)
            self._emit_diff(w, key, [], out, start)
        for start in starts:
            end_before, end_after = before.get(start), after.get(start)
            if end_after is None:
                continue
            if end_before == end_after:
                self._delta(ks, start, old, new)
            else:
                self._rebuild(ks, start, end_after)
            if self._emittable(ks, start):
                self._refresh(ks, key, start, out)
            elif ks.wins[start].outputs:
                # reshaped past the watermark: its speculative output is void
                self._emit_diff(ks.wins[start], key, [], out, start)
        m_new = max(self.cti, ks.max_start)
        if m_new > m_old:
            self._advance(ks, key, m_old, m_new, out, journal)

    # ------------------------------------------------------ window states

    def _prepared(self, ev: IndexedEvent, desc: WindowDescriptor) -> IntervalEvent[Any]:
        e = self.clipping.clip(IntervalEvent(ev.start, ev.end, ev.payload), desc)
        if self._value_fn is not None:
            e = IntervalEvent(e.start, e.end, self._value_fn(e.payload))
        return e

    def _inputs(self, ks: KeyState, start: int, end: int) -> list[IntervalEvent[Any]]:
        """A window's members as the UDM sees them: clipped, mapped, in canonical order."""
        members = self.kind.members(ks.index, start, end)
        desc = WindowDescriptor(start, end)
        return prepare(
            (ev.event() for ev in members), desc, self.clipping, self._value_fn, self._ts
        )

    def _guard(self, ks: KeyState, start: int, end: int, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except UdmInvocationError:
            raise
        except Exception as exc:
            members = self.kind.members(ks.index, start, end)
            raise UdmInvocationError(
                self._label,
                f"[{start}, {format_time(end)})",
                f"{type(exc).__name__}: {exc}",
                element=self._current,
                events=[
                    f"id={ev.id!r} [{ev.start}, {format_time(ev.end)}) {ev.payload!r}"
                    for ev in members
                ],
            ) from exc

    def _fresh_state(self, ks: KeyState, start: int, end: int) -> tuple[int, Any]:
        if not self._incremental:
            return len(self.kind.members(ks.index, start, end)), None
        desc = WindowDescriptor(start, end)
        u: Any = self.udm

        def build() -> tuple[int, Any]:
            inputs = self._inputs(ks, start, end)
            state = u.initial_state()
            if not self._ts:
                return len(inputs), u.add_many(state, [e.payload for e in inputs])
            for e in inputs:
                state = u.add(state, e, desc)
            return len(inputs), state

        built: tuple[int, Any] = self._guard(ks, start, end, build)
        return built

    def _rebuild(self, ks: KeyState, start: int, end: int) -> None:
        n, state = self._fresh_state(ks, start, end)
        w = ks.wins.get(start)
        if w is None:
            ks.wins[start] = WindowState(end, n, state)
            ks.win_ends[end] = start
        else:
            w.n_events, w.state = n, state

    def _belongs(self, ev: IndexedEvent, start: int, end: int) -> bool:
        holds = self._holds
        if holds is None:  # the spec's own rule, overlap, inlined: it runs per window per change
            return ev.start < end and start < ev.end
        return bool(holds(ev.start, ev.end, start, end))

    def _delta(
        self, ks: KeyState, start: int, old: IndexedEvent | None, new: IndexedEvent | None
    ) -> None:
        """Apply the change of one event to a window that kept its shape."""
        w: WindowState = ks.wins[start]
        end = w.end
        was = old is not None and self._belongs(old, start, end)
        now = new is not None and self._belongs(new, start, end)
        w.n_events += int(now) - int(was)
        if not self._incremental or not (was or now):
            return
        if was and now and not self._ts:
            return  # same payload, only the (invisible) lifetime changed
        u: Any = self.udm
        if not self._ts:
            if (was and not self._can_remove) or not self._order_free:
                self._rebuild(ks, start, end)
                return
            fn = self._value_fn
            # the value function runs under the guard too: a payload without
            # the value= field fails as the UDM on this window, as in evaluate
            if was:
                assert old is not None
                p_old = old.payload
                w.state = self._guard(
                    ks, start, end, lambda: u.remove(w.state, p_old if fn is None else fn(p_old))
                )
            if now:
                assert new is not None
                p_new = new.payload
                w.state = self._guard(
                    ks, start, end, lambda: u.add(w.state, p_new if fn is None else fn(p_new))
                )
            return
        desc = WindowDescriptor(start, end)
        e_old = self._prepared(old, desc) if was and old is not None else None
        e_new = self._prepared(new, desc) if now and new is not None else None
        if e_old == e_new:
            return
        if (was and not self._can_remove) or not self._order_free:
            self._rebuild(ks, start, end)
            return

        def update() -> Any:
            state = w.state
            if e_old is not None:
                state = u.remove(state, e_old, desc)
            if e_new is not None:
                state = u.add(state, e_new, desc)
            return state

        w.state = self._guard(ks, start, end, update)

    def _remove_last(self, ks: KeyState, start: int, w: WindowState, old: IndexedEvent) -> None:
        """Take ``old``, an emptied grid window's last event, out of its state
        before the state is dropped, as the grid path does: a raising ``remove``
        fails the retraction on both paths. (Other kinds' windows vanish with
        their events rather than empty; a UDM without ``remove`` is not called.)"""
        end = w.end
        ok = self._incremental and self._can_remove and self._order_free
        if not ok or not self._belongs(old, start, end):
            return
        u: Any = self.udm
        if self._ts:
            desc = WindowDescriptor(start, end)
            e_old = self._prepared(old, desc)
            self._guard(ks, start, end, lambda: u.remove(w.state, e_old, desc))
        else:
            fn, p = self._value_fn, old.payload  # fn runs under the guard, as in _delta
            self._guard(ks, start, end, lambda: u.remove(w.state, p if fn is None else fn(p)))

    # ------------------------------------------------------------- output

    def _emittable(self, ks: KeyState, start: int) -> bool:
        if self.consistency is Consistency.CONSERVATIVE:
            return False
        if self._eager:
            return start <= max(self.cti, ks.max_start)
        w = ks.wins[start]
        return bool(w.end <= max(self.cti, ks.max_start))

    def _compute(self, ks: KeyState, start: int) -> list[IntervalEvent[Any]]:
        w: WindowState = ks.wins[start]
        if w.n_events == 0:
            return []
        desc = WindowDescriptor(start, w.end)
        u: Any = self.udm

        def run() -> list[IntervalEvent[Any]]:
            if self._incremental:
                result = u.result(w.state, desc) if self._ts else u.result(w.state)
                result = detached(result, operator=u.kind == "operator")
            else:
                events = self._inputs(ks, start, w.end)
                if self._ts:
                    result = u.compute_result(events, desc)
                else:
                    result = u.compute_result([e.payload for e in events])
            return stamp_result(self.udm, desc, result, self.policy)

        outputs: list[IntervalEvent[Any]] = self._guard(ks, start, w.end, run)
        return outputs

    def _refresh(self, ks: KeyState, key: Hashable, start: int, out: list[Element]) -> None:
        """Emit the difference between a window's cached and new output."""
        w: WindowState = ks.wins[start]
        self._emit_diff(w, key, self._compute(ks, start), out, start)

    def _emit_diff(
        self,
        w: WindowState,
        key: Hashable,
        new: list[IntervalEvent[Any]],
        out: list[Element],
        start: int,
    ) -> None:
        old = w.outputs
        if not old and not new:
            return
        remaining = list(new)
        kept: list[tuple[OutputId, IntervalEvent[Any]]] = []
        unmatched: list[tuple[OutputId, IntervalEvent[Any]]] = []
        index: dict[tuple[int, int, Any], list[int]] = {}
        for i, e in enumerate(remaining):
            index.setdefault((e.start, e.end, exact_key(e.payload)), []).append(i)
        used: set[int] = set()
        for oid, e in old:
            slots = index.get((e.start, e.end, exact_key(e.payload)))
            if slots:
                used.add(slots.pop())
                kept.append((oid, e))
            else:
                unmatched.append((oid, e))
        fresh = [e for i, e in enumerate(remaining) if i not in used]
        changes: list[Element] = []
        # an output whose end alone changed is shortened or extended in place
        for oid, e in unmatched:
            for j, f in enumerate(fresh):
                if f.start == e.start and same_output(f.payload, e.payload):
                    changes.append(Retract(oid, e.start, e.end, f.end, e.payload))
                    kept.append((oid, f))
                    del fresh[j]
                    break
            else:
                changes.append(Retract(oid, e.start, e.end, e.start, e.payload))
        for f in fresh:
            oid = OutputId(key, self._next_out)
            self._next_out += 1
            changes.append(Insert(oid, f.start, f.end, f.payload))
            kept.append((oid, f))
        for c in changes:
            if c.sync_time < self.output_cti:
                detail = (
                    f"output {c!r} would modify time {format_time(c.sync_time)}, before the "
                    f"output CTI {format_time(self.output_cti)} already emitted"
                )
                if self._time_bound:
                    raise UdmInvocationError(
                        self._label,
                        f"[{start}, {format_time(w.end)})",
                        detail + "; a time_bound UDM must not output before the latest CTI",
                        element=self._current,
                    )
                raise AssertionError(f"host liveliness bug: {detail}")
        w.outputs = kept
        out.extend(changes)

    # ---------------------------------------------------------- watermark

    def _advance(
        self,
        ks: KeyState,
        key: Hashable,
        m_old: int,
        m_new: int,
        out: list[Element],
        journal: Journal,
    ) -> None:
        """The watermark moved from ``m_old`` to ``m_new``: materialize grid
        windows that have begun and emit windows whose end it passed."""
        for s, e in self.kind.begun(ks.index, m_old, m_new):
            if s not in ks.wins and e > ks.final_upto:
                journal.touch(ks, s)
                self._rebuild(ks, s, e)
        if self.consistency is Consistency.CONSERVATIVE:
            return
        if self._eager:
            ready = list(ks.wins.irange(minimum=m_old, maximum=m_new, inclusive=(False, True)))
        else:
            ends = ks.win_ends.irange(minimum=m_old, maximum=m_new, inclusive=(False, True))
            ready = [ks.win_ends[end] for end in ends]
        for start in ready:
            journal.touch(ks, start)
            self._refresh(ks, key, start, out)

    # ---------------------------------------------------------------- CTIs

    def _final(self, ks: KeyState, start: int, w: WindowState, c: int) -> bool:
        if c >= INFINITY:  # the end of the stream: nothing can change any window
            return True
        if not self.window.final_before(w.end, c):
            return False
        if self._final_waits:
            members = self.kind.members(ks.index, start, w.end)
            return all(ev.end < c for ev in members)
        return True

    def _cti(self, c: int, out: list[Element], journal: Journal) -> None:
        if c >= INFINITY:
            problem = self.kind.close_problem(ks.index for ks in self.keys.values())
            if problem is not None:
                raise OpenEventError(problem, CLOSE_ADVICE)
        previous = self.cti
        self.cti = c
        # phase 1: everything that may call the UDM, journaled; the active
        # keys only (see WindowKind.quiet), in their order of arrival
        final: dict[Hashable, list[int]] = {}
        visit = sorted(self._active.items(), key=arrival)
        for key, ks in visit:
            journal.touch_key(ks)
            m_old = max(previous, ks.max_start)
            m_new = max(c, ks.max_start)
            if m_new > m_old:
                self._advance(ks, key, m_old, m_new, out, journal)
            starts: list[int] = []
            for end in ks.win_ends.irange(maximum=c):
                start = ks.win_ends[end]
                w = ks.wins[start]
                if not self._final(ks, start, w, c):
                    break
                starts.append(start)
            if self.consistency is Consistency.CONSERVATIVE:
                for start in starts:
                    journal.touch(ks, start)
                    self._refresh(ks, key, start, out)
            final[key] = starts
        # phase 2: forget final windows and retire events (no UDM calls),
        # drop keys with nothing left (see _spent) and leave quiet ones out
        # of later CTIs until an element of theirs arrives
        keys, active, kind = self.keys, self._active, self.kind
        for key, ks in visit:
            self._cleanup(ks, final[key], c)
            if ks.spent(c):
                del keys[key], active[key]
            elif not ks.wins and ks.max_start <= c and kind.quiet(ks.index, c):
                del active[key]
                heappush(self._quiet, (self._lowest_open(ks, c), ks.order, key, ks))
        self._emit_output_cti(c, out)
        self.validator.prune()

    def _cleanup(self, ks: KeyState, starts: list[int], c: int) -> None:
        """Forget the final windows ``starts`` and retire the events no open
        window can see any more."""
        for start in starts:
            w = ks.wins.pop(start)
            del ks.win_ends[w.end]
            ks.final_upto = max(ks.final_upto, w.end)
        lowest = self._lowest_open(ks, c)
        index = ks.index
        keep_endpoints = self.kind.keeps_endpoints
        for ev in self.kind.retired(index, lowest, c):
            if index.by_id.get(ev.id) is ev:  # else a newer event took its id
                self._key_of.pop(ev.id, None)
            index.retire(ev, keep_endpoints=keep_endpoints)
        if keep_endpoints:
            index.prune_endpoints(min(ks.final_upto, lowest))

    # ------------------------------------------------------------ rollback

    def _rollback(self, journal: Journal) -> None:
        for ks, old, new in reversed(journal.events):
            if new is not None:
                ks.index.remove(new)
            if old is not None:
                ks.index.add(old)
        for index, ev in journal.detached:
            index.by_id[ev.id] = ev
        for ks, max_start, final_upto in journal.keys.values():
            ks.max_start, ks.final_upto = max_start, final_upto
        rebuild: list[tuple[KeyState, int]] = []
        # remove every touched window before restoring any: ends are unique
        for (_, start), (ks, _saved) in journal.wins.items():
            current = ks.wins.pop(start, None)
            if current is not None:
                del ks.win_ends[current.end]
        for (_, start), (ks, saved) in journal.wins.items():
            if saved is not None:
                ks.wins[start] = saved
                ks.win_ends[saved.end] = start
                rebuild.append((ks, start))
        # incremental states may have been mutated in place: rebuild them
        if self._incremental:
            for ks, start in rebuild:
                w = ks.wins[start]
                _, w.state = self._fresh_state(ks, start, w.end)
        for key in journal.new_keys:
            self.keys.pop(key, None)
            self._active.pop(key, None)
        for ident, present, key in reversed(journal.key_of):
            if present:
                self._key_of[ident] = key
            else:
                self._key_of.pop(ident, None)
