"""The concept pages' pictures: drawn from real runs, and the committed ones are current."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from udm.host import IntervalEvent

ROOT = Path(__file__).resolve().parent.parent
PICTURES: dict[str, Any] = runpy.run_path(str(ROOT / "docs" / "pictures.py"), run_name="pictures")


def lane(lanes: list[Any], title: str) -> list[IntervalEvent[Any]]:
    (found,) = [x for x in lanes if x.title == title]
    return sorted(found.events, key=lambda e: (e.start, e.end, str(e.payload)))


def test_every_picture_is_drawn_committed_and_shown(tmp_path: Path) -> None:
    written = PICTURES["main"](tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(p.name for p in (ROOT / "docs" / "images").glob("*.png"))
    pages = "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    assert [n for n in names if f"images/{n}" not in pages] == []


def test_speculative_picture_shows_the_hosts_retractions() -> None:
    lanes = PICTURES["speculation_picture"]("speculative")
    # [5, 10) is output with b (5), replaced when c arrives (7), then when b leaves (2)
    assert lane(lanes, "retracted outputs") == [
        IntervalEvent(5, 10, "5 (retracted)"),
        IntervalEvent(5, 10, "7 (retracted)"),
    ]
    assert lane(lanes, "output CHT") == [
        IntervalEvent(0, 5, 8),
        IntervalEvent(5, 10, 2),
        IntervalEvent(10, 15, 4),
    ]
    conservative = PICTURES["speculation_picture"]("conservative")
    assert lane(conservative, "retracted outputs") == []
    assert lane(conservative, "output inserts") == lane(lanes, "output CHT")


def test_clipping_picture_shows_what_the_udm_receives() -> None:
    lanes = PICTURES["clipping_picture"]()
    # window [5, 10): members b [2, 9), e [4, 12) and c [6, 7)
    b, c, e = (2, 9, 5), (6, 7, 2), (4, 12, 7)
    expected = {
        "none": [b, e, c],
        "left": [(5, 9, 5), (5, 12, 7), c],
        "right": [b, (4, 10, 7), c],
        "full": [(5, 9, 5), (5, 10, 7), c],
    }
    for clipping, events in expected.items():
        got = lane(lanes, f"clipping={clipping}")
        assert got == [IntervalEvent(*x) for x in sorted(events)], clipping
