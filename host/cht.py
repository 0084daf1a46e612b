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
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from udm.host.stream import Element
from udm.host.time import TimeConversionError, to_ticks
from udm.host.validation import CtiPolicy, StreamValidator, ValidationStats
from udm.sdk.events import IntervalEvent

__all__ = ["Cht", "cht_diff", "cht_equal", "derive_cht", "freeze"]


def freeze(value: Any) -> Any:
    """A hashable, order-independent stand-in for a payload (dicts become
    sorted item tuples, lists tuples), used for multiset comparison."""
    if isinstance(value, Mapping):
        return ("__map__", tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("__seq__", tuple(freeze(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("__set__", tuple(sorted(freeze(v) for v in value)))
    if isinstance(value, float):
        if value != value:  # NaN: one value, so multisets of results compare
            return ("__nan__",)
        if value.is_integer():
            return int(value)
    return value


def _sort_key(e: IntervalEvent[Any]) -> tuple[int, int, str]:
    return (e.start, e.end, repr(freeze(e.payload)))


def _checked(n: int, item: Any) -> IntervalEvent[Any]:
    """Event ``n`` of a CHT: an ``IntervalEvent``, or a ``(start, end,
    payload)`` tuple whose times :func:`~udm.host.time.to_ticks` converts
    (ticks, datetimes), with ``start < end``."""
    if isinstance(item, IntervalEvent):
        e: IntervalEvent[Any] = item
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


def _payload_close(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_payload_close(a[k], b[k], rel_tol, abs_tol) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            _payload_close(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
        )
    return bool(a == b)


def cht_diff(
    expected: Iterable[IntervalEvent[Any]],
    actual: Iterable[IntervalEvent[Any]],
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> tuple[list[IntervalEvent[Any]], list[IntervalEvent[Any]]]:
    """Rows only in ``expected`` and rows only in ``actual``.

    Payload numbers match within the tolerances; each actual row matches at
    most one expected row with the same lifetime.
    """
    remaining: dict[tuple[int, int], list[IntervalEvent[Any]]] = {}
    for e in sorted(actual, key=_sort_key):
        remaining.setdefault((e.start, e.end), []).append(e)
    missing: list[IntervalEvent[Any]] = []
    for e in sorted(expected, key=_sort_key):
        candidates = remaining.get((e.start, e.end), [])
        for i, cand in enumerate(candidates):
            if _payload_close(e.payload, cand.payload, rel_tol, abs_tol):
                del candidates[i]
                break
        else:
            missing.append(e)
    extra = [e for rows in remaining.values() for e in rows]
    return missing, sorted(extra, key=_sort_key)


def cht_equal(
    a: Iterable[IntervalEvent[Any]],
    b: Iterable[IntervalEvent[Any]],
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> bool:
    """Multiset equality of two CHTs, numbers compared within tolerances."""
    missing, extra = cht_diff(a, b, rel_tol, abs_tol)
    return not missing and not extra
