"""Input clipping and output timestamping policies.

Input clipping adjusts the lifetimes of a window's events before the UDM
sees them; the output policy decides the lifetimes of what the UDM returns.
Both are chosen by the query writer (paper, section III.C).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from udm.host.windows import CountByEndWindow, CountByStartWindow, WindowSpec
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["InputClipping", "OutputPolicy", "default_output_policy", "resolve_output_policy"]


class InputClipping(StrEnum):
    """How event lifetimes are clipped to the window before the UDM sees them."""

    NONE = "none"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"

    @classmethod
    def parse(cls, value: InputClipping | str) -> InputClipping:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"unknown input clipping {value!r}; use one of: none, left, right, full"
            ) from None

    @property
    def clips_right(self) -> bool:
        return self in (InputClipping.RIGHT, InputClipping.FULL)

    @property
    def clips_left(self) -> bool:
        return self in (InputClipping.LEFT, InputClipping.FULL)

    def clip(self, event: IntervalEvent[Any], window: WindowDescriptor) -> IntervalEvent[Any]:
        start, end = event.start, event.end
        if self.clips_left and start < window.start:
            start = window.start
        if self.clips_right and end > window.end:
            end = window.end
        if start == event.start and end == event.end:
            return event
        return IntervalEvent(start, end, event.payload)


class OutputPolicy(StrEnum):
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

    @classmethod
    def parse(cls, value: OutputPolicy | str) -> OutputPolicy:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"unknown output policy {value!r}; use one of: "
                "align, point_end, clip, keep, time_bound"
            ) from None

    @property
    def uses_udm_timestamps(self) -> bool:
        return self in (OutputPolicy.CLIP, OutputPolicy.KEEP, OutputPolicy.TIME_BOUND)


def default_output_policy(window: WindowSpec, udm: Any) -> OutputPolicy:
    """The default output policy.

    Time-sensitive operators keep their own timestamps clipped to the window
    (``clip``). Everything else gets ``point_end`` on count windows and
    ``align`` on hopping, tumbling and snapshot windows, as in StreamInsight.
    """
    if udm.kind == "operator" and udm.time_sensitive:
        return OutputPolicy.CLIP
    if isinstance(window, CountByStartWindow | CountByEndWindow):
        return OutputPolicy.POINT_END
    return OutputPolicy.ALIGN


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
