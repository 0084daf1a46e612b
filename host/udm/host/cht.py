"""The canonical history table (CHT): the logical content of a stream.

Each CHT row is an event lifetime ``[start, end)`` with a payload. It is
derived from a physical stream by matching every retraction with its insert
(by id) and applying the new end; fully retracted events disappear. An id
is matched with its latest insert: it may be reused once its event is fully
retracted or has ended before the latest CTI (it can no longer change). Two
physical streams are equivalent when their CHTs are equal as multisets; ids
and arrival order do not matter.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from udm.host.stream import Element
from udm.host.time import TimeConversionError, to_ticks
from udm.host.validation import CtiPolicy, StreamValidator, ValidationStats
from udm.sdk.events import IntervalEvent
from udm.sdk.payloads import freeze, payload_key

__all__ = ["Cht", "cht_diff", "cht_equal", "cht_match", "derive_cht", "freeze", "payload_close"]


def _sort_key(e: IntervalEvent[Any]) -> tuple[Any, ...]:
    return (e.start, e.end, payload_key(e.payload))


def _checked(n: int, item: Any) -> IntervalEvent[Any]:
    """Event ``n`` of a CHT: an ``IntervalEvent``, or a ``(start, end,
    payload)`` tuple whose times :func:`~udm.host.time.to_ticks` converts
    (ticks, datetimes), with ``start < end``."""
    if isinstance(item, IntervalEvent):
        e: IntervalEvent[Any] = item
        start, end = e.start, e.end
        if type(start) is not int or type(end) is not int:
            # converted as a tuple's times are (a whole float, a datetime),
            # or refused (0.5, True). Int times are taken as they are: with
            # a range check too, building a Cht of 200k events took 1.6x
            # as long as before; the type check alone takes 1.3x
            try:
                e = IntervalEvent(to_ticks(start), to_ticks(end), e.payload)
            except TimeConversionError as exc:
                raise TimeConversionError(f"CHT event #{n} {item!r}: {exc}") from None
        elif start < end:
            return e
    else:
        try:
            start, end, payload = item
        except (TypeError, ValueError):
            raise TypeError(
                f"CHT event #{n} {item!r} is neither an IntervalEvent nor a "
                "(start, end, payload) tuple"
            ) from None
        try:
            e = IntervalEvent(to_ticks(start), to_ticks(end), payload)
        except TimeConversionError as exc:
            raise TimeConversionError(f"CHT event #{n} {(start, end, payload)!r}: {exc}") from None
    if not e.start < e.end:
        raise ValueError(
            f"CHT event #{n} [{e.start}, {e.end}) {e.payload!r}: end {e.end} is not after "
            f"start {e.start}; a point event ends at start + 1 tick"
        )
    return e


class Cht(Sequence[IntervalEvent[Any]]):
    """A multiset of events. ``==`` compares as multisets, exactly."""

    __slots__ = ("_events",)

    def __init__(self, events: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]] = ()) -> None:
        self._events = [_checked(n, e) for n, e in enumerate(events)]

    @classmethod
    def from_stream(
        cls, stream: Iterable[Element], cti_policy: CtiPolicy | str = CtiPolicy.RAISE
    ) -> Cht:
        """The CHT a physical stream stands for (retractions applied, CTIs
        checked by ``cti_policy``): what a stream's consumers must agree on."""
        return derive_cht(stream, cti_policy=cti_policy)[0]

    @overload
    def __getitem__(self, index: int) -> IntervalEvent[Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[IntervalEvent[Any]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[IntervalEvent[Any]]:
        return iter(self._events)

    def sorted(self) -> list[IntervalEvent[Any]]:
        """Events ordered by (start, end, payload): a canonical listing."""
        return sorted(self._events, key=_sort_key)

    def counter(self) -> Counter[tuple[int, int, Any]]:
        """The events as a multiset of ``(start, end, payload)`` with payloads
        made hashable: CHTs compare equal when these are, whatever the order."""
        return Counter((e.start, e.end, freeze(e.payload)) for e in self._events)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Cht):
            return self.counter() == other.counter()
        if isinstance(other, list):
            return bool(self == Cht(other))
        return NotImplemented

    def __hash__(self) -> int:  # pragma: no cover - mutable-looking, keep unhashable
        raise TypeError("Cht is not hashable")

    def __repr__(self) -> str:
        rows = ", ".join(f"[{e.start}, {e.end}) {e.payload!r}" for e in self.sorted())
        return f"Cht({rows})"


def derive_cht(
    stream: Iterable[Element], cti_policy: CtiPolicy | str = CtiPolicy.RAISE
) -> tuple[Cht, ValidationStats]:
    """Validate a physical stream and return its CHT with the policy's counts."""
    validator = StreamValidator(cti_policy=cti_policy, retired=[])
    for element in stream:
        validator.check(element)
    assert validator.retired is not None
    kept = [*validator.retired, *validator.live.values()]
    events = [IntervalEvent(ev.start, ev.end, ev.payload) for ev in kept]
    return Cht(events), validator.stats


def payload_close(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    """Payloads equal up to the tolerances, which apply where either side
    is a float: integers (counts, ids, tick times) and bools must be equal,
    since at 1e9 a relative tolerance of 1e-9 would let a count be off by
    one and a tick time by seconds."""
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b)
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real):
        if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
            return bool(a == b)
        x, y = float(a), float(b)
        if math.isnan(x) and math.isnan(y):
            return True
        return math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(payload_close(a[k], b[k], rel_tol, abs_tol) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            payload_close(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
        )
    return bool(a == b)


# rows of one lifetime above which the exact matching falls back to greedy
_MATCHING_LIMIT = 40_000


def _matching(expected: list[Any], actual: list[Any], close: Any) -> list[int | None]:
    """Per expected payload, the index of the actual payload it is paired
    with (None: unpaired), pairing as many as possible.

    Greedy pairing (each expected row takes the first close actual row)
    suffices for exact payloads, but within a tolerance it can leave a pair
    unmatched that another assignment would match ([1.0, 1.0] taking the
    only partner of [1.02, 0.9]). When greedy leaves rows on both sides,
    a maximum bipartite matching (augmenting paths) is computed instead.
    """
    pair: list[int | None] = [None] * len(expected)
    taken = [False] * len(actual)
    for i, e in enumerate(expected):
        for j, a in enumerate(actual):
            if not taken[j] and close(e, a):
                pair[i], taken[j] = j, True
                break
    if all(taken) or all(p is not None for p in pair):
        return pair
    if len(expected) * len(actual) > _MATCHING_LIMIT:
        return pair
    edges = [[j for j, a in enumerate(actual) if close(e, a)] for e in expected]
    owner: list[int | None] = [None] * len(actual)
    for i, paired in enumerate(pair):
        if paired is not None:
            owner[paired] = i

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            held = owner[j]
            if held is None or augment(held, seen):
                owner[j], pair[i] = i, j
                return True
        return False

    for i in range(len(expected)):
        if pair[i] is None:
            augment(i, set())
    return pair


def cht_match(
    expected: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    actual: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> tuple[
    list[tuple[IntervalEvent[Any], IntervalEvent[Any]]],
    list[IntervalEvent[Any]],
    list[IntervalEvent[Any]],
]:
    """The rows of ``expected`` paired with rows of ``actual`` (in
    ``expected``'s canonical order), the rows only in ``expected`` and the
    rows only in ``actual``.

    Rows pair up when their lifetimes are equal and their payloads are
    close (float numbers within the tolerances, everything else equal);
    each row pairs with at most one other, and as many rows pair as
    possible.
    """
    # (start, end, payload) tuples as a Cht takes them (checked the same way)
    expected = expected if isinstance(expected, Cht) else Cht(expected)
    actual = actual if isinstance(actual, Cht) else Cht(actual)
    by_lifetime: dict[tuple[int, int], tuple[list[Any], list[Any]]] = {}
    for e in sorted(expected, key=_sort_key):
        by_lifetime.setdefault((e.start, e.end), ([], []))[0].append(e)
    for e in sorted(actual, key=_sort_key):
        by_lifetime.setdefault((e.start, e.end), ([], []))[1].append(e)

    def close(e: IntervalEvent[Any], a: IntervalEvent[Any]) -> bool:
        return payload_close(e.payload, a.payload, rel_tol, abs_tol)

    pairs: list[tuple[IntervalEvent[Any], IntervalEvent[Any]]] = []
    missing: list[IntervalEvent[Any]] = []
    extra: list[IntervalEvent[Any]] = []
    for exp, act in by_lifetime.values():
        pair = _matching(exp, act, close)
        for e, j in zip(exp, pair, strict=True):
            if j is None:
                missing.append(e)
            else:
                pairs.append((e, act[j]))
        paired = {j for j in pair if j is not None}
        extra += [a for j, a in enumerate(act) if j not in paired]
    pairs.sort(key=lambda ea: _sort_key(ea[0]))
    return pairs, sorted(missing, key=_sort_key), sorted(extra, key=_sort_key)


def cht_diff(
    expected: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    actual: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> tuple[list[IntervalEvent[Any]], list[IntervalEvent[Any]]]:
    """Rows only in ``expected`` and rows only in ``actual``, as paired by
    :func:`cht_match`."""
    _, missing, extra = cht_match(expected, actual, rel_tol, abs_tol)
    return missing, extra


def cht_equal(
    a: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    b: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> bool:
    """Multiset equality of two CHTs, numbers compared within tolerances."""
    missing, extra = cht_diff(a, b, rel_tol, abs_tol)
    return not missing and not extra
