"""Physical stream elements: inserts, retractions and CTIs.

A physical stream is a sequence of these in arrival order. Its meaning is
the canonical history table (:mod:`udm.host.cht`) it derives: many physical
streams (reordered, speculated then corrected) describe the same CHT.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from udm.host.time import INFINITY, TimeConversionError, format_time, to_ticks

__all__ = [
    "Cti",
    "Element",
    "ExternalCti",
    "Insert",
    "InsertDraft",
    "Retract",
    "edge_end",
    "edge_start",
    "insert_of",
    "point",
    "retract_of",
]


def _ticks(obj: Any, *names: str) -> None:
    """Each time field of ``obj`` in ticks; a value that is no time is
    refused naming the element (kind and id) and the field, which the
    bare conversion error (``1.5 is not a whole number of ticks``) does not."""
    for name in names:
        value = getattr(obj, name)
        if type(value) is not int:
            try:
                ticks = to_ticks(value)
            except TimeConversionError as exc:
                ident = getattr(obj, "id", None)
                element = type(obj).__name__ + ("" if ident is None else f"(id={ident!r})")
                raise type(exc)(f"{element} {name}: {exc}") from None
            object.__setattr__(obj, name, ticks)


@dataclass(frozen=True, slots=True)
class Insert:
    """A new event with lifetime ``[start, end)``; ``end`` may be
    :data:`~udm.sdk.INFINITY` (an edge event still open)."""

    id: Hashable
    start: int
    end: int
    payload: Any = None

    def __post_init__(self) -> None:
        _ticks(self, "start", "end")

    @property
    def sync_time(self) -> int:
        """The earliest time this element modifies: its start."""
        return self.start

    def __repr__(self) -> str:
        return (
            f"Insert(id={self.id!r}, start={self.start}, end={format_time(self.end)}, "
            f"payload={self.payload!r})"
        )


@dataclass(frozen=True, slots=True)
class Retract:
    """Change the end of event ``id`` from ``old_end`` to ``new_end``.

    ``new_end == start`` deletes the event (a full retraction);
    ``new_end > old_end`` extends it (an expansion, allowed).
    """

    id: Hashable
    start: int
    old_end: int
    new_end: int
    payload: Any = None

    def __post_init__(self) -> None:
        _ticks(self, "start", "old_end", "new_end")

    @property
    def sync_time(self) -> int:
        """The earliest time this element modifies: ``min(old_end, new_end)``."""
        return min(self.old_end, self.new_end)

    @property
    def is_full(self) -> bool:
        """Whether it removes the event altogether (new end at its start)
        rather than shortening it."""
        return self.new_end == self.start

    def __repr__(self) -> str:
        return (
            f"Retract(id={self.id!r}, start={self.start}, old_end={format_time(self.old_end)}, "
            f"new_end={format_time(self.new_end)})"
        )


@dataclass(frozen=True, slots=True)
class Cti:
    """Current time increment: no later element modifies time before ``time``."""

    time: int

    def __post_init__(self) -> None:
        _ticks(self, "time")

    @property
    def sync_time(self) -> int:
        """The application time this element is at: a CTI is at its own time."""
        return self.time

    def __repr__(self) -> str:
        return f"Cti({format_time(self.time)})"


Element = Insert | Retract | Cti


@dataclass(frozen=True, slots=True)
class ExternalCti:
    """CEDR's ExternalCTI: ``count`` elements of the stream have sync times
    in ``[start, end]`` (both ends included, as in the paper's example).
    Unlike a :class:`Cti` it may arrive out of order, before the elements
    it counts; ExternalCTIs never overlap. Only Finalize
    (``Stream.finalize()``) consumes them: once every counted element of
    the earliest interval has arrived, it issues ``Cti(end)``.
    """

    start: int
    end: int
    count: int

    def __post_init__(self) -> None:
        _ticks(self, "start", "end")
        if type(self.count) is not int or self.count < 0:
            raise ValueError(f"ExternalCti count is a non-negative int, got {self.count!r}")
        if self.end < self.start:
            raise ValueError(
                f"ExternalCti covers [start, end] with end not before start, got "
                f"[{format_time(self.start)}, {format_time(self.end)}]"
            )

    @property
    def sync_time(self) -> int:
        """The application time this element is at: an ExternalCTI is at its
        start."""
        return self.start

    def __repr__(self) -> str:
        return (
            f"ExternalCti(start={format_time(self.start)}, end={format_time(self.end)}, "
            f"count={self.count})"
        )


def _draft(cls: type) -> type:
    """A plain class with ``cls``'s slots, in their order: an instance's
    slots are set by ordinary attribute stores, then its ``__class__``
    becomes ``cls`` (Python allows the switch between heap types of the
    same layout, and checks it). That builds a frozen element without the
    dataclass ``__init__`` (one ``object.__setattr__`` per field) and its
    ``__post_init__`` (the tick check), and without a slot descriptor's
    ``__set__`` per field (a C call with an argument tuple each): about
    twice as fast as those calls, where the grid path emits one output per
    window closed."""
    slots = cls.__dict__["__slots__"]  # (the dataclass's own, in field order)
    return type(f"{cls.__name__}Draft", (), {"__slots__": slots, "__module__": __name__})


_InsertDraft = _draft(Insert)
#: the draft of :class:`Insert` (see :func:`_draft`), for a loop that builds
#: its outputs inline as :func:`insert_of` does: ``object.__new__`` of it,
#: the four fields in order, then ``__class__ = Insert``
InsertDraft = _InsertDraft
_RetractDraft = _draft(Retract)
_new = object.__new__


def insert_of(ident: Hashable, start: int, end: int, payload: Any) -> Insert:
    """``Insert(ident, start, end, payload)`` for times that are ``int``
    ticks already, built several times faster (see :func:`_draft`):
    engines emit one per window output, where the constructor's checks
    cost more than the UDM call."""
    e: Any = _new(_InsertDraft)
    e.id = ident
    e.start = start
    e.end = end
    e.payload = payload
    e.__class__ = Insert
    return e  # type: ignore[no-any-return]


def retract_of(ident: Hashable, start: int, old_end: int, new_end: int, payload: Any) -> Retract:
    """``Retract(...)`` for ``int`` tick times, as :func:`insert_of`."""
    r: Any = _new(_RetractDraft)
    r.id = ident
    r.start = start
    r.old_end = old_end
    r.new_end = new_end
    r.payload = payload
    r.__class__ = Retract
    return r  # type: ignore[no-any-return]


def point(id: Hashable, time: Any, payload: Any = None) -> Insert:
    """A point event: lifetime ``[time, time + 1 tick)``."""
    t = to_ticks(time)
    return Insert(id, t, t + 1, payload)


def edge_start(id: Hashable, time: Any, payload: Any = None) -> Insert:
    """The start edge of an edge event: open until :func:`edge_end`."""
    return Insert(id, to_ticks(time), INFINITY, payload)


def edge_end(id: Hashable, start: Any, end: Any) -> Retract:
    """The end edge of an edge event started with :func:`edge_start`."""
    return Retract(id, to_ticks(start), INFINITY, to_ticks(end))
