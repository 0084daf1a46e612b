"""Payloads: reading a UDM's value from one, and ordering and comparing
them whatever their type."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["freeze", "payload_key", "pick"]


_SCALARS = frozenset({float, int, str, bool, bytes})


def pick(payload: Any, field: str | None) -> Any:
    """The value a UDM works on: the payload itself (``field=None``), or its
    ``field`` when payloads are mappings. The errors say what to pass, so
    UDM libraries can offer a ``field=`` argument with one call."""
    if field is None:
        if type(payload) in _SCALARS:  # the common case, without an ABC check
            return payload
        if isinstance(payload, Mapping):
            raise TypeError(
                f"payload {payload!r} is a mapping; pass field='<name>' to the UDM "
                "(or value='<column>' to the query) to pick the value"
            )
        return payload
    if not isinstance(payload, Mapping):
        raise TypeError(f"field={field!r} given but the payload {payload!r} is not a mapping")
    try:
        return payload[field]
    except KeyError:
        raise KeyError(
            f"payload has no field {field!r}; its fields are {sorted(payload)}"
        ) from None


def freeze(value: Any) -> Any:
    """A hashable, order-independent stand-in for a payload (dicts become
    sorted item tuples, lists tuples), used for multiset comparison. Keys
    and set members keep their types (``{1: x}`` is not ``{"1": x}``) and
    are sorted by rendering, so members of any mix of types sort.
    Dataclasses compare by class and fields, arrays (anything with
    ``tolist`` and ``shape``) item by item, other unhashable objects by
    their own ``==``.

    >>> freeze({"b": [1, 2.0], "a": float("nan")}) == freeze({"a": float("nan"), "b": (1, 2)})
    True
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Point:
    ...     x: int
    >>> freeze(Point(1)) == freeze(Point(1)) != freeze(Point(2))
    True
    """
    if isinstance(value, Mapping):
        items = ((freeze(k), freeze(v)) for k, v in value.items())
        return ("__map__", tuple(sorted(items, key=_rendered_key)))
    if isinstance(value, list | tuple):
        return ("__seq__", tuple(freeze(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("__set__", tuple(sorted((freeze(v) for v in value), key=_rendered)))
    if isinstance(value, float):
        if value != value:  # NaN: one value, so multisets of results compare
            return ("__nan__",)
        if value.is_integer():
            return int(value)
        return value
    if type(value) in _SCALARS or value is None:
        return value
    return _freeze_object(value)


def _freeze_object(value: Any) -> Any:
    """``freeze`` of a value that is not a plain Python scalar or container:
    a dataclass by its class and compared fields (a non-frozen one is not
    hashable, but UDMs return them as struct results), an array (numpy's,
    or anything with ``tolist``) by its items, anything else hashable as
    itself, and an unhashable object wrapped so it compares by its own
    ``==``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple(
            (f.name, freeze(getattr(value, f.name))) for f in dataclasses.fields(value) if f.compare
        )
        return ("__dataclass__", type(value).__qualname__, fields)
    if hasattr(value, "tolist") and hasattr(value, "shape"):
        return freeze(value.tolist())
    try:
        hash(value)
    except TypeError:
        return _ByEquality(value)
    return value


class _ByEquality:
    """An unhashable value made hashable for multiset comparison: equal
    when the values are, hashed by type alone (a collision costs a
    comparison, never a wrong answer)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByEquality) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(type(self.value).__qualname__)

    def __repr__(self) -> str:
        return repr(self.value)


def payload_key(value: Any) -> tuple[Any, ...]:
    """A total order of payloads: numbers by value (an int before an equal
    float, NaN after every number), strings as strings, mappings by their
    sorted items, sequences item by item, anything else by its canonical
    rendering. Comparing renderings alone put 100 before 27."""
    kind = type(value)
    if kind is int or kind is bool:
        return (0, value, 0)
    if kind is float:
        return (0, value, 1) if value == value else (1,)
    if kind is str:
        return (2, value)
    if isinstance(value, Mapping):
        items = sorted((payload_key(k), payload_key(v)) for k, v in value.items())
        return (3, tuple(items))
    if isinstance(value, list | tuple):
        return (4, tuple(payload_key(v) for v in value))
    if isinstance(value, numbers.Real) and value == value:
        return (0, value, 2)
    return (5, repr(freeze(value)))


def _rendered(frozen: Any) -> tuple[str, str]:
    return (type(frozen).__name__, repr(frozen))


def _rendered_key(item: tuple[Any, Any]) -> tuple[str, str]:
    return _rendered(item[0])
