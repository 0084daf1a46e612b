"""Checks of a YAML query spec's fields that need no Spark: a ``returns``
naming no Spark type, an ``output_policy`` the UDM cannot take; and how a
spec's fields are found (their lines) and errors shown (their first line).
Split from :mod:`udm.cli.queryfile`, which reports them with the spec's
other mistakes, every one at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["field_line", "first_line", "policy_problem", "returns_problem"]


def field_line(data: Any, field: str) -> int:
    """The line of a dotted field (``source.start``) of a loaded spec; for a
    field that is a list, the line of the list."""
    line = 1
    for part in field.split("."):
        lines = getattr(data, "lines", None)
        if not isinstance(lines, dict) or part not in lines:
            break
        line, data = lines[part], data[part]
    return line


def first_line(exc: BaseException) -> str:
    """An exception's message without Spark's stack trace."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, KeyError) and first.startswith(("'", '"')):
        first = first[1:-1]  # KeyError quotes its message
    return first or type(exc).__name__


#: one-word Spark DDL types that have no JSON name (Spark parses them)
_DDL_WORDS = frozenset(
    {"tinyint", "smallint", "int", "bigint", "real", "bool", "dec", "numeric"}
    | {"timestamp_ltz", "char", "varchar", "interval", "variant", "time"}
)


def returns_problem(path: Path, data: Any) -> list[str]:
    """A ``returns:`` that is one word naming no Spark type, before Spark
    starts and on every engine (``--engine local`` too, so a spec checked
    locally does not fail on Spark); longer DDL (``struct<...>``) is
    Spark's to parse."""
    returns = data.get("returns")
    if not isinstance(returns, str) or not re.fullmatch(r"\s*\w+\s*", returns):
        return []
    from udm.host.spark.types import parse_without_jvm

    if parse_without_jvm(returns) is not None or returns.strip().lower() in _DDL_WORDS:
        return []
    return [
        f"{path}:{field_line(data, 'returns')}: returns: {returns!r} is not a Spark type; give "
        "one in Spark's DDL, such as double, bigint, string or struct<lo: double, hi: double>"
    ]


def policy_problem(path: Path, data: Any, udm: Any) -> list[str]:
    """An ``output_policy`` the UDM cannot take (``clip`` or ``keep`` on a
    UDM that does not timestamp its output), at the ``output_policy:``
    line and before Spark starts, with the spec's other mistakes (it was
    found only once they were fixed, and blamed on ``aggregate:``)."""
    from udm.host.policies import resolve_output_policy
    from udm.host.windows import SnapshotWindow

    policy = data.get("output_policy")
    if not isinstance(policy, str):
        return []  # the default fits every UDM; a non-string is a field mistake
    try:
        # the window matters for the default only (a policy given is checked
        # against the UDM alone), so any window does
        resolve_output_policy(policy, SnapshotWindow(), udm)
    except ValueError as exc:
        if policy not in _POLICIES:  # an unknown name: the validation says so
            return []
        return [f"{path}:{field_line(data, 'output_policy')}: output_policy: {first_line(exc)}"]
    return []


#: the output policies a spec may name (QuerySpec.output_policy)
_POLICIES = frozenset({"align", "point_end", "clip", "keep", "time_bound"})
