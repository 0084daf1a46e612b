"""udm-stats: each UDM with hand-computed results, and queries by registered name."""

from __future__ import annotations

import math
import statistics
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host import (
    Cht,
    Cti,
    Host,
    InputClipping,
    Insert,
    IntervalEvent,
    Retract,
    SnapshotWindow,
    Stream,
    TumblingWindow,
    UdmInvocationError,
    derive_cht,
    evaluate,
    output_cht,
)
from udm.host.registry import get_registry

udm_stats = pytest.importorskip("udm_stats", reason="install plugins/udm-stats (make venv)")

W = TumblingWindow(10)
# window [0, 10): 1, 5, 2, 8 (starts 0..3); window [10, 20): 3
SCALARS = [
    IntervalEvent(0, 1, 1.0),
    IntervalEvent(1, 2, 5.0),
    IntervalEvent(2, 3, 2.0),
    IntervalEvent(3, 4, 8.0),
    IntervalEvent(12, 13, 3.0),
]


def run(name: str, events: list[IntervalEvent[Any]] = SCALARS, **options: Any) -> Cht:
    return evaluate(events, W, get_registry().resolve(name), **options)


def test_every_udm_is_registered_under_stats() -> None:
    names = [e.name for e in get_registry() if e.library == "stats"]
    assert names == [
        "stats.distinct_count",
        "stats.ewma",
        "stats.max",
        "stats.mean",
        "stats.median",
        "stats.min",
        "stats.quantile",
        "stats.time_weighted_average",
        "stats.top_k",
        "stats.variance",
        "stats.zscore",
    ]
    entry = get_registry().entry("stats.variance")
    assert entry.distribution == "udm-stats" and entry.version == "0.1.0"
    assert entry.signature == "stats.variance(ddof: int = 0, field: str | None = None)"


def test_median_even_count_takes_the_mean_of_the_middle_two() -> None:
    assert run("stats.median") == Cht([(0, 10, 3.5), (10, 20, 3.0)])


def test_quantile_matches_statistics_quantiles() -> None:
    four = [IntervalEvent(i, i + 1, float(i + 1)) for i in range(4)]  # 1, 2, 3, 4
    assert run("stats.quantile", four, args={"q": 0.25}) == Cht([(0, 10, 1.25)])
    assert run("stats.quantile", four, args={"q": 0.25, "method": "inclusive"}) == Cht(
        [(0, 10, 1.75)]
    )
    # exclusive extrapolates past the data for small samples, like Python
    assert run("stats.quantile", four, args={"q": 0.9}) == Cht([(0, 10, 4.5)])
    assert statistics.quantiles([1.0, 2.0, 3.0, 4.0], n=10)[8] == 4.5
    assert statistics.quantiles([1.0, 2.0, 3.0, 4.0], n=4, method="inclusive")[0] == 1.75
    with pytest.raises(ValueError, match=r"0 < q < 1 .* method='exclusive', got 1.0"):
        run("stats.quantile", four, args={"q": 1.0})
    with pytest.raises(ValueError, match=r"q must be a number .*, got 'high'"):
        run("stats.quantile", four, args={"q": "high"})


def test_mean_and_variance_population_and_sample() -> None:
    assert run("stats.mean") == Cht([(0, 10, 4.0), (10, 20, 3.0)])
    # mean 4, squared deviations 9 + 1 + 4 + 16 = 30
    assert run("stats.variance") == Cht([(0, 10, 7.5), (10, 20, 0.0)])
    assert run("stats.variance", args={"ddof": 1}) == Cht([(0, 10, 10.0), (10, 20, None)])


def test_variance_remove_and_merge_are_exact_inverses() -> None:
    v = udm_stats.Variance()
    state = v.initial_state()
    for x in (1.0, 3.0, 5.0, 7.0):
        state = v.add(state, x)
    assert v.result(state) == 5.0
    assert v.result(v.remove(state, 7.0)) == pytest.approx(8 / 3, rel=1e-15)
    left = v.add(v.add(v.initial_state(), 1.0), 3.0)
    right = v.add(v.add(v.initial_state(), 5.0), 7.0)
    assert v.result(v.merge(left, right)) == 5.0
    assert udm_stats.Variance.properties.invertible and udm_stats.Variance.properties.mergeable


def test_min_max_are_mergeable_not_invertible() -> None:
    assert run("stats.min") == Cht([(0, 10, 1.0), (10, 20, 3.0)])
    assert run("stats.max") == Cht([(0, 10, 8.0), (10, 20, 3.0)])
    props = udm_stats.Max.properties
    assert (props.invertible, props.mergeable) == (False, True)


def test_top_k_and_deterministic_ties() -> None:
    assert run("stats.top_k", args={"k": 2}) == Cht([(0, 10, 8.0), (0, 10, 5.0), (10, 20, 3.0)])
    rows = [
        IntervalEvent(0, 1, {"id": "a", "v": 5}),
        IntervalEvent(1, 2, {"id": "b", "v": 5}),
        IntervalEvent(2, 3, {"id": "c", "v": 1}),
    ]
    assert run("stats.top_k", rows, args={"k": 1, "field": "v"}) == Cht(
        [(0, 10, {"id": "a", "v": 5})]
    )


def test_distinct_count() -> None:
    events = [IntervalEvent(i, i + 1, v) for i, v in enumerate([1, 5, 1, 8])]
    assert run("stats.distinct_count", events) == Cht([(0, 10, 3)])


def test_time_weighted_average_depends_on_clipping() -> None:
    events = [IntervalEvent(0, 6, 2.0), IntervalEvent(6, 16, 4.0)]
    # unclipped: (2*6 + 4*10) / 16; clipped to [0, 10): (2*6 + 4*4) / 10
    assert run("stats.time_weighted_average", events) == Cht([(0, 10, 3.25), (10, 20, 4.0)])
    assert run("stats.time_weighted_average", events, input_clipping=InputClipping.FULL) == Cht(
        [(0, 10, 2.8), (10, 20, 4.0)]
    )


def test_time_weighted_average_of_endless_events_is_the_limit() -> None:
    """An endless event outweighs every finite lifetime: over the events the
    result is the mean of the endless ones' values (before, it raised unless
    clipped, so speculative output over an open edge event failed)."""
    inf = 2**63 - 1
    events = [IntervalEvent(0, inf, 2.0), IntervalEvent(3, 5, 10.0), IntervalEvent(4, inf, 5.0)]
    assert run("stats.time_weighted_average", events, watermark=10) == Cht([(0, 10, 3.5)])
    clipped = run("stats.time_weighted_average", events, input_clipping="right", watermark=10)
    assert clipped == Cht([(0, 10, (2.0 * 10 + 10.0 * 2 + 5.0 * 6) / 18)])
    # the paper's formula over a window that ends: infinite weight, refused
    with pytest.raises(UdmInvocationError, match="never ends in the window \\[0, 10\\)"):
        run("stats.time_weighted_average", events, args={"over": "window"}, watermark=10)
    # snapshot windows over edge events: the last window [6, inf) holds the
    # two open readings, each covering it
    edges = [IntervalEvent(0, 4, 2.0), IntervalEvent(4, inf, 6.0), IntervalEvent(6, inf, 1.0)]
    snap = SnapshotWindow()
    twa = get_registry().resolve("stats.time_weighted_average")
    assert evaluate(edges, snap, twa, input_clipping="full") == Cht(
        [(0, 4, 2.0), (4, 6, 6.0), (6, inf, 3.5)]
    )
    assert evaluate(edges, snap, twa, input_clipping="full", args={"over": "window"}) == Cht(
        [(0, 4, 2.0), (4, 6, 6.0), (6, inf, 7.0)]
    )


def test_time_weighted_average_follows_a_signal_of_edge_events_live() -> None:
    """The classic query: a sensor's readings as edge events (each open until
    the next one ends it), snapshot windows, full clipping. Before, the host
    failed at the first reading: computing the open window [0, inf) raised
    (an event that never ends). Its output CHT now equals the reference's."""
    inf = 2**63 - 1
    stream: list[Any] = [Insert("r1", 0, inf, 20.0)]
    stream += [Retract("r1", 0, inf, 10), Insert("r2", 10, inf, 22.0)]
    stream += [Retract("r2", 10, inf, 15), Insert("r3", 15, inf, 21.0), Cti(15)]
    twa = get_registry().resolve("stats.time_weighted_average")
    for consistency in ("speculative", "conservative"):
        host = Host(SnapshotWindow(), twa, input_clipping="full", consistency=consistency)
        out = host.process_many(stream)
        # r2's end may still be extended at CTI 15: only the speculative host
        # outputs [10, 15) already
        done = [(0, 10, 20.0), (10, 15, 22.0)] if consistency == "speculative" else [(0, 10, 20.0)]
        assert output_cht(out) == Cht(done), consistency
        out += host.flush()
        assert output_cht(out) == Cht([(0, 10, 20.0), (10, 15, 22.0), (15, inf, 21.0)])
        assert output_cht(out) == evaluate(
            derive_cht(stream)[0], SnapshotWindow(), twa, input_clipping="full"
        )


def test_ewma_follows_start_order() -> None:
    # s = 1; 0.5*5 + 0.5*1 = 3; 0.5*2 + 0.5*3 = 2.5; 0.5*8 + 0.5*2.5 = 5.25
    assert run("stats.ewma") == Cht([(0, 10, 5.25), (10, 20, 3.0)])
    assert udm_stats.ewma.properties.order_insensitive is False


def test_field_picks_from_mapping_payloads_and_errors_say_how() -> None:
    rows = [IntervalEvent(i, i + 1, {"temp": t, "site": "x"}) for i, t in enumerate([4, 1, 3])]
    assert run("stats.median", rows, args={"field": "temp"}) == Cht([(0, 10, 3)])
    with pytest.raises(UdmInvocationError, match=r"is a mapping; pass field='<name>'"):
        run("stats.median", rows)
    with pytest.raises(
        UdmInvocationError, match=r"no field 'tmp'; its fields are \['site', 'temp'\]"
    ):
        run("stats.mean", rows, args={"field": "tmp"})


def test_zscore_is_a_udf() -> None:
    assert get_registry().resolve("stats.zscore")(7.0, 5.0, 2.0) == 1.0


def test_query_by_name() -> None:
    got = (
        Stream.from_cht([(0, 1, 1.0), (1, 2, 5.0), (2, 3, 2.0), (3, 4, 8.0), (12, 13, 3.0)])
        .tumbling_window(10)
        .aggregate("stats.median")
        .to_cht(engine="reference")
    )
    assert got == Cht([(0, 10, 3.5), (10, 20, 3.0)])
    rows = [(0, 1, {"temp": 1.0}), (1, 2, {"temp": 5.0}), (2, 3, {"temp": 2.0})]
    got = (
        Stream.from_cht(rows)
        .tumbling_window(10)
        .aggregate(med=("stats.median", "temp"), q=("stats.quantile", "temp", {"q": 0.5}))
        .to_cht(engine="reference")
    )
    assert got == Cht([(0, 10, {"med": 2.0, "q": 2.0})])


def test_quantile_takes_q_exactly() -> None:
    # q was rounded to a fraction with a denominator of at most 10**6: near 1
    # the inclusive cut point fell past the data (IndexError), near 0 it was 0
    five = [IntervalEvent(i, i + 1, float(i + 1)) for i in range(5)]  # 1..5
    inclusive = {"method": "inclusive"}
    # numpy.quantile(1..5, q, method="linear") and Spark's percentile give
    # 4.999999600000001 (binary q, float arithmetic); q = 9999999/10**7
    # exactly gives 1 + 4q = 4.9999996, rounded once
    assert run("stats.quantile", five, args={"q": 0.9999999, **inclusive}) == Cht(
        [(0, 10, 4.9999996)]
    )
    assert run("stats.quantile", five, args={"q": 1e-7, **inclusive}) == Cht([(0, 10, 1.0000004)])
    big = [IntervalEvent(0, 1, float(v)) for v in range(1_000_001)]
    assert run("stats.quantile", big, args={"q": 0.3333333, **inclusive}) == Cht(
        [(0, 10, 333333.3)]
    )
    # inclusive takes the ends of [0, 1], as numpy and Spark do
    assert run("stats.quantile", five, args={"q": 0, **inclusive}) == Cht([(0, 10, 1.0)])
    assert run("stats.quantile", five, args={"q": 1, **inclusive}) == Cht([(0, 10, 5.0)])


NAN = float("nan")


@pytest.mark.parametrize(
    "values", [[NAN, 1.0, 2.0, 3.0], [1.0, NAN, 2.0, 3.0], [1.0, 2.0, 3.0, NAN]], ids=str
)
def test_nan_sorts_after_every_number_wherever_it_arrives(values: list[float]) -> None:
    # as Spark orders NaN: median 2.5 (of 1, 2, 3, NaN), min 1, max NaN
    events = [IntervalEvent(i, i + 1, v) for i, v in enumerate(values)]
    assert run("stats.median", events) == Cht([(0, 10, 2.5)])
    assert run("stats.quantile", events, args={"q": 0.5, "method": "inclusive"}) == Cht(
        [(0, 10, 2.5)]
    )
    assert run("stats.min", events) == Cht([(0, 10, 1.0)])
    (out,) = run("stats.max", events)
    assert out.payload != out.payload
    (top,) = run("stats.top_k", events, args={"k": 1})
    assert top.payload != top.payload
    mn, mx = udm_stats.Min(), udm_stats.Max()
    assert mn.merge(NAN, 1.0) == mn.merge(1.0, NAN) == 1.0
    assert mx.merge(NAN, 1.0) != mx.merge(NAN, 1.0)  # NaN either way


def test_distinct_count_counts_nan_once_even_after_pickling() -> None:
    import pickle

    d = udm_stats.DistinctCount()
    state = d.add(d.add(d.add(d.initial_state(), float("nan")), float("nan")), 1.0)
    assert d.result(state) == 2
    state = pickle.loads(pickle.dumps(state))
    state = d.remove(d.add(state, float("nan")), float("nan"))
    assert d.result(state) == 2
    assert d.result(d.remove(d.remove(state, NAN), NAN)) == 1


@pytest.mark.parametrize(
    "name", ["stats.mean", "stats.median", "stats.min", "stats.distinct_count", "stats.quantile"]
)
def test_a_null_value_is_refused_with_advice(name: str) -> None:
    events: list[IntervalEvent[Any]] = [IntervalEvent(0, 1, 1.0), IntervalEvent(1, 2, None)]
    with pytest.raises(UdmInvocationError, match=r"got a null \(None\) value; filter nulls out"):
        run(name, events)


def test_variance_beyond_the_float_range_is_inf() -> None:
    v = udm_stats.Variance()
    state = v.add(v.add(v.initial_state(), 1e200), -1e200)
    assert v.result(state) == float("inf")


def test_time_weighted_average_over_the_window_is_the_papers() -> None:
    # the concepts page's example: [2, 6) 10.0 and [6, 15) 20.0, clipped fully;
    # MyTimeWeightedAverage divides by the window's duration
    events = [IntervalEvent(2, 6, 10.0), IntervalEvent(6, 15, 20.0)]
    paper = run(
        "stats.time_weighted_average", events, args={"over": "window"}, input_clipping="full"
    )
    assert paper == Cht([(0, 10, 12.0), (10, 20, 10.0)])
    covered = run("stats.time_weighted_average", events, input_clipping="full")
    assert covered == Cht([(0, 10, 15.0), (10, 20, 20.0)])  # (40 + 80) / 8; 100 / 5
    with pytest.raises(ValueError, match="over= must be 'events' or 'window', got 'time'"):
        udm_stats.TimeWeightedAverage(over="time")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: get_registry().resolve("stats.ewma")(alpha=None), "alpha must be in"),
        (
            lambda: get_registry().resolve("patterns.threshold_crossing")(high="30"),
            "threshold_crossing needs high= a number, got '30'",
        ),
        (
            lambda: get_registry().resolve("patterns.double_bottom")(tolerance=float("nan")),
            "double_bottom needs tolerance= a number, got nan",
        ),
    ],
)
def test_parameters_that_are_not_numbers_are_named(make: Any, message: str) -> None:
    with pytest.raises((ValueError, UdmInvocationError), match=message):
        udm = make()
        evaluate([IntervalEvent(0, 1, 1.0)], W, udm)


FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e6, 1e6),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 1e-300]),
    st.integers(-(2**60), 2**60),
)
INVERTIBLE = [
    (udm_stats.Mean, {}, "none"),
    (udm_stats.Variance, {"ddof": 1}, "none"),
    (udm_stats.TimeWeightedAverage, {}, "full"),
    (udm_stats.TimeWeightedAverage, {"over": "window"}, "full"),
]


@pytest.mark.parametrize("udm, args, clipping", INVERTIBLE, ids=lambda x: str(x))
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "general"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_invertible_aggregates_equal_the_reference_exactly_after_retractions(
    udm: Any, args: dict[str, Any], clipping: str, fast: bool, data: Any
) -> None:
    # Retractions make the host remove() values (huge, tiny, NaN, inf) that
    # the reference never saw: the results must still be exactly equal.
    values = data.draw(st.lists(FLOATS, min_size=1, max_size=12), label="values")
    stream: list[Any] = []
    for i, v in enumerate(values):
        stream.append(Insert(i, i, i + 3, v))
    for i in data.draw(st.lists(st.sampled_from(range(len(values))), unique=True), label="gone"):
        new_end = data.draw(st.sampled_from([i, i + 1, i + 2, i + 7]), label="new_end")
        stream.append(Retract(i, i, i + 3, new_end))
    window = TumblingWindow(8)
    instance = udm(**args)
    expected = evaluate(derive_cht(stream)[0], window, instance, input_clipping=clipping)
    host = Host(window, instance, input_clipping=clipping, fast_path=fast)
    out = host.process_many(stream) + host.flush()
    assert output_cht(out) == expected


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: udm_stats.quantile(q=2), "quantile q must be a number"),
        (lambda: udm_stats.top_k(k=0), "top_k needs a positive integer k, got 0"),
        (lambda: udm_stats.ewma(alpha=1.5), r"ewma alpha must be in \(0, 1\], got 1.5"),
    ],
)
def test_bad_parameters_fail_when_the_udm_is_created(make: Any, message: str) -> None:
    # not at the first window, which an empty stream never reaches
    with pytest.raises(ValueError, match=message):
        make()


def test_decimal_values_are_numbers() -> None:
    """Spark's decimal columns arrive as ``Decimal``, which is no
    ``numbers.Real``: mean, variance, the time-weighted average and ewma
    refused it ("takes numbers"; ewma with a bare operand error). They now
    take it as the float it is closest to; order statistics keep it."""
    from decimal import Decimal

    events = [IntervalEvent(e.start, e.end, Decimal(str(e.payload))) for e in SCALARS]
    # window [0, 10): 1, 5, 2, 8; window [10, 20): 3
    assert run("stats.mean", events) == Cht([(0, 10, 4.0), (10, 20, 3.0)])
    assert run("stats.variance", events) == Cht([(0, 10, 7.5), (10, 20, 0.0)])
    assert run("stats.time_weighted_average", events) == Cht([(0, 10, 4.0), (10, 20, 3.0)])
    # 1, then .5*5 + .5*1 = 3, .5*2 + .5*3 = 2.5, .5*8 + .5*2.5 = 5.25
    assert run("stats.ewma", events) == Cht([(0, 10, 5.25), (10, 20, 3.0)])
    assert run("stats.median", events) == Cht([(0, 10, Decimal("3.5")), (10, 20, Decimal("3.0"))])


def events_of(values: list[Any]) -> list[IntervalEvent[Any]]:
    return [IntervalEvent(i % 10, i % 10 + 1, v) for i, v in enumerate(values)]


def one(name: str, values: list[Any], **args: Any) -> Any:
    """The result of one window [0, 10) holding ``values``."""
    (out,) = run(name, events_of(values), args=args or None)
    assert (out.start, out.end) == (0, 10)
    return out.payload


def exact_quantile(values: list[float], q: str, method: str) -> Fraction:
    """The cut point of statistics.quantiles in rational arithmetic, for q
    written as a decimal string."""
    data = sorted(Fraction(v) for v in values)
    qq, ld = Fraction(q), len(data)
    if method == "inclusive":
        j = math.floor(qq * (ld - 1))
        t = qq * (ld - 1) - j
        return data[j] if not t else data[j] + (data[j + 1] - data[j]) * t
    j = max(1, min(ld - 1, math.floor(qq * (ld + 1))))
    t = qq * (ld + 1) - j
    return data[j - 1] + (data[j] - data[j - 1]) * t


def rounded(x: Fraction) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def test_quantile_and_median_near_the_float_range_are_finite() -> None:
    # a*(n - delta) + b*delta overflowed with n = Fraction(q).denominator
    # (up to 2**55): the quantile of three 1e300 was inf
    assert one("stats.quantile", [1e300] * 3, q=0.3, method="inclusive") == 1e300
    assert one("stats.quantile", [1e295, 2e295], q=0.1, method="inclusive") == 1.1e295
    assert float(Fraction(1e295) + (Fraction(2e295) - Fraction(1e295)) / 10) == 1.1e295
    assert one("stats.quantile", [1e308, 1e308], q=0.5, method="inclusive") == 1e308
    # the median's midpoint, exact: statistics.median gives inf here
    assert statistics.median([1e308, 1e308]) == math.inf
    assert one("stats.median", [1e308, 1e308]) == 1e308
    assert one("stats.median", [1.7e308, 1.79e308]) == 1.745e308
    assert one("stats.median", [-1.7e308, -1.79e308]) == -1.745e308
    # infinities and NaN as the neighbours: their limits
    assert one("stats.median", [1.0, math.inf]) == math.inf
    assert one("stats.median", [-math.inf, -1e300]) == -math.inf
    assert math.isnan(one("stats.median", [-math.inf, math.inf]))
    assert math.isnan(one("stats.median", [1.0, math.nan]))
    assert one("stats.quantile", [-1e300, math.inf], q=0.5, method="inclusive") == math.inf


def test_quantile_takes_q_as_written_and_rounds_once() -> None:
    c = [29.1, 91.0, 80.2, 89.0, 65.2, 66.6, 86.9, 64.1, 18.7, 7.1]
    # was 92.11999999999998 (q = the binary float nearest 0.96)
    assert one("stats.quantile", c, q=0.96) == 92.12 == statistics.quantiles(c, n=100)[95]
    assert rounded(exact_quantile(c, "0.96", "exclusive")) == 92.12
    # exact where statistics' float formula rounds twice
    d = [21.0, 38.0, 47.2, 48.8, 76.1]
    assert statistics.quantiles(d, n=10, method="inclusive")[2] == 39.839999999999996
    assert one("stats.quantile", d, q=0.3, method="inclusive") == 39.84
    assert rounded(exact_quantile(d, "0.3", "inclusive")) == 39.84
    # a numpy float q is read the same way
    np = pytest.importorskip("numpy")
    assert one("stats.quantile", c, q=np.float64(0.96)) == 92.12


def test_quantile_of_decimals_is_a_decimal_rounded_once() -> None:
    ds = [Decimal(i) for i in range(11)]
    # was Decimal('1.000000000000000055511151231'); statistics and Spark give 1
    got = one("stats.quantile", ds, q=0.1, method="inclusive")
    assert isinstance(got, Decimal) and str(got) == "1"
    assert got == statistics.quantiles(ds, n=10, method="inclusive")[0]
    got = one("stats.quantile", ds, q=0.15, method="inclusive")
    assert isinstance(got, Decimal) and str(got) == "1.5"
    # exclusive: q = 0.3 of 0..10 is at position 0.3 * 12 = 3.6, between 2 and 3
    assert str(one("stats.quantile", ds, q=0.3)) == "2.6"
    # rounded once, to the current context
    from decimal import localcontext

    with localcontext() as ctx:
        ctx.prec = 3
        thirds = [Decimal(0), Decimal(1)]
        assert str(one("stats.quantile", thirds, q=1 / 3, method="inclusive")) == "0.333"
        assert str(one("stats.median", [Decimal("1.23"), Decimal("1.24")])) == "1.24"


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(-100, 100)),
        min_size=2,
        max_size=10,
    ),
    cents=st.integers(1, 99),
    method=st.sampled_from(["exclusive", "inclusive"]),
)
def test_quantile_is_the_exact_interpolation_rounded_once(
    values: list[float], cents: int, method: str
) -> None:
    q = f"0.{cents:02d}"
    assert one("stats.quantile", values, q=float(q), method=method) == rounded(
        exact_quantile(values, q, method)
    )


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(-(10**6), 10**6), min_size=2, max_size=10),
    n=st.sampled_from([2, 4, 5, 8, 10, 20, 100]),  # i/n a finite decimal
    method=st.sampled_from(["exclusive", "inclusive"]),
)
def test_quantile_of_ints_equals_statistics_quantiles(
    values: list[int], n: int, method: Literal["exclusive", "inclusive"]
) -> None:
    # for ints statistics' formula rounds only in its final division (a cut
    # point on a value is that int here, the equal float there)
    cuts = statistics.quantiles(values, n=n, method=method)
    for i in range(1, n):
        got = one("stats.quantile", values, q=i / n, method=method)
        assert got == cuts[i - 1], (i, n)
    assert one("stats.median", values) == statistics.median(values)


def test_empty_windows_with_emit_empty() -> None:
    # windows [0, 10) and [20, 30) hold 1.0; [10, 20) is empty
    events = [IntervalEvent(0, 1, 1.0), IntervalEvent(25, 26, 1.0)]
    results = {
        ("stats.distinct_count", None): 0,
        ("stats.time_weighted_average", "window"): 0.0,
        ("stats.time_weighted_average", "events"): None,
        ("stats.mean", None): None,
        ("stats.median", None): None,
    }
    for (name, over), empty in results.items():
        args = {"over": over} if over else None
        out = run(name, events, args=args, emit_empty=True)
        assert [(e.start, e.payload) for e in out if e.start == 10] == [(10, empty)], name
    assert udm_stats.DistinctCount.properties.empty_preserving is False
    assert "empty_preserving" not in udm_stats.DistinctCount.properties.enabled()
    assert udm_stats.Mean.properties.empty_preserving is True
    assert "``distinct_count`` returns\n0" in udm_stats.__doc__


def test_order_statistics_interpolate_numbers_only() -> None:
    assert one("stats.median", ["a", "c", "b"]) == "b"  # a middle value: any order
    with pytest.raises(UdmInvocationError, match=r"stats.median takes numbers, got 'a' \(str\)"):
        one("stats.median", ["a", "b"])
    with pytest.raises(UdmInvocationError, match=r"stats.quantile takes numbers, got 'a'"):
        one("stats.quantile", ["a", "b"], q=0.25)


def test_numpy_bools_are_numbers_like_pythons() -> None:
    np = pytest.importorskip("numpy")
    values = [np.True_, np.False_, True]
    assert one("stats.median", [np.False_, np.True_]) == 0.5
    assert one("stats.mean", values) == 2 / 3 == one("stats.mean", [True, False, True])
    assert one("stats.variance", values) == 2 / 9
    assert one("stats.ewma", values) == 0.75  # 1, then .5*0 + .5*1, then .5*1 + .5*.5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: udm_stats.top_k(k=True), r"k, got True \(a bool, not an integer\)"),
        (lambda: udm_stats.top_k(k=2.0), r"k, got 2.0 \(a float, not an integer\)"),
        (lambda: udm_stats.Variance(ddof=True), r"got True \(a bool, not an integer\)"),
        (lambda: udm_stats.Variance(ddof=1.0), r"got 1.0 \(a float, not an integer\)"),
        (lambda: udm_stats.Variance(ddof=2), r"0 \(population\) or 1 \(sample\), got 2$"),
    ],
)
def test_integer_parameters_refuse_bools(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_integer_parameters_take_numpy_integers() -> None:
    np = pytest.importorskip("numpy")
    assert run("stats.top_k", args={"k": np.int64(1)}) == Cht([(0, 10, 8.0), (10, 20, 3.0)])
    assert udm_stats.Variance(ddof=np.int64(1)).ddof == 1
