"""A windowed stream: the window chosen, the UDMs to run over it next.

``stream.tumbling_window(size)`` (and the other window methods of
:class:`~udm.host.query.Stream`) return a :class:`WindowedStream`;
``aggregate`` (UDAs) or ``apply`` (a UDO) finish it into a
:class:`~udm.host.plan.WindowOp` node and a new stream of results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from udm.host.invoke import instantiate
from udm.host.plan import AggSpec, UdmCall, ValueArg, WindowOp
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.registry import resolve_udm
from udm.host.time import INFINITY, to_ticks
from udm.host.windows import WindowSpec
from udm.sdk.decorators import Function

if TYPE_CHECKING:
    from udm.host.query import Stream

__all__ = ["WindowedStream", "make_call", "multi_call"]


class WindowedStream:
    """A stream with a window: finish it with :meth:`aggregate` or :meth:`apply`."""

    def __init__(self, stream: Stream, window: WindowSpec) -> None:
        self._stream = stream
        self.window = window

    def __getattr__(self, name: str) -> Any:
        # only reached for what a windowed stream lacks: a second window,
        # where/select, to_cht, explain... say what comes first
        if name.startswith("_") or not callable(getattr(type(self._stream), name, None)):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        window = self.window

        def finish_the_window_first(*args: Any, **kwargs: Any) -> NoReturn:
            raise TypeError(
                f".{name}() on a windowed stream: finish the {window!r} first with "
                ".aggregate(...) (a UDA per window) or .apply(...) (a UDO per window); "
                f".{name}() then applies to the stream of results"
            )

        return finish_the_window_first

    def aggregate(
        self,
        udm: Any = None,
        /,
        value: ValueArg = None,
        *,
        input_clipping: InputClipping | str = InputClipping.NONE,
        output_policy: OutputPolicy | str | None = None,
        emit_empty: bool = False,
        watermark: Any = INFINITY,
        returns: Any = None,
        alias: str | None = None,
        partial: bool | None = None,
        **kwargs: Any,
    ) -> Stream:
        """Run a UDA on every window.

        ``aggregate(udm, value="temp", q=0.9)``: one UDA (name, class or
        instance); extra keywords are its arguments; the result column is
        ``alias`` or the UDA's name. ``aggregate(med=("stats.median", "temp"),
        avg=agg(Mean, "temp"))``: several UDAs on the same windows, one
        column per name (struct results as ``name_field``).

        Args:
            value: what the UDA receives per event: a column name, a list of
                columns (a dict), a function of the payload dict, or ``None``
                (the whole payload dict).
            input_clipping / output_policy / emit_empty / watermark: as in
                :func:`udm.host.evaluate`; ``watermark`` (a time) is needed
                for hopping/tumbling windows over events that never end.
            returns: the result's Spark type (DDL string such as ``"double"``)
                when the UDA's return annotation does not say.
            partial: partial aggregation of mergeable UDAs (default: on
                hopping and tumbling windows of mergeable, order-insensitive
                UDAs, chosen by the Spark planner from a sample of the
                input, see ``explain()``; snapshot and count windows only
                with ``partial=True``).
        """
        if udm is None:
            if not kwargs:
                raise TypeError("aggregate() needs a UDA, or name=(uda, value) keywords")
            if value is not None or alias is not None or returns is not None:
                raise TypeError(
                    "with name=(uda, value) keywords, give value/returns inside each entry"
                )
            calls = tuple(multi_call(name, spec) for name, spec in kwargs.items())
            multi = True
        else:
            entries = [k for k, v in kwargs.items() if isinstance(v, AggSpec)]
            if entries:
                raise TypeError(
                    f"aggregate({udm!r}, {entries[0]}=agg(...)): give one UDA with its "
                    "arguments, or only name=agg(...) / name=(uda, value) entries, not both; "
                    "for several results write every UDA as an entry"
                )
            calls = (make_call(alias, udm, value, returns, kwargs),)
            multi = False
        return self._op(
            "aggregate", calls, input_clipping, output_policy, emit_empty, watermark, partial, multi
        )

    def apply(
        self,
        udo: Any,
        /,
        value: ValueArg = None,
        *,
        input_clipping: InputClipping | str = InputClipping.NONE,
        output_policy: OutputPolicy | str | None = None,
        emit_empty: bool = False,
        watermark: Any = INFINITY,
        returns: Any = None,
        alias: str | None = None,
        **udm_args: Any,
    ) -> Stream:
        """Run a UDO on every window: each output payload is one output
        event (time-sensitive operators choose the lifetimes, subject to the
        output policy)."""
        call = make_call(alias, udo, value, returns, udm_args)
        return self._op(
            "operator", (call,), input_clipping, output_policy, emit_empty, watermark, False, False
        )

    def _op(
        self,
        kind: Literal["aggregate", "operator"],
        calls: tuple[UdmCall, ...],
        input_clipping: InputClipping | str,
        output_policy: OutputPolicy | str | None,
        emit_empty: bool,
        watermark: Any,
        partial: bool | None,
        multi: bool,
    ) -> Stream:
        for c in calls:
            if c.udm.kind != kind:
                verb = "aggregate" if c.udm.kind == "aggregate" else "apply"
                raise TypeError(f"{c.udm.name!r} is a {c.udm.flavor()}; use .{verb}() for it")
        names = [c.name for c in calls]
        if len(set(names)) != len(names):
            raise ValueError(f"result names must be distinct, got {names}")
        policies = {resolve_output_policy(output_policy, self.window, c.udm) for c in calls}
        if len(policies) != 1:
            raise ValueError(f"the aggregates resolve to different output policies {policies}")
        if not isinstance(emit_empty, bool):
            raise TypeError(f"emit_empty= is True or False, got {emit_empty!r}")
        if emit_empty and not self.window.is_grid:
            raise ValueError(
                f"emit_empty applies to hopping and tumbling windows only; {self.window!r} "
                "windows are defined by events and are never empty"
            )
        op = WindowOp(
            input=self._stream.plan,
            window=self.window,
            kind=kind,
            calls=calls,
            clipping=InputClipping.parse(input_clipping),
            policy=policies.pop(),
            emit_empty=emit_empty,
            watermark=to_ticks(watermark),
            partial=partial,
            multi=multi,
        )
        op.check_partial()  # refuses partial=True early
        return type(self._stream)(op)


def make_call(
    alias: str | None, udm: Any, value: ValueArg, returns: Any, args: Mapping[str, Any]
) -> UdmCall:
    """The :class:`UdmCall` of one aggregate or operator: the UDM resolved by
    name and created with ``args``, its result column named ``alias`` (default:
    the UDM's name); a UDF is refused with a hint."""
    resolved = resolve_udm(udm)
    if isinstance(resolved, Function):
        raise TypeError(
            f"{resolved.name!r} is a UDF (scalar function); use it in where()/select(), "
            "not as a window aggregate or operator"
        )
    instance = instantiate(resolved, dict(args) or None)
    if value is not None and not (isinstance(value, str) or callable(value)):
        shown = value
        try:
            value = tuple(value)
        except TypeError:
            value = None
        if value is None or not all(isinstance(v, str) for v in value):
            raise TypeError(
                f"value= takes a column name, a list of names or a function, got {shown!r}"
            )
    if alias is not None and (not isinstance(alias, str) or not alias):
        raise TypeError(f"alias= names the result column: a non-empty string, got {alias!r}")
    name = alias or (instance.name or type(instance).__name__).replace(".", "_")
    return UdmCall(name, instance, value, returns)


def multi_call(name: str, spec: Any) -> UdmCall:
    """The call of one ``name=...`` of a multi-aggregate: an :func:`agg`, a
    ``(uda, value, args)`` tuple, or a UDM alone."""
    if isinstance(spec, AggSpec):
        return make_call(name, spec.udm, spec.value, spec.returns, spec.args)
    if isinstance(spec, tuple):
        if not 1 <= len(spec) <= 3:
            raise TypeError(f"{name}=... takes (uda,), (uda, value) or (uda, value, args)")
        udm, value, args = (*spec, None, None)[:3]
        if args is not None and not isinstance(args, Mapping):
            raise TypeError(
                f"{name}=(uda, value, args): args is a dict of the UDA's arguments, got {args!r}"
            )
        return make_call(name, udm, value, None, args or {})
    return make_call(name, spec, None, None, {})
