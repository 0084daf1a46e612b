"""The grid path's building blocks: markers, per-key state, eligibility.

Shared by :class:`~udm.host.gridcore.GridCore` (the per-element algorithm)
and :class:`~udm.host.gridpath.GridPath` (batches, undo and persistence).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from udm.host.errors import OpenEventError
from udm.host.gridslices import KeyEvents
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.time import INFINITY, MIN_TIME, format_time
from udm.sdk.base import Udm

__all__ = [
    "DONE",
    "EMPTY",
    "NEVER",
    "OPEN_EVENT_WINDOWS",
    "ExpiredId",
    "GridKey",
    "NoState",
    "eligible",
    "forget_retired",
    "held_between",
    "refuse_open",
    "slice_eligible",
    "undo_note",
]

#: a window without events has no output (a UDA's result may be None)
EMPTY: Any = object()
#: what :meth:`GridPath.run` returns when its rows ran out
DONE: Any = object()
#: a key's due time when it has no window (later than every window's end)
NEVER = INFINITY + 1


def eligible(window: Any, udm: Udm, policy: OutputPolicy, clipping: InputClipping) -> bool:
    """Whether the fast path computes exactly what the general one does."""
    props = udm.properties
    return (
        window.is_grid
        and udm.kind == "aggregate"
        and udm.incremental
        and not udm.time_sensitive
        and bool(props.invertible)
        and props.order_insensitive
        and policy in (OutputPolicy.ALIGN, OutputPolicy.POINT_END)
    )


def slice_eligible(window: Any, udm: Udm, policy: OutputPolicy) -> bool:
    """Whether the grid path computes exactly what the general one does
    with windows read as slices of each key's events (``slices=True``):
    any time-insensitive aggregate or operator over hopping or tumbling
    windows whose outputs take the window's lifetime or its last tick. It
    sees payloads in canonical order (start, then payload) and no
    lifetimes, so a window's result depends only on its slice; clipping
    changes nothing it sees."""
    return (
        window.is_grid
        and udm.kind in ("aggregate", "operator")
        and not udm.time_sensitive
        and policy in (OutputPolicy.ALIGN, OutputPolicy.POINT_END)
    )


class NoState:
    """The window "state" of the slice mode: windows keep only their event
    counts (for emptiness) and outputs; results come from the slices."""

    def initial_state(self) -> None:
        """No state: a window's result is computed from its slice."""
        return None

    def add(self, state: None, value: Any) -> None:
        """Nothing to fold (counts are kept beside)."""
        return None

    def remove(self, state: None, value: Any) -> None:
        """Nothing to unfold."""
        return None


@dataclass(frozen=True, slots=True)
class ExpiredId:
    """Where an expired event is kept once a new event reuses its id (its
    start tells it from later reuses: they start after it ended)."""

    ident: Hashable
    start: int

    def __repr__(self) -> str:
        return repr(self.ident)


class GridKey:
    """Per-key state: window index k -> [state, n_events, outputs]."""

    __slots__ = (
        "due",
        "emitted_k",
        "events",
        "forget",
        "key",
        "long",
        "max_start",
        "order",
        "wins",
    )

    def __init__(self, key: Hashable, slices: bool, order: int) -> None:
        self.key = key
        self.order = order  # the keys' order of arrival: CTIs visit keys in it
        self.wins: dict[int, list[Any]] = {}
        self.max_start = MIN_TIME
        # windows <= this index are emitted; a key no CTI visited since its
        # windows ended keeps an older index (no window lies in between)
        self.emitted_k: int | None = None
        self.long: dict[Hashable, list[Any]] = {}  # events reaching unbegun windows
        #: the end of its earliest window as registered in the due heap
        self.due = NEVER
        #: (slice mode) when its final windows must be forgotten at the
        #: latest: its earliest window's end, a few hops later (see
        #: GridCore._register)
        self.forget = NEVER
        self.events: KeyEvents | None = KeyEvents() if slices else None


#: the most windows an event that never ends may join at once (at its
#: insert, or as the latest start moves on): its windows up to a start near
#: the end of time are practically infinitely many, and the host would make
#: them one by one where every other engine refuses the event at once
OPEN_EVENT_WINDOWS = 1 << 20


def refuse_open(window: Any, start: int, end: int, windows: int) -> None:
    """Raise :class:`~udm.host.errors.OpenEventError` when an event
    ``[start, end)`` that never ends would join more than
    :data:`OPEN_EVENT_WINDOWS` grid windows at once: a later start far
    ahead (the last tick, ``INFINITY - 1``, say) makes every window up to it
    due, as the reference engine's refusal of an event that never ends
    says (docs/concepts.md "When a window is output")."""
    if end < INFINITY or windows <= OPEN_EVENT_WINDOWS:
        return
    raise OpenEventError(
        f"{window.kind} windows over an event that never ends are infinitely many: "
        f"[{format_time(start)}, INFINITY) would join {windows} windows at once, up to "
        "the latest start",
        "end the event with a retraction before a start that far ahead, or bound "
        "lifetimes before the window (clip_to())",
    )


def undo_note(undo: Exception) -> str:
    """The note a UDM error gets when undoing the failed insert by the
    UDM's ``remove`` failed too: the UDM's error is raised (as the element
    path, which restores saved states, raises it), not ``remove``'s."""
    return (
        f"undoing the insert failed too: the UDM's remove raised {type(undo).__name__}: {undo}; "
        "a window of this key may keep the event's value: restore a snapshot "
        "(Host.restore) before going on"
    )


def forget_retired(events: dict[Hashable, Any], kev: KeyEvents, bound: int, reused: bool) -> None:
    """Retire ``kev``'s events ending before ``bound`` and forget them in the
    id index ``events`` (an event whose id was reused is there under its
    :class:`ExpiredId`, looked up only when an id was ever reused)."""
    for ident, record in kev.retire(bound):
        found = events.get(ident)
        if found is record:
            del events[ident]
        elif reused or found is not None:  # kept aside when its id was reused
            expired = ExpiredId(ident, record[0])
            if events.get(expired) is record:
                del events[expired]


def held_between(wins: dict[int, Any], first: int, last: int) -> list[int]:
    """The window indexes ``wins`` holds in ``(first, last]``, in order:
    a lookup per index of the range, or, when the range is the longer (a
    key that jumped over many empty windows, up to 10**18 of them), a sort
    of those held.

    >>> held_between({3: 0, 9: 0, 12: 0}, 2, 10), held_between({5: 0}, 0, 10**18)
    ([3, 9], [5])
    """
    if last - first > len(wins):
        return sorted(k for k in wins if first < k <= last)
    return [k for k in range(first + 1, last + 1) if k in wins]
