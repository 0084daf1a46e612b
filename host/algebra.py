"""The temporal operators over canonical history tables, as the papers define them.

These are the denotational definitions (CEDR: Barga et al., CIDR 2007;
Goldstein et al., *Consistency Sensitive Streaming Operators in CEDR*),
written as plainly as the papers state them: each takes the CHT rows of its
inputs and returns its output CHT rows, with no notion of arrival order.
The reference engine runs them; every other engine is tested against them.

Rows are ``(start, end, payload)`` with payload a dict of columns
(:data:`udm.host.plan.Row`). Group keys are payload columns; an operator
"on" key columns only pairs events whose key values are equal.

>>> left = [(0, 1, {"k": "a", "x": 0}), (2, 4, {"k": "a", "x": 1})]
>>> right = [(3, 5, {"k": "a", "y": 1})]
>>> join_rows(left, right, on=("k",))
[(3, 4, {'k': 'a', 'x': 1, 'y': 1})]
>>> anti_join_rows(left, right, on=("k",))
[(0, 1, {'k': 'a', 'x': 0}), (2, 3, {'k': 'a', 'x': 1})]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from udm.host.errors import OperatorError
from udm.host.plan import JoinPredicate, JoinProjection, Row
from udm.host.rows import key_of
from udm.host.time import INFINITY, to_duration_ticks

__all__ = [
    "alter_lifetime",
    "anti_join_rows",
    "at_most",
    "constant_duration",
    "join_payload",
    "join_rows",
    "new_lifetime",
    "positive_duration",
    "shifted_by",
    "subtract_intervals",
    "union_rows",
]


def union_rows(parts: Sequence[Sequence[Row]], columns: Sequence[str]) -> list[Row]:
    """Bag union: every row of every part, with every column of ``columns``
    (null where a part lacks it)."""
    out: list[Row] = []
    for rows in parts:
        for s, e, p in rows:
            out.append((s, e, {c: p.get(c) for c in columns}))
    return out


def join_payload(
    left: Mapping[str, Any],
    right: Mapping[str, Any],
    on: Sequence[str],
    suffixes: tuple[str, str] = ("_left", "_right"),
) -> dict[str, Any]:
    """Both payloads in one: the ``on`` columns once, then the left's and
    the right's other columns; a name in both gets the side's suffix."""
    keys = set(on)
    clash = (set(left) & set(right)) - keys
    out = {k: left[k] for k in on}
    for name, value in left.items():
        if name not in keys:
            out[name + suffixes[0] if name in clash else name] = value
    for name, value in right.items():
        if name not in keys:
            out[name + suffixes[1] if name in clash else name] = value
    return out


def _groups(rows: Iterable[Row], on: Sequence[str]) -> dict[Hashable, list[Row]]:
    found: dict[Hashable, list[Row]] = {}
    for row in rows:
        found.setdefault(key_of(row[2], on) if on else (), []).append(row)
    return found


def join_rows(
    left: Sequence[Row],
    right: Sequence[Row],
    on: Sequence[str],
    where: JoinPredicate | None = None,
    select: JoinProjection | None = None,
    suffixes: tuple[str, str] = ("_left", "_right"),
    wrap: Callable[[Mapping[str, Any], bool], Any] | None = None,
) -> list[Row]:
    """CEDR Definition 4: ``(max(starts), min(ends), l ++ r)`` for every left
    and right event with equal ``on`` columns where ``max < min`` and
    ``where(l, r)``. ``wrap(payload, is_left)`` is what ``where``/``select``
    receive for a payload (a scalar stream's value, say)."""
    see = wrap or (lambda p, _left: p)
    right_groups = _groups(right, on)
    out: list[Row] = []
    for ls, le, lp in left:
        for rs, re, rp in right_groups.get(key_of(lp, on) if on else (), ()):
            s, e = max(ls, rs), min(le, re)
            if s >= e:
                continue
            if where is not None and not where(see(lp, True), see(rp, False)):
                continue
            if select is None:
                payload = join_payload(lp, rp, on, suffixes)
            else:
                made = select(see(lp, True), see(rp, False))
                payload = {**{k: lp[k] for k in on}, **dict(made)}
            out.append((s, e, payload))
    return out


def subtract_intervals(
    start: int, end: int, holes: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """``[start, end)`` minus the union of ``holes``, as sorted disjoint pieces.

    >>> subtract_intervals(0, 10, [(2, 4), (3, 5), (8, 12)])
    [(0, 2), (5, 8)]
    """
    pieces: list[tuple[int, int]] = []
    at = start
    for hs, he in sorted(holes):
        if he <= at or hs >= end:
            continue
        if hs > at:
            pieces.append((at, hs))
        at = max(at, he)
        if at >= end:
            break
    if at < end:
        pieces.append((at, end))
    return pieces


def anti_join_rows(
    left: Sequence[Row],
    right: Sequence[Row],
    on: Sequence[str],
    where: JoinPredicate | None = None,
    wrap: Callable[[Mapping[str, Any], bool], Any] | None = None,
) -> list[Row]:
    """Left anti-semijoin: each left event's lifetime minus the lifetimes
    of the right events that match it (equal ``on`` columns, ``where``
    true), with the left payload; a left event can leave several pieces."""
    see = wrap or (lambda p, _left: p)
    right_groups = _groups(right, on)
    out: list[Row] = []
    for ls, le, lp in left:
        holes = [
            (rs, re)
            for rs, re, rp in right_groups.get(key_of(lp, on) if on else (), ())
            if rs < le and ls < re and (where is None or where(see(lp, True), see(rp, False)))
        ]
        out.extend((s, e, lp) for s, e in subtract_intervals(ls, le, holes))
    return out


def new_lifetime(
    start: int,
    end: int,
    start_fn: Callable[[int], int] | None,
    duration_fn: Callable[[int, int], int] | None,
    operator: str = "alter_lifetime",
    element: Any = None,
) -> tuple[int, int]:
    """CEDR Definition 6 for one lifetime: ``(f_s(s), f_s(s) + f_d(s, e))``.

    Without ``duration_fn`` the duration is kept, so an event that never
    ends still never ends; an end past the end of time is the end of time.
    A duration that is not positive is an :class:`OperatorError`.
    """
    new_start = start if start_fn is None else int(start_fn(start))
    if not -INFINITY < new_start < INFINITY:
        raise OperatorError(
            operator, f"the new start {new_start} is outside the time range", element
        )
    if duration_fn is None:
        if end >= INFINITY:
            return new_start, INFINITY
        duration = end - start
    else:
        duration = int(duration_fn(start, end))
        if duration <= 0:
            raise OperatorError(
                operator,
                f"the duration of [{start}, {end}) is {duration}; a lifetime needs a positive "
                "duration (at least one tick)",
                element,
            )
    return new_start, min(new_start + duration, INFINITY)


def alter_lifetime(
    rows: Sequence[Row],
    start_fn: Callable[[int], int] | None,
    duration_fn: Callable[[int, int], int] | None,
    operator: str = "alter_lifetime",
) -> list[Row]:
    """CEDR Definition 6 over a CHT, with the paper's constraints checked:
    the start function must not decrease as the start grows (checked over
    every pair of distinct starts), and the duration must not grow when an
    end shrinks (checked against the shortest end, one tick)."""
    mapped: dict[int, int] = {}
    out: list[Row] = []
    for s, e, p in rows:
        ns, ne = new_lifetime(s, e, start_fn, duration_fn, operator, (s, e, p))
        mapped[s] = ns
        if duration_fn is not None and e > s + 1:
            shortest = int(duration_fn(s, s + 1))
            if shortest > ne - ns and ne < INFINITY:
                raise OperatorError(
                    operator,
                    f"the duration grows when the end shrinks: {ne - ns} for [{s}, {e}) but "
                    f"{shortest} for [{s}, {s + 1}); a duration function must not grow when "
                    "an end is retracted",
                    (s, e, p),
                )
        out.append((ns, ne, p))
    starts = sorted(mapped)
    for a, b in itertools.pairwise(starts):
        if mapped[b] < mapped[a]:
            raise OperatorError(
                operator,
                f"the start function is not monotone: start {a} maps to {mapped[a]} but the "
                f"later start {b} maps to {mapped[b]}; a start function must not decrease "
                "(CTIs could not pass through it)",
            )
    return out


# ------------------------------------------------- lifetime functions


def positive_duration(value: Any, where: str) -> int:
    """Ticks of a duration that must be positive; else an OperatorError naming ``where``."""
    d = to_duration_ticks(value)
    if d <= 0:
        raise OperatorError(
            where, f"a duration must be positive (at least one tick), got {value!r}"
        )
    return d


def constant_duration(d: int) -> Callable[[int, int], int]:
    """The duration function of ``set_duration(d)``."""

    def duration(start: int, end: int) -> int:
        return d

    duration.__name__ = f"constant_{d}"
    return duration


def at_most(d: int) -> Callable[[int, int], int]:
    """The duration function of ``clip_to(d)``."""

    def duration(start: int, end: int) -> int:
        return min(end - start, d)

    duration.__name__ = f"at_most_{d}"
    return duration


def shifted_by(d: int) -> Callable[[int], int]:
    """The start function of ``shift(d)``."""

    def start(s: int) -> int:
        return s + d

    start.__name__ = f"plus_{d}"
    return start
