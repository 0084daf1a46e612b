"""Timeline pictures: what is drawn where (bars, rows, CTI marks) and clear errors."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

import pytest

from udm.host import INFINITY, IntervalEvent, Stream, TumblingWindow, WindowDescriptor
from udm.host.plot import Lane, TimelinePlotError, lanes_for, plot_timeline
from udm.sdk import aggregate


@aggregate
def median(values: list[float]) -> float:
    return statistics.median(values)


def bars(ax: Any) -> list[tuple[float, float, float]]:
    """(start, width, row) of every bar of an axis, sorted."""
    return sorted(
        (p.get_x(), p.get_width(), round(p.get_y() + p.get_height() / 2, 6)) for p in ax.patches
    )


def test_overlapping_lifetimes_go_on_separate_rows_and_back_to_back_share_one() -> None:
    events = [IntervalEvent(0, 5, "a"), IntervalEvent(5, 9, "b"), IntervalEvent(3, 8, "c")]
    fig = plot_timeline([Lane("in", events)], time_range=(0, 10))
    (ax,) = fig.axes
    # a and b share the lowest row (top of the lane: y = 1); c overlaps both: y = 0
    assert bars(ax) == [(0, 5, 1.0), (3, 5, 0.0), (5, 4, 1.0)]
    assert [t.get_text() for t in ax.texts] == ["a", "b", "c"]


def test_three_lanes_windows_and_cti_mark() -> None:
    events = [IntervalEvent(1, 7, 3.0), IntervalEvent(12, INFINITY, 1.0)]
    windows = [WindowDescriptor(0, 5), WindowDescriptor(5, 10), WindowDescriptor(10, 15)]
    outputs = [IntervalEvent(0, 5, 3.0)]
    fig = plot_timeline(lanes_for(events, windows, outputs, ctis=[15]), title="t")
    inputs_ax, windows_ax, outputs_ax = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == ["input events", "windows", "output events"]
    assert [(x, w) for x, w, _ in bars(windows_ax)] == [(0, 5), (5, 5), (10, 5)]
    lo, hi = outputs_ax.get_xlim()
    assert (lo, hi) == (-1, 16)  # finite times 0..15, padded by one tick
    # the infinite event is drawn up to the right edge, with an arrow past it
    assert bars(inputs_ax)[1][:2] == (12, hi - 12)
    assert any(line.get_linestyle() == "--" for line in inputs_ax.get_lines())
    assert "CTI 15" in [t.get_text() for t in inputs_ax.texts]


def test_point_events_are_markers_not_bars() -> None:
    fig = plot_timeline([Lane("in", [IntervalEvent(4, 5, 8)])], time_range=(0, 10))
    (ax,) = fig.axes
    assert len(ax.patches) == 0
    assert [tuple(line.get_xdata()) for line in ax.get_lines()] == [(4,)]


def test_saving_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "t.png"
    plot_timeline([Lane("in", [IntervalEvent(0, 3, 1)])], path=out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_too_many_events_or_nothing_finite_are_clear_errors() -> None:
    many = [IntervalEvent(i, i + 2, i) for i in range(11)]
    with pytest.raises(TimelinePlotError, match=r"11 events are too many.*max_events=10"):
        plot_timeline([Lane("in", many)], max_events=10)
    with pytest.raises(TimelinePlotError, match="nothing with a finite time"):
        plot_timeline([Lane("in", [])])


ROWS = [
    (1, 7, {"room": "lab", "temp": 20.0}),
    (4, 5, {"room": "lab", "temp": 22.0}),
    (6, 12, {"room": "hall", "temp": 18.0}),
    (8, 15, {"room": "lab", "temp": 21.0}),
]


def test_stream_plot_draws_one_group_of_the_last_window_operation(tmp_path: Path) -> None:
    stream = Stream.from_cht(ROWS, key="room").window(TumblingWindow(10))
    query = stream.aggregate(median, value="temp", alias="m")
    fig = query.plot(tmp_path / "q.png", key="lab")
    inputs_ax, windows_ax, outputs_ax = fig.axes
    # lab's events with the value the UDA receives (temp), not the whole row
    assert sorted(t.get_text() for t in inputs_ax.texts) == ["20", "21", "22"]
    assert [(x, w) for x, w, _ in bars(windows_ax)] == [(0, 10), (10, 10)]
    # [0, 10): median(20, 22, 21) = 21; [10, 20): 21
    assert [(x, w) for x, w, _ in bars(outputs_ax)] == [(0, 10), (10, 10)]
    assert [t.get_text() for t in outputs_ax.texts] == ["21", "21"]
    assert "key='lab'" in fig.texts[0].get_text()
    assert (tmp_path / "q.png").exists()


def test_stream_plot_defaults_to_the_first_group_and_rejects_unknown_ones() -> None:
    query = Stream.from_cht(ROWS, key="room").tumbling_window(10).aggregate(median, value="temp")
    fig = query.plot()
    assert "key='hall'" in fig.texts[0].get_text()
    message = r"plot\(key='attic'\): no such group; groups: \['hall', 'lab'\]"
    with pytest.raises(KeyError, match=message):
        query.plot(key="attic")


def test_a_query_over_datetimes_is_drawn_and_explained_in_datetimes() -> None:
    """Before, the axis, the CTI mark and the window read in ticks
    (HoppingWindow(size=3600000000, ...)) for a query written in datetimes."""
    import datetime as dt

    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    rows = [(noon + dt.timedelta(minutes=m), None, float(m)) for m in (0, 20, 50)]
    stream = Stream.from_cht(
        [(s, s + dt.timedelta(microseconds=1), v) for s, _, v in rows], timestamps=True
    )
    query = stream.hopping_window(dt.timedelta(hours=1), dt.timedelta(minutes=30)).aggregate(
        median, watermark=noon + dt.timedelta(hours=2)
    )
    assert "  - window HoppingWindow(size=1h, hop=30m), watermark=2026-01-01T14:00:00Z" in (
        query.explain().splitlines()
    )
    fig = query.plot()
    assert "over HoppingWindow(size=1h, hop=30m)" in fig.texts[0].get_text()
    axis = fig.axes[-1]
    assert axis.get_xlabel() == "application time (UTC)"
    assert axis.xaxis.get_major_formatter()(1_767_268_800_000_000, 0) == "2026-01-01 12:00"
    assert any(t.get_text() == "CTI 2026-01-01 14:00" for ax in fig.axes for t in ax.texts)
    ticks = Stream.from_cht([(0, 1, 1.0)]).tumbling_window(10).aggregate(median)
    assert ticks.plot().axes[-1].get_xlabel() == "application time (ticks)"
    assert "  - window TumblingWindow(size=10)" in ticks.explain().splitlines()


def test_datetime_axis_labels_are_round_times_that_never_overlap() -> None:
    """Labels were every 1,000 s ('2025-12-31 23:16:40', ...), each pair of
    neighbours overlapping."""
    import datetime as dt
    import itertools

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    minute = dt.timedelta(minutes=1)
    for span, step in (
        (dt.timedelta(hours=3), "1h"),
        (dt.timedelta(days=2), "1d"),
        (dt.timedelta(minutes=1), "30s"),
    ):
        stream = Stream.from_cht([(t0, t0 + minute, 1.0), (t0 + span, t0 + span + minute, 2.0)])
        query = stream.hopping_window(max(span / 4, 10 * minute / 60), max(span / 16, minute / 12))
        fig = query.aggregate(median).plot()
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        labels = [t for t in fig.axes[-1].get_xticklabels() if t.get_text()]
        boxes = [t.get_window_extent(canvas.get_renderer()) for t in labels]
        assert 3 <= len(labels) <= 7, [t.get_text() for t in labels]
        assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
        ticks = [t.get_position()[0] for t in labels]
        steps = {round(b - a) for a, b in itertools.pairwise(ticks)}
        want = {"1h": 3_600_000_000, "1d": 86_400_000_000, "30s": 30_000_000}[step]
        assert steps == {want}, steps
        assert all(t % want == 0 for t in ticks)  # round times: whole hours, days ...


def test_plot_of_an_ungrouped_stream_refuses_a_key() -> None:
    query = Stream.from_cht([(0, 1, {"temp": 1.0})]).tumbling_window(10).aggregate(median, "temp")
    with pytest.raises(KeyError, match=r"plot\(key='lab'\): the stream is not grouped"):
        query.plot(key="lab")


def test_dense_input_labels_never_overprint() -> None:
    """explain --plot of 200 readings wrote 200 labels on top of each other."""
    from udm.host.plot import Lane, plot_timeline

    events = [IntervalEvent(t, t + 1, 20.0 + t / 7) for t in range(200)]
    fig = plot_timeline([Lane("input", events, "input")])
    (ax,) = fig.axes
    texts = sorted(ax.texts, key=lambda t: t.get_position()[0])
    assert 5 < len(texts) < 200
    lo, hi = ax.get_xlim()
    char = (hi - lo) * (7 * 0.6) / (7.2 * 72)
    for a, b in itertools.pairwise(texts):
        assert b.get_position()[0] - a.get_position()[0] >= len(a.get_text()) * char
    assert f"({200 - len(texts)} labels" in ax.get_ylabel()


def test_the_ends_of_time_are_drawn_at_the_edge_of_the_axis(tmp_path: Path) -> None:
    """Found by black-box testing: an event from MIN_TIME (which snapshot
    windows take) made matplotlib raise a TypeError, and the point at time's
    last tick [INFINITY - 1, INFINITY) stretched the axis over 2**63 ticks."""
    from udm.host import MIN_TIME

    q = Stream.from_cht([(MIN_TIME, 5, 1)]).snapshot_window().aggregate("stats.max")
    fig = q.plot(str(tmp_path / "p.png"))
    assert fig.axes[-1].get_xlim() == (4.0, 6.0)  # the one finite time, padded
    last = IntervalEvent(INFINITY - 1, INFINITY, 1)
    fig = plot_timeline(
        [
            Lane("in", [IntervalEvent(0, INFINITY, 1), IntervalEvent(3, 10, 2)]),
            Lane("out", [IntervalEvent(9, 10, 1), last]),
        ]
    )
    assert fig.axes[-1].get_xlim() == (-1.0, 11.0)
    with pytest.raises(TimelinePlotError, match="nothing with a finite time"):
        plot_timeline([Lane("in", [IntervalEvent(MIN_TIME, INFINITY, 1)])])
