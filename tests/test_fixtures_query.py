"""Query fixtures: named inputs and a query of CEDR operations, checked on
every in-process engine; mistakes named file:line, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.testing import FixtureError, load_fixture, run_fixture
from udm.testing.query_runner import QueryResult
from udm.testing.query_schema import QueryFixture

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "fixtures"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "q.udm.yaml"
    path.write_text(text)
    return path


def run_one(path: Path) -> QueryResult:
    (fixture,) = load_fixture(path)
    assert isinstance(fixture, QueryFixture)
    return run_fixture(fixture)


@pytest.mark.parametrize("name", ["cedr_join", "sliding_window", "absence"])
def test_the_shipped_query_fixtures_pass_on_every_way(name: str) -> None:
    result = run_one(EXAMPLES / f"{name}.udm.yaml")
    assert result.passed, result.failures
    assert [w.name for w in result.ways] == [
        "reference",
        "host",
        "host events (strong)",
        "host events (middle)",
    ]


JOIN = """\
name: join
inputs:
  s1:
    - {insert: a, start: 0, end: 6, payload: {P: x}}
    - {retract: a, new_end: 4}
  s2: [{insert: b, start: 3, end: 5, payload: {P: x}}]
query:
  - from: s1
  - join: s2
    on: P
expected:
"""


def test_a_wrong_expectation_fails_with_the_ways_that_differ(tmp_path: Path) -> None:
    result = run_one(write(tmp_path, JOIN + "  - {key: x, start: 3, end: 5, payload: {P: x}}\n"))
    assert not result.passed
    assert result.failures == [
        f"{way} differs from expected: 1 missing, 1 extra"
        for way in ("reference", "host", "host events (strong)", "host events (middle)")
    ]


def test_a_right_expectation_passes(tmp_path: Path) -> None:
    result = run_one(write(tmp_path, JOIN + "  - {key: x, start: 3, end: 4, payload: {P: x}}\n"))
    assert result.passed, result.failures


def test_every_schema_mistake_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  s1:
    - {insert: a, start: 0, end: 6}
    - {cti: 1, extra: 2}
query:
  - from: s1
  - set_duration: -3
  - jion: s2
  - shift: 2
    by: 3
expected: []
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}:4: inputs.s1.1.extra: ")
    assert lines[1].startswith(f"{path}:7: query.1.set_duration: ")
    assert lines[2].startswith(f"{path}:8: query.2: each query step names one operation")
    assert lines[3].startswith(f"{path}:10: query.3.by: ")
    assert len(lines) == 4


def test_names_that_do_not_fit_are_reported_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  s1: [{insert: a, start: 0, end: 6, payload: {P: 1}}]
query:
  - from: s1
  - union: s3
  - join: s4
    on: P
expected: []
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:5: query.1: no input or stream named 's3'; there are s1",
        f"{path}:6: query.2: no input or stream named 's4'; there are s1",
    ]


def test_a_missing_input_is_reported_with_field_mistakes(tmp_path: Path) -> None:
    """A misspelt option hid a step reading no input until it was fixed."""
    path = write(
        tmp_path,
        """\
inputs:
  s1: [{insert: a, start: 0, end: 6, payload: {P: 1}}]
query:
  - from: s1
  - join: s3
    onn: P
  - union: [s1, s4]
expected: []
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:5: query.1: no input or stream named 's3'; there are s1",
        f"{path}:6: query.1.onn: Extra inputs are not permitted",
        f"{path}:7: query.2: no input or stream named 's4'; there are s1",
    ]


def test_steps_that_cannot_be_built_are_reported_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  s1: {key: P, events: [{insert: a, start: 0, end: 6, payload: {P: 1, Q: 2}}]}
  s2: {key: Q, events: [{insert: b, start: 0, end: 6, payload: {P: 1, Q: 2}}]}
query:
  - from: s1
  - where: no.such_udf
  - union: s2
expected: []
""",
    )
    (fixture,) = load_fixture(path)
    with pytest.raises(FixtureError) as err:
        run_fixture(fixture)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}:6: query.1: where no.such_udf: UnknownUdmError: ")
    assert lines[1].startswith(f"{path}:7: query.2: union s2: OperatorError: ")
    assert "different key columns" in lines[1]


def test_field_mistakes_do_not_hide_steps_that_cannot_be_built(tmp_path: Path) -> None:
    """A misspelt duration hid a join of streams keyed differently and an
    unknown UDF until it was fixed (docs/testing.md: no mistake hides
    another); the step with the field mistake is not built."""
    path = write(
        tmp_path,
        """\
inputs:
  s1: {key: k, events: [{insert: a, start: 0, end: 5, payload: {k: 1}}]}
  s2: {key: j, events: [{insert: b, start: 0, end: 5, payload: {j: 1}}]}
query:
  - from: s1
  - join: s2
  - where: nosuch_udf
  - alter_lifetime: {start: nosuch, duration: 5x}
  - set_duration: 3
expected: []
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    lines = str(err.value).splitlines()
    assert [line.split(": ")[:3] for line in lines] == [
        [f"{path}:6", "query.1", "join s2"],
        [f"{path}:7", "query.2", "where nosuch_udf"],
        [
            f"{path}:8",
            "query.3.alter_lifetime.duration",
            "'5x' is not a duration; use int ticks or a number with a unit",
        ],
        [f"{path}:8", "query.3.alter_lifetime.start", "UnknownUdmError"],
    ]
    assert "the streams' keys differ (['k'] and ['j'])" in lines[0]
    assert "no UDM is registered as 'nosuch_udf'" in lines[1]
    assert "no UDM is registered as 'nosuch'" in lines[3]  # in the step not built


def test_an_input_mistake_does_not_hide_an_unknown_udf_of_a_step_reading_it(
    tmp_path: Path,
) -> None:
    """The steps reading an input with mistakes are not built, so their
    unknown UDF was reported only once the input was fixed."""
    path = write(
        tmp_path,
        """\
inputs:
  a:
    key: k
    events:
      - {insert: a1, start: 2, end: 6, payload: {k: x, v: 1}}
      - {insrt: a2, start: 3}
query:
  - from: a
  - shift: 1
  - where: nosuch.udf
expected: []
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}:6: inputs.a.events.1: each input element needs one")
    assert lines[1].startswith(f"{path}:10: query.2.where: UnknownUdmError: ")
    assert "no UDM is registered as 'nosuch.udf'" in lines[1]
    assert len(lines) == 2


def test_mistakes_of_fields_that_do_not_fit_do_not_hide_steps_not_built(tmp_path: Path) -> None:
    """Fields each valid but not fitting together (rows with and without a
    key) hid an unknown UDF until they were fixed."""
    path = write(
        tmp_path,
        """\
inputs:
  s1: [{insert: a, start: 0, end: 5}]
query:
  - from: s1
  - where: nosuch_udf
expected:
  - {key: 1, start: 0, end: 5, payload: null}
  - {start: 0, end: 5, payload: null}
""",
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}:5: query.1: where nosuch_udf: UnknownUdmError: ")
    assert lines[1].startswith(f"{path}:6: expected: some expected rows give a key and others")
    assert len(lines) == 2


def test_an_expected_error_of_an_operator(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  s1: [{insert: a, start: 0, end: 6}]
  s2: {key: k, events: [{insert: b, start: 0, end: 6, payload: {k: 1}}]}
query:
  - from: s1
  - join: s2
expected_error: keys differ
""",
    )
    assert run_one(path).passed


def test_generated_inputs_are_checked_against_the_reference(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  left:
    key: key
    generate: {events: 30, key: a, disorder: out_of_order, speculation: 0.3, examples: 3}
  right: {key: key, generate: {events: 20, key: a, seed: 7, duration: long, examples: 2}}
query:
  - from: left
  - left_anti_join: right
consistency: middle
""",
    )
    result = run_one(path)
    assert result.passed, result.failures
    assert result.checked_streams == 3  # the most examples any input asks for


def test_udm_cli_test_runs_query_fixtures_and_plots_them(tmp_path: Path) -> None:
    plot = tmp_path / "q.png"
    result = CliRunner().invoke(
        app,
        ["test", str(EXAMPLES / "absence.udm.yaml"), "--no-pytest", "--plot", str(plot)],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert "from shifts -> left_anti_join covered" in result.output
    assert "1 passed, 0 failed" in result.output
    assert plot.stat().st_size > 0


def test_external_ctis_and_finalize_cedr_table_5(tmp_path: Path) -> None:
    """CEDR 4.6, Table 5: a broken retraction chain before its insert, an
    ExternalCTI counting five elements; Finalize repairs it to [0, 4)."""
    path = write(
        tmp_path,
        """\
inputs:
  s:
    - {retract: p0, start: 0, old_end: 10, new_end: 8}
    - {retract: p0, start: 0, old_end: 6, new_end: 4}
    - {retract: p0, start: 0, old_end: 8, new_end: 6}
    - {insert: p0, start: 0, end: 10, payload: P0}
    - {external_cti: [0, 8], count: 5}
    - {insert: p1, start: 1, end: 5, payload: P1}
query:
  - from: s
  - finalize: inf
expected:
  - {start: 0, end: 4, payload: P0}
  - {start: 1, end: 5, payload: P1}
""",
    )
    result = run_one(path)
    assert result.passed, result.failures


def test_expected_rows_without_keys_for_a_grouped_output_are_named(tmp_path: Path) -> None:
    result = run_one(write(tmp_path, JOIN + "  - {start: 3, end: 4, payload: {P: x}}\n"))
    assert result.failures[0] == (
        "the query's output is grouped by ['P']: give every expected row its key, e.g. "
        "{key: ..., start: ..., end: ..., payload: ...}"
    )


def test_the_plot_names_inputs_and_draws_every_operator(tmp_path: Path) -> None:
    from udm.testing.report import plot_result

    result = run_one(EXAMPLES / "absence.udm.yaml")
    figure = plot_result(result, tmp_path / "absence.svg")
    assert [ax.get_ylabel() for ax in figure.axes] == [
        "1. shifts",
        "2. heartbeats",
        "3. set_duration 5\nin: output of 2",
        "3. set_duration 5\nout",
        "4. left_anti_join on sensor\nin 1: output of 1",
        "4. left_anti_join on sensor\nin 2: output of 3",
        "4. left_anti_join on sensor\nout",
    ]


def test_a_failing_query_fixture_plot_adds_the_expected_lane(tmp_path: Path) -> None:
    from udm.testing.report import plot_result

    result = run_one(write(tmp_path, JOIN + "  - {key: x, start: 3, end: 5, payload: {P: x}}\n"))
    figure = plot_result(result, tmp_path / "q.png")
    assert figure.axes[-1].get_ylabel() == "expected"


@pytest.mark.spark
def test_udm_cli_explain_plots_each_operator(spark: object, tmp_path: Path) -> None:
    query_file = tmp_path / "joined.py"
    query_file.write_text(
        "from udm.host import Stream\n"
        "from udm.host.stream import Cti, Insert\n\n\n"
        "def query(spark):\n"
        "    s1 = Stream.from_events([Insert('a', 2, 6, {'P': 'A1'}), Cti(1)])\n"
        "    s2 = Stream.from_events([Insert('b', 3, 5, {'P': 'A1'}), Cti(3)])\n"
        "    return s1.join(s2, on='P').shift(10)\n"
    )
    png = tmp_path / "joined.png"
    result = CliRunner().invoke(app, ["explain", str(query_file), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "join on P" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_operation_in_one_query_agrees_on_every_way(tmp_path: Path) -> None:
    """No expected: every way is compared with the reference engine."""
    path = write(
        tmp_path,
        """\
inputs:
  a:
    key: s
    events:
      - {insert: 1, start: 0, end: 8, payload: {s: x, t: 20}}
      - {insert: 2, start: 3, end: 30, payload: {s: y, t: 90}}
      - {cti: 2}
      - {insert: 3, start: 6, end: 9, payload: {s: x, t: 25}}
      - {retract: 1, new_end: 5}
  b:
    key: s
    events:
      - {insert: 4, start: 1, end: 4, payload: {s: x, t: 22}}
      - {cti: 10}
query:
  - from: a
  - union: b
  - where: patterns.between
    args: {low: -40, high: 60}
    value: t
  - select: stats.zscore
    args: {mean: 20, stdev: 2}
    value: t
    as: z
  - shift: -1
  - clip_to: 3
  - align: inf
  - udm: stats.mean
    window: {kind: tumbling, size: 4}
    value: z
""",
    )
    result = run_one(path)
    assert result.passed, result.failures
    reference = result.way("reference")
    assert reference is not None and reference.cht is not None
    assert len(reference.cht) > 0


def test_to_points_and_a_weak_level_check_strong_against_middle(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
inputs:
  a:
    - {insert: 1, start: 0, end: 8, payload: 1}
    - {insert: 2, start: 20, end: 30, payload: 2}
    - {insert: 3, start: 2, end: 9, payload: 3}     # late for remember 5
query:
  - from: a
  - to_points
consistency: {weak: 5}
expected:
  - {start: 0, end: 1, payload: 1}
  - {start: 20, end: 21, payload: 2}
""",
    )
    result = run_one(path)
    assert result.passed, result.failures


ECTI = """\
name: external cti count below arrived
inputs:
  s:
    - {insert: a, start: 1, end: 5, payload: 1}
    - {insert: b, start: 2, end: 5, payload: 2}
    - {external_cti: [0, 4], count: 1}
query:
  - from: s
  - shift: 1
"""


def test_an_input_finalize_refuses_is_an_expected_error_or_named_by_line(tmp_path: Path) -> None:
    """Before, Stream.from_events' OperatorError escaped the runner: a
    traceback from udm-cli test, and later fixtures of the file never ran."""
    assert run_one(write(tmp_path, ECTI + "expected_error: below\n")).passed
    with pytest.raises(FixtureError) as info:
        run_one(write(tmp_path, ECTI + "expected: []\n"))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'q.udm.yaml'}:6: ")
    assert "its count 1 is below the 2 elements already received" in message


def test_alter_lifetime_takes_module_attribute_udfs_for_both_functions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``duration: myudfs:half`` was refused as 'not a duration' while
    ``start: myudfs:bucket5`` was accepted."""
    (tmp_path / "myudfs.py").write_text(
        "from udm.sdk import function\n\n\n"
        "@function\ndef bucket5(t):\n    return t // 5 * 5\n\n\n"
        "@function\ndef half(s, e):\n    return (e - s) // 2 + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    text = """\
name: alter lifetime udfs
inputs:
  l:
    - {insert: a, start: 3, end: 20, payload: 1}
query:
  - from: l
  - alter_lifetime: {start: "myudfs:bucket5", duration: "myudfs:half"}
expected:
  - {start: 0, end: 9, payload: 1}
"""
    result = run_one(write(tmp_path, text))
    assert result.passed, result.failures
