"""A join reading a join with ``select=``: the columns the select made are
its columns, on every engine.

Regression from a black-box differential tester (CHANGELOG.md, Unreleased,
Fixed): the host engine knew only the ``on`` columns of a join with
``select=`` when it named the output's columns, so a join reading it did
not see the select's ``v`` as a name in both streams and added a null
column ``v`` next to ``v_left``/``v_right``. operators.md: a join's payload
is both payloads, "names in both get ``_left``/``_right``"; "Engines": the
same result on every engine. Expected values are hand-computed.
"""

from __future__ import annotations

from typing import Any

import pytest

from udm.host import Cht, Insert, Retract
from udm.host.query import Stream
from udm.sdk import aggregate

ENGINES = ["reference", "host"]


def _streams() -> tuple[Stream, Stream]:
    a = Stream.from_events([Insert("a", 1, 5, {"k": "x", "v": 1})], key="k")
    b = Stream.from_events([Insert("b", 2, 4, {"k": "x", "v": 2})], key="k")
    return a, a.join(b, select=lambda left, right: {"v": left["v"] + right["v"]})


@pytest.mark.parametrize("engine", ENGINES)
def test_a_join_reading_a_select_join_suffixes_its_columns(engine: str) -> None:
    a, j = _streams()
    assert a.join(j).to_cht(engine=engine) == {
        "x": Cht([(2, 4, {"k": "x", "v_left": 1, "v_right": 3})])
    }
    assert j.join(a).to_cht(engine=engine) == {
        "x": Cht([(2, 4, {"k": "x", "v_left": 3, "v_right": 1})])
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_no_null_column_is_added_to_the_output_rows(engine: str) -> None:
    a, j = _streams()
    by_key: Any = a.join(j).to_cht(engine=engine)
    assert [list(e.payload) for e in by_key["x"]] == [["k", "v_left", "v_right"]]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_select_join_without_rows_has_only_its_on_columns(engine: str) -> None:
    a, _ = _streams()
    other = Stream.from_events([Insert("b", 7, 9, {"k": "x", "v": 2})], key="k")
    empty = a.join(other, select=lambda left, right: {"v": 0})  # no overlap: no row
    q: Any = a.join(empty)
    assert q.to_cht(engine=engine) == {}
    assert q.union(a).to_cht(engine=engine) == {"x": Cht([(1, 5, {"k": "x", "v": 1})])}


@aggregate
def total(values: list[Any]) -> int:
    return len(values)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_join_after_a_union_with_a_select_join_names_columns_per_stream(engine: str) -> None:
    # B6: the union of a window's rows (k, total) and a select join's (k, v)
    # has a v in every row (null in the window's), so the join reading it
    # suffixes v in both rows, not in one of them only
    a, _ = _streams()
    w = a.tumbling_window(10).aggregate(total)
    j = a.join(a, select=lambda left, right: {"v": left["v"] + right["v"]})
    assert a.join(w.union(j)).to_cht(engine=engine) == {
        "x": Cht(
            [
                (1, 5, {"k": "x", "v_left": 1, "total": 1, "v_right": None}),
                (1, 5, {"k": "x", "v_left": 1, "total": None, "v_right": 2}),
            ]
        )
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_a_select_making_other_columns_for_other_pairs_is_read_as_a_table(engine: str) -> None:
    # the select gives v for key x and w for key y: its table has both
    # columns, null where a pair lacks one, and a join reading it suffixes v
    a = Stream.from_events(
        [Insert("a", 1, 5, {"k": "x", "v": 1}), Insert("c", 1, 9, {"k": "y", "v": 7})], key="k"
    )
    b = Stream.from_events(
        [Insert("b", 2, 4, {"k": "x", "v": 2}), Insert("d", 2, 8, {"k": "y", "v": 2})], key="k"
    )
    j = a.join(b, select=lambda left, right: {"v": 0} if left["v"] == 1 else {"w": 5})
    assert a.join(j).to_cht(engine=engine) == {
        "x": Cht([(2, 4, {"k": "x", "v_left": 1, "v_right": 0, "w": None})]),
        "y": Cht([(2, 8, {"k": "y", "v_left": 7, "v_right": None, "w": 5})]),
    }
    seen = j.where(lambda p: True).to_cht(engine=engine)
    assert seen == {
        "x": Cht([(2, 4, {"k": "x", "v": 0, "w": None})]),
        "y": Cht([(2, 8, {"k": "y", "v": None, "w": 5})]),
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_a_join_after_a_union_with_a_window_names_columns_per_stream(engine: str) -> None:
    # a window's results (undeclared: no returns=) are columns only its rows
    # show too: the union of a (k, v) and the window (k, total) has a total
    # in every row, so the join with the window suffixes it in both rows
    a, _ = _streams()
    w = a.tumbling_window(10).aggregate(total)
    assert w.join(a.union(w)).to_cht(engine=engine) == {
        "x": Cht(
            [
                (1, 5, {"k": "x", "total_left": 1, "v": 1, "total_right": None}),
                (0, 10, {"k": "x", "total_left": 1, "v": None, "total_right": 1}),
            ]
        )
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_a_select_joins_retracted_rows_name_no_columns(engine: str) -> None:
    # b is inserted and then fully retracted: the select join made a row
    # {k, v} and retracted it, so its table has no rows and only k, and the
    # join reading it names no v_left/v_right in the union's columns
    a, _ = _streams()
    b = Stream.from_events(
        [Insert("b", 2, 4, {"k": "x", "v": 2}), Retract("b", 2, 4, 2, {"k": "x", "v": 2})],
        key="k",
    )
    j = a.join(b, select=lambda left, right: {"v": left["v"] + right["v"]})
    by_key: Any = a.union(a.join(j)).to_cht(engine=engine)
    assert by_key == {"x": Cht([(1, 5, {"k": "x", "v": 1})])}
    assert [list(e.payload) for e in by_key["x"]] == [["k", "v"]]


def _uneven() -> tuple[Stream, Stream]:
    """A source whose rows have different columns (``v`` in one, ``u`` in
    another), and one with ``v`` (black-box round 18, B2 and B3)."""
    c = Stream.from_cht([(0, 20, {"k": "x", "v": 5}), (0, 20, {"k": "y", "u": 7})], key="k")
    a = Stream.from_cht([(0, 10, {"k": "y", "v": 2})], key="k")
    return a, c


UNEVEN_EXPECTED = {
    "a.join(c)": {"y": Cht([(0, 10, {"k": "y", "v_left": 2, "v_right": None, "u": 7})])},
    "c.join(a)": {"y": Cht([(0, 10, {"k": "y", "v_left": None, "u": 7, "v_right": 2})])},
    "c": {
        "x": Cht([(0, 20, {"k": "x", "v": 5, "u": None})]),
        "y": Cht([(0, 20, {"k": "y", "v": None, "u": 7})]),
    },
}


def _uneven_queries() -> dict[str, Stream]:
    a, c = _uneven()
    return {"a.join(c)": a.join(c), "c.join(a)": c.join(a), "c": c}


def _exactly(got: Any) -> Any:
    """Each row's payload as (column, value) pairs in order: suffixes and
    nulls compared exactly, not by ``Cht``'s equality."""
    return {k: [list(e.payload.items()) for e in cht] for k, cht in got.items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_join_of_rows_with_different_columns_names_them_per_stream(engine: str) -> None:
    for name, query in _uneven_queries().items():
        assert _exactly(query.to_cht(engine=engine)) == _exactly(UNEVEN_EXPECTED[name]), name


@pytest.mark.spark
def test_spark_keeps_every_column_of_rows_with_different_columns(spark: Any) -> None:
    for name, query in _uneven_queries().items():
        assert _exactly(query.to_cht(engine="spark")) == _exactly(UNEVEN_EXPECTED[name]), name
