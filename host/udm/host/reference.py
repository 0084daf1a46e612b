"""The reference evaluator: the oracle for every other engine.

It takes a CHT (not a physical stream), a window specification, a UDM and
the clipping and output policies, and returns the output CHT by following
the paper's definitions literally: enumerate the windows, collect each
window's members by the belongs-to rule, clip, invoke the UDM from scratch,
timestamp the result. No indexes, no incremental state, no cleverness: if
another engine disagrees with this module, the other engine is wrong (or
this module is, and a hand-computed test should say so).
"""

from __future__ import annotations

import inspect
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from itertools import islice
from operator import ge
from typing import Any

from udm.host.cht import Cht
from udm.host.gcpause import gc_paused
from udm.host.invoke import compute_window, instantiate, make_value_fn
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.rows import NORMALIZED, nan_free, note_numpy_keys
from udm.host.time import INFINITY, to_ticks
from udm.host.windows import HoppingWindow, WindowSpec
from udm.sdk.base import Udm
from udm.sdk.decorators import Function
from udm.sdk.events import IntervalEvent, WindowDescriptor
from udm.sdk.payloads import payload_key

__all__ = [
    "assign_members",
    "evaluate",
    "evaluate_by_key",
    "filter_events",
    "grid_windows",
    "project",
    "sliced_members",
]


def grid_windows(
    window: HoppingWindow, events: Iterable[IntervalEvent[Any]], watermark: int
) -> list[WindowDescriptor]:
    """All grid windows from the first non-empty one to the last one that
    ends by the watermark (or the last non-empty one when the watermark is
    infinite): the windows ``emit_empty`` runs the UDM on."""
    nonempty = window.windows(list(events), watermark)
    if not nonempty:
        return []
    first = window.last_begun(nonempty[0].start)
    last = window.last_begun(nonempty[-1].start)
    if watermark < INFINITY:
        last = max(window.last_index_before(watermark), last)
    return [window.window_at(k) for k in range(first, last + 1)]


def evaluate(
    cht: Iterable[IntervalEvent[Any]],
    window: WindowSpec,
    udm: Udm | type[Udm],
    *,
    input_clipping: InputClipping | str = InputClipping.NONE,
    output_policy: OutputPolicy | str | None = None,
    value: str | Callable[[Any], Any] | None = None,
    watermark: Any = INFINITY,
    emit_empty: bool = False,
    args: dict[str, Any] | None = None,
) -> Cht:
    """The output CHT of a windowed UDM over ``cht``.

    Args:
        cht: the input events (a :class:`Cht` or any iterable of events).
        window: the window specification.
        udm: a UDM instance or class (classes are created with ``args``).
        input_clipping: ``none`` (default), ``left``, ``right`` or ``full``.
        output_policy: see :class:`OutputPolicy`; ``None`` takes the default
            for the window kind and UDM.
        value: a payload field name or function mapping payloads to what the
            UDM receives (the paper's mapping expression).
        watermark: only windows ending at or before it are output, as after
            a final CTI at that time; the default (infinity) outputs every
            window, as at the end of a stream.
        emit_empty: also run the UDM on empty hopping/tumbling windows
            between the first non-empty window and the watermark.

    The cyclic garbage collector is paused meanwhile (:func:`gc_paused`):
    its full collections, triggered by the outputs piling up, would scan
    the caller's whole input each time and make the time grow faster than
    the data.
    """
    with gc_paused():
        return _evaluate(
            cht,
            window,
            udm,
            input_clipping=input_clipping,
            output_policy=output_policy,
            value=value,
            watermark=watermark,
            emit_empty=emit_empty,
            args=args,
        )


def _evaluate(
    cht: Iterable[IntervalEvent[Any]],
    window: WindowSpec,
    udm: Udm | type[Udm],
    *,
    input_clipping: InputClipping | str,
    output_policy: OutputPolicy | str | None,
    value: str | Callable[[Any], Any] | None,
    watermark: Any,
    emit_empty: bool,
    args: dict[str, Any] | None,
    checked: bool = False,
) -> Cht:
    """:func:`evaluate`, the collector paused. ``checked``: ``cht`` is a
    list of :class:`IntervalEvent` whose lifetimes were checked already (by
    :func:`evaluate_by_key`), so it is not checked again."""
    instance = instantiate(udm, args)
    clipping = InputClipping.parse(input_clipping)
    policy = resolve_output_policy(output_policy, window, instance)
    value_fn = make_value_fn(value)
    if checked:
        events: list[IntervalEvent[Any]] = cht  # type: ignore[assignment]
    else:
        events = list(cht if isinstance(cht, Cht) else Cht(cht))  # checked lifetimes
    wm = to_ticks(watermark)
    # payloads mapped first, each once (not once per window it belongs to):
    # every later pass reads the mapped events, allocated together, rather
    # than the caller's, which may lie scattered over a large input (one
    # key's events among a million): what is read more than once is small
    mapped = _mapped(events, value_fn)
    if mapped is not None:
        events, value_fn = mapped, None
    if emit_empty:
        grid = window.grid  # grid windows alone may be empty
        if grid is None:
            raise ValueError(
                f"emit_empty applies to hopping and tumbling windows only; {window!r} windows "
                "are defined by events and are never empty"
            )
        windows = grid_windows(grid, events, wm)
    else:
        windows = window.windows(events, wm)
    ordered = False
    if mapped is not None and not instance.time_sensitive:
        # a time-insensitive UDM's canonical order (start, then payload) put
        # on the events once, so every window's members come in it (a
        # subsequence of a stable sort is in the order its own stable sort
        # would give): the cost is the memberships, not memberships x log.
        # Events already in strictly increasing start order (the usual
        # input) are in it: no sort, and no payload read for one
        starts = [e.start for e in events]
        if any(map(ge, starts, islice(starts, 1, None))):
            events.sort(key=_canonical_start)
        ordered = True
    if ordered:
        members: Iterable[list[IntervalEvent[Any]]] = sliced_members(window, windows, events)
    else:
        members = assign_members(window, windows, events)
    out: list[IntervalEvent[Any]] = []
    for w, found in zip(windows, members, strict=True):
        if not found and not emit_empty:
            continue
        out.extend(compute_window(instance, w, found, clipping, policy, value_fn, ordered=ordered))
    return Cht(out)


def _canonical_start(e: IntervalEvent[Any]) -> tuple[Any, ...]:
    """The order time-insensitive UDMs receive a window's members in."""
    return (e.start, payload_key(e.payload))


def _mapped(
    events: Sequence[IntervalEvent[Any]], value_fn: Callable[[Any], Any] | None
) -> list[IntervalEvent[Any]] | None:
    """The events with their payloads mapped by ``value_fn``, or None when
    it fails on one: each window then maps its own members, so the failure
    is reported as the UDM failing on the first window that holds it."""
    if value_fn is None:
        return list(events)
    try:
        return [IntervalEvent(e.start, e.end, value_fn(e.payload)) for e in events]
    except Exception:
        return None


def assign_members(
    window: WindowSpec, windows: Sequence[WindowDescriptor], events: Sequence[IntervalEvent[Any]]
) -> list[list[IntervalEvent[Any]]]:
    """Each window's members (``window.belongs``), in the order of ``events``.

    Asking every event about every window costs windows x events; instead
    each event is offered only the windows it can belong to, found by
    bisection: every window kind's windows, listed by start, also have
    increasing ends, and an event belongs to a window only if the window
    starts before it ends (count by start: at or before its start) and ends
    after it starts (count by end: at or after its end). The belongs-to rule
    still decides, so the cost is the memberships plus a log per event.
    """
    starts = [w.start for w in windows]
    ends = [w.end for w in windows]
    members: list[list[IntervalEvent[Any]]] = [[] for _ in windows]
    belongs = window.belongs
    touching = window.touching
    if _overlap_rule(window):
        # the touching windows are exactly the overlapping ones: no window
        # needs asking
        k0 = _grid_origin(window, windows)
        if k0 is not None:  # consecutive grid windows: positions are indexes
            index_range = window.grid.index_range  # type: ignore[union-attr]
            n = len(windows)
            for e in events:
                lo, hi = index_range(e.start, e.end)
                for i in range(max(lo - k0, 0), min(hi - k0 + 1, n)):
                    members[i].append(e)
            return members
        for e in events:
            lo, hi = touching(starts, ends, e.start, e.end)
            for i in range(lo, hi):
                members[i].append(e)
        return members
    for e in events:
        lo, hi = touching(starts, ends, e.start, e.end)
        for i in range(lo, hi):
            if belongs(e, windows[i]):
                members[i].append(e)
    return members


def sliced_members(
    window: WindowSpec, windows: Sequence[WindowDescriptor], events: Sequence[IntervalEvent[Any]]
) -> Iterator[list[IntervalEvent[Any]]]:
    """:func:`assign_members` of ``events`` sorted by start, one window's
    members at a time: under the overlap rule a window's members are the
    events starting in it, or at most the longest lifetime before it, that
    end after it starts: a slice of ``events`` (two bisections), filtered
    by end unless every event is a point. No member lists are built for
    all windows at once, and no event is visited once per window it
    belongs to before its windows are computed. Other rules, and lifetimes
    longer than the shortest window (the slices would hold many events
    that are not members), take :func:`assign_members`."""
    if not windows or not events or not _overlap_rule(window):
        yield from assign_members(window, windows, events)
        return
    starts = [e.start for e in events]
    longest = max(e.end - e.start for e in events)
    if longest > min(w.end - w.start for w in windows):
        yield from assign_members(window, windows, events)
        return
    items = list(events)
    for w in windows:
        lo = bisect_left(starts, w.start - longest + 1)
        chosen = items[lo : bisect_left(starts, w.end)]
        if longest > 1:  # points starting in it end after it starts
            start = w.start
            chosen = [e for e in chosen if e.end > start]
        yield chosen


def _grid_origin(window: WindowSpec, windows: Sequence[WindowDescriptor]) -> int | None:
    """The index of the first of ``windows`` when they are consecutive
    windows of a hopping or tumbling grid (the usual case): an event's
    windows are then found by its index range, not by two bisections whose
    cost grows with the windows (a tenth of the time at a thousand windows
    a key). None otherwise (a grid kind of its own, a gap)."""
    grid = window.grid
    if not windows or grid is None or grid is not window:
        return None  # not a grid, or its windows are not the grid's own
    kind = type(grid)
    if kind.index_range is not HoppingWindow.index_range:
        return None
    if kind.window_at is not HoppingWindow.window_at:
        return None
    first: int = grid.last_begun(windows[0].start)
    if windows[0] != grid.window_at(first):
        return None
    start, hop = windows[0].start, grid.hop
    if [w.start for w in windows] != list(range(start, start + len(windows) * hop, hop)):
        return None
    if any(w.end - w.start != grid.size for w in windows):
        return None
    return first


def _overlap_rule(window: WindowSpec) -> bool:
    """Whether ``window`` keeps the default membership rule, overlap, with
    the default :meth:`~udm.host.windows.WindowSpec.touching`: then every
    window ``touching`` finds holds the event (it finds those starting
    before the event ends and ending after it starts)."""
    kind = type(window)
    return (
        kind.belongs is WindowSpec.belongs
        and kind.holds is WindowSpec.holds
        and kind.touching is WindowSpec.touching
    )


def evaluate_by_key(
    cht: Iterable[IntervalEvent[Any]],
    key: str | Callable[[Any], Hashable],
    window: WindowSpec,
    udm: Udm | type[Udm],
    **options: Any,
) -> dict[Hashable, Cht]:
    """:func:`evaluate` applied to each group of events with the same key
    (a payload field name or a function of the payload): group-and-apply.
    The collector is paused for the whole call (see :func:`evaluate`).

    (Mapping ``value`` while grouping, in the input's order, was tried and
    measured slower at 1M events: the mapped events of one key then lie
    scattered over the whole batch, and every phase of :func:`evaluate`
    reads them; mapped per group they are allocated together.)"""
    key_fn = make_value_fn(key, "key")
    assert key_fn is not None
    note_numpy_keys()  # a numpy NaN key is the one NaN key too
    with gc_paused():
        groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
        # lifetimes checked here, in the input's order, when every event is
        # an IntervalEvent with start < end (what Cht would check, per group,
        # reading each key's events scattered over the input once more);
        # otherwise each group is checked as evaluate checks it, with the
        # same errors
        checked = True
        for e in cht:
            k = key_fn(e.payload)
            if type(k) in NORMALIZED:  # every NaN one key (docs/concepts.md)
                k = nan_free(k)
            groups.setdefault(k, []).append(e)
            if checked and not (
                type(e) is IntervalEvent
                and type(e.start) is int
                and type(e.end) is int
                and e.start < e.end
            ):
                checked = False  # as Cht checks it (int tick times, start < end)
        if not checked or not _plain_options(options):
            return {k: evaluate(events, window, udm, **options) for k, events in groups.items()}
        return {
            k: _evaluate(events, window, udm, checked=True, **_full_options(options))
            for k, events in groups.items()
        }


def _plain_options(options: dict[str, Any]) -> bool:
    """Whether ``options`` are keyword arguments :func:`evaluate` takes (so
    :func:`evaluate_by_key` may call :func:`_evaluate` directly; otherwise
    :func:`evaluate` raises its own TypeError)."""
    return set(options) <= set(_DEFAULTS)


def _full_options(options: dict[str, Any]) -> dict[str, Any]:
    return {**_DEFAULTS, **options}


#: :func:`evaluate`'s keyword arguments and their defaults
_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(evaluate).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}


def project(cht: Iterable[IntervalEvent[Any]], fn: Function | Callable[[Any], Any]) -> Cht:
    """A span-based projection: each event's payload mapped by a UDF, the
    lifetime unchanged."""
    return Cht(IntervalEvent(e.start, e.end, fn(e.payload)) for e in cht)


def filter_events(
    cht: Iterable[IntervalEvent[Any]], predicate: Function | Callable[[Any], Any]
) -> Cht:
    """A span-based filter: the events whose payload satisfies a UDF."""
    return Cht(e for e in cht if predicate(e.payload))
