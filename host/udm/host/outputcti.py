"""The general path's output CTIs: how far the output is final.

After a CTI the output CTI is the earliest output any window may still
change or produce: an open window's (its first, per key: starts and ends
both increase) or a window that does not exist yet (the kind's
:meth:`~udm.host.kinds.WindowKind.earliest_future`, which for count
windows asks every key's earliest open start, quiet keys included: see
:meth:`~udm.host.kinds.WindowKind.quiet`). Part of
:class:`~udm.host.general.GeneralPath`.
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heappop
from itertools import chain
from typing import Any

from udm.host.hoststate import HostAttributes, KeyState
from udm.host.kinds import WindowKind
from udm.host.stream import Cti, Element
from udm.host.time import INFINITY

__all__ = ["OutputCtis"]


class OutputCtis(HostAttributes):
    """The output CTI of the general path (see the module docstring)."""

    kind: WindowKind[Any]
    _eager: bool

    def _lowest_open(self, ks: KeyState, c: int) -> int:
        """The earliest time an open (existing or future) window starts."""
        lowest = self.kind.open_from(ks.index, c)
        if ks.wins:
            lowest = min(lowest, ks.wins.peekitem(0)[0])
        return lowest

    def _emit_output_cti(self, c: int, out: list[Element]) -> None:
        # after a CTI at the end of time no element can follow, so no window
        # can still change or come into existence: the output ends too
        if self._eager or c >= INFINITY:
            candidate = c
        else:
            candidate = c
            for ks in self._active.values():  # a quiet key has no window
                if ks.wins:  # starts and ends both increase: the first window is earliest
                    start = ks.wins.keys()[0]
                    candidate = min(
                        candidate, self.policy.earliest_output(start, ks.wins[start].end)
                    )
            candidate = min(candidate, self._earliest_future(c))
        if candidate > self.output_cti:
            self.output_cti = candidate
            out.append(Cti(candidate))

    def _earliest_future(self, c: int) -> int:
        """The earliest output time of windows that do not exist yet (for any
        key, including keys not seen so far)."""
        return self.kind.earliest_future(
            c, self.policy, lambda: chain(self._open_quiet(c), self._open_active(c))
        )

    def _open_active(self, c: int) -> Iterator[int]:
        """The earliest open window start of each active key."""
        return (self._lowest_open(ks, c) for ks in self._active.values())

    def _open_quiet(self, c: int) -> list[int]:
        """The earliest open window start among the quiet keys (empty if
        none), which stays what it was when each went quiet (see
        :meth:`WindowKind.quiet`): the heap's first entry once those of
        keys no longer quiet (active again, dropped, or quiet again since
        with another start) are popped."""
        heap, keys, active = self._quiet, self.keys, self._active
        while heap:
            start, _, key, ks = heap[0]
            quiet = key not in active and keys.get(key) is ks
            if quiet and self._lowest_open(ks, c) == start:
                return [start]
            heappop(heap)
        return []
