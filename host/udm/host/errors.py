"""Errors the host raises about input streams and UDM invocations."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CLOSE_ADVICE",
    "STREAM_CLOSE_ADVICE",
    "CtiViolationError",
    "InvalidElementError",
    "InvalidEventError",
    "OpenEventError",
    "OperatorError",
    "StreamError",
    "UdmInvocationError",
    "raised_at",
]


class StreamError(ValueError):
    """A physical stream element was rejected.

    Attributes:
        element: the offending element.
        position: its 0-based position in the stream as seen by the validator.
        reason: what is wrong, without the element prefix.
    """

    def __init__(self, element: Any, position: int, reason: str) -> None:
        self.element = element
        self.position = position
        self.reason = reason
        super().__init__(f"element #{position} {element!r}: {reason}")


class InvalidElementError(StreamError):
    """The element is malformed or inconsistent with earlier elements."""


class CtiViolationError(StreamError):
    """The element modifies time before the latest CTI (or the CTI goes backwards)."""


class UdmInvocationError(RuntimeError):
    """A UDM raised (or returned something invalid) while computing a window.

    The message names the UDM, the window and, in the incremental host, the
    element that triggered the computation and the window's events (a CTI
    that finalizes a window triggers its computation, so the element alone
    may not point at the event the UDM choked on); the original exception is
    the ``__cause__``.
    """

    SHOWN = 5

    def __init__(
        self,
        udm: str,
        window: Any,
        detail: str,
        element: Any = None,
        events: Sequence[Any] | None = None,
    ) -> None:
        self.udm = udm
        self.window = window
        self.element = element
        self.events = list(events or [])
        where = f"UDM {udm!r} failed on window {window}"
        if element is not None:
            where += f" while processing {element!r}"
        message = f"{where}: {detail}"
        # raised while handling the UDM's own exception: say where, in the
        # UDM's code (the user's line, not the host's)
        handled = sys.exc_info()[1]
        if isinstance(handled, UdmInvocationError):
            handled = handled.__cause__
        at = raised_at(handled) if handled is not None else None
        if at:
            message += f"; raised at {at}"
        if self.events:
            shown = ", ".join(str(e) for e in self.events[: self.SHOWN])
            more = len(self.events) - self.SHOWN
            message += f"; the window's events: {shown}" + (f" and {more} more" if more > 0 else "")
        super().__init__(message)


class InvalidEventError(ValueError):
    """An input row cannot be an event (null or unparsable time, end not
    after start). The message names the column and shows the row."""


class OpenEventError(ValueError):
    """Hopping or tumbling windows over an event that never ends, up to the
    end of time: infinitely many. ``what`` says so and ``advice`` is what
    the API that raised it lets the caller do about it (a watermark for
    ``evaluate``, finite CTIs for a live graph, ending the event for a
    Stream query, whose input always ends at the end of time)."""

    def __init__(self, what: str, advice: str) -> None:
        self.what = what
        self.advice = advice
        super().__init__(f"{what}; {advice}")


#: an :class:`OpenEventError`'s advice when a CTI at the end of time, sent
#: to a live graph, would close infinitely many windows
CLOSE_ADVICE = (
    "end it with a retraction first, or send only finite CTIs (a CTI at INFINITY "
    "closes every window)"
)

#: the advice of the Stream API (``to_cht(engine="host")``, ``to_events``),
#: whose input always ends with a CTI at the end of time
STREAM_CLOSE_ADVICE = (
    "a Stream query's input ends at the end of time, so end the event with a "
    "retraction, or bound lifetimes before the window (clip_to()); "
    "engine='reference' or 'spark' also take aggregate(..., watermark=t) "
    "(apply(..., watermark=t)), which outputs only the windows complete by t"
)


class OperatorError(ValueError):
    """A temporal operator (join, union, alter_lifetime, align, finalize)
    was given something it cannot take: a start function that is not
    monotone, streams whose keys differ, a negative duration, an
    ExternalCTI whose count is below what arrived. The message names the
    operator and the offending element; the operator's state is unchanged.
    """

    def __init__(self, operator: str, reason: str, element: Any = None) -> None:
        self.operator = operator
        self.element = element
        self.reason = reason
        at = f" at {element!r}" if element is not None else ""
        super().__init__(f"{operator}{at}: {reason}" if operator or at else reason)


def raised_at(exc: BaseException) -> str | None:
    """``file:line in function: source line`` of the deepest frame of
    ``exc``'s traceback in the user's code (outside udm and Python's
    library), or None: where a UDM raised, to show with the host's message."""
    import udm

    frames = traceback.extract_tb(exc.__traceback__)
    # every part of the udm namespace (one folder in a wheel; sdk/udm,
    # host/udm, ... in a checkout), then Python's own library
    ours = tuple(os.path.realpath(part) + os.sep for part in udm.__path__)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
    for frame in reversed(frames):
        path = os.path.realpath(frame.filename)
        if path.startswith((*ours, stdlib)) or frame.filename.startswith("<"):
            continue
        line = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
        return f"{frame.filename}:{frame.lineno} in {frame.name}" + (f": {line}" if line else "")
    return None
