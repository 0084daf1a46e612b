"""Shared generators and UDMs for the incremental host tests.

``physical_streams`` draws valid physical streams with disorder, every kind
of retraction (shrink, expand, full), duplicate start times, CTIs at random
points, several keys and ids reused once their events expired; every stream
it draws is accepted by the validator, so the host and the reference
evaluator can be compared on it.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from udm.host import (
    Cti,
    Element,
    IntervalEvent,
    Retract,
    StreamValidator,
    derive_cht,
)
from udm.host.stream import Insert
from udm.sdk import (
    IncrementalAggregate,
    IncrementalOperator,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveIncrementalOperator,
    aggregate,
    operator,
)


def random_stream(
    rng: random.Random, n: int, keys: int = 1, max_gap: int = 3, max_len: int = 9
) -> list[Element]:
    """A valid physical stream of about ``n`` elements."""
    stream: list[Element] = []
    live: dict[str, tuple[int, int]] = {}
    cti = 0
    t = 0
    for i in range(n):
        r = rng.random()
        if r < 0.18 and live:
            eid = rng.choice(sorted(live))
            s, e = live[eid]
            choice = rng.random()
            if choice < 0.3:
                new = s  # full retraction
            elif choice < 0.5:
                new = e + rng.randint(1, 6)  # expansion
            else:
                new = rng.randint(s, e)  # shrink (or no-op)
            if min(e, new) < cti or new == e:
                continue
            stream.append(Retract(eid, s, e, new))
            if new == s:
                del live[eid]
            else:
                live[eid] = (s, new)
        elif r < 0.26:
            cti = max(cti, t - rng.randint(0, 5))
            stream.append(Cti(cti))
        else:
            t += rng.randint(0, max_gap)
            s = max(cti, t - rng.randint(0, 6))  # disorder: up to 6 ticks late
            e = s + rng.choice([1, 1, 2, 3, 5, max_len])
            eid = f"e{i}"
            expired = sorted(x for x, (_, end) in live.items() if end < cti)
            if expired and rng.random() < 0.2:
                eid = rng.choice(expired)  # the id of an expired event is free again
            payload: Any = rng.randint(1, 9)
            if keys > 1:
                payload = {"k": f"k{rng.randrange(keys)}", "v": payload}
            stream.append(Insert(eid, s, e, payload))
            live[eid] = (s, e)
    validator = StreamValidator()
    for element in stream:
        validator.check(element)
    return stream


@st.composite
def physical_streams(draw: Any, max_size: int = 30, keys: int = 1) -> list[Element]:
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(0, max_size))
    return random_stream(random.Random(seed), n, keys=keys)


def cht_of(stream: list[Element]) -> list[IntervalEvent[Any]]:
    return list(derive_cht(stream)[0])


# --- one UDM per flavor -------------------------------------------------


@aggregate
def total(values: list[int]) -> int:
    """Time-insensitive, non-incremental UDA."""
    return sum(values)


@aggregate(time_sensitive=True)
def weighted(events: list[IntervalEvent[int]], window: Any) -> int:
    """Time-sensitive, non-incremental UDA (integer time weights)."""
    return sum(e.payload * (min(e.end, 1000) - e.start) for e in events)


class Mean(IncrementalAggregate):
    """An invertible mean: ``add``/``remove`` on (sum, count)."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] + payload, state[1] + 1)

    def remove(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] - payload, state[1] - 1)

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class Sum(IncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: int) -> int:
        return state + payload

    def remove(self, state: int, payload: int) -> int:
        return state - payload

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int) -> int:
        return state


class Spread(IncrementalAggregate):
    """Invertible (so the host's fast path takes it on grid windows), and
    its result is None until a window holds two payloads: a None result is
    an output like any other."""

    def initial_state(self) -> tuple[int, int, int]:
        return (0, 0, 0)

    def add(self, state: tuple[int, int, int], payload: int) -> tuple[int, int, int]:
        n, s, q = state
        return (n + 1, s + payload, q + payload * payload)

    def remove(self, state: tuple[int, int, int], payload: int) -> tuple[int, int, int]:
        n, s, q = state
        return (n - 1, s - payload, q - payload * payload)

    def result(self, state: tuple[int, int, int]) -> int | None:
        n, s, q = state
        return None if n < 2 else n * q - s * s


class Max(IncrementalAggregate):
    """Incremental, non-invertible: the host recomputes on removal."""

    def initial_state(self) -> int | None:
        return None

    def add(self, state: int | None, payload: int) -> int:
        return payload if state is None else max(state, payload)

    def result(self, state: int) -> int:
        return state


class WeightedSum(TimeSensitiveIncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: Any, window: Any) -> int:
        return state + event.payload * (min(event.end, 1000) - event.start)

    def remove(self, state: int, event: Any, window: Any) -> int:
        return state - event.payload * (min(event.end, 1000) - event.start)

    def result(self, state: int, window: Any) -> int:
        return state


@operator
def distinct(values: list[int]) -> list[int]:
    """Time-insensitive, non-incremental UDO."""
    return sorted(set(values))


@operator(time_sensitive=True)
def at_starts(events: list[IntervalEvent[int]], window: Any) -> list[IntervalEvent[int]]:
    """Time-sensitive UDO: a point at each member's start (time-bound)."""
    return [IntervalEvent(e.start, e.start + 1, e.payload) for e in events]


class Histogram(IncrementalOperator):
    """Time-insensitive incremental UDO: (value, count) pairs."""

    def initial_state(self) -> dict[int, int]:
        return {}

    def add(self, state: dict[int, int], payload: int) -> dict[int, int]:
        state[payload] = state.get(payload, 0) + 1
        return state

    def remove(self, state: dict[int, int], payload: int) -> dict[int, int]:
        state[payload] -= 1
        if not state[payload]:
            del state[payload]
        return state

    def result(self, state: dict[int, int]) -> list[tuple[int, int]]:
        return sorted(state.items())


class Spans(TimeSensitiveIncrementalOperator):
    """Time-sensitive incremental UDO: echoes the (clipped) member lifetimes."""

    def initial_state(self) -> list[tuple[int, int, int]]:
        return []

    def add(self, state: list[tuple[int, int, int]], event: Any, window: Any) -> Any:
        return [*state, (event.start, event.end, event.payload)]

    def remove(self, state: list[tuple[int, int, int]], event: Any, window: Any) -> Any:
        out = list(state)
        out.remove((event.start, event.end, event.payload))
        return out

    def result(self, state: Any, window: Any) -> list[IntervalEvent[int]]:
        return [IntervalEvent(s, e, p) for s, e, p in sorted(state)]


ALL_FLAVORS = [
    total,
    weighted,
    Sum,
    Spread,
    Max,
    WeightedSum,
    distinct,
    at_starts,
    Histogram,
    Spans,
]
