"""Calling UDMs of every flavor uniformly, shared by all engines.

A window's events reach a UDM in canonical order (see :func:`prepare`),
so the result depends only on the CHT, never on arrival order. Results are
timestamped by the output policy; any exception from the UDM, or a result
of the wrong shape, becomes a
:class:`~udm.host.errors.UdmInvocationError` naming the UDM and the window.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Sequence, ValuesView
from typing import Any

from udm.host.errors import UdmInvocationError
from udm.host.policies import InputClipping, OutputPolicy, stamp
from udm.host.time import INFINITY, MIN_TIME, TimeConversionError, to_ticks
from udm.host.windows import describe_window
from udm.sdk.base import Udm
from udm.sdk.decorators import Function
from udm.sdk.events import IntervalEvent, WindowDescriptor
from udm.sdk.payloads import payload_key

__all__ = [
    "ValueFn",
    "canonical_order",
    "compute_payloads",
    "compute_window",
    "detached",
    "instantiate",
    "make_value_fn",
    "payload_result",
    "udm_label",
]

ValueFn = Callable[[Any], Any] | None

#: types whose values cannot change: an output may share them with a
#: state, and they are already plain Python results
PLAIN_TYPES = frozenset({int, float, complex, bool, str, bytes, type(None)})


#: results read lazily: a generator, an iterator, a dict view
_LAZY = (Iterator, KeysView, ValuesView, ItemsView)


def lazy_result_problem(result: Any, operator: bool) -> str | None:
    """Why a UDM's result cannot be used, for results that are not values
    yet: a coroutine (an ``async`` method), or, from an aggregate, a
    generator or view (an aggregate returns one value per window)."""
    kind = type(result)
    if kind in PLAIN_TYPES or kind is list or kind is dict:  # the usual results, at once
        return None
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # no "never awaited" warning on top of the error
        return (
            f"the UDM returned {type(result).__name__!r} object: its methods must be plain "
            "functions, not async ones"
        )
    if not operator and isinstance(result, _LAZY):
        return (
            f"an aggregate returns one value per window, not a {type(result).__name__!r} "
            "object; return the value itself (a list if the value is a list), or write "
            "an operator for zero or more outputs"
        )
    return None


def detached(result: Any, operator: bool = False) -> Any:
    """An incremental UDM's result, deep-copied unless it is immutable.

    ``result(state)`` may return the state itself or part of it (``return
    state`` for a list of items); the host keeps that state and updates it,
    so an output it has emitted, and the copy it keeps to retract later,
    would change with it. An operator's lazy result (a generator over the
    state, ``state.keys()``) is read at once, while the state is as it is."""
    kind = type(result)
    if kind in PLAIN_TYPES:
        return result
    problem = lazy_result_problem(result, operator)
    if problem is not None:
        raise TypeError(problem)
    if isinstance(result, _LAZY):
        result = list(result)
        kind = list
    if kind is tuple or kind is list:
        if all(type(v) in PLAIN_TYPES for v in result):
            return result if kind is tuple else list(result)
    elif kind is dict and all(type(v) in PLAIN_TYPES for v in result.values()):
        return dict(result)
    return copy.deepcopy(result)


def canonical_key(e: IntervalEvent[Any]) -> tuple[Any, ...]:
    """The sort key of the canonical order (start, end, payload), so a UDM sees
    the same input order whatever the arrival order."""
    return (e.start, e.end, payload_key(e.payload))


def canonical_order(events: Iterable[IntervalEvent[Any]]) -> list[IntervalEvent[Any]]:
    """Events by start, then end, then payload: the order UDMs see."""
    return sorted(events, key=canonical_key)


def instantiate(udm: Udm | type[Udm], args: dict[str, Any] | None = None) -> Udm:
    """A UDM instance from an instance or a class (called with ``args``)."""
    if isinstance(udm, type):
        if not issubclass(udm, Udm):
            raise TypeError(
                f"{udm.__qualname__} is not a UDM; derive it from a udm.sdk base class "
                "or use @aggregate / @operator"
            )
        try:
            return udm(**(args or {}))
        except TypeError as exc:
            given = f"arguments {args}" if args else "no arguments"
            raise TypeError(f"cannot create UDM {udm.name!r} with {given}: {exc}") from None
    if isinstance(udm, Function):
        raise TypeError(
            f"{udm.name!r} is a UDF (scalar function); use it in a filter or projection, "
            "not as a window aggregate or operator"
        )
    if not isinstance(udm, Udm):
        raise TypeError(
            f"{udm!r} is not a UDM; pass a udm.sdk Aggregate/Operator class or instance"
        )
    if args:
        raise TypeError(f"arguments {args} given for an already constructed UDM {udm!r}")
    return udm


def udm_label(udm: Udm) -> str:
    """How errors name a UDM: its registered name, else its class."""
    return udm.name or type(udm).__qualname__


def key_failed(element: Any, exc: Exception) -> ValueError:
    """The error for an insert whose group key (``key=``) cannot be
    computed or hashed, the same on every path of the host."""
    return ValueError(f"cannot compute the group key of {element!r}: {type(exc).__name__}: {exc}")


def make_value_fn(value: str | Callable[[Any], Any] | None, argument: str = "value") -> ValueFn:
    """The mapping from an input payload to what the UDM receives: a field
    name picks that field of mapping payloads, a callable is applied.
    ``argument`` names the query argument the field came from, for errors."""
    if value is None or callable(value):
        return value
    field = value

    def pick(payload: Any) -> Any:
        try:
            return payload[field]
        except (KeyError, TypeError, IndexError):
            raise KeyError(
                f"payload {payload!r} has no field {field!r}; "
                f"check the {argument}= argument of the query"
            ) from None

    return pick


def map_payload(event: IntervalEvent[Any], value_fn: ValueFn) -> IntervalEvent[Any]:
    """``event`` with the payload the UDM reads (``value_fn`` of the payload;
    the event itself without one)."""
    if value_fn is None:
        return event
    return IntervalEvent(event.start, event.end, value_fn(event.payload))


def prepare(
    members: Iterable[IntervalEvent[Any]],
    window: WindowDescriptor,
    clipping: InputClipping,
    value_fn: ValueFn,
    time_sensitive: bool,
    ordered: bool = False,
) -> list[IntervalEvent[Any]]:
    """Clip and map a window's member events, in canonical order.

    Time-sensitive UDMs get events ordered by their clipped (start, end),
    then payload; time-insensitive UDMs, which see no lifetimes, get them by
    start time, then payload. Either way the order depends only on what the
    UDM can see, so a change that does not affect a window (an end moving
    outside it) never reorders its input. Clipping only affects lifetimes,
    so time-insensitive UDMs get unclipped events: their order (by original
    start) must not depend on the clipping policy.
    """
    if time_sensitive:
        events = [map_payload(clipping.clip(e, window), value_fn) for e in members]
        events.sort(key=canonical_key)
    else:
        events = [map_payload(e, value_fn) for e in members] if value_fn else list(members)
        if not ordered:  # else in canonical order already (the reference sorts once)
            events.sort(key=lambda e: (e.start, payload_key(e.payload)))
    return events


def raw_result(udm: Udm, window: WindowDescriptor, events: Sequence[IntervalEvent[Any]]) -> Any:
    """Invoke the UDM on prepared events, whatever its flavor."""
    u: Any = udm
    if udm.incremental and udm.time_sensitive:
        state = u.initial_state()
        for e in events:
            state = u.add(state, e, window)
        return u.result(state, window)
    if udm.time_sensitive:
        return u.compute_result(list(events), window)
    return payload_result(udm, [e.payload for e in events])


def payload_result(udm: Udm, payloads: list[Any]) -> Any:
    """Invoke a time-insensitive UDM on a window's payloads (mapped, in
    canonical order): what :func:`raw_result` does with its events'
    payloads. The list is the UDM's own (it may sort it in place)."""
    u: Any = udm
    if udm.incremental:
        state = u.initial_state()
        for payload in payloads:
            state = u.add(state, payload)
        return u.result(state)
    return u.compute_result(payloads)


def stamp_result(
    udm: Udm, window: WindowDescriptor, result: Any, policy: OutputPolicy
) -> list[IntervalEvent[Any]]:
    """Timestamp a UDM result: one event for an aggregate, one per item for
    an operator. Raises ``ValueError``/``TypeError`` on malformed results."""
    problem = lazy_result_problem(result, udm.kind == "operator")
    if problem is not None:
        raise TypeError(problem)
    if udm.kind == "aggregate":
        return [stamp(policy, window, None, result)]
    if result is None:
        raise TypeError("an operator must return an iterable of outputs, not None")
    if isinstance(result, str | bytes | dict):
        raise TypeError(
            f"an operator must return an iterable of outputs, not a single {type(result).__name__}"
        )
    out = []
    for item in result:
        if udm.time_sensitive:
            if not isinstance(item, IntervalEvent):
                raise TypeError(
                    f"a time-sensitive operator must return IntervalEvent objects, got {item!r}"
                )
            start, end = item.start, item.end
            if not (
                type(start) is int and type(end) is int and MIN_TIME <= start <= end <= INFINITY
            ):
                item = _in_ticks(item)
            if item.end <= item.start:
                raise ValueError(f"output event [{item.start}, {item.end}) has end not after start")
            out.append(stamp(policy, window, item, item.payload))
        else:
            out.append(stamp(policy, window, None, item))
    return out


def _in_ticks(item: IntervalEvent[Any]) -> IntervalEvent[Any]:
    """A time-sensitive operator's output event with int tick times, as
    :func:`~udm.host.time.to_ticks` converts them (a whole float, a numpy
    integer, a datetime), or a :class:`~udm.host.time.TimeConversionError`
    naming the event: the reference evaluator returned ``0.5`` as it came
    and the host failed building its output element, naming neither the
    UDM nor the window (the callers wrap this error in one that does)."""
    try:
        return IntervalEvent(to_ticks(item.start), to_ticks(item.end), item.payload)
    except TimeConversionError as exc:
        raise TimeConversionError(
            f"output event [{item.start!r}, {item.end!r}) {item.payload!r}: {exc}"
        ) from None


def compute_window(
    udm: Udm,
    window: WindowDescriptor,
    members: Sequence[IntervalEvent[Any]],
    clipping: InputClipping,
    policy: OutputPolicy,
    value_fn: ValueFn = None,
    ordered: bool = False,
) -> list[IntervalEvent[Any]]:
    """The output events of one window, computed from scratch. ``ordered``:
    the members of a time-insensitive UDM come in canonical order (start,
    then payload) already, so they are not sorted again."""
    try:
        events = prepare(members, window, clipping, value_fn, udm.time_sensitive, ordered)
        return stamp_result(udm, window, raw_result(udm, window, events), policy)
    except Exception as exc:
        raise window_failed(udm, window, exc) from exc


def compute_payloads(
    udm: Udm, window: WindowDescriptor, payloads: list[Any], policy: OutputPolicy
) -> list[IntervalEvent[Any]]:
    """:func:`compute_window` for a time-insensitive UDM given its window's
    payloads, mapped and in canonical order already (the reference
    evaluator takes them as a slice of a key's payloads): the same result,
    timestamps and errors, with no event object per member."""
    try:
        return stamp_result(udm, window, payload_result(udm, payloads), policy)
    except Exception as exc:
        raise window_failed(udm, window, exc) from exc


def window_failed(udm: Udm, window: WindowDescriptor, exc: Exception) -> UdmInvocationError:
    """The error for a UDM (or its value mapping, or its result) failing on
    ``window``: it names the UDM and the window."""
    return UdmInvocationError(
        udm_label(udm), describe_window(window), f"{type(exc).__name__}: {exc}"
    )
