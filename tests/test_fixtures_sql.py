"""The Spark SQL oracle: SQL aggregates over the input CHT agree with the
reference evaluator on the fixtures of UDMs with a SQL equivalent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from udm.host import Cht
from udm.host.cht import derive_cht
from udm.sdk import Aggregate
from udm.testing import Fixture, load_fixture
from udm.testing.sql_oracle import (
    check_against_sql,
    input_stream,
    sql_equivalent,
    sql_oracle,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "examples" / "fixtures"
STATS = ROOT / "plugins" / "udm-stats" / "fixtures"


class Total(Aggregate):
    """A sum that says so."""

    sql_equivalent = "sum"

    def compute_result(self, payloads: Sequence[Any]) -> Any:
        return sum(payloads)


class WrongMax(Aggregate):
    """Declares max but computes min (a deliberately wrong UDM)."""

    sql_equivalent = "max"

    def compute_result(self, payloads: Sequence[Any]) -> Any:
        return min(payloads)


class Median2(Aggregate):
    sql_equivalent = "median"

    def compute_result(self, payloads: Sequence[Any]) -> Any:
        return payloads[0]


def fixture(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "f.udm.yaml"
    path.write_text(text)
    (f,) = load_fixture(path)
    return f


BODY = "window: {kind: tumbling, size: 10}\ninput:\n  - {insert: a, start: 1, payload: 2}\n"


def test_which_udms_have_a_sql_equivalent(tmp_path: Path) -> None:
    assert sql_equivalent(fixture(tmp_path, "udm: stats.mean\n" + BODY)) == "avg"
    assert sql_equivalent(fixture(tmp_path, "udm: stats.max\nargs: {field: v}\n" + BODY)) == "max"
    assert sql_equivalent(fixture(tmp_path, "udm: stats.median\n" + BODY)) is None
    assert (
        sql_equivalent(fixture(tmp_path, "udm: stats.variance\nargs: {ddof: 1}\n" + BODY)) is None
    )
    assert sql_equivalent(fixture(tmp_path, "udm: test_fixtures_sql:Total\n" + BODY)) == "sum"
    with pytest.raises(ValueError, match="sql_equivalent 'median' is not one of sum, count"):
        sql_equivalent(fixture(tmp_path, "udm: test_fixtures_sql:Median2\n" + BODY))


def applicable() -> list[Any]:
    """Fixtures of the docs and of udm-stats the SQL oracle covers."""
    out = []
    for path in [*sorted(DOCS.glob("*.udm.yaml")), *sorted(STATS.glob("*.udm.yaml"))]:
        for f in load_fixture(path):
            if not isinstance(f, Fixture):  # a whole query: not one UDM for SQL
                continue
            if f.expected_error is not None or sql_equivalent(f) is None:
                continue
            if f.window.kind not in ("hopping", "tumbling", "snapshot"):
                continue
            if f.output_policy not in (None, "align", "point_end"):
                continue
            out.append(f)
    return out


def test_the_oracle_covers_fixtures_of_every_sql_udm() -> None:
    found = applicable()
    assert {f.udm for f in found} >= {"stats.mean", "stats.min", "stats.max"}
    assert any(f.generate is not None for f in found)
    assert any(f.key is not None for f in found)


@pytest.mark.spark
def test_sql_oracle_hand_computed(spark: Any, tmp_path: Path) -> None:
    (first,) = load_fixture(DOCS / "first.udm.yaml")
    cht, _ = derive_cht(first.elements())
    assert sql_oracle(first, spark, cht) == {None: Cht([(0, 10, 3.0), (10, 20, 9.0)])}
    hopping = fixture(
        tmp_path,
        "udm: test_fixtures_sql:Total\nwindow: {kind: hopping, size: 10, hop: 5, offset: 2}\n"
        "output_policy: point_end\ninput:\n"
        "  - {insert: a, start: 1, end: 8, payload: 2}\n  - {insert: b, start: 7, payload: 3}\n",
    )
    # windows [-8, 2), [-3, 7), [2, 12), [7, 17): a [1, 8) overlaps all four,
    # b [7, 8) the last two; point_end puts each sum at its window's last tick
    cht, _ = derive_cht(hopping.elements())
    assert sql_oracle(hopping, spark, cht) == {
        None: Cht([(1, 2, 2.0), (6, 7, 2.0), (11, 12, 5.0), (16, 17, 5.0)])
    }
    snapshot = fixture(
        tmp_path,
        "udm: stats.max\nwindow: {kind: snapshot}\nkey: k\nvalue: v\ninput:\n"
        "  - {insert: a, start: 1, end: 5, payload: {k: x, v: 4}}\n"
        "  - {insert: b, start: 3, end: 9, payload: {k: x, v: 6}}\n"
        "  - {insert: c, start: 2, end: 4, payload: {k: y, v: 1}}\n",
    )
    cht, _ = derive_cht(snapshot.elements())
    assert sql_oracle(snapshot, spark, cht) == {
        "x": Cht([(1, 3, 4.0), (3, 5, 6.0), (5, 9, 6.0)]),
        "y": Cht([(2, 4, 1.0)]),
    }
    assert check_against_sql(snapshot, spark) == []
    # hop > size leaves gaps: b [6, 8) lies in the gap between [0, 5) and
    # [10, 15) and belongs to no window (SQL's sequence would count down)
    gaps = fixture(
        tmp_path,
        "udm: stats.mean\nwindow: {kind: hopping, size: 5, hop: 10}\ninput:\n"
        "  - {insert: a, start: 1, end: 3, payload: 2}\n"
        "  - {insert: b, start: 6, end: 8, payload: 100}\n"
        "  - {insert: c, start: 11, end: 12, payload: 4}\n",
    )
    cht, _ = derive_cht(gaps.elements())
    assert sql_oracle(gaps, spark, cht) == {None: Cht([(0, 5, 2.0), (10, 15, 4.0)])}
    # real-date ticks: the last tick before a window boundary stays in the
    # earlier window (window indexes by integer floor division)
    t = 1_714_564_800_000_000  # 2024-05-01, a multiple of the 1 ms hop
    late = fixture(
        tmp_path,
        "udm: stats.min\nwindow: {kind: tumbling, size: 1000}\ninput:\n"
        f"  - {{insert: a, start: {t - 1}, payload: 1}}\n",
    )
    cht, _ = derive_cht(late.elements())
    assert sql_oracle(late, spark, cht) == {None: Cht([(t - 1000, t, 1.0)])}


@pytest.mark.spark
def test_reference_agrees_with_sql_on_the_suites(spark: Any) -> None:
    checked = 0
    for f in applicable():
        cht, _ = derive_cht(input_stream(f), f.cti_policy)
        if any(e.end >= 2**63 - 1 for e in cht):
            continue  # events that never end: no finite SQL windows
        assert check_against_sql(f, spark) == [], f.title
        checked += 1
    assert checked >= 8


@pytest.mark.spark
def test_a_wrong_udm_disagrees_with_sql(spark: Any, tmp_path: Path) -> None:
    wrong = fixture(
        tmp_path,
        "udm: test_fixtures_sql:WrongMax\nwindow: {kind: tumbling, size: 10}\ninput:\n"
        "  - {insert: a, start: 1, payload: 2}\n  - {insert: b, start: 3, payload: 5}\n",
    )
    assert check_against_sql(wrong, spark) == [
        "SQL gives 5.0 for [0, 10)",
        "reference gives 2 for [0, 10)",
    ]


@pytest.mark.spark
def test_run_fixture_adds_the_sql_oracle_when_spark_is_active(spark: Any, tmp_path: Path) -> None:
    from udm.testing import load_fixture, run_fixture

    path = tmp_path / "mean.udm.yaml"
    path.write_text(
        "udm: stats.mean\n"
        "window: {kind: tumbling, size: 10}\n"
        "input:\n"
        "  - {insert: a, start: 1, payload: 2.0}\n"
        "  - {insert: b, start: 4, payload: 4.0}\n"
        "expected:\n"
        "  - {start: 0, end: 10, payload: 3.0}\n"
    )
    result = run_fixture(load_fixture(path)[0])
    assert result.passed and result.sql_checked
    median = path.read_text().replace("stats.mean", "stats.median")
    path.write_text(median)
    result = run_fixture(load_fixture(path)[0])
    assert result.passed and not result.sql_checked  # no SQL equivalent declared
