"""Sources of a query: a Spark DataFrame, events in memory, a physical stream.

Each function checks what it is given (columns, shapes, lifetimes, the CTI
policy) and returns the :class:`~udm.host.plan.Source` node a
:class:`~udm.host.query.Stream` starts from; DataFrames are only inspected
(their schema), never read here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from udm.host.cht import derive_cht
from udm.host.plan import INTERNAL_PREFIX, SCALAR_COL, OnInvalid, OnNullKey, Row, Shape, Source
from udm.host.rows import (
    OPEN_IN_MEMORY,
    SUB_MICROSECOND,
    check_row,
    invalid_event,
    is_datetime,
    start_of,
    why_not_a_time,
)
from udm.host.stream import Element, ExternalCti
from udm.host.validation import CtiPolicy
from udm.sdk.events import IntervalEvent

__all__ = ["dataframe_source", "elements_source", "rows_source"]


def dataframe_source(
    df: Any,
    start: str,
    end: str | None,
    keys: Sequence[str],
    shape: Shape | None,
    on_invalid: OnInvalid,
    on_null_key: OnNullKey = "raise",
) -> Source:
    """The source of ``Stream.from_dataframe`` (arguments as there)."""
    shape = shape or ("point" if end is None else "interval")
    if shape not in ("point", "interval", "edge"):
        raise ValueError(f"unknown shape {shape!r}; use 'point', 'interval' or 'edge'")
    if shape == "point" and end is not None:
        raise ValueError("point events have no end column; drop end= or use shape='interval'")
    if shape != "point" and end is None:
        raise ValueError(f"{shape} events need an end column; pass end=")
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"unknown on_invalid {on_invalid!r}; use 'raise' or 'drop'")
    columns = list(df.columns)
    for role, col in (("start", start), ("end", end), *(("key", k) for k in keys)):
        if col is not None and col not in columns:
            raise KeyError(
                f"{role} column {col!r} is not in the DataFrame; its columns are {columns}"
            )
    clash = [c for c in columns if c.startswith(INTERNAL_PREFIX)]
    if clash:
        raise ValueError(f"columns {clash} use the reserved prefix {INTERNAL_PREFIX!r}")
    if on_null_key not in ("raise", "drop", "keep"):
        raise ValueError(f"unknown on_null_key {on_null_key!r}; use 'raise', 'drop' or 'keep'")
    return Source(
        df=df,
        start=start,
        end=end,
        shape=shape,
        on_invalid=on_invalid,
        key_columns=tuple(keys),
        on_null_key=on_null_key,
    )


def rows_source(
    events: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
    on_invalid: OnInvalid,
    timestamps: bool | None,
) -> Source:
    """The source of ``Stream.from_cht`` (arguments as there)."""
    if timestamps is None:
        events = list(events)
        timestamps = bool(events) and is_datetime(start_of(events[0]))
    rows: list[Row] = []
    scalar: bool | None = None
    dropped: dict[str, int] = {}
    for i, ev in enumerate(events):
        if isinstance(ev, IntervalEvent):
            start, end, payload = ev.start, ev.end, ev.payload
        else:
            start, end, payload = ev
        lifetime = check_row(start, end, "interval", "start", "end", OPEN_IN_MEMORY)
        if isinstance(lifetime, str):
            if on_invalid == "raise":
                why = "" if SUB_MICROSECOND in lifetime else why_not_a_time(start, end)
                raise invalid_event(lifetime + why, ev, i) from None
            dropped[lifetime] = dropped.get(lifetime, 0) + 1
            continue
        is_map = isinstance(payload, Mapping)
        if scalar is None:
            scalar = not is_map
        elif scalar == is_map:
            raise TypeError(
                f"event #{i} {ev!r}: payloads must be all dicts or all scalars, not a mix"
            )
        cols = {str(k): v for k, v in payload.items()} if is_map else {SCALAR_COL: payload}
        rows.append((lifetime[0], lifetime[1], cols))
    return Source(
        rows=tuple(rows),
        on_invalid=on_invalid,
        scalar=bool(scalar),
        timestamps=timestamps,
        dropped=tuple(dropped.items()),
    )


def elements_source(
    elements: Iterable[Element | ExternalCti],
    cti_policy: CtiPolicy | str,
    timestamps: bool,
) -> Source:
    """The source of ``Stream.from_events``: the elements as given, and
    their CHT (a stream with ExternalCTIs repaired by Finalize first)."""
    given = tuple(elements)
    policy = CtiPolicy.parse(cti_policy) if isinstance(cti_policy, str) else cti_policy
    unmatched = 0
    if any(isinstance(e, ExternalCti) for e in given):
        from udm.host.operators.finalize import repair

        valid, unmatched = repair(given)  # ExternalCTIs: Finalize's input, repaired by it
    else:
        valid = [e for e in given if not isinstance(e, ExternalCti)]
    cht, stats = derive_cht(valid, cti_policy=policy)
    base = rows_source(cht, "raise", timestamps)
    # what the CTI policy dropped or adjusted, counted as on_invalid's drops
    # are (every engine applies the same policy to the same elements)
    counted = {
        f"late ({policy.value}): {what.replace('_', ' ')}": n
        for what, n in stats.as_dict().items()
        if n
    }
    if unmatched:  # broken retractions nothing connected (every engine counts them)
        from udm.host.operators.finalize import UNMATCHED

        counted[UNMATCHED] = unmatched
    return dataclasses.replace(
        base,
        elements=given,
        cti_policy=policy.value,
        columns=_insert_columns(valid),
        scalar=_scalar_elements(valid),
        dropped=tuple(counted.items()),
    )


def _insert_columns(elements: Iterable[Element]) -> tuple[str, ...]:
    """The payload columns of every insert, in first-seen order: the
    stream's columns even where retractions left no event with them (the
    host engine's operators see these inserts, the CHT may not)."""
    seen: dict[str, None] = {}
    for el in elements:
        payload = getattr(el, "payload", None)
        if type(el).__name__ == "Insert" and isinstance(payload, Mapping):
            seen.update(dict.fromkeys(str(k) for k in payload))
    return tuple(seen)


def _scalar_elements(elements: Iterable[Element]) -> bool:
    for el in elements:
        payload = getattr(el, "payload", None)
        if type(el).__name__ == "Insert":
            return not isinstance(payload, Mapping)
    return True
