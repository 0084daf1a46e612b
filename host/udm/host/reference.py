"""The reference evaluator: the oracle for every other engine.

It takes a CHT (not a physical stream), a window specification, a UDM and
the clipping and output policies, and returns the output CHT by following
the paper's definitions literally: enumerate the windows, collect each
window's members by the belongs-to rule, clip, invoke the UDM from scratch,
timestamp the result. No indexes, no incremental state, no cleverness: if
another engine disagrees with this module, the other engine is wrong (or
this module is, and a hand-computed test should say so). The members are
found without asking every event about every window
(:mod:`udm.host.refmembers`: by bisection, or for a time-insensitive UDM as
slices of a key's events sorted by start), which the tests compare with
the literal belongs-to rule.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from typing import Any

from udm.host.cht import Cht
from udm.host.gcpause import gc_paused
from udm.host.invoke import (
    ValueFn,
    compute_payloads,
    compute_window,
    instantiate,
    make_value_fn,
)
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.refmembers import (
    EventColumns,
    assign_members,
    grid_windows,
    overlap_rule,
    window_payloads,
)
from udm.host.rows import NORMALIZED, nan_free, note_numpy_keys
from udm.host.time import INFINITY, to_ticks
from udm.host.windows import WindowSpec
from udm.sdk.base import Udm
from udm.sdk.decorators import Function
from udm.sdk.events import IntervalEvent

__all__ = [
    "EventColumns",
    "assign_members",
    "evaluate",
    "evaluate_by_key",
    "filter_events",
    "grid_windows",
    "project",
    "window_payloads",
]


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
    cht: Iterable[IntervalEvent[Any]] | EventColumns,
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
    :func:`evaluate_by_key`), so it is not checked again. ``cht`` may also
    be such events' :class:`EventColumns`, with their payloads mapped by
    ``value`` already (by :func:`key_columns`)."""
    instance = instantiate(udm, args)
    clipping = InputClipping.parse(input_clipping)
    policy = resolve_output_policy(output_policy, window, instance)
    value_fn = make_value_fn(value)
    events: list[IntervalEvent[Any]] = []
    if isinstance(cht, EventColumns):
        columns: EventColumns | None = cht
    elif checked:
        events = cht  # type: ignore[assignment]
    else:
        events = list(cht if isinstance(cht, Cht) else Cht(cht))  # checked lifetimes
    wm = to_ticks(watermark)
    if emit_empty and window.grid is None:  # grid windows alone may be empty
        raise ValueError(
            f"emit_empty applies to hopping and tumbling windows only; {window!r} windows "
            "are defined by events and are never empty"
        )
    if not isinstance(cht, EventColumns):
        # payloads mapped first, each once (not once per window it belongs to)
        columns = EventColumns.of(events, value_fn)
    if columns is None:
        # the mapping failed on an event: each window maps its own members,
        # so the failure is reported as the UDM failing on the first window
        # that holds it
        return Cht(
            _by_members(instance, window, events, wm, emit_empty, clipping, policy, value_fn)
        )
    if not instance.time_sensitive and overlap_rule(window):
        # a time-insensitive UDM sees its members' payloads alone: each
        # window's are a slice of the group's payloads in canonical order
        out: list[IntervalEvent[Any]] = []
        for w, payloads in window_payloads(window, columns.canonical(), wm, emit_empty):
            out.extend(compute_payloads(instance, w, payloads, policy))
        return Cht(out)
    mapped = columns.events()
    return Cht(_by_members(instance, window, mapped, wm, emit_empty, clipping, policy, None))


def _by_members(
    instance: Udm,
    window: WindowSpec,
    events: list[IntervalEvent[Any]],
    watermark: int,
    emit_empty: bool,
    clipping: InputClipping,
    policy: OutputPolicy,
    value_fn: ValueFn,
) -> list[IntervalEvent[Any]]:
    """The outputs of every window, each from its member events (found by
    :func:`assign_members`, clipped, mapped by ``value_fn`` and put in
    canonical order by :func:`compute_window`): any UDM, any window kind."""
    grid = window.grid
    if emit_empty and grid is not None:
        windows = grid_windows(grid, events, watermark)
    else:
        windows = window.windows(events, watermark)
    out: list[IntervalEvent[Any]] = []
    for w, found in zip(windows, assign_members(window, windows, events), strict=True):
        if found or emit_empty:
            out.extend(compute_window(instance, w, found, clipping, policy, value_fn))
    return out


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

    For a time-insensitive UDM under the overlap rule (every kind but the
    count windows) the input is read once, into each key's
    :class:`EventColumns` (:func:`key_columns`), and each key's windows are
    computed from those; otherwise, or when the columns cannot be read, the
    events are grouped and each group is evaluated as :func:`evaluate`
    does."""
    key_fn = make_value_fn(key, "key")
    assert key_fn is not None
    note_numpy_keys()  # a numpy NaN key is the one NaN key too
    plain = _plain_options(options)
    with gc_paused():
        events = list(cht)  # read once more if the columns cannot be
        if plain and _time_insensitive(udm) and overlap_rule(window):
            by_key = key_columns(events, key, options.get("value"))
            if by_key is not None:
                full = _full_options(options)
                return {k: _evaluate(columns, window, udm, **full) for k, columns in by_key.items()}
        groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
        # lifetimes checked here, in the input's order, when every event is
        # an IntervalEvent with start < end (what Cht would check, per group,
        # reading each key's events scattered over the input once more);
        # otherwise each group is checked as evaluate checks it, with the
        # same errors
        checked = True
        for e in events:
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
        if not checked or not plain:
            return {k: evaluate(group, window, udm, **options) for k, group in groups.items()}
        return {
            k: _evaluate(group, window, udm, checked=True, **_full_options(options))
            for k, group in groups.items()
        }


def key_columns(
    events: Iterable[IntervalEvent[Any]],
    key: str | Callable[[Any], Hashable],
    value: str | Callable[[Any], Any] | None,
) -> dict[Hashable, EventColumns] | None:
    """Each key's :class:`EventColumns`, in the input's order, read in one
    pass over ``events`` while each is in the cache: a key's events lie
    scattered among the other keys' (a thousand apart in a 1M-event input of
    1,000 keys), and every later read of them reached main memory (issue
    31). None when an event is not an :class:`IntervalEvent` with int times
    and ``start < end``, or its key or value cannot be read: the caller then
    groups the events themselves, which checks them and reports the
    failure as :func:`evaluate` does. A field is read by
    :func:`operator.itemgetter` (a C call), which returns what the query's
    field function (:func:`~udm.host.invoke.make_value_fn`) returns, and
    raises where it raises."""
    get_key = key if callable(key) else itemgetter(key)
    get_value = value if value is None or callable(value) else itemgetter(value)
    by_key: dict[Hashable, EventColumns] = {}
    try:
        for e in events:
            if type(e) is not IntervalEvent:
                return None
            payload, start, end = e.payload, e.start, e.end
            if type(start) is not int or type(end) is not int or not start < end:
                return None
            k = get_key(payload)
            if type(k) in NORMALIZED:  # every NaN one key (docs/concepts.md)
                k = nan_free(k)
            columns = by_key.get(k)
            if columns is None:
                columns = by_key[k] = EventColumns()
            columns.starts.append(start)
            columns.ends.append(end)
            columns.values.append(payload if get_value is None else get_value(payload))
        for columns in by_key.values():
            columns.compact()
    except Exception:
        return None
    return by_key


def _time_insensitive(udm: Any) -> bool:
    """Whether ``udm`` is a time-insensitive UDM (class or instance); False
    for anything else, which :func:`evaluate` refuses with its own error."""
    return (isinstance(udm, Udm) or (isinstance(udm, type) and issubclass(udm, Udm))) and not (
        udm.time_sensitive
    )


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
