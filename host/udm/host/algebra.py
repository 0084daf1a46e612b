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
import numbers
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from udm.host.errors import OperatorError
from udm.host.plan import JoinPredicate, JoinProjection, Row
from udm.host.rows import key_of
from udm.host.time import INFINITY, MIN_TIME, to_duration_ticks

__all__ = [
    "alter_lifetime",
    "anti_join_rows",
    "at_most",
    "check_duration",
    "constant_duration",
    "join_payload",
    "join_rows",
    "joined_columns",
    "mapped_start",
    "never_ends",
    "new_lifetime",
    "pair_udf",
    "positive_duration",
    "shifted_by",
    "side_key",
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


def joined_columns(
    left: Sequence[str],
    right: Sequence[str],
    on: Sequence[str],
    suffixes: tuple[str, str] = ("_left", "_right"),
    where: str = "join",
) -> list[str]:
    """The output columns of a join without ``select=``: the ``on`` columns
    once, then the left's and the right's other columns, a name in both
    with the side's suffix. Every engine calls this (or :func:`join_payload`,
    which does when it must), so they refuse the same joins alike.

    Raises:
        OperatorError: two output columns would have the same name (a
            suffixed name that is also a column, as pandas' merge refuses
            it): one would silently overwrite the other's value.
    """
    keys = set(on)
    clash = (set(left) & set(right)) - keys
    made: dict[str, tuple[str, str]] = {k: ("key", k) for k in on}
    for side, columns, suffix in (("left", left, suffixes[0]), ("right", right, suffixes[1])):
        for name in columns:
            if name in keys:
                continue
            new = name + suffix if name in clash else name
            if new in made:
                raise OperatorError(where, _collision(new, made[new], (side, name), suffixes))
            made[new] = (side, name)
    return list(made)


def _collision(new: str, first: tuple[str, str], second: tuple[str, str], suffixes: Any) -> str:
    def said(side: str, name: str) -> str:
        if side == "key":
            return f"the key column {name!r}"
        how = f" (in both streams, so suffixed to {new!r})" if name != new else ""
        return f"the {side} stream's column {name!r}{how}"

    return (
        f"two output columns would both be named {new!r}: {said(*first)} and "
        f"{said(*second)}; one would overwrite the other. Pass suffixes= that make "
        f"new names (now {tuple(suffixes)!r}), rename a column before the join, or "
        "choose the output with select="
    )


def join_payload(
    left: Mapping[str, Any],
    right: Mapping[str, Any],
    on: Sequence[str],
    suffixes: tuple[str, str] = ("_left", "_right"),
) -> dict[str, Any]:
    """Both payloads in one: the ``on`` columns once, then the left's and
    the right's other columns; a name in both gets the side's suffix. A
    name made twice raises, as :func:`joined_columns` does."""
    keys = set(on)
    clash = (set(left) & set(right)) - keys
    out = {k: left[k] for k in on}
    for name, value in left.items():
        if name not in keys:
            out[name + suffixes[0] if name in clash else name] = value
    for name, value in right.items():
        if name not in keys:
            out[name + suffixes[1] if name in clash else name] = value
    if len(out) != len(left) + len(right) - len(on):  # a lost column, or a side lacks a key
        joined_columns(list(left), list(right), on, suffixes)
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


def _ticks_of(value: Any, what: str, operator: str, element: Any) -> int:
    """A start or duration function's result as ticks: an int (numpy ints
    too), never a silently truncated float or a parsed string."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OperatorError(
            operator,
            f"the {what} function returned {value!r} ({type(value).__name__}); it must "
            "return int ticks",
            element,
        )
    return int(value)


def _called(
    fn: Callable[..., Any], args: tuple[int, ...], what: str, operator: str, element: Any
) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        raise OperatorError(
            operator,
            f"the {what} function {getattr(fn, '__name__', fn)!r} failed on "
            f"{', '.join(map(str, args))}: {type(exc).__name__}: {exc}",
            element,
        ) from exc


def mapped_start(
    start: int, start_fn: Callable[[int], int] | None, operator: str, element: Any
) -> int:
    """``f_s(start)``, checked: int ticks inside the time range."""
    if start_fn is None:
        return start
    new_start = _ticks_of(
        _called(start_fn, (start,), "start", operator, element), "start", operator, element
    )
    if not MIN_TIME <= new_start < INFINITY:
        raise OperatorError(
            operator, f"the new start {new_start} is outside the time range", element
        )
    return new_start


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
    ends still never ends. The constant duration ``INFINITY``
    (:func:`never_ends`, ``set_duration(INFINITY)``) is an infinite one:
    the event never ends, ``[f_s(s), INFINITY)`` (CEDR's ``Inserts(S) =
    Π(Vs, ∞)``, StreamInsight's ``AlterEventDuration(e =>
    TimeSpan.MaxValue)``), whatever its start. A duration function's result
    is a length, added to the new start: ``e - s`` of ``[MIN_TIME, 0)`` is
    ``INFINITY`` and must keep the event finite, so no result of a function
    means "never ends". A finite event whose new end reaches the end of
    time (a ``shift`` by nearly ``INFINITY``, say) is an
    :class:`OperatorError`, as a start outside the time range is: the end
    of time means "never ends", which nothing said (an overflow, not a
    wish). A duration that is not positive, or a function failing or
    returning anything but int ticks, is an :class:`OperatorError` naming
    the element.
    """
    new_start = mapped_start(start, start_fn, operator, element)
    if duration_fn is None:
        if end >= INFINITY:
            return new_start, INFINITY
        duration = end - start
    else:
        if duration_fn is never_ends:
            return new_start, INFINITY
        duration = _duration(start, end, duration_fn, operator, element)
    new_end = new_start + duration
    if new_end >= INFINITY and end < INFINITY:
        raise OperatorError(
            operator,
            f"the event [{start}, {end}) would end at {new_end}, at or past the end of time "
            f"({INFINITY}), which means it never ends; a finite event must stay finite",
            element,
        )
    return new_start, min(new_end, INFINITY)


def _duration(
    start: int, end: int, duration_fn: Callable[[int, int], int], operator: str, element: Any
) -> int:
    got = _called(duration_fn, (start, end), "duration", operator, element)
    duration = _ticks_of(got, "duration", operator, element)
    if duration <= 0:
        raise OperatorError(
            operator,
            f"the duration of [{start}, {end}) is {duration}; a lifetime needs a positive "
            "duration (at least one tick)",
            element,
        )
    return duration


def check_duration(
    start: int,
    end: int,
    duration_fn: Callable[[int, int], int] | None,
    operator: str,
    element: Any,
) -> None:
    """CEDR's second constraint, as every engine checks it on an event: the
    duration at the shortest end (one tick) is not longer than at the
    event's own end (a retraction must never lengthen an output)."""
    if duration_fn is None or not start + 1 < end < INFINITY:
        return
    probe = _called(duration_fn, (start, start + 1), "duration", operator, element)
    shortest = _ticks_of(probe, "duration", operator, element)  # (a probe: may be 0)
    own = _duration(start, end, duration_fn, operator, element)
    if shortest > own:
        raise OperatorError(
            operator,
            f"the duration grows when the end shrinks: {own} for [{start}, {end}) but "
            f"{shortest} for [{start}, {start + 1}); a duration function must not grow when "
            "an end is retracted",
            element,
        )


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
    event: dict[int, Row] = {}  # an event with each start, to name in an error
    out: list[Row] = []
    for s, e, p in rows:
        ns, ne = new_lifetime(s, e, start_fn, duration_fn, operator, (s, e, p))
        check_duration(s, e, duration_fn, operator, (s, e, p))
        mapped[s] = ns
        event.setdefault(s, (s, e, p))
        out.append((ns, ne, p))
    starts = sorted(mapped)
    for a, b in itertools.pairwise(starts):
        if mapped[b] < mapped[a]:
            raise OperatorError(
                operator,
                f"the start function is not monotone: start {a} (of {event[a]!r:.200}) maps "
                f"to {mapped[a]} but the later start {b} maps to {mapped[b]}; a start "
                "function must not decrease (CTIs could not pass through it)",
                event[b],
            )
    return out


# ------------------------------------------------- lifetime functions


def positive_duration(value: Any, where: str) -> int:
    """Ticks of a duration that must be positive; else an OperatorError naming ``where``."""
    try:
        d = to_duration_ticks(value)
    except (TypeError, ValueError) as exc:
        raise OperatorError(where, f"{value!r} is not a duration: {exc}") from None
    if d <= 0:
        raise OperatorError(
            where, f"a duration must be positive (at least one tick), got {value!r}"
        )
    return d


def never_ends(start: int, end: int) -> int:
    """The duration function of ``set_duration(INFINITY)``: an infinite
    duration, every event never ends (:func:`new_lifetime` knows it by
    identity, which pickling keeps: a module-level function)."""
    return INFINITY


def constant_duration(d: int) -> Callable[[int, int], int]:
    """The duration function of ``set_duration(d)`` (:func:`never_ends`
    for ``INFINITY``)."""
    if d >= INFINITY:
        return never_ends

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


# ----------------------------------------------------- join UDFs, keys


def pair_udf(fn: Callable[[Any, Any], Any], what: str, operator: str) -> Callable[[Any, Any], Any]:
    """A join's ``where``/``select`` as engines call it: a failure names the
    operator, the function and both payloads (a :class:`~udm.host.rows.UdfError`),
    and ``select`` must return a dict of columns."""
    from udm.host.rows import UdfError

    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or repr(fn)

    def called(left: Any, right: Any) -> Any:
        try:
            out = fn(left, right)
        except Exception as exc:
            raise UdfError(
                f"{operator}: {what} {name!r} failed on left {left!r:.200} and right "
                f"{right!r:.200}: {type(exc).__name__}: {exc}"
            ) from exc
        if what == "select" and not isinstance(out, Mapping):
            raise UdfError(
                f"{operator}: select {name!r} returned {out!r:.200}; it returns the output "
                "payload, a dict of columns"
            )
        return out

    return called


def side_key(
    on: Sequence[str], side: str, operator: str
) -> Callable[[Mapping[str, Any]], Hashable]:
    """The ``on`` key of a payload of one side of a join; a payload without
    an ``on`` column is an :class:`OperatorError` naming the side."""

    def key(payload: Mapping[str, Any]) -> Hashable:
        if not on:
            return ()
        try:
            return key_of(payload, on)
        except (KeyError, TypeError):
            missing = [k for k in on if not isinstance(payload, Mapping) or k not in payload]
            raise OperatorError(
                operator,
                f"the {side} stream has no column(s) {missing}; its payload: {payload!r:.200}",
            ) from None

    return key
