"""Application time: int64 ticks and lossless conversion from Python,
pandas and Arrow time values.

One tick is one microsecond since the Unix epoch (UTC): the resolution of
Python ``datetime`` and of Spark ``TimestampType``, so values round-trip
through both exactly. Durations (``timedelta``) convert to ticks the same
way. A nanosecond value that is not a whole number of microseconds cannot be
represented and is rejected instead of silently truncated.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from udm.sdk.events import INFINITY, MIN_TIME

__all__ = [
    "INFINITY",
    "MIN_TIME",
    "TICKS_PER_SECOND",
    "SubMicrosecondError",
    "TimeConversionError",
    "finer_than_a_tick",
    "format_duration",
    "format_ticks_duration",
    "format_time",
    "from_ticks",
    "iso_ticks",
    "iso_time",
    "to_duration_ticks",
    "to_ticks",
]

TICKS_PER_SECOND = 1_000_000
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_SUB_MICROS = re.compile(r":\d{2}[.,](\d{7,})")  # seconds with over 6 fraction digits
_US = _dt.timedelta(microseconds=1)


def finer_than_a_tick(text: str) -> bool:
    """Whether ISO text has a nonzero digit below a microsecond, which
    :func:`to_ticks` refuses (and Spark's parser would drop).

    >>> finer_than_a_tick("2024-01-01T00:00:00.0000009Z"), finer_than_a_tick("00:00:00.1234560")
    (True, False)
    """
    fraction = _SUB_MICROS.search(text)
    return bool(fraction and fraction.group(1)[6:].strip("0"))


class TimeConversionError(ValueError):
    """A value cannot be converted to ticks without losing information."""


class SubMicrosecondError(TimeConversionError):
    """A time has a part finer than a microsecond (a tick). Its own class so
    that a table reader can say to round the column (``ts.dt.floor("us")``)
    rather than to drop the rows: every such row has the same fix."""


#: pandas' and numpy's missing times, wherever they are met
_NAT_TIME = "NaT (not a time) cannot be converted to ticks; drop or fill missing times first"
_NAT_DURATION = "NaT (not a time) is not a duration; drop or fill it first"


def _from_nanos(nanos: int, what: Any) -> int:
    if nanos % 1000:
        raise SubMicrosecondError(
            f"{what!r} has sub-microsecond precision ({nanos} ns); udm ticks are microseconds. "
            "Round the value to microseconds first (e.g. ts.floor('us'))."
        )
    return nanos // 1000


def _from_numpy(value: Any, unit: str) -> int:
    """Ticks of a numpy datetime64/timedelta64 of any unit. Converting to
    microseconds directly (not through nanoseconds, whose int64 range is
    only 1678-2262) keeps far dates exact; a round trip detects finer parts."""
    import numpy as np

    micros = value.astype(unit)
    if micros != value:
        raise SubMicrosecondError(
            f"{value!r} has sub-microsecond precision; udm ticks are microseconds. "
            f"Round the value to microseconds first (e.g. value.astype({unit!r}))."
        )
    return int(micros.astype(np.int64))


def to_ticks(value: Any) -> int:
    """Convert a point in time to ticks.

    Accepts ``int`` ticks, ``datetime`` (naive values are taken as UTC),
    ``date``, ``pandas.Timestamp``, ``numpy.datetime64`` and Arrow timestamp
    scalars, and ISO 8601 text, also with a year beyond 9999 or before 1
    written with a sign as Spark and :func:`iso_ticks` write it
    (``"+10000-01-01T00:00:00Z"``). ``float('inf')`` and the string ``"inf"``
    mean :data:`INFINITY`; ``float('-inf')`` and ``"-inf"`` mean :data:`MIN_TIME`.
    """
    if isinstance(value, bool):
        raise TimeConversionError(f"{value!r} is a bool, not a time; pass int ticks or a datetime")
    if isinstance(value, int):
        if not (MIN_TIME <= value <= INFINITY):
            raise TimeConversionError(
                f"{value} is outside the int64 tick range; ticks are microseconds since "
                "1970-01-01 UTC, and INFINITY ('inf') is the end of time"
            )
        return value
    if isinstance(value, float):
        return _float_ticks(value)
    if isinstance(value, str):
        return _text_ticks(value)
    if type(value).__name__ == "NaTType":  # pandas.NaT, a datetime whose fields are NaN
        raise TimeConversionError(_NAT_TIME)
    # pandas.Timestamp is a datetime subclass but carries nanoseconds.
    nanos = getattr(value, "nanosecond", None)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        if nanos:
            raise SubMicrosecondError(
                f"{value!r} has sub-microsecond precision; udm ticks are microseconds. "
                "Round the value to microseconds first (e.g. ts.floor('us'))."
            )
        return int((value - _EPOCH) // _US)
    if isinstance(value, _dt.date):
        return to_ticks(_dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC))
    type_name = type(value).__module__ + "." + type(value).__qualname__
    if type_name.startswith("numpy.") and hasattr(value, "astype"):
        import numpy as np

        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise TimeConversionError(_NAT_TIME)
            return to_ticks(_from_numpy(value, "datetime64[us]"))
        if isinstance(value, np.integer):
            return to_ticks(int(value))
        if isinstance(value, np.floating):  # float32, float16: exactly a float
            return _float_ticks(float(value))
    if type_name.startswith("pyarrow."):
        return _arrow_ticks(value)
    raise TimeConversionError(
        f"cannot convert {value!r} ({type(value).__name__}) to ticks; "
        "use int ticks, datetime, pandas.Timestamp, numpy.datetime64 or an Arrow timestamp"
    )


#: the largest magnitude below which every integer is a float
_FLOAT_EXACT = 2**53


def _float_ticks(value: float) -> int:
    """:func:`to_ticks` of a float: infinities, or a whole number of ticks."""
    if value == float("inf"):
        return INFINITY
    if value == float("-inf"):
        return MIN_TIME
    if value.is_integer() and abs(value) <= _FLOAT_EXACT:
        return to_ticks(int(value))
    if value.is_integer():
        # beyond 2**53 a float is not every integer: 1234567890123456789
        # read into a float is ...768, and taking it would move the time
        raise TimeConversionError(
            f"{value!r} is a float beyond 2**53 ticks, where floats skip ticks (it may be an "
            "integer rounded on its way here); give such times as ints (int64)"
        )
    raise TimeConversionError(
        f"{value!r} is not a whole number of ticks; round it to an int (1 tick = 1 microsecond)"
    )


def _text_ticks(value: str) -> int:
    """:func:`to_ticks` of a string: ``inf``/``-inf`` or an ISO 8601 datetime."""
    word = value.strip().lower()
    if word in ("inf", "infinity", "+inf", "+infinity"):
        return INFINITY
    if word in ("-inf", "-infinity"):
        return MIN_TIME
    if finer_than_a_tick(value):
        # fromisoformat would drop the digits beyond microseconds
        raise SubMicrosecondError(
            f"{value!r} has sub-microsecond precision; udm ticks are microseconds. "
            "Round the value to microseconds first (at most 6 fraction digits)."
        )
    year = _YEAR.match(value)
    if year and (year.group(1) or not 1 <= int(year.group(2)) <= 9999):
        return _far_text_ticks(value, int(year.group(1) + year.group(2)), year.end())
    try:
        return to_ticks(_dt.datetime.fromisoformat(value))
    except ValueError:
        raise TimeConversionError(f"{value!r} is neither an ISO 8601 datetime nor 'inf'") from None


#: an ISO 8601 year with a sign or more than four digits (``+10000-01-01``,
#: ``-0001-01-01``), as Spark and :func:`iso_ticks` write years beyond 1..9999
_YEAR = re.compile(r"\s*([+-]?)(\d{4,})(?=-)")
#: days in 400 Gregorian years: the calendar repeats after them
_CYCLE_DAYS = 146_097


def _far_text_ticks(value: str, year: int, rest: int) -> int:
    """:func:`to_ticks` of ISO text whose year Python's ``datetime`` cannot
    hold (before 1, after 9999; ``+10000-01-01T00:00:00.000000Z``, as Spark
    and :func:`iso_ticks` write it): the date is read in a year of the same
    place in the 400-year Gregorian cycle, then moved back by whole cycles."""
    cycles = (year - 2000) // 400
    shifted = f"{year - 400 * cycles:04d}{value[rest:]}"
    try:
        ticks = to_ticks(_dt.datetime.fromisoformat(shifted)) + cycles * _CYCLE_DAYS * _DAY
    except ValueError:
        raise TimeConversionError(f"{value!r} is neither an ISO 8601 datetime nor 'inf'") from None
    if not MIN_TIME <= ticks <= INFINITY:
        raise TimeConversionError(
            f"{value!r} is beyond the int64 tick range (about 292,000 years either side of 1970)"
        )
    return ticks


def _arrow_ticks(value: Any) -> int:
    """:func:`to_ticks` of an Arrow timestamp scalar (nanoseconds kept
    exact until the check for sub-microsecond parts)."""
    py = value.as_py()
    if py is None:
        raise TimeConversionError(
            "a null Arrow timestamp cannot be converted to ticks; drop or fill missing times first"
        )
    unit = getattr(getattr(value, "type", None), "unit", None)
    if unit == "ns":
        return _from_nanos(int(value.value), value)
    return to_ticks(py)


def to_duration_ticks(value: Any) -> int:
    """Convert a duration (``int`` ticks, numpy integers, ``timedelta``,
    ``pandas.Timedelta`` or ``numpy.timedelta64``) to ticks, within the
    int64 tick range."""
    ticks = _duration(value)
    if not -INFINITY <= ticks <= INFINITY:
        what = f"{ticks} ticks" if isinstance(value, int) else f"{value!r} ({ticks} ticks)"
        raise TimeConversionError(
            f"a duration of {what} is beyond the int64 tick range "
            f"(at most {INFINITY} ticks, about 292,000 years)"
        )
    return ticks


def _duration(value: Any) -> int:
    if isinstance(value, bool):
        raise TimeConversionError(
            f"{value!r} is a bool, not a duration; use int ticks or datetime.timedelta"
        )
    if isinstance(value, int):
        return value
    if type(value).__name__ == "NaTType":  # pandas.NaT
        raise TimeConversionError(_NAT_DURATION)
    if isinstance(value, _dt.timedelta):
        nanos = getattr(value, "nanoseconds", 0)
        if nanos:
            raise SubMicrosecondError(
                f"{value!r} has sub-microsecond precision; udm ticks are microseconds"
            )
        return value // _US
    type_name = type(value).__module__
    if type_name.startswith("numpy") and hasattr(value, "astype"):
        import numpy as np

        if isinstance(value, np.timedelta64):  # before np.integer, its base class
            if np.isnat(value):
                raise TimeConversionError(_NAT_DURATION)
            return _from_numpy(value, "timedelta64[us]")
        if isinstance(value, np.integer):
            return int(value)
    raise TimeConversionError(
        f"cannot convert {value!r} ({type(value).__name__}) to a duration in ticks; "
        "use int ticks or datetime.timedelta"
    )


def from_ticks(ticks: int) -> _dt.datetime:
    """The UTC datetime of a tick value (:data:`INFINITY` maps to
    ``datetime.max``, :data:`MIN_TIME` to ``datetime.min``). Python's
    ``datetime`` holds the years 1 to 9999 only, a small part of the int64
    tick range: other ticks raise ``OverflowError`` saying so (tables and
    files take the ticks directly, :func:`iso_ticks`, and need no datetime)."""
    if ticks >= INFINITY:
        return _dt.datetime.max.replace(tzinfo=_dt.UTC)
    if ticks <= MIN_TIME:
        return _dt.datetime.min.replace(tzinfo=_dt.UTC)
    try:
        return _EPOCH + _dt.timedelta(microseconds=ticks)
    except OverflowError:
        raise OverflowError(
            f"{ticks} ticks is {iso_ticks(ticks)}, outside the years 1-9999 a Python datetime "
            "holds; keep such times as int ticks"
        ) from None


def format_time(ticks: int) -> str:
    """Render ticks for messages: ``inf`` for the end of time, ``-inf``
    for the beginning (both read back by :func:`to_ticks`); a value beyond
    them (an invalid one, which a message reports) as the number it is."""
    if ticks == INFINITY:
        return "inf"
    return "-inf" if ticks == MIN_TIME else str(ticks)


#: Ticks per duration unit, largest first: the one table behind the
#: spellings ``"10s"``, ``"250ms"`` that fixtures and specs read
#: (``parse_duration``) and that :func:`format_duration` writes.
DURATION_UNITS: dict[str, int] = {
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
}


def format_duration(ticks: int) -> str:
    """A duration in the largest unit that divides it (``1h``, ``15m``,
    ``250ms``; the spellings YAML specs and fixtures accept), else ticks."""
    for unit, size in DURATION_UNITS.items():
        if size > 1 and ticks and ticks % size == 0:
            return f"{ticks // size}{unit}"
    return str(ticks)


def format_ticks_duration(ticks: int) -> str:
    """A duration of a query over integer ticks: the ticks, and, when they
    make a whole number of seconds or more, the same in units, since udm's
    ticks are microseconds (a query file's ``size: 1m`` is shown as the user
    wrote it next to what the engine uses).

    >>> format_ticks_duration(3_600_000_000), format_ticks_duration(250)
    ('3600000000 (1h)', '250')
    """
    unit = format_duration(ticks)
    if abs(ticks) >= TICKS_PER_SECOND and unit != str(ticks):
        return f"{ticks} ({unit})"
    return str(ticks)


def iso_time(ticks: int) -> str:
    """Ticks as an ISO 8601 UTC datetime for messages (``inf`` and ``-inf``
    for the ends of time, no fraction when it is zero), exact for every
    tick (:func:`iso_ticks`)."""
    if ticks in (INFINITY, MIN_TIME):
        return format_time(ticks)
    return iso_ticks(ticks).replace(".000000Z", "Z")


_DAY = 86_400 * TICKS_PER_SECOND


def iso_ticks(ticks: int) -> str:
    """Any int tick as ISO 8601 UTC text with six fraction digits, as Spark
    writes a timestamp: ``1970-01-01T00:00:00.000000Z``; a year beyond 9999
    gets a sign (``+294247-01-10T04:00:54.775806Z``, the tick before
    :data:`INFINITY`), a year before 1 is astronomical (year 0 is 1 BC, then
    ``-0001``). Integer arithmetic on the proleptic Gregorian calendar
    (H. Hinnant's ``civil_from_days``), since Python's ``datetime`` stops at
    the year 9999 while a tick reaches about 292,000 years either side of 1970.

    >>> iso_ticks(0), iso_ticks(-1)
    ('1970-01-01T00:00:00.000000Z', '1969-12-31T23:59:59.999999Z')
    """
    days, micros = divmod(ticks, _DAY)
    z = days + 719_468  # days since 0000-03-01
    era = z // 146_097
    doe = z - era * 146_097  # day of the 400-year era, [0, 146096]
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)  # from March 1st
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    seconds, fraction = divmod(micros, TICKS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    sign = "" if 0 <= year <= 9999 else "+" if year > 0 else "-"
    shown = f"{sign}{abs(year):04d}"
    return f"{shown}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}Z"
