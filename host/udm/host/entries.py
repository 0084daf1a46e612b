"""What the UDM registry holds: one :class:`UdmEntry` per registered UDM
(its qualified name, where it came from, how to call it) and one
:class:`LibraryFailure` per library that did not load.

Entries are what ``udm-cli list`` and the catalog show, so describing a
UDM (its signature, docstring, source) lives here, apart from how
:mod:`udm.host.registry` discovers, validates and looks them up (which
re-exports both classes).
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any

from udm.sdk.decorators import Function

__all__ = ["LibraryFailure", "UdmEntry", "defining_object"]


@dataclass(frozen=True)
class UdmEntry:
    """One registered UDM: its qualified name and where it came from."""

    name: str
    library: str
    udm: Any
    distribution: str | None = None
    version: str | None = None

    @property
    def short_name(self) -> str:
        """The name within its library (``median`` of ``stats.median``)."""
        return self.name.split(".", 1)[1]

    @property
    def kind(self) -> str:
        """What the UDM is (``aggregate``, ``operator``, ``function``), which
        says how a query calls it: per window, or per event."""
        return str(self.udm.kind)

    @property
    def flavor(self) -> str:
        """Its SDK base (incremental or not, time-sensitive or not), which
        decides how engines may run it (partial aggregation, panes)."""
        return str(self.udm.flavor())

    @property
    def properties(self) -> list[str]:
        """Names of the properties that hold (``deterministic``, ...)."""
        return list(self.udm.properties.enabled())

    @property
    def doc(self) -> str:
        """The docstring of what defines it (``udm-cli list`` shows it)."""
        target = defining_object(self.udm)
        return inspect.getdoc(target) or ""

    @property
    def signature(self) -> str:
        """How to call it: UDM arguments for UDAs/UDOs, parameters for UDFs."""
        return f"{self.name}{_signature(self.udm)}"

    def required_arguments(self) -> list[str]:
        """The arguments a UDA/UDO class cannot be created without (none
        for an instance, already created, or a UDF)."""
        if not isinstance(self.udm, type):
            return []
        try:
            params = _argument_params(self.udm)
        except (TypeError, ValueError):
            return []
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return [p.name for p in params if p.kind in named and p.default is p.empty]

    @property
    def source(self) -> str:
        """Where it is defined, as ``module:qualname``, to find its code."""
        target = defining_object(self.udm)
        return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"

    def as_dict(self) -> dict[str, Any]:
        """The entry as plain data, for ``udm-cli list --json``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "flavor": self.flavor,
            "properties": self.properties,
            "library": self.library,
            "distribution": self.distribution,
            "version": self.version,
            "source": self.source,
        }


@dataclass(frozen=True)
class LibraryFailure:
    """A library that did not load: the error and its formatted traceback."""

    library: str
    error: str
    traceback: str
    distribution: str | None = None
    version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The failure as plain data, for ``udm-cli list --json``."""
        return asdict(self)


def defining_object(udm: Any) -> Any:
    """What defines and documents a UDM: the wrapped function of decorator
    UDMs and UDFs, the class of an instance, else the class itself (its
    module is the code a cluster must import to run the UDM)."""
    if isinstance(udm, Function):
        return udm.fn
    cls = udm if isinstance(udm, type) else type(udm)
    return getattr(cls, "__wrapped__", cls)


def _sig(obj: Any) -> inspect.Signature:
    try:  # show `int`, not the string annotation of `from __future__ import annotations`
        return inspect.signature(obj, eval_str=True)
    except Exception:
        return inspect.signature(obj)


def _argument_params(udm: Any) -> list[inspect.Parameter]:
    """The parameters a query writer binds when creating a UDA/UDO: a
    decorated function's beyond its data parameters, else the class's."""
    cls: Any = udm if isinstance(udm, type) else type(udm)
    wrapped = getattr(cls, "__wrapped__", None)
    if wrapped is not None:
        params = list(_sig(wrapped).parameters.values())
        return params[2 if cls.time_sensitive else 1 :]
    return list(_sig(cls).parameters.values())


def _signature(udm: Any) -> str:
    try:
        if isinstance(udm, Function):
            return str(_sig(udm.fn))
        return str(inspect.Signature(_argument_params(udm)))
    except (TypeError, ValueError):
        return "(...)"
