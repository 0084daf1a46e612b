"""Draw the concept pages' timeline pictures from real runs into docs/images/.

Every picture is computed by udm itself (the reference evaluator, the CHT
derivation, the incremental host) and drawn by ``udm.host.plot``, the same code
behind ``Stream.plot()`` and ``udm-cli explain --plot``. Regenerate with
``.venv/bin/python docs/pictures.py`` after changing semantics or the plotting.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from udm.host import (
    INFINITY,
    Cht,
    CountByEndWindow,
    CountByStartWindow,
    Cti,
    HoppingWindow,
    Host,
    InputClipping,
    Insert,
    IntervalEvent,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    WindowSpec,
    derive_cht,
    evaluate,
    output_cht,
)
from udm.host.plot import Lane, lanes_for, plot_timeline
from udm.sdk import aggregate, operator

IMAGES = Path(__file__).resolve().parent / "images"


@aggregate
def total(values: list[int]) -> int:
    return sum(values)


@operator(time_sensitive=True)
def shifted(events: list[IntervalEvent[Any]], window: Any) -> list[IntervalEvent[Any]]:
    """One output per window: the first member's lifetime, 3 ticks longer."""
    first = min(events, key=lambda e: (e.start, e.end))
    return [IntervalEvent(first.start, first.end + 3, "out")]


EVENTS = Cht([(1, 4, 3), (2, 9, 5), (6, 7, 2), (11, 14, 4)])
PAPER_STREAM = [
    Insert("E0", 1, INFINITY, "P1"),
    Retract("E0", 1, INFINITY, 10),
    Retract("E0", 1, 10, 5),
    Insert("E1", 4, 9, "P2"),
]


def cht_picture() -> list[Lane]:
    """The paper's Table 2 stream and its CHT (Table 1)."""
    inserted = [
        IntervalEvent(e.start, e.end, e.payload) for e in PAPER_STREAM if isinstance(e, Insert)
    ]
    after_first = [IntervalEvent(1, 10, "P1 (retracted to 10)")]
    cht, _ = derive_cht(PAPER_STREAM)
    return [
        Lane("inserts as sent", inserted, "input"),
        Lane("after 1st retraction", after_first, "other"),
        Lane("CHT", cht.sorted(), "output"),
    ]


def window_picture(window: WindowSpec) -> list[Lane]:
    out = evaluate(EVENTS, window, total)
    return lanes_for(EVENTS.sorted(), window.windows(list(EVENTS)), out.sorted())


CLIPPED = Cht([(1, 4, 3), (2, 9, 5), (6, 7, 2), (4, 12, 7)])


def clipping_picture() -> list[Lane]:
    window = TumblingWindow(5)
    w = window.windows(list(CLIPPED))[1]  # [5, 10)
    members = window.members(w, list(CLIPPED))
    lanes = [
        Lane("events", CLIPPED.sorted(), "input"),
        Lane("window [5, 10)", [IntervalEvent(w.start, w.end, None)], "window"),
    ]
    for clipping in InputClipping:
        seen = sorted((clipping.clip(e, w) for e in members), key=lambda e: (e.start, e.end))
        lanes.append(Lane(f"clipping={clipping.value}", seen, "other"))
    return lanes


def output_policy_picture() -> list[Lane]:
    window = TumblingWindow(5)
    lanes = [Lane("events", EVENTS.sorted(), "input")]
    lanes.append(
        Lane(
            "windows",
            [IntervalEvent(w.start, w.end, None) for w in window.windows(list(EVENTS))],
            "window",
            labels=False,
        )
    )
    for policy in ("align", "point_end", "clip", "keep", "time_bound"):
        out = evaluate(EVENTS, window, shifted, input_clipping="left", output_policy=policy)
        lanes.append(Lane(f"output_policy={policy}", out.sorted(), "output", labels=False))
    return lanes


ARRIVALS = [
    Insert("a", 1, 4, 3),
    Insert("b", 2, 9, 5),
    Insert("d", 11, 14, 4),  # time has moved past 10: [0, 5) and [5, 10) are output
    Cti(5),
    Insert("c", 6, 7, 2),  # late for [5, 10): its output is retracted and replaced
    Retract("b", 2, 9, 5),  # b leaves [5, 10): replaced again
    Cti(15),
]


def speculation_picture(consistency: str) -> list[Lane]:
    host = Host(TumblingWindow(5), total, consistency=consistency)
    out = host.process_many(ARRIVALS)
    inserted = [IntervalEvent(e.start, e.end, e.payload) for e in out if isinstance(e, Insert)]
    retracted = {e.id for e in out if isinstance(e, Retract)}
    gone = [
        IntervalEvent(e.start, e.end, f"{e.payload} (retracted)")
        for e in out
        if isinstance(e, Insert) and e.id in retracted
    ]
    cht, _ = derive_cht(ARRIVALS)
    ctis = [e.time for e in ARRIVALS if isinstance(e, Cti)]
    return [
        Lane("input CHT", cht.sorted(), "input", marks=ctis),
        Lane("output inserts", inserted, "other"),
        Lane("retracted outputs", gone, "other"),
        Lane("output CHT", output_cht(out).sorted(), "output"),
    ]


def join_picture() -> list[Lane]:
    """CEDR's join example: both inputs, and the output (the intersection of
    each matching pair), from the incremental engine."""
    from udm.host.query import Stream

    s1 = [Insert("a0", 0, 2, "A0"), Cti(1), Insert("a1", 2, 6, "A1"), Retract("a1", 2, 6, 4)]
    s2 = [Insert("b1", 3, 5, "A1"), Cti(3)]
    left, right = Stream.from_events(s1), Stream.from_events(s2)
    joined = left.join(right, on=(), where=lambda a, b: a == b)
    out = joined.to_cht(engine="host")
    assert isinstance(out, Cht)
    shown = Cht(IntervalEvent(e.start, e.end, e.payload["value_left"]) for e in out)
    return [
        Lane("S1 (CHT)", derive_cht(s1)[0].sorted(), "input"),
        Lane("S2 (CHT)", derive_cht(s2)[0].sorted(), "input"),
        Lane("S1 join S2 on P", shown.sorted(), "output"),
    ]


def triangle_picture(path: Path) -> Path:
    """CEDR's Figure 1: the consistency levels as a triangle of (remember,
    blocking), with udm's three named levels at its corners."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=110)
    ax.fill([0, 1, 1], [0, 0, 1], color="#dbe9f6", zorder=0)
    ax.plot([0, 1, 1, 0], [0, 0, 1, 0], color="#1f4e79", linewidth=2)
    corners = {
        "weak\n(0, remember)": (0, 0, "left", "top"),
        "middle\n(0, inf)": (1, 0, "left", "top"),
        "strong\n(inf, inf)": (1, 1, "left", "bottom"),
    }
    for label, (x, y, ha, va) in corners.items():
        ax.plot([x], [y], "o", color="#c0392b", markersize=9, zorder=3)
        ax.annotate(
            label,
            (x, y),
            xytext=(8, -4 if va == "top" else 4),
            textcoords="offset points",
            ha=ha,
            va=va,
            fontsize=10,
        )
    ax.text(
        0.45,
        0.55,
        "no speculation\n(blocking = remember)",
        rotation=38,
        ha="center",
        va="center",
        fontsize=9,
        color="#1f4e79",
    )
    ax.text(
        1.02,
        0.5,
        "eventually correct\n(remember everything)",
        rotation=90,
        ha="left",
        va="center",
        fontsize=9,
        color="#1f4e79",
    )
    ax.text(
        0.5, -0.05, "zero latency (no blocking)", ha="center", va="top", fontsize=9, color="#1f4e79"
    )
    ax.set_xlim(-0.08, 1.35)
    ax.set_ylim(-0.2, 1.12)
    ax.set_xlabel("remember: how long input is kept to correct output")
    ax.set_ylabel("blocking: how long output waits")
    ax.set_xticks([0, 1], ["0", "everything"])
    ax.set_yticks([0, 1], ["0", "until CTIs"])
    ax.set_title("Consistency levels: consistency=(blocking, remember)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


PICTURES: dict[str, tuple[str, Callable[[], list[Lane]]]] = {
    "cht": ("A physical stream and its canonical history table", cht_picture),
    "window-hopping": (
        "Hopping windows: size 6, hop 3; sum",
        lambda: window_picture(HoppingWindow(6, 3)),
    ),
    "window-tumbling": ("Tumbling windows: size 5; sum", lambda: window_picture(TumblingWindow(5))),
    "window-snapshot": ("Snapshot windows; sum", lambda: window_picture(SnapshotWindow())),
    "window-count-by-start": (
        "Count-by-start windows, n = 2; sum",
        lambda: window_picture(CountByStartWindow(2)),
    ),
    "window-count-by-end": (
        "Count-by-end windows, n = 2; sum",
        lambda: window_picture(CountByEndWindow(2)),
    ),
    "clipping": ("Input clipping: what the UDM receives for window [5, 10)", clipping_picture),
    "output-policies": (
        "Output policies for an operator that outputs its first member's lifetime + 3 ticks",
        output_policy_picture,
    ),
    "speculative": (
        "Speculative consistency: output at once, retracted when the input changes",
        lambda: speculation_picture("speculative"),
    ),
    "conservative": (
        "Conservative consistency: output only when a CTI finalizes a window",
        lambda: speculation_picture("conservative"),
    ),
    "operators-join": ("CEDR's join example: S1 join S2 on the payload", join_picture),
}


def main(out: Path = IMAGES) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, scene) in PICTURES.items():
        path = out / f"{name}.png"
        plot_timeline(scene(), title=title, path=path)
        written.append(path)
    written.append(triangle_picture(out / "consistency-triangle.png"))
    return written


if __name__ == "__main__":
    for path in main(Path(sys.argv[1]) if len(sys.argv) > 1 else IMAGES):
        print(path)
