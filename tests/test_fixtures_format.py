"""Fixture files read as written: YAML 1.1 surprises (floats such as 1e-3,
booleans for on/yes ids) and generator settings that would be ignored or bent
are caught with file:line: field messages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from udm.host.stream import Insert
from udm.testing import FixtureError, load_fixture, run_fixture, scenario
from udm.testing.schema import GenerateSpec


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


# ------------------------------------------------------------ the generator


def test_generator_settings_that_would_be_ignored_or_bent_are_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        value: v
        generate:
          events: 10
          payload: {type: float, min: 100, max: 200}
          fields: {v: {type: int, min: 0, max: 1}}
        ---
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate: {events: 10, payload: {type: int, min: 0.5, max: 0.7}}
        ---
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate:
          - {events: 10, payload: {type: int, choices: [1, 2]}}
          - events: 10
            payload:
              type: float
              choices: [1.5]
        ---
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate: {payload: {type: choice, choices: [1, 2], max: 5}}
        """,
    )
    assert mistakes(path) == [
        "f.udm.yaml:7: generate.fields: give payload (scalar payloads) or fields (mapping "
        "payloads), not both: with fields, payload would be ignored; move its spec under a "
        "field name in fields",
        "f.udm.yaml:11: generate.payload.min: type int needs a whole-number min, not 0.5; use "
        "type float for fractional values",
        "f.udm.yaml:11: generate.payload.max: type int needs a whole-number max, not 0.7; use "
        "type float for fractional values",
        "f.udm.yaml:16: generate.0.payload.choices: choices are used only with type choice, "
        "not type int; write type: choice to pick from them, or drop choices",
        "f.udm.yaml:20: generate.1.payload.choices: choices are used only with type choice, "
        "not type float; write type: choice to pick from them, or drop choices",
        "f.udm.yaml:24: generate.payload.max: type choice picks from choices and does not use "
        "max; drop max, or use type int or float for values in [min, max]",
    ]


def test_a_mistake_in_one_intent_is_reported_once(tmp_path: Path) -> None:
    """Not once per form ``generate`` may take (one intent, or a list)."""
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate:
          events: 0
        """,
    )
    assert mistakes(path) == [
        "f.udm.yaml:4: generate.events: Input should be greater than or equal to 1",
    ]


def test_generated_payloads_stay_in_their_range() -> None:
    floats = GenerateSpec.model_validate(
        {"events": 200, "payload": {"type": "float", "min": 0.001, "max": 0.004}}
    )
    values = [e.payload for e in scenario(floats) if isinstance(e, Insert)]
    assert len(values) == 200
    assert all(0.001 <= v <= 0.004 for v in values)
    assert len(set(values)) > 100  # not all rounded to one value
    # two decimals as before where the range allows them
    ints = GenerateSpec.model_validate({"events": 50, "payload": {"type": "float", "max": 2}})
    assert all(round(e.payload, 2) == e.payload for e in scenario(ints) if isinstance(e, Insert))


def test_an_expected_row_without_payload_is_a_mistake(tmp_path: Path) -> None:
    """It was compared as None, failing with a diff instead of saying that
    the payload is missing; under compare: lifetimes rows give none."""
    path = tmp_path / "no_payload.udm.yaml"
    path.write_text(
        "udm: stats.mean\nwindow: {kind: tumbling, size: 10}\n"
        "input:\n  - {insert: a, start: 1, payload: 1}\n"
        "expected:\n  - {start: 0, end: 10, payload: 1.0}\n  - {start: 10, end: 20}\n"
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value) == (
        f"{path}:7: expected.1.payload: Field required (write payload: null for a None "
        "result, or compare: lifetimes to check lifetimes only)"
    )
    path.write_text(path.read_text().replace("payload: 1.0}", "payload: null}"))
    with pytest.raises(FixtureError, match=r":7: expected.1.payload: Field required"):
        load_fixture(path)
    lifetimes = path.read_text().replace("expected:", "compare: lifetimes\nexpected:")
    path.write_text(lifetimes.replace(", payload: null}", "}"))
    assert load_fixture(path)[0].compare == "lifetimes"
