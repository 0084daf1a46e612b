"""Timeline pictures: input events, windows and output events on one time axis.

One drawing routine serves every picture udm makes (the concept pages, fixture
failures, ``Stream.plot()`` and ``udm-cli explain --plot``), so what the docs
show is what the code computes. matplotlib is imported only when a picture is
drawn, through its object-oriented API (no pyplot state, no GUI needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udm.host.time import INFINITY, MIN_TIME, from_ticks
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = ["Lane", "TimelinePlotError", "lanes_for", "plot_timeline"]

#: fill colours per lane kind (colour-blind safe: Okabe-Ito)
COLOURS = {"input": "#0072B2", "window": "#E69F00", "output": "#009E73", "other": "#CC79A7"}


class TimelinePlotError(ValueError):
    """A picture that cannot be drawn (nothing finite to show, too many events)."""


@dataclass(frozen=True)
class Lane:
    """One band of the picture: a title and the intervals drawn in it.

    ``kind`` picks the colour (``input``, ``window``, ``output`` or ``other``);
    ``labels`` says whether payloads are written on the bars.
    """

    title: str
    events: Sequence[IntervalEvent[Any]]
    kind: str = "input"
    labels: bool = True
    marks: Sequence[int] = field(default_factory=tuple)


def _rows(events: Sequence[IntervalEvent[Any]]) -> list[int]:
    """Greedy interval packing: each event on the lowest row free at its start,
    so overlapping lifetimes never hide each other."""
    order = sorted(range(len(events)), key=lambda i: (events[i].start, events[i].end))
    row_end: list[int] = []
    rows = [0] * len(events)
    for i in order:
        e = events[i]
        for r, end in enumerate(row_end):
            if end <= e.start:
                row_end[r] = e.end
                rows[i] = r
                break
        else:
            rows[i] = len(row_end)
            row_end.append(e.end)
    return rows


def _labelled(
    lane: Lane, rows: list[int], label: Callable[[Any], str], lo: int, char: float
) -> set[int]:
    """The events of a lane whose labels fit: in start order on each row,
    a label is left out when it would run into the previous one."""
    free: dict[int, float] = {}  # row -> where the next label may start
    shown: set[int] = set()
    for i in sorted(range(len(lane.events)), key=lambda i: lane.events[i].start):
        e = lane.events[i]
        if e.payload is None:
            continue
        at = max(e.start, lo)
        if at < free.get(rows[i], lo - 1):
            continue
        free[rows[i]] = at + (len(label(e.payload)) + 1) * char
        shown.add(i)
    return shown


def _bounded(t: int) -> bool:
    """Whether a time is drawn where it is: the ends of time (``MIN_TIME``,
    ``INFINITY``) and the last tick before ``INFINITY`` (where an open
    window's point output lies) are drawn at the edge of the axis instead,
    which would otherwise span 2**64 ticks and show nothing else."""
    return MIN_TIME < t < INFINITY - 1


def _datetime_label(ticks: float) -> str:
    """A tick as a compact UTC datetime for an axis or a CTI label."""
    try:
        text = from_ticks(round(ticks)).isoformat(sep=" ")
    except (OverflowError, ValueError):
        return str(round(ticks))
    return text.removesuffix("+00:00").removesuffix(":00").removesuffix(" 00:00")


#: axis steps for datetime axes, in ticks: 1 s ... 1 day ... 100 years
_STEPS = [
    n * unit
    for unit, ns in (
        (1_000_000, (1, 2, 5, 10, 15, 30)),
        (60_000_000, (1, 2, 5, 10, 15, 30)),
        (3_600_000_000, (1, 2, 3, 6, 12)),
        (86_400_000_000, (1, 2, 7, 14, 30, 91, 182, 365, 730, 1826, 3652, 36524)),
    )
    for n in ns
]


def _time_step(span: float, most: int = 6) -> float:
    """The smallest round step giving at most ``most`` ticks over ``span``."""
    for step in _STEPS:
        if span / step <= most:
            return step
    return span / most


def _fmt(payload: Any) -> str:
    if isinstance(payload, float):
        return f"{payload:.4g}"
    if isinstance(payload, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in payload.items())
    return str(payload)


def lanes_for(
    inputs: Iterable[IntervalEvent[Any]],
    windows: Iterable[WindowDescriptor] = (),
    outputs: Iterable[IntervalEvent[Any]] = (),
    *,
    ctis: Iterable[int] = (),
) -> list[Lane]:
    """The usual three lanes: input events, the windows, the output events."""
    lanes = [Lane("input events", list(inputs), "input", marks=tuple(ctis))]
    ws = [IntervalEvent(w.start, w.end, None) for w in windows]
    if ws:
        lanes.append(Lane("windows", ws, "window", labels=False))
    lanes.append(Lane("output events", list(outputs), "output"))
    return lanes


def plot_timeline(
    lanes: Sequence[Lane],
    *,
    title: str | None = None,
    path: str | Path | None = None,
    label: Callable[[Any], str] = _fmt,
    time_range: tuple[int, int] | None = None,
    max_events: int = 400,
    datetimes: bool = False,
) -> Any:
    """Draw lanes of lifetimes on a shared time axis and return the figure.

    Each event is a bar from its start to its end (an end at infinity is drawn
    as an arrow past the right edge); one-tick point events are drawn as
    markers. Vertical dashed lines are a lane's ``marks`` (CTIs). ``path``
    saves the figure (PNG, SVG or PDF by its suffix). ``datetimes`` labels
    the time axis and the CTIs with UTC datetimes instead of ticks.
    """
    total = sum(len(lane.events) for lane in lanes)
    if total > max_events:
        raise TimelinePlotError(
            f"{total} events are too many to draw legibly (max_events={max_events}); "
            "plot a sample: fewer keys or a shorter time range"
        )
    finite = [t for lane in lanes for e in lane.events for t in (e.start, e.end) if _bounded(t)]
    finite += [m for lane in lanes for m in lane.marks if _bounded(m)]
    if time_range is None:
        if not finite:
            raise TimelinePlotError("nothing with a finite time to draw")
        lo, hi = min(finite), max(finite)
        pad = max(1, (hi - lo) // 20)
        time_range = (lo - pad, hi + pad)
    lo, hi = time_range

    # the object-oriented API: no pyplot state, no GUI backend, safe in workers
    from matplotlib.figure import Figure

    packed = [_rows(list(lane.events)) for lane in lanes]
    heights = [max([*p, 0]) + 1 for p in packed]
    fig = Figure(figsize=(9, 0.9 + 0.38 * sum(heights) + 0.35 * len(lanes)))
    axes = fig.subplots(
        len(lanes), 1, sharex=True, gridspec_kw={"height_ratios": heights}, squeeze=False
    )
    point_width = max(1, (hi - lo) // 300)
    # a label's width in time units (7-point text on a ~7.2 inch axis):
    # labels that would run into the previous one on their row are left
    # out, so dense inputs stay readable instead of an overprinted smear
    char = (hi - lo) * (7 * 0.6) / (7.2 * 72)
    for ax, lane, rows, height in zip(axes[:, 0], lanes, packed, heights, strict=True):
        colour = COLOURS.get(lane.kind, COLOURS["other"])
        labelled = _labelled(lane, rows, label, lo, char) if lane.labels else set()
        left_out = (
            sum(e.payload is not None for e in lane.events) - len(labelled) if labelled else 0
        )
        for i, (e, row) in enumerate(zip(lane.events, rows, strict=True)):
            y = height - 1 - row
            # what lies beyond the axis is drawn at its edge (an arrow says
            # the lifetime goes on): matplotlib takes no int beyond int64
            start, end = min(max(e.start, lo), hi), max(min(e.end, hi), lo)
            if e.end - e.start == 1:
                ax.plot([start], [y], marker="o", color=colour, markersize=6)
                ax.vlines(start, y - 0.3, y + 0.3, color=colour, linewidth=2)
            else:
                ax.barh(
                    y,
                    max(end - start, point_width),
                    left=start,
                    height=0.6,
                    color=colour,
                    alpha=0.45 if lane.kind == "window" else 0.85,
                    edgecolor="white",  # adjacent lifetimes stay distinguishable
                    linewidth=1.5,
                )
            if e.end > hi and e.end - e.start > 1:
                ax.annotate(
                    "",
                    xy=(hi, y),
                    xytext=(start, y),
                    arrowprops={"arrowstyle": "->", "color": colour},
                )
            if e.start < lo and e.end - e.start > 1:
                ax.annotate(
                    "",
                    xy=(lo, y),
                    xytext=(end, y),
                    arrowprops={"arrowstyle": "->", "color": colour},
                )
            if i in labelled:
                text = label(e.payload)
                ax.text(start, y + 0.36, text, fontsize=7, va="bottom", ha="left", clip_on=True)
        for m in (m for m in lane.marks if lo <= m <= hi):
            ax.axvline(m, color="#D55E00", linestyle="--", linewidth=1)
            shown = _datetime_label(m) if datetimes else str(m)
            ax.text(m, height - 0.4, f"CTI {shown}", color="#D55E00", fontsize=7, ha="left")
        ax.set_ylim(-0.6, height + 0.1)
        ax.set_yticks([])
        shown_title = lane.title + (f"\n({left_out} labels\nleft out)" if left_out else "")
        ax.set_ylabel(shown_title, rotation=0, ha="right", va="center", fontsize=9)
        ax.grid(axis="x", linestyle=":", linewidth=0.5)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    axes[-1, 0].set_xlim(lo, hi)
    if datetimes:
        from matplotlib.ticker import FuncFormatter, MultipleLocator

        axis = axes[-1, 0].xaxis
        # round times (multiples of a minute, an hour ...), few enough that
        # their datetime labels, slanted, never overlap
        axis.set_major_locator(MultipleLocator(_time_step(hi - lo)))
        axis.set_major_formatter(FuncFormatter(lambda x, _: _datetime_label(x)))
        axes[-1, 0].tick_params(axis="x", labelrotation=25)
        for text in axes[-1, 0].get_xticklabels():
            text.set_horizontalalignment("right")
        axes[-1, 0].set_xlabel("application time (UTC)")
    else:
        axes[-1, 0].set_xlabel("application time (ticks)")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    if path is not None:
        fig.savefig(Path(path), dpi=110)
    return fig
