"""UDM calls inside a plan: which UDM a window operation runs, on which
part of the payload, with which arguments, and how ``explain`` shows it.

A :class:`UdmCall` is what a :class:`~udm.host.plan.WindowOp` holds for
each result column; :func:`agg` is how a user asks for several at once.
The plan's other nodes hold user functions too (``where``, ``select``,
joins): :func:`describe_expr` shows any of them without importing pyspark.
:mod:`udm.host.plan` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from udm.host.invoke import ValueFn, make_value_fn
from udm.sdk.base import Udm
from udm.sdk.decorators import Function

__all__ = ["AggSpec", "UdmCall", "ValueArg", "agg", "describe_expr", "is_column"]

#: What a UDM reads of a payload: a column, several (a dict), a function
#: of the payload, or (``None``) the whole payload.
ValueArg = str | Sequence[str] | Callable[[Any], Any] | None


@dataclass(frozen=True)
class AggSpec:
    """One aggregate of a multi-aggregate call (see :func:`agg`)."""

    udm: Any
    value: ValueArg = None
    returns: Any = None
    args: Mapping[str, Any] = field(default_factory=dict)


def agg(udm: Any, value: ValueArg = None, *, returns: Any = None, **args: Any) -> AggSpec:
    """An aggregate for ``aggregate(name=agg(...), ...)``: the UDM (name,
    class or instance), its ``value`` mapping, result type and arguments."""
    return AggSpec(udm, value, returns, dict(args))


def _pick(columns: Sequence[str]) -> Callable[[Any], Any]:
    cols = list(columns)

    def pick(payload: Any) -> Any:
        try:
            return {c: payload[c] for c in cols}
        except KeyError as exc:
            raise KeyError(f"payload {payload!r} has no field {exc.args[0]!r}") from None

    return pick


@dataclass(frozen=True)
class UdmCall:
    """A resolved UDM invocation: output name, instance, input mapping."""

    name: str
    udm: Udm
    value: ValueArg
    returns: Any = None

    @property
    def value_fn(self) -> ValueFn:
        """What the UDM receives per event, as a function of the payload."""
        if self.value is None or isinstance(self.value, str) or callable(self.value):
            return make_value_fn(self.value)
        return _pick(self.value)

    def columns(self) -> list[str] | None:
        """Input columns the UDM reads (``None``: the whole payload)."""
        if isinstance(self.value, str):
            return [self.value]
        if self.value is None or callable(self.value):
            return None
        return list(self.value)

    def describe(self) -> str:
        """``median('temp', q=0.5) [flavor]``, for ``explain``."""
        if self.value is None:
            v = "payload"
        elif isinstance(self.value, str):
            v = repr(self.value)
        elif callable(self.value):
            v = getattr(self.value, "__name__", "fn")
        else:
            v = repr(list(self.value))
        args = _udm_arguments(self.udm)
        shown = "".join(f", {k}={a!r}" for k, a in args.items())
        return f"{self.udm.name}({v}{shown}) [{self.udm.flavor()}]"


def _udm_arguments(udm: Udm) -> dict[str, Any]:
    """The arguments a UDM was created with, for ``explain``: a decorated
    function's ``args``, else the instance's public attributes."""
    state = vars(udm) if hasattr(udm, "__dict__") else {}
    if isinstance(state.get("args"), dict):
        return dict(state["args"])
    return {k: a for k, a in state.items() if not k.startswith("_") and not callable(a)}


def describe_expr(expr: Any) -> str:
    """A UDF, Spark Column or SQL string as ``explain`` shows it."""
    if isinstance(expr, str):
        return expr
    if isinstance(expr, Function):
        return f"udf {expr.name}"
    if callable(expr) and not is_column(expr):
        return f"udf {getattr(expr, '__name__', type(expr).__name__)}"
    return str(expr)


def is_column(expr: Any) -> bool:
    """Whether ``expr`` is a Spark Column (checked by name: no pyspark import)."""
    return type(expr).__name__ == "Column" and type(expr).__module__.startswith("pyspark")
