"""The settings of a streaming query: CTI generation (:class:`AdvanceTime`)
and the options of :func:`udm.host.spark.streaming.stream_changelog`
(:class:`StreamOptions`), one frozen value instead of twenty keyword
parameters threaded through every step."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from udm.host.plan import ValueArg
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.time import to_duration_ticks
from udm.host.validation import CtiPolicy

__all__ = ["AdvanceTime", "StreamOptions", "with_settings"]

Opts = TypeVar("Opts")


@dataclass(frozen=True)
class AdvanceTime:
    """StreamInsight-style CTI generation, per key.

    Args:
        every_events: issue a CTI after every N events of the key.
        every: or after this much application time (ticks or a
            ``timedelta``) has passed since the key's last generated CTI.
        delay: the CTI lags the latest event start by this much.
        policy: what happens to an event that arrives behind a CTI:
            ``drop`` or ``adjust`` (counted in the ``stats`` rows), or
            ``raise`` (fails the micro-batch, naming the event).
    """

    every_events: int | None = None
    every: Any = None
    delay: Any = 0
    policy: Literal["drop", "adjust", "raise"] = "drop"

    def __post_init__(self) -> None:
        if self.every_events is None and self.every is None:
            raise ValueError("AdvanceTime needs every_events=N or every=<duration>")
        if self.every_events is not None and self.every_events < 1:
            raise ValueError(f"every_events must be at least 1, not {self.every_events}")
        CtiPolicy.parse(self.policy)

    @property
    def every_ticks(self) -> int | None:
        """``every`` in ticks (None without it)."""
        return None if self.every is None else to_duration_ticks(self.every)

    @property
    def delay_ticks(self) -> int:
        """``delay`` in ticks."""
        return to_duration_ticks(self.delay)


@dataclass(frozen=True)
class StreamOptions:
    """How :func:`~udm.host.spark.streaming.stream_changelog` reads its
    streaming DataFrame and runs the UDM (every field may also be given to
    it as a keyword argument).

    Attributes:
        key: the key column(s); each key runs its own host.
        value: what the UDM reads of a payload (a column name, or None
            for the whole payload).
        input: ``"events"`` (one event per row) or ``"elements"``
            (physical stream rows: insert, retract, cti).
        start: the start (or CTI time) column.
        end: the end column (events without it are points; elements use
            ``end`` when there is one).
        shape: ``point``, ``interval`` or ``edge`` (default: from ``end``
            for events, ``edge`` for elements).
        kind: the element kind column (elements).
        id: the event id column (elements).
        new_end: a retraction's new end column (elements).
        seq: the order of a key's rows within a micro-batch (default:
            events by start, elements as Spark delivers them).
        advance: CTIs generated per key; its policy is then the CTI policy.
        cti_policy: what an element behind a CTI does without ``advance``.
        on_invalid: ``raise`` or ``drop`` (counted) an invalid row.
        input_clipping: how events are clipped to their windows.
        output_policy: the lifetimes of the output events.
        consistency: the host's consistency level.
        returns: the UDM's result type when it is not annotated.
        name: the result column (default: the UDM's name).
        state_buckets: how many buckets keys are hashed into (each one
            state value and one timer).
    """

    key: str | Sequence[str] | None = None
    value: ValueArg = None
    input: Literal["events", "elements"] = "events"
    start: str = "start"
    end: str | None = None
    shape: Literal["point", "interval", "edge"] | None = None
    kind: str = "kind"
    id: str = "id"
    new_end: str = "new_end"
    seq: str | None = None
    advance: AdvanceTime | None = None
    cti_policy: str = "raise"
    on_invalid: Literal["raise", "drop"] = "raise"
    input_clipping: InputClipping | str = InputClipping.NONE
    output_policy: OutputPolicy | str | None = None
    consistency: str = "speculative"
    returns: Any = None
    name: str | None = None
    state_buckets: int = 32

    @property
    def keys(self) -> list[str]:
        """The key columns as a list (none without keys)."""
        return [self.key] if isinstance(self.key, str) else list(self.key or [])

    @property
    def elements(self) -> bool:
        """Whether the input is physical stream rows rather than events."""
        return self.input == "elements"

    @property
    def host_options(self) -> dict[str, Any]:
        """The options every key's :class:`~udm.host.Host` is made with
        (``advance``'s policy is the CTI policy when it is given)."""
        policy = self.advance.policy if self.advance is not None else self.cti_policy
        return {
            "input_clipping": self.input_clipping,
            "output_policy": self.output_policy,
            "consistency": self.consistency,
            "cti_policy": policy,
        }


def with_settings(options: Opts, settings: dict[str, Any]) -> tuple[Opts, dict[str, Any]]:
    """``options`` (a dataclass) with the keyword ``settings`` that name its
    fields, and the other settings (the UDM's own arguments): how the long
    functions keep accepting their options as keyword arguments."""
    names = {f.name for f in dataclasses.fields(options)}  # type: ignore[arg-type]
    own = {k: v for k, v in settings.items() if k in names}
    rest = {k: v for k, v in settings.items() if k not in names}
    return dataclasses.replace(options, **own) if own else options, rest  # type: ignore[type-var]
