"""Time conversion: every accepted input type maps to exact microsecond ticks,
and anything lossy or meaningless is rejected with a message saying why."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from udm.host import (
    INFINITY,
    MIN_TIME,
    TICKS_PER_SECOND,
    TimeConversionError,
    from_ticks,
    to_duration_ticks,
    to_ticks,
)
from udm.host.time import format_duration, format_time, iso_ticks, iso_time

# 2024-01-01T00:00:00Z in microseconds since the epoch.
NEW_YEAR_2024 = 1_704_067_200 * TICKS_PER_SECOND
# 2023-11-14T22:13:20Z
T_1_7E9 = 1_700_000_000 * TICKS_PER_SECOND


class TestInts:
    def test_int_is_ticks_unchanged(self) -> None:
        assert to_ticks(0) == 0
        assert to_ticks(-5) == -5
        assert to_ticks(NEW_YEAR_2024) == NEW_YEAR_2024

    def test_int_range_limits(self) -> None:
        assert to_ticks(INFINITY) == INFINITY
        assert to_ticks(MIN_TIME) == MIN_TIME
        with pytest.raises(TimeConversionError, match=r"9223372036854775808 is outside"):
            to_ticks(2**63)
        with pytest.raises(TimeConversionError, match="outside the int64 tick range"):
            to_ticks(MIN_TIME - 1)

    def test_numpy_integer(self) -> None:
        assert to_ticks(np.int64(42)) == 42
        assert type(to_ticks(np.int64(42))) is int

    def test_whole_float_and_infinite_float(self) -> None:
        assert to_ticks(3.0) == 3
        assert to_ticks(float("inf")) == INFINITY

    def test_fractional_float_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(1.5)
        assert "1.5" in str(err.value)
        assert "round" in str(err.value)

    @pytest.mark.parametrize("value", [True, False])
    def test_bools_rejected(self, value: bool) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(value)
        assert f"{value} is a bool" in str(err.value)
        assert "int ticks" in str(err.value)


class TestDatetimes:
    def test_naive_datetime_is_utc(self) -> None:
        assert to_ticks(dt.datetime(2024, 1, 1)) == NEW_YEAR_2024
        assert to_ticks(dt.datetime(1970, 1, 1, 0, 0, 1, 7)) == 1_000_007

    def test_aware_datetime_uses_its_offset(self) -> None:
        plus_one = dt.timezone(dt.timedelta(hours=1))
        assert to_ticks(dt.datetime(2024, 1, 1, 1, tzinfo=plus_one)) == NEW_YEAR_2024
        assert to_ticks(dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) == NEW_YEAR_2024

    def test_before_epoch_is_negative(self) -> None:
        assert to_ticks(dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1

    def test_date_is_midnight_utc(self) -> None:
        assert to_ticks(dt.date(2024, 1, 1)) == NEW_YEAR_2024

    def test_pandas_timestamp(self) -> None:
        assert to_ticks(pd.Timestamp("2024-01-01T00:00:00.000001")) == NEW_YEAR_2024 + 1
        assert to_ticks(pd.Timestamp("2024-01-01T02:00:00+02:00")) == NEW_YEAR_2024
        # whole microseconds expressed in nanoseconds are fine
        assert to_ticks(pd.Timestamp(NEW_YEAR_2024 * 1000 + 5000, unit="ns")) == NEW_YEAR_2024 + 5

    def test_pandas_sub_microsecond_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(pd.Timestamp("2024-01-01T00:00:00.000000001"))
        msg = str(err.value)
        assert "2024-01-01 00:00:00.000000001" in msg
        assert "sub-microsecond" in msg
        assert "floor('us')" in msg

    def test_iso_string_sub_microsecond_rejected(self) -> None:
        # fromisoformat drops digits beyond microseconds; two distinct
        # nanosecond times would merge into one tick
        with pytest.raises(TimeConversionError, match="sub-microsecond precision"):
            to_ticks("2024-01-01T00:00:00.000000001Z")
        assert to_ticks("2024-01-01T00:00:00.000005000Z") == NEW_YEAR_2024 + 5
        assert to_ticks("2024-01-01 00:00:00,000005") == NEW_YEAR_2024 + 5

    def test_numpy_datetime64_any_unit(self) -> None:
        assert to_ticks(np.datetime64("2024-01-01T00:00:00.000001")) == NEW_YEAR_2024 + 1
        assert to_ticks(np.datetime64("2024-01-01", "D")) == NEW_YEAR_2024
        assert to_ticks(np.datetime64("2024-01-01T00:00:00.000002000", "ns")) == NEW_YEAR_2024 + 2

    def test_numpy_sub_microsecond_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(np.datetime64("2024-01-01T00:00:00.000000001"))
        assert "np.datetime64('2024-01-01T00:00:00.000000001')" in str(err.value)
        assert "value.astype('datetime64[us]')" in str(err.value)

    def test_numpy_far_dates_are_exact(self) -> None:
        # beyond the 1678-2262 range of nanosecond int64
        assert to_ticks(np.datetime64("3000-01-01")) == to_ticks(dt.datetime(3000, 1, 1))
        assert to_ticks(np.datetime64("3000-01-01")) == 32_503_680_000 * TICKS_PER_SECOND
        assert to_ticks(np.datetime64("1500-01-01T00:00:00.000001")) == to_ticks(
            dt.datetime(1500, 1, 1, 0, 0, 0, 1)
        )
        assert to_ticks(pd.Timestamp("3000-01-01")) == 32_503_680_000 * TICKS_PER_SECOND

    @pytest.mark.parametrize("nat", [np.datetime64("NaT"), pd.NaT])
    def test_nat_rejected(self, nat: object) -> None:
        """pandas' NaT was reported as having sub-microsecond precision."""
        with pytest.raises(TimeConversionError) as err:
            to_ticks(nat)
        assert str(err.value) == (
            "NaT (not a time) cannot be converted to ticks; drop or fill missing times first"
        )


class TestArrow:
    @pytest.mark.parametrize(
        ("unit", "raw"),
        [
            ("s", 1_700_000_000),
            ("ms", 1_700_000_000_000),
            ("us", 1_700_000_000_000_000),
            ("ns", 1_700_000_000_000_000_000),
        ],
    )
    def test_every_unit(self, unit: str, raw: int) -> None:
        assert to_ticks(pa.scalar(raw, type=pa.timestamp(unit))) == T_1_7E9
        assert to_ticks(pa.scalar(raw, type=pa.timestamp(unit, tz="UTC"))) == T_1_7E9

    def test_arrow_timezone_does_not_shift_the_instant(self) -> None:
        # Arrow stores UTC instants; the tz is only for display.
        scalar = pa.scalar(1_700_000_000_000, type=pa.timestamp("ms", tz="Asia/Tokyo"))
        assert to_ticks(scalar) == T_1_7E9

    def test_arrow_nanoseconds_below_a_microsecond_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(pa.scalar(1_700_000_000_000_000_001, type=pa.timestamp("ns")))
        assert "1700000000000000001 ns" in str(err.value)
        assert "Round the value to microseconds" in str(err.value)

    def test_arrow_null_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks(pa.scalar(None, type=pa.timestamp("ms")))
        assert "null Arrow timestamp" in str(err.value)
        assert "missing" in str(err.value)


class TestStrings:
    def test_iso_strings(self) -> None:
        assert to_ticks("2024-01-01T00:00:00") == NEW_YEAR_2024
        assert to_ticks("2024-01-01T02:00:00+02:00") == NEW_YEAR_2024
        assert to_ticks("2024-01-01 00:00:00.000003") == NEW_YEAR_2024 + 3
        assert to_ticks("2024-01-01") == NEW_YEAR_2024

    @pytest.mark.parametrize("text", ["inf", "INF", " Infinity ", "infinity"])
    def test_infinity_spellings(self, text: str) -> None:
        assert to_ticks(text) == INFINITY

    @pytest.mark.parametrize("text", ["-inf", "-INF", " -Infinity ", "+inf"])
    def test_minus_infinity_is_the_beginning_of_time(self, text: str) -> None:
        want = INFINITY if text.startswith("+") else MIN_TIME
        assert to_ticks(text) == want
        assert to_ticks(float(text)) == want
        assert format_time(want) == text.strip().lower().lstrip("+").replace("infinity", "inf")

    def test_garbage_string_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks("yesterday")
        assert "'yesterday'" in str(err.value)
        assert "ISO 8601" in str(err.value)

    def test_unknown_type_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_ticks([1, 2])
        msg = str(err.value)
        assert "[1, 2] (list)" in msg
        assert "use int ticks, datetime, pandas.Timestamp" in msg


class TestFromTicks:
    def test_known_values(self) -> None:
        assert from_ticks(0) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        assert from_ticks(-1) == dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC)
        assert from_ticks(NEW_YEAR_2024 + 1) == dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)

    def test_infinity_is_datetime_max(self) -> None:
        assert from_ticks(INFINITY) == dt.datetime.max.replace(tzinfo=dt.UTC)
        assert from_ticks(MIN_TIME) == dt.datetime.min.replace(tzinfo=dt.UTC)

    @pytest.mark.parametrize(
        "ticks", [0, 1, -1, NEW_YEAR_2024, NEW_YEAR_2024 + 999_999, -86_400_000_001]
    )
    def test_round_trip(self, ticks: int) -> None:
        back = from_ticks(ticks)
        assert back.tzinfo is dt.UTC
        assert to_ticks(back) == ticks
        assert to_ticks(pd.Timestamp(back)) == ticks
        assert to_ticks(back.isoformat()) == ticks

    def test_format_time(self) -> None:
        assert format_time(INFINITY) == "inf"
        assert format_time(MIN_TIME) == "-inf"
        assert format_time(17) == "17"
        # an invalid time beyond the ends is shown as it is, not as "-inf"
        # (a message said "sync time -inf is before the latest CTI -inf")
        assert format_time(-(2**63)) == "-9223372036854775808"
        assert format_time(2**63) == "9223372036854775808"

    def test_iso_ticks_is_exact_for_every_tick(self) -> None:
        """Spark writes the tick before INFINITY (the year 294247) as
        below; Python's datetime, which stops at 9999, cannot hold it."""
        assert iso_ticks(INFINITY - 1) == "+294247-01-10T04:00:54.775806Z"
        assert iso_ticks(MIN_TIME) == "-290308-12-21T19:59:05.224193Z"
        assert iso_ticks(-1) == "1969-12-31T23:59:59.999999Z"
        first = to_ticks(dt.datetime(1, 1, 1))
        assert iso_ticks(first - 1) == "0000-12-31T23:59:59.999999Z"
        assert iso_ticks(to_ticks(dt.datetime(9999, 12, 31, 23, 59, 59, 999999)) + 1) == (
            "+10000-01-01T00:00:00.000000Z"
        )
        last = to_ticks(dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
        for t in [*np.random.default_rng(7).integers(first, last, 2000).tolist(), 0, first, last]:
            assert iso_ticks(t) == from_ticks(t).isoformat(timespec="microseconds")[:-6] + "Z"
        # pandas reads the same date from the same int64 microseconds
        assert (
            pd.Timestamp(INFINITY - 1, unit="us", tz="UTC")
            .isoformat()
            .startswith("294247-01-10T04:00:54.775806")
        )
        assert iso_time(INFINITY - 1) == "+294247-01-10T04:00:54.775806Z"
        assert iso_time(0) == "1970-01-01T00:00:00Z"
        with pytest.raises(
            OverflowError, match=r"\+294247-01-10T04:00:54.775806Z, outside the years"
        ):
            from_ticks(INFINITY - 1)


class TestDurations:
    def test_ints_and_timedeltas(self) -> None:
        assert to_duration_ticks(7) == 7
        assert to_duration_ticks(dt.timedelta(seconds=1, microseconds=5)) == 1_000_005
        assert to_duration_ticks(dt.timedelta(days=1)) == 86_400 * TICKS_PER_SECOND
        assert to_duration_ticks(dt.timedelta(microseconds=-3)) == -3

    def test_pandas_and_numpy_durations(self) -> None:
        assert to_duration_ticks(pd.Timedelta("1s")) == TICKS_PER_SECOND
        assert to_duration_ticks(pd.Timedelta(2000, unit="ns")) == 2
        assert to_duration_ticks(np.timedelta64(3, "ms")) == 3000

    def test_sub_microsecond_durations_rejected(self) -> None:
        with pytest.raises(TimeConversionError, match="sub-microsecond precision"):
            to_duration_ticks(pd.Timedelta(1, unit="ns"))
        with pytest.raises(TimeConversionError) as err:
            to_duration_ticks(np.timedelta64(1, "ns"))
        assert "np.timedelta64(1,'ns') has sub-microsecond precision" in str(err.value)
        assert "value.astype('timedelta64[us]')" in str(err.value)

    def test_long_numpy_durations_are_exact(self) -> None:
        days = 400 * 365  # more than the 292 years of nanosecond int64
        assert to_duration_ticks(np.timedelta64(days, "D")) == days * 86_400 * TICKS_PER_SECOND

    def test_numpy_integers_are_ticks(self) -> None:
        assert to_duration_ticks(np.int64(5)) == 5 and to_duration_ticks(np.int32(-2)) == -2

    @pytest.mark.parametrize("nat", [np.timedelta64("NaT"), pd.NaT])
    def test_nat_is_not_a_duration(self, nat: object) -> None:
        with pytest.raises(TimeConversionError, match=r"^NaT \(not a time\) is not a duration"):
            to_duration_ticks(nat)

    def test_durations_beyond_int64_rejected(self) -> None:
        """They were accepted, and a window of that size failed later with
        bounds that contradicted each other."""
        assert to_duration_ticks(INFINITY) == INFINITY
        with pytest.raises(TimeConversionError) as err:
            to_duration_ticks(2**63)
        assert str(err.value) == (
            "a duration of 9223372036854775808 ticks is beyond the int64 tick range "
            "(at most 9223372036854775807 ticks, about 292,000 years)"
        )
        with pytest.raises(
            TimeConversionError, match=r"^a duration of datetime.timedelta\(days=999999999"
        ):
            to_duration_ticks(dt.timedelta.max)

    def test_bool_and_string_rejected(self) -> None:
        with pytest.raises(TimeConversionError) as err:
            to_duration_ticks(False)
        assert "False is a bool" in str(err.value)
        assert "int ticks or datetime.timedelta" in str(err.value)
        with pytest.raises(TimeConversionError) as err:
            to_duration_ticks("1s")
        assert "'1s' (str)" in str(err.value)
        assert "use int ticks or datetime.timedelta" in str(err.value)


@pytest.mark.parametrize(
    ("ticks", "text"),
    [
        (3_600_000_000, "1h"),
        (900_000_000, "15m"),
        (86_400_000_000 * 7, "7d"),
        (90_000_000, "90s"),
        (250_000, "250ms"),
        (10, "10"),
        (1_500, "1500"),
        (0, "0"),
    ],
)
def test_durations_are_shown_in_the_largest_unit_dividing_them(ticks: int, text: str) -> None:
    assert format_duration(ticks) == text


def test_a_float_beyond_2_53_ticks_is_refused_not_moved() -> None:
    """Beyond 2**53 floats skip integers: 1234567890123456789 read into a
    float (a pandas or CSV column typed float64) is ...768, 21 ticks early;
    taking the whole float would move the event silently."""
    assert to_ticks(2.0**53) == 2**53
    assert to_ticks(-(2.0**53)) == -(2**53)
    with pytest.raises(TimeConversionError, match=r"beyond 2\*\*53 ticks.*give such times as ints"):
        to_ticks(1234567890123456789.0)
    with pytest.raises(TimeConversionError, match=r"beyond 2\*\*53"):
        to_ticks(-(2.0**53) - 2)
    assert to_ticks(float("inf")) == INFINITY
