"""Consistency levels (CEDR's triangle): what a user says, ``"strong"``,
``"middle"``, ``("weak", remember)`` or ``(blocking, remember)``, as the
ticks an Align blocks and a Finalize remembers.

Parsing lives apart from the plan nodes (:class:`~udm.host.plan.AlignNode`,
:class:`~udm.host.plan.FinalizeNode`) because the fixture schema and the
query API check a level long before any plan exists.
:mod:`udm.host.plan` re-exports both functions.
"""

from __future__ import annotations

from typing import Any

from udm.host.time import INFINITY

__all__ = ["consistency_levels", "non_negative_duration"]


def non_negative_duration(value: Any, where: str) -> int:
    """Ticks of a duration that may be unbounded (``None``, ``inf`` or
    :data:`INFINITY`); a negative one is refused, naming ``where``."""
    from udm.host.errors import OperatorError
    from udm.host.time import to_duration_ticks

    if value is None or (isinstance(value, int | float) and value == float("inf")):
        return INFINITY
    d = INFINITY if value == INFINITY else to_duration_ticks(value)
    if d < 0:
        raise OperatorError(where, f"a duration cannot be negative, got {value!r}")
    return d


def consistency_levels(level: Any) -> tuple[int, int]:
    """``(blocking, remember)`` in ticks for a consistency level (see
    :meth:`udm.host.query.Stream.with_consistency`): ``"strong"``, ``"middle"``,
    ``("weak", remember)`` or ``(blocking, remember)`` durations
    (``INFINITY`` for unbounded)."""
    if level == "strong":
        return INFINITY, INFINITY
    if level == "middle":
        return 0, INFINITY
    if level == "weak":
        raise ValueError(
            'consistency "weak" bounds memory: say how much, ("weak", remember) with remember '
            "a duration such as timedelta(minutes=5)"
        )
    if isinstance(level, tuple) and len(level) == 2:
        first, second = level
        if first == "weak":
            return 0, non_negative_duration(second, "consistency remember")
        blocking = non_negative_duration(first, "consistency blocking")
        remember = non_negative_duration(second, "consistency remember")
        if blocking > remember:
            raise ValueError(
                f"consistency (blocking={first!r}, remember={second!r}): blocking longer than "
                "remembering makes no sense (the triangle of consistency levels)"
            )
        return blocking, remember
    raise ValueError(
        f'unknown consistency {level!r}; use "strong", "middle", ("weak", remember) or '
        "(blocking, remember) durations"
    )
