"""A window's results read the same on every engine through the operators
that keep its rows' columns (black-box round 9: the host engine returned
the payload dict, key column included, where the reference and Spark gave
the result itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from udm.host import Cht, Insert
from udm.host.query import Stream

EVENTS = [
    (0, 1, {"k": "a", "v": 1.0}),
    (2, 3, {"k": "a", "v": 2.0}),
    (12, 13, {"k": "a", "v": 6.0}),
]
# an anti-join side that removes nothing
NONE_AT = Stream.from_cht([(100, 101, {"k": "a"})], key="k")

AFTER: dict[str, tuple[Callable[[Any], Any], list[tuple[int, int, Any]]]] = {
    "where": (lambda s: s.where(lambda p: True), [(0, 10, 1.5), (10, 20, 6.0)]),
    "shift": (lambda s: s.shift(5), [(5, 15, 1.5), (15, 25, 6.0)]),
    "to_points": (lambda s: s.to_points(), [(0, 1, 1.5), (10, 11, 6.0)]),
    "clip_to": (lambda s: s.clip_to(3), [(0, 3, 1.5), (10, 13, 6.0)]),
    "set_duration": (lambda s: s.set_duration(2), [(0, 2, 1.5), (10, 12, 6.0)]),
    "finalize": (lambda s: s.finalize(), [(0, 10, 1.5), (10, 20, 6.0)]),
    "left_anti_join": (lambda s: s.left_anti_join(NONE_AT), [(0, 10, 1.5), (10, 20, 6.0)]),
    "where.shift": (lambda s: s.where(lambda p: True).shift(1), [(1, 11, 1.5), (11, 21, 6.0)]),
}


@pytest.mark.parametrize("name", list(AFTER))
@pytest.mark.parametrize("engine", ["reference", "host"])
def test_a_single_aggregate_stays_its_value_after_row_operators(name: str, engine: str) -> None:
    then, rows = AFTER[name]
    means = Stream.from_cht(EVENTS, key="k").tumbling_window(10).aggregate("stats.mean", value="v")
    assert then(means).to_cht(engine=engine) == {"a": Cht(rows)}


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_named_aggregates_stay_result_dicts_after_row_operators(engine: str) -> None:
    stats = (
        Stream.from_cht(EVENTS, key="k")
        .tumbling_window(10)
        .aggregate(lo=("stats.min", "v"), hi=("stats.max", "v"))
    )
    expected = {"a": Cht([(0, 10, {"lo": 1.0, "hi": 2.0}), (10, 20, {"lo": 6.0, "hi": 6.0})])}
    assert stats.where(lambda p: True).to_cht(engine=engine) == expected


@pytest.mark.spark
def test_spark_reads_them_the_same(spark: Any) -> None:
    means = Stream.from_cht(EVENTS, key="k").tumbling_window(10).aggregate("stats.mean", value="v")
    for name in ("where", "shift", "left_anti_join"):
        then, rows = AFTER[name]
        assert then(means).to_cht(engine="spark") == {"a": Cht(rows)}, name


def test_the_host_engines_events_carry_the_value_too() -> None:
    means = Stream.from_cht(EVENTS, key="k").tumbling_window(10).aggregate("stats.mean", value="v")
    inserts = [e for e in means.shift(5).to_events() if isinstance(e, Insert)]
    assert sorted(e.payload for e in inserts) == [1.5, 6.0]
