"""The incremental host: windows maintained over a live physical stream.

:class:`Host` consumes inserts, retractions and CTIs one at a time, in any
order the validator accepts, and emits an output physical stream: inserts,
retractions of earlier (speculative) outputs, and output CTIs. Its output
CHT always equals the reference evaluator's output over the input CHT, for
the windows the watermark has passed.

The host is an orchestrator: it validates each element, hands it to the
grid fast path when the window kind offers one for the query
(:class:`~udm.host.gridpath.GridPath`), else to the general path
(:class:`~udm.host.general.GeneralPath`, which asks the kind's strategy in
:mod:`udm.host.kinds`), undoes a failed element, and saves and restores
its state.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, compress, count, repeat
from operator import is_not
from typing import Any

from udm.host.cht import Cht
from udm.host.errors import InvalidElementError
from udm.host.gcpause import gc_paused, promote_young
from udm.host.general import GeneralPath
from udm.host.gridcolumns import COLUMN_CHUNK, COLUMN_CHUNK_MAX, MIN_COLUMN_RUN
from udm.host.gridpath import DONE, GridPath
from udm.host.hostsnapshot import Snapshots, udm_arguments
from udm.host.hoststate import Consistency, Journal, KeyState, OutputId
from udm.host.invoke import (
    instantiate,
    make_value_fn,
    udm_label,
)
from udm.host.kinds import kind_for
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.rows import NORMALIZED, nan_free, note_numpy_keys
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME
from udm.host.validation import CtiPolicy, LiveEvent, StreamValidator, ValidationStats
from udm.host.windows import WindowSpec
from udm.sdk.base import Udm
from udm.sdk.events import IntervalEvent

__all__ = ["Consistency", "Host", "OutputId", "output_cht", "output_cht_by_key"]

#: calls of the columnar loop in a row that apply nothing before the rest
#: of a run goes one element at a time: each failed call costs a pass over
#: its chunk, so a run whose checks fail throughout is given up soon; but
#: a single element the loop leaves (a key dropped at the last CTI whose
#: first event is at the CTI's time, which the element loop places) can
#: fail a call on its own, and two such elements in a row are common
#: where keys come and go
GIVE_UP = 3


class Host(GeneralPath, Snapshots):
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
            time-insensitive aggregates and operators with ``align`` or
            ``point_end`` output (same output, several times faster): states
            updated by ``add``/``remove`` for invertible, order-insensitive
            incremental aggregates, windows read as slices of each key's
            sorted events for the others (docs/host.md); ``False`` forces
            the general one.
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
        self._arguments = udm_arguments(self.udm)
        self.keys: dict[Hashable, KeyState] = {}
        self._active: dict[Hashable, KeyState] = {}
        self._quiet: list[tuple[int, int, Hashable, KeyState]] = []
        self._created = 0  # keys created (their order of arrival)
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
        # the spec's membership rule, or None for the default (overlap),
        # which the general path inlines
        self._holds = None if type(window).holds is WindowSpec.holds else window.holds
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
                return_ids=self._return_ids,
                keep_events=retractions,
                fields=(
                    key if isinstance(key, str) else None,
                    value if isinstance(value, str) else None,
                ),
            )

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
        note_numpy_keys()  # a numpy NaN key is the one NaN key too
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
        note_numpy_keys()  # a numpy NaN key is the one NaN key too
        fast = self._fast
        with _batch() as b:
            out = b.out
            if fast is None:
                for b.position, element in enumerate(elements):
                    out.extend(self.process(element))
                return out
            try:
                if type(elements) is list and fast.columnar:
                    self._columns(elements, b)
                else:
                    self._elements(iter(elements), b)
                return out
            finally:
                fast.settle(self.validator.live, LiveEvent)

    def _elements(self, rows: Iterator[Element], b: _Batch) -> None:
        """:meth:`process_many`'s loop over ``rows`` on the fast path: runs of
        plain inserts in the grid path's loop, each other element alone."""
        fast = self._fast
        assert fast is not None
        validator = self.validator
        live = validator.live
        out = b.out
        while True:
            fast.current = None
            element = self._fast_run(rows, True, b)
            if element is DONE:
                return
            if type(element) is Insert and fast.insert_quick(element, live, LiveEvent, out):
                validator.position += 1
            else:
                self._after_run(element, out)
            b.position += 1

    def _columns(self, elements: list[Element], b: _Batch) -> None:
        """:meth:`process_many` of a list: the inserts and retractions up to
        the next other element (a CTI), a chunk at a time, through the grid
        path's columnar loop
        (:meth:`~udm.host.gridcolumns.GridColumns.run_columns`); an element
        the loop leaves alone through :meth:`_elements`, then the loop again
        (:data:`GIVE_UP` times in a row nothing applied: the rest of the run one
        by one);
        the element after the run alone."""
        fast = self._fast
        assert fast is not None
        validator = self.validator
        live = validator.live
        out = b.out
        n = len(elements)
        # the positions of the elements that are neither inserts nor
        # retractions (a CTI ends a run), without a Python-level loop over
        # the inserts
        kinds = list(map(type, elements))
        others = [
            p
            for p in compress(count(), map(is_not, kinds, repeat(Insert)))
            if kinds[p] is not Retract
        ]
        pos = 0
        # chunks grow while whole ones apply, shrink after an element left
        chunk = COLUMN_CHUNK
        for stop in chain(others, (n,)):
            misses = 0  # calls in a row that applied nothing
            while stop - pos >= MIN_COLUMN_RUN:
                upto = min(stop, pos + chunk)
                fast.current = None
                applied = fast.run_columns(elements, pos, upto, live, LiveEvent, out, kinds)
                validator.position += applied
                b.position += applied
                pos += applied
                if pos == upto:
                    misses = 0
                    chunk = min(2 * chunk, COLUMN_CHUNK_MAX)
                    continue
                chunk = COLUMN_CHUNK
                misses = 0 if applied else misses + 1
                if misses == GIVE_UP:
                    break  # the run's checks fail: the element loop takes the rest
                self._elements(iter(elements[pos : pos + 1]), b)  # the one it left
                pos += 1
            if pos < stop:
                self._elements(iter(elements[pos : stop + 1]), b)
            elif stop < n:  # the run applied: the element after it at once
                self._after_run(elements[stop], out)
                b.position += 1
            pos = stop + 1

    def _after_run(self, element: Element, out: list[Element]) -> None:
        """The element that ended a run of inserts the grid path applied: a
        CTI on the grid path's short step, anything else one by one once
        the run's events are settled in the validator."""
        if type(element) is Cti:
            self._cti_after_run(element, out)
        else:
            fast = self._fast
            assert fast is not None
            fast.settle(self.validator.live, LiveEvent)
            out.extend(self.process(element))

    def _fast_run(self, rows: Iterator[Any], as_elements: bool, b: _Batch) -> Any:
        """One :meth:`GridPath.run` over ``rows`` inside batch ``b``: the
        validator's and the batch's positions move past the inserts it
        applied (also when it fails, so the error names the right element);
        returns the row it stopped at, or ``DONE``."""
        fast = self._fast
        assert fast is not None
        validator = self.validator
        try:
            applied, row = fast.run(rows, as_elements, validator.live, LiveEvent, b.out)
        except Exception:
            validator.position += fast.run_applied
            b.position += fast.run_applied
            raise
        validator.position += applied
        b.position += applied
        return row

    def _cti_after_run(self, element: Cti, out: list[Element]) -> None:
        """A CTI in a batch: the events the grid path's run left out of the
        validator's index go in first, but for those ending before the CTI
        (the validator may forget them once it is accepted), unless it fails."""
        fast = self._fast
        assert fast is not None
        live = self.validator.live
        skipped = fast.settle(live, LiveEvent, max(element.time, self.validator.cti))
        try:
            out.extend(self.process(element))
        except BaseException:
            fast.register(skipped, live, LiveEvent)
            raise

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
        note_numpy_keys()  # a numpy NaN key is the one NaN key too
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
                    row = self._fast_run(rows, False, b)
                    if row is DONE:
                        return out
                    ident, start, end, payload = row
                    if raw(ident, start, end, payload, live, LiveEvent, out):
                        validator.position += 1
                    else:
                        fast.settle(live, LiveEvent)
                        out.extend(self.process(Insert(ident, start, end, payload)))
                    b.position += 1
            finally:
                fast.current = None
                fast.settle(live, LiveEvent)

    def flush(self) -> list[Element]:
        """End of stream: a CTI at the end of time finalizes every window.
        The garbage collector is paused meanwhile, as in :meth:`process_many`:
        after a large batch its first collections would scan every object
        the batch left (on the hopping median at 200,000 events, 0.3 to 0.7 s
        of CPU against 0.05 s paused)."""
        with gc_paused():
            return self.process(Cti(INFINITY))

    def live_outputs(self) -> Cht:
        """Outputs of the windows still open (final windows are forgotten at
        cleanup; collect the output stream and use :func:`output_cht` for
        the whole output CHT)."""
        if self._fast is not None:
            return Cht(self._fast.live_outputs())
        rows = [ev for ks in self.keys.values() for w in ks.wins.values() for _, ev in w.outputs]
        return Cht(rows)

    def holds_key(self, key: Hashable) -> bool:
        """Whether the host keeps state for group ``key`` (live events or
        open windows; a key with neither is dropped at a CTI): a caller
        keeping something per key (the graph's window operator, the key's
        columns) may forget it when no host holds the key."""
        if type(key) in NORMALIZED:  # every NaN one key, as the paths store it
            key = nan_free(key)
        keys = self._fast.keys if self._fast is not None else self.keys
        return key in keys

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
    with gc_paused():
        try:
            yield batch
        except Exception as exc:
            exc.outputs = batch.out  # type: ignore[attr-defined]
            exc.position = batch.position  # type: ignore[attr-defined]
            raise
        finally:
            if collecting:
                promote_young()


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
