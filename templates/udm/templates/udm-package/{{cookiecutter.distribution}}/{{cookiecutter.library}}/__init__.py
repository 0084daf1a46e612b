"""{{ cookiecutter.description | docstring_text | wordwrap(92, false) }}.

UDMs registered as ``{{ cookiecutter.library }}.<name>``: see them with
``udm-cli list --library {{ cookiecutter.library }}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from itertools import pairwise

from udm.sdk import (
    IncrementalAggregate,
    IntervalEvent,
    Properties,
    TimeSensitiveOperator,
    WindowDescriptor,
    hookimpl,
)

__version__ = "{{ cookiecutter.version }}"


class Rms(IncrementalAggregate):
    """Root mean square of the window's values.

    Incremental: the host adds and removes events as windows change instead
    of recomputing; ``remove`` makes it invertible and ``merge`` mergeable
    (partial aggregation on Spark), both derived from the methods. The sum
    of squares is an exact ``Fraction``: ``remove`` must undo ``add``
    exactly, and a float sum would not (1.0 added next to 1e9 squared is
    lost, so removing 1e9 again would leave 0.0).

    Example: values 3 and 4 give sqrt((9 + 16) / 2) = 3.5355...
    """

    def initial_state(self) -> tuple[Fraction, int]:
        return (Fraction(0), 0)

    def add(self, state: tuple[Fraction, int], value: float) -> tuple[Fraction, int]:
        return (state[0] + Fraction(value) ** 2, state[1] + 1)

    def remove(self, state: tuple[Fraction, int], value: float) -> tuple[Fraction, int]:
        return (state[0] - Fraction(value) ** 2, state[1] - 1)

    def merge(self, a: tuple[Fraction, int], b: tuple[Fraction, int]) -> tuple[Fraction, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[Fraction, int]) -> float:
        return math.sqrt(state[0] / state[1])


class Jumps(TimeSensitiveOperator):
    """A point event at each value that exceeds the previous one (in time
    order) by more than ``threshold``; the payload is the size of the jump.
    Jumps are reported at the later event's start, inside the window.

    Time-sensitive: it reads the events' start times and timestamps its own
    output. Example: values 1, 5, 6 at times 0, 1, 2 with threshold 2 give
    one point event at 1 with payload 4.
    """

    # The result depends on the order of events with equal start times.
    properties = Properties(order_insensitive=False)

    def __init__(self, threshold: float = 0.0) -> None:
        self.threshold = threshold

    def compute_result(
        self, events: Sequence[IntervalEvent[float]], window: WindowDescriptor
    ) -> list[IntervalEvent[float]]:
        out: list[IntervalEvent[float]] = []
        for prev, cur in pairwise(events):
            # an event that began before the window still counts as "previous",
            # but a jump is reported only inside the window it was seen in
            if cur.start >= window.start and cur.payload - prev.payload > self.threshold:
                out.append(IntervalEvent(cur.start, cur.start + 1, cur.payload - prev.payload))
        return out


@hookimpl
def udm_udms() -> list[object]:
    """The UDMs of this library, registered as {{ cookiecutter.library }}.<name>."""
    return [Rms, Jumps]
