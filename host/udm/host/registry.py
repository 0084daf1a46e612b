"""The UDM registry: UDM libraries discovered from entry points, by name.

A UDM library is a distribution with an entry point in the ``udm`` group
(``[project.entry-points.udm] stats = "udm_stats"``). The entry point's name
is the library name; its module implements the ``udm_udms`` hook
(:mod:`udm.host.hookspecs`) and the registry names each UDM
``library.name`` (``stats.median``).

Loading is lazy (on the first lookup) and fault-isolated: a library that
fails to import, whose hook raises, or that returns something that is not a
UDM is recorded with its traceback (see :attr:`Registry.failures`), a
:class:`UdmPluginWarning` is issued, and every other library still loads.
Two distributions providing the same name is an error naming both, since
silently picking one would make queries depend on install order.
"""

from __future__ import annotations

import difflib
import importlib
import re
import threading
import traceback
import warnings
from collections.abc import Iterable, Iterator, Mapping
from importlib import metadata
from typing import Any

import pluggy

from udm.host import hookspecs

# entries are what the registry holds; importing them from here keeps working
from udm.host.entries import LibraryFailure, UdmEntry, defining_object
from udm.sdk.base import Udm
from udm.sdk.decorators import Function
from udm.sdk.errors import UdmDefinitionError
from udm.sdk.hooks import PROJECT_NAME

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuplicateUdmError",
    "LibraryFailure",
    "Registry",
    "UdmEntry",
    "UdmPluginWarning",
    "UnknownUdmError",
    "get_registry",
    "register_udm",
    "reset_registry",
    "resolve_udm",
    "unregister_udm",
]

#: The entry-point group UDM libraries declare.
ENTRY_POINT_GROUP = "udm"


class UdmPluginWarning(UserWarning):
    """A UDM library could not be loaded; the others were."""


class DuplicateUdmError(ValueError):
    """Two libraries (or two registrations) claim the same UDM name."""


class UnknownUdmError(KeyError):
    """No UDM is registered under a name; the message lists the closest ones."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def validate_udm(udm: Any, where: str) -> None:
    """Raise :class:`UdmDefinitionError` unless ``udm`` is a concrete UDM
    class, a UDM instance or a ``@function`` UDF. The SDK already checked
    each class's methods and properties when the class was created."""
    if isinstance(udm, Function):
        return
    if isinstance(udm, type):
        if not issubclass(udm, Udm):
            raise UdmDefinitionError(
                f"{where}: {udm.__module__}.{udm.__qualname__} is not a UDM; derive it from a "
                "udm.sdk base class (Aggregate, Operator, ...) or use @aggregate/@operator"
            )
        if udm.__dict__.get("_flavor_base", False):
            raise UdmDefinitionError(
                f"{where}: {udm.__qualname__} is a udm.sdk base class, not a UDM; register "
                "a subclass of it"
            )
        return
    if isinstance(udm, Udm):
        return
    raise UdmDefinitionError(
        f"{where}: {udm!r} ({type(udm).__name__}) is not a UDM; return UDM classes, UDM "
        "instances or @function UDFs"
    )


#: a UDM's or a library's name: the library's is the prefix of its UDMs'
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*", re.ASCII)


def _check_short_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise UdmDefinitionError(
            f"{where}: UDM name {name!r} must be an identifier (letters, digits, "
            "underscores; no '.' or ':': the registry prefixes the library name)"
        )
    return name


def _items(result: Any, where: str) -> list[tuple[str, Any]]:
    """(short name, udm) pairs from a hook result (iterable or mapping)."""
    if result is None:
        return []
    if isinstance(result, Mapping):
        pairs = list(result.items())
    elif isinstance(result, Iterable) and not isinstance(result, str | bytes):
        pairs = [(getattr(u, "name", None), u) for u in result]
    else:
        raise UdmDefinitionError(
            f"{where}: udm_udms() returned {type(result).__name__}; return a list of UDMs "
            "or a {name: udm} mapping"
        )
    out = []
    for name, udm in pairs:
        validate_udm(udm, where)
        out.append((_check_short_name(name, where), udm))
    return out


def _describe(library: str, distribution: str | None, version: str | None) -> str:
    if distribution is None:
        return f"library {library!r} (registered in-process)"
    return f"library {library!r} from distribution {distribution} {version or ''}".rstrip()


class Registry:
    """UDMs by qualified name (``library.name``).

    ``Registry()`` discovers installed libraries lazily on first use;
    ``Registry(autoload=False)`` holds only what :meth:`register` adds.
    """

    def __init__(self, autoload: bool = True) -> None:
        self._entries: dict[str, UdmEntry] = {}
        self._failures: dict[str, LibraryFailure] = {}
        self._libraries: dict[str, tuple[str | None, str | None]] = {}
        self._loaded = not autoload
        # a library provided by two distributions: neither loads, and a
        # lookup of its names raises this instead of "unknown"
        self._clashes: dict[str, DuplicateUdmError] = {}
        self._lock = threading.RLock()
        # modules of the UDMs looked up by name: what executors must import
        self._resolved_modules: dict[str, None] = {}
        self.plugin_manager = pluggy.PluginManager(PROJECT_NAME)
        self.plugin_manager.add_hookspecs(hookspecs)

    # ------------------------------------------------------------ loading

    def load(self) -> None:
        """Discover entry points of the ``udm`` group (once)."""
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
            by_name: dict[str, list[Any]] = {}
            for ep in eps:
                by_name.setdefault(ep.name, []).append(ep)
            for name, group in sorted(by_name.items()):
                dists = {_dist_name(ep) for ep in group}
                if len(group) > 1 and len(dists) > 1:
                    self._clash(name, group)
                    continue
                self._load_entry_point(group[0])

    def _clash(self, library: str, group: list[Any]) -> None:
        """Two distributions provide ``library``: which one a query means
        is unknowable, so neither loads; the other libraries do."""
        both = " and ".join(sorted(f"{d} ({ep.value})" for d, ep in _by_dist(group)))
        error = DuplicateUdmError(
            f"UDM library {library!r} is provided by two distributions: {both}; "
            "uninstall one of them (pip uninstall <distribution>)"
        )
        self._clashes[library] = error
        self._failures[library] = LibraryFailure(library, f"DuplicateUdmError: {error}", "")
        warnings.warn(f"{error} (its UDMs are not loaded)", UdmPluginWarning, stacklevel=4)

    def _load_entry_point(self, ep: Any) -> None:
        library = ep.name
        dist, version = _dist_name(ep), _dist_version(ep)
        where = f"UDM library {library!r} ({ep.value}"
        where += f", distribution {dist} {version})" if dist else ")"
        try:
            if not _IDENTIFIER.fullmatch(library):
                raise UdmDefinitionError(
                    f"{where}: the library name {library!r} (the entry point's name) must be "
                    "an identifier, since it prefixes its UDMs' names (stats.median); rename "
                    "the entry point in the package's pyproject.toml"
                )
            module = ep.load()
            self.plugin_manager.register(module, name=library)
            impls = [
                impl
                for impl in self.plugin_manager.hook.udm_udms.get_hookimpls()
                if impl.plugin_name == library
            ]
            if not impls:
                raise UdmDefinitionError(
                    f"{where} implements no udm_udms hook; define "
                    "`@udm.sdk.hookimpl def udm_udms(): return [...]` in its module"
                )
            items = [pair for impl in impls for pair in _items(impl.function(), where)]
            self._add(library, items, dist, version)
        except DuplicateUdmError:
            raise
        except Exception as exc:
            if self.plugin_manager.has_plugin(library):
                self.plugin_manager.unregister(name=library)
            message = f"{type(exc).__name__}: {exc}"
            self._failures[library] = LibraryFailure(
                library, message, traceback.format_exc(), dist, version
            )
            warnings.warn(
                f"{where} failed to load and is skipped: {message} "
                "(udm-cli list shows the traceback)",
                UdmPluginWarning,
                stacklevel=3,
            )

    def _add(
        self,
        library: str,
        items: list[tuple[str, Any]],
        distribution: str | None,
        version: str | None,
    ) -> None:
        """Register all of ``items`` or none of them."""
        new: dict[str, UdmEntry] = {}
        for short, udm in items:
            qualified = f"{library}.{short}"
            if qualified in new:  # the library lists one name twice: its own bug
                raise UdmDefinitionError(
                    f"UDM library {library!r} lists the name {short!r} twice; "
                    "give each UDM its own name"
                )
            owner = self._entries.get(qualified)
            if owner is not None:
                first = _describe(owner.library, owner.distribution, owner.version)
                second = _describe(library, distribution, version)
                raise DuplicateUdmError(
                    f"UDM {qualified!r} is registered twice: by {first} and by {second}; "
                    "rename one of them"
                )
            new[qualified] = UdmEntry(qualified, library, udm, distribution, version)
        known = self._libraries.get(library)
        if known is not None and known[0] != distribution:
            first = _describe(library, *known)
            second = _describe(library, distribution, version)
            raise DuplicateUdmError(
                f"UDM library {library!r} is provided twice: by {first} and by {second}; "
                "use another library name"
            )
        self._libraries[library] = (distribution, version)
        self._entries.update(new)

    def register(
        self,
        udm: Any,
        library: str = "local",
        name: str | None = None,
        *,
        replace: bool = False,
    ) -> UdmEntry:
        """Register a UDM in-process (notebooks, tests) as ``library.name``,
        with the same validation as discovered ones.

        ``name`` defaults to the UDM's ``name``. ``replace=True`` overwrites
        an earlier in-process registration of the same name (redefining a
        UDM in a notebook cell), never a discovered one.
        """
        self.load()
        where = f"register({udm!r}, library={library!r})"
        if not isinstance(library, str) or not library or "." in library or ":" in library:
            raise ValueError(
                f"library name {library!r} must be a non-empty string without '.' or ':'"
            )
        validate_udm(udm, where)
        short = _check_short_name(name if name is not None else getattr(udm, "name", None), where)
        with self._lock:
            if library in self._clashes:
                raise self._clashes[library]
            qualified = f"{library}.{short}"
            old = self._entries.get(qualified)
            if replace and old is not None and old.distribution is None:
                del self._entries[qualified]
            self._add(library, [(short, udm)], None, None)
            return self._entries[qualified]

    def unregister(self, name: str) -> None:
        """Remove one UDM by qualified name."""
        self.load()
        with self._lock:
            if name not in self._entries:
                raise self._unknown(name)
            del self._entries[name]

    # ------------------------------------------------------------ lookup

    @property
    def entries(self) -> list[UdmEntry]:
        """Registered UDMs sorted by name."""
        self.load()
        return [self._entries[k] for k in sorted(self._entries)]

    @property
    def failures(self) -> list[LibraryFailure]:
        """Libraries that failed to load, sorted by name."""
        self.load()
        return [self._failures[k] for k in sorted(self._failures)]

    def names(self) -> list[str]:
        """The qualified names of every registered UDM, sorted: for listings
        and "did you mean" hints."""
        return [e.name for e in self.entries]

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[UdmEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def entry(self, name: str) -> UdmEntry:
        """The :class:`UdmEntry` of a qualified name."""
        self.load()
        found = self._entries.get(name)
        if found is None:
            raise self._unknown(name)
        return found

    def resolve(self, name_or_udm: Any) -> Any:
        """The UDM for ``library.name``, ``module:attribute``, or a UDM class,
        instance or UDF (validated and returned as is)."""
        if not isinstance(name_or_udm, str):
            validate_udm(name_or_udm, "resolve()")
            return name_or_udm
        name = name_or_udm
        udm = _import_udm(name) if ":" in name else self.entry(name).udm
        module = getattr(defining_object(udm), "__module__", None)
        if isinstance(module, str):
            self._resolved_modules[module] = None
        return udm

    def resolved_modules(self) -> list[str]:
        """The modules defining the UDMs resolved by name so far, in
        order: the code a cluster's executors must import to run them
        (``udm-cli run`` ships these)."""
        return list(self._resolved_modules)

    def _unknown(self, name: str) -> UnknownUdmError | DuplicateUdmError:
        clash = self._clashes.get(name.split(".", 1)[0])
        if clash is not None:
            return clash
        names = sorted(self._entries)
        library = name.split(".", 1)[0] if "." in name and ":" not in name else None
        libraries = {n.split(".", 1)[0] for n in names}
        if library is not None and library in self._failures:
            return UnknownUdmError(
                f"no UDM is registered as {name!r}: the library {library!r} failed to load "
                "(udm-cli list shows why)"
            )
        if library is not None and library not in libraries:
            # a package not installed yet: names of other libraries would mislead
            installed = ", ".join(sorted(libraries)) or "none"
            return UnknownUdmError(
                f"no UDM is registered as {name!r}: no library {library!r} is installed "
                f"(installed: {installed}); install its package in this environment first, "
                "e.g. pip install -e <its folder>"
            )
        # A bare short name most likely means the library-qualified one.
        close = [n for n in names if n.split(".", 1)[1] == name]
        if not close:
            close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        known = f" ({len(names)} registered; udm-cli list shows them)"
        failed = ""
        if self._failures:
            failed = f"; libraries that failed to load: {', '.join(sorted(self._failures))}"
        return UnknownUdmError(f"no UDM is registered as {name!r}{hint}{known}{failed}")


def _dist_name(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else str(dist.metadata["Name"] or dist.name)


def _dist_version(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else str(dist.version)


def _by_dist(group: list[Any]) -> list[tuple[str, Any]]:
    seen: dict[str, Any] = {}
    for ep in group:
        seen.setdefault(_dist_name(ep) or "?", ep)
    return list(seen.items())


def _import_udm(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{spec!r}: a UDM path is 'module:attribute', e.g. 'udm_stats:Median'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownUdmError(f"cannot import module {module_name!r} of {spec!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownUdmError(f"module {module_name!r} has no attribute {attr!r}") from None
    validate_udm(obj, spec)
    return obj


_default: Registry | None = None
_default_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry; installed libraries load on first lookup."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def reset_registry() -> None:
    """Forget the process-wide registry (the next lookup rediscovers), e.g.
    after installing a library in a running process or in tests."""
    global _default
    with _default_lock:
        _default = None


# ------------------------------------------------------ names in a process

_LOCAL_UDMS: dict[str, Any] = {}


def register_udm(name: str, udm: Any) -> None:
    """Make a UDM available by ``name`` in this process, ahead of installed
    libraries (a notebook's quick override); validated like discovered UDMs.
    :meth:`Registry.register` is the library-qualified way."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a UDM name must be a non-empty string, got {name!r}")
    validate_udm(udm, f"register_udm({name!r})")
    _LOCAL_UDMS[name] = udm


def unregister_udm(name: str) -> None:
    """Forget a name given to :func:`register_udm` (no error if unknown)."""
    _LOCAL_UDMS.pop(name, None)


def resolve_udm(name_or_udm: Any) -> Any:
    """A UDM from itself, a :func:`register_udm` name, or a registry name
    (``library.name`` or ``module:attribute``): how every engine and the
    CLI turn a name into a UDM."""
    if not isinstance(name_or_udm, str):
        return name_or_udm
    if name_or_udm in _LOCAL_UDMS:
        return _LOCAL_UDMS[name_or_udm]
    return get_registry().resolve(name_or_udm)
