"""Output times of time-sensitive operators are whole ticks on every engine
(black-box acceptance bb4 #7): a UDO returning ``IntervalEvent(0.5, ...)``
made the reference evaluator return ``Cht([0.5, 10) 1)`` and the host raise
a bare ``TimeConversionError`` naming neither the UDM nor the window, and
``Cht`` took an ``IntervalEvent`` at ``0.5`` that it refused as a tuple.
Now each engine raises ``UdmInvocationError`` naming the UDM and the window
(the cause a ``TimeConversionError`` naming the output event), and times
``to_ticks`` takes (a whole float, a numpy integer) become int ticks, as a
tuple's do in ``Cht``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from udm.host import (
    Cht,
    Cti,
    HoppingWindow,
    Host,
    Insert,
    SnapshotWindow,
    TumblingWindow,
    UdmInvocationError,
    evaluate,
    output_cht,
)
from udm.host.query import Stream
from udm.host.time import TimeConversionError
from udm.sdk import IntervalEvent, TimeSensitiveOperator


class HalfTick(TimeSensitiveOperator):
    """One output half a tick after the window's start."""

    def compute_result(self, events: list[IntervalEvent[Any]], window: Any) -> list[Any]:
        return [IntervalEvent(window.start + 0.5, window.end, len(events))]


class Truthy(TimeSensitiveOperator):
    """A bool start: ``to_ticks`` refuses it (True is no time)."""

    def compute_result(self, events: list[IntervalEvent[Any]], window: Any) -> list[Any]:
        return [IntervalEvent(True, window.end, len(events))]


class WholeFloats(TimeSensitiveOperator):
    """A whole float start and a numpy int end: whole ticks, as ``Cht``
    takes them in a tuple."""

    def compute_result(self, events: list[IntervalEvent[Any]], window: Any) -> list[Any]:
        return [IntervalEvent(float(window.start), np.int64(window.end), len(events))]


WINDOWS = [TumblingWindow(10), HoppingWindow(10, 5), SnapshotWindow()]
STREAM: list[Any] = [Insert("a", 1, 2, "x"), Insert("b", 12, 13, "y"), Cti(30)]
HALF = "TimeConversionError: output event [0.5, 10) 1: 0.5 is not a whole number of ticks"
TRUE = "TimeConversionError: output event [True, 10) 1: True is a bool, not a time"


def _feed(host: Host, feed: str) -> list[Any]:
    if feed == "process":
        return [o for el in STREAM for o in host.process(el)]
    if feed == "process_many":
        return host.process_many(STREAM)
    inserts = STREAM[:2]
    out = host.process_inserts(
        [e.id for e in inserts],
        [e.start for e in inserts],
        [e.end for e in inserts],
        [e.payload for e in inserts],
    )
    return out + host.process(STREAM[2])


@pytest.mark.parametrize(("udm", "detail"), [(HalfTick, HALF), (Truthy, TRUE)])
def test_the_reference_names_the_udm_and_the_window(udm: Any, detail: str) -> None:
    with pytest.raises(UdmInvocationError) as err:
        evaluate(Cht([(1, 2, "x")]), TumblingWindow(10), udm)
    name = "half_tick" if udm is HalfTick else "truthy"
    assert str(err.value).startswith(f"UDM '{name}' failed on window [0, 10): {detail}")
    assert isinstance(err.value.__cause__, TimeConversionError)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("feed", ["process", "process_many", "process_inserts"])
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "general"])
def test_the_host_names_the_udm_and_the_window(window: Any, feed: str, fast_path: bool) -> None:
    host = Host(window, HalfTick, fast_path=fast_path)
    with pytest.raises(UdmInvocationError) as err:
        _feed(host, feed)
    message = str(err.value)
    assert re.match(r"UDM 'half_tick' failed on window \[", message), message
    # the first window a CTI or a later insert computes: its start + 0.5
    shown = re.search(r"output event \[(\S+), ", message)
    assert shown is not None and float(shown.group(1)) % 1 == 0.5, message
    assert "is not a whole number of ticks" in message
    assert isinstance(err.value.__cause__, TimeConversionError)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
def test_whole_times_become_int_ticks_on_every_engine(window: Any) -> None:
    cht = Cht([(1, 2, "x"), (12, 13, "y")])
    expected = evaluate(cht, window, WholeFloats, watermark=30)
    assert all(type(e.start) is int and type(e.end) is int for e in expected)
    by_hand = {
        "TumblingWindow(size=10)": [(0, 10, 1), (10, 20, 1)],
        "HoppingWindow(size=10, hop=5)": [(-5, 5, 1), (0, 10, 1), (5, 15, 1), (10, 20, 1)],
        "SnapshotWindow()": [(1, 2, 1), (12, 13, 1)],
    }[repr(window)]
    assert expected == by_hand
    for fast_path in (True, False):
        out = Host(window, WholeFloats, fast_path=fast_path).process_many(STREAM)
        assert output_cht(out) == expected, fast_path
        assert all(type(o.start) is int for o in out if isinstance(o, Insert))


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (IntervalEvent(0.5, 10, 1), "0.5 is not a whole number of ticks"),
        (IntervalEvent(True, 10, 1), "True is a bool, not a time"),
    ],
)
def test_cht_refuses_an_interval_event_as_it_refuses_the_tuple(event: Any, problem: str) -> None:
    for item in (event, (event.start, event.end, event.payload)):
        with pytest.raises(TimeConversionError, match=r"^CHT event #1 .*" + re.escape(problem)):
            Cht([(0, 1, "ok"), item])


def test_cht_takes_whole_times_of_an_interval_event_as_int_ticks() -> None:
    (e,) = Cht([IntervalEvent(0.0, np.int64(10), 1)])
    assert (e.start, e.end, e.payload) == (0, 10, 1)
    assert type(e.start) is int and type(e.end) is int


@pytest.mark.parametrize("kind", [np.float16, np.float32, np.float64])
def test_whole_numpy_floats_are_int_ticks_and_fractions_refused(kind: Any) -> None:
    (e,) = Cht([IntervalEvent(kind(1.0), kind(5.0), 1)])
    assert (e.start, e.end) == (1, 5)
    assert type(e.start) is int and type(e.end) is int
    with pytest.raises(TimeConversionError, match="not a whole number of ticks"):
        Cht([IntervalEvent(kind(0.5), 5, 1)])


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_names_the_udm_and_the_window(spark: Any) -> None:
    df = spark.createDataFrame([(1, 2, "x")], "s long, e long, v string")
    query = Stream.from_dataframe(df, start="s", end="e").tumbling_window(10).apply(HalfTick)
    with pytest.raises(UdmInvocationError) as err:
        query.to_cht()
    assert str(err.value).startswith(f"UDM 'half_tick' failed on window [0, 10): {HALF}")
