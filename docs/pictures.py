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
}


def main(out: Path = IMAGES) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, scene) in PICTURES.items():
        path = out / f"{name}.png"
        plot_timeline(scene(), title=title, path=path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in main(Path(sys.argv[1]) if len(sys.argv) > 1 else IMAGES):
        print(path)
