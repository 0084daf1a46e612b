"""Query plans: what a query computes, independent of any engine.

A :class:`~udm.host.query.Stream` builds a plan: a directed acyclic graph
of :class:`PlanNode` objects, each naming the nodes it reads
(:attr:`PlanNode.inputs`). Sources are leaves; a node read by two others
(a stream joined with itself, say) is one object, which every engine runs
once and multicasts. Nodes are immutable and compare by identity.

Engines (:mod:`udm.host.engines`) run plans: the reference evaluator over
whole canonical history tables, the incremental in-process graph of
physical operators, Spark batch and Structured Streaming. Each dispatches
on the node classes defined here, as Beam's runners dispatch on transforms;
this module imports no engine and never imports pyspark.

The operators follow the CEDR algebra (Barga et al., *Consistent Streaming
Through Time*; Goldstein et al., *Consistency Sensitive Streaming Operators
in CEDR*): selection (:class:`WhereNode`), projection (:class:`SelectNode`),
union, temporal equijoin and anti-semijoin, AlterLifetime, the snapshot
and window aggregates of the StreamInsight extensibility framework
(:class:`WindowOp`), and Align and Finalize, which choose a query's
consistency level without changing what it computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

# the UDM calls and consistency levels are parts of a plan with modules of
# their own; importing them from here keeps working
from udm.host.calls import AggSpec, UdmCall, ValueArg, agg, describe_expr, is_column
from udm.host.levels import consistency_levels, non_negative_duration
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.time import INFINITY, format_time, iso_time
from udm.host.windows import WindowSpec

if TYPE_CHECKING:
    from udm.host.metrics import QueryMetrics
    from udm.host.stream import Element, ExternalCti

__all__ = [
    "E_COL",
    "INTERNAL_PREFIX",
    "SCALAR_COL",
    "S_COL",
    "AggSpec",
    "AlignNode",
    "AlterLifetimeNode",
    "AntiJoinNode",
    "FinalizeNode",
    "GroupNode",
    "JoinNode",
    "OnInvalid",
    "OnNullKey",
    "PlanNode",
    "Row",
    "SelectNode",
    "Shape",
    "Source",
    "UdmCall",
    "UnaryNode",
    "UnionNode",
    "ValueArg",
    "WhereNode",
    "WindowOp",
    "agg",
    "columns_kept_from",
    "consistency_levels",
    "describe_expr",
    "detached",
    "is_column",
    "linear_chain",
    "non_negative_duration",
    "rewrite_sources",
    "sources",
    "strongly_aligned",
    "walk",
    "with_consistency",
]

#: Internal column names of the normalized event table (ticks, int64).
S_COL = "__udm_s"
E_COL = "__udm_e"
INTERNAL_PREFIX = "__udm_"
#: The column holding scalar (non-dict) payloads of in-memory sources.
SCALAR_COL = "value"

Shape = Literal["point", "interval", "edge"]
OnInvalid = Literal["raise", "drop"]
OnNullKey = Literal["raise", "drop", "keep"]
#: An event as engines pass it between nodes: (start, end, payload columns).
Row = tuple[int, int, dict[str, Any]]


# ----------------------------------------------------------------- nodes


class PlanNode:
    """A node of a query plan. Subclasses are frozen dataclasses that
    compare by identity, so a node read twice is one node."""

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        """The nodes this one reads, in order (none for a source)."""
        return ()

    def keys(self) -> tuple[str, ...]:
        """The group key columns of this node's output."""
        ins = self.inputs
        return ins[0].keys() if ins else ()

    def describe(self, datetimes: bool = False) -> str:
        """One line (or a few) for ``explain``; ``datetimes`` shows times
        and durations of a query over datetimes in units."""
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class UnaryNode(PlanNode):
    """A node that reads one other node, ``input`` (the first field of
    every subclass, so positional construction reads ``Node(input, ...)``)."""

    input: PlanNode

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Source(PlanNode):
    """Where the events come from: a Spark DataFrame, in-memory rows, or a
    physical stream (``elements``, kept for engines that consume it
    incrementally; ``rows`` then holds its CHT)."""

    df: Any = None
    rows: tuple[Row, ...] | None = None
    start: str = "start"
    end: str | None = None
    shape: Shape = "point"
    on_invalid: OnInvalid = "raise"
    key_columns: tuple[str, ...] = ()  # from_dataframe's key columns, for on_null_key
    on_null_key: OnNullKey = "keep"
    scalar: bool = False  # in-memory payloads were scalars, held in column "value"
    timestamps: bool = False  # in-memory ticks become timestamps in to_dataframe()
    dropped: tuple[tuple[str, int], ...] = ()  # in-memory rows dropped, by reason
    elements: tuple[Element | ExternalCti, ...] | None = None  # the physical stream, if given
    cti_policy: str = "raise"  # for ``elements``
    # the payload columns ``elements``' inserts name, retracted ones too: a
    # column every event of which was retracted is still the stream's (null)
    columns: tuple[str, ...] = ()
    # a table source's payload columns with their Arrow types (from_pandas,
    # from_arrow): an output with no rows still has its key columns, typed
    types: tuple[tuple[str, Any], ...] = ()
    # the metrics of the latest run of any query on this source (one entry)
    latest: list[QueryMetrics] = field(default_factory=list, compare=False, repr=False)

    def datetimes(self) -> bool:
        """Whether the events' times are datetimes (timestamps, dates or
        strings) rather than int ticks: plans and plots then show them so."""
        if self.df is None:
            return self.timestamps
        types = {f.name: f.dataType.typeName() for f in self.df.schema.fields}
        return types.get(self.start) in ("timestamp", "timestamp_ntz", "date", "string")

    def describe(self, datetimes: bool = False) -> str:
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
            return f"DataFrame[{cols}]\n  {life}; on_invalid={self.on_invalid}{self._null_keys()}"
        if self.elements is not None:
            return f"physical stream of {len(self.elements)} elements; cti_policy={self.cti_policy}"
        assert self.rows is not None
        return f"{len(self.rows)} in-memory events; on_invalid={self.on_invalid}{self._null_keys()}"

    def _null_keys(self) -> str:
        """What a keyed table source does with a null key, for describe()."""
        return f"; on_null_key={self.on_null_key}" if self.key_columns else ""


@dataclass(frozen=True, eq=False)
class WhereNode(UnaryNode):
    """Selection: keep the events whose payload satisfies ``predicate``."""

    predicate: Any

    def describe(self, datetimes: bool = False) -> str:
        return f"where {describe_expr(self.predicate)}"


@dataclass(frozen=True, eq=False)
class SelectNode(UnaryNode):
    """Projection: keep columns and compute new ones; lifetimes unchanged."""

    columns: tuple[Any, ...]
    named: tuple[tuple[str, Any, Any], ...]  # (name, UDF or Column, returns)

    def describe(self, datetimes: bool = False) -> str:
        parts = [describe_expr(c) for c in self.columns]
        parts += [f"{n}={describe_expr(e)}" for n, e, _ in self.named]
        return "select " + ", ".join(parts)


@dataclass(frozen=True, eq=False)
class GroupNode(UnaryNode):
    """Group-and-apply: the key columns whose groups get their own windows."""

    group_keys: tuple[str, ...]
    replaces: tuple[str, ...] = ()  #: the grouping before this one, if any

    def keys(self) -> tuple[str, ...]:
        return self.group_keys

    def describe(self, datetimes: bool = False) -> str:
        text = "group_apply " + (", ".join(self.group_keys) if self.group_keys else "(no key)")
        if self.replaces and self.replaces != self.group_keys:
            text += f" (replacing the grouping by {', '.join(self.replaces)})"
        return text


@dataclass(frozen=True, eq=False)
class WindowOp(UnaryNode):
    """A windowed aggregate (one or more UDAs) or operator, per group."""

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

    def check_partial(self) -> None:
        """Refuse ``partial=True`` for UDAs that cannot merge states."""
        if self.partial and not self.mergeable():
            bad = [c.udm.name for c in self.calls if not c.udm.properties.mergeable]
            raise ValueError(
                f"partial=True needs mergeable, order-insensitive incremental aggregates; "
                f"{', '.join(bad) or 'these UDMs'} cannot merge states"
            )

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

    def is_grid(self) -> bool:
        """Hopping or tumbling windows (a fixed grid of windows)."""
        return self.window.is_grid


@dataclass(frozen=True, eq=False)
class UnionNode(PlanNode):
    """Bag union of streams with the same key columns: every event of
    every input, columns missing from an input null (as ``pd.concat``)."""

    parts: tuple[PlanNode, ...]

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return self.parts

    def describe(self, datetimes: bool = False) -> str:
        return f"union of {len(self.parts)} streams"


#: ``where=`` of a join: a predicate over the left and right payloads.
JoinPredicate = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]
#: ``select=`` of a join: the output payload from the left and right payloads.
JoinProjection = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, eq=False)
class JoinNode(PlanNode):
    """Temporal equijoin (CEDR Definition 4): for every left and right
    event with equal ``on`` columns, overlapping lifetimes and ``where``
    true, an event over the intersection of their lifetimes whose payload
    is both payloads (or ``select(left, right)``)."""

    left: PlanNode
    right: PlanNode
    on: tuple[str, ...]
    where: JoinPredicate | None = None
    select: JoinProjection | None = None
    suffixes: tuple[str, str] = ("_left", "_right")

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)

    def keys(self) -> tuple[str, ...]:
        return self.on

    def describe(self, datetimes: bool = False) -> str:
        on = ", ".join(self.on) if self.on else "(no key: every pair)"
        text = f"join on {on}"
        if self.where is not None:
            text += f" where {describe_expr(self.where)}"
        if self.select is not None:
            text += f" select {describe_expr(self.select)}"
        return text


@dataclass(frozen=True, eq=False)
class AntiJoinNode(PlanNode):
    """Left anti-semijoin: each left event's lifetime minus the times at
    which some right event with equal ``on`` columns (and ``where`` true)
    is live; what remains of it, in pieces, with the left payload."""

    left: PlanNode
    right: PlanNode
    on: tuple[str, ...]
    where: JoinPredicate | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)

    def keys(self) -> tuple[str, ...]:
        return self.left.keys()

    def describe(self, datetimes: bool = False) -> str:
        on = ", ".join(self.on) if self.on else "(no key)"
        text = f"left_anti_join on {on}"
        if self.where is not None:
            text += f" where {describe_expr(self.where)}"
        return text


@dataclass(frozen=True, eq=False)
class AlterLifetimeNode(UnaryNode):
    """AlterLifetime (CEDR Definition 6): the new start is ``start(s)``
    (monotone, a function of the start only) and the new duration
    ``duration(s, e)`` (not growing when the end shrinks); an end at the
    end of time stays there while the duration is kept. ``form`` names a
    shortcut (``shift``, ``set_duration``, ``to_points``, ``clip_to``) that
    engines may compute natively, with ``amount`` its duration in ticks."""

    start_fn: Callable[[int], int] | None
    duration_fn: Callable[[int, int], int] | None
    form: Literal["shift", "set_duration", "to_points", "clip_to", "custom"] = "custom"
    amount: int = 0

    def describe(self, datetimes: bool = False) -> str:
        from udm.host.time import format_duration

        shown = format_duration(self.amount) if datetimes else str(self.amount)
        if self.form == "shift":
            return f"shift by {shown}"
        if self.form == "set_duration":
            return f"set_duration {shown}"
        if self.form == "clip_to":
            return f"clip_to at most {shown}"
        if self.form == "to_points":
            return "to_points"
        parts = []
        if self.start_fn is not None:
            parts.append(f"start={describe_expr(self.start_fn)}")
        if self.duration_fn is not None:
            parts.append(f"duration={describe_expr(self.duration_fn)}")
        return "alter_lifetime " + ", ".join(parts or ["(unchanged)"])


@dataclass(frozen=True, eq=False)
class AlignNode(UnaryNode):
    """Align (CEDR 4.5): blocks elements up to ``blocking`` ticks behind
    the latest start seen (:data:`INFINITY`: until a CTI), combining
    retractions with the elements they change. The CHT is unchanged."""

    blocking: int

    def describe(self, datetimes: bool = False) -> str:
        return f"align blocking={_duration_text(self.blocking, datetimes, 'until CTIs')}"


@dataclass(frozen=True, eq=False)
class FinalizeNode(UnaryNode):
    """Finalize (CEDR 4.6): turns ExternalCTIs into in-order CTIs, repairs
    retraction chains that arrive out of order, and, with a finite
    ``remember``, issues CTIs ``remember`` ticks behind the latest sync
    time seen, dropping (and counting) later input before them."""

    remember: int

    def describe(self, datetimes: bool = False) -> str:
        return f"finalize remember={_duration_text(self.remember, datetimes, 'everything')}"


def _duration_text(ticks: int, datetimes: bool, infinite: str) -> str:
    from udm.host.time import format_duration, format_ticks_duration

    if ticks >= INFINITY:
        return infinite
    return format_duration(ticks) if datetimes else format_ticks_duration(ticks)


# -------------------------------------------------------------- walking


def columns_kept_from(node: PlanNode) -> PlanNode | None:
    """The input whose columns ``node``'s rows have, row for row: a
    ``where``, a ``group_apply``, a lifetime change, ``align``, ``finalize``
    and an anti-join (its left side) keep them; None for a node that makes
    its own (a source, select, window, union, join). Engines read a window's
    results through such nodes as they read the window's own."""
    if isinstance(node, WhereNode | GroupNode | AlterLifetimeNode | AlignNode | FinalizeNode):
        return node.input
    if isinstance(node, AntiJoinNode):
        return node.left
    return None


def walk(node: PlanNode) -> Iterator[PlanNode]:
    """Every node of the plan once, inputs before the nodes reading them.

    >>> from udm.host.query import Stream
    >>> s = Stream.from_cht([(0, 1, 5)])
    >>> " -> ".join(type(n).__name__ for n in walk(s.shift(1).union(s).plan))
    'Source -> AlterLifetimeNode -> UnionNode'
    """
    seen: set[int] = set()
    order: list[PlanNode] = []
    stack: list[tuple[PlanNode, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if expanded:
            order.append(current)
            continue
        if id(current) in seen:
            continue
        seen.add(id(current))
        stack.append((current, True))
        for child in reversed(current.inputs):
            if id(child) not in seen:
                stack.append((child, False))
    return iter(order)


def sources(node: PlanNode) -> list[Source]:
    """The plan's sources, in the order a walk meets them."""
    return [n for n in walk(node) if isinstance(n, Source)]


def strongly_aligned(node: PlanNode) -> bool:
    """Whether every path from ``node`` to a source passes an Align that
    blocks until CTIs: the plan shape of the ``"strong"`` consistency
    level, however it was written (``with_consistency("strong")``,
    ``consistency="strong"``, or ``align(INFINITY)`` on every input). An
    operator above it emits only what CTIs made final, so the output
    never retracts.

    >>> from udm.host.query import Stream
    >>> s = Stream.from_cht([(0, 1, 5)])
    >>> strongly_aligned(s.with_consistency("strong").shift(1).plan)
    True
    >>> strongly_aligned(s.with_consistency("strong").union(s).plan)
    False
    """
    known: dict[int, bool] = {}
    for current in walk(node):
        if isinstance(current, AlignNode) and current.blocking >= INFINITY:
            known[id(current)] = True
        elif not current.inputs:
            known[id(current)] = False
        else:
            known[id(current)] = all(known[id(i)] for i in current.inputs)
    return known[id(node)]


def linear_chain(node: PlanNode) -> tuple[Source, list[PlanNode]] | None:
    """A plan that is one chain of unary nodes as (source, nodes in order);
    ``None`` for a plan with a join or union.

    >>> from udm.host.query import Stream
    >>> s = Stream.from_cht([(0, 1, 5)])
    >>> source, nodes = linear_chain(s.to_points().plan)
    >>> nodes[0].describe()
    'to_points'
    >>> linear_chain(s.join(s).plan) is None
    True
    """
    nodes: list[PlanNode] = []
    current = node
    while not isinstance(current, Source):
        ins = current.inputs
        if len(ins) != 1:
            return None
        nodes.append(current)
        current = ins[0]
    nodes.reverse()
    return current, nodes


def rewrite_nodes(node: PlanNode, change: Callable[[PlanNode], PlanNode]) -> PlanNode:
    """The plan rebuilt from its sources up, every node ``n`` (its inputs
    already rewritten) replaced by ``change(n)`` (a node read twice stays
    one node)."""
    import dataclasses

    done: dict[int, PlanNode] = {}
    for current in walk(node):
        updates: dict[str, Any] = {}
        for f in dataclasses.fields(current):  # type: ignore[arg-type]
            value = getattr(current, f.name)
            if isinstance(value, PlanNode):
                updates[f.name] = done[id(value)]
            elif isinstance(value, tuple) and value and all(isinstance(v, PlanNode) for v in value):
                updates[f.name] = tuple(done[id(v)] for v in value)
        rebuilt = dataclasses.replace(current, **updates) if updates else current  # type: ignore[type-var]
        done[id(current)] = change(rebuilt)
    return done[id(node)]


def rewrite_sources(node: PlanNode, change: Callable[[Source], PlanNode]) -> PlanNode:
    """The plan with every source ``s`` replaced by ``change(s)`` and the
    nodes above rebuilt (a node read twice stays one node)."""
    return rewrite_nodes(node, lambda n: change(n) if isinstance(n, Source) else n)


def detached(op: WindowOp) -> WindowOp:
    """``op`` without its input, for shipping to workers: a node holds its
    input plan, and a plan can hold a DataFrame, which cannot be pickled."""
    import dataclasses

    return dataclasses.replace(op, input=Source(rows=()))


def with_consistency(plan: PlanNode, blocking: int, remember: int) -> PlanNode:
    """The plan with a Finalize (bounded ``remember``) and an Align
    (``blocking`` above zero) after every source: the CEDR plan shape that
    sets a query's consistency level. A Finalize that remembers everything
    is left out: it would change nothing a plain run does (sources carrying
    ExternalCTIs are repaired by the engines either way), and a no-op it
    swallowed would move a later bounded Finalize's CTIs."""

    def at_source(src: Source) -> PlanNode:
        node: PlanNode = src
        if remember < INFINITY:
            node = FinalizeNode(node, remember)
        if blocking > 0:
            node = AlignNode(node, blocking)
        return node

    return rewrite_sources(plan, at_source)
