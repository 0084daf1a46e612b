"""Exact running sums for the invertible aggregates.

The incremental aggregates of this library are invertible: the host calls
``remove`` when a retraction takes a value out of a window, and the result
must equal recomputing the window from its events (``remove(add(s, x), x)``
is ``s``). A float running sum breaks that (``1.0 + 1e16 - 1e16`` is
``0.0``; a NaN once added stays), so their states are exact sums instead:
Shewchuk's non-overlapping float partials (the algorithm of
:func:`math.fsum`), an exact int for integer values, and counts of NaNs and
infinities, which come out again exactly as they went in. Results round the
exact value once, so they do not depend on the order of adds and removes.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: (float partials, exact int part, NaNs, +infs, -infs)
ExactSum = tuple[tuple[float, ...], int, int, int, int]
ZERO_SUM: ExactSum = ((), 0, 0, 0, 0)
_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for 53-bit floats
_INT_FLOAT = 2.0**53  # floats at least this large are integers


def _grow(partials: tuple[float, ...], x: float) -> tuple[float, ...]:
    """The partials of ``sum(partials) + x``, exactly (Shewchuk)."""
    out: list[float] = []
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            out.append(lo)
        x = hi
    if x:
        out.append(x)
    return tuple(out)


def _two_product(a: float, b: float) -> tuple[float, float]:
    """``p, e`` with ``p + e == a * b`` exactly (Dekker), for |a|, |b| < 2**53."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def sum_add(s: ExactSum, x: int | float, sign: int = 1) -> ExactSum:
    """``s`` plus ``sign * x`` (sign 1 or -1) for an int or float ``x``."""
    partials, whole, nans, pinf, ninf = s
    if type(x) is int:
        return (partials, whole + sign * x, nans, pinf, ninf)
    if x != x:
        return (partials, whole, nans + sign, pinf, ninf)
    if x == math.inf:
        return (partials, whole, nans, pinf + sign, ninf)
    if x == -math.inf:
        return (partials, whole, nans, pinf, ninf + sign)
    if abs(x) >= _INT_FLOAT:
        return (partials, whole + sign * int(x), nans, pinf, ninf)
    return (_grow(partials, x if sign > 0 else -x), whole, nans, pinf, ninf)


def sum_add_product(s: ExactSum, x: int | float, w: int, sign: int = 1) -> ExactSum:
    """``s`` plus ``sign * x * w`` exactly, for an int weight ``w``."""
    if w == 0:
        return s
    if type(x) is int:
        return sum_add(s, x * w, sign)
    if x != x or x in (math.inf, -math.inf):
        return sum_add(s, x if w > 0 else -x, sign)
    if abs(x) >= _INT_FLOAT:
        return sum_add(s, int(x) * w, sign)
    if abs(w) >= _INT_FLOAT:  # a weight beyond 2**53 ticks (285 years): rounded
        return sum_add(s, x * w, sign)
    p, e = _two_product(x, float(w))
    s = sum_add(s, p, sign)
    return sum_add(s, e, sign) if e else s


def sum_merge(a: ExactSum, b: ExactSum) -> ExactSum:
    partials = a[0]
    for y in b[0]:
        partials = _grow(partials, y)
    return (partials, a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


def sum_special(s: ExactSum) -> float | None:
    """The sum's value if NaN or infinite, else None."""
    if s[2] or (s[3] and s[4]):
        return math.nan
    if s[3]:
        return math.inf
    if s[4]:
        return -math.inf
    return None


def sum_exact(s: ExactSum) -> Fraction:
    """The finite part of the sum, exactly."""
    total = Fraction(s[1])
    for y in s[0]:
        total += Fraction(y)
    return total


def sum_add_square(s: ExactSum, x: int | float, sign: int = 1) -> ExactSum:
    """``s`` plus ``sign * x * x`` exactly, for a finite number ``x``."""
    if type(x) is int:
        return sum_add(s, x * x, sign)
    if abs(x) >= _INT_FLOAT:
        return sum_add(s, int(x) ** 2, sign)
    p, e = _two_product(x, x)
    s = sum_add(s, p, sign)
    return sum_add(s, e, sign) if e else s


def sum_ratio(s: ExactSum, divisor: int) -> float:
    """The sum over a positive ``divisor``, rounded once (NaN or infinite
    when the sum is)."""
    special = sum_special(s)
    return special if special is not None else to_float(sum_exact(s) / divisor)


def to_float(value: Fraction) -> float:
    """``float(value)``, or an infinity beyond the float range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
