"""udm-patterns by name: alarms with hysteresis and a W in prices (in-process)."""

from udm.host import Cht, Stream

temps = [29, 31, 29, 32, 27, 31]  # one reading per tick from 0
alarms = (
    Stream.from_cht([(t, t + 1, v) for t, v in enumerate(temps)])
    .tumbling_window(10)
    .apply("patterns.threshold_crossing", high=30, low=28)
    .to_cht()
)
assert alarms == Cht(
    [
        (1, 4, {"peak": 32, "readings": 3}),  # 31 at 1 .. 27 at 4; 29 at 2 keeps it on
        (5, 10, {"peak": 31, "readings": 1}),  # still on when the window ends
    ]
), alarms

prices = [10.0, 8.0, 9.5, 8.1, 10.0, 9.8]
ws = (
    Stream.from_cht([(t, t + 1, p) for t, p in enumerate(prices)])
    .tumbling_window(10)
    .apply("patterns.double_bottom", tolerance=0.05)
    .to_cht()
)
((w,),) = [ws]
assert (w.start, w.end) == (0, 5)  # from the first high to the breakout
assert w.payload == {
    "first_bottom": 8.0,
    "peak": 9.5,
    "second_bottom": 8.1,
    "breakout": 10.0,
    "first_bottom_at": 1,
    "second_bottom_at": 3,
}

logins = [(0, 1, "login"), (2, 3, "view"), (3, 4, "buy"), (20, 21, "login")]
funnel = (
    Stream.from_cht(logins)
    .tumbling_window(100)
    .apply("patterns.followed_by", first="login", then="buy", within=5)
    .to_cht()
)
assert funnel == Cht(
    [(0, 4, {"first_start": 0, "first_end": 1, "then_start": 3, "then_end": 4})]
), funnel
print(alarms, ws, funnel, sep="\n")
