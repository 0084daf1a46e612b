"""The fixture generator at the ends of the tick range: every stream it
builds is valid, and its times are exact ints (no float rounding)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from engine_support import Sum

from udm.host import (
    INFINITY,
    MIN_TIME,
    Cti,
    HoppingWindow,
    Host,
    TumblingWindow,
    derive_cht,
    evaluate,
    output_cht,
)
from udm.host.stream import Insert
from udm.testing import GenerateSpec, load_fixture, run_fixture, scenario


def spec(**kwargs: Any) -> GenerateSpec:
    return GenerateSpec(**{"events": 40, "seed": 3, "cti_every": 4, **kwargs})


@pytest.mark.parametrize("duration", ["point", "short", "long", "infinite"])
@pytest.mark.parametrize("start", [INFINITY - 20, INFINITY - 1])
def test_a_scenario_near_times_end_is_a_valid_stream(duration: str, start: int) -> None:
    for seed in range(5):
        s = spec(
            duration=duration,
            start=start,
            speculation=1.0,
            boundary=True,
            duplicates=0.3,
            disorder="high",
            seed=seed,
        )
        stream = scenario(s)
        cht, _ = derive_cht(stream)  # raises on an invalid stream
        assert len(cht) == 40
        # an infinite scenario may open with an event from the beginning of time
        assert all(start <= e.start < e.end <= INFINITY for e in cht if e.start != MIN_TIME)


def test_times_far_from_zero_are_exact() -> None:
    """2**62 + 1 is no float: the generator used to place every time as a
    float, so starts came out a few hundred ticks before ``start``."""
    s = spec(start=2**62 + 1, duration="point", disorder="none", cti_every=0)
    starts = [e.start for e in scenario(s) if isinstance(e, Insert)]
    assert min(starts) >= 2**62 + 1
    assert starts == sorted(starts)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert max(gaps) < 100  # a point scenario's gaps are a few ticks, not float steps of 1,024


def test_negative_starts_are_placed_as_before() -> None:
    """Times truncate toward zero as ``int(float)`` did, so a fixture with a
    negative ``start`` keeps building the same streams."""
    s = spec(start=-50, duration="point", disorder="none", cti_every=0)
    starts = [e.start for e in scenario(s) if isinstance(e, Insert)]
    assert starts[0] >= -50


@pytest.mark.parametrize("window", [TumblingWindow(10), HoppingWindow(10, 5)], ids=repr)
@pytest.mark.parametrize("duration", ["point", "short", "long", "infinite"])
def test_a_scenario_near_a_grids_last_window_is_windowed(window: Any, duration: str) -> None:
    """Ends (speculated, ghost, or closing an open event) past the grid's last
    window end (``time_bounds``) made the reference refuse the stream."""
    for seed in range(4):
        s = spec(duration=duration, start=INFINITY - 200, speculation=0.5, seed=seed)
        stream = scenario(s, window=window)
        out = Host(window, Sum).process_many([*stream, Cti(INFINITY)])  # raises past the grid
        cht, _ = derive_cht(stream)
        assert evaluate(cht, window, Sum) == output_cht(out)


def test_the_reordered_way_keeps_a_grids_last_end(tmp_path: Path) -> None:
    """Its speculated end for an event ending near the grid's last end was a
    valid time but past that end, so a valid fixture failed."""
    end = TumblingWindow(10).time_bounds[1]
    fixture = tmp_path / "near.udm.yaml"
    fixture.write_text(
        "name: near the grid's end\nudm: stats.max\nwindow: {kind: tumbling, size: 10}\n"
        f"input:\n  - {{insert: a, start: {end - 13}, end: {end - 2}, payload: 1}}\n"
        f"expected:\n  - {{start: {end - 20}, end: {end - 10}, payload: 1}}\n"
        f"  - {{start: {end - 10}, end: {end}, payload: 1}}\n"
    )
    (result,) = [run_fixture(f) for f in load_fixture(fixture)]
    assert result.passed, result
