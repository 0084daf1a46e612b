"""Fixture files read as written: YAML 1.1 surprises (floats such as 1e-3,
booleans for on/yes ids) are caught with file:line: field messages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from udm.host.fixtures import FixtureError, load_fixture, run_fixture


def write(tmp_path: Path, text: str, name: str = "f.udm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def mistakes(path: Path) -> list[str]:
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    return str(err.value).replace(str(path), "f.udm.yaml").splitlines()


# ------------------------------------------------------------ YAML


def test_exponent_floats_are_floats_as_in_yaml_1_2(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 1e-3}
          - {insert: b, start: 2, payload: 3E+3}
          - {insert: c, start: 3, payload: -2.5e3}
        expected:
          - {start: 0, end: 10, payload: 1.66667e2}
        tolerance: 1e-6
        """,
    )
    (f,) = load_fixture(path)
    assert [item.payload for item in f.input or []] == [0.001, 3000.0, -2500.0]
    assert f.expected is not None and f.expected[0].payload == 166.667
    assert f.tolerance == 1e-6
    assert run_fixture(f).passed
    # other YAML users keep YAML 1.1
    assert yaml.safe_load("v: 1e-3") == {"v": "1e-3"}


def test_a_yaml_boolean_id_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: on, start: 1, end: 5, payload: 2}
          - {insert: 1, start: 2, end: 5, payload: 4}
          - {retract: yes, new_end: 3}
          - {insert: 'on', start: 2, end: 5, payload: 4}
        expected:
          - {start: 0, end: 10, payload: 3.0}
        """,
    )
    assert mistakes(path) == [
        "f.udm.yaml:4: input.0.insert: id True is a YAML boolean (YAML reads unquoted on, off, "
        "yes, no, true and false as booleans); quote the id, e.g. 'on'",
        "f.udm.yaml:6: input.2.retract: id True is a YAML boolean (YAML reads unquoted on, off, "
        "yes, no, true and false as booleans); quote the id, e.g. 'on'",
    ]


def test_args_are_passed_as_written(tmp_path: Path) -> None:
    """A duration-like argument stays a string (docs: args are passed as written)."""
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10s}
        args: {within: 10s, q: 1e-3}
        input: []
        """,
    )
    (f,) = load_fixture(path)
    assert f.args == {"within": "10s", "q": 0.001}
    assert f.window.size == 10_000_000


# ------------------------------------------------------------ retractions


def test_a_retraction_of_an_event_never_inserted_says_what_to_do(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 1}
          - {retract: c, new_end: 4}
        """,
    )
    (f,) = load_fixture(path)
    with pytest.raises(FixtureError) as err:
        f.elements()
    assert str(err.value) == (
        f"{path}:5: input.1: retract 'c' of an event not inserted earlier in input: insert it "
        "first (every way refuses a retraction of an event never inserted; to test that, give "
        "its start and old_end and use expected_error)"
    )
    # the advice works: every way refuses it, so expected_error passes
    advised = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: 1}
          - {retract: c, start: 1, old_end: 2, new_end: 1}
        expected_error: unknown event id 'c'
        """,
        "advised.udm.yaml",
    )
    (g,) = load_fixture(advised)
    result = run_fixture(g)
    assert result.passed, result.failures
    assert [w.name for w in result.ways if w.error] == [
        "host",
        "host (conservative)",
        "reordered",
        "reference",
    ]
