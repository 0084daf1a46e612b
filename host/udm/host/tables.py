"""pandas DataFrames and Arrow tables in and out, in-process (no Spark).

:meth:`Stream.from_pandas <udm.host.query.Stream.from_pandas>` and
:meth:`~udm.host.query.Stream.from_arrow` read a table the way
:meth:`~udm.host.query.Stream.from_dataframe` reads a Spark DataFrame
(same ``start``/``end``/``key``/``shape``/``on_invalid``/``on_null_key``,
same reasons for invalid rows), into an in-memory stream that runs in the
reference evaluator: for small data, a query answers in milliseconds
instead of paying Spark's start-up. :func:`to_arrow` is the in-process
counterpart of ``to_dataframe()``: the output as a table with ``start``,
``end`` (timestamps when the input times were, an open end null), the key
columns and the result columns. pandas and pyarrow are imported only when
these are called (``import udm.host`` never imports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from udm.host.engines import get_engine
from udm.host.metrics import QueryMetrics
from udm.host.outcolumns import known_columns
from udm.host.plan import INTERNAL_PREFIX, OnInvalid, OnNullKey, Row, Shape, Source, WindowOp
from udm.host.rows import SUB_MICROSECOND, check_row, reason_sub_microsecond, rounding_advice
from udm.host.time import INFINITY, iso_ticks

if TYPE_CHECKING:
    from udm.host.query import Stream
    from udm.host.running import RunnableStream

__all__ = ["SHOWN", "from_table", "pandas_frame", "time_columns", "to_arrow"]

#: invalid rows shown in an error
SHOWN = 3


def _arrow(data: Any, times: Sequence[str]) -> tuple[Any, dict[str, list[Any]]]:
    """A pyarrow Table of a pandas DataFrame, an Arrow table or batch, and
    the Python values of the time columns ``times`` that pandas holds as
    objects: Arrow would floor a ``Timestamp``'s nanoseconds there (where a
    ``datetime64[ns]`` column keeps them, to be refused) and refuse a
    column mixing ints and strings outright, where each value is a row's
    to check (those columns are nulls in the table)."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data, {}
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), {}
    if type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
        objects = [c for c in dict.fromkeys(times) if c in data.columns and data[c].dtype == object]
        raw = {c: [_missing_as_none(v) for v in data[c].tolist()] for c in objects}
        try:
            table = pa.Table.from_pandas(data.drop(columns=objects), preserve_index=False)
        except OverflowError:
            raise _too_big(data.drop(columns=objects)) from None
        for c in objects:
            table = table.append_column(c, pa.nulls(len(data)))
        return table.select([str(c) for c in data.columns]), raw
    raise TypeError(
        f"expected a pandas DataFrame or an Arrow table, got {type(data).__name__}; "
        "for a Spark DataFrame use Stream.from_dataframe"
    )


def _too_big(frame: Any) -> ValueError:
    """The error for a pandas column Arrow cannot hold: a Python int beyond
    int64 in an ``object`` column (pyarrow says only "Python int too large
    to convert to C long"), named by column and row, with ways to keep it
    exact."""
    import pyarrow as pa

    from udm.host.errors import InvalidEventError

    for col in frame.columns:
        values = frame[col].tolist() if frame[col].dtype == object else []
        try:
            pa.array(values, from_pandas=True)
            continue
        except OverflowError:
            pass
        for i, v in enumerate(values):
            if isinstance(v, int) and not -(2**63) <= v < 2**63:
                return InvalidEventError(
                    f"column {col!r}, row {i}: the integer {v} is beyond int64, the widest "
                    "integer an Arrow column of signed values (and Spark's bigint) holds; "
                    f"to keep it exact, make the column decimals (df[{col!r}] = "
                    f"df[{col!r}].map(decimal.Decimal), up to 38 digits) or strings"
                )
    return InvalidEventError("a column holds an integer beyond int64, which Arrow cannot hold")


def _missing_as_none(value: Any) -> Any:
    """None for pandas' missing markers in an object column (NaN, NaT)."""
    if isinstance(value, float) and value != value:
        return None
    return None if type(value).__name__ == "NaTType" else value


def _is_ticks(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _first_values(raw: dict[str, list[Any]]) -> dict[str, Any]:
    """Each object time column's first non-null value (None if it has none):
    the kind the column holds, found once per column rather than per row."""
    return {col: next((v for v in values if v is not None), None) for col, values in raw.items()}


def _mixed(raw: dict[str, list[Any]], firsts: dict[str, Any], i: int) -> str | None:
    """Why row ``i`` of the object time columns ``raw`` is invalid: a value
    of another kind than the column's first (int ticks or datetimes, from
    ``firsts``), which one typed column could not hold; None if none is."""
    for col, values in raw.items():
        first, v = firsts[col], values[i]
        if first is not None and v is not None and _is_ticks(v) != _is_ticks(first):
            held = "int ticks" if _is_ticks(first) else "datetimes"
            return f"{col!r} is not a valid time ({type(v).__name__} in a column of {held})"
    return None


def _names(key: str | Sequence[str] | None) -> tuple[str, ...]:
    if key is None:
        return ()
    return (key,) if isinstance(key, str) else tuple(key)


def _shape(shape: Shape | None, end: str | None) -> Shape:
    chosen: Shape = shape or ("point" if end is None else "interval")
    if chosen not in ("point", "interval", "edge"):
        raise ValueError(f"unknown shape {chosen!r}; use 'point', 'interval' or 'edge'")
    if chosen == "point" and end is not None:
        raise ValueError("point events have no end column; drop end= or use shape='interval'")
    if chosen != "point" and end is None:
        raise ValueError(f"{chosen} events need an end column; pass end=")
    return chosen


def from_table(
    cls: type[Stream],
    data: Any,
    start: str,
    end: str | None,
    key: str | Sequence[str] | None,
    shape: Shape | None,
    on_invalid: OnInvalid,
    on_null_key: OnNullKey,
) -> Stream:
    """The in-memory stream of a pandas DataFrame or Arrow table, one event
    per row (see :meth:`Stream.from_pandas`, whose defaults apply: this is
    called with every argument)."""
    from udm.host.errors import InvalidEventError

    table, raw = _arrow(data, [c for c in (start, end) if c is not None])
    chosen = _shape(shape, end)
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"unknown on_invalid {on_invalid!r}; use 'raise' or 'drop'")
    if on_null_key not in ("raise", "drop", "keep"):
        raise ValueError(f"unknown on_null_key {on_null_key!r}; use 'raise', 'drop' or 'keep'")
    columns = list(table.column_names)
    keys = _names(key)
    for role, col in (("start", start), ("end", end), *(("key", k) for k in keys)):
        if col is not None and col not in columns:
            raise KeyError(f"{role} column {col!r} is not in the table; its columns are {columns}")
    firsts = _first_values(raw)
    if start in raw:
        timestamps = firsts[start] is not None and not _is_ticks(firsts[start])
    else:
        kind = str(table.schema.field(start).type)
        timestamps = kind.startswith(("timestamp", "date", "string", "large_string"))
    rows: list[Row] = []
    problems: list[tuple[int, str, dict[str, Any]]] = []  # (row, reason, values)
    dropped: dict[str, int] = {}
    ticks, finer = _tick_columns(table, [c for c in (start, end) if c and c not in raw])
    for i, record in enumerate(_records(table, {**raw, **ticks})):
        ends = record.get(end) if end else None
        mixed = _mixed(raw, firsts, i) if raw else None
        lifetime = mixed or finer.get(i) or check_row(record.get(start), ends, chosen, start, end)
        if isinstance(lifetime, str):
            reason, policy = lifetime, on_invalid
        else:
            null = next((k for k in keys if record.get(k) is None), None)
            if null is None or on_null_key == "keep":
                payload = {c: v for c, v in record.items() if c not in (start, end)}
                rows.append((lifetime[0], lifetime[1], payload))
                continue
            reason, policy = f"key {null!r} is null", on_null_key
        if policy == "drop":
            dropped[reason] = dropped.get(reason, 0) + 1
        else:
            shown = _as_given(table, record, ticks, i) if len(problems) < SHOWN else record
            problems.append((i, reason, shown))
    if problems:
        raise InvalidEventError(_message(problems))
    # with the drops, how many rows were read (QueryMetrics.rows_read)
    read = (INTERNAL_PREFIX + "rows", table.num_rows)
    source = Source(
        rows=tuple(rows),
        on_invalid=on_invalid,
        timestamps=timestamps,
        dropped=(*dropped.items(), read),
        key_columns=keys,
        on_null_key=on_null_key,
        types=tuple((f.name, f.type) for f in table.schema if f.name not in (start, end)),
    )
    stream = cls(source)
    stream.metrics = QueryMetrics(dict(source.dropped))
    return stream.group_apply(*keys) if keys else stream


#: ticks per unit of an Arrow timestamp column (``ns``: a thousandth of
#: one), and per day for a ``date32`` column
_TICKS_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "d": 86_400_000_000}


def _tick_columns(
    table: Any, columns: Sequence[str]
) -> tuple[dict[str, list[Any]], dict[int, str]]:
    """The time columns among ``columns`` that Arrow holds as timestamps or
    dates, read as int ticks (Arrow stores them as integers: a cast is exact),
    and the rows whose nanoseconds are no whole tick, with the reason. As
    Python datetimes, values outside the years 1 to 9999 (valid ticks, up
    to time's last tick, which ``to_arrow`` writes) would not convert at all;
    a value outside the tick range is left to ``check_row`` to refuse."""
    import pyarrow as pa

    ticks: dict[str, list[Any]] = {}
    finer: dict[int, str] = {}
    for c in dict.fromkeys(columns):
        kind = table.schema.field(c).type
        if pa.types.is_timestamp(kind):
            unit, values = kind.unit, table.column(c).cast(pa.int64()).to_pylist()
        elif pa.types.is_date32(kind):
            unit, values = "d", table.column(c).cast(pa.int32()).to_pylist()
        elif pa.types.is_date64(kind):
            unit, values = "ms", table.column(c).cast(pa.int64()).to_pylist()
        else:
            continue
        if unit == "ns":
            for i, v in enumerate(values):
                if v is not None and v % 1_000:
                    finer.setdefault(i, reason_sub_microsecond(c))
            ticks[c] = [None if v is None else v // 1_000 for v in values]
        else:
            scale = _TICKS_PER_UNIT[unit]
            ticks[c] = [None if v is None else v * scale for v in values]
    return ticks, finer


def _records(table: Any, given: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts of Python values, the columns in
    ``given`` taken from there (time columns already read)."""
    names = table.column_names
    columns = [
        given[name] if name in given else _values(table.column(j), name)
        for j, name in enumerate(names)
    ]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _values(column: Any, name: str) -> list[Any]:
    """A payload column's Python values; a timestamp or date a Python
    ``datetime`` cannot hold (outside the years 1 to 9999), which is how a
    UDM receives one, is refused by column and row, where pyarrow raises a
    bare OverflowError."""
    from udm.host.errors import InvalidEventError

    try:
        return list(column.to_pylist())
    except OverflowError:
        pass
    for i in range(len(column)):
        try:
            column[i].as_py()
        except OverflowError:
            raise InvalidEventError(
                f"column {name!r}, row {i}: {_far_value(column, i)} is outside the years "
                "1-9999 a Python datetime holds, and a UDM receives a payload timestamp as a "
                "datetime; to keep the value, give the column as int64 microseconds (ticks): "
                f"table[{name!r}].cast(pa.timestamp('us')).cast('int64') in Arrow, "
                f"df[{name!r}].astype('datetime64[us]').astype('int64') in pandas"
            ) from None
    return list(column.to_pylist())  # (not reached: one value failed above)


def _far_value(column: Any, i: int) -> str:
    """A timestamp or date beyond ``datetime`` as ISO text (exact), for an
    error; a nested one as what it is."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_timestamp(kind) and kind.unit != "ns":
        return iso_ticks(column[i].cast(pa.int64()).as_py() * _TICKS_PER_UNIT[kind.unit])
    if pa.types.is_date32(kind):
        return iso_ticks(column[i].cast(pa.int32()).as_py() * _TICKS_PER_UNIT["d"])
    if pa.types.is_date64(kind):
        return iso_ticks(column[i].cast(pa.int64()).as_py() * _TICKS_PER_UNIT["ms"])
    return f"a {kind} value holding a time that"


def _as_given(table: Any, record: dict[str, Any], ticks: dict[str, list[Any]], i: int) -> Any:
    """Row ``i`` as an error shows it: time columns read as ticks shown as
    the table holds them (a datetime), or as ISO text beyond ``datetime``."""
    shown = dict(record)
    for c in ticks:
        try:
            shown[c] = table.column(c)[i].as_py()
        except (OverflowError, ValueError):
            value = record.get(c)
            shown[c] = iso_ticks(value) if isinstance(value, int) else value
    return shown


def _message(problems: list[tuple[int, str, dict[str, Any]]]) -> str:
    """The error for a table's invalid rows: the first, how many in all by
    reason, the first few, and what to do."""
    index, reason, record = problems[0]
    counts: dict[str, int] = {}
    for _, r, _ in problems:
        counts[r] = counts.get(r, 0) + 1
    by_reason = ", ".join(f"{n:,} {r}" for r, n in sorted(counts.items()))
    shown = "; ".join(f"row {i}: {rec!r} ({r})" for i, r, rec in problems[:SHOWN])
    rows = "row" if len(problems) == 1 else "rows"
    return (
        f"invalid event: {reason}; row {index}: {record!r}. {len(problems):,} invalid {rows} "
        f"in all ({by_reason}); the first {min(len(problems), SHOWN)}: {shown}. "
        f"{_advice(list(counts))}"
    )


def _advice(reasons: list[str]) -> str:
    """What to do about the reasons found: round times with nanoseconds
    (dropping would lose every such row), drop or keep rows with null keys,
    drop other invalid rows, each when one of its reasons is there (the
    wording ``udm.cli.queryfile`` puts in a YAML spec's words)."""
    fine = [r.split("'")[1] for r in reasons if SUB_MICROSECOND in r]
    advice = [rounding_advice(fine)] if fine else []
    if any(r.startswith("key ") for r in reasons):
        advice.append(
            "pass on_null_key='drop' to drop such rows and count them, or "
            "on_null_key='keep' to keep them as a group of their own"
        )
    if any(SUB_MICROSECOND not in r and not r.startswith("key ") for r in reasons):
        advice.append(
            "pass on_invalid='drop' to drop such rows and count them "
            "(stream.metrics.invalid_rows())"
        )
    text = "; ".join(advice)
    return f"Fix the data: {text}." if fine else f"Fix the data, or {text}"


def _declared(udm: Any) -> Any:
    """The return annotation of a UDM's result method, extras kept."""
    import typing

    cls = type(udm)
    method = "result" if udm.incremental else "compute_result"
    target = getattr(cls, "__wrapped__", None) or getattr(cls, method)
    target = getattr(target, "__wrapped__", target)
    try:
        return typing.get_type_hints(target, include_extras=True).get("return")
    except Exception:
        return None


def _element(ann: Any) -> Any:
    """``X`` of an operator's ``list[X]``/``Iterator[IntervalEvent[X]]``."""
    import typing

    while typing.get_origin(ann) is not None and typing.get_origin(ann) is not typing.Annotated:
        args = typing.get_args(ann)
        if not args or (
            isinstance(typing.get_origin(ann), type) and issubclass(typing.get_origin(ann), dict)
        ):
            return ann
        ann = args[0]
    return ann


def time_columns(stream: RunnableStream) -> set[str]:
    """Output columns a UDM declares as times (``udm.sdk.Ticks``), shown as
    the stream shows its times, as on Spark (``frame.output``)."""
    import dataclasses
    import typing

    from udm.sdk.events import is_time

    op = stream.plan
    if not isinstance(op, WindowOp):
        return set()  # a projection after the window decides its own columns
    found: set[str] = set()
    for call in op.calls:
        if call.returns is not None:
            continue
        ann = _declared(call.udm)
        if op.kind == "operator":
            ann = _element(ann)
        if is_time(ann):
            found.add(call.name)
            continue
        record = typing.is_typeddict(ann) or (
            isinstance(ann, type) and dataclasses.is_dataclass(ann)
        )
        if not record:
            continue
        try:
            hints = typing.get_type_hints(ann, include_extras=True)
        except Exception:
            continue
        found |= {f"{call.name}_{f}" if op.multi else f for f, h in hints.items() if is_time(h)}
    return found


def to_arrow(stream: RunnableStream) -> Any:
    """The output of ``stream`` computed in-process, as a pyarrow Table:
    ``start``, ``end`` (UTC timestamps when the input times were datetimes,
    an end at the end of time null; else int64 ticks), then the payload
    columns (key columns, results)."""
    import pyarrow as pa

    rows, _layout, metrics = get_engine("reference").collect(stream.plan)
    stream.metrics = metrics
    rows = sorted(rows, key=lambda r: (r[0], r[1]))  # stable: keys keep their order
    times = stream.source.datetimes()
    kind = pa.timestamp("us", tz="UTC") if times else pa.int64()
    # the plan's columns: an output without rows has them too, typed as
    # far as the plan knows (to_dataframe() always has them)
    known = known_columns(stream.plan, kind) or {}
    columns = list(dict.fromkeys(c for _, _, p in rows for c in p)) if rows else list(known)
    clash = [c for c in columns if c in ("start", "end")]
    if clash:
        raise ValueError(
            f"payload columns {clash} clash with the output's start/end columns; "
            "rename them (select()) before running"
        )

    def shown(ticks: int) -> Any:
        # the ticks themselves even for timestamps: Arrow's timestamp[us] is
        # int64 microseconds, so every tick has a value (the tick before
        # INFINITY is the year 294247, beyond Python's datetime), as Spark's
        # timestamp_micros gives; only the end of time is null
        return None if times and ticks >= INFINITY else ticks

    data: dict[str, list[Any]] = {
        "start": [shown(s) for s, _, _ in rows],
        "end": [shown(e) for _, e, _ in rows],
    }
    marked = time_columns(stream) if times else set()
    for c in columns:
        values = [p.get(c) for _, _, p in rows]
        data[c] = [None if v is None else shown(v) for v in values] if c in marked else values
    fields = {"start": kind, "end": kind}
    schema = pa.schema([pa.field(c, fields[c]) for c in ("start", "end")])
    table = pa.table({c: pa.array(data[c], type=fields[c]) for c in ("start", "end")}, schema)
    for c in columns:
        typed = kind if c in marked else _typed(data[c])
        if typed is None and all(v is None for v in data[c]):
            typed = known.get(c)  # no value to infer a type from
        table = table.append_column(c, pa.array(data[c], type=typed))
    return table


def _typed(values: list[Any]) -> Any:
    """The Arrow type of a payload column where inference would lose
    precision: pandas ``Timestamp`` values with nanoseconds take
    ``timestamp[ns]`` (Arrow infers ``timestamp[us]`` and floors them);
    None (infer) otherwise."""
    import pyarrow as pa

    found = next((v for v in values if getattr(v, "nanosecond", 0)), None)
    if found is None:
        return None
    return pa.timestamp("ns", tz=None if found.tz is None else str(found.tz))


def pandas_frame(table: Any) -> Any:
    """A pyarrow Table as a pandas DataFrame, integer columns with nulls as
    pandas' nullable ``Int64`` (``UInt64``, ...) rather than float64, which
    would change integers beyond 2**53 (:meth:`Stream.to_pandas`). pyarrow
    hands them over as Python ints (no float on the way), and pandas names
    the dtype, so this module imports no pandas itself."""
    import pyarrow as pa

    frame = table.to_pandas(integer_object_nulls=True)
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_integer(column.type) and column.null_count:
            arrow = str(column.type)  # int64, uint8, ...
            nullable = "UInt" + arrow[4:] if arrow.startswith("uint") else "Int" + arrow[3:]
            frame[name] = frame[name].astype(nullable)
    return frame
