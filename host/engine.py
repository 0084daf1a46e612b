"""The incremental host: windows maintained over a live physical stream.

:class:`Host` consumes inserts, retractions and CTIs one at a time, in any
order the validator accepts, and emits an output physical stream: inserts,
retractions of earlier (speculative) outputs, and output CTIs. Its output
CHT always equals the reference evaluator's output over the input CHT, for
the windows the watermark has passed.

Per element it follows the paper's phases: find the affected windows (a
time range that depends on the window kind), update the event index, derive
the windows of that range before and after, update per-window state
(incrementally where the window kept its shape, from its members where it
was created, split or reshaped, or where the UDM cannot ``remove``), and
emit the difference between each window's previous and new output. The last
output of every window is cached, so retracting it never re-invokes the UDM.

When a CTI passes, windows that can no longer change are finalized and
forgotten, and events that belong to no open window are retired, so memory
is bounded by the data between CTIs.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from sortedcontainers import SortedDict

from udm.host.cht import Cht, freeze
from udm.host.errors import InvalidElementError, UdmInvocationError
from udm.host.gridpath import DONE, GridPath
from udm.host.hoststate import Consistency, Journal, KeyState, OutputId, WindowState
from udm.host.indexes import EventIndex, LiveEv
from udm.host.invoke import (
    detached,
    instantiate,
    key_failed,
    make_value_fn,
    prepare,
    stamp_result,
    udm_label,
)
from udm.host.kinds import kind_for
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME, format_time
from udm.host.validation import CtiPolicy, LiveEvent, StreamValidator, ValidationStats
from udm.host.windows import WindowSpec
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["Consistency", "Host", "OutputId", "output_cht", "output_cht_by_key"]

SNAPSHOT_FORMAT = "udm-host-snapshot"
SNAPSHOT_VERSION = 2


class Host:
    """Runs one windowed UDM over a physical stream, incrementally.

    Args:
        window: the window specification.
        udm: a UDM instance or class (a class is created with ``args``).
        key: group-and-apply: a payload field name or function; each key has
            its own windows. ``None`` for one group.
        input_clipping / output_policy / value: as in
            :func:`udm.host.evaluate`.
        consistency: ``speculative`` (default) or ``conservative``.
        cti_policy: what to do with elements that violate the latest CTI.
        fast_path: use the grid path for hopping and tumbling windows of
            time-insensitive aggregates with ``align`` or ``point_end``
            output (same output, several times faster): states updated by
            ``add``/``remove`` for invertible, order-insensitive incremental
            aggregates, windows read as slices of each key's sorted events
            for the others (docs/host.md); ``False`` forces the general one.
        retractions: ``False`` declares an insert-only input (an append-only
            event stream): a retraction is then refused, and the fast path
            keeps no per-event record for retractions to find, which saves
            a third of its per-event work. Ids then need not be unique in
            ``process_many`` and ``process_inserts`` on the fast path.

    Example:
        >>> from udm.host import Host, TumblingWindow, point, Cti
        >>> from udm.sdk import aggregate
        >>> @aggregate
        ... def total(values):
        ...     return sum(values)
        >>> host = Host(TumblingWindow(10), total)
        >>> host.process(point("a", 1, 5)) + host.process(point("b", 4, 7))
        []
        >>> host.process(Cti(10))
        [Insert(id=OutputId(key=None, n=0), start=0, end=10, payload=12), Cti(10)]
    """

    def __init__(
        self,
        window: WindowSpec,
        udm: Udm | type[Udm],
        *,
        key: str | Callable[[Any], Hashable] | None = None,
        input_clipping: InputClipping | str = InputClipping.NONE,
        output_policy: OutputPolicy | str | None = None,
        value: str | Callable[[Any], Any] | None = None,
        consistency: Consistency | str = Consistency.SPECULATIVE,
        cti_policy: CtiPolicy | str = CtiPolicy.RAISE,
        args: dict[str, Any] | None = None,
        fast_path: bool = True,
        retractions: bool = True,
    ) -> None:
        self.window = window
        self.udm = instantiate(udm, args)
        self.clipping = InputClipping.parse(input_clipping)
        self.policy = resolve_output_policy(output_policy, window, self.udm)
        self.consistency = Consistency.parse(consistency)
        self.key_option = key
        self.value_option = value
        self._key_fn = make_value_fn(key, "key")
        self._value_fn = make_value_fn(value)
        self.validator = StreamValidator(cti_policy=cti_policy)
        self.retractions = retractions
        # as created: what a UDM stores while it runs is not an argument
        self._arguments = _udm_arguments(self.udm)
        self.keys: dict[Hashable, KeyState] = {}
        self._key_of: dict[Hashable, Hashable] = {}  # event id -> key
        self._seq = 0
        self._next_out = 0
        self.cti = MIN_TIME
        self.output_cti = MIN_TIME
        self._label = udm_label(self.udm)
        u = self.udm
        self._incremental = u.incremental
        self._ts = u.time_sensitive
        # a UDM may have remove() and still declare invertible=False (say, a
        # float sum that drifts): then windows are rebuilt, never undone
        self._can_remove = (
            u.incremental and type(u).implements("remove") and u.properties.invertible
        )
        # an order-sensitive incremental UDM must see canonical order, so its
        # states are rebuilt instead of updated in arrival order
        self._order_free = u.properties.order_insensitive
        # time-bound output is emitted as soon as a window has begun (each
        # change answered at once, at or after its sync time), which is what
        # lets output CTIs follow input CTIs without delay
        # the time_bound policy, or a UDM declaring the property under a
        # policy that keeps its starts (clip only moves a start later), over
        # hopping and tumbling windows: over snapshot and count windows a new
        # element reshapes windows that began earlier, so outputs at member
        # starts are not time-bound there (docs/host.md)
        self._time_bound = self.policy is OutputPolicy.TIME_BOUND or (
            u.properties.time_bound
            and self.policy in (OutputPolicy.KEEP, OutputPolicy.CLIP)
            and window.is_grid
        )
        self._eager = self._time_bound and self.consistency is Consistency.SPECULATIVE
        # a time-sensitive UDM without right clipping sees member end times
        self._sees_ends = self._ts and not self.clipping.clips_right
        self._sees_starts = self._ts and not self.clipping.clips_left
        #: what the host must know of the window kind (see udm.host.kinds)
        self.kind = kind_for(window)
        # whether members' ends decide a window's finality (see _final)
        self._final_waits = self._sees_ends and window.final_waits_for_members
        self._checks_range = window.is_grid
        # the output of an empty window is nothing, so output retractions
        # are the only effect of losing all members
        self._current: Element | None = None
        self._fast: GridPath | None = None
        if fast_path:
            self._fast = self.kind.fast_path(
                udm=self.udm,
                policy=self.policy,
                clipping=self.clipping,
                conservative=self.consistency is Consistency.CONSERVATIVE,
                key_fn=self._key_fn,
                value_fn=self._value_fn,
                label=self._label,
                new_id=self._new_id,
                keep_events=retractions,
                fields=(
                    key if isinstance(key, str) else None,
                    value if isinstance(value, str) else None,
                ),
            )

    def _new_id(self, key: Hashable) -> OutputId:
        oid = OutputId(key, self._next_out)
        self._next_out += 1
        return oid

    # ------------------------------------------------------------------ API

    @property
    def stats(self) -> ValidationStats:
        """Counts of elements the CTI policy dropped or adjusted."""
        return self.validator.stats

    def process(self, element: Element) -> list[Element]:
        """Consume one element; return the output elements it causes.

        A rejected element raises and leaves the host unchanged; so does an
        exception inside the UDM, wrapped in :class:`UdmInvocationError`.
        """
        if not self.retractions and type(element) is Retract:
            raise InvalidElementError(
                element,
                self.validator.position,
                "this host takes no retractions (it was created with retractions=False, "
                "for an insert-only stream); create it with retractions=True",
            )
        saved = self._save_validator(element)
        checked = self.validator.check(element)
        if checked is None:
            return []
        if self._checks_range and type(checked) is not Cti:
            self._check_range(element, checked, saved)
        out: list[Element] = []
        next_out, seq, cti, output_cti = self._next_out, self._seq, self.cti, self.output_cti
        self._current = element
        fast = self._fast
        if fast is not None:
            fast.current = element
            fast.begin(checked)
            try:
                if isinstance(checked, Insert):
                    fast.insert(checked, out)
                elif isinstance(checked, Retract):
                    fast.retract(checked, out)
                else:
                    self.cti = checked.time
                    candidate = fast.cti_advance(checked.time, out)
                    if candidate > self.output_cti:
                        self.output_cti = candidate
                        out.append(Cti(candidate))
                    self.validator.prune()
            except BaseException:
                fast.rollback(checked)
                self._restore_validator(saved)
                self._next_out, self.cti, self.output_cti = next_out, cti, output_cti
                raise
            finally:
                fast.commit()
                fast.current = None
                self._current = None
            return out
        journal = Journal()
        try:
            if isinstance(checked, Cti):
                self._cti(checked.time, out, journal)
            elif isinstance(checked, Insert):
                self._insert(checked, out, journal)
            else:
                self._retract(checked, out, journal)
        except BaseException:
            self._rollback(journal)
            self._restore_validator(saved)
            self._next_out, self._seq = next_out, seq
            self.cti, self.output_cti = cti, output_cti
            raise
        finally:
            self._current = None
        return out

    def _check_range(self, element: Element, checked: Element, saved: tuple[Any, ...]) -> None:
        """Refuse an event that windows outside the tick range would hold."""
        if isinstance(checked, Insert):
            start, end = checked.start, checked.end
        else:
            assert isinstance(checked, Retract)
            start, end = checked.start, max(checked.new_end, checked.start + 1)
        problem = self.window.range_problem(start, end)
        if problem is not None:
            self._restore_validator(saved)
            raise InvalidElementError(element, self.validator.position, problem)

    def process_many(self, elements: Iterable[Element]) -> list[Element]:
        """Consume elements in order; return all outputs.

        On an error, the elements before the failing one stay processed and
        their outputs are attached to the exception as ``outputs`` (and its
        index as ``position``); the host is as it was before that element.

        The cyclic garbage collector is paused while a batch runs: the host
        creates no reference cycles, reference counting still frees memory,
        and collections triggered by millions of short-lived objects would
        otherwise cost a third of the time."""
        fast = self._fast
        with _batch() as b:
            out = b.out
            if fast is None:
                for b.position, element in enumerate(elements):
                    out.extend(self.process(element))
                return out
            validator = self.validator
            live = validator.live
            rows = iter(elements)
            while True:
                fast.current = None
                try:
                    applied, element = fast.run(rows, True, live, LiveEvent)
                except Exception:
                    validator.position += fast.run_applied
                    b.position += fast.run_applied
                    raise
                validator.position += applied
                b.position += applied
                if element is DONE:
                    return out
                if not (
                    type(element) is Insert and fast.insert_quick(element, live, LiveEvent, out)
                ):
                    out.extend(self.process(element))
                else:
                    validator.position += 1
                b.position += 1

    def process_inserts(
        self,
        ids: Sequence[Hashable],
        starts: Sequence[int],
        ends: Sequence[int],
        payloads: Sequence[Any],
    ) -> list[Element]:
        """``process_many`` of ``Insert(ids[i], starts[i], ends[i],
        payloads[i])`` for every i, without building the elements where the
        grid fast path takes them: columnar callers (the streaming processor)
        save a third of the per-event cost. Errors as in :meth:`process_many`;
        columns of different lengths are refused before any event is applied.
        """
        lengths = {"ids": len(ids), "starts": len(starts), "ends": len(ends)}
        lengths["payloads"] = len(payloads)
        if len(set(lengths.values())) > 1:
            told = ", ".join(f"{k} {v}" for k, v in lengths.items())
            raise ValueError(
                f"process_inserts needs columns of one length, one entry per insert; got {told}"
            )
        fast = self._fast
        if fast is None:
            return self.process_many(map(Insert, ids, starts, ends, payloads))
        validator = self.validator
        live = validator.live
        raw = fast.insert_raw
        rows = zip(ids, starts, ends, payloads, strict=True)
        with _batch() as b:
            out = b.out
            try:
                while True:
                    fast.current = None  # no element object: built if an error names it
                    try:
                        applied, row = fast.run(rows, False, live, LiveEvent)
                    except Exception:
                        validator.position += fast.run_applied
                        b.position += fast.run_applied
                        raise
                    validator.position += applied
                    b.position += applied
                    if row is DONE:
                        return out
                    ident, start, end, payload = row
                    if raw(ident, start, end, payload, live, LiveEvent, out):
                        validator.position += 1
                    else:
                        out.extend(self.process(Insert(ident, start, end, payload)))
                    b.position += 1
            finally:
                fast.current = None

    def flush(self) -> list[Element]:
        """End of stream: a CTI at the end of time finalizes every window."""
        return self.process(Cti(INFINITY))

    def live_outputs(self) -> Cht:
        """Outputs of the windows still open (final windows are forgotten at
        cleanup; collect the output stream and use :func:`output_cht` for
        the whole output CHT)."""
        if self._fast is not None:
            return Cht(self._fast.live_outputs())
        rows = [ev for ks in self.keys.values() for w in ks.wins.values() for _, ev in w.outputs]
        return Cht(rows)

    @property
    def memory_size(self) -> tuple[int, int]:
        """(live events, open windows) across keys: what cleanup bounds."""
        if self._fast is not None:
            return self._fast.memory_size()
        return (
            sum(len(ks.index) for ks in self.keys.values()),
            sum(len(ks.wins) for ks in self.keys.values()),
        )

    # --------------------------------------------------------- validation

    def _save_validator(self, element: Element) -> tuple[Any, ...]:
        """What a host failure after validation must undo (cheap: this runs
        for every element)."""
        v = self.validator
        if not isinstance(element, Insert | Retract):  # a CTI, or not an element
            return (v.position, v.cti, v.stats.as_tuple(), None, None, False)
        ident = element.id
        try:
            ev = v.live.get(ident)
        except TypeError:  # unhashable id: the validator will reject it
            return (v.position, v.cti, v.stats.as_tuple(), None, None, False)
        live = None if ev is None else LiveEvent(ev.start, ev.end, ev.payload, ev.original_start)
        dropped = bool(v.dropped_ids) and ident in v.dropped_ids
        return (v.position, v.cti, v.stats.as_tuple(), ident, live, dropped)

    def _restore_validator(self, saved: tuple[Any, ...]) -> None:
        v = self.validator
        position, cti, stats, ident, live, dropped = saved
        v.position, v.cti, v.stats = position, cti, ValidationStats(*stats)
        if ident is not None:
            if live is None:
                v.live.pop(ident, None)
            else:
                v.live[ident] = live
            if dropped:
                v.dropped_ids.add(ident)
            else:
                v.dropped_ids.discard(ident)

    # ------------------------------------------------------------ changes

    def _key_state(self, key: Hashable, journal: Journal) -> KeyState:
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
            journal.new_keys.append(key)
        return ks

    def _insert(self, e: Insert, out: list[Element], journal: Journal) -> None:
        if self._key_fn is None:
            key: Hashable = None
        else:
            try:
                key = self._key_fn(e.payload)
                hash(key)
            except Exception as exc:
                raise key_failed(e, exc) from None
        ks = self._key_state(key, journal)
        ev = LiveEv(e.id, e.start, e.end, e.payload, self._seq)
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
        ks = self.keys[key]
        old = ks.index.by_id[r.id]
        new = None if r.new_end == old.start else replace(old, end=r.new_end)
        if new is not None and new.end == old.end:
            return
        if new is None:
            journal.key_of.append((r.id, True, key))
            del self._key_of[r.id]
        self._change(ks, key, old, new, out, journal)

    def _dirty_ranges(self, old: LiveEv | None, new: LiveEv | None) -> list[tuple[int, int]]:
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
        old: LiveEv | None,
        new: LiveEv | None,
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

    def _prepared(self, ev: LiveEv, desc: WindowDescriptor) -> IntervalEvent[Any]:
        e = self.clipping.clip(IntervalEvent(ev.start, ev.end, ev.payload), desc)
        if self._value_fn is not None:
            e = IntervalEvent(e.start, e.end, self._value_fn(e.payload))
        return e

    def _inputs(self, ks: KeyState, start: int, end: int) -> list[IntervalEvent[Any]]:
        """A window's members as the UDM sees them: clipped, mapped, in
        canonical order."""
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

    def _belongs(self, ev: LiveEv, start: int, end: int) -> bool:
        return bool(self.window.holds(ev.start, ev.end, start, end))

    def _delta(self, ks: KeyState, start: int, old: LiveEv | None, new: LiveEv | None) -> None:
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
            index.setdefault((e.start, e.end, freeze(e.payload)), []).append(i)
        used: set[int] = set()
        for oid, e in old:
            slots = index.get((e.start, e.end, freeze(e.payload)))
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
                if f.start == e.start and freeze(f.payload) == freeze(e.payload):
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
                raise ValueError(problem)
        previous = self.cti
        self.cti = c
        # phase 1: everything that may call the UDM, journaled
        final: dict[Hashable, list[int]] = {}
        for key, ks in self.keys.items():
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
        # phase 2: forget final windows and retire events (no UDM calls)
        for key, starts in final.items():
            self._cleanup(self.keys[key], starts, c)
        self._emit_output_cti(c, out)
        self.validator.prune()

    def _lowest_open(self, ks: KeyState, c: int) -> int:
        """The earliest time an open (existing or future) window starts."""
        lowest = self.kind.open_from(ks.index, c)
        if ks.wins:
            lowest = min(lowest, ks.wins.peekitem(0)[0])
        return lowest

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

    def _emit_output_cti(self, c: int, out: list[Element]) -> None:
        # after a CTI at the end of time no element can follow, so no window
        # can still change or come into existence: the output ends too
        if self._eager or c >= INFINITY:
            candidate = c
        else:
            candidate = c
            for ks in self.keys.values():
                if ks.wins:  # starts and ends both increase: the first window is earliest
                    start = ks.wins.keys()[0]
                    candidate = min(
                        candidate, self.policy.earliest_output(start, ks.wins[start].end)
                    )
            candidate = min(candidate, self._earliest_future(c))
        if candidate > self.output_cti:
            self.output_cti = candidate
            out.append(Cti(candidate))

    def _earliest_future(self, c: int) -> int:
        """The earliest output time of windows that do not exist yet (for any
        key, including keys not seen so far)."""
        return self.kind.earliest_future(
            c, self.policy, lambda: (self._lowest_open(ks, c) for ks in self.keys.values())
        )

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
        for ident, present, key in reversed(journal.key_of):
            if present:
                self._key_of[ident] = key
            else:
                self._key_of.pop(ident, None)

    # ----------------------------------------------------- snapshot/restore

    def snapshot(self) -> bytes:
        """The host's state as versioned plain data (pickled): live events,
        windows with their states and emitted outputs, watermarks, the
        validator and counters. :meth:`restore` resumes with identical
        output."""
        v = self.validator
        v.prune(force=True)  # what cleanup may forget need not be saved
        data = {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "udm": self._label,
            "window": repr(self.window),
            "options": self._options(),
            "cti": self.cti,
            "output_cti": self.output_cti,
            "next_out": self._next_out,
            "seq": self._seq,
            "validator": {
                "cti": v.cti,
                "position": v.position,
                "stats": v.stats.as_dict(),
                "live": [
                    (i, ev.start, ev.end, ev.payload, ev.original_start) for i, ev in v.live.items()
                ],
                "dropped_ids": list(v.dropped_ids),
            },
            "fast": None if self._fast is None else self._fast.dump(),
            "keys": [
                {
                    "key": key,
                    "max_start": ks.max_start,
                    "final_upto": ks.final_upto,
                    "events": [
                        (ev.id, ev.start, ev.end, ev.payload, ev.seq) for ev in ks.index.by_start
                    ],
                    "endpoints": list(ks.index.endpoints.items()),
                    "windows": [
                        (
                            start,
                            w.end,
                            w.n_events,
                            w.state,
                            [(tuple(o), e.start, e.end, e.payload) for o, e in w.outputs],
                        )
                        for start, w in ks.wins.items()
                    ],
                }
                for key, ks in self.keys.items()
            ],
        }
        return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)

    def _options(self) -> dict[str, str]:
        """The query options a snapshot's state depends on, as text: a
        state restored under other options would give output matching
        neither query (a conservative host retracting, say)."""

        def described(option: Any) -> str:
            if callable(option):
                module = getattr(option, "__module__", "?")
                return f"{module}.{getattr(option, '__qualname__', option)}"
            return repr(option)

        return {
            "args": self._arguments,
            "input_clipping": self.clipping.value,
            "output_policy": self.policy.value,
            "consistency": self.consistency.value,
            "cti_policy": CtiPolicy.parse(self.validator.cti_policy).value,
            "key": described(self.key_option),
            "value": described(self.value_option),
            "retractions": str(self.retractions),
            "fast_path": str(self._fast is not None),
        }

    def restore(self, blob: bytes) -> None:
        """Load a :meth:`snapshot` into this host (created with the same
        query), replacing its state."""
        data = pickle.loads(blob)
        if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
            raise ValueError("not a udm host snapshot")
        if data.get("version") != SNAPSHOT_VERSION:
            raise ValueError(
                f"host snapshot version {data.get('version')} is not supported "
                f"(this udm reads version {SNAPSHOT_VERSION})"
            )
        if data["udm"] != self._label or data["window"] != repr(self.window):
            raise ValueError(
                f"snapshot of {data['udm']!r} over {data['window']} cannot be restored into a host "
                f"running {self._label!r} over {self.window!r}"
            )
        ours = self._options()
        theirs = data["options"]
        differ = [
            f"{k}: {theirs.get(k)} in the snapshot, {v} here"
            for k, v in ours.items()
            if theirs.get(k) != v
        ]
        if differ:
            raise ValueError(
                f"snapshot of {data['udm']!r} over {data['window']} was taken with other query "
                f"options ({'; '.join(differ)}); restore it into a host created with the same "
                "options"
            )
        self.cti, self.output_cti = data["cti"], data["output_cti"]
        self._next_out, self._seq = data["next_out"], data["seq"]
        vd = data["validator"]
        v = self.validator
        v.cti, v.position = vd["cti"], vd["position"]
        v.stats = ValidationStats(**vd["stats"])
        v.live = {i: LiveEvent(s, e, p, o) for i, s, e, p, o in vd["live"]}
        v.dropped_ids = set(vd["dropped_ids"])
        if self._fast is not None:
            self._fast.load(data["fast"])
        self.keys = {}
        self._key_of = {}
        newest: dict[Hashable, tuple[LiveEv, EventIndex]] = {}
        for kd in data["keys"]:
            ks = KeyState(max_start=kd["max_start"], final_upto=kd["final_upto"])
            for ident, s, e, p, seq in kd["events"]:
                ev = LiveEv(ident, s, e, p, seq)
                ks.index.add(ev)
                seen = newest.get(ident)
                if seen is None or seen[0].seq < seq:
                    if seen is not None and seen[1].by_id.get(ident) is seen[0]:
                        del seen[1].by_id[ident]
                    newest[ident] = (ev, ks.index)
                    self._key_of[ident] = kd["key"]
                elif ks.index is seen[1]:  # an expired event whose id was reused
                    ks.index.by_id[ident] = seen[0]
                else:
                    del ks.index.by_id[ident]
            ks.index.endpoints = SortedDict(kd["endpoints"])
            for start, end, n, state, outputs in kd["windows"]:
                w = WindowState(
                    end,
                    n,
                    state,
                    [(OutputId(*o), IntervalEvent(s, e, p)) for o, s, e, p in outputs],
                )
                ks.wins[start] = w
                ks.win_ends[end] = start
            self.keys[kd["key"]] = ks


@dataclass(slots=True)
class _Batch:
    out: list[Element]
    position: int = 0


@contextmanager
def _batch() -> Iterator[_Batch]:
    """A batch of elements: the garbage collector paused (see
    :meth:`Host.process_many`), and on an error the outputs so far and the
    failing element's index attached to the exception."""
    batch = _Batch([])
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield batch
    except Exception as exc:
        exc.outputs = batch.out  # type: ignore[attr-defined]
        exc.position = batch.position  # type: ignore[attr-defined]
        raise
    finally:
        if collecting:
            gc.enable()


def _safe_in(item: Any, container: set[Any]) -> bool:
    try:
        return item in container
    except TypeError:
        return False


def output_cht(outputs: Iterable[Element]) -> Cht:
    """The CHT of an output stream (validated: a host bug would raise)."""
    from udm.host.cht import derive_cht

    return derive_cht(outputs)[0]


def output_cht_by_key(outputs: Iterable[Element]) -> dict[Hashable, Cht]:
    """The output CHT of a grouped host, split by group key."""
    validator = StreamValidator()
    for element in outputs:
        validator.check(element)
    groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
    for ident, ev in validator.live.items():
        key = ident.key if isinstance(ident, OutputId) else None
        groups.setdefault(key, []).append(IntervalEvent(ev.start, ev.end, ev.payload))
    return {k: Cht(v) for k, v in groups.items()}


def _udm_arguments(udm: Any) -> str:
    """A UDM instance's arguments as text, for a snapshot's options: a
    decorated UDM's ``args`` (``quantile(q=0.9)``), else the plain values
    (numbers, strings, bools, None, tuples of them) its ``__init__`` stored,
    which render the same in every process."""
    found = getattr(udm, "args", None)
    if not isinstance(found, dict):
        found = vars(udm) if hasattr(udm, "__dict__") else {}

    def plain(v: Any) -> bool:
        if isinstance(v, tuple):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, bool | int | float | str)

    return repr(sorted((str(k), v) for k, v in found.items() if plain(v)))
