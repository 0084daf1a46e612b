"""What a UDM sees of time: interval events and the window descriptor.

Times are integer ticks (one tick is one microsecond in the host, the
resolution shared by Python ``datetime`` and Spark timestamps). ``INFINITY``
is the end of time: the right endpoint of an event whose end is not known
yet (an edge event before its end edge arrives).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from udm.sdk.payloads import payload_key

__all__ = [
    "INFINITY",
    "MIN_TIME",
    "IntervalEvent",
    "Ticks",
    "TimeMark",
    "WindowDescriptor",
    "is_time",
]

#: The end of time; an event with this end lasts forever until retracted.
INFINITY: int = 2**63 - 1
#: The beginning of time.
MIN_TIME: int = -(2**63) + 1


class TimeMark:
    """The mark of :data:`Ticks`: an ``int`` that is a point in time."""

    def __repr__(self) -> str:
        return "TimeMark()"


#: A point in time in ticks, for result fields: ``first_seen: Ticks`` in a
#: ``TypedDict`` (or ``-> Ticks`` for an aggregate) tells the host that the
#: integer is a time, so a query whose input times are timestamps shows it
#: as a timestamp, like ``start`` and ``end``, instead of as raw ticks. To
#: type checkers it is a plain ``int``.
Ticks = Annotated[int, TimeMark()]


def is_time(annotation: Any) -> bool:
    """Whether a type annotation (with its ``Annotated`` extras) is :data:`Ticks`."""
    extras = getattr(annotation, "__metadata__", ())
    return any(isinstance(m, TimeMark) for m in extras)


P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class IntervalEvent(Generic[P]):
    """An event with lifetime ``[start, end)`` and a payload.

    Time-sensitive UDMs receive these (with lifetimes already clipped by the
    query's input clipping policy) and time-sensitive operators return them.
    Events order canonically, by start, end, then payload (numbers by
    value, whatever the payloads' types), so ``sorted(events)`` always works
    and lists events in the order UDMs receive them.
    """

    start: int
    end: int
    payload: P

    @property
    def duration(self) -> int:
        """``end - start`` in ticks (``INFINITY`` stays infinite)."""
        return INFINITY if self.end == INFINITY else self.end - self.start

    def with_lifetime(self, start: int, end: int) -> IntervalEvent[P]:
        """The same payload over ``[start, end)``: how clipping and lifetime
        changes make a new event without touching the payload."""
        return IntervalEvent(start, end, self.payload)

    def _order(self) -> tuple[Any, ...]:
        return (self.start, self.end, payload_key(self.payload))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, IntervalEvent):
            return NotImplemented
        return self._order() < other._order()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, IntervalEvent):
            return NotImplemented
        return self._order() <= other._order()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, IntervalEvent):
            return NotImplemented
        return self._order() > other._order()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, IntervalEvent):
            return NotImplemented
        return self._order() >= other._order()


@dataclass(frozen=True, slots=True, order=True)
class WindowDescriptor:
    """The time span ``[start, end)`` of one window, as StreamInsight's
    ``WindowDescriptor``: time-sensitive UDMs read it to weigh or timestamp."""

    start: int
    end: int

    @property
    def duration(self) -> int:
        """``end - start`` in ticks (``INFINITY`` for a window that never
        ends), for UDMs that weigh by time."""
        return INFINITY if self.end == INFINITY else self.end - self.start

    def overlaps(self, start: int, end: int) -> bool:
        """Whether the lifetime ``[start, end)`` overlaps this window."""
        return start < self.end and self.start < end

    def __repr__(self) -> str:
        end = "inf" if self.end == INFINITY else str(self.end)
        return f"WindowDescriptor[{self.start}, {end})"


def payload_repr(payload: Any) -> str:
    """A short, stable rendering of a payload for error messages."""
    text = repr(payload)
    return text if len(text) <= 80 else text[:77] + "..."
