"""udm-patterns: each pattern with hand-computed matches, and queries by name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from udm.host import Cht, IntervalEvent, Stream, TumblingWindow, UdmInvocationError, evaluate
from udm.host.registry import get_registry

udm_patterns = pytest.importorskip(
    "udm_patterns", reason="install plugins/udm-patterns (make venv)"
)

W = TumblingWindow(100)


def points(values: list[Any], start: int = 0) -> list[IntervalEvent[Any]]:
    """Point events at start, start + 1, ... with the given payloads."""
    return [IntervalEvent(start + i, start + i + 1, v) for i, v in enumerate(values)]


def run(name: str, events: list[IntervalEvent[Any]], window: Any = W, **options: Any) -> Cht:
    return evaluate(events, window, get_registry().resolve(name), **options)


def test_every_udm_is_registered_under_patterns() -> None:
    names = [e.name for e in get_registry() if e.library == "patterns"]
    assert names == [
        "patterns.between",
        "patterns.double_bottom",
        "patterns.followed_by",
        "patterns.pct_change",
        "patterns.threshold_crossing",
    ]
    entry = get_registry().entry("patterns.double_bottom")
    assert entry.distribution == "udm-patterns" and entry.version == "0.1.0"
    assert entry.flavor == "time-sensitive non-incremental operator"
    assert "order_insensitive" not in entry.properties
    assert entry.signature == (
        "patterns.double_bottom(tolerance: float = 0.03, min_rebound: float = 0.0, "
        "field: str | None = None)"
    )


# ------------------------------------------------------------ threshold_crossing


def test_threshold_crossing_with_hysteresis() -> None:
    values = [29, 31, 29, 32, 27, 31]  # times 0..5
    got = run("patterns.threshold_crossing", points(values), args={"high": 30, "low": 28})
    assert got == Cht(
        [
            (1, 4, {"peak": 32, "readings": 3}),  # 29 at 2 is above low: still high
            (5, 100, {"peak": 31, "readings": 1}),  # open at the window's end
        ]
    )
    # without hysteresis (low = high) the dip to 29 ends the first interval
    got = run("patterns.threshold_crossing", points(values), args={"high": 30})
    assert got == Cht(
        [
            (1, 2, {"peak": 31, "readings": 1}),
            (3, 4, {"peak": 32, "readings": 1}),
            (5, 100, {"peak": 31, "readings": 1}),
        ]
    )


def test_threshold_crossing_per_window_and_fields() -> None:
    events = points([{"t": 35.0}, {"t": 20.0}], start=8)  # 8: high, 9: low
    events += points([{"t": 36.0}], start=12)
    got = run(
        "patterns.threshold_crossing",
        events,
        TumblingWindow(10),
        args={"high": 30.0, "low": 25.0, "field": "t"},
    )
    assert got == Cht(
        [(8, 9, {"peak": 35.0, "readings": 1}), (12, 20, {"peak": 36.0, "readings": 1})]
    )
    with pytest.raises(ValueError, match="low <= high, got low=31, high=30"):
        get_registry().resolve("patterns.threshold_crossing")(high=30, low=31)
    with pytest.raises(UdmInvocationError, match="pass field='<name>'"):
        run("patterns.threshold_crossing", events, args={"high": 30.0})


# ------------------------------------------------------------ followed_by


def test_followed_by_takes_the_earliest_b_within_the_bound() -> None:
    events = points(["A", "x", "B", "A", "B", "x", "x", "x", "x", "B"])  # times 0..9
    got = run("patterns.followed_by", events, args={"first": "A", "then": "B", "within": 3})
    match = {"first_start": 0, "first_end": 1, "then_start": 2, "then_end": 3}
    assert got == Cht(
        [
            (0, 3, match),
            (3, 5, {"first_start": 3, "first_end": 4, "then_start": 4, "then_end": 5}),
        ]
    )
    # a bound of 1 tick: only the A at 3 has its B soon enough
    got = run("patterns.followed_by", events, args={"first": "A", "then": "B", "within": 1})
    assert got == Cht([(3, 5, {"first_start": 3, "first_end": 4, "then_start": 4, "then_end": 5})])


def test_followed_by_predicates_fields_and_long_events() -> None:
    login = {"kind": "login", "user": "u"}
    buy = {"kind": "buy", "user": "u"}
    events = [IntervalEvent(10, 30, login), IntervalEvent(20, 21, buy), IntervalEvent(25, 26, buy)]
    got = run(
        "patterns.followed_by",
        events,
        args={"first": {"kind": "login"}, "then": lambda p: p["kind"] == "buy", "within": 10},
    )
    # the match keeps A's longer lifetime: [10, max(30, 21))
    assert got == Cht(
        [(10, 30, {"first_start": 10, "first_end": 30, "then_start": 20, "then_end": 21})]
    )
    # B must start strictly later: simultaneous starts do not match
    same = [IntervalEvent(5, 6, {"k": "a"}), IntervalEvent(5, 6, {"k": "b"})]
    assert (
        run(
            "patterns.followed_by",
            same,
            args={"first": "a", "then": "b", "within": 5, "field": "k"},
        )
        == Cht()
    )
    cls = get_registry().resolve("patterns.followed_by")
    assert cls(first=1, then=2, within=timedelta(seconds=2)).within == 2_000_000
    with pytest.raises(ValueError, match="positive duration"):
        cls(first=1, then=2, within=0)


def test_followed_by_default_policy_clips_to_the_window() -> None:
    # A at 8 and B at 12 are in different tumbling windows of 10: no match;
    # hopping windows of 10 every 5 see both in [5, 15)
    events = points(["A"], start=8) + points(["B"], start=12)
    assert (
        run(
            "patterns.followed_by",
            events,
            TumblingWindow(10),
            args={"first": "A", "then": "B", "within": 5},
        )
        == Cht()
    )
    from udm.host import HoppingWindow

    got = run(
        "patterns.followed_by",
        events,
        HoppingWindow(10, 5),
        args={"first": "A", "then": "B", "within": 5},
    )
    assert got == Cht(
        [(8, 13, {"first_start": 8, "first_end": 9, "then_start": 12, "then_end": 13})]
    )


# ------------------------------------------------------------ double_bottom


def test_double_bottom_the_docstring_example() -> None:
    got = run("patterns.double_bottom", points([10, 8, 9.5, 8.1, 10]), args={"tolerance": 0.05})
    assert got == Cht(
        [
            (
                0,
                5,
                {
                    "first_bottom": 8,
                    "peak": 9.5,
                    "second_bottom": 8.1,
                    "breakout": 10,
                    "first_bottom_at": 1,
                    "second_bottom_at": 3,
                },
            )
        ]
    )


def test_double_bottom_rejects_uneven_bottoms_and_failed_breakouts() -> None:
    # bottoms 8 and 7 differ by 12.5% > 5%: not a W
    assert (
        run("patterns.double_bottom", points([10, 8, 9.5, 7, 10]), args={"tolerance": 0.05})
        == Cht()
    )
    # the price falls below the second bottom (8.1) before passing the peak 9.5, so
    # 10-8-9.5-8.1 fails; the next candidate, 9.5-8.1-9-7.9 with breakout 10, is a W
    got = run(
        "patterns.double_bottom", points([10, 8, 9.5, 8.1, 9, 7.9, 10]), args={"tolerance": 0.05}
    )
    assert got == Cht(
        [
            (
                2,
                7,
                {
                    "first_bottom": 8.1,
                    "peak": 9,
                    "second_bottom": 7.9,
                    "breakout": 10,
                    "first_bottom_at": 3,
                    "second_bottom_at": 5,
                },
            ),
        ]
    )
    assert (
        run(
            "patterns.double_bottom",
            points([10, 8, 9.5, 8.1, 9, 7.9, 10]),
            args={"tolerance": 0.02},
        )
        == Cht()
    )
    # no breakout above the peak inside the window
    assert (
        run("patterns.double_bottom", points([10, 8, 9.5, 8.1, 9.4]), args={"tolerance": 0.05})
        == Cht()
    )
    # the rebound must be at least 10% of the bottoms: 8 -> 8.5 is not
    assert (
        run("patterns.double_bottom", points([10, 8, 8.5, 8, 9]), args={"min_rebound": 0.1})
        == Cht()
    )


def test_double_bottom_plateaus_and_two_ws_in_a_row() -> None:
    prices = [12, 10, 10, 11, 10, 12, 10.5, 11.5, 10.4, 13]
    #          H   B1 (plateau) M  B2 breakout=12 at 5; then H=12 B1=10.5 M=11.5 B2=10.4 -> 13
    got = run("patterns.double_bottom", points(prices), args={"tolerance": 0.02})
    assert got == Cht(
        [
            (
                0,
                6,
                {
                    "first_bottom": 10,
                    "peak": 11,
                    "second_bottom": 10,
                    "breakout": 12,
                    "first_bottom_at": 1,
                    "second_bottom_at": 4,
                },
            ),
            (
                5,
                10,
                {
                    "first_bottom": 10.5,
                    "peak": 11.5,
                    "second_bottom": 10.4,
                    "breakout": 13,
                    "first_bottom_at": 6,
                    "second_bottom_at": 8,
                },
            ),
        ]
    )


# ------------------------------------------------------------ UDFs


def test_udfs() -> None:
    pct = get_registry().resolve("patterns.pct_change")
    assert pct(8.0, 10.0) == 0.25
    with pytest.raises(ZeroDivisionError, match="old=0"):
        pct(0, 1.0)
    between = get_registry().resolve("patterns.between")
    assert [between(x, 1, 2) for x in (0.5, 1, 1.5, 2, 2.5)] == [False, True, True, True, False]


# ------------------------------------------------------------ queries by name

TICKS = [("X", i, p) for i, p in enumerate([10.0, 8.0, 9.5, 8.1, 10.0, 9.0])] + [
    ("Y", i, p) for i, p in enumerate([5.0, 4.0, 4.5, 4.02, 4.8, 4.3])
]
W_X = {"first_bottom": 8.0, "peak": 9.5, "second_bottom": 8.1, "breakout": 10.0}
W_Y = {"first_bottom": 4.0, "peak": 4.5, "second_bottom": 4.02, "breakout": 4.8}
AT = {"first_bottom_at": 1, "second_bottom_at": 3}
EXPECTED = {"X": Cht([(0, 5, W_X | AT)]), "Y": Cht([(0, 5, W_Y | AT)])}


def double_bottoms(stream: Stream) -> Stream:
    return (
        stream.group_apply("sym")
        .tumbling_window(10)
        .apply("patterns.double_bottom", value="price", tolerance=0.05)
    )


def test_double_bottom_by_name_on_the_reference_engine() -> None:
    stream = Stream.from_cht([(t, t + 1, {"sym": s, "price": p}) for s, t, p in TICKS])
    assert double_bottoms(stream).to_cht(engine="reference") == EXPECTED


@pytest.mark.spark
def test_double_bottom_by_name_on_spark(spark: Any) -> None:
    df = spark.createDataFrame(TICKS, "sym string, ts long, price double")
    out = double_bottoms(Stream.from_dataframe(df, start="ts", key="sym")).to_dataframe()
    assert out.columns == [
        "start",
        "end",
        "sym",
        "first_bottom",
        "peak",
        "second_bottom",
        "breakout",
        "first_bottom_at",
        "second_bottom_at",
    ]
    got: dict[str, list[Any]] = {}
    for r in out.collect():
        got.setdefault(r["sym"], []).append(
            (r["start"], r["end"], {k: r[k] for k in out.columns[3:]})
        )
    assert {k: Cht(v) for k, v in got.items()} == EXPECTED


def test_threshold_crossing_starting_before_the_window_is_clipped_to_it() -> None:
    """Found by a generated fixture: an event overlapping the window from the
    left started an interval before the window, which the clip policy rejected."""
    from udm.host import HoppingWindow

    events = [IntervalEvent(6, 14, 19), IntervalEvent(12, 13, 5)]
    got = run(
        "patterns.threshold_crossing", events, HoppingWindow(20, 10), args={"high": 15, "low": 8}
    )
    alarm = {"peak": 19, "readings": 1}
    assert got == Cht(
        [
            (6, 10, alarm),  # [-10, 10): still high at the window's end
            (6, 12, alarm),  # [0, 20)
            (10, 12, alarm),  # [10, 30): starts at the window's start
        ]
    )
