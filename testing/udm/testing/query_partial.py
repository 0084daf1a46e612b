"""Query fixtures with mistakes: what else is wrong with them.

A query fixture whose fields do not validate (or do not fit together) is
reported with every mistake at once (docs/testing.md: no mistake hides
another): besides the field mistakes, the steps that validate but cannot
be built (an unknown UDF, streams keyed differently) and the UDF names of
the steps that do not validate. The steps are built as the runner builds
them (:func:`udm.testing.query_runner.build_query_sources`), over empty
inputs: what is checked is the query's shape, not the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from udm.testing.query_ops import Operation
from udm.testing.query_runner import Udfs, build_query_sources
from udm.testing.query_schema import Input, QueryFixture
from udm.testing.schema import FixtureError

__all__ = ["unbuilt_steps"]


def unbuilt_steps(path: Path, data: Any) -> list[str]:
    """``file:line: query.N: ...`` for every step of a query fixture that
    is valid but cannot be built (an unknown UDF, streams keyed differently
    ...), read from a document that did not validate or whose fields do not
    fit together: so a field mistake does not hide them until the next run
    (docs/testing.md, "No mistake hides another").

    Each step and input is validated alone; those with mistakes are
    skipped (their mistakes are the loader's to report), as are the steps
    reading them. The inputs are built empty: what is checked is the
    query's shape, not the data."""
    if not isinstance(data, dict) or not isinstance(data.get("inputs"), dict):
        return []
    if data.get("expected_error") is not None:
        return []  # a step that cannot be built may be the error expected
    raw_streams = data.get("streams") or {}
    if not isinstance(raw_streams, dict) or set(raw_streams) & set(data["inputs"]):
        return []
    given: dict[str, Any] = {}
    for name, spec in data["inputs"].items():
        given[name] = _validated_or_none(_INPUT, spec)
    fixture = QueryFixture.model_construct(
        inputs=given,
        query=_steps(data.get("query")),
        streams={n: _steps(ops) for n, ops in raw_streams.items()},
    )
    fixture.loaded_from(path, getattr(data, "line", 1), data)
    out: list[str] = []
    try:
        build_query_sources(
            fixture, {n: [] for n, s in given.items() if s is not None}, partial=True
        )
    except FixtureError as exc:
        out += str(exc).splitlines()
    # the names of every step not built (field mistakes, or reading an input
    # with mistakes), each line's not already reported by the build
    reported = {m.split(": ", 1)[0] for m in out}
    return out + [m for m in _unknown_names(data, fixture) if m.split(": ", 1)[0] not in reported]


#: where a step names a UDF, or under ``udm`` a windowed UDM
_NAMED = (("where",), ("select",), ("alter_lifetime", "start"), ("alter_lifetime", "duration"))


def _named(step: dict[str, Any], loc: tuple[str, ...]) -> str | None:
    """The UDF or UDM name written at ``loc`` of a raw step (None where
    there is none, or a duration is written)."""
    value: Any = step.get(loc[0])
    if len(loc) > 1:
        value = value.get(loc[1]) if isinstance(value, dict) else None
    if not isinstance(value, str) or not value:
        return None
    if loc[-1] == "duration" and not (("." in value or ":" in value) and not value[0].isdigit()):
        return None  # a duration, not a UDF's name (as LifetimeSpec reads it)
    return value


def _unknown_names(data: Any, fixture: QueryFixture) -> list[str]:
    """``file:line: field: ...`` for each UDF or UDM name that a step gives
    and the registry lacks, read from the raw document: a step with field
    mistakes is not built, nor one reading an input with mistakes, so
    ``alter_lifetime: {start: nosuch, duration: 5x}`` says both that 5x is
    no duration and that nosuch is not registered."""
    udfs = Udfs()
    out = []
    for prefix, ops in fixture.lines():
        raw = data.get("query") if len(prefix) == 1 else data["streams"].get(prefix[1])
        for i in range(len(ops)):
            step = raw[i] if isinstance(raw, list) and i < len(raw) else None
            if not isinstance(step, dict):
                continue
            for loc in (*_NAMED, ("udm",)):
                name = _named(step, loc)
                if name is None:
                    continue
                try:
                    udfs.registry.resolve(name) if loc == ("udm",) else udfs.get(name)
                except Exception as exc:  # unknown, or not a UDF
                    out.append(
                        f"{fixture.where((*prefix, i, *loc))}: {f'{type(exc).__name__}: {exc}'}"
                    )
    return out


_INPUT: TypeAdapter[Any] = TypeAdapter(Input)
_OPERATION: TypeAdapter[Any] = TypeAdapter(Operation)


def _validated_or_none(adapter: TypeAdapter[Any], value: Any) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError:
        return None


def _steps(raw: Any) -> list[Any]:
    """A query line's steps, None for each with field mistakes."""
    return [_validated_or_none(_OPERATION, s) for s in raw] if isinstance(raw, list) else []
