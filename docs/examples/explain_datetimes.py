from datetime import UTC, datetime, timedelta

from udm.host import Stream, from_ticks

eight = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
readings = [  # one-minute readings at 8:00, 8:20 and 8:50
    (eight + timedelta(minutes=m), eight + timedelta(minutes=m + 1), {"temp": temp})
    for m, temp in [(0, 20.0), (20, 22.0), (50, 21.0)]
]
query = (
    Stream.from_cht(readings)  # datetimes in: explain, plot and to_dataframe show datetimes
    .hopping_window(size=timedelta(hours=1), hop=timedelta(minutes=15))
    .aggregate("stats.mean", value="temp")
)
print(query.explain())

assert "  - window HoppingWindow(size=1h, hop=15m)" in query.explain().splitlines()
results = query.to_cht().sorted()  # in-process; to_cht is in ticks, from_ticks reads them
first, last = results[0], results[-1]
assert (from_ticks(first.start), from_ticks(first.end), first.payload) == (
    datetime(2026, 11, 24, 7, 15, tzinfo=UTC),
    datetime(2026, 11, 24, 8, 15, tzinfo=UTC),
    20.0,
)
assert (from_ticks(last.start), last.payload) == (datetime(2026, 11, 24, 8, 45, tzinfo=UTC), 21.0)
assert [e.payload for e in results] == [20.0, 21.0, 21.0, 21.0, 21.5, 21.0, 21.0]
