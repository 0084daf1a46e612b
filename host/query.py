"""The fluent query API: streams of events, windows, UDMs, in-process or on Spark.

A :class:`Stream` is a lazy query plan over events with lifetimes::

    Stream.from_dataframe(df, start="ts", key="sensor")     # point events
          .where(lambda p: p["temp"] is not None)            # UDF filter
          .hopping_window(size=timedelta(minutes=10), hop=timedelta(minutes=5))
          .aggregate("stats.median", value="temp")           # a UDA by name
          .to_dataframe()                                     # start, end, sensor, median

Each event is a lifetime ``[start, end)`` and a payload: the row's columns
other than its time columns (key columns included). Group keys
(``key=`` or :meth:`Stream.group_apply`) split the stream into groups with
their own windows, as StreamInsight's group-and-apply. A window operation
(:meth:`WindowedStream.aggregate`, :meth:`WindowedStream.apply`) yields a
new stream whose payload columns are the key columns and the results, so
queries chain.

Two engines run a plan with the same semantics: Spark (``to_dataframe()``,
and ``to_cht()`` of DataFrame sources) and the in-process reference
evaluator (``to_cht(engine="reference")``, and in-memory sources), which
calls :func:`udm.host.evaluate` per group. This module never imports
pyspark; the Spark engine lives in :mod:`udm.host.spark` and is imported on
first use.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from udm.host.cht import Cht, derive_cht
from udm.host.invoke import PLAIN_TYPES, ValueFn, instantiate, make_value_fn
from udm.host.policies import InputClipping, OutputPolicy, resolve_output_policy
from udm.host.reference import evaluate
from udm.host.stream import Element
from udm.host.time import INFINITY, format_time, iso_time, to_ticks
from udm.host.validation import CtiPolicy
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    WindowSpec,
)
from udm.sdk.base import Udm
from udm.sdk.decorators import Function
from udm.sdk.events import IntervalEvent

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "AggSpec",
    "InvalidEventError",
    "QueryMetrics",
    "Stream",
    "UdfError",
    "WindowedStream",
    "agg",
    "register_udm",
]

log = logging.getLogger("udm.query")

#: Internal column names of the normalized event table (ticks, int64).
S_COL = "__udm_s"
E_COL = "__udm_e"
INTERNAL_PREFIX = "__udm_"

Shape = Literal["point", "interval", "edge"]
OnInvalid = Literal["raise", "drop"]
OnNullKey = Literal["raise", "drop", "keep"]
ValueArg = str | Sequence[str] | Callable[[Any], Any] | None
Row = tuple[int, int, dict[str, Any]]


class InvalidEventError(ValueError):
    """An input row cannot be an event (null or unparsable time, end not
    after start). The message names the column and shows the row."""


# ---------------------------------------------------------------- registry

_LOCAL_UDMS: dict[str, Any] = {}


def register_udm(name: str, udm: Any) -> None:
    """Make a UDM available by ``name`` in this process, ahead of installed
    libraries (a notebook's quick override); validated like discovered UDMs.
    :meth:`udm.host.registry.Registry.register` is the library-qualified way."""
    from udm.host.registry import validate_udm

    if not isinstance(name, str) or not name:
        raise ValueError(f"a UDM name must be a non-empty string, got {name!r}")
    validate_udm(udm, f"register_udm({name!r})")
    _LOCAL_UDMS[name] = udm


def _resolve_udm(name_or_udm: Any) -> Any:
    """A UDM from itself, a ``register_udm`` name, or a registry name
    (``library.name`` or ``module:attribute``)."""
    if not isinstance(name_or_udm, str):
        return name_or_udm
    if name_or_udm in _LOCAL_UDMS:
        return _LOCAL_UDMS[name_or_udm]
    from udm.host.registry import get_registry

    return get_registry().resolve(name_or_udm)


# ------------------------------------------------------------ plan pieces


@dataclass(frozen=True)
class AggSpec:
    """One aggregate of a multi-aggregate call (see :func:`agg`)."""

    udm: Any
    value: ValueArg = None
    returns: Any = None
    args: Mapping[str, Any] = field(default_factory=dict)


def agg(udm: Any, value: ValueArg = None, *, returns: Any = None, **args: Any) -> AggSpec:
    """An aggregate for ``aggregate(name=agg(...), ...)``: the UDM (name,
    class or instance), its ``value`` mapping, result type and arguments."""
    return AggSpec(udm, value, returns, dict(args))


def _pick(columns: Sequence[str]) -> Callable[[Any], Any]:
    cols = list(columns)

    def pick(payload: Any) -> Any:
        try:
            return {c: payload[c] for c in cols}
        except KeyError as exc:
            raise KeyError(f"payload {payload!r} has no field {exc.args[0]!r}") from None

    return pick


@dataclass(frozen=True)
class UdmCall:
    """A resolved UDM invocation: output name, instance, input mapping."""

    name: str
    udm: Udm
    value: ValueArg
    returns: Any = None

    @property
    def value_fn(self) -> ValueFn:
        if self.value is None or isinstance(self.value, str) or callable(self.value):
            return make_value_fn(self.value)
        return _pick(self.value)

    def columns(self) -> list[str] | None:
        """Input columns the UDM reads (``None``: the whole payload)."""
        if isinstance(self.value, str):
            return [self.value]
        if self.value is None or callable(self.value):
            return None
        return list(self.value)

    def describe(self) -> str:
        if self.value is None:
            v = "payload"
        elif isinstance(self.value, str):
            v = repr(self.value)
        elif callable(self.value):
            v = getattr(self.value, "__name__", "fn")
        else:
            v = repr(list(self.value))
        args = _udm_arguments(self.udm)
        shown = "".join(f", {k}={a!r}" for k, a in args.items())
        return f"{self.udm.name}({v}{shown}) [{self.udm.flavor()}]"


def _udm_arguments(udm: Udm) -> dict[str, Any]:
    """The arguments a UDM was created with, for ``explain``: a decorated
    function's ``args``, else the instance's public attributes."""
    state = vars(udm) if hasattr(udm, "__dict__") else {}
    if isinstance(state.get("args"), dict):
        return dict(state["args"])
    return {k: a for k, a in state.items() if not k.startswith("_") and not callable(a)}


@dataclass(frozen=True)
class WhereNode:
    predicate: Any

    def describe(self) -> str:
        return f"where {_describe_expr(self.predicate)}"


@dataclass(frozen=True)
class SelectNode:
    columns: tuple[Any, ...]
    named: tuple[tuple[str, Any, Any], ...]  # (name, UDF or Column, returns)

    def describe(self) -> str:
        parts = [_describe_expr(c) for c in self.columns]
        parts += [f"{n}={_describe_expr(e)}" for n, e, _ in self.named]
        return "select " + ", ".join(parts)


@dataclass(frozen=True)
class GroupNode:
    keys: tuple[str, ...]
    replaces: tuple[str, ...] = ()  #: the grouping before this one, if any

    def describe(self) -> str:
        text = "group_apply " + (", ".join(self.keys) if self.keys else "(no key)")
        if self.replaces and self.replaces != self.keys:
            text += f" (replacing the grouping by {', '.join(self.replaces)})"
        return text


@dataclass(frozen=True)
class WindowOp:
    """A windowed aggregate (one or more UDAs) or operator."""

    window: WindowSpec
    kind: Literal["aggregate", "operator"]
    calls: tuple[UdmCall, ...]
    clipping: InputClipping
    policy: OutputPolicy
    emit_empty: bool
    watermark: int
    partial: bool | None
    multi: bool  # aggregate(name=..., ...): struct fields are prefixed with the name

    def mergeable(self) -> bool:
        """Whether partial aggregation may be used: every UDA merges states
        and does not depend on input order."""
        return self.kind == "aggregate" and all(
            c.udm.incremental
            and bool(c.udm.properties.mergeable)
            and c.udm.properties.order_insensitive
            for c in self.calls
        )

    def uses_panes(self) -> bool:
        """Whether partial states of point events are kept per pane of
        gcd(size, hop): overlapping hopping windows of time-insensitive
        UDAs, whose states do not depend on the window, so a pane's state
        serves every window holding it ("No pane, no gain", Li et al.)."""
        w = self.window
        return (
            isinstance(w, HoppingWindow)
            and w.size > w.hop
            and all(not c.udm.time_sensitive for c in self.calls)
        )

    def use_partial(self) -> bool:
        """Whether Spark folds partial states per input partition. By
        default on hopping and tumbling windows whenever every UDA can
        merge. Snapshot and count windows only on request: their windows
        depend on every endpoint of a key, so assigning them sends each key
        to one worker anyway, where evaluating them directly is far cheaper
        than assigning them in Spark SQL for partial states."""
        if self.partial is None:
            return isinstance(self.window, HoppingWindow) and self.mergeable()
        if self.partial and not self.mergeable():
            bad = [c.udm.name for c in self.calls if not c.udm.properties.mergeable]
            raise ValueError(
                f"partial=True needs mergeable, order-insensitive incremental aggregates; "
                f"{', '.join(bad) or 'these UDMs'} cannot merge states"
            )
        return self.partial

    def spark_route(self) -> Literal["grid", "endpoints", "assigned"]:
        """How Spark runs the operation: hopping and tumbling windows in the
        worker (``grid``), snapshot and count windows in the worker unless
        partially aggregated (``endpoints``), else windows assigned in Spark
        SQL (``assigned``: partial snapshot/count windows, ``emit_empty``)."""
        if isinstance(self.window, HoppingWindow):
            return "assigned" if self.emit_empty else "grid"
        return "assigned" if self.use_partial() else "endpoints"

    def describe(self, datetimes: bool = False) -> str:
        """The operation; ``datetimes`` (a query over datetimes) shows window
        sizes in units (``1h``) and the watermark as a UTC datetime."""
        wm = ""
        if self.watermark < INFINITY:
            shown = iso_time(self.watermark) if datetimes else format_time(self.watermark)
            wm = f", watermark={shown}"
        lines = [f"window {self.window.describe(durations=datetimes)}{wm}"]
        for c in self.calls:
            lines.append(f"  {self.kind} {c.name} = {c.describe()}")
        opts = f"input_clipping={self.clipping.value}, output_policy={self.policy.value}"
        if self.emit_empty:
            opts += ", emit_empty"
        lines.append(f"  {opts}")
        return "\n".join(lines)


Node = WhereNode | SelectNode | GroupNode | WindowOp


def _describe_expr(expr: Any) -> str:
    if isinstance(expr, str):
        return expr
    if isinstance(expr, Function):
        return f"udf {expr.name}"
    if callable(expr) and not _is_column(expr):
        return f"udf {getattr(expr, '__name__', type(expr).__name__)}"
    return str(expr)


def _is_column(expr: Any) -> bool:
    return type(expr).__name__ == "Column" and type(expr).__module__.startswith("pyspark")


@dataclass(frozen=True)
class Source:
    """Where the events come from: a Spark DataFrame or in-memory rows."""

    df: Any = None
    rows: tuple[Row, ...] | None = None
    start: str = "start"
    end: str | None = None
    shape: Shape = "point"
    on_invalid: OnInvalid = "raise"
    keys: tuple[str, ...] = ()  # from_dataframe's key columns, checked by on_null_key
    on_null_key: OnNullKey = "keep"
    scalar: bool = False  # in-memory payloads were scalars, held in column "value"
    timestamps: bool = False  # in-memory ticks become timestamps in to_dataframe()
    dropped: tuple[tuple[str, int], ...] = ()  # in-memory rows dropped, by reason
    # the metrics of the latest run of any query on this source (one entry)
    latest: list[QueryMetrics] = field(default_factory=list, compare=False, repr=False)

    def datetimes(self) -> bool:
        """Whether the events' times are datetimes (timestamps, dates or
        strings) rather than int ticks: plans and plots then show them so."""
        if self.df is None:
            return self.timestamps
        types = {f.name: f.dataType.typeName() for f in self.df.schema.fields}
        return types.get(self.start) in ("timestamp", "timestamp_ntz", "date", "string")

    def describe(self) -> str:
        if self.df is not None:
            cols = ", ".join(f"{f.name}: {f.dataType.simpleString()}" for f in self.df.schema)
            if self.shape == "point":
                life = f"point events at {self.start!r}"
            elif self.shape == "edge":
                life = (
                    f"edge events [{self.start!r}, {self.end!r}), open while {self.end!r} is null"
                )
            else:
                life = f"interval events [{self.start!r}, {self.end!r})"
            return f"DataFrame[{cols}]\n  {life}; on_invalid={self.on_invalid}"
        assert self.rows is not None
        return f"{len(self.rows)} in-memory events; on_invalid={self.on_invalid}"


@dataclass(frozen=True)
class Layout:
    """How a CHT payload is made from an output row: one column's value
    (``scalar``) or a dict of fields read from columns."""

    scalar: str | None
    fields: tuple[tuple[str, str], ...]

    def payload(self, row: Mapping[str, Any]) -> Any:
        if self.scalar is not None:
            return row[self.scalar]
        return {name: row[col] for name, col in self.fields}


#: The column holding scalar (non-dict) payloads of in-memory sources.
SCALAR_COL = "value"


def udf_input(fn: Callable[[Any], Any], scalar: bool) -> Callable[[Any], Any]:
    """A UDF of the row dict: scalar streams pass the scalar payload."""
    if not scalar:
        return fn

    def on_scalar(row: Any) -> Any:
        return fn(row[SCALAR_COL])

    return on_scalar


def udf_of_payload(fn: Callable[[Any], Any], scalar: bool, where: str) -> Callable[[Any], Any]:
    """A ``where``/``select`` UDF as called on each row: its failure names
    the UDF and the payload, and says how the payload is passed, since a
    UDF written for one column (``fahrenheit(celsius)``) gets the dict."""
    call = udf_input(fn, scalar)
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or repr(fn)

    def called(row: Any) -> Any:
        try:
            return call(row)
        except Exception as exc:
            shown = row[SCALAR_COL] if scalar else row
            hint = (
                ""
                if scalar
                else "; a UDF here is called with the event's payload dict (column -> value): "
                f"for a UDF of one column write lambda p: {name}(p['<column>'])"
            )
            raise UdfError(
                f"UDF {name!r} in {where} failed on payload {shown!r:.200}: "
                f"{type(exc).__name__}: {exc}{hint}"
            ) from exc

    return called


class UdfError(ValueError):
    """A UDF in ``where`` or ``select`` raised."""


def adapt_op(op: WindowOp, scalar: bool) -> WindowOp:
    """The window operation as run on rows: on a scalar stream a UDM (or a
    value function) receives the scalar payload, not the row dict."""
    if not scalar:
        return op
    calls = []
    for c in op.calls:
        if c.value is None:
            c = dataclasses.replace(c, value=SCALAR_COL)
        elif callable(c.value):
            c = dataclasses.replace(c, value=udf_input(c.value, True))
        calls.append(c)
    return dataclasses.replace(op, calls=tuple(calls))


class QueryMetrics:
    """What a run dropped under ``on_invalid="drop"``, by reason.

    For the Spark engine the counts are observed while the output is
    computed (no extra job), so they exist once an action on the output
    DataFrame has finished; ``invalid_rows()`` returns ``None`` before that
    (or waits with ``wait=True``).
    """

    def __init__(self, counts: Mapping[str, int] | None = None, observation: Any = None) -> None:
        self._counts = dict(counts) if counts is not None else None
        self._observation = observation
        self._logged = False

    def _ready(self) -> bool:
        if self._counts is not None or self._observation is None:
            return True
        try:
            return bool(self._observation._jo.future().isCompleted())
        except Exception:  # pragma: no cover - other Spark builds
            return True

    def invalid_rows(self, wait: bool = False) -> dict[str, int] | None:
        """Rows dropped by reason (only reasons that occurred), or ``None``
        if the output has not been computed yet and ``wait`` is false."""
        if self._counts is None and self._observation is not None:
            if not wait and not self._ready():
                return None
            got = self._observation.get
            self._counts = {k: int(v or 0) for k, v in got.items()}
        counts = {
            k: v for k, v in (self._counts or {}).items() if v and not k.startswith(INTERNAL_PREFIX)
        }
        if counts and not self._logged:
            self._logged = True
            log.warning("dropped %d invalid input rows: %s", sum(counts.values()), counts)
        return counts

    def rows_read(self, wait: bool = False) -> int | None:
        """Source rows the run read, valid or not (observed with the drops;
        ``None`` when nothing was observed)."""
        self.invalid_rows(wait=wait)
        read = (self._counts or {}).get(INTERNAL_PREFIX + "rows")
        return None if read is None else int(read)

    @property
    def dropped(self) -> int:
        """Total rows dropped (waits for the output to be computed)."""
        return sum((self.invalid_rows(wait=True) or {}).values())

    def __repr__(self) -> str:
        return f"QueryMetrics(invalid_rows={self.invalid_rows()!r})"


# ------------------------------------------------------------ validation


def reason_null(col: str) -> str:
    return f"{col!r} is null"


def reason_unparsable(col: str) -> str:
    return f"{col!r} is not a valid time"


def reason_end_of_time(col: str) -> str:
    return f"{col!r} is the end of time (a point event cannot start there)"


#: how a query says that an event has not ended, for a null end's reason
OPEN_BY_SHAPE = "interval events need an end; use shape='edge' for open events"
OPEN_IN_MEMORY = "an event that has not ended ends at INFINITY, 'inf'"


def reason_no_end(col: str, open_end: str = OPEN_BY_SHAPE) -> str:
    return f"{col!r} is null ({open_end})"


def reason_order(start: str, end: str) -> str:
    return f"{end!r} is not after {start!r}"


def check_row(
    start: Any,
    end: Any,
    shape: Shape,
    start_col: str,
    end_col: str | None,
    open_end: str = OPEN_BY_SHAPE,
) -> tuple[int, int] | str:
    """Ticks of one in-memory row's lifetime, or the reason it is invalid
    (``open_end``: how the caller's input writes an event that has not
    ended, for a null end)."""
    if start is None:
        return reason_null(start_col)
    try:
        s = to_ticks(start)
    except (ValueError, TypeError):
        return reason_unparsable(start_col)
    if shape == "point" or end_col is None:
        if s >= INFINITY:
            return reason_end_of_time(start_col)
        return s, s + 1
    if end is None:
        if shape == "edge":
            return s, INFINITY
        return reason_no_end(end_col, open_end)
    try:
        e = to_ticks(end)
    except (ValueError, TypeError):
        return reason_unparsable(end_col)
    if e <= s:
        return reason_order(start_col, end_col)
    return s, e


def _start_of(event: Any) -> Any:
    if isinstance(event, IntervalEvent):
        return event.start
    try:
        return event[0]
    except (TypeError, IndexError, KeyError):
        return None  # from_cht reports the malformed event


def _is_datetime(value: Any) -> bool:
    """Whether an in-memory time is a datetime rather than int ticks: a
    ``datetime``/``date`` (pandas ``Timestamp`` too), an ISO string, a numpy
    ``datetime64`` or an Arrow timestamp or date scalar."""
    if isinstance(value, (dt.date, str)):
        return True
    dtype = getattr(value, "dtype", None)  # numpy datetime64
    if dtype is not None and getattr(dtype, "kind", None) == "M":
        return True
    arrow_type = str(getattr(value, "type", ""))  # pyarrow scalars
    return arrow_type.startswith(("timestamp", "date"))


def _why_not_a_time(*times: Any) -> str:
    """What :func:`to_ticks` says of the first of ``times`` it refuses
    (sub-microsecond precision, an unknown type ...), for an error message."""
    for t in times:
        if t is None:
            continue
        try:
            to_ticks(t)
        except (ValueError, TypeError) as exc:
            return f" ({exc})"
    return ""


def _invalid(reason: str, row: Any) -> InvalidEventError:
    return InvalidEventError(
        f"invalid event: {reason}; row: {row!r}. Fix the data, or pass on_invalid='drop' "
        "to drop such rows and count them (stream.metrics.invalid_rows())"
    )


# ----------------------------------------------------------------- streams


def _keys(key: str | Sequence[str] | None) -> tuple[str, ...]:
    if key is None:
        return ()
    if isinstance(key, str):
        return (key,)
    keys = tuple(key)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"group keys must be column names, got {key!r}")
    return keys


_NEEDS_WINDOW = (
    "{method}() runs a UDM once per window: window the stream first, e.g. "
    "stream.tumbling_window(size).{method}(...), or hopping_window, snapshot_window, "
    "count_window, window(spec)"
)


class Stream:
    """A lazy query over events; every method returns a new stream."""

    def __init__(
        self, source: Source, nodes: tuple[Node, ...] = (), keys: tuple[str, ...] = ()
    ) -> None:
        self._source = source
        self._nodes = nodes
        self._keys = keys
        self._metrics: QueryMetrics | None = None

    @property
    def metrics(self) -> QueryMetrics:
        """Metrics (rows dropped by ``on_invalid="drop"``, by reason) of the
        latest run (``to_dataframe``/``to_cht``) of this stream, else of the
        latest run of any query built on the same source: the stream where
        ``on_invalid`` was passed reports what the query run from it dropped."""
        if self._metrics is not None:
            return self._metrics
        return self._source.latest[0] if self._source.latest else QueryMetrics({})

    @metrics.setter
    def metrics(self, value: QueryMetrics) -> None:
        self._metrics = value
        self._source.latest[:] = [value]

    # ------------------------------------------------------------ sources

    @classmethod
    def from_dataframe(
        cls,
        df: DataFrame,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a Spark DataFrame, one per row.

        Args:
            df: the rows; time columns are timestamps, timestamp_ntz, dates,
                integer ticks or ISO strings.
            start: the start column.
            end: the end column (``None``: point events ``[start, start+1)``).
            key: group key column(s), as :meth:`group_apply`.
            shape: ``point`` (no end column), ``interval`` (end required) or
                ``edge`` (a null end means the event has not ended).
                Default: ``point`` without ``end``, else ``interval``.
            on_invalid: ``raise`` (default) fails on the first row with a
                null or unparsable time or an end not after its start, naming
                the column and showing the row; ``drop`` drops and counts them
                (see :attr:`metrics`).
            on_null_key: a row whose ``key`` column is null: ``raise``
                (default) fails naming the column and showing the row;
                ``drop`` drops and counts it (as ``on_invalid="drop"``,
                reason ``key 'k' is null``); ``keep`` keeps it, its events a
                group of their own with a null key (as Spark's ``groupBy``).
        """
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
        for role, col in (("start", start), ("end", end), *(("key", k) for k in _keys(key))):
            if col is not None and col not in columns:
                raise KeyError(
                    f"{role} column {col!r} is not in the DataFrame; its columns are {columns}"
                )
        clash = [c for c in columns if c.startswith(INTERNAL_PREFIX)]
        if clash:
            raise ValueError(f"columns {clash} use the reserved prefix {INTERNAL_PREFIX!r}")
        if on_null_key not in ("raise", "drop", "keep"):
            raise ValueError(f"unknown on_null_key {on_null_key!r}; use 'raise', 'drop' or 'keep'")
        source = Source(
            df=df,
            start=start,
            end=end,
            shape=shape,
            on_invalid=on_invalid,
            keys=_keys(key),
            on_null_key=on_null_key,
        )
        stream = cls(source)
        return stream.group_apply(*_keys(key)) if key is not None else stream

    @classmethod
    def from_cht(
        cls,
        events: Iterable[IntervalEvent[Any] | tuple[Any, Any, Any]],
        key: str | Sequence[str] | None = None,
        on_invalid: OnInvalid = "raise",
        timestamps: bool | None = None,
    ) -> Stream:
        """Events held in memory: ``IntervalEvent`` or ``(start, end, payload)``.

        Dict payloads give one column per field; any other payload is one
        column named ``value`` (and comes back unchanged from ``to_cht``).
        Times are int ticks or datetimes (``datetime``, ``date``, ISO
        strings). ``timestamps`` says whether :meth:`to_dataframe` returns
        timestamps (and ``explain``/``plot`` show datetimes); by default it
        does when the first event's start is a datetime, so datetimes in
        give datetimes out, as from a DataFrame.
        """
        if timestamps is None:
            events = list(events)
            timestamps = bool(events) and _is_datetime(_start_of(events[0]))
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
                    raise _invalid(lifetime + _why_not_a_time(start, end), ev) from None
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
        source = Source(
            rows=tuple(rows),
            on_invalid=on_invalid,
            scalar=bool(scalar),
            timestamps=timestamps,
            dropped=tuple(dropped.items()),
        )
        stream = cls(source)
        stream.metrics = QueryMetrics(dropped)
        if key is None:
            return stream
        columns = list(dict.fromkeys(c for _, _, p in rows for c in p))
        missing = [k for k in _keys(key) if k not in columns]
        if rows and missing:  # (no events: nothing to check against)
            raise KeyError(f"key columns {missing} are not in the events; columns: {columns}")
        return stream.group_apply(*_keys(key))

    @classmethod
    def from_pandas(
        cls,
        df: Any,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a pandas DataFrame, one per row, held in memory and
        run in-process (no Spark): the arguments and checks of
        :meth:`from_dataframe`. For small data; :meth:`to_pandas` gives the
        output as a DataFrame (see :mod:`udm.host.tables`)."""
        from udm.host.tables import from_table

        return from_table(cls, df, start, end, key, shape, on_invalid, on_null_key)

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        start: str = "start",
        end: str | None = None,
        key: str | Sequence[str] | None = None,
        shape: Shape | None = None,
        on_invalid: OnInvalid = "raise",
        on_null_key: OnNullKey = "raise",
    ) -> Stream:
        """Events from a pyarrow Table or RecordBatch, as :meth:`from_pandas`."""
        from udm.host.tables import from_table

        return from_table(cls, table, start, end, key, shape, on_invalid, on_null_key)

    def runs_in_process(self) -> bool:
        """Whether the stream's events are in memory (``from_cht``,
        ``from_pandas``, ``from_arrow``): it runs without Spark."""
        return self._source.df is None

    def to_arrow(self) -> Any:
        """Run in-process and return the output as a pyarrow Table with the
        columns of :meth:`to_dataframe` (see :func:`udm.host.tables.to_arrow`)."""
        from udm.host.tables import to_arrow

        return to_arrow(self)

    def to_pandas(self) -> Any:
        """Run in-process and return the output as a pandas DataFrame with the
        columns of :meth:`to_dataframe`."""
        return self.to_arrow().to_pandas()

    @classmethod
    def from_events(
        cls,
        elements: Iterable[Element],
        key: str | Sequence[str] | None = None,
        cti_policy: CtiPolicy | str = CtiPolicy.RAISE,
        timestamps: bool = False,
    ) -> Stream:
        """Events of a physical stream (inserts, retractions, CTIs): its CHT.
        Its times are ticks; ``timestamps=True`` makes :meth:`to_dataframe`
        return timestamps."""
        cht, _ = derive_cht(elements, cti_policy=cti_policy)
        return cls.from_cht(cht, key=key, timestamps=timestamps)

    # ---------------------------------------------------------- operators

    def _with(self, node: Node, keys: tuple[str, ...] | None = None) -> Stream:
        return type(self)(self._source, (*self._nodes, node), self._keys if keys is None else keys)

    @property
    def keys(self) -> tuple[str, ...]:
        """The group key columns."""
        return self._keys

    def where(self, predicate: Any) -> Stream:
        """Keep the events whose payload satisfies ``predicate``: a UDF
        (``@function`` or any callable of the payload dict), a Spark Column
        or a SQL expression string (Spark Columns and SQL run only on Spark,
        or in a reference run as long as they come before any UDF)."""
        if not (callable(predicate) or isinstance(predicate, str) or _is_column(predicate)):
            raise TypeError(f"where() needs a UDF, a Column or a SQL string, got {predicate!r}")
        return self._with(WhereNode(predicate))

    def select(self, *columns: Any, **named: Any) -> Stream:
        """Project the payload: keep the named columns, and compute new ones.

        ``select("temp", f=fahrenheit, hi=(lambda p: p["temp"] > 30, "boolean"))``:
        positional arguments are column names (or Spark Columns); keyword
        arguments are UDFs of the payload dict (or Columns), optionally as
        ``(udf, returns)`` to give the Spark type. Key columns always stay;
        the lifetime is unchanged.
        """
        entries = []
        clash = [name for name in named if name in self._keys]
        if clash:
            raise ValueError(
                f"select({clash[0]}=...): {clash[0]!r} is a key column of the stream, and key "
                "columns stay as they are (each group's windows are the group's); name the "
                "new column otherwise, or regroup with group_apply() on it"
            )
        for name, expr in named.items():
            returns = None
            if isinstance(expr, tuple):
                if len(expr) != 2:
                    raise TypeError(f"select({name}=...) takes a UDF or (udf, returns)")
                expr, returns = expr
            if not (callable(expr) or _is_column(expr)):
                raise TypeError(f"select({name}=...) needs a UDF or a Column, got {expr!r}")
            entries.append((name, expr, returns))
        for c in columns:
            if not (isinstance(c, str) or _is_column(c)):
                raise TypeError(f"select() positional arguments are column names, got {c!r}")
        return self._with(SelectNode(tuple(columns), tuple(entries)))

    def group_apply(self, *keys: str) -> Stream:
        """Split the stream by key columns: each group gets its own windows,
        and window results carry the key columns. The grouping stays until
        the next ``group_apply``, which replaces it (as a Group&Apply after
        another's results regroups them): group by several columns at once
        with ``group_apply("site", "sensor")``."""
        ks = _keys(list(keys))
        return self._with(GroupNode(ks, self._keys), ks)

    def aggregate(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Not on a stream: UDAs run per window, so window the stream first
        (``stream.tumbling_window(size).aggregate(...)``)."""
        raise TypeError(_NEEDS_WINDOW.format(method="aggregate"))

    def apply(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Not on a stream: UDOs run per window, so window the stream first
        (``stream.snapshot_window().apply(...)``)."""
        raise TypeError(_NEEDS_WINDOW.format(method="apply"))

    def window(self, spec: WindowSpec) -> WindowedStream:
        """Window the stream by any :class:`~udm.host.WindowSpec`."""
        if not isinstance(spec, WindowSpec):
            raise TypeError(f"window() needs a udm.host WindowSpec, got {spec!r}")
        return WindowedStream(self, spec)

    def hopping_window(self, size: Any, hop: Any, offset: Any = 0) -> WindowedStream:
        """Windows ``[k*hop + offset, k*hop + offset + size)``; durations are
        int ticks or ``timedelta``."""
        return self.window(HoppingWindow(size, hop, offset))

    def tumbling_window(self, size: Any, offset: Any = 0) -> WindowedStream:
        """Gapless windows of ``size`` (a hopping window with hop = size)."""
        return self.window(TumblingWindow(size, offset))

    def snapshot_window(self) -> WindowedStream:
        """A window between every two consecutive event endpoints."""
        return self.window(SnapshotWindow())

    def count_window(self, n: int, by: Literal["start", "end"] = "start") -> WindowedStream:
        """Windows over ``n`` consecutive distinct start (or end) times."""
        if by == "start":
            return self.window(CountByStartWindow(n))
        if by == "end":
            return self.window(CountByEndWindow(n))
        raise ValueError(f"count_window(by=...) is 'start' or 'end', not {by!r}")

    # ----------------------------------------------------------- running

    def explain(self) -> str:
        """A readable plan: source, operations, and how Spark runs them."""
        lines = ["Stream plan", f"  source: {self._source.describe()}"]
        datetimes = self._source.datetimes()
        for node in self._nodes:
            text = node.describe(datetimes) if isinstance(node, WindowOp) else node.describe()
            for i, line in enumerate(text.splitlines()):
                lines.append(("  - " if i == 0 else "    ") + line)
            if isinstance(node, WindowOp):
                lines.append("    spark: " + _spark_strategy(node, self._keys_at(node)))
        lines.append("  output: " + self._output_description())
        return "\n".join(lines)

    def sample(self, rows: int = 200, where: str | None = None) -> Stream:
        """The same query over the first ``rows`` source rows by start time,
        after ``where`` (a Spark SQL condition such as ``"sensor = 's1'"``):
        a small sample for :meth:`plot` and quick checks. Windows near the
        sample's end miss the rows after it."""
        if rows < 1:
            raise ValueError(f"sample(rows={rows}) needs at least one row")
        src = self._source
        if src.df is None:
            assert src.rows is not None
            return type(self)(replace(src, rows=src.rows[:rows]), self._nodes, self._keys)
        df = src.df if where is None else src.df.where(where)
        df = df.orderBy(src.start).limit(rows)
        return type(self)(replace(src, df=df), self._nodes, self._keys)

    def plot(
        self,
        path: str | Path | None = None,
        *,
        key: Any = None,
        title: str | None = None,
        max_events: int = 400,
    ) -> Any:
        """Draw a timeline of a small sample: the input events of the last
        window operation, its windows and its output events, for one group.

        Runs the reference evaluator in-process, so keep the sample small
        (``max_events`` bounds what is drawn). ``key`` picks the group (the
        first in sort order by default; a tuple for several key columns).
        Returns the matplotlib figure; ``path`` also saves it (PNG/SVG/PDF).
        """
        from udm.host.plot import Lane, lanes_for, plot_timeline

        at = max((i for i, n in enumerate(self._nodes) if isinstance(n, WindowOp)), default=None)
        out_rows, layout, _ = run_reference(self)
        op: WindowOp | None = None
        if at is None:
            in_rows, in_layout, keys = out_rows, layout, self._keys
        else:
            node = self._nodes[at]
            assert isinstance(node, WindowOp)
            op = node
            keys = self._keys_at(op)
            before = type(self)(self._source, self._nodes[:at], keys)
            in_rows, in_layout, _ = run_reference(before)

        def group(p: Mapping[str, Any]) -> Any:
            return key_of(p, keys)

        if keys:
            groups = sorted({group(p) for _, _, p in in_rows}, key=repr)
            if key is None and groups:
                key = groups[0]
            elif key is not None and key not in groups:
                raise KeyError(f"plot(key={key!r}): no such group; groups: {groups[:20]}")
            in_rows = [r for r in in_rows if group(r[2]) == key]
            out_rows = [r for r in out_rows if group(r[2]) == key]
        elif key is not None:
            raise KeyError(
                f"plot(key={key!r}): the stream is not grouped (no key columns); drop key= "
                "to draw it all, or group it with group_apply() or key="
            )

        def shown(p: Mapping[str, Any], lay: Layout) -> Any:
            payload = lay.payload(p)
            if isinstance(payload, dict):
                payload = {k: v for k, v in payload.items() if k not in keys}
                if len(payload) == 1:
                    return next(iter(payload.values()))
            return payload

        value = op.calls[0].value_fn if op is not None else None
        inputs = []
        for s, e, p in in_rows:
            payload = in_layout.payload(p)
            inputs.append(IntervalEvent(s, e, value(payload) if value else shown(p, in_layout)))
        outputs = [IntervalEvent(s, e, shown(p, layout)) for s, e, p in out_rows]
        if op is None:
            lanes = [Lane("events", outputs, "output")]
        else:
            ctis = [] if op.watermark >= INFINITY else [op.watermark]
            windows = op.window.windows(inputs, op.watermark)
            lanes = lanes_for(inputs, windows, outputs, ctis=ctis)
        if title is None:
            title = self._plot_title(op, key if keys else None)
        return plot_timeline(
            lanes, title=title, path=path, max_events=max_events, datetimes=self._source.datetimes()
        )

    def _plot_title(self, op: WindowOp | None, key: Any) -> str:
        parts = []
        if op is not None:
            names = ", ".join(c.name for c in op.calls)
            window = op.window.describe(durations=self._source.datetimes())
            parts.append(f"{op.kind} {names} over {window}")
            parts.append(f"clipping={op.clipping.value}, output={op.policy.value}")
        if key is not None:
            parts.append(f"key={key!r}")
        return "; ".join(parts) or "events"

    def _keys_at(self, target: Node) -> tuple[str, ...]:
        keys: tuple[str, ...] = ()
        for node in self._nodes:
            if isinstance(node, GroupNode):
                keys = node.keys
            if node is target:
                break
        return keys

    def _output_description(self) -> str:
        cols = ["start", "end", *self._keys]
        last = next((n for n in reversed(self._nodes) if isinstance(n, WindowOp)), None)
        if last is not None and last is self._nodes[-1]:
            cols += [c.name for c in last.calls]
            return ", ".join(cols) + "  (a struct result becomes one column per field)"
        return ", ".join(cols) + ", payload columns"

    def to_dataframe(self, spark: SparkSession | None = None) -> DataFrame:
        """Run on Spark. Columns: ``start``, ``end`` (timestamps when the
        input times were timestamps or dates, else int64 ticks; an end at the
        end of time is null for timestamps), the key columns, then the payload
        columns: for a window operation its results, struct results flattened
        into one column per field."""
        from udm.host.spark.errors import running, udm_frame
        from udm.host.spark.evaluate import released_with, tracking_persisted
        from udm.host.spark.execute import run_spark, to_output

        self._batch_only("to_dataframe")
        with tracking_persisted() as cached, running(self._source):
            frame, _layout, metrics = run_spark(self, spark)
        self.metrics = metrics
        # results typed from their values are cached while the output lives;
        # its actions raise udm's errors (udm_frame), as to_cht does
        return udm_frame(released_with(to_output(frame), cached), self._source)

    def _batch_only(self, method: str) -> None:
        df = self._source.df
        if df is not None and df.isStreaming:
            raise ValueError(
                f"{method}() runs a batch query, and this stream's source is a streaming "
                "DataFrame (spark.readStream): call to_stream() for the output changelog "
                "and start it with udm.host.spark.streaming.start_stream (docs/streaming.md)"
            )

    def to_stream(self, **options: Any) -> DataFrame:
        """Run continuously: the output changelog of this query over a
        streaming DataFrame source (one window operation with one UDM, no
        ``where``/``select``), as a streaming DataFrame; ``options`` are those
        of :func:`udm.host.spark.streaming.stream_changelog` (``advance``,
        ``cti_policy``, ``seq``, ``consistency``...). Start it with
        :func:`udm.host.spark.streaming.start_stream`."""
        from udm.host.spark.streaming import stream_changelog

        src = self._source
        if src.df is None or not src.df.isStreaming:
            raise ValueError("to_stream() needs a streaming DataFrame source (spark.readStream)")
        ops = [n for n in self._nodes if not isinstance(n, GroupNode)]
        if len(ops) != 1 or not isinstance(ops[0], WindowOp) or len(ops[0].calls) != 1:
            raise ValueError(
                "to_stream() runs one window operation with one UDM (no where/select, no "
                f"several aggregates); this query is:\n{self.explain()}"
            )
        op = ops[0]
        if op.emit_empty:
            raise ValueError(
                "emit_empty is not available in streaming queries (the incremental host "
                "runs only non-empty windows); drop emit_empty=True or run the query in batch"
            )
        if op.watermark < INFINITY:
            raise ValueError(
                "watermark= bounds a batch query; a streaming query's time is its CTIs: "
                "drop watermark= and use advance=AdvanceTime(...) or CTI rows"
            )
        call = op.calls[0]
        return stream_changelog(
            src.df,
            op.window,
            call.udm,
            key=list(self._keys) or None,
            value=call.value,
            start=src.start,
            end=src.end,
            shape=src.shape,
            on_invalid=src.on_invalid,
            input_clipping=op.clipping,
            output_policy=op.policy,
            returns=call.returns,
            name=call.name,
            **options,
        )

    def to_cht(
        self, engine: Literal["auto", "spark", "reference"] = "auto", spark: Any = None
    ) -> Cht | dict[Hashable, Cht]:
        """Run and return the output CHT: a :class:`Cht` without group keys,
        else ``{key: Cht}`` (a tuple key for several key columns), as
        :func:`udm.host.evaluate_by_key` (but without keys that have no
        output). After a window operation a payload is the result itself
        (one UDM; a struct result as the dict of its columns) or a dict of
        result columns; otherwise it is the dict of all payload columns.

        ``engine="auto"`` runs DataFrame sources on Spark and in-memory ones
        in-process; ``"reference"`` collects a DataFrame source and runs the
        reference evaluator, for small data.
        """
        self._batch_only("to_cht")
        if engine == "auto":
            engine = "spark" if self._source.df is not None else "reference"
        if engine == "spark":
            from udm.host.spark.errors import running
            from udm.host.spark.evaluate import release, tracking_persisted
            from udm.host.spark.execute import collect_rows, run_spark

            # udm's errors; an invalid row's count and first rows; no task logs
            with running(self._source):
                with tracking_persisted() as cached:
                    frame, layout, metrics = run_spark(self, spark)
                try:
                    rows = collect_rows(frame)
                finally:
                    release(cached)
            self.metrics = metrics
            metrics.invalid_rows(wait=True)
        elif engine == "reference":
            rows, layout, metrics = run_reference(self)
            self.metrics = metrics
            metrics.invalid_rows()
        else:
            raise ValueError(f"unknown engine {engine!r}; use 'auto', 'spark' or 'reference'")
        return rows_to_cht(rows, self._keys, layout)


class WindowedStream:
    """A stream with a window: finish it with :meth:`aggregate` or :meth:`apply`."""

    def __init__(self, stream: Stream, window: WindowSpec) -> None:
        self._stream = stream
        self.window = window

    def __getattr__(self, name: str) -> Any:
        # only reached for what a windowed stream lacks: a second window,
        # where/select, to_cht, explain... say what comes first
        if name.startswith("_") or not callable(getattr(Stream, name, None)):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        window = self.window

        def finish_the_window_first(*args: Any, **kwargs: Any) -> NoReturn:
            raise TypeError(
                f".{name}() on a windowed stream: finish the {window!r} first with "
                ".aggregate(...) (a UDA per window) or .apply(...) (a UDO per window); "
                f".{name}() then applies to the stream of results"
            )

        return finish_the_window_first

    def aggregate(
        self,
        udm: Any = None,
        /,
        value: ValueArg = None,
        *,
        input_clipping: InputClipping | str = InputClipping.NONE,
        output_policy: OutputPolicy | str | None = None,
        emit_empty: bool = False,
        watermark: Any = INFINITY,
        returns: Any = None,
        alias: str | None = None,
        partial: bool | None = None,
        **kwargs: Any,
    ) -> Stream:
        """Run a UDA on every window.

        ``aggregate(udm, value="temp", q=0.9)``: one UDA (name, class or
        instance); extra keywords are its arguments; the result column is
        ``alias`` or the UDA's name. ``aggregate(med=("stats.median", "temp"),
        avg=agg(Mean, "temp"))``: several UDAs on the same windows, one
        column per name (struct results as ``name_field``).

        Args:
            value: what the UDA receives per event: a column name, a list of
                columns (a dict), a function of the payload dict, or ``None``
                (the whole payload dict).
            input_clipping / output_policy / emit_empty / watermark: as in
                :func:`udm.host.evaluate`; ``watermark`` (a time) is needed
                for hopping/tumbling windows over events that never end.
            returns: the result's Spark type (DDL string such as ``"double"``)
                when the UDA's return annotation does not say.
            partial: partial aggregation of mergeable UDAs (default: on
                hopping and tumbling windows whenever every UDA is mergeable
                and order-insensitive; snapshot and count windows only with
                ``partial=True``).
        """
        if udm is None:
            if not kwargs:
                raise TypeError("aggregate() needs a UDA, or name=(uda, value) keywords")
            if value is not None or alias is not None or returns is not None:
                raise TypeError(
                    "with name=(uda, value) keywords, give value/returns inside each entry"
                )
            calls = tuple(_multi_call(name, spec) for name, spec in kwargs.items())
            multi = True
        else:
            entries = [k for k, v in kwargs.items() if isinstance(v, AggSpec)]
            if entries:
                raise TypeError(
                    f"aggregate({udm!r}, {entries[0]}=agg(...)): give one UDA with its "
                    "arguments, or only name=agg(...) / name=(uda, value) entries, not both; "
                    "for several results write every UDA as an entry"
                )
            calls = (_make_call(alias, udm, value, returns, kwargs),)
            multi = False
        return self._op(
            "aggregate", calls, input_clipping, output_policy, emit_empty, watermark, partial, multi
        )

    def apply(
        self,
        udo: Any,
        /,
        value: ValueArg = None,
        *,
        input_clipping: InputClipping | str = InputClipping.NONE,
        output_policy: OutputPolicy | str | None = None,
        emit_empty: bool = False,
        watermark: Any = INFINITY,
        returns: Any = None,
        alias: str | None = None,
        **udm_args: Any,
    ) -> Stream:
        """Run a UDO on every window: each output payload is one output
        event (time-sensitive operators choose the lifetimes, subject to the
        output policy)."""
        call = _make_call(alias, udo, value, returns, udm_args)
        return self._op(
            "operator", (call,), input_clipping, output_policy, emit_empty, watermark, False, False
        )

    def _op(
        self,
        kind: Literal["aggregate", "operator"],
        calls: tuple[UdmCall, ...],
        input_clipping: InputClipping | str,
        output_policy: OutputPolicy | str | None,
        emit_empty: bool,
        watermark: Any,
        partial: bool | None,
        multi: bool,
    ) -> Stream:
        for c in calls:
            if c.udm.kind != kind:
                verb = "aggregate" if c.udm.kind == "aggregate" else "apply"
                raise TypeError(f"{c.udm.name!r} is a {c.udm.flavor()}; use .{verb}() for it")
        names = [c.name for c in calls]
        if len(set(names)) != len(names):
            raise ValueError(f"result names must be distinct, got {names}")
        policies = {resolve_output_policy(output_policy, self.window, c.udm) for c in calls}
        if len(policies) != 1:
            raise ValueError(f"the aggregates resolve to different output policies {policies}")
        if not isinstance(emit_empty, bool):
            raise TypeError(f"emit_empty= is True or False, got {emit_empty!r}")
        if emit_empty and not isinstance(self.window, HoppingWindow):
            raise ValueError(
                f"emit_empty applies to hopping and tumbling windows only; {self.window!r} "
                "windows are defined by events and are never empty"
            )
        op = WindowOp(
            window=self.window,
            kind=kind,
            calls=calls,
            clipping=InputClipping.parse(input_clipping),
            policy=policies.pop(),
            emit_empty=emit_empty,
            watermark=to_ticks(watermark),
            partial=partial,
            multi=multi,
        )
        op.use_partial()  # validates partial=True early
        return self._stream._with(op)


def _make_call(
    alias: str | None, udm: Any, value: ValueArg, returns: Any, args: Mapping[str, Any]
) -> UdmCall:
    resolved = _resolve_udm(udm)
    if isinstance(resolved, Function):
        raise TypeError(
            f"{resolved.name!r} is a UDF (scalar function); use it in where()/select(), "
            "not as a window aggregate or operator"
        )
    instance = instantiate(resolved, dict(args) or None)
    if value is not None and not (isinstance(value, str) or callable(value)):
        shown = value
        try:
            value = tuple(value)
        except TypeError:
            value = None
        if value is None or not all(isinstance(v, str) for v in value):
            raise TypeError(
                f"value= takes a column name, a list of names or a function, got {shown!r}"
            )
    if alias is not None and (not isinstance(alias, str) or not alias):
        raise TypeError(f"alias= names the result column: a non-empty string, got {alias!r}")
    name = alias or (instance.name or type(instance).__name__).replace(".", "_")
    return UdmCall(name, instance, value, returns)


def _multi_call(name: str, spec: Any) -> UdmCall:
    if isinstance(spec, AggSpec):
        return _make_call(name, spec.udm, spec.value, spec.returns, spec.args)
    if isinstance(spec, tuple):
        if not 1 <= len(spec) <= 3:
            raise TypeError(f"{name}=... takes (uda,), (uda, value) or (uda, value, args)")
        udm, value, args = (*spec, None, None)[:3]
        if args is not None and not isinstance(args, Mapping):
            raise TypeError(
                f"{name}=(uda, value, args): args is a dict of the UDA's arguments, got {args!r}"
            )
        return _make_call(name, udm, value, None, args or {})
    return _make_call(name, spec, None, None, {})


def _spark_strategy(op: WindowOp, keys: tuple[str, ...]) -> str:
    by = ", ".join([*keys, "window"])
    w = op.window
    route = op.spark_route()
    if route == "grid":
        if op.use_partial():
            run = "partial states folded per partition and per window in the worker (mapInArrow)"
            if op.uses_panes():
                run += ", point events folded once per pane of gcd(size, hop)"
            return (
                f"{run}; shuffled by ({', '.join([*keys, 'bucket of windows'])}); "
                "merged per window (mapInArrow)"
            )
        by_what = ", ".join(keys) if keys else "bucket of windows"
        run = (
            f"events shuffled by ({by_what}); windows assigned, sorted and evaluated "
            "in the worker (mapInArrow)"
        )
        return f"{run}; over point events each window is a slice of the events sorted by start"
    if route == "endpoints":
        by_what = ", ".join(keys) if keys else "one partition"
        run = (
            f"events shuffled by ({by_what}); distinct endpoints numbered, windows assigned, "
            "sorted and evaluated in the worker (mapInArrow)"
        )
        if isinstance(w, CountByStartWindow):
            points = op.kind == "operator" or any(c.udm.time_sensitive for c in op.calls)
            over = "over point events " if points else ""
            run += f"; {over}each window is a slice of the events sorted by start"
        return run
    if isinstance(w, HoppingWindow):
        assign = "explode a generated array of window starts per event"
    elif isinstance(w, SnapshotWindow):
        assign = "distinct endpoints per key + lead() give windows; join events by endpoint rank"
    else:
        edge = "start" if isinstance(w, CountByStartWindow) else "end"
        assign = f"dense rank of distinct {edge} times per key + lead(); join members by rank"
    if op.use_partial():
        run = f"partial states per partition (mapInArrow), shuffle, merge per ({by}) (applyInArrow)"
    else:
        run = f"groupBy({by}).applyInArrow, events sorted canonically per window"
    return f"{assign}; {run}"


# ------------------------------------------------------- shared row logic


def normalize_value(value: Any) -> Any:
    """A result in plain Python terms: dataclasses and named tuples become
    dicts, numpy scalars Python numbers, recursively."""
    if type(value) in PLAIN_TYPES or isinstance(value, str | bytes | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): normalize_value(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {str(k): normalize_value(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and callable(item):
        return normalize_value(item())
    return value


def returns_is_struct(returns: Any) -> bool | None:
    """Whether an explicit ``returns=`` names a struct (``None``: not given)."""
    if returns is None:
        return None
    if isinstance(returns, str):
        return returns.strip().lower().startswith("struct")
    return type(returns).__name__ == "StructType" or (
        isinstance(returns, type)
        and (dataclasses.is_dataclass(returns) or hasattr(returns, "__required_keys__"))
    )


def result_columns(
    op: WindowOp, structs: Sequence[Sequence[str] | None]
) -> list[tuple[str, str, str | None]]:
    """Output columns of a window operation: (column, call name, struct
    field or None), given each call's struct fields (None: not a struct)."""
    out: list[tuple[str, str, str | None]] = []
    for call, fields in zip(op.calls, structs, strict=True):
        if fields is None:
            out.append((call.name, call.name, None))
        else:
            for f in fields:
                out.append((f"{call.name}_{f}" if op.multi else f, call.name, f))
    return out


def op_layout(op: WindowOp, columns: Sequence[tuple[str, str, str | None]]) -> Layout:
    """The CHT payload of a window operation's output rows."""
    if not op.multi:
        if columns and columns[0][2] is None:
            return Layout(columns[0][0], ())
        return Layout(None, tuple((f or c, c) for c, _, f in columns))
    return Layout(None, tuple((c, c) for c, _, _ in columns))


def check_output_names(
    keys: Sequence[str], op: WindowOp, columns: Sequence[tuple[str, str, str | None]]
) -> None:
    """Refuse result columns (from :func:`result_columns`) that clash with
    the lifetime, the keys or each other, with a fix that applies."""
    seen = {"start", "end", *keys}
    for c, call, part in columns:
        if c in seen:
            if part is None:
                fix = "name the result with alias= (or aggregate(name=...))"
            elif op.kind == "aggregate":
                fix = (
                    f"give the aggregate a name, aggregate(name=(uda, value)), so its fields "
                    f"become name_{part}"
                )
            else:
                fix = (
                    f"the operator's output field {part!r} keeps its name: rename the field "
                    "in the UDO, or the key column before the window"
                )
            raise ValueError(
                f"result column {c!r} of {call!r} clashes with the start/end or key columns; {fix}"
            )
        seen.add(c)


def key_of(p: Mapping[str, Any], keys: Sequence[str]) -> Hashable:
    """A row's group as a dict key: the key column's value (a tuple for
    several), an array key as a tuple and a struct key as a tuple of
    (field, value) pairs, since lists and dicts cannot be dict keys."""

    def hashable(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(hashable(x) for x in v)
        if isinstance(v, dict):
            return tuple((f, hashable(x)) for f, x in v.items())
        return v

    if len(keys) == 1:
        found: Hashable = hashable(p[keys[0]])
        return found
    return tuple(hashable(p[k]) for k in keys)


def rows_to_cht(
    rows: Iterable[Row], keys: Sequence[str], layout: Layout
) -> Cht | dict[Hashable, Cht]:
    if not keys:
        return Cht(IntervalEvent(s, e, layout.payload(p)) for s, e, p in rows)
    groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
    for s, e, p in rows:
        k = key_of(p, keys)
        groups.setdefault(k, []).append(IntervalEvent(s, e, layout.payload(p)))
    return {k: Cht(v) for k, v in groups.items()}


# -------------------------------------------------------- reference engine


def run_reference(stream: Stream) -> tuple[list[Row], Layout, QueryMetrics]:
    """Run a plan in-process with the reference evaluator."""
    source = stream._source
    nodes = list(stream._nodes)
    metrics = QueryMetrics(dict(source.dropped))
    if source.df is not None:
        from udm.host.spark.execute import collect_rows, source_frame

        # Spark expressions before any UDF run in Spark; a filter commutes
        # with group_apply (it keeps every column), so one after the keys
        # (from_dataframe(key=...)) runs there too
        pushed: list[Node] = []
        groups: list[Node] = []
        while nodes:
            node = nodes[0]
            if isinstance(node, GroupNode):
                groups.append(nodes.pop(0))
            elif _spark_only(node) and (not groups or isinstance(node, WhereNode)):
                pushed.append(nodes.pop(0))
            else:
                break
        nodes = groups + nodes
        frame, metrics = source_frame(stream, pushed)
        rows = collect_rows(frame)
        columns = [c for c in frame.df.columns if c not in (S_COL, E_COL)]
        scalar = False
    else:
        assert source.rows is not None
        rows = list(source.rows)
        columns = list(dict.fromkeys(c for _, _, p in rows for c in p))
        scalar = source.scalar
        if any(len(p) != len(columns) for _, _, p in rows):
            # dict payloads are rows of a table: a field some lack is null
            # there, as in a DataFrame
            rows = [(s, e, {c: p.get(c) for c in columns}) for s, e, p in rows]
    layout = Layout(SCALAR_COL, ()) if scalar else Layout(None, tuple((c, c) for c in columns))
    keys: tuple[str, ...] = ()
    spark = None if source.df is None else source.df.sparkSession
    for node in nodes:
        if spark is not None and not scalar and _spark_only(node):
            # a Spark expression after a window or a UDF: Spark evaluates
            # it over the rows computed here, as the Spark engine would
            rows, columns = _spark_step(spark, node, rows, columns, keys)
            if isinstance(node, SelectNode):
                layout = Layout(None, tuple((c, c) for c in columns))
        elif isinstance(node, GroupNode):
            missing = [k for k in node.keys if k not in columns]
            if missing and rows:  # no rows: nothing to group, no columns to know
                raise KeyError(f"key columns {missing} are not in the stream; columns: {columns}")
            keys = node.keys
        elif isinstance(node, WhereNode):
            pred = udf_of_payload(_python_udf(node.predicate, "where"), scalar, "where()")
            rows = [r for r in rows if pred(r[2])]
        elif isinstance(node, SelectNode):
            rows, columns = _select_rows(rows, columns, keys, node, scalar)
            layout = Layout(None, tuple((c, c) for c in columns))
            scalar = False
        else:
            rows, columns, layout = _window_rows(rows, columns, keys, adapt_op(node, scalar))
            scalar = False
    return rows, layout, metrics


def _spark_step(
    spark: Any, node: Node, rows: list[Row], columns: list[str], keys: tuple[str, ...]
) -> tuple[list[Row], list[str]]:
    """A Spark ``where`` or ``select`` over in-process rows (the reference
    engine's, after a window or a UDF): the rows go to Spark as a table with
    the columns the Spark engine has at that point. A filter only decides
    which rows stay, so the kept rows keep their values exactly."""
    from udm.host.spark.execute import apply_simple, collect_rows

    if isinstance(node, WhereNode):
        tagged = [(s, e, {**p, _ROW_COL: i}) for i, (s, e, p) in enumerate(rows)]
        frame, _ = apply_simple(_table_of(spark, tagged, node), keys, node)
        kept = {p[_ROW_COL] for _, _, p in collect_rows(frame)}
        return [r for i, r in enumerate(rows) if i in kept], columns
    frame, _ = apply_simple(_table_of(spark, rows, node), keys, node)
    return collect_rows(frame), frame.columns


#: the row number a Spark filter over in-process rows reports back
_ROW_COL = "__udm_row"


def _table_of(spark: Any, rows: list[Row], node: Node) -> Any:
    from udm.host.spark.frame import from_rows

    try:
        return from_rows(spark, rows, False)
    except (TypeError, ValueError) as exc:  # pyarrow's: mixed or unknown types
        raise TypeError(
            f"{node.describe()}: the reference engine runs Spark expressions after a window "
            f"or a UDF in Spark, which cannot take these rows as a table ({exc}); use a UDF "
            "or run on Spark (to_cht(engine='spark'))"
        ) from None


def _spark_only(node: Node) -> bool:
    if isinstance(node, WhereNode):
        return isinstance(node.predicate, str) or _is_column(node.predicate)
    if isinstance(node, SelectNode):
        return any(_is_column(c) for c in node.columns) or any(
            _is_column(e) for _, e, _ in node.named
        )
    return False


def _python_udf(expr: Any, where: str) -> Callable[[Any], Any]:
    if isinstance(expr, str) or _is_column(expr):
        raise TypeError(
            f"{where}({expr}) is a Spark expression, which the reference engine runs in "
            "Spark, but this stream has no Spark session (it was not built from a "
            "DataFrame); run on Spark (to_cht(engine='spark')) or use a UDF"
        )
    fn: Callable[[Any], Any] = expr
    return fn


def _select_rows(
    rows: list[Row], columns: list[str], keys: Sequence[str], node: SelectNode, scalar: bool
) -> tuple[list[Row], list[str]]:
    names = [c for c in node.columns if isinstance(c, str)]
    if len(names) != len(node.columns):
        _python_udf(next(c for c in node.columns if not isinstance(c, str)), "select")
    missing = [c for c in names if c not in columns]
    if missing and rows:
        raise KeyError(f"select(): columns {missing} are not in the stream; columns: {columns}")
    keep = list(dict.fromkeys([*keys, *names]))
    fns = [
        (n, udf_of_payload(_python_udf(e, "select"), scalar, f"select({n}=...)"))
        for n, e, _ in node.named
    ]
    out_cols = list(dict.fromkeys([*keep, *(n for n, _ in fns)]))
    out = []
    for s, e, p in rows:
        q = {c: p[c] for c in keep}
        for n, fn in fns:
            q[n] = fn(p)
        out.append((s, e, q))
    return out, out_cols


def _window_rows(
    rows: list[Row], columns: list[str], keys: tuple[str, ...], op: WindowOp
) -> tuple[list[Row], list[str], Layout]:
    for c in op.calls:
        missing = [col for col in (c.columns() or []) if col not in columns]
        if missing and rows:
            raise KeyError(
                f"value column(s) {missing} of {c.name!r} are not in the stream; columns: {columns}"
            )
    groups: dict[Hashable, list[IntervalEvent[Any]]] = {}
    values: dict[Hashable, tuple[Any, ...]] = {}  # the key columns as written
    for s, e, p in rows:
        group = key_of(p, keys)
        if group not in groups:
            groups[group], values[group] = [], tuple(p[k] for k in keys)
        groups[group].append(IntervalEvent(s, e, p))
    # per group, per call: output events
    outputs: list[tuple[tuple[Any, ...], list[list[IntervalEvent[Any]]]]] = []
    for group, events in groups.items():
        key = values[group]
        per_call = [
            list(
                evaluate(
                    events,
                    op.window,
                    c.udm,
                    input_clipping=op.clipping,
                    output_policy=op.policy,
                    value=c.value_fn,
                    watermark=op.watermark,
                    emit_empty=op.emit_empty,
                )
            )
            for c in op.calls
        ]
        outputs.append((key, per_call))
    structs = [
        _struct_fields(c, [ev.payload for _, pc in outputs for ev in pc[i]])
        for i, c in enumerate(op.calls)
    ]
    cols = result_columns(op, structs)
    check_output_names(keys, op, cols)
    out_rows: list[Row] = []
    for key, per_call in outputs:
        base = dict(zip(keys, key, strict=True))
        if op.kind == "operator":
            events_rows = [[ev] for ev in per_call[0]]
        else:
            events_rows = [list(evs) for evs in zip(*per_call, strict=True)]
        for evs in events_rows:
            first = evs[0]
            payload = dict(base)
            for ev, c, fields in zip(evs, op.calls, structs, strict=True):
                value = normalize_value(ev.payload)
                if fields is None:
                    payload[c.name] = value
                else:
                    for f in fields:
                        col = f"{c.name}_{f}" if op.multi else f
                        payload[col] = None if value is None else value.get(f)
            out_rows.append((first.start, first.end, payload))
    out_columns = [*keys, *(c for c, _, _ in cols)]
    return out_rows, out_columns, op_layout(op, cols)


def _struct_fields(call: UdmCall, results: Iterable[Any]) -> list[str] | None:
    """Fields of a struct result (dicts, dataclasses), or None for scalars."""
    declared = returns_is_struct(call.returns)
    fields: dict[str, None] = {}
    saw_struct = False
    for r in results:
        v = normalize_value(r)
        if isinstance(v, dict):
            saw_struct = True
            fields.update(dict.fromkeys(v))
    if declared is False or not saw_struct:
        return None
    return list(fields)
