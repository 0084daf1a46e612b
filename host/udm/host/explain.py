"""Showing a plan: ``Stream.explain()`` text and ``Stream.plot()`` timelines.

``explain`` prints the plan from its source(s) to its output, one line per
operation, with how Spark runs each window operation; an operator reading
several streams (join, union) shows its other inputs indented under it.
``plot`` draws one group of the last window operation with the reference
engine, so it is for small samples; a plan with CEDR operators (union,
joins, lifetime changes, Align, Finalize) or several window operations is
drawn operator by operator instead: each operator's input and output
timelines, one lane group per operator (:func:`operator_lanes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from udm.host.plan import GroupNode, PlanNode, SelectNode, Source, WhereNode, WindowOp, sources
from udm.host.rows import Layout, key_of
from udm.host.strategy import (
    HEAVY_KEY_SHARE,
    PARTIAL_MIN_HEAVY,
    PARTIAL_MIN_PER_GROUP,
    PartialChoice,
    choose_partial,
    describe_strategy,
    partial_is_open,
)
from udm.host.time import INFINITY
from udm.sdk.events import IntervalEvent

if TYPE_CHECKING:
    from udm.host.plot import Lane
    from udm.host.query import Stream

__all__ = ["explain_plan", "operator_lanes", "plot_stream"]


def _chain(node: PlanNode) -> list[PlanNode]:
    """The main line of a plan: ``node``, its first input, that one's ...,
    down to a source; returned source first."""
    line = [node]
    while line[-1].inputs:
        line.append(line[-1].inputs[0])
    line.reverse()
    return line


def _render(node: PlanNode, datetimes: bool, indent: str) -> list[str]:
    line = _chain(node)
    source = line[0]
    assert isinstance(source, Source)
    described = source.describe(datetimes).replace("\n", "\n" + indent[2:])
    lines = [f"{indent}source: {described}"]
    for n in line[1:]:
        text = n.describe(datetimes)
        for i, part in enumerate(text.splitlines()):
            lines.append(indent + ("- " if i == 0 else "  ") + part)
        if isinstance(n, WindowOp):
            lines.extend(_strategy_lines(n, indent))
        for j, other in enumerate(n.inputs[1:], start=2):
            lines.append(f"{indent}  input {j}:")
            lines.extend(_render(other, datetimes, indent + "    "))
    return lines


def _partial_choice(op: WindowOp) -> PartialChoice | None:
    """The Spark engine's choice of partial states for ``op`` (a sample of
    the input when the choice is open and the plan reads DataFrames), or
    None: open, over in-memory sources (decided when the query runs)."""
    if not partial_is_open(op):
        return choose_partial(op, None)
    if not any(s.df is not None for s in sources(op)):
        return None
    from udm.host.engines import get_engine

    engine: Any = get_engine("spark")
    choice: PartialChoice = engine.partial_choice(op)
    return choice


def _strategy_lines(op: WindowOp, indent: str) -> list[str]:
    """``spark:`` and, where partial states are a choice, why."""
    keys = op.input.keys()
    choice = _partial_choice(op)
    if choice is None:
        yes = describe_strategy(op, keys, PartialChoice(True, ""))
        no = describe_strategy(op, keys, PartialChoice(False, ""))
        return [
            f"{indent}  spark: chosen when the query runs, from a sample of the input's head: "
            f"with partial states when >= {PARTIAL_MIN_HEAVY:.0%} of its events are in keys of "
            f">= {HEAVY_KEY_SHARE:.1%} each and its (key, pane) groups hold >= "
            f"{PARTIAL_MIN_PER_GROUP:g} events on average, else sliced",
            f"{indent}    with partial states: {yes}",
            f"{indent}    sliced: {no}",
        ]
    lines = [f"{indent}  spark: " + describe_strategy(op, keys, choice)]
    if op.partial is not None or (op.window.is_grid and op.mergeable()):
        lines.append(f"{indent}    partial states: {choice.reason}")
    return lines


def _output_description(node: PlanNode) -> str:
    cols = ["start", "end", *node.keys()]
    if isinstance(node, WindowOp):
        cols += [c.name for c in node.calls]
        return ", ".join(cols) + "  (a struct result becomes one column per field)"
    return ", ".join(cols) + ", payload columns"


def explain_plan(node: PlanNode, datetimes: bool) -> str:
    """The plan as text (see the module docstring)."""
    lines = ["Stream plan", *_render(node, datetimes, "  ")]
    lines.append("  output: " + _output_description(node))
    return "\n".join(lines)


def _plot_title(op: WindowOp | None, key: Any, datetimes: bool) -> str:
    parts = []
    if op is not None:
        names = ", ".join(c.name for c in op.calls)
        window = op.window.describe(durations=datetimes)
        parts.append(f"{op.kind} {names} over {window}")
        parts.append(f"clipping={op.clipping.value}, output={op.policy.value}")
    if key is not None:
        parts.append(f"key={key!r}")
    return "; ".join(parts) or "events"


def plot_stream(
    stream: Stream,
    path: str | Path | None = None,
    *,
    key: Any = None,
    title: str | None = None,
    max_events: int = 400,
) -> Any:
    """``Stream.plot``: the input, windows and output of the last window
    operation on the plan's main line, for one group."""
    from udm.host.engines import get_engine
    from udm.host.plot import Lane, lanes_for, plot_timeline
    from udm.host.plot import plot_timeline as draw

    plan = stream.plan
    datetimes = stream.source.datetimes()
    if _by_operator(plan):
        if key is not None:
            raise KeyError(
                f"plot(key={key!r}): a plan with several operators is drawn whole, every "
                "operator's input and output; drop key=, or filter the sources"
            )
        lanes = operator_lanes(plan, datetimes)
        return draw(
            lanes,
            title=title or "operators, inputs and outputs",
            path=path,
            max_events=max_events,
            datetimes=datetimes,
        )
    op = next((n for n in reversed(_chain(plan)) if isinstance(n, WindowOp)), None)
    out_rows, layout, _ = get_engine("reference").collect(plan)
    if op is None:
        in_rows, in_layout, keys = out_rows, layout, plan.keys()
    else:
        keys = op.input.keys()
        in_rows, in_layout, _ = get_engine("reference").collect(op.input)

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
        title = _plot_title(op, key if keys else None, datetimes)
    return plot_timeline(lanes, title=title, path=path, max_events=max_events, datetimes=datetimes)


#: plan nodes drawn in a main-line picture; any other (a CEDR operator)
#: makes :func:`plot_stream` draw operator by operator
_LINEAR = (Source, WhereNode, SelectNode, GroupNode)


def _by_operator(plan: PlanNode) -> bool:
    from udm.host.plan import walk

    nodes = list(walk(plan))
    windows = sum(isinstance(n, WindowOp) for n in nodes)
    return windows > 1 or any(not isinstance(n, (*_LINEAR, WindowOp)) for n in nodes)


def _in_order(plan: PlanNode) -> list[PlanNode]:
    """Every node once, each after its inputs (sources first)."""
    out: list[PlanNode] = []
    seen: set[int] = set()

    def visit(node: PlanNode) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for child in node.inputs:
            visit(child)
        out.append(node)

    visit(plan)
    return out


def _short(text: str, most: int = 34) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= most else line[: most - 1] + "\u2026"


def operator_lanes(
    plan: PlanNode, datetimes: bool = False, names: Mapping[int, str] | None = None
) -> list[Lane]:
    """One lane group per operator of ``plan`` (sources first, each node
    after its inputs; regrouping is not drawn): a lane for each input
    stream (``in``, or ``in 1``/``in 2`` for a join), and one for its
    output, every lifetime as the reference engine computes it. Lanes are
    numbered by operator, and an input lane says which operator's output
    it is, so a picture of a join over two lifetime changes reads as the
    plan does. ``names`` labels sources (by ``id`` of the plan node),
    e.g. a query fixture's input names."""
    from udm.host.engines import get_engine
    from udm.host.plot import Lane

    nodes = [n for n in _in_order(plan) if not isinstance(n, GroupNode)]
    numbers: dict[int, int] = {}
    outputs: dict[int, list[IntervalEvent[Any]]] = {}

    def events(node: PlanNode) -> list[IntervalEvent[Any]]:
        while isinstance(node, GroupNode):
            node = node.inputs[0]
        if id(node) not in outputs:
            rows, layout, _ = get_engine("reference").collect(node)
            outputs[id(node)] = [IntervalEvent(s, e, layout.payload(p)) for s, e, p in rows]
        return outputs[id(node)]

    def name_of(node: PlanNode) -> str:
        while isinstance(node, GroupNode):
            node = node.inputs[0]
        return f"{numbers[id(node)]}"

    lanes: list[Lane] = []
    for n, node in enumerate(nodes, start=1):
        numbers[id(node)] = n
        if isinstance(node, Source):
            label = (names or {}).get(id(node), "source")
            lanes.append(Lane(f"{n}. {label}", events(node), "input"))
            continue
        what = _short(node.describe(datetimes))
        several = len(node.inputs) > 1
        for j, child in enumerate(node.inputs, start=1):
            side = f"in {j}" if several else "in"
            lanes.append(
                Lane(f"{n}. {what}\n{side}: output of {name_of(child)}", events(child), "other")
            )
        lanes.append(Lane(f"{n}. {what}\nout", events(node), "output"))
    return lanes
