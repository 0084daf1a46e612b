from datetime import UTC, datetime

from udm.host import Cht, IntervalEvent

# Times may be ticks or datetimes (microseconds since 1970-01-01 UTC).
noon = datetime(2026, 11, 23, 12, tzinfo=UTC)
assert Cht([(noon, datetime(2026, 11, 23, 13, tzinfo=UTC), "a")]) == Cht(
    [IntervalEvent(1_795_435_200_000_000, 1_795_438_800_000_000, "a")]
)

# An event must end after it starts; the error names its position.
try:
    Cht([(1, 2, "ok"), (5, 3, "late end")])
except ValueError as err:
    assert str(err).startswith("CHT event #1 [5, 3) 'late end': end 3 is not after start 5")
else:
    raise AssertionError("accepted an event that ends before it starts")
