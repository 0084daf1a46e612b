"""Validation of physical streams, with StreamInsight's CTI-violation policies.

A :class:`StreamValidator` checks one element at a time against everything
accepted before it. A rejected element raises and leaves the validator
exactly as it was, so the caller can fix or skip it and go on.

Elements that modify time before the latest CTI follow a :class:`CtiPolicy`
(StreamInsight's ``AdvanceTimePolicy``):

* ``raise`` (default): reject with :class:`~udm.host.errors.CtiViolationError`;
* ``drop``: discard the element (and later retractions of a dropped event);
* ``adjust``: move what can be kept to the CTI: an insert that ends after the
  CTI starts at the CTI; a retraction whose new end lies before the CTI ends
  at the CTI; what cannot be kept is dropped.

Every drop and adjustment is counted in :class:`ValidationStats`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from udm.host.choices import Choice
from udm.host.errors import CtiViolationError, InvalidElementError
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, MIN_TIME, format_time

__all__ = ["CtiPolicy", "LiveEvent", "StreamValidator", "ValidationStats", "validate"]


class CtiPolicy(Choice, label="CTI policy"):
    """What to do with an element that violates the latest CTI."""

    RAISE = "raise"
    DROP = "drop"
    ADJUST = "adjust"


@dataclass
class ValidationStats:
    """Counts of what a non-raising policy did, by element kind."""

    dropped_inserts: int = 0
    dropped_retractions: int = 0
    dropped_ctis: int = 0
    adjusted_inserts: int = 0
    adjusted_retractions: int = 0

    @property
    def dropped(self) -> int:
        """Elements dropped in all (inserts, retractions and CTIs), as a
        streaming stats row reports them."""
        return self.dropped_inserts + self.dropped_retractions + self.dropped_ctis

    @property
    def adjusted(self) -> int:
        """Elements adjusted in all (inserts and retractions moved to the CTI)."""
        return self.adjusted_inserts + self.adjusted_retractions

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        """The five counters in a fixed order, compact for pickled state."""
        return (
            self.dropped_inserts,
            self.dropped_retractions,
            self.dropped_ctis,
            self.adjusted_inserts,
            self.adjusted_retractions,
        )

    def as_dict(self) -> dict[str, int]:
        """The counters by name, for reports and JSON output."""
        return asdict(self)


@dataclass(slots=True)
class LiveEvent:
    """An accepted event that has not been fully retracted."""

    start: int
    end: int
    payload: Any
    original_start: int
    #: the end the producer believes, when a dropped or adjusted retraction
    #: left the event with another one (None: the same as ``end``)
    quoted_end: int | None = None


@dataclass
class StreamValidator:
    """Checks elements in arrival order and tracks the live events.

    ``check`` returns the element to apply (possibly adjusted), or ``None``
    if the policy dropped it.
    """

    cti_policy: CtiPolicy | str = CtiPolicy.RAISE
    stats: ValidationStats = field(default_factory=ValidationStats)
    cti: int = MIN_TIME
    position: int = 0
    live: dict[Hashable, LiveEvent] = field(default_factory=dict)
    dropped_ids: set[Hashable] = field(default_factory=set)
    #: when a list, events whose ids were reused after they expired are
    #: appended here (``derive_cht`` needs them; the host does not)
    retired: list[LiveEvent] | None = None
    _pruned_size: int = 0

    def __post_init__(self) -> None:
        self.cti_policy = CtiPolicy.parse(self.cti_policy)

    def prune(self, force: bool = False) -> None:
        """Forget live events that end before the CTI: no valid retraction
        can reach them any more (it would violate the CTI, which the CTI
        policy handles without the event). :meth:`check` never prunes (a
        caller such as ``derive_cht`` reads every event of the stream from
        :attr:`live`): a long-running caller calls this after its elements
        (the host after each CTI it applied, a graph's source after each
        element). Amortized: a call prunes only when the live set has
        doubled since the last prune, and is otherwise a length test, so
        long streams stay bounded; ``force`` prunes now (before a snapshot,
        which should be small)."""
        if not force and len(self.live) <= 2 * self._pruned_size + 1024:
            return
        cti = self.cti
        live = self.live  # in place: the host's batch loops hold this dict
        for ident in [k for k, ev in live.items() if ev.end < cti]:
            del live[ident]
        self._pruned_size = len(live)

    def check(self, element: Element) -> Element | None:
        """Check one element against the stream so far: the element to pass on
        (adjusted under ``adjust``), None when the policy drops it; raises
        under ``raise``. Events stay in :attr:`live` until :meth:`prune`."""
        position = self.position
        if isinstance(element, Insert):
            result = self._insert(element, position)
        elif isinstance(element, Retract):
            result = self._retract(element, position)
        elif isinstance(element, Cti):
            result = self._cti(element, position)
        else:
            raise InvalidElementError(
                element,
                position,
                f"not a stream element ({type(element).__name__}); "
                "use udm.host.Insert, Retract or Cti",
            )
        self.position = position + 1
        return result

    # -- per kind: check first, then mutate, so a raise changes nothing --

    def _violation(self, element: Element, position: int, sync: int) -> CtiViolationError:
        if self.cti >= INFINITY:
            return self._ended(element, position)
        return CtiViolationError(
            element,
            position,
            f"sync time {format_time(sync)} is before the latest CTI {format_time(self.cti)}; "
            "late elements need cti_policy='drop' or 'adjust', or an earlier CTI",
        )

    def _ended(self, element: Element, position: int) -> CtiViolationError:
        """An element after a CTI at the end of time (a host's ``flush()``):
        no policy or earlier CTI can admit it, so the advice is a new stream."""
        return CtiViolationError(
            element,
            position,
            "the stream has ended: a CTI at the end of time (flush()) was accepted, and "
            "nothing can follow it; feed later elements to a new host (or restore a snapshot "
            "taken before the flush)",
        )

    def _insert(self, e: Insert, position: int) -> Element | None:
        try:
            hash(e.id)
        except TypeError:
            raise InvalidElementError(
                e, position, f"event id {e.id!r} is not hashable; use a str or int id"
            ) from None
        if not MIN_TIME <= e.start < e.end <= INFINITY:  # one test on the hot path
            raise InvalidElementError(e, position, _lifetime_problem(e.start, e.end))
        previous = self.live.get(e.id)
        if previous is not None and previous.end >= self.cti:
            raise InvalidElementError(
                e,
                position,
                f"event id {e.id!r} is already live with lifetime "
                f"[{previous.start}, {format_time(previous.end)}); ids must be unique "
                "until their event is fully retracted or ends before the latest CTI",
            )
        # An event ending before the CTI can no longer change, so its id is
        # free again: whether it is still remembered must not matter (prune).
        if e.start < self.cti:
            policy = self.cti_policy
            if policy is CtiPolicy.RAISE:
                raise self._violation(e, position, e.start)
            if policy is CtiPolicy.DROP or e.end <= self.cti:
                self.stats.dropped_inserts += 1
                self.dropped_ids.add(e.id)
                return None
            self.stats.adjusted_inserts += 1
            adjusted = Insert(e.id, self.cti, e.end, e.payload)
            self._accept(e.id, LiveEvent(self.cti, e.end, e.payload, e.start), previous)
            return adjusted
        self._accept(e.id, LiveEvent(e.start, e.end, e.payload, e.start), previous)
        return e

    def _accept(self, ident: Hashable, event: LiveEvent, previous: LiveEvent | None) -> None:
        if previous is not None and self.retired is not None:
            self.retired.append(previous)
        self.live[ident] = event
        self.dropped_ids.discard(ident)

    def _retract(self, r: Retract, position: int) -> Element | None:
        if r.start < MIN_TIME or r.new_end > INFINITY or r.old_end > INFINITY:
            # malformed whatever the stream before it (an event id dropped
            # by the CTI policy must not hide it)
            what = (
                "start" if r.start < MIN_TIME else "new_end" if r.new_end > INFINITY else "old_end"
            )
            raise InvalidElementError(r, position, _out_of_range(what, getattr(r, what)))
        try:
            live = self.live.get(r.id)
        except TypeError:
            raise InvalidElementError(
                r, position, f"event id {r.id!r} is not hashable; use a str or int id"
            ) from None
        if (
            live is not None
            and live.end < self.cti
            and min(r.old_end, r.new_end) < self.cti
            and not (
                r.start in (live.start, live.original_start)
                and r.old_end in (live.end, live.quoted_end)
            )
        ):
            # a late retraction quoting another lifetime of an event the CTI
            # passed, which prune (and a batch, which registers no such
            # event) may have forgotten: a CTI violation, as if forgotten, so
            # the answer does not depend on when prune last ran
            live = None
        if live is None:
            if r.id in self.dropped_ids:
                # The event itself was dropped by the CTI policy: so is this.
                self.stats.dropped_retractions += 1
                return None
            sync = min(r.old_end, r.new_end)
            if sync < self.cti:
                # possibly an event forgotten after the CTI passed its end
                if self.cti_policy is CtiPolicy.RAISE:
                    raise self._violation(r, position, sync)
                self.stats.dropped_retractions += 1
                return None
            forgotten = (
                ""
                if self.cti == MIN_TIME
                else f", or it ended before the latest CTI {format_time(self.cti)}, after "
                "which engines may forget it"
            )
            raise InvalidElementError(
                r,
                position,
                f"unknown event id {r.id!r}: it was never inserted or is already fully "
                f"retracted{forgotten}; retract only live events, quoting their current lifetime",
            )
        if r.start not in (live.start, live.original_start):
            raise InvalidElementError(
                r,
                position,
                f"start {r.start} does not match event {r.id!r}, which starts at {live.start}; "
                "a retraction quotes the event's start",
            )
        if r.old_end != live.end and r.old_end != live.quoted_end:
            also = "" if live.quoted_end is None else f" (or {format_time(live.quoted_end)}"
            also += ", the end its late retraction asked for)" if also else ""
            raise InvalidElementError(
                r,
                position,
                f"old_end {format_time(r.old_end)} does not match the current end "
                f"{format_time(live.end)}{also} of event {r.id!r}; a retraction quotes the "
                "end the event has after the retractions before it",
            )
        # a retraction quoting the end the producer believes after a dropped
        # or adjusted one changes the event from the end it really has
        old_end = live.end
        start = live.start
        new_end = r.new_end
        if new_end < r.start or (new_end < start and r.start == start):
            raise InvalidElementError(
                r,
                position,
                f"new_end {format_time(new_end)} is before the event's start {r.start}; "
                "a full retraction sets new_end = start",
            )
        adjusted = False
        if new_end < start:  # retraction quoting the original start of an adjusted event
            # The event was moved to start at an earlier CTI; a new end before
            # that is before the CTI too and ends at it. Only a full retraction
            # gets exactly what it asked for.
            adjusted = r.new_end != r.start
            new_end = start
        sync = min(old_end, new_end)
        if sync < self.cti:
            policy = self.cti_policy
            if policy is CtiPolicy.RAISE:
                raise self._violation(r, position, min(r.old_end, new_end))
            if policy is CtiPolicy.DROP or old_end <= self.cti:
                # (an event already ending at the CTI cannot be adjusted)
                self.stats.dropped_retractions += 1
                live.quoted_end = None if r.new_end == live.end else r.new_end
                return None
            new_end = self.cti
            adjusted = True
        if adjusted:
            self.stats.adjusted_retractions += 1
        out = r
        if adjusted or start != r.start or new_end != r.new_end or old_end != r.old_end:
            out = Retract(r.id, start, old_end, new_end, live.payload)
        if new_end == start:
            del self.live[r.id]
        else:
            live.end = new_end
            live.quoted_end = None if r.new_end == new_end else r.new_end
        return out

    def _cti(self, c: Cti, position: int) -> Element | None:
        if not MIN_TIME <= c.time <= INFINITY:
            raise InvalidElementError(c, position, _out_of_range("time", c.time))
        if c.time < self.cti:
            if self.cti_policy is CtiPolicy.RAISE:
                if self.cti >= INFINITY:
                    raise self._ended(c, position)
                raise CtiViolationError(
                    c,
                    position,
                    f"CTI goes backwards: the latest CTI is {format_time(self.cti)}; "
                    "CTIs must not decrease",
                )
            self.stats.dropped_ctis += 1
            return None
        self.cti = c.time
        return c


def _out_of_range(what: str, ticks: int) -> str:
    """Why a time beyond the int64 tick range is refused (an ``int`` element
    field is taken as it is, unchecked by the constructor: one check per
    element here is what every engine passes)."""
    if ticks < MIN_TIME:
        bound = f"before MIN_TIME ({MIN_TIME} = -(2**63) + 1, the beginning of time)"
        advice = "; an event from the beginning of time starts at MIN_TIME"
    else:
        bound = f"beyond INFINITY ({INFINITY} = 2**63 - 1, the end of time)"
        advice = "; an event that never ends has end INFINITY"
    if what == "time":  # a CTI
        advice = ""
    return f"{what} {ticks} is {bound}, outside the int64 tick range{advice}"


def _lifetime_problem(start: int, end: int) -> str:
    """Why an insert's lifetime ``[start, end)`` is refused."""
    if start < MIN_TIME:
        return _out_of_range("start", start)
    if end > INFINITY:
        return _out_of_range("end", end)
    return (
        f"end {format_time(end)} is not after start {start}; a point event ends at start + 1 tick"
    )


def validate(
    stream: Iterable[Element], cti_policy: CtiPolicy | str = CtiPolicy.RAISE
) -> Iterator[Element]:
    """Yield the elements of ``stream`` that survive validation (adjusted
    where the policy says so); raise on the first invalid one."""
    validator = StreamValidator(cti_policy=cti_policy)
    for element in stream:
        checked = validator.check(element)
        if checked is not None:
            yield checked
