"""Hook specifications a UDM library implements (with ``udm.sdk.hookimpl``).

The host owns the specifications, as pytest owns ``pytest_*`` hooks: a
library module named by an entry point of the ``udm`` group is registered
with a pluggy ``PluginManager("udm")`` and its implementations are called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pluggy

from udm.sdk.hooks import PROJECT_NAME

__all__ = ["hookspec", "udm_udms"]

hookspec = pluggy.HookspecMarker(PROJECT_NAME)


@hookspec
def udm_udms() -> Iterable[Any] | Mapping[str, Any]:  # type: ignore[empty-body]
    """The UDMs of a library: UDM classes, UDM instances or ``@function`` UDFs.

    Return an iterable (each is registered under its ``name`` attribute) or a
    mapping ``{short_name: udm}``. The registry names each one
    ``<library>.<short_name>``, where the library is the entry point's name.
    """
