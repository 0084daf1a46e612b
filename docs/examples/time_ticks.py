import datetime as dt

import numpy as np

from udm.host import (
    INFINITY,
    TICKS_PER_SECOND,
    TimeConversionError,
    from_ticks,
    to_duration_ticks,
    to_ticks,
)

assert TICKS_PER_SECOND == 1_000_000  # 1 tick = 1 microsecond since 1970-01-01 UTC
assert to_ticks(dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000  # naive datetimes are UTC
assert to_ticks("2024-01-01T00:00:00+01:00") == 1_704_063_600_000_000
assert to_ticks(dt.date(1970, 1, 2)) == 86_400_000_000
assert to_ticks("inf") == INFINITY == 2**63 - 1
assert to_duration_ticks(dt.timedelta(milliseconds=5)) == 5_000
assert from_ticks(1_500_000) == dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=dt.UTC)

# Nanoseconds that are not whole microseconds cannot be represented: rejected, not truncated.
try:
    to_ticks(np.datetime64("2024-01-01T00:00:00.000000001"))
except TimeConversionError as exc:
    assert "sub-microsecond" in str(exc)
else:
    raise AssertionError("expected TimeConversionError")
