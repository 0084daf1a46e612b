"""Reading a UDM's value from a payload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["pick"]


_SCALARS = frozenset({float, int, str, bool, bytes})


def pick(payload: Any, field: str | None) -> Any:
    """The value a UDM works on: the payload itself (``field=None``), or its
    ``field`` when payloads are mappings. The errors say what to pass, so
    UDM libraries can offer a ``field=`` argument with one call."""
    if field is None:
        if type(payload) in _SCALARS:  # the common case, without an ABC check
            return payload
        if isinstance(payload, Mapping):
            raise TypeError(
                f"payload {payload!r} is a mapping; pass field='<name>' to the UDM "
                "(or value='<column>' to the query) to pick the value"
            )
        return payload
    if not isinstance(payload, Mapping):
        raise TypeError(f"field={field!r} given but the payload {payload!r} is not a mapping")
    try:
        return payload[field]
    except KeyError:
        raise KeyError(
            f"payload has no field {field!r}; its fields are {sorted(payload)}"
        ) from None
