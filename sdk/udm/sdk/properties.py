"""Optimizer properties a UDM declares about itself.

The host and the optimizer reason about these instead of treating the UDM as
a black box (the paper's "breaking optimization boundaries" principle):
``invertible`` lets the host remove an event from a window state instead of
recomputing, ``mergeable`` allows partial aggregation, ``deterministic`` lets
retractions re-invoke the UDM, and so on.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["Properties"]


@dataclass(frozen=True, slots=True)
class Properties:
    """Declared properties of a UDM.

    ``None`` for ``invertible``, ``mergeable`` and ``output_within_window``
    means "derive it from the class": an incremental UDM with ``remove`` is
    invertible, one with ``merge`` is mergeable, and a time-sensitive operator
    is assumed to keep its output inside the window unless it says otherwise.

    Attributes:
        deterministic: The same input always gives the same output.
        invertible: ``remove`` exactly undoes ``add`` (incremental UDMs only).
        mergeable: ``merge`` combines two partial states (incremental only).
        empty_preserving: An empty window produces no output.
        order_insensitive: The result does not depend on input order.
        output_within_window: A time-sensitive operator's output lifetimes
            stay inside the window they were computed for.
        time_bound: A time-sensitive operator's output in response to a
            change never starts before the change's sync time (the paper's
            TimeBoundOutputInterval), which allows maximal output liveliness.
    """

    deterministic: bool = True
    invertible: bool | None = None
    mergeable: bool | None = None
    empty_preserving: bool = True
    order_insensitive: bool = True
    output_within_window: bool | None = None
    time_bound: bool = False

    def resolved(self, **derived: bool) -> Properties:
        """Fill the ``None`` fields from what the class actually implements."""
        updates = {k: v for k, v in derived.items() if getattr(self, k) is None}
        return replace(self, **updates)

    def as_dict(self) -> dict[str, Any]:
        """Every property by name, for listings and JSON output."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def enabled(self) -> list[str]:
        """Names of the properties that hold, for listings."""
        return [name for name, value in self.as_dict().items() if value]
