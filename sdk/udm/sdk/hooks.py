"""The pluggy marker UDM libraries use to register their UDMs.

A library implements the host's hook (``udm_udms``) and declares an entry
point in the ``udm`` group; the host discovers it at run time::

    from udm.sdk import hookimpl

    @hookimpl
    def udm_udms():
        return [Median, Quantile]

    # pyproject.toml
    [project.entry-points.udm]
    stats = "udm_stats"          # the entry point name is the library name

Only the marker lives here: the specifications are the host's
(``udm.host.hookspecs``), so a library depends on ``udm.sdk`` alone.
"""

from __future__ import annotations

import pluggy

__all__ = ["PROJECT_NAME", "hookimpl"]

#: The pluggy project name shared by the marker and the host's plugin manager.
PROJECT_NAME = "udm"

#: Decorator marking a UDM library's hook implementations.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
