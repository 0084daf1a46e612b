"""Engines: what runs a query plan, looked up by name.

Every engine implements :class:`Engine`: it runs a plan
(:mod:`udm.host.plan`) to its output rows. The built-in engines are

* ``"reference"``: the denotational definitions over whole canonical
  history tables (:mod:`udm.host.algebra`, :func:`udm.host.evaluate`), the
  oracle every other engine is tested against;
* ``"host"``: the plan compiled into an in-process graph of physical
  operators (:mod:`udm.host.operators`) fed element by element;
* ``"spark"``: Spark batch (:mod:`udm.host.spark.execute`).

* ``"streaming"``: Structured Streaming, ``Stream.to_stream()``
  (:mod:`udm.host.spark.streaming_engine`).

Another engine is
a class with a ``collect(plan)`` method, registered with
:func:`register_engine` or declared by a distribution as an entry point in
the ``udm.engines`` group; adding one edits no module here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any, NamedTuple, Protocol

from udm.host.metrics import QueryMetrics
from udm.host.plan import PlanNode, Row
from udm.host.rows import Layout

__all__ = [
    "ENTRY_POINT_GROUP",
    "Engine",
    "EngineResult",
    "engine_names",
    "get_engine",
    "register_engine",
]

#: The entry-point group through which a distribution adds an engine.
ENTRY_POINT_GROUP = "udm.engines"


class EngineResult(NamedTuple):
    """A plan's output rows, how to read their CHT payloads, and what the
    run dropped."""

    rows: list[Row]
    layout: Layout
    metrics: QueryMetrics


class Engine(Protocol):
    """Runs query plans. ``collect`` returns the output rows of ``plan``."""

    name: str

    def collect(self, plan: PlanNode) -> EngineResult:
        """Run ``plan`` to the end of its input and return its output."""
        ...


_BUILTIN: dict[str, str] = {
    "reference": "udm.host.engines.reference:ReferenceEngine",
    "host": "udm.host.engines.graph:HostEngine",
    "spark": "udm.host.spark.execute:SparkEngine",
    "streaming": "udm.host.spark.streaming_engine:StreamingEngine",
}
_REGISTERED: dict[str, Callable[..., Engine]] = {}


def register_engine(name: str, factory: Callable[..., Engine]) -> None:
    """Make ``factory(**options)`` the engine called ``name`` in this process."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an engine name is an identifier, got {name!r}")
    _REGISTERED[name] = factory


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def engine_names() -> list[str]:
    """Every engine name known in this process."""
    return sorted({*_BUILTIN, *_REGISTERED, *_entry_points()})


def get_engine(name: str, **options: Any) -> Engine:
    """The engine called ``name``, created with ``options`` (the Spark
    engine takes ``spark=``)."""
    factory: Callable[..., Engine] | None = _REGISTERED.get(name)
    if factory is None and name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
    if factory is None:
        found = _entry_points().get(name)
        if found is not None:
            factory = found.load()
    if factory is None:
        raise ValueError(f"unknown engine {name!r}; engines: {', '.join(engine_names())}")
    return factory(**options)
