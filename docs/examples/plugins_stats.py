"""udm-stats by name: the same readings through several UDMs (in-process)."""

from decimal import Decimal

from udm.host import Cht, Cti, Host, Insert, Retract, Stream, TumblingWindow, cht_equal, output_cht
from udm.host.registry import get_registry

readings = [  # (start, end, payload): a thermostat's readings, each valid until the next
    (0, 4, {"room": "lab", "temp": 20.0}),
    (4, 6, {"room": "lab", "temp": 26.0}),
    (6, 10, {"room": "lab", "temp": 21.0}),
    (10, 20, {"room": "lab", "temp": 22.0}),
]
windows = Stream.from_cht(readings).tumbling_window(10)

query = windows.aggregate(
    median=("stats.median", "temp"),
    mean=("stats.mean", "temp"),
    p90=("stats.quantile", "temp", {"q": 0.9, "method": "inclusive"}),
    spread=("stats.variance", "temp"),
)
# the plan names each UDM with its value column and arguments
assert "p90 = quantile('temp', q=0.9, method='inclusive')" in query.explain()
summary = query.to_cht()
expected = Cht(
    [  # [0, 10) holds 20, 26 and 21; [10, 20) holds 22
        (0, 10, {"median": 21.0, "mean": 67 / 3, "p90": 25.0, "spread": 62 / 9}),
        (10, 20, {"median": 22.0, "mean": 22.0, "p90": 22.0, "spread": 0.0}),
    ]
)
assert cht_equal(summary, expected, rel_tol=1e-12), summary

# time-weighted: each reading weighs its lifetime inside the window (full clipping)
twa = windows.aggregate("stats.time_weighted_average", value="temp", input_clipping="full").to_cht()
assert twa == Cht([(0, 10, (20.0 * 4 + 26.0 * 2 + 21.0 * 4) / 10), (10, 20, 22.0)]), twa

# the paper's formula divides by the window's duration instead: [10, 20)
# holds 22.0 for all 10 ticks, and [0, 10) is covered fully, so both agree here
paper = windows.aggregate(
    "stats.time_weighted_average", value="temp", over="window", input_clipping="full"
).to_cht()
assert paper == twa, paper

# an operator: one output event per value
top = windows.apply("stats.top_k", value="temp", k=2).to_cht()
assert top == Cht([(0, 10, 26.0), (0, 10, 21.0), (10, 20, 22.0)]), top

# exact states: a retracted outlier leaves no trace in the incremental host

host = Host(TumblingWindow(10), get_registry().resolve("stats.mean"))
stream = [Insert(1, 0, 1, 0.1), Insert(2, 1, 2, 1e16), Retract(2, 1, 2, 1), Cti(10)]
assert output_cht(host.process_many(stream)) == [(0, 10, 0.1)]  # a float sum gives 0.0

# NaN sorts after every number, as in Spark: the median of 1, 2, 3, NaN
nan = float("nan")
median = Stream.from_cht([(i, i + 1, v) for i, v in enumerate([nan, 1.0, 2.0, 3.0])])
assert median.tumbling_window(10).aggregate("stats.median").to_cht() == [(0, 10, 2.5)]
# decimals (Spark's decimal columns): the mean is a float, the median a Decimal
prices = Stream.from_cht([(i, i + 1, Decimal(v)) for i, v in enumerate(["1.25", "2.50"])])
decimal_windows = prices.tumbling_window(10)
assert decimal_windows.aggregate("stats.mean").to_cht() == [(0, 10, 1.875)]
assert decimal_windows.aggregate("stats.median").to_cht() == [(0, 10, Decimal("1.875"))]
print(summary, twa, top, sep="\n")
