"""The payload columns of a plan's output, and their Arrow types as far as
the plan knows them, without running it.

:func:`udm.host.tables.to_arrow` names its columns after the output rows'
payloads; an output with no rows (every input row dropped, or no input)
has none, so ``to_pandas()``/``to_arrow()`` (and ``udm-cli run --engine
local``, which writes ``to_arrow()``) lost the key and result columns that
``to_dataframe()`` always has. This module gives them: the key columns
typed as the source table typed them, a result column typed from its
``returns=`` or the UDM's return annotation, ``null`` where nothing says.
pyarrow is imported only when called.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from collections.abc import Callable
from typing import Any

from udm.host.algebra import joined_columns
from udm.host.plan import (
    JoinNode,
    PlanNode,
    SelectNode,
    Source,
    UdmCall,
    UnionNode,
    WindowOp,
    columns_kept_from,
)
from udm.host.rows import returns_is_struct
from udm.sdk.events import is_time

__all__ = ["known_columns"]

#: Arrow types of plain annotations and of the simple Spark DDL names a
#: ``returns=`` may give, by name (pyarrow constructors)
_PLAIN: dict[Any, str] = {
    float: "float64",
    int: "int64",
    bool: "bool_",
    str: "string",
    bytes: "binary",
    dt.date: "date32",
    "double": "float64",
    "float": "float32",
    "bigint": "int64",
    "long": "int64",
    "int": "int32",
    "integer": "int32",
    "smallint": "int16",
    "tinyint": "int8",
    "string": "string",
    "boolean": "bool_",
    "binary": "binary",
    "date": "date32",
}


def known_columns(plan: PlanNode, times: Any) -> dict[str, Any] | None:
    """The output columns of ``plan`` other than ``start``/``end``, in order,
    each with its Arrow type (``pa.null()`` when the plan does not know it);
    ``times``: the Arrow type of times (for ``Ticks`` results). None for a
    node this module does not know (a plugin's), whose output then has only
    the columns its rows show."""
    import pyarrow as pa

    step: Callable[[Any], dict[str, Any] | None] = lambda n: known_columns(n, times)  # noqa: E731
    if isinstance(plan, Source):
        if plan.rows is None:
            return None
        seen = dict.fromkeys([*plan.columns, *(c for _, _, p in plan.rows for c in p)])
        typed = dict(plan.types)
        return {c: typed.get(c, pa.null()) for c in [*typed, *seen]}
    kept = columns_kept_from(plan)
    if kept is not None:
        return step(kept)
    if isinstance(plan, UnionNode):
        parts = [step(p) for p in plan.parts]
        if any(p is None for p in parts):
            return None
        merged: dict[str, Any] = {}
        for part in parts:
            assert part is not None
            for c, t in part.items():
                merged[c] = t if merged.get(c, t) == t else pa.null()
        return merged
    if isinstance(plan, JoinNode):
        return _join(plan, step(plan.left), step(plan.right), times)
    if isinstance(plan, SelectNode):
        given = step(plan.input) or {}
        names = [*plan.input.keys(), *(c for c in plan.columns if isinstance(c, str))]
        out = {c: given.get(c, pa.null()) for c in names}
        out.update({n: _arrow_type(r, times) for n, _, r in plan.named})
        return out
    if isinstance(plan, WindowOp):
        given = step(plan.input) or {}
        keys = plan.input.keys()  # the group keys (a method, not a dict's)
        out = {k: given.get(k, pa.null()) for k in keys}
        for call in plan.calls:
            out.update(_results(plan, call, times))
        return out
    return None


def _join(
    plan: JoinNode, left: dict[str, Any] | None, right: dict[str, Any] | None, times: Any
) -> dict[str, Any] | None:
    """A join's columns: without ``select=`` as every engine names them (a
    side's column typed as that side has it); with one, the ``on`` columns
    and the fields of the ``TypedDict`` or dataclass its function declares
    it returns (the ``on`` columns alone when it declares none: the rows
    say the rest)."""
    import pyarrow as pa

    if left is None or right is None:
        return None
    on = {c: left.get(c, pa.null()) for c in plan.on}
    if plan.select is not None:
        try:
            ann = typing.get_type_hints(plan.select, include_extras=True).get("return")
        except Exception:  # hints naming what cannot be imported here
            return on
        hints = _record_hints(ann)
        if hints is None:
            return on
        return {**on, **{f: _arrow_type(h, times) for f, h in hints.items() if f not in on}}
    names = joined_columns(list(left), list(right), plan.on, plan.suffixes, plan.describe())
    clash = (set(left) & set(right)) - set(plan.on)
    typed: dict[str, Any] = dict(on)
    for side, suffix in ((left, plan.suffixes[0]), (right, plan.suffixes[1])):
        for c, t in side.items():
            if c not in plan.on:
                typed[c + suffix if c in clash else c] = t
    return {c: typed.get(c, pa.null()) for c in names}


def _results(op: WindowOp, call: UdmCall, times: Any) -> dict[str, Any]:
    """The columns of one call's results: one, or a declared record's
    fields (prefixed by the call's name in ``aggregate(name=...)``)."""
    if call.returns is not None:
        return {call.name: _arrow_type(call.returns, times)}
    ann = _declared(call, op.kind == "operator")
    hints = _record_hints(ann)
    if hints is None or returns_is_struct(call.returns) is False:
        return {call.name: _arrow_type(ann, times)}
    return {
        (f"{call.name}_{f}" if op.multi else f): _arrow_type(h, times) for f, h in hints.items()
    }


def _declared(call: UdmCall, operator: bool) -> Any:
    """The annotation of one result of the call's UDM: an aggregate's return,
    or the payload of an operator's output events."""
    cls = type(call.udm)
    method = "result" if call.udm.incremental else "compute_result"
    target = getattr(cls, "__wrapped__", None) or getattr(cls, method, None)
    target = getattr(target, "__wrapped__", target)
    try:
        ann = typing.get_type_hints(target, include_extras=True).get("return")
    except Exception:
        return None
    while operator and typing.get_origin(ann) not in (None, typing.Annotated):
        args = typing.get_args(ann)
        if not args:
            return None
        ann = args[0]
    return ann


def _record_hints(ann: Any) -> dict[str, Any] | None:
    """A TypedDict's or dataclass's field annotations, else None."""
    record = typing.is_typeddict(ann) or (isinstance(ann, type) and dataclasses.is_dataclass(ann))
    if not record:
        return None
    try:
        return typing.get_type_hints(ann, include_extras=True)
    except Exception:
        return None


def _arrow_type(ann: Any, times: Any) -> Any:
    """The Arrow type of an annotation or a simple ``returns=`` name;
    ``null`` when it does not say (``Any``, a union of types, a record)."""
    import pyarrow as pa

    if is_time(ann):
        return times
    if typing.get_origin(ann) is typing.Annotated:
        return _arrow_type(typing.get_args(ann)[0], times)
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(ann) if a is not type(None)]
        return _arrow_type(inner[0], times) if len(inner) == 1 else pa.null()
    if isinstance(ann, str):
        ann = ann.strip().lower()
    if ann == dt.datetime or ann == "timestamp":
        return pa.timestamp("us", tz="UTC")
    try:
        name = _PLAIN.get(ann)
    except TypeError:  # an unhashable returns= (a Spark type object)
        name = None
    return pa.null() if name is None else getattr(pa, name)()
