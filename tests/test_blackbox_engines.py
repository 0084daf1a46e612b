"""Regressions found by a black-box acceptance tester, items 4, 5, 6 and
8 (see CHANGELOG.md, Unreleased, Fixed): Finalize's CTIs over ExternalCTIs
that arrive out of order or leave a gap, the Spark workers' interpreter on
every entry point, union of an input whose events are all retracted, and
mixed column types across the inputs of a union or join on Spark. Each
test fails without its fix; results are worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host import Cht, Cti, Insert, IntervalEvent, Retract
from udm.host.errors import OperatorError
from udm.host.operators.base import Collector
from udm.host.operators.consistency import FinalizeOperator
from udm.host.query import Stream
from udm.host.stream import ExternalCti
from udm.host.time import INFINITY
from udm.sdk import aggregate

# ------------------------------- 4. Finalize: no CTI over time no ExternalCTI covers

OUT_OF_ORDER: list[Any] = [
    Insert("c", 6, 7, "C"),
    ExternalCti(5, 9, 1),
    Insert("a", 1, 5, "A"),
    ExternalCti(0, 4, 1),
]
GAP: list[Any] = [
    Insert("a", 1, 2, 1),
    ExternalCti(0, 2, 1),
    ExternalCti(6, 9, 0),
    Insert("b", 4, 5, 1),
]


def _finalized(elements: list[Any]) -> list[Any]:
    op = FinalizeOperator(INFINITY)
    sink = Collector()
    op.connect(sink)
    for element in elements:
        op.push(0, element)
    return sink.elements


def test_finalize_waits_for_an_external_cti_that_arrives_late() -> None:
    """[5, 9] completes first, but [0, 4] is still open: the CTI at 9 comes
    only once [0, 4] is complete too (CEDR 4.6: no earlier than correct)."""
    assert _finalized(OUT_OF_ORDER) == [
        Insert("c", 6, 7, "C"),
        Insert("a", 1, 5, "A"),
        Cti(9),
    ]


def test_finalize_issues_no_cti_over_a_gap_between_external_ctis() -> None:
    assert _finalized(GAP) == [Insert("a", 1, 2, 1), Cti(2), Insert("b", 4, 5, 1)]
    # the gap (2, 6) covered: the CTI moves over it and over [6, 9]
    assert _finalized([*GAP, ExternalCti(3, 5, 1)]) == [
        Insert("a", 1, 2, 1),
        Cti(2),
        Insert("b", 4, 5, 1),
        Cti(9),
    ]


def test_finalize_cti_from_a_plain_cti_joins_a_completed_external_cti() -> None:
    """A CTI in the input closes the time before it: [5, 9], complete,
    then follows on without a gap."""
    out = _finalized([ExternalCti(5, 9, 0), Cti(5)])
    assert out == [Cti(5), Cti(9)]


def test_finalize_refuses_an_element_beyond_a_completed_count_awaiting_its_cti() -> None:
    with pytest.raises(OperatorError) as err:
        _finalized([Insert("c", 6, 7, "C"), ExternalCti(5, 9, 1), Insert("d", 8, 9, "D")])
    assert str(err.value) == (
        "finalize: more elements arrived with sync times in [5, 9] than its ExternalCti counted (1)"
    )


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_external_ctis_out_of_order_or_with_a_gap_on_every_engine(engine: str) -> None:
    a = Stream.from_events(OUT_OF_ORDER)
    assert a.to_cht(engine=engine) == Cht([IntervalEvent(1, 5, "A"), IntervalEvent(6, 7, "C")])
    assert a.finalize().to_cht(engine=engine) == a.to_cht(engine=engine)
    b = Stream.from_events(GAP)
    assert b.to_cht(engine=engine) == Cht([IntervalEvent(1, 2, 1), IntervalEvent(4, 5, 1)])
    assert a.to_events() == [Insert("c", 6, 7, "C"), Insert("a", 1, 5, "A"), Cti(9), Cti(INFINITY)]


@pytest.mark.spark
def test_external_ctis_out_of_order_or_with_a_gap_on_spark(spark: Any) -> None:
    a = Stream.from_events(OUT_OF_ORDER)
    assert a.to_cht(engine="spark") == Cht([IntervalEvent(1, 5, "A"), IntervalEvent(6, 7, "C")])
    b = Stream.from_events(GAP)
    assert b.to_cht(engine="spark") == Cht([IntervalEvent(1, 2, 1), IntervalEvent(4, 5, 1)])


# ------------------- 5. Spark: the workers' interpreter on every entry point (anti-join)

FRESH_SESSION = """
from pyspark.sql import SparkSession
from udm.host.query import Stream
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("OFF")
A = Stream.from_cht([(1, 5, {"k": 1, "v": 1})], key="k")
B = Stream.from_cht([(2, 3, {"k": 1, "w": 1})], key="k")
print(A.left_anti_join(B).to_cht(engine="spark"))
"""


@pytest.mark.spark
def test_anti_join_as_the_first_job_of_a_fresh_session_finds_udm(tmp_path: Any) -> None:
    """A session udm did not create, on a local master, with ``python3`` on
    the PATH an interpreter without udm (a virtualenv not activated): the
    anti-join (a Python cogroup) must still run its workers with the
    driver's interpreter. A subprocess, as Spark has one session per
    process."""
    import os
    import subprocess
    import sys

    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(os.path.realpath(sys.executable))  # no venv: no udm
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "SPARK_REMOTE")
    }
    env["PATH"] = f"{bare}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-c", FRESH_SESSION],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "{1: Cht([1, 2) {'k': 1, 'v': 1}, [3, 5) {'k': 1, 'v': 1})}"
    )


# ------------------------------------ 6. union of an input whose events are all retracted

KEPT = {"k": 1, "v": 1, "w": None}  # B's column w, known from its (retracted) insert


def _all_retracted() -> tuple[Stream, Stream]:
    a = Stream.from_events([Insert("a", 1, 5, {"k": 1, "v": 1})], key="k")
    b = Stream.from_events([Insert("b", 2, 3, {"k": 1, "w": 1}), Retract("b", 2, 3, 2)], key="k")
    return a, b


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_union_keeps_the_columns_of_an_input_whose_events_are_all_retracted(engine: str) -> None:
    a, b = _all_retracted()
    assert a.union(b).to_cht(engine=engine) == {1: Cht([IntervalEvent(1, 5, KEPT)])}
    assert b.union(a).to_cht(engine=engine) == {1: Cht([IntervalEvent(1, 5, KEPT)])}
    assert b.to_cht(engine=engine) == {}


@pytest.mark.spark
def test_union_keeps_the_columns_of_an_input_whose_events_are_all_retracted_on_spark(
    spark: Any,
) -> None:
    a, b = _all_retracted()
    assert a.union(b).to_cht(engine="spark") == {1: Cht([IntervalEvent(1, 5, KEPT)])}
    assert b.to_cht(engine="spark") == {}
    out = a.union(b).to_dataframe().collect()
    assert [r.asDict() for r in out] == [{"start": 1, "end": 5, "k": 1, "v": 1, "w": None}]


# ------------- round 4: a union of an operator that gave no rows keeps its columns

C_EVENTS = [Insert("c1", 3, 4, {"k": "x", "v": 9})]


def _empty_join() -> Stream:
    a = Stream.from_events([Insert("a1", 0, 5, {"k": "x", "v": 1})], key="k")
    b = Stream.from_events([Insert("b1", 10, 15, {"k": "x", "v": 2})], key="k")  # no overlap
    return a.join(b)


def _empty_window(returns: str | None) -> Stream:
    gone = Stream.from_events(
        [Insert("a1", 0, 5, {"k": "x", "z": 1}), Retract("a1", 0, 5, 0)], key="k"
    )

    def cnt(values: list[Any]) -> int:
        return len(values)

    return gone.tumbling_window(5).aggregate(aggregate(cnt), value="z", returns=returns)


@pytest.mark.parametrize("engine", ["reference", "host"])
def test_union_after_a_join_without_pairs_has_the_joins_columns(engine: str) -> None:
    """The host gave {'k': 'x', 'v': 9}: a join's columns are known
    before it gives a row, as the reference engine's (and Spark's) are."""
    q = _empty_join().union(Stream.from_events(C_EVENTS, key="k"))
    row = {"k": "x", "v_left": None, "v_right": None, "v": 9}
    assert q.to_cht(engine=engine) == {"x": Cht([IntervalEvent(3, 4, row)])}
    # what follows the union reads the join's columns (a KeyError on the host)
    later = q.where(lambda p: p["v_left"] is None)
    assert later.to_cht(engine=engine) == {"x": Cht([IntervalEvent(3, 4, row)])}
    assert [e.payload for e in q.to_events() if type(e) is Insert] == [row]


@pytest.mark.parametrize("engine", ["reference", "host"])
@pytest.mark.parametrize("returns", [None, "long"])
def test_union_after_a_window_without_output_has_its_result_column(
    engine: str, returns: str | None
) -> None:
    q = _empty_window(returns).union(Stream.from_events(C_EVENTS, key="k"))
    row = {"k": "x", "cnt": None, "v": 9}
    assert q.to_cht(engine=engine) == {"x": Cht([IntervalEvent(3, 4, row)])}


# ----------------------- 8. Spark: mixed column types across union and join inputs

BIG = 2**53 + 1  # the first integer a double cannot hold


def _typed(k: Any, column: str, value: Any, start: int = 1) -> Stream:
    return Stream.from_cht([(start, start + 4, {"k": k, column: value})], key="k")


@pytest.mark.spark
def test_spark_union_refuses_an_integer_a_double_would_change(spark: Any) -> None:
    q = _typed(1, "v", BIG).union(_typed(1, "v", 0.5, 2))
    assert q.to_cht(engine="reference") == {
        1: Cht([IntervalEvent(1, 5, {"k": 1, "v": BIG}), IntervalEvent(2, 6, {"k": 1, "v": 0.5})])
    }
    with pytest.raises(OperatorError) as err:
        q.to_cht(engine="spark")
    assert str(err.value) == (
        "union: column 'v' is bigint in the first stream and double in another; Spark holds "
        f"one type per column, and the integer {BIG} is not exact as a double (it would "
        "change); cast the column to one type in every stream (e.g. float, or str to keep the "
        "digits), or run on an in-process engine"
    )
    # integers a double holds exactly widen to the same values
    small = _typed(1, "v", 3).union(_typed(1, "v", 0.5, 2))
    assert small.to_cht(engine="spark") == small.to_cht(engine="reference")


@pytest.mark.spark
def test_spark_union_refuses_a_string_and_an_integer_in_one_column(spark: Any) -> None:
    q = _typed(1, "v", BIG).union(_typed("1", "w", 1, 2))
    assert set(q.to_cht(engine="reference")) == {1, "1"}  # two groups
    with pytest.raises(OperatorError) as err:
        q.to_cht(engine="spark")
    assert str(err.value) == (
        "union: column 'k' is bigint in the first stream and string in the second; Spark "
        "holds one type per column and would convert one into the other (so '1' and 1 would "
        "become one value); cast the column to one type in every stream (select()) before the "
        "union, or run on an in-process engine"
    )


@pytest.mark.spark
@pytest.mark.parametrize(("key", "type_name"), [("1", "string"), (True, "boolean")])
def test_spark_join_refuses_keys_of_different_types(spark: Any, key: Any, type_name: str) -> None:
    left, right = _typed(1, "v", 1), _typed(key, "w", 1, 2)
    for q, name in (
        (left.join(right), "join on k"),
        (left.left_anti_join(right), "left_anti_join on k"),
    ):
        with pytest.raises(OperatorError) as err:
            q.to_cht(engine="spark")
        assert str(err.value) == (
            f"{name}: key column 'k' is bigint in the left stream and {type_name} in the "
            "right; Spark would compare them by converting one into the other, not as Python "
            "compares them; cast the key to one type in both streams (select()) before the "
            "join, or run on an in-process engine"
        )


PYTHON_WORKER_CALLS = (
    "applyInArrow",
    "mapInArrow",
    "applyInPandas",
    "mapInPandas",
    "transformWithStateInPandas",
    "applyInPandasWithState",
    "udtf",
    "udf",
    "pandas_udf",
)


def test_every_spark_python_function_shares_the_driver_interpreter() -> None:
    """Each call in udm's Spark layer that hands Spark a Python function
    sits in a function that calls ``share_driver_python`` first (the
    anti-join's cogroup did not: item 5)."""
    import ast
    from pathlib import Path

    import udm.host.spark

    unshared = []
    for path in sorted(Path(udm.host.spark.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            called = {
                c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                for c in ast.walk(fn)
                if isinstance(c, ast.Call)
            }
            if called & set(PYTHON_WORKER_CALLS) and "share_driver_python" not in called:
                unshared.append(f"{path.name}:{fn.name}")
    assert unshared == []
