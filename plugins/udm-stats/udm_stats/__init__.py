"""udm-stats: statistical UDMs, registered as ``stats.<name>``.

Every UDM reads scalar payloads directly; for mapping payloads (a row's
columns) pass ``field="column"``. Windows are never empty for the host
unless ``emit_empty=True``. On an empty window ``distinct_count`` returns
0 (it declares ``empty_preserving=False``), ``time_weighted_average`` with
``over="window"`` returns 0.0 over a window that ends (time without events
counts as zero), ``top_k`` outputs nothing, and the other aggregates return
``None``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from udm.sdk import (
    INFINITY,
    IncrementalAggregate,
    IntervalEvent,
    Properties,
    TimeSensitiveIncrementalAggregate,
    Udm,
    WindowDescriptor,
    aggregate,
    function,
    hookimpl,
    operator,
    pick,
)
from udm_stats._exact import (
    ZERO_SUM,
    ExactSum,
    sum_add,
    sum_add_product,
    sum_add_square,
    sum_exact,
    sum_merge,
    sum_ratio,
    sum_special,
    to_float,
)

__all__ = [
    "DistinctCount",
    "Max",
    "Mean",
    "Min",
    "TimeWeightedAverage",
    "Variance",
    "ewma",
    "median",
    "quantile",
    "top_k",
    "udm_udms",
]

__version__ = "0.1.0"


def _null(udm: str) -> TypeError:
    """Nulls are refused, never skipped: a skipped value is a silent drop."""
    return TypeError(
        f"{udm} got a null (None) value; filter nulls out of its value column before "
        "the aggregate, e.g. .where('<column> IS NOT NULL') on Spark"
    )


def _values(payloads: Sequence[Any], field: str | None, udm: str) -> list[Any]:
    values = [pick(p, field) for p in payloads]
    if None in values:
        raise _null(udm)
    return values


def _is_numpy_bool(x: Any) -> bool:
    """``numpy.True_`` and ``numpy.False_`` (no ``numbers.Integral``, unlike
    Python's bools), without importing numpy."""
    dtype = getattr(x, "dtype", None)
    return getattr(dtype, "kind", None) == "b" and getattr(x, "ndim", None) == 0


def _number(x: Any, udm: str) -> int | float:
    """A value as an int or float for the exact sums."""
    if isinstance(x, int):  # bool too
        return int(x)
    if _is_numpy_bool(x):  # as Python's bools
        return int(bool(x))
    if isinstance(x, float):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real | Decimal):  # Spark's decimal columns arrive as Decimal
        return float(x)
    if x is None:
        raise _null(udm)
    raise TypeError(f"{udm} takes numbers, got {x!r} ({type(x).__name__})")


def _is_int(x: Any) -> bool:
    """An integer parameter: ints and numpy's, but no bool (``True == 1``)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _not_int(x: Any) -> str:
    """Why a parameter equal to an integer is still refused: ``True == 1``."""
    if isinstance(x, bool) or _is_numpy_bool(x):
        return " (a bool, not an integer)"
    return "" if isinstance(x, numbers.Integral) else f" (a {type(x).__name__}, not an integer)"


def _rank(x: Any) -> tuple[bool, Any]:
    """Sort key putting NaN after every number, as Spark orders it: NaN is
    the largest value, so results never depend on where a NaN arrived."""
    return (x != x, 0.0 if x != x else x)


def _sorted(values: list[Any]) -> list[Any]:
    return sorted(values, key=_rank)


def _as_fraction(x: Any, udm: str) -> Fraction | None:
    """A number exactly, or None for NaN and the infinities."""
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, numbers.Rational):
        return Fraction(int(x.numerator), int(x.denominator))
    if _is_numpy_bool(x):
        return Fraction(int(bool(x)))
    if isinstance(x, numbers.Real | Decimal) and hasattr(x, "as_integer_ratio"):
        try:  # floats, Decimals, numpy's floats
            num, den = x.as_integer_ratio()
            return Fraction(int(num), int(den))
        except (OverflowError, ValueError):  # inf, NaN
            return None
    raise TypeError(f"{udm} takes numbers, got {x!r} ({type(x).__name__})")


def _interpolate(a: Any, b: Any, t: Fraction, udm: str) -> Any:
    """``a + (b - a) * t`` computed exactly and rounded once: to a float
    (correctly rounded; ints give floats, as in :mod:`statistics`), or, when
    a ``Decimal`` is involved and no float, to a ``Decimal`` in the current
    decimal context. A NaN gives NaN; an infinity gives itself (``-inf``
    and ``inf`` give NaN). Exact arithmetic never overflows where the
    result is finite: ``a*(1 - t) + b*t`` in floats does for values near
    the float range."""
    fa, fb = _as_fraction(a, udm), _as_fraction(b, udm)
    if fa is None or fb is None:
        if a != a or b != b:
            return a if a != a else b
        if fa is None and fb is None:
            return a if a == b else math.nan  # -inf and inf
        return a if fa is None else b
    value = fa + (fb - fa) * t
    floats = isinstance(a, float) or isinstance(b, float)
    if not floats and (isinstance(a, Decimal) or isinstance(b, Decimal)):
        return Decimal(value.numerator) / Decimal(value.denominator)  # one rounding
    return to_float(value)  # beyond the float range (exclusive extrapolating): +-inf


def _checked_at_creation(cls: type[Udm]) -> type[Udm]:
    """Run a decorated UDM once on no data when it is created: its parameter
    checks come first, so a bad ``q`` or ``k`` fails at once, not at the
    first window (or never, on a stream without windows)."""
    init = cls.__init__

    def __init__(self: Any, **kwargs: Any) -> None:
        init(self, **kwargs)
        self.compute_result([])

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


# ------------------------------------------------------------ order statistics


@aggregate
def median(payloads: Sequence[Any], field: str | None = None) -> Any:
    """The median, as :func:`statistics.median` and Spark's ``median``: the
    middle value, or the mean of the two middle values for an even count,
    computed exactly and rounded once (to a float, or to a ``Decimal`` in
    the current context for decimals), so the median of two values near the
    float's largest, ``1e308`` and ``1e308``, is ``1e308``, where
    ``statistics.median`` gives ``inf``. Otherwise it equals
    ``statistics.median`` for floats and ints. NaN sorts after every number
    (as in Spark), so the result does not depend on where it arrived.

    Example: ``median`` of 1, 5, 2, 8 is 3.5.
    """
    data = _sorted(_values(payloads, field, "stats.median"))
    n = len(data)
    if not n:
        return None
    if n % 2:
        return data[n // 2]
    return _interpolate(data[n // 2 - 1], data[n // 2], Fraction(1, 2), "stats.median")


@_checked_at_creation
@aggregate
def quantile(
    payloads: Sequence[Any], q: float = 0.5, method: str = "exclusive", field: str | None = None
) -> Any:
    """The ``q``-quantile, with the interpolation of :func:`statistics.quantiles`.

    ``q`` is taken as the decimal number it is written as (a float ``q`` is
    read from its shortest repr, so ``0.1`` is exactly 1/10, not the binary
    float nearest to it). The result is the exact linear interpolation
    between the two neighbouring values of the sorted window, rounded once:
    to a float (correctly rounded; ints give floats), or, for decimals, to a
    ``Decimal`` in the current decimal context. A cut point on a value
    returns that value itself. For ``q = i/n`` this is the cut point
    ``statistics.quantiles(values, n=n, method=method)[i-1]`` computed
    exactly: the two agree whenever Python's arithmetic there
    (``(a*(n-d) + b*d) / n``) rounds only in its final division, e.g. for
    small ints or decimals within the context's precision; otherwise they
    may differ in the last bit, and near the float's largest value that
    formula overflows to ``inf`` where this one is finite.

    ``method="exclusive"`` (Python's default, ``0 < q < 1``; R type 6 and
    numpy's ``weibull`` inside the data, but extrapolating beyond it for
    small samples where those clamp) or ``"inclusive"`` (``0 <= q <= 1``;
    the interpolation of R type 7, numpy's default ``linear`` and Spark's
    ``percentile``, always within the data; they compute it in binary
    floating point, so results may differ from theirs in the last bit). A
    single value is its own quantile. NaN sorts after every number, as in
    Spark. Example: ``quantile(q=0.25)`` of 1, 2, 3, 4 is 1.25 (exclusive)
    or 1.75 (inclusive).
    """
    if method not in ("exclusive", "inclusive"):
        raise ValueError(f"quantile method must be 'exclusive' or 'inclusive', got {method!r}")
    inclusive = method == "inclusive"
    number_q = isinstance(q, int | float) and not isinstance(q, bool)
    if not (number_q and (0 <= q <= 1 if inclusive else 0 < q < 1)):
        bounds = "0 <= q <= 1" if inclusive else "0 < q < 1 (q = 0 or 1: inclusive)"
        raise ValueError(
            f"quantile q must be a number with {bounds} for method={method!r}, got {q!r}"
        )
    data = _sorted(_values(payloads, field, "stats.quantile"))
    if not data:
        return None
    ld = len(data)
    if ld == 1:
        return data[0]
    if inclusive and q == 1:
        return data[-1]
    # q as written: 0.1 is 1/10 (Fraction(0.1) is 3602879701896397/2**55)
    frac = Fraction(repr(float(q))) if isinstance(q, float) else Fraction(q)
    i, n = frac.numerator, frac.denominator
    # The cut point of statistics.quantiles for i/n, in exact arithmetic.
    if inclusive:
        j, delta = divmod(i * (ld - 1), n)
        a, b = data[j], data[j + 1]
    else:
        m = ld + 1
        j = max(1, min(ld - 1, i * m // n))
        delta = i * m - j * n
        a, b = data[j - 1], data[j]
    if delta == 0:  # a cut point on a value: that value (even next to a NaN)
        return a
    return _interpolate(a, b, Fraction(delta, n), "stats.quantile")


@_checked_at_creation
@operator(order_insensitive=False)
def top_k(payloads: Sequence[Any], k: int = 3, field: str | None = None) -> list[Any]:
    """The ``k`` payloads with the largest values, largest first, one output
    event each. Ties keep the window's canonical order (earlier start
    first), so which of several equal values make the cut is deterministic.
    That makes the operator order-sensitive: with ``field=``, two payloads
    tying on the field differ, and the earlier one is output.
    """
    if not _is_int(k) or k < 1:
        raise ValueError(f"top_k needs a positive integer k, got {k!r}{_not_int(k)}")
    k = int(k)
    values = _values(payloads, field, "stats.top_k")
    # sorted() is stable even with reverse=True: equal values keep their order.
    ranked = sorted(range(len(values)), key=lambda i: _rank(values[i]), reverse=True)
    return [payloads[i] for i in ranked[:k]]


@_checked_at_creation
@aggregate(order_insensitive=False)
def ewma(payloads: Sequence[Any], alpha: float = 0.5, field: str | None = None) -> Any:
    """Exponentially weighted moving average over the window's events in
    canonical (start time) order: ``s = x0``, then ``s = alpha*x + (1-alpha)*s``.

    Order-sensitive (``order_insensitive=False``): the host must not
    reorder or partially aggregate it.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 1:
        raise ValueError(f"ewma alpha must be in (0, 1], got {alpha!r}")
    values = [_number(x, "stats.ewma") for x in _values(payloads, field, "stats.ewma")]
    if not values:
        return None
    s = values[0]
    for x in values[1:]:
        s = alpha * x + (1 - alpha) * s
    return s


# ------------------------------------------------------------ incremental


class Mean(IncrementalAggregate):
    """The arithmetic mean; incremental, invertible and mergeable, so the
    host updates it per event and can aggregate partially. The state is an
    exact sum (see ``_exact``): taking a value out again, even a huge one or
    a NaN, restores the result exactly. NaN if a NaN is among the values;
    +-inf as IEEE arithmetic gives it."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> tuple[ExactSum, int]:
        return (ZERO_SUM, 0)

    def add(self, state: tuple[ExactSum, int], payload: Any) -> tuple[ExactSum, int]:
        x = _number(pick(payload, self.field), "stats.mean")
        return (sum_add(state[0], x), state[1] + 1)

    def remove(self, state: tuple[ExactSum, int], payload: Any) -> tuple[ExactSum, int]:
        x = _number(pick(payload, self.field), "stats.mean")
        return (sum_add(state[0], x, -1), state[1] - 1)

    def merge(self, a: tuple[ExactSum, int], b: tuple[ExactSum, int]) -> tuple[ExactSum, int]:
        return (sum_merge(a[0], b[0]), a[1] + b[1])

    def result(self, state: tuple[ExactSum, int]) -> float | None:
        total, n = state
        if not n:
            return None
        return sum_ratio(total, n)


class Variance(IncrementalAggregate):
    """Variance with ``ddof`` delta degrees of freedom: ``ddof=0`` (default)
    is the population variance (:func:`statistics.pvariance`, numpy's
    ``var``), ``ddof=1`` the sample variance (:func:`statistics.variance`,
    Spark's ``variance``). ``None`` when the window has ``ddof`` or fewer
    values; NaN if a value is NaN or infinite.

    The state holds exact sums of the values and of their exact squares, so
    ``remove`` undoes ``add`` exactly and the result is the exact variance
    rounded once: invertible and mergeable.
    """

    def __init__(self, ddof: int = 0, field: str | None = None) -> None:
        if not _is_int(ddof) or ddof not in (0, 1):
            raise ValueError(
                "variance ddof must be the integer 0 (population) or 1 (sample), "
                f"got {ddof!r}{_not_int(ddof)}"
            )
        self.ddof = int(ddof)
        self.field = field

    def initial_state(self) -> tuple[int, ExactSum, ExactSum]:
        return (0, ZERO_SUM, ZERO_SUM)

    def _change(
        self, state: tuple[int, ExactSum, ExactSum], payload: Any, sign: int
    ) -> tuple[int, ExactSum, ExactSum]:
        n, total, squares = state
        x = _number(pick(payload, self.field), "stats.variance")
        if isinstance(x, float) and not math.isfinite(x):
            return (n + sign, sum_add(total, x, sign), squares)
        return (n + sign, sum_add(total, x, sign), sum_add_square(squares, x, sign))

    def add(
        self, state: tuple[int, ExactSum, ExactSum], payload: Any
    ) -> tuple[int, ExactSum, ExactSum]:
        return self._change(state, payload, 1)

    def remove(
        self, state: tuple[int, ExactSum, ExactSum], payload: Any
    ) -> tuple[int, ExactSum, ExactSum]:
        return self._change(state, payload, -1)

    def merge(
        self, a: tuple[int, ExactSum, ExactSum], b: tuple[int, ExactSum, ExactSum]
    ) -> tuple[int, ExactSum, ExactSum]:
        return (a[0] + b[0], sum_merge(a[1], b[1]), sum_merge(a[2], b[2]))

    def result(self, state: tuple[int, ExactSum, ExactSum]) -> float | None:
        n, total, squares = state
        if n <= self.ddof:
            return None
        if sum_special(total) is not None:
            return math.nan
        s1 = sum_exact(total)
        spread = sum_exact(squares) - s1 * s1 / n
        return to_float(spread / (n - self.ddof)) if spread > 0 else 0.0


class _NaN:
    """The one key of every NaN: NaNs are unequal to themselves, so as
    dict keys they would count once per object (and anew after a pickle)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return 0x7FF8

    def __repr__(self) -> str:
        return "nan"


_NAN = _NaN()


class DistinctCount(IncrementalAggregate):
    """The number of distinct values (payloads must be hashable); a
    multiset of counts makes it invertible and mergeable. An empty window
    (``emit_empty=True``) has 0 distinct values: ``empty_preserving=False``."""

    properties = Properties(empty_preserving=False)

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> dict[Any, int]:
        return {}

    def _value(self, payload: Any) -> Any:
        x = pick(payload, self.field)
        if x is None:
            raise _null("stats.distinct_count")
        return _NAN if x != x else x  # every NaN is one value, as in Spark

    def add(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        x = self._value(payload)
        state[x] = state.get(x, 0) + 1
        return state

    def remove(self, state: dict[Any, int], payload: Any) -> dict[Any, int]:
        x = self._value(payload)
        left = state[x] - 1
        if left:
            state[x] = left
        else:
            del state[x]
        return state

    def merge(self, a: dict[Any, int], b: dict[Any, int]) -> dict[Any, int]:
        out = dict(a)
        for x, c in b.items():
            out[x] = out.get(x, 0) + c
        return out

    def result(self, state: dict[Any, int]) -> int:
        return len(state)


class _Extreme(IncrementalAggregate):
    """Shared min/max: add and merge only. Not invertible (a removed
    extreme cannot be undone from the state), so the host recomputes a
    window from its events when one leaves."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def initial_state(self) -> Any:
        return None

    def _better(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def add(self, state: Any, payload: Any) -> Any:
        x = pick(payload, self.field)
        if x is None:
            raise _null(f"stats.{self.name}")
        return x if state is None else self._better(state, x)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else self._better(a, b)

    def result(self, state: Any) -> Any:
        return state


class Min(_Extreme):
    """The smallest value (incremental, mergeable, not invertible)."""

    def _better(self, a: Any, b: Any) -> Any:
        return min(a, b, key=_rank)  # NaN is the largest value, as in Spark


class Max(_Extreme):
    """The largest value (incremental, mergeable, not invertible)."""

    def _better(self, a: Any, b: Any) -> Any:
        return max(a, b, key=_rank)  # NaN is the largest value, as in Spark


#: (weighted sum, total duration) of the finite lifetimes, and (sum of
#: values, count) of the lifetimes that never end
TwaState = tuple[ExactSum, int, ExactSum, int]


class TimeWeightedAverage(TimeSensitiveIncrementalAggregate):
    """A time-weighted average of the lifetimes the UDM receives (with input
    clipping, the clipped lifetimes: clipping changes the result).

    ``over="events"`` (default): ``sum(value * (end - start)) / sum(end -
    start)``, the average over the time the events cover (gaps do not
    count). ``over="window"``: the paper's ``MyTimeWeightedAverage``,
    ``sum(value * (end - start)) / (W.end - W.start)``: time no event covers
    counts as zero.

    Events that never end (an open edge event, and the snapshot window
    after the last endpoint, ``[t, inf)``, which holds only such events)
    take the formula's limit as time runs on, so a speculative result is
    there before a later event closes them: over the events, the ones that
    never end outweigh every finite lifetime, and the result is the mean of
    their values; over a window that never ends, each of them covers it
    (the sum of their values). An event that never ends in a window that
    does has infinite weight there: ``over="window"`` refuses it (clip it
    with ``input_clipping="right"`` or ``"full"``).

    ``None`` when the total duration is zero: over the events, an empty
    window (``emit_empty=True``) or one of zero-length lifetimes; over a
    window that ends, an empty window is 0.0 (no time is covered), and over
    an endless one ``None``. Exact sums (see ``_exact``) make ``remove``
    undo ``add`` exactly.
    """

    def __init__(self, field: str | None = None, over: str = "events") -> None:
        if over not in ("events", "window"):
            raise ValueError(
                f"time_weighted_average over= must be 'events' or 'window', got {over!r}"
            )
        self.field = field
        self.over = over

    def initial_state(self) -> TwaState:
        return (ZERO_SUM, 0, ZERO_SUM, 0)

    def _change(self, state: TwaState, event: IntervalEvent[Any], sign: int) -> TwaState:
        total, weight, open_total, opened = state
        x = _number(pick(event.payload, self.field), "stats.time_weighted_average")
        if event.end >= INFINITY:
            return (total, weight, sum_add_product(open_total, x, 1, sign), opened + sign)
        w = event.end - event.start
        return (sum_add_product(total, x, w, sign), weight + sign * w, open_total, opened)

    def add(self, state: TwaState, event: IntervalEvent[Any], window: WindowDescriptor) -> TwaState:
        return self._change(state, event, 1)

    def remove(
        self, state: TwaState, event: IntervalEvent[Any], window: WindowDescriptor
    ) -> TwaState:
        return self._change(state, event, -1)

    def merge(self, a: TwaState, b: TwaState) -> TwaState:
        return (sum_merge(a[0], b[0]), a[1] + b[1], sum_merge(a[2], b[2]), a[3] + b[3])

    def result(self, state: TwaState, window: WindowDescriptor) -> float | None:
        total, weight, open_total, opened = state
        if self.over == "window":
            if window.end >= INFINITY:
                # each endless event covers the endless window; finite ones vanish
                return sum_ratio(open_total, 1) if opened else (0.0 if weight else None)
            if opened:
                raise ValueError(
                    f"time_weighted_average(over='window') got an event that never ends in "
                    f"the window [{window.start}, {window.end}), where its weight is "
                    "infinite; use input_clipping='right' or 'full'"
                )
            weight = window.end - window.start
        elif opened:
            return sum_ratio(open_total, opened)  # the endless lifetimes outweigh the rest
        if not weight:
            return None
        return sum_ratio(total, weight)


@function
def zscore(x: float, mean: float, stdev: float) -> float:
    """``(x - mean) / stdev``, for filters and projections (NaN if stdev is 0)."""
    return (x - mean) / stdev if stdev else math.nan


@hookimpl
def udm_udms() -> list[Any]:
    """The library's UDMs, registered as ``stats.<name>``."""
    return [
        median,
        quantile,
        Mean,
        Variance,
        top_k,
        DistinctCount,
        TimeWeightedAverage,
        ewma,
        Min,
        Max,
        zscore,
    ]
