"""Function decorators for the simple cases: a median is five lines.

``@aggregate`` and ``@operator`` turn a plain function into a UDA/UDO class
(non-incremental; time-sensitive with ``time_sensitive=True``). Extra keyword
parameters of the function become the UDM's arguments::

    @aggregate
    def quantile(values, q=0.5): ...

    quantile(q=0.9)          # an instance bound to q=0.9

``@function`` marks a scalar UDF for filters and projections.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, overload

from udm.sdk.base import (
    UDM_NAME_PATTERN,
    Aggregate,
    Operator,
    TimeSensitiveAggregate,
    TimeSensitiveOperator,
    Udm,
)
from udm.sdk.errors import UdmDefinitionError
from udm.sdk.properties import Properties

__all__ = ["Function", "aggregate", "function", "operator"]

_PROPERTY_NAMES = {
    "deterministic",
    "empty_preserving",
    "order_insensitive",
    "output_within_window",
    "time_bound",
}


def _make_udm_class(
    fn: Callable[..., Any],
    base: type[Udm],
    data_params: int,
    name: str | None,
    props: dict[str, Any],
) -> type[Udm]:
    if issubclass(base, Aggregate | TimeSensitiveAggregate):
        _check_decorated(
            fn,
            "@aggregate",
            name,
            "an aggregate returns one value per window; return it, or use @operator for "
            "zero or more outputs",
        )
    else:
        _check_decorated(fn, "@operator", name, None)  # an operator may yield its outputs
    unknown = set(props) - _PROPERTY_NAMES
    if unknown:
        raise UdmDefinitionError(
            f"unknown UDM properties {sorted(unknown)} for {fn.__qualname__}; "
            f"known: {sorted(_PROPERTY_NAMES)}"
        )
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < data_params:
        want = "payloads" if data_params == 1 else "events, window"
        raise UdmDefinitionError(
            f"{fn.__module__}.{fn.__qualname__} must take ({want}) as its first "
            f"{data_params} parameter(s); it takes {[p.name for p in positional]}"
        )
    option_params = params[data_params:]
    for p in option_params:
        if p.default is p.empty and p.kind is not p.VAR_KEYWORD:
            raise UdmDefinitionError(
                f"parameter {p.name!r} of {fn.__qualname__} needs a default value: "
                "UDM arguments beyond the data are optional keyword arguments"
            )

    def __init__(self: Any, **kwargs: Any) -> None:
        try:
            bound = sig.bind_partial(*([None] * data_params), **kwargs)
        except TypeError as exc:
            raise TypeError(f"bad arguments for UDM {self.name!r}: {exc}") from None
        bound.apply_defaults()
        self.args = {k: v for k, v in bound.arguments.items() if k in kwargs}

    if data_params == 1:

        def compute_result(self: Any, payloads: Any) -> Any:
            return fn(payloads, **self.args)

    else:

        def compute_result(self: Any, events: Any, window: Any) -> Any:  # type: ignore[misc]
            return fn(events, window, **self.args)

    def __repr__(self: Any) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"{fn.__name__}({args})"

    def __eq__(self: Any, other: object) -> bool:
        return type(self) is type(other) and self.args == other.args  # type: ignore[attr-defined]

    def __hash__(self: Any) -> int:
        return hash((type(self), tuple(sorted(self.args.items(), key=lambda kv: kv[0]))))

    namespace: dict[str, Any] = {
        "__init__": __init__,
        "compute_result": compute_result,
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__doc__": fn.__doc__,
        "__module__": fn.__module__,
        "__qualname__": fn.__qualname__,
        "__wrapped__": fn,
        "name": name or fn.__name__,
        "properties": Properties(**props),
    }
    return type(fn.__name__, (base,), namespace)


def _check_decorated(fn: Any, what: str, name: str | None, one_value: str | None) -> None:
    """Decorators wrap plain functions: a class is a UDM (or not) on its own,
    a name passed where the function goes is a common slip, a lambda has no
    name of its own, and the host calls the function and uses what it
    returns, so it is not async, nor a generator where one value is due
    (``one_value`` says why; None where yielding outputs is right)."""
    if isinstance(fn, type):
        raise UdmDefinitionError(
            f"{what} wraps a function, but {fn.__qualname__} is a class; a UDM class "
            "derives from a udm.sdk base class instead (and needs no decorator)"
        )
    if isinstance(fn, str):
        raise UdmDefinitionError(f"{what}({fn!r}): pass the name as a keyword, {what}(name={fn!r})")
    if not callable(fn) or not hasattr(fn, "__qualname__"):
        raise UdmDefinitionError(
            f"{what} wraps a function (def ...), got {type(fn).__name__} {fn!r}"
        )
    if name is None and fn.__name__ == "<lambda>":
        raise UdmDefinitionError(f"{what} on a lambda: give it a name with {what}(name=...)")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise UdmDefinitionError(
            f"{what} on {fn.__qualname__}: an async function; UDMs are plain functions"
        )
    if one_value is not None and inspect.isgeneratorfunction(fn):
        raise UdmDefinitionError(
            f"{what} on {fn.__qualname__}: a generator (it yields), but {one_value}"
        )


@overload
def aggregate(fn: Callable[..., Any], /) -> type[Any]: ...
@overload
def aggregate(
    *, time_sensitive: bool = False, name: str | None = None, **properties: Any
) -> Callable[[Callable[..., Any]], type[Any]]: ...
def aggregate(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    time_sensitive: bool = False,
    name: str | None = None,
    **properties: Any,
) -> Any:
    """Make a non-incremental UDA from a function.

    The function takes ``payloads`` (or ``events, window`` with
    ``time_sensitive=True``) and returns one value.

    Example:
        >>> import statistics
        >>> @aggregate
        ... def median(values):
        ...     return statistics.median(values)
        >>> median().compute_result([1, 5, 2, 8])
        3.5
    """

    def wrap(f: Callable[..., Any]) -> type[Udm]:
        base: type[Udm] = TimeSensitiveAggregate if time_sensitive else Aggregate
        return _make_udm_class(f, base, 2 if time_sensitive else 1, name, properties)

    return wrap(fn) if fn is not None else wrap


@overload
def operator(fn: Callable[..., Any], /) -> type[Any]: ...
@overload
def operator(
    *, time_sensitive: bool = False, name: str | None = None, **properties: Any
) -> Callable[[Callable[..., Any]], type[Any]]: ...
def operator(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    time_sensitive: bool = False,
    name: str | None = None,
    **properties: Any,
) -> Any:
    """Make a non-incremental UDO from a function returning an iterable of
    payloads (or of :class:`~udm.sdk.IntervalEvent` with ``time_sensitive=True``).

    Example:
        >>> @operator
        ... def top2(values):
        ...     return sorted(values, reverse=True)[:2]
        >>> list(top2().compute_result([4, 9, 1]))
        [9, 4]
    """

    def wrap(f: Callable[..., Any]) -> type[Udm]:
        base: type[Udm] = TimeSensitiveOperator if time_sensitive else Operator
        return _make_udm_class(f, base, 2 if time_sensitive else 1, name, properties)

    return wrap(fn) if fn is not None else wrap


class Function:
    """A user-defined scalar function (UDF), evaluated once per event in
    filters and projections. Calling it calls the wrapped function."""

    kind = "function"
    time_sensitive = False
    incremental = False

    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, deterministic: bool = True
    ) -> None:
        # a UDF returns its value (paper, section IV: "a method call")
        _check_decorated(fn, "@function", name, "a UDF returns one value per event; return it")
        where = f"@function on {fn.__qualname__}"
        if name is not None and (not isinstance(name, str) or not UDM_NAME_PATTERN.match(name)):
            raise UdmDefinitionError(
                f"{where}: name={name!r}; a UDF name is an identifier (letters, digits, "
                "underscores), or dotted identifiers for one used in-process"
            )
        if not isinstance(deterministic, bool):
            raise UdmDefinitionError(
                f"{where} declares deterministic={deterministic!r}; properties are True or False"
            )
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or fn.__name__
        self.properties = Properties(deterministic=deterministic).resolved(
            invertible=False, mergeable=False, output_within_window=False
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @classmethod
    def flavor(cls) -> str:
        """Always ``function``: a UDF runs per event, so listings and
        ``explain`` show no window flavor for it."""
        return "function"

    def __repr__(self) -> str:
        return f"<function UDF {self.name}>"


@overload
def function(fn: Callable[..., Any], /) -> Function: ...
@overload
def function(
    *, name: str | None = None, deterministic: bool = True
) -> Callable[[Callable[..., Any]], Function]: ...
def function(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    deterministic: bool = True,
) -> Any:
    """Mark a scalar function as a UDF.

    Example:
        >>> @function
        ... def fahrenheit(celsius):
        ...     return celsius * 9 / 5 + 32
        >>> fahrenheit(100)
        212.0
    """

    def wrap(f: Callable[..., Any]) -> Function:
        return Function(f, name=name, deterministic=deterministic)

    return wrap(fn) if fn is not None else wrap
