"""UDMs as Spark SQL table functions (Python UDTFs with a TABLE argument).

:func:`register_sql` registers a UDM under a SQL name; a query then runs
it over a table, windowed, per key::

    SELECT * FROM stats_median(
        TABLE(readings),
        start => 'ts', key => 'sensor', value => 'temp',
        window => 'hopping', size => INTERVAL '10' MINUTE, hop => INTERVAL '5' MINUTE)

The scalar arguments are named constants (see :data:`OPTIONS`). The table
function's ``analyze`` step reads them, asks Spark to partition the table by
the key columns (so do not add ``PARTITION BY`` yourself), to compute the
tick lifetimes, and fixes the output schema: ``start``, ``end`` (timestamps
for timestamp, date and string times, else ticks), the key columns, then
the result columns (a struct result flattened into its fields). Each
partition, one key, is evaluated with the reference evaluator
(:func:`udm.host.evaluate`) in the Python worker.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.udtf import AnalyzeArgument, AnalyzeResult, PartitioningColumn, SelectedColumn

from udm.host.invoke import instantiate, udm_label
from udm.host.reference import evaluate
from udm.host.registry import resolve_udm
from udm.host.rows import (
    SUB_MICROSECOND,
    check_row,
    normalize_value,
    reason_sub_microsecond,
    reason_unparsable,
)
from udm.host.spark.evaluate import to_arrow_column
from udm.host.spark.frame import quoted, reason_null_key
from udm.host.spark.session import share_driver_python
from udm.host.spark.types import declared_result_type, from_returns
from udm.host.time import INFINITY, finer_than_a_tick, to_duration_ticks, to_ticks
from udm.host.windows import WindowSpec, window_from_dict
from udm.sdk.base import Udm

__all__ = ["OPTIONS", "register_sql"]

log = logging.getLogger("udm.spark.sql")

#: Named arguments of a UDM table function and what they mean.
OPTIONS: dict[str, str] = {
    "start": "start time column (required)",
    "end": "end time column; omit for point events [start, start + 1 tick)",
    "shape": "'point', 'interval' or 'edge' (a null end means the event never ended)",
    "key": "group key column, or several separated by commas",
    "value": "the column the UDM receives (default: a dict of all payload columns)",
    "window": "'hopping', 'tumbling', 'snapshot', 'count_by_start' or 'count_by_end'",
    "size": "hopping/tumbling window size: ticks or an INTERVAL",
    "hop": "hopping window hop: ticks or an INTERVAL",
    "offset": "hopping/tumbling window offset: ticks or an INTERVAL",
    "count": "count window size (number of distinct start/end times)",
    "input_clipping": "'none', 'left', 'right' or 'full'",
    "output_policy": "'align', 'point_end', 'clip', 'keep' or 'time_bound'",
    "emit_empty": "true to run the UDM on empty hopping/tumbling windows",
    "watermark": "only windows ending by this time (ticks or TIMESTAMP) are output",
    "returns": "the result's Spark type as DDL, e.g. 'double' (default: the UDM's annotation)",
    "args": "the UDM's arguments as a JSON object string, e.g. '{\"q\": 0.9}'",
    "on_invalid": "'raise' (default) or 'drop' rows with null/invalid times (counted in the log)",
    "on_null_key": "'raise' (default), 'drop' (counted in the log) or 'keep' rows with a null key",
}

_S, _E = "__udm_s", "__udm_e"
#: the time columns as given, so an invalid row is shown as it is in the table
_RAW_S, _RAW_E = "__udm_raw_s", "__udm_raw_e"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass
class UdmAnalyzeResult(AnalyzeResult):
    """What ``analyze`` hands to each table function instance."""

    options: dict[str, Any] = field(default_factory=dict)


def _ticks_sql(name: str, dtype: T.DataType) -> tuple[str, str]:
    """(SQL expression of a time column in ticks, output time kind)."""
    c = quoted(name)
    if isinstance(dtype, T.TimestampType):
        return f"unix_micros({c})", "timestamp"
    if isinstance(dtype, T.TimestampNTZType):
        return (
            f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {c})",
            "timestamp_ntz",
        )
    if isinstance(dtype, T.DateType):
        return f"CAST(unix_date({c}) AS BIGINT) * 86400000000", "timestamp"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return f"CAST({c} AS BIGINT)", "long"
    if isinstance(dtype, T.StringType):
        return f"unix_micros(try_to_timestamp({c}))", "timestamp"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; event times must be timestamps, "
        "dates, integer ticks or ISO 8601 strings"
    )


def _out_time(ticks: int | None, kind: str) -> Any:
    if ticks is None or kind == "long":
        return ticks
    if ticks >= INFINITY:
        return None
    aware = _EPOCH + dt.timedelta(microseconds=ticks)
    return aware if kind == "timestamp" else aware.replace(tzinfo=None)


def _window(opts: dict[str, Any]) -> WindowSpec:
    kind = opts.get("window")
    if kind is None:
        raise ValueError("a UDM table function needs window => 'hopping' (or another kind)")
    spec: dict[str, Any] = {"kind": kind}
    for name in ("size", "hop", "offset"):
        if name in opts:
            spec[name] = to_duration_ticks(opts[name])
    if "count" in opts:
        spec["count"] = int(opts["count"])
    return window_from_dict(spec)


def _constant_options(kwargs: dict[str, AnalyzeArgument]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for name, arg in kwargs.items():
        if arg.isTable:
            continue
        if name not in OPTIONS:
            raise ValueError(
                f"unknown argument {name!r} of a UDM table function; known: {', '.join(OPTIONS)}"
            )
        if not arg.isConstantExpression:
            raise ValueError(f"argument {name} must be a constant (a literal), not an expression")
        if arg.value is not None:
            opts[name] = arg.value
    shape = opts.get("shape")
    if shape is not None and shape not in ("point", "interval", "edge"):
        raise ValueError(f"shape => {shape!r}: use 'point', 'interval' or 'edge'")
    on_invalid = opts.get("on_invalid")
    if on_invalid is not None and on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid => {on_invalid!r}: use 'raise' or 'drop'")
    on_null_key = opts.get("on_null_key")
    if on_null_key is not None and on_null_key not in ("raise", "drop", "keep"):
        raise ValueError(f"on_null_key => {on_null_key!r}: use 'raise', 'drop' or 'keep'")
    return opts


def _udm_args(opts: dict[str, Any]) -> dict[str, Any] | None:
    text = opts.get("args", "{}")
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"args => {text!r} is not JSON ({exc.msg}); give the UDM's arguments as a JSON "
            "object with double-quoted names, e.g. args => '{\"q\": 0.9}'"
        ) from None
    if not isinstance(args, dict):
        raise ValueError(f"args => {text!r}: give a JSON object, e.g. args => '{{\"q\": 0.9}}'")
    return args or None


def _make_udtf(udm: Any, default_returns: Any) -> type:
    """A table function class for ``udm`` (a class or instance)."""

    class UdmTableFunction:
        @staticmethod
        def analyze(*args: AnalyzeArgument, **kwargs: AnalyzeArgument) -> AnalyzeResult:
            tables = [a for a in (*args, *kwargs.values()) if a.isTable]
            if len(tables) != 1 or len(args) > 1:
                raise ValueError(
                    "call a UDM table function with one TABLE(...) argument followed by named "
                    "options, e.g. f(TABLE(t), start => 'ts', window => 'tumbling', size => 10)"
                )
            schema: Any = tables[0].dataType
            types = {f.name: f.dataType for f in schema.fields}
            opts = _constant_options(kwargs)
            for name in ("start", "end", "value"):
                if name in opts and opts[name] not in types:
                    raise ValueError(
                        f"{name} => {opts[name]!r}: no such column; columns are {list(types)}"
                    )
            if "start" not in opts:
                raise ValueError("a UDM table function needs start => '<time column>'")
            keys = [k.strip() for k in str(opts.get("key", "")).split(",") if k.strip()]
            missing = [k for k in keys if k not in types]
            if missing:
                raise ValueError(f"key => {missing}: no such column; columns are {list(types)}")
            instance = instantiate(udm, _udm_args(opts))
            _window(opts)  # fail early on bad window options
            s_sql, kind = _ticks_sql(opts["start"], types[opts["start"]])
            select = [SelectedColumn(s_sql, _S), SelectedColumn(quoted(opts["start"]), _RAW_S)]
            if "end" in opts:
                e_sql, e_kind = _ticks_sql(opts["end"], types[opts["end"]])
                if (e_kind == "long") != (kind == "long"):
                    raise ValueError("start and end must both be times or both be ticks")
                select += [SelectedColumn(e_sql, _E), SelectedColumn(quoted(opts["end"]), _RAW_E)]
            times = {opts["start"], opts.get("end")}
            payload = [c for c in types if c not in times]
            select += [SelectedColumn(quoted(c), c) for c in payload]
            returns = opts.get("returns", default_returns)
            rtype = from_returns(returns) if returns is not None else declared_result_type(instance)
            if rtype is None:
                raise ValueError(
                    f"the result type of UDM {instance.name!r} is unknown: annotate its return "
                    "type or pass returns => 'double' (a Spark DDL type)"
                )
            time_type: T.DataType = {
                "long": T.LongType(),
                "timestamp": T.TimestampType(),
                "timestamp_ntz": T.TimestampNTZType(),
            }[kind]
            fields = [T.StructField("start", time_type), T.StructField("end", time_type)]
            fields += [T.StructField(k, types[k]) for k in keys]
            if isinstance(rtype, T.StructType):
                result_cols = list(rtype.fieldNames())
                fields += list(rtype.fields)
            else:
                result_cols = []
                fields.append(T.StructField(instance.name.replace(".", "_"), rtype))
            out = T.StructType(fields)
            if len(set(out.fieldNames())) != len(out.fieldNames()):
                raise ValueError(f"output columns clash: {out.fieldNames()}; rename the keys")
            result_types = [f.dataType.json() for f in out.fields[2 + len(keys) :]]
            options = dict(
                opts,
                keys=keys,
                kind=kind,
                payload=payload,
                columns=list(types),
                struct=result_cols,
                types=result_types,
            )
            if keys:
                return UdmAnalyzeResult(
                    schema=out,
                    partitionBy=[PartitioningColumn(quoted(k)) for k in keys],
                    select=select,
                    options=options,
                )
            return UdmAnalyzeResult(
                schema=out, withSinglePartition=True, select=select, options=options
            )

        def __init__(self, analyze_result: UdmAnalyzeResult) -> None:
            self.opts = analyze_result.options
            self.rows: list[Any] = []

        def eval(self, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            for a in (*args, *kwargs.values()):
                if isinstance(a, T.Row):
                    self.rows.append(a)
            return iter(())

        def terminate(self) -> Iterator[tuple[Any, ...]]:
            return _run_partition(udm, self.opts, self.rows)

    UdmTableFunction.__name__ = f"Udtf_{getattr(udm, 'name', 'udm')}"
    return UdmTableFunction


def _run_partition(udm: Any, opts: dict[str, Any], rows: list[Any]) -> Iterator[tuple[Any, ...]]:
    from udm.sdk.events import IntervalEvent

    if not rows or not _key_taken(opts, rows):
        return
    start_col, end_col = opts["start"], opts.get("end")
    shape: Any = opts.get("shape") or ("interval" if end_col else "point")
    value = opts.get("value")
    payload_cols: list[str] = opts["payload"]
    events = []
    dropped = 0
    for r in rows:
        d = r.asDict()
        # a string Spark cannot parse is null in ticks, not in the table
        lifetime: tuple[int, int] | str
        if isinstance(d[_RAW_S], str) and finer_than_a_tick(d[_RAW_S]):
            lifetime = reason_sub_microsecond(start_col)  # Spark's parser would drop the digits
        elif isinstance(d.get(_RAW_E), str) and finer_than_a_tick(d[_RAW_E]):
            lifetime = reason_sub_microsecond(str(end_col))
        elif d[_S] is None and d[_RAW_S] is not None:
            lifetime = reason_unparsable(start_col)
        elif end_col is not None and d[_E] is None and d[_RAW_E] is not None:
            lifetime = reason_unparsable(end_col)
        else:
            lifetime = check_row(d[_S], d.get(_E), shape, start_col, end_col)
        if isinstance(lifetime, str):
            if opts.get("on_invalid", "raise") == "drop":
                dropped += 1
                continue
            fix = (
                "Fix the data: round the times to microseconds (at most six fraction digits)"
                if SUB_MICROSECOND in lifetime
                else "Fix the data, or pass on_invalid => 'drop' to drop such rows "
                "(counted in the log)"
            )
            raise ValueError(f"invalid event: {lifetime}; row: {_row_as_written(opts, d)}. {fix}")
        payload = d[value] if value else {c: d[c] for c in payload_cols}
        events.append(IntervalEvent(lifetime[0], lifetime[1], payload))
    if dropped:
        log.warning("dropped %d rows with invalid times", dropped)
    if not events:
        return
    first = rows[0].asDict()
    keys = [first[k] for k in opts["keys"]]
    window = _window(opts)
    args = _udm_args(opts)
    out = evaluate(
        events,
        window,
        udm,
        input_clipping=opts.get("input_clipping", "none"),
        output_policy=opts.get("output_policy"),
        watermark=to_ticks(opts.get("watermark", INFINITY)),
        emit_empty=bool(opts.get("emit_empty", False)),
        args=args,
    )
    kind = opts["kind"]
    struct: list[str] = opts["struct"]
    rows_out = sorted(out, key=lambda e: (e.start, e.end))
    results: list[list[Any]] = []
    for ev in rows_out:
        result = normalize_value(ev.payload)
        results.append(
            [None if result is None else result.get(f) for f in struct] if struct else [result]
        )
    # a result that does not fit the declared type: say which UDM and window
    # (Spark's own conversion error names neither)
    label = udm_label(udm)
    for j, type_json in enumerate(opts["types"]):
        dtype = to_arrow_type(T._parse_datatype_json_string(type_json))
        to_arrow_column(
            [r[j] for r in results],
            dtype,
            lambda i: f"UDM {label!r} on window [{rows_out[i].start}, {rows_out[i].end})",
        )
    for ev, values in zip(rows_out, results, strict=True):
        yield (_out_time(ev.start, kind), _out_time(ev.end, kind), *keys, *values)


def _row_as_written(opts: dict[str, Any], d: dict[str, Any]) -> str:
    """A table row as JSON, its time columns as written in the table (not
    as ticks), for the error an invalid row raises."""
    raw = {opts["start"]: d[_RAW_S], opts.get("end"): d.get(_RAW_E)}
    shown = {c: raw[c] if c in raw else d[c] for c in opts["columns"]}
    return json.dumps(shown, default=str, separators=(",", ":"), ensure_ascii=False)


def _key_taken(opts: dict[str, Any], rows: list[Any]) -> bool:
    """Whether a partition's rows (one key: the function partitions by it)
    are evaluated under ``on_null_key``: as ``Stream.from_dataframe`` does,
    a null key column fails the query by default (it was a group of its
    own, silently), is dropped and counted in the log, or kept as a group."""
    first = rows[0].asDict()
    null = [k for k in opts["keys"] if first[k] is None]
    policy = opts.get("on_null_key", "raise")
    if not null or policy == "keep":
        return True
    if policy == "drop":
        log.warning("dropped %d rows whose key %r is null", len(rows), null[0])
        return False
    raise ValueError(
        f"invalid event: {reason_null_key(null[0])}; row: {_row_as_written(opts, first)}. "
        "Fix the data, or pass on_null_key => 'drop' to drop such rows (counted in the log) "
        "or 'keep' to keep them as a group of their own"
    )


_REGISTERED: set[str] = set()


def register_sql(
    spark: SparkSession, udm: Any, name: str | None = None, *, returns: Any = None
) -> str:
    """Register ``udm`` (a registered name, class or instance) as a SQL table
    function; returns the SQL name (default: the UDM name, dots as ``_``,
    so ``"stats.median"`` becomes ``stats_median``)."""
    resolved = resolve_udm(udm)
    if isinstance(resolved, Udm) or (isinstance(resolved, type) and issubclass(resolved, Udm)):
        default = resolved.name
    else:
        instantiate(resolved)  # raises a clear TypeError for non-UDMs
        default = str(udm)
    sql_name = name or (udm if isinstance(udm, str) else default).replace(".", "_")
    if not sql_name.replace("_", "").isalnum():
        raise ValueError(f"{sql_name!r} is not a valid SQL function name; pass name=")
    if sql_name not in _REGISTERED and spark.catalog.functionExists(sql_name):
        raise ValueError(
            f"Spark SQL already has a function named {sql_name!r}; register the UDM under "
            "another name with name="
        )
    from pyspark.sql.functions import udtf

    share_driver_python(spark)

    _REGISTERED.add(sql_name)
    # Parse on the driver: DDL needs the JVM, which Python workers lack.
    parsed_returns = from_returns(returns) if returns is not None else None
    table_function: Any = udtf(_make_udtf(resolved, parsed_returns))
    spark.udtf.register(sql_name, table_function)
    return sql_name
