"""Input clipping and output timestamping policies.

Input clipping adjusts the lifetimes of a window's events before the UDM
sees them; the output policy decides the lifetimes of what the UDM returns.
Both are chosen by the query writer (paper, section III.C).
"""

from __future__ import annotations

from typing import Any

from udm.host.choices import Choice
from udm.host.windows import WindowSpec
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["InputClipping", "OutputPolicy", "default_output_policy", "resolve_output_policy"]


class InputClipping(Choice, label="input clipping"):
    """How event lifetimes are clipped to the window before the UDM sees them."""

    NONE = "none"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"

    @property
    def clips_right(self) -> bool:
        """Whether events are cut at the window's end (``right`` and ``full``)."""
        return self in (InputClipping.RIGHT, InputClipping.FULL)

    @property
    def clips_left(self) -> bool:
        """Whether events are cut at the window's start (``left`` and
        ``full``)."""
        return self in (InputClipping.LEFT, InputClipping.FULL)

    def clip(self, event: IntervalEvent[Any], window: WindowDescriptor) -> IntervalEvent[Any]:
        """``event`` as the UDM sees it in ``window`` (the same event when
        no bound moves).

        >>> InputClipping.LEFT.clip(IntervalEvent(2, 9, "a"), WindowDescriptor(5, 8))
        IntervalEvent(start=5, end=9, payload='a')
        """
        start, end = event.start, event.end
        if self.clips_left and start < window.start:
            start = window.start
        if self.clips_right and end > window.end:
            end = window.end
        if start == event.start and end == event.end:
            return event
        return IntervalEvent(start, end, event.payload)

    def clip_starts(self, starts: list[int], w_start: int) -> list[int]:
        """:meth:`clip`'s starts for many members of the window starting at
        ``w_start`` (the list itself when the starts are not clipped). O(n).

        >>> InputClipping.FULL.clip_starts([2, 6], 5), InputClipping.RIGHT.clip_starts([2], 5)
        ([5, 6], [2])
        """
        return [max(s, w_start) for s in starts] if self.clips_left else starts

    def clip_ends(self, ends: list[int], w_end: int) -> list[int]:
        """:meth:`clip`'s ends for many members of the window ending at
        ``w_end`` (the list itself when the ends are not clipped). O(n).

        >>> InputClipping.FULL.clip_ends([7, 9], 8)
        [7, 8]
        """
        return [min(e, w_end) for e in ends] if self.clips_right else ends

    def clip_arrays(self, starts: Any, ends: Any, w_starts: Any, w_ends: Any) -> tuple[Any, Any]:
        """:meth:`clip` in numpy form: the clipped lifetimes of memberships
        ``(starts[i], ends[i])`` in windows ``[w_starts[i], w_ends[i])``
        (the arrays themselves where not clipped). O(n), vectorized.

        >>> import numpy as np
        >>> s, e = InputClipping.LEFT.clip_arrays(
        ...     np.array([2, 6]), np.array([9, 7]), np.array([5, 5]), np.array([8, 8]))
        >>> s.tolist(), e.tolist()
        ([5, 6], [9, 7])
        """
        import numpy as np  # the Spark extra's: the in-process host needs no numpy

        cs = np.maximum(starts, w_starts) if self.clips_left else starts
        ce = np.minimum(ends, w_ends) if self.clips_right else ends
        return cs, ce


class OutputPolicy(Choice, label="output policy"):
    """How output lifetimes are set.

    * ``align``: the window's lifetime (the only choice the paper gives
      time-insensitive UDMs; overrides a time-sensitive UDO's timestamps);
    * ``point_end``: a point event at the window's last tick
      ``[W.end - 1, W.end)`` (StreamInsight's PointAlignToWindowEnd);
    * ``clip``: the UDO's lifetimes clipped to the window;
    * ``keep``: the UDO's lifetimes unchanged; an output starting before its
      window is an error (it could violate an output CTI);
    * ``time_bound``: as ``keep``, declaring that the UDM outputs at or
      after the sync time of the element that caused it (the paper's
      TimeBoundOutputInterval), which lets the incremental host's output
      CTIs follow input CTIs immediately; an output that would then modify
      time before an emitted output CTI fails.
    """

    ALIGN = "align"
    POINT_END = "point_end"
    CLIP = "clip"
    KEEP = "keep"
    TIME_BOUND = "time_bound"

    @property
    def uses_udm_timestamps(self) -> bool:
        """Whether output lifetimes come from the UDM's events (``clip``,
        ``keep``, ``time_bound``) rather than from the window."""
        return self in (OutputPolicy.CLIP, OutputPolicy.KEEP, OutputPolicy.TIME_BOUND)

    def window_lifetime(self, w_start: Any, w_end: Any) -> tuple[Any, Any]:
        """The output lifetime of a window's result under a policy that
        ignores UDM timestamps (``align``: the window's; ``point_end``: its
        last tick), as :func:`stamp` gives it. Ints or numpy arrays of
        windows alike, O(1) per window.

        >>> OutputPolicy.POINT_END.window_lifetime(0, 10), OutputPolicy.ALIGN.window_lifetime(0, 10)
        ((9, 10), (0, 10))
        """
        if self is OutputPolicy.POINT_END:
            return w_end - 1, w_end
        if self is not OutputPolicy.ALIGN:
            raise ValueError(f"output policy {self.value!r} places outputs by the UDM's timestamps")
        return w_start, w_end

    def earliest_output(self, w_start: int, w_end: int) -> int:
        """The earliest time a window's output may start: its last tick under
        ``point_end``, else its start (``clip`` and ``keep`` never output
        before the window). Output CTIs wait for it.

        >>> OutputPolicy.POINT_END.earliest_output(0, 10), OutputPolicy.CLIP.earliest_output(0, 10)
        (9, 0)
        """
        return w_end - 1 if self is OutputPolicy.POINT_END else w_start


def default_output_policy(window: WindowSpec, udm: Any) -> OutputPolicy:
    """The default output policy.

    Time-sensitive operators keep their own timestamps clipped to the window
    (``clip``). Everything else gets ``point_end`` on count windows and
    ``align`` on hopping, tumbling and snapshot windows, as in StreamInsight.
    """
    if udm.kind == "operator" and udm.time_sensitive:
        return OutputPolicy.CLIP
    return OutputPolicy(window.default_output)


def resolve_output_policy(
    policy: OutputPolicy | str | None, window: WindowSpec, udm: Any
) -> OutputPolicy:
    """Parse the query writer's choice (``None`` for the default) and check
    that it fits the UDM."""
    if policy is None:
        return default_output_policy(window, udm)
    resolved = OutputPolicy.parse(policy)
    if resolved.uses_udm_timestamps and not (udm.kind == "operator" and udm.time_sensitive):
        raise ValueError(
            f"output policy {resolved.value!r} keeps timestamps chosen by the UDM, but "
            f"{udm.name!r} is a {udm.flavor()} and does not timestamp its output; "
            "use 'align' or 'point_end'"
        )
    return resolved


def stamp(
    policy: OutputPolicy, window: WindowDescriptor, event: IntervalEvent[Any] | None, payload: Any
) -> IntervalEvent[Any]:
    """The output event for one result under ``policy`` (``event`` is the
    UDO's own output event, or ``None`` for results without timestamps).

    Raises ``ValueError`` with the reason when the policy cannot place it.
    """
    if policy is OutputPolicy.ALIGN or (event is None and policy is not OutputPolicy.POINT_END):
        return IntervalEvent(window.start, window.end, payload)
    if policy is OutputPolicy.POINT_END:
        # a window that never ends (over an event still open at the end of
        # the stream) ends with time itself: its point is the last tick
        return IntervalEvent(window.end - 1, window.end, payload)
    assert event is not None
    if policy is OutputPolicy.CLIP:
        start, end = max(event.start, window.start), min(event.end, window.end)
        if end <= start:
            raise ValueError(
                f"output event [{event.start}, {event.end}) lies outside the window, "
                "so clipping leaves nothing"
            )
        return IntervalEvent(start, end, payload)
    if event.start < window.start:
        raise ValueError(
            f"output event [{event.start}, {event.end}) starts before its window; "
            f"policy {policy.value!r} forbids output in the past (use 'clip')"
        )
    return IntervalEvent(event.start, event.end, payload)
