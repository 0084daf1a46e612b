"""The window-kind protocol: what every engine may ask of a window spec.

:class:`WindowSpec` is the base of every window kind
(:mod:`udm.host.windows` holds the kinds). Like Beam's ``WindowFn``, a
spec answers every question about its kind, so that engines, planners and
test tools ask it and never switch on its class (``tests/test_window_kinds.py``
fails on an ``isinstance`` check of a window kind outside
:mod:`udm.host.windows` and :mod:`udm.host.kinds`):

* time questions, for Python ints and numpy arrays alike: membership
  (:meth:`WindowSpec.holds`), the windows an event can touch
  (:meth:`WindowSpec.touching`), the windows a change may reshape
  (:meth:`WindowSpec.affected`), finality before a CTI
  (:meth:`WindowSpec.final_before`);
* the definition over a finite set of events (:meth:`WindowSpec.windows`),
  which the reference evaluator uses;
* traits the engines plan with: whether the windows are a fixed grid
  (:attr:`WindowSpec.grid`: the grid's arithmetic, or None), whether each
  window's members are a run of the events sorted by start
  (:attr:`WindowSpec.members_by_start`), the default output policy, and
  the texts ``explain`` shows (:meth:`WindowSpec.describe`,
  :attr:`WindowSpec.sql_assignment`).

Per-engine strategies that need more than these (the incremental host's
:class:`~udm.host.kinds.WindowKind`, Spark's assigners and numpy ranges)
are registered per spec class, found through the class's MRO.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from udm.host.time import INFINITY
from udm.sdk.events import IntervalEvent, WindowDescriptor

if TYPE_CHECKING:
    from udm.host.windows import HoppingWindow

__all__ = ["IndexBound", "WindowSpec", "changed_span"]


class WindowSpec(ABC):
    """A window kind with its parameters.

    Like Beam's ``WindowFn``, a spec owns every question about its kind, so
    that engines ask it instead of switching on its class: which events a
    window holds (:meth:`holds`), which windows a change of one event may
    affect (:meth:`affected`), and whether a window is final once a CTI
    arrives (:meth:`final_before`). The time questions are plain arithmetic
    and comparisons joined by ``&``, so each answers for Python ints and, in
    the same call, for numpy int64 arrays (elementwise), which the Spark
    workers pass; no numpy is needed to import this module.
    """

    kind: ClassVar[str]
    #: Grid windows (hopping, tumbling) exist independently of the events
    #: (:attr:`grid` is their arithmetic).
    is_grid: ClassVar[bool] = False
    #: Whether a window's members are exactly the events starting in it
    #: (count by start): over the events sorted by start, each window's
    #: members are one run, which engines read as a slice.
    members_by_start: ClassVar[bool] = False
    #: How Spark SQL assigns these windows to events, as ``explain`` shows
    #: it (the assigner registered in ``udm.host.spark.windows.ASSIGNERS``).
    sql_assignment: ClassVar[str] = "windows assigned to events in Spark SQL"
    #: The output policy (its value) a time-insensitive UDM gets by default
    #: (StreamInsight's: a window's lifetime, or its last tick for count
    #: windows, whose lifetimes are artefacts of the member times).
    default_output: ClassVar[str] = "align"
    #: Whether a window is final only once its members have ended too (for
    #: a UDM that sees member ends): a member's end may still move into it.
    #: Count-by-end windows are defined by those ends, so they never wait.
    final_waits_for_members: ClassVar[bool] = True

    @property
    def grid(self) -> HoppingWindow | None:
        """The spec as a fixed grid of windows, or None when the events
        define the windows. The grid (a :class:`~udm.host.windows.HoppingWindow`:
        tumbling windows are one, a new grid kind subclasses it) holds the
        index arithmetic every grid path shares: window ``k``'s bounds,
        the indexes a lifetime touches, the last index final before a CTI,
        and the same in Spark SQL.

        >>> from udm.host.windows import SnapshotWindow, TumblingWindow
        >>> SnapshotWindow().grid is None, TumblingWindow(10).grid
        (True, TumblingWindow(size=10))
        """
        return None

    def require_grid(self, what: str) -> HoppingWindow:
        """:attr:`grid`, for code that only runs on grid windows (``what``
        names it): a clear error instead of a wrong answer if a planner
        sends it another kind.

        >>> from udm.host.windows import SnapshotWindow
        >>> SnapshotWindow().require_grid("the pane fold")
        Traceback (most recent call last):
        ...
        TypeError: the pane fold runs on grid windows (hopping, tumbling), not SnapshotWindow()
        """
        grid = self.grid
        if grid is None:
            raise TypeError(f"{what} runs on grid windows (hopping, tumbling), not {self!r}")
        return grid

    def holds(self, start: Any, end: Any, w_start: Any, w_end: Any) -> Any:
        """Whether an event ``[start, end)`` is a member of the window
        ``[w_start, w_end)``: here, whether they overlap. Scalars give a
        bool, numpy arrays a boolean array; O(1) per element.

        >>> from udm.host.windows import HoppingWindow, SnapshotWindow
        >>> SnapshotWindow().holds(3, 5, 5, 8), SnapshotWindow().holds(3, 6, 5, 8)
        (False, True)
        """
        return (start < w_end) & (w_start < end)

    def touching(
        self, w_starts: Sequence[int], w_ends: Sequence[int], start: int, end: int
    ) -> tuple[int, int]:
        """The positions ``lo:hi`` of the windows an event ``[start, end)``
        can belong to, among windows listed by start (every kind's windows,
        so listed, also have increasing ends): those starting before it ends
        and ending after it starts. :meth:`holds` still decides each one.
        O(log windows), by bisection.

        >>> from udm.host.windows import HoppingWindow
        >>> HoppingWindow(10, 5).touching([0, 5, 10], [10, 15, 20], 7, 12)
        (0, 3)
        """
        return bisect_right(w_ends, start), bisect_left(w_starts, end)

    def affected(
        self, old: tuple[int, int] | None, new: tuple[int, int] | None, sees_ends: bool
    ) -> list[tuple[int, int]]:
        """Time ranges ``[lo, hi)`` holding every window whose shape or
        members may change when an event's lifetime ``old`` becomes ``new``
        (``None``: inserted or deleted; a lifetime change keeps the start).
        ``sees_ends``: the UDM sees member end times, so a window whose
        member only moved its end changes too. O(1).

        >>> from udm.host.windows import HoppingWindow
        >>> HoppingWindow(10, 5).affected(None, (3, 7), False)
        [(3, 7)]
        >>> HoppingWindow(10, 5).affected((3, 7), (3, 12), False)
        [(7, 12)]
        >>> HoppingWindow(10, 5).affected((3, 7), (3, 12), True)
        [(3, 12)]
        """
        return [changed_span(old, new, sees_ends)]

    def final_before(self, w_end: Any, cti: Any) -> Any:
        """Whether a window ending at ``w_end`` can no longer change its
        shape once a CTI at ``cti`` arrives (members' own ends aside, see
        :attr:`final_waits_for_members`): no event may start before the
        CTI, so a window ending at or before it is final. Scalars or numpy
        arrays; O(1) per element.

        >>> from udm.host.windows import HoppingWindow
        >>> HoppingWindow(10, 5).final_before(10, 10)
        True
        """
        return w_end <= cti

    def range_problem(self, start: int, end: int) -> str | None:
        """Why an event ``[start, end)`` cannot be windowed, or None: any
        event can, unless a kind's windows would leave the tick range."""
        return None

    @abstractmethod
    def windows(
        self, events: Sequence[IntervalEvent[Any]], watermark: int = INFINITY
    ) -> list[WindowDescriptor]:
        """Every non-empty window ending at or before ``watermark``, by start."""

    def belongs(self, event: IntervalEvent[Any], window: WindowDescriptor) -> bool:
        """Whether ``event`` is a member of ``window`` (:meth:`holds`)."""
        return bool(self.holds(event.start, event.end, window.start, window.end))

    def members(
        self, window: WindowDescriptor, events: Sequence[IntervalEvent[Any]]
    ) -> list[IntervalEvent[Any]]:
        """The events that :meth:`belongs` puts in ``window``."""
        return [e for e in events if self.belongs(e, window)]

    def describe(self, durations: bool = False) -> str:
        """The spec as its repr; with ``durations`` (for queries over
        datetimes), kinds with sizes give them in units:
        ``HoppingWindow(size=1h, hop=15m)``."""
        return repr(self)


def changed_span(
    old: tuple[int, int] | None, new: tuple[int, int] | None, sees_ends: bool
) -> tuple[int, int]:
    """The time ``[lo, hi)`` an event's change covers: its whole lifetime
    when inserted, deleted or (``sees_ends``) seen whole, else the span
    between its old and its new end.

    >>> changed_span((3, 7), (3, 12), False), changed_span((3, 7), None, False)
    ((7, 12), (3, 7))
    """
    if old is None or new is None:
        ev = new if new is not None else old
        assert ev is not None
        return ev[0], ev[1]
    lo, hi = min(old[1], new[1]), max(old[1], new[1])
    return (new[0] if sees_ends else lo), hi


@dataclass(frozen=True)
class IndexBound:
    """One end of the grid indexes a time ``t`` touches:
    ``floor((t - shift) / step) + add``, or ``ceil`` when ``up``.

    The grid answers :meth:`~udm.host.windows.HoppingWindow.index_range`
    with two of these (first and last window of a lifetime), and the same
    object writes that formula in Spark SQL (:meth:`sql`), so the host,
    the numpy workers and Spark SQL share one definition.

    Computed as ``floor(t / step)`` plus a correction from ``t mod step``
    and ``shift mod step``, never ``t - shift``: that difference leaves
    int64 near the ends of the tick range (an event starting at the
    earliest time a grid accepts), where numpy would wrap silently and
    Spark SQL fail. So the answer is exact for Python ints, numpy int64
    arrays and Spark BIGINTs alike, wherever the index itself fits.

    >>> b = IndexBound(shift=12, step=5, add=1)
    >>> b.at(3), b.at(17)  # floor(-9/5) + 1, floor(5/5) + 1
    (-1, 2)
    >>> IndexBound(shift=3, step=5, add=-1, up=True).at(14)  # ceil(11/5) - 1
    2
    """

    shift: int
    step: int
    add: int
    up: bool = False
    #: ``shift mod step``, and ``add - floor(shift / step)``
    rem: int = field(init=False, repr=False)
    const: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        q, r = divmod(self.shift, self.step)
        object.__setattr__(self, "rem", r)
        object.__setattr__(self, "const", self.add - q)

    def at(self, t: Any) -> Any:
        """The bound for ``t`` (an int or a numpy int64 array); O(1) per
        element. Python ints (the host) never overflow, nor do arrays whose
        times all lie above ``shift - INFINITY``: for them the formula
        itself. Otherwise, with ``t = q*step + r`` and ``shift = qs*step +
        rs``, the floor is ``q - qs`` less one where ``r < rs`` (the
        ceiling: more one where ``r > rs``), which stays within int64;
        it costs twice the divisions, so only arrays reaching that low
        pay for it."""
        step = self.step
        if t.__class__ is int or not t.size or t.min() >= self.shift - INFINITY:
            if self.up:
                return -((self.shift - t) // step) + self.add
            return (t - self.shift) // step + self.add
        q, r = t // step, t % step
        if self.up:
            return q - (self.rem - r) // step + self.const
        return q + (r - self.rem) // step + self.const

    def sql(self, t: str) -> str:
        """The bound in Spark SQL for the BIGINT expression ``t`` (written
        once: ``t`` should be a column or a cheap expression). ``div``
        truncates towards zero, so the floor of a negative quotient with a
        remainder is one less. ``tests/test_window_kinds.py`` runs it in
        Spark against :meth:`at` at the edges of the tick range."""
        step, rem = self.step, self.rem
        floor = f"({t}) div {step}L - CASE WHEN ({t}) % {step}L < 0 THEN 1L ELSE 0L END"
        if self.up:
            fix = f"CASE WHEN pmod(({t}), {step}L) > {rem}L THEN 1L ELSE 0L END"
        else:
            fix = f"CASE WHEN pmod(({t}), {step}L) < {rem}L THEN -1L ELSE 0L END"
        return f"{floor} + {fix} + {self.const}L"
