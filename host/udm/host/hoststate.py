"""The incremental host's state: per-key windows, the undo journal, ids.

:class:`~udm.host.engine.Host` (the orchestrator) and
:class:`~udm.host.gridpath.GridPath` (its grid fast path) both emit
:class:`OutputId` s and read :class:`Consistency`; the per-key state and
the journal that undoes one element's changes are the host's alone.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sortedcontainers import SortedDict

from udm.host.choices import Choice
from udm.host.indexes import EventIndex, IndexedEvent
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.time import MIN_TIME
from udm.host.validation import StreamValidator
from udm.host.windows import WindowSpec
from udm.sdk.events import IntervalEvent

__all__ = [
    "Consistency",
    "HostAttributes",
    "Journal",
    "KeyState",
    "OutputId",
    "WindowState",
    "arrival",
    "id_counter",
]


class Consistency(Choice, label="consistency"):
    """When window output is emitted (CEDR's consistency levels).

    * ``speculative``: as soon as the watermark (the latest CTI or the latest
      event start) passes the window's end; later changes are retracted and
      re-emitted.
    * ``conservative``: only once a CTI makes the window final; the output
      never contains retractions.
    """

    SPECULATIVE = "speculative"
    CONSERVATIVE = "conservative"


class OutputId(NamedTuple):
    """Id of an output event: the group key and a sequence number."""

    key: Hashable
    n: int


@dataclass(slots=True)
class WindowState:
    """One window of the window index: its end, event count, UDM state and
    the outputs it has emitted (still live in the output stream)."""

    end: int
    n_events: int = 0
    state: Any = None
    outputs: list[tuple[OutputId, IntervalEvent[Any]]] = field(default_factory=list)


@dataclass(slots=True)
class KeyState:
    """One group key's live events and open windows (by start and by end:
    both increase together, which the host's range scans rely on)."""

    index: EventIndex = field(default_factory=EventIndex)
    wins: SortedDict = field(default_factory=SortedDict)  # start -> WindowState
    win_ends: SortedDict = field(default_factory=SortedDict)  # end -> start
    max_start: int = MIN_TIME
    final_upto: int = MIN_TIME  # every window ending at or before it is forgotten
    #: the key's place in the order of arrival (CTIs visit keys in it)
    order: int = 0

    def spent(self, c: int) -> bool:
        """Whether the key can be dropped after CTI ``c``: no live event, no
        open window (so no output that may still be retracted), and a
        watermark no later than the CTI. A later event of the key starts at
        or after the CTI, so a fresh state answers it as this one would: the
        windows this one forgot ended by the CTI, and the endpoints a
        snapshot window keeps of retired events lie before it, where no
        window with a member can begin. (Count windows keep the last
        ``count - 1`` starts or ends as live events, so their keys stay: by
        definition a later event may still form a window with them.)"""
        return not self.wins and not self.index.by_start and self.max_start <= c


def arrival(item: tuple[Hashable, KeyState]) -> int:
    """The sort key of a ``(key, state)`` pair: the key's order of arrival."""
    return item[1].order


class Journal:
    """Undo log of one element's changes, so a failing UDM leaves the host
    exactly as it was."""

    def __init__(self) -> None:
        self.wins: dict[tuple[int, int], tuple[KeyState, WindowState | None]] = {}
        self.keys: dict[int, tuple[KeyState, int, int]] = {}
        self.events: list[tuple[KeyState, IndexedEvent | None, IndexedEvent | None]] = []
        self.detached: list[tuple[EventIndex, IndexedEvent]] = []
        self.new_keys: list[Hashable] = []
        self.key_of: list[tuple[Hashable, bool, Hashable]] = []

    def touch(self, ks: KeyState, start: int) -> None:
        """Save window ``start`` of ``ks`` as it is now, once per transaction,
        so a rollback can restore it after a UDM error."""
        slot = (id(ks), start)
        if slot in self.wins:
            return
        w = ks.wins.get(start)
        saved = None if w is None else WindowState(w.end, w.n_events, w.state, list(w.outputs))
        self.wins[slot] = (ks, saved)

    def touch_key(self, ks: KeyState) -> None:
        """Save the key's watermarks as they are now, once per transaction, so
        a rollback can restore them."""
        if id(ks) not in self.keys:
            self.keys[id(ks)] = (ks, ks.max_start, ks.final_upto)


class HostAttributes:
    """The attributes :class:`~udm.host.engine.Host` sets up that both its
    parts read (the general path, :class:`~udm.host.general.GeneralPath`,
    and snapshots, :class:`~udm.host.hostsnapshot.Snapshots`), declared
    once for the type checker."""

    window: WindowSpec
    clipping: InputClipping
    policy: OutputPolicy
    consistency: Consistency
    validator: StreamValidator
    keys: dict[Hashable, KeyState]
    #: the keys a CTI visits: all but the quiet ones (see WindowKind.quiet)
    _active: dict[Hashable, KeyState]
    #: quiet keys by their earliest open window start: (start, order, key, state)
    _quiet: list[tuple[int, int, Hashable, KeyState]]
    _created: int
    cti: int
    output_cti: int
    _key_of: dict[Hashable, Hashable]
    _label: str
    _seq: int
    _next_out: int

    def _new_id(self, key: Hashable) -> OutputId:
        """The next output id, for the grid path."""
        n = self._next_out
        self._next_out = n + 1
        # OutputId(key, n) without the NamedTuple's Python-level __new__:
        # the grid path asks for one per output
        return tuple.__new__(OutputId, (key, n))

    @property
    def next_out(self) -> int:
        """The sequence number of the next output id (see :func:`id_counter`)."""
        return self._next_out

    @next_out.setter
    def next_out(self, n: int) -> None:
        self._next_out = n

    def _return_ids(self, n: int) -> None:
        """Take back the last ``n`` output ids issued: their outputs, those
        of an element that failed in a batch loop, were deleted
        (:meth:`~udm.host.gridoperator.OperatorWindows.withdraw`)."""
        self._next_out -= n


def id_counter(new_id: Any) -> HostAttributes | None:
    """The host whose output counter ``new_id`` advances, when ``new_id`` is
    a host's own id method (bound), else None. A batch loop that emits an
    output per window may then issue the ids itself, ``OutputId(key, n)``
    for ``n`` from :attr:`~HostAttributes.next_out` up, and write the
    counter back before anything else issues one: the same ids, without a
    Python call per output (a few percent of the hopping median)."""
    if getattr(new_id, "__func__", None) is HostAttributes.__dict__["_new_id"]:
        owner = new_id.__self__
        if isinstance(owner, HostAttributes):
            return owner
    return None
