"""Whether a window's new result is the output already emitted for it.

The host engine caches each window's output and, when the window changes,
emits a retraction and a new insert only if the new result is another
output (host.md "How it works"). That test must be exact: ``4 == 4.0``,
``True == 1``, ``0.0 == -0.0`` and ``{"a": 1} == {"a": 1.0}`` in Python, but
a result's type is what a downstream UDF sees, so keeping the cached ``4.0``
when the window's result is now ``4`` made the output depend on arrival
order (the reference engine, and the host fed another order, give ``4``).
Nor may it be Python's ``==`` the other way round: a NaN result unchanged
is the same output, not a retraction and an insert at every refresh.

:func:`exact_key` is a hashable stand-in two values share only when they
are the same output: the same type at every level, the same value (floats
by their bits, so ``-0.0`` is not ``0.0`` and every NaN of a type is one
value), mappings and sequences item by item in order, sets as sets.
:func:`same_output` compares two values by it. Every place the host or its
operator graph decides whether a window's output changed uses them
(``udm.host.general``, ``udm.host.gridoperator``, ``udm.host.gridcolumns``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from math import copysign
from typing import Any

__all__ = ["exact_key", "same_output"]

#: the types whose values are their own exact key (with their type)
_ATOMS = frozenset({int, bool, str, bytes, type(None)})


def exact_key(value: Any) -> Hashable:
    """A hashable stand-in for ``value``, equal for two values only when
    they are the same output (see the module docstring).

    >>> exact_key(4) == exact_key(4.0), exact_key(True) == exact_key(1)
    (False, False)
    >>> exact_key(0.0) == exact_key(-0.0), exact_key(float("nan")) == exact_key(float("nan"))
    (False, True)
    >>> exact_key({"a": [1, 2.5]}) == exact_key({"a": [1, 2.5]}) != exact_key({"a": [1.0, 2.5]})
    True
    """
    kind = type(value)
    if kind in _ATOMS:
        return (kind, value)
    if isinstance(value, float):  # numpy's float64 too: its type is kept
        return (kind, float.hex(value) if value == value else "nan")
    if isinstance(value, complex):
        return (kind, exact_key(value.real), exact_key(value.imag))
    if isinstance(value, Mapping):
        return (kind, tuple((exact_key(k), exact_key(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (kind, tuple(exact_key(v) for v in value))
    if isinstance(value, set | frozenset):
        return (kind, frozenset(exact_key(v) for v in value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple(
            (f.name, exact_key(getattr(value, f.name))) for f in dataclasses.fields(value)
        )
        return (kind, fields)
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # numpy arrays and scalars
        return (kind, str(getattr(value, "dtype", "")), value.shape, exact_key(value.tolist()))
    return (kind, _Exactly(value))


def same_output(a: Any, b: Any) -> bool:
    """Whether ``b`` is the output ``a`` already is (:func:`exact_key`); a
    value that fails to compare is another output (emitted again: never
    wrong, at worst a retraction and an insert more)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _ATOMS:  # the common results, without building keys
        return bool(a == b)
    if kind is float:
        if a == b:
            return a != 0.0 or copysign(1.0, a) == copysign(1.0, b)
        return bool(a != a and b != b)
    if kind is dict or kind is list or kind is tuple:  # struct and list results: no keys built
        if len(a) != len(b):
            return False
        # a dict's items are (key, value) pairs, compared as tuples
        pairs = zip(a.items(), b.items(), strict=True) if kind is dict else zip(a, b, strict=True)
        return all(x is y or same_output(x, y) for x, y in pairs)
    try:
        return bool(exact_key(a) == exact_key(b))
    except Exception:
        return False


class _Exactly:
    """Any other value (a datetime, a Decimal, a user's object), equal to
    another when its own ``==`` says so, or when both are unequal to
    themselves (a NaN-like value) and render alike; hashed by type alone
    when the value is unhashable (a collision costs a comparison)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Exactly):
            return False
        a, b = self.value, other.value
        if a is b:
            return True
        try:
            if bool(a == b):
                return True
            return bool(a != a) and bool(b != b) and repr(a) == repr(b)
        except Exception:  # no truth value (pandas' NA): alike if rendered alike
            return repr(a) == repr(b)

    def __hash__(self) -> int:
        value = self.value
        try:
            if bool(value == value):  # a NaN-like value may hash by identity
                return hash(value)
        except Exception:
            pass
        return hash(type(value).__qualname__)
