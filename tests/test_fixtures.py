"""Fixture files: schema, loader errors with lines, the runner's ways and
property validators."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from udm.host import Cht, Cti, Insert, IntervalEvent, Retract
from udm.host.fixtures import FixtureError, load_fixture, load_fixture_text
from udm.host.fixtures.runner import check_stream, run_fixture, run_path
from udm.host.fixtures.transforms import latest_ctis, reorder_speculate
from udm.host.time import to_ticks
from udm.sdk import IncrementalAggregate, Properties, aggregate

ISSUE_SHAPE = """\
name: median over hopping windows      # optional
udm: stats.median                      # registered name, or module:attribute
args: {}                               # keyword arguments for the UDM, optional
window: {kind: hopping, size: 10, hop: 5}
input_clipping: none
output_policy: align
input:
  - {insert: e1, start: 1, end: 7, payload: 3}
  - {insert: e2, start: 4, end: 5, payload: 8}
  - {retract: e1, new_end: 4}
  - {cti: 10}
expected:
  - {start: -5, end: 5, payload: 5.5}
  - {start: 0, end: 10, payload: 5.5}
"""


def write(tmp_path: Path, text: str, name: str = "case.udm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_issue_shape_loads_and_passes(tmp_path: Path) -> None:
    loaded = load_fixture(write(tmp_path, ISSUE_SHAPE))
    assert loaded.name == "median over hopping windows"
    assert loaded.elements() == [
        Insert("e1", 1, 7, 3),
        Insert("e2", 4, 5, 8),
        Retract("e1", 1, 7, 4, 3),
        Cti(10),
    ]
    result = run_fixture(loaded)
    assert result.passed, result.summary()
    assert set(result.ways) == {"reference", "speculative", "conservative", "reordered"}
    assert "property order_insensitive" in result.checks
    assert result.actual == {None: Cht([(-5, 5, 5.5), (0, 10, 5.5)])}


def test_iso_times_point_events_and_offset(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 60000000, offset: 0}
        input:
          - {insert: a, start: 2024-01-01T00:00:10, payload: 2}
          - {insert: b, start: "2024-01-01T00:00:20", end: 2024-01-01T00:00:30, payload: 4}
        expected:
          - {start: 2024-01-01T00:00:00, end: 2024-01-01T00:01:00, payload: 3.0}
        """,
    )
    loaded = load_fixture(path)
    t0 = to_ticks("2024-01-01T00:00:10")
    assert loaded.elements()[0] == Insert("a", t0, t0 + 1, 2)
    assert run_fixture(loaded).passed


def test_every_mistake_has_file_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.median
        window: {kind: hopping, size: 10}
        input_clipping: nne
        input:
          - {insert: e1, start: 1, end: 7, payload: 3}
          - {insert: e2, start: x, end: 5, payload: 8}
          - {retract: e1, new_end: 4, bogus: 1}
          - {foo: 3}
          - {insert: e3, start: 5, end: 5}
        expected:
          - {start: 0, payload: 5.5}
        tolerance: -1
        """,
    )
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    lines = str(info.value).splitlines()
    p = str(path)
    assert f"{p}:2: window: a hopping window needs hop" in lines
    assert f"{p}:3: input_clipping: Input should be 'none', 'left', 'right' or 'full'" in lines
    assert f"{p}:6: input[1].start: 'x' is neither an ISO 8601 datetime nor 'inf'" in lines
    assert f"{p}:7: input[2].bogus: Extra inputs are not permitted" in lines
    assert (
        f"{p}:8: input[3]: each input item is {{insert: ...}}, {{retract: ...}} or {{cti: ...}}"
        in lines
    )
    assert f"{p}:9: input[4]: end 5 must be after start 5" in lines
    assert f"{p}:11: expected[0].end: Field required" in lines
    assert any(line.startswith(f"{p}:12: tolerance.") for line in lines)
    assert len(lines) == 9


def test_retraction_of_unknown_id_and_shape_errors() -> None:
    with pytest.raises(FixtureError) as info:
        load_fixture_text(
            "udm: stats.median\nwindow: {kind: snapshot}\ninput:\n"
            "  - {insert: a, start: 1, end: 3}\n  - {retract: b, new_end: 2}\n"
            "  - {retract: a, new_end: 2, old_end: 4}\n",
            "f.udm.yaml",
        )
    assert str(info.value).splitlines() == [
        "f.udm.yaml:5: input[1]: retract: no earlier insert with id 'b'",
        "f.udm.yaml:6: input[2]: old_end: 'a' ends at 3, not 4",
    ]
    with pytest.raises(FixtureError, match=r"^x:1: \(top level\): give exactly one of 'input'"):
        load_fixture_text("udm: stats.median\nwindow: {kind: snapshot}\n", "x")
    with pytest.raises(FixtureError, match=r"^x:3: \(yaml\): "):
        load_fixture_text("udm: a\nwindow: {kind: snapshot\ninput: [\n", "x")


def test_wrong_expected_fails_every_way_with_a_diff(tmp_path: Path) -> None:
    path = write(
        tmp_path, ISSUE_SHAPE.replace("payload: 5.5}\n  - {start: 0", "payload: 5}\n  - {start: 0")
    )
    result = run_path(str(path))
    assert not result.passed
    assert [f.way for f in result.failures] == [
        "reference",
        "speculative",
        "conservative",
        "reordered",
    ]
    first = result.failures[0]
    assert first.missing == [(None, IntervalEvent(-5, 5, 5))]
    assert first.extra == [(None, IntervalEvent(-5, 5, 5.5))]


def test_tolerance(tmp_path: Path) -> None:
    text = ISSUE_SHAPE.replace("payload: 5.5}\n  - {start: 0", "payload: 5.5001}\n  - {start: 0")
    assert not run_path(str(write(tmp_path, text))).passed
    assert run_path(str(write(tmp_path, text + "tolerance: 0.001\n"))).passed
    assert run_path(str(write(tmp_path, text + "tolerance: {rel: 0, abs: 0.001}\n"))).passed


def test_expected_error(tmp_path: Path) -> None:
    base = (
        "udm: stats.median\nwindow: {kind: tumbling, size: 10}\ninput:\n"
        "  - {insert: a, start: 1, end: 3, payload: {v: 1}}\n"
    )
    ok = write(tmp_path, base + "expected_error: pass field=\n")
    assert run_path(str(ok)).passed
    wrong = write(tmp_path, base + "expected_error: division by zero\n")
    result = run_path(str(wrong))
    assert not result.passed
    assert "expected an error containing 'division by zero', got:" in result.failures[0].message
    none = write(tmp_path, base.replace("{v: 1}", "1") + "expected_error: anything\n")
    assert run_path(str(none)).failures[0].message.endswith("got no error")
    policy = write(tmp_path, base + "output_policy: clip\nexpected_error: does not timestamp\n")
    assert run_path(str(policy)).passed
    cti = write(
        tmp_path,
        base.replace("{v: 1}}", "1}\n  - {cti: 5}\n  - {insert: b, start: 2, end: 4, payload: 1}")
        + "expected_error: is before the latest CTI 5\n",
    )
    assert run_path(str(cti)).passed, run_path(str(cti)).summary()


def test_unknown_udm_and_module_attribute(tmp_path: Path) -> None:
    base = "window: {kind: tumbling, size: 10}\ninput:\n  - {insert: a, start: 1, payload: 2}\n"
    bad = run_path(str(write(tmp_path, "udm: stats.medain\n" + base + "expected: []\n")))
    assert bad.failures[0].message.startswith("raised UnknownUdmError")
    good = write(
        tmp_path,
        "udm: udm_stats:Mean\n" + base + "expected: [{start: 0, end: 10, payload: 2}]\n",
    )
    assert run_path(str(good)).passed


def test_keys_single_and_several_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.max
        args: {field: v}
        key: [site, sensor]
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: {site: x, sensor: 1, v: 5}}
          - {insert: b, start: 2, payload: {site: x, sensor: 2, v: 7}}
          - {insert: c, start: 3, payload: {site: x, sensor: 1, v: 9}}
        expected:
          - {key: [x, 1], start: 0, end: 10, payload: 9}
          - {key: [x, 2], start: 0, end: 10, payload: 7}
        """,
    )
    result = run_path(str(path))
    assert result.passed, result.summary()
    assert set(result.actual) == {("x", 1), ("x", 2)}


# ------------------------------------------------------ property validators


FIXTURE_FOR = """\
udm: {udm}
window: {{kind: tumbling, size: 10}}
input:
  - {{insert: a, start: 1, end: 4, payload: 1}}
  - {{insert: b, start: 2, end: 3, payload: 2}}
  - {{insert: c, start: 3, end: 12, payload: 4}}
  - {{retract: c, new_end: 5}}
  - {{insert: d, start: 11, end: 14, payload: 8}}
  - {{cti: 10}}
"""


@aggregate(order_insensitive=True)
def first_value(payloads: Sequence[Any]) -> Any:
    """Claims order-insensitivity but is not (a deliberately wrong UDM)."""
    return payloads[-1] - payloads[0] if payloads else None


class BadMerge(IncrementalAggregate):
    """A sum whose merge drops the second state."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, payload: Any) -> int:
        return state + payload

    def remove(self, state: int, payload: Any) -> int:
        return state - payload

    def merge(self, a: int, b: int) -> int:
        return a

    def result(self, state: int) -> int:
        return state


class BadRemove(BadMerge):
    """A sum whose remove forgets to subtract."""

    def remove(self, state: int, payload: Any) -> int:
        return state

    def merge(self, a: int, b: int) -> int:
        return a + b


_calls = itertools.count()


class Flaky(BadMerge):
    """A sum that is not deterministic (but says it is)."""

    properties = Properties(deterministic=True)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int) -> int:
        return state + next(_calls) % 2


@pytest.mark.parametrize(
    ("udm", "failing"),
    [
        ("test_fixtures:first_value", "property order_insensitive"),
        ("test_fixtures:BadMerge", "property mergeable"),
        ("test_fixtures:BadRemove", "property invertible"),
        ("test_fixtures:Flaky", "property deterministic"),
    ],
)
def test_declared_properties_are_checked(tmp_path: Path, udm: str, failing: str) -> None:
    result = run_path(str(write(tmp_path, FIXTURE_FOR.format(udm=udm))))
    assert failing in [f.way for f in result.failures], result.summary()


def test_broken_remove_makes_the_host_disagree(tmp_path: Path) -> None:
    result = run_path(str(write(tmp_path, FIXTURE_FOR.format(udm="test_fixtures:BadRemove"))))
    ways = {f.way for f in result.failures}
    # the host removes events it speculated about; the reference never does
    assert ways & {"speculative", "conservative", "reordered"}
    assert "reference" not in ways


def test_correct_incremental_udm_passes_all_property_checks(tmp_path: Path) -> None:
    result = run_path(str(write(tmp_path, FIXTURE_FOR.format(udm="stats.mean"))))
    assert result.passed, result.summary()
    assert {"property mergeable", "property invertible", "property deterministic"} <= set(
        result.checks
    )


def test_output_stream_validator_catches_bad_streams() -> None:
    from udm.host.fixtures.checks import check_output_stream, check_policy_lifetimes
    from udm.host.policies import OutputPolicy
    from udm.host.windows import TumblingWindow

    late = [Insert("o1", 0, 10, 1), Cti(10), Insert("o2", 5, 10, 2)]
    assert "violates" in check_output_stream(late, conservative=False)[0]
    wrong = [Insert("o1", 0, 10, 1), Retract("o1", 0, 9, 5)]
    assert check_output_stream(wrong, conservative=False)
    assert (
        "must not retract"
        in check_output_stream(
            [Insert("o1", 0, 10, 1), Retract("o1", 0, 10, 0)], conservative=True
        )[0]
    )
    inputs = {None: [IntervalEvent(1, 3, 1)]}
    assert (
        check_policy_lifetimes(
            {None: Cht([(0, 10, 1)])}, inputs, TumblingWindow(10), OutputPolicy.ALIGN
        )
        == []
    )
    bad = check_policy_lifetimes(
        {None: Cht([(0, 9, 1)])}, inputs, TumblingWindow(10), OutputPolicy.ALIGN
    )
    assert "output [0, 9) 1 is not a lifetime" in bad[0]
    assert (
        check_policy_lifetimes(
            {None: Cht([(9, 10, 1)])}, inputs, TumblingWindow(10), OutputPolicy.POINT_END
        )
        == []
    )


def test_reorder_speculate_keeps_the_cht() -> None:
    from udm.host.cht import derive_cht

    events = [IntervalEvent(1, 5, 1), IntervalEvent(1, 5, 1), IntervalEvent(3, 9, 2)]
    for seed in range(20):
        stream = reorder_speculate(events, seed=seed)
        assert derive_cht(stream)[0] == Cht(events)
    assert any(isinstance(e, Retract) for e in reorder_speculate(events, seed=1))
    assert latest_ctis([Insert("a", 5, 6), Insert("b", 2, 3), Insert("c", 7, 8)], 1) == [
        Insert("a", 5, 6),
        Cti(2),
        Insert("b", 2, 3),
        Cti(7),
        Insert("c", 7, 8),
    ]


def test_check_stream_with_a_stream_from_python(tmp_path: Path) -> None:
    loaded = load_fixture(write(tmp_path, ISSUE_SHAPE))
    result = check_stream(loaded, [Insert("x", 0, 20, 4)], None)
    assert result.passed
    assert result.actual == {
        None: Cht([(-5, 5, 4), (0, 10, 4), (5, 15, 4), (10, 20, 4), (15, 25, 4)])
    }
