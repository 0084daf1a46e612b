"""Errors raised by the SDK when a UDM is defined inconsistently."""

from __future__ import annotations

__all__ = ["UdmDefinitionError"]


class UdmDefinitionError(TypeError):
    """A UDM class or function contradicts its declaration.

    Raised at definition time (class creation or decoration), so a broken
    UDM never reaches a query.
    """
