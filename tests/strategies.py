"""Reusable hypothesis strategies for CHTs and physical streams.

Import from test files as ``from strategies import ...`` (pytest puts the
tests/ folder on sys.path). The key one is :func:`equivalent_streams`: a
physical stream that derives exactly a given CHT, but with reordered
inserts, ends speculated long (or open) and then retracted to the truth,
inserts that are later fully retracted, and CTIs wherever they are valid.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from udm.host import INFINITY, Cht, Cti, Insert, IntervalEvent, Retract
from udm.host.stream import Element

__all__ = [
    "chts",
    "equivalent_streams",
    "finite_events",
    "interval_events",
    "payloads",
    "with_ctis",
]

#: Small integer payloads: collisions (equal payloads) are likely, on purpose.
payloads = st.integers(min_value=-5, max_value=20)


@st.composite
def interval_events(
    draw: st.DrawFn,
    min_start: int = -20,
    max_start: int = 40,
    max_duration: int = 15,
    payload: st.SearchStrategy[Any] = payloads,
    infinite: bool = False,
) -> IntervalEvent[Any]:
    """An event ``[start, start + d)`` with ``1 <= d <= max_duration``, or an
    open edge event ``[start, INFINITY)`` sometimes when ``infinite``."""
    start = draw(st.integers(min_value=min_start, max_value=max_start))
    if infinite and draw(st.integers(0, 4)) == 0:
        end = INFINITY
    else:
        end = start + draw(st.integers(min_value=1, max_value=max_duration))
    return IntervalEvent(start, end, draw(payload))


def finite_events(**kwargs: Any) -> st.SearchStrategy[IntervalEvent[Any]]:
    return interval_events(infinite=False, **kwargs)


@st.composite
def chts(
    draw: st.DrawFn,
    min_size: int = 0,
    max_size: int = 8,
    infinite: bool = False,
    **event_kwargs: Any,
) -> Cht:
    """A CHT of up to ``max_size`` events (duplicates allowed)."""
    events = draw(
        st.lists(
            interval_events(infinite=infinite, **event_kwargs),
            min_size=min_size,
            max_size=max_size,
        )
    )
    return Cht(events)


@st.composite
def _history(draw: st.DrawFn, event: IntervalEvent[Any], ident: str) -> list[Element]:
    """The elements of one event: an insert, possibly with a wrong (longer,
    shorter or open) end that one or two retractions correct."""
    start, end = event.start, event.end
    kind = draw(st.sampled_from(["exact", "longer", "open", "shorter", "zigzag"]))
    if kind == "exact" or (kind == "shorter" and end - start < 2 and end != INFINITY):
        return [Insert(ident, start, end, event.payload)]
    if kind == "open" and end != INFINITY:
        return [
            Insert(ident, start, INFINITY, event.payload),
            Retract(ident, start, INFINITY, end),
        ]
    if kind == "shorter" and end != INFINITY:
        first = draw(st.integers(start + 1, end - 1))
        return [Insert(ident, start, first, event.payload), Retract(ident, start, first, end)]
    if end == INFINITY:
        guess = start + draw(st.integers(1, 20))
        return [
            Insert(ident, start, guess, event.payload),
            Retract(ident, start, guess, INFINITY),
        ]
    longer = end + draw(st.integers(1, 20))
    if kind == "longer":
        return [Insert(ident, start, longer, event.payload), Retract(ident, start, longer, end)]
    # zigzag: too long, then too short, then right
    shorter = draw(st.integers(start + 1, end))
    steps = [Insert(ident, start, longer, event.payload), Retract(ident, start, longer, shorter)]
    if shorter != end:
        steps.append(Retract(ident, start, shorter, end))
    return steps


@st.composite
def _ghost(draw: st.DrawFn, ident: str, payload: st.SearchStrategy[Any]) -> list[Element]:
    """An insert that a full retraction deletes again (maybe after a change)."""
    start = draw(st.integers(-20, 40))
    end = start + draw(st.integers(1, 15))
    steps: list[Element] = [Insert(ident, start, end, draw(payload))]
    if draw(st.booleans()):
        new_end = start + draw(st.integers(1, 15))
        steps.append(Retract(ident, start, end, new_end))
        end = new_end
    steps.append(Retract(ident, start, end, start))
    return steps


def with_ctis(stream: list[Element], every: int = 1) -> list[Element]:
    """``stream`` with a CTI after every ``every`` elements at the minimum
    sync time of everything after it: the latest CTI the stream allows, so
    validation under ``cti_policy='raise'`` still accepts it."""
    out: list[Element] = []
    suffix_min = [INFINITY] * (len(stream) + 1)
    for i in range(len(stream) - 1, -1, -1):
        suffix_min[i] = min(suffix_min[i + 1], stream[i].sync_time)
    last = None
    for i, element in enumerate(stream):
        out.append(element)
        if (i + 1) % every == 0 and suffix_min[i + 1] < INFINITY:
            t = suffix_min[i + 1]
            if last is None or t > last:
                out.append(Cti(t))
                last = t
    return out


@st.composite
def equivalent_streams(
    draw: st.DrawFn,
    cht: Cht | list[IntervalEvent[Any]],
    ghosts: int = 3,
    ctis: bool = True,
    payload: st.SearchStrategy[Any] = payloads,
) -> list[Element]:
    """A physical stream whose CHT equals ``cht``: every event's history
    (insert plus corrections) in order, histories interleaved arbitrarily,
    up to ``ghosts`` extra events inserted and fully retracted, and
    optionally CTIs at the latest times the stream allows."""
    histories: list[list[Element]] = [draw(_history(e, f"e{i}")) for i, e in enumerate(cht)]
    n_ghosts = draw(st.integers(0, ghosts))
    histories += [draw(_ghost(f"g{i}", payload)) for i in range(n_ghosts)]
    # the k-th occurrence of history i in the schedule emits its k-th element
    slots = [i for i, h in enumerate(histories) for _ in h]
    schedule = draw(st.permutations(slots))
    cursors = [0] * len(histories)
    stream: list[Element] = []
    for i in schedule:
        stream.append(histories[i][cursors[i]])
        cursors[i] += 1
    if ctis and draw(st.booleans()):
        stream = with_ctis(stream, every=draw(st.integers(1, 4)))
    return stream
