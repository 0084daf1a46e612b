"""udm.testing: the fixture format, the runner's ways and checks, the
generator's dimensions, shrinking, the report, udm-cli test and the pytest plugin."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from udm.cli.main import app
from udm.host import (
    INFINITY,
    MIN_TIME,
    Cht,
    CountByStartWindow,
    Cti,
    HoppingWindow,
    Insert,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    derive_cht,
)
from udm.sdk import (
    IncrementalAggregate,
    IntervalEvent,
    Properties,
    TimeSensitiveOperator,
    WindowDescriptor,
    aggregate,
    function,
)
from udm.testing import (
    FixtureError,
    GenerateSpec,
    compose,
    load_fixture,
    parse_duration,
    run_fixture,
    scenario,
)
from udm.testing.runner import equivalent_stream

TESTS = Path(__file__).resolve().parent


def write(tmp_path: Path, text: str, name: str = "f.udm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# ------------------------------------------------------------ UDMs with bugs


class LeakySum(IncrementalAggregate):
    """Declares invertible, but remove() ignores payloads of 7."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, value: int) -> int:
        return state + value

    def remove(self, state: int, value: int) -> int:
        return state - value if value != 7 else state

    def result(self, state: int) -> int:
        return state


class SkippingSum(LeakySum):
    """add_many, meant as a faster add loop, skips the first payload."""

    properties = Properties(invertible=False)

    def add_many(self, state: int, values: list[int]) -> int:
        return state + sum(values[1:])


@aggregate
def first_value(values: list[int]) -> int:
    """Declares order_insensitive (the default), but depends on order."""
    return values[0]


class HonestFirst(IncrementalAggregate):
    properties = Properties(order_insensitive=False)

    def initial_state(self) -> list[int]:
        return []

    def add(self, state: list[int], value: int) -> list[int]:
        return [*state, value]

    def result(self, state: list[int]) -> int:
        return state[0]


class WrongOnce(IncrementalAggregate):
    """Off by one in the first 20 ``result`` calls after ``calls`` is reset,
    right ever after: a failure that does not reproduce when the same
    stream runs again."""

    calls = 0

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, value: int) -> int:
        return state + value

    def remove(self, state: int, value: int) -> int:
        return state - value

    def result(self, state: int) -> int:
        WrongOnce.calls += 1
        return state + (1 if WrongOnce.calls <= 20 else 0)


# ------------------------------------------------------------ the format


ISSUE_EXAMPLE = """\
    name: median over hopping windows
    udm: stats.median
    args: {}
    window: {kind: hopping, size: 10, hop: 5}
    input_clipping: none
    output_policy: align
    input:
      - {insert: e1, start: 1, end: 7, payload: 3}
      - {insert: e2, start: 4, end: 5, payload: {value: 8, kind: a}}
      - {retract: e1, new_end: 4}
      - {cti: 10}
    expected:
      - {start: 0, end: 10, payload: 5.5}
    """


BAD = ISSUE_EXAMPLE.replace("payload: {value: 8, kind: a}", "payload: 8")  # misses [-5, 5)
GOOD = BAD.replace(
    "      - {start: 0, end: 10, payload: 5.5}",
    "      - {start: 0, end: 10, payload: 5.5}\n      - {start: -5, end: 5, payload: 5.5}",
)


def test_the_issue_shape_loads_with_defaults_filled(tmp_path: Path) -> None:
    (f,) = load_fixture(write(tmp_path, ISSUE_EXAMPLE))
    assert f.name == "median over hopping windows" and f.udm == "stats.median"
    assert f.window_spec() == HoppingWindow(10, 5)
    assert f.elements() == [
        Insert("e1", 1, 7, 3),
        Insert("e2", 4, 5, {"value": 8, "kind": "a"}),
        Retract("e1", 1, 7, 4),  # start and old_end from the event's lifetime so far
        Cti(10),
    ]
    assert f.tolerance == 1e-9 and f.cti_policy == "raise" and f.line == 1


def test_times_durations_points_and_infinity(tmp_path: Path) -> None:
    (f,) = load_fixture(
        write(
            tmp_path,
            """\
            udm: stats.mean
            window: {kind: hopping, size: 10s, hop: 500ms}
            input:
              - {insert: a, start: 2026-01-01T00:00:00, payload: 1}
              - {insert: b, start: 5, end: inf, payload: 2}
              - {retract: b, new_end: 9}
            """,
        )
    )
    assert f.window_spec() == HoppingWindow(10_000_000, 500_000)
    t = 1_767_225_600_000_000  # 2026-01-01 UTC in microseconds
    assert f.elements() == [
        Insert("a", t, t + 1, 1),
        Insert("b", 5, INFINITY, 2),
        Retract("b", 5, INFINITY, 9),
    ]
    assert [parse_duration(v) for v in (7, "3us", "2ms", "1s", "1m", "1h", "1d")] == [
        7,
        3,
        2_000,
        1_000_000,
        60_000_000,
        3_600_000_000,
        86_400_000_000,
    ]
    with pytest.raises(ValueError, match="'1 week' is not a duration"):
        parse_duration("1 week")


def test_every_mistake_is_reported_with_file_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.median
        window: {kind: hopping, size: 10, hop: -5}
        input_clipping: sideways
        input:
          - {insert: e1, start: 1, end: 7, payload: 3}
          - {insert: e2, start: 4, end: 2}
          - {retrakt: e1, new_end: 4}
          - {cti: soon}
        expected:
          - {start: 0, end: 10, payload: 5.5, extra: 1}
        """,
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:2: window: window hop must be a positive duration, got -5",
        f"{path}:3: input_clipping: Input should be 'none', 'left', 'right' or 'full'",
        f"{path}:6: input.1: insert 'e2': end 2 must be after start 4 (omit end for a point event)",
        f"{path}:7: input.2: each input element needs one of the keys insert, retract or cti",
        f"{path}:8: input.3.cti: 'soon' is neither an ISO 8601 datetime nor 'inf'",
        f"{path}:10: expected.0.extra: Extra inputs are not permitted",
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("window: {kind: tumbling, size: 10}\n", ":1: (top level): give exactly one of input"),
        (
            # every expected row commented out: not "no expectation"
            "window: {kind: tumbling, size: 10}\ninput: []\nexpected:\n#  - {start: 0}\n",
            ":4: expected: is empty (null); write 'expected: []' for none, or remove the key "
            "to check against the reference evaluator",
        ),
        (
            "window: {kind: tumbling, size: 10}\ninput:\nexpected: []\n",
            ":3: input: is empty (null); write 'input: []' for none",
        ),
        (
            "window: {kind: tumbling, size: 10}\ninput: []\nexpected: []\nexpected_error: x\n",
            "give expected or expected_error, not both",
        ),
        (
            "window: {kind: tumbling, size: 10}\ngenerate: {events: 5}\nexpected: []\n",
            "generated scenarios have no expected output",
        ),
        (
            "window: {kind: tumbling, size: 10}\ngenerate: {events: 5}\nexpected_error: x\n",
            "expected_error needs a hand-written stream",
        ),
        (
            "window: {kind: tumbling, size: 10}\ngenerate: [{events: 5, key: a}]\n",
            "generate gives key 'a' but the fixture has no key field",
        ),
        (
            # a row without key was compared as a group of its own (reported FAIL)
            "window: {kind: tumbling, size: 10}\nkey: k\ninput: []\nexpected:\n"
            "  - {key: a, start: 0, end: 10, payload: 1}\n  - {start: 0, end: 10, payload: 1}\n",
            ":5: expected: row 1 has no key: the fixture groups by 'k', so every expected row "
            "names its group",
        ),
        ("window: {kind: weekly}\ninput: []\n", ":2: window.kind: Input should be 'hopping'"),
        ("window: {kind: tumbling, size: 10}\ninput: [\n", ":4: not valid YAML"),
        (
            "window: {kind: tumbling, size: 10}\nwindow: {kind: snapshot}\ninput: []\n",
            "f.udm.yaml:3: window: given twice (first on line 2); keep one",
        ),
    ],
)
def test_inconsistent_fixtures_are_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(FixtureError, match=re.escape(message)):
        load_fixture(write(tmp_path, "udm: stats.mean\n" + body))


def test_every_documents_mistakes_are_reported_together(tmp_path: Path) -> None:
    """Mistakes in several documents of a file, each with its line: an
    expected row that ends before it starts, an insert starting at inf, a
    date that is no calendar date (YAML parses it before the schema)."""
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input: [{insert: a, start: 1, payload: 1}]
        expected:
          - {start: 10, end: 0, payload: 1.0}
        ---
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: inf, payload: 1}
        """,
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:5: expected.0: end 0 must be after start 10 (a point event's row ends at "
        "start + 1)",
        f"{path}:10: input.0: insert 'a': start must be a finite time (only an end, a new_end "
        "or a CTI may be inf)",
    ]
    bad_date = write(tmp_path, "udm: stats.mean\ninput:\n  - {cti: 2024-13-01}\n", "d.udm.yaml")
    wanted = r"d\.udm\.yaml:3: '2024-13-01' is not a valid date or time"
    with pytest.raises(FixtureError, match=wanted):
        load_fixture(bad_date)


def test_no_mistake_hides_the_others(tmp_path: Path) -> None:
    """An empty key, a key given twice and a date that is no calendar date
    are each one mistake among the others: every mistake of the file is
    reported in one run, in line order (each once hid all the rest)."""
    path = write(
        tmp_path,
        """\
        udm: stats.max
        window: {kind: tumbling, size: 10x}
        input:
          - {insert: on, start: 1, payload: 1, payload: 2}
          - {insert: b, start: 2024-13-01, payload: 1}
        expected:
        """,
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:2: window.size: '10x' is not a duration; use int ticks or a number with a "
        "unit: us, ms, s, m, h, d",
        f"{path}:4: payload: given twice (first on line 4); keep one",
        f"{path}:4: input.0.insert: id True is a YAML boolean (YAML reads unquoted on, off, "
        "yes, no, true and false as booleans); quote the id, e.g. 'on'",
        # reported by the YAML loader, not again as input.1.start
        f"{path}:5: '2024-13-01' is not a valid date or time (month must be in 1..12); write "
        "an ISO 8601 datetime such as 2024-01-31T12:00:00Z",
        f"{path}:6: expected: is empty (null); write 'expected: []' for none, or remove the "
        "key to check against the reference evaluator",
    ]
    empty_input = write(tmp_path, "udm: stats.max\nwindow: {kind: weekly}\ninput:\n", "i.udm.yaml")
    with pytest.raises(FixtureError) as err:
        load_fixture(empty_input)
    assert [m.split(": ", 2)[1] for m in str(err.value).splitlines()] == [
        "window.kind",
        "input",
    ]


def test_payload_with_fields_is_reported_beside_a_mistake_in_payload(tmp_path: Path) -> None:
    """payload with fields was reported only once payload itself was valid:
    a wrong payload.min hid it (black-box round 11, B11)."""
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate:
          events: 5
          payload: {type: int, min: 0.5, max: 3}
          fields: {a: {type: int}}
        """,
    )
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines() == [
        f"{path}:5: generate.payload.min: type int needs a whole-number min, not 0.5; use type "
        "float for fractional values",
        f"{path}:6: generate.fields: give payload (scalar payloads) or fields (mapping "
        "payloads), not both: with fields, payload would be ignored; move its spec under a "
        "field name in fields",
    ]
    path.write_text(path.read_text().replace("min: 0.5", "min: 0"))
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert [line.split(": ", 2)[1] for line in str(err.value).splitlines()] == ["generate.fields"]


def test_empty_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="no fixtures in this file"):
        load_fixture(write(tmp_path, "---\n"))
    binary = tmp_path / "b.udm.yaml"
    binary.write_bytes(b"udm: stats.mean\nname: caf\xe9\n")
    with pytest.raises(FixtureError, match=r"b\.udm\.yaml:2: not UTF-8 text \(byte 0xe9\)"):
        load_fixture(binary)


def test_an_event_that_never_ends_under_grid_windows_is_explained(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 5, end: inf, payload: 1}
          - {insert: b, start: 6, end: inf, payload: 2}
          - {retract: b, new_end: 9}
          - {cti: 30}
        expected: []
        """,
    )
    (f,) = load_fixture(path)
    result = run_fixture(f)
    assert result.failures == [
        "input: event 'a' never ends (end: inf, not retracted); the expected output is the "
        "output CHT once the stream has ended, and TumblingWindow(size=10) windows over an "
        "event that never ends are infinitely many: end the event with a retraction in "
        "input, or use expected_error"
    ]

    # under cti_policy drop, a late retraction does not end the event either
    dropped = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        cti_policy: drop
        input:
          - {insert: a, start: 5, end: inf, payload: 1}
          - {cti: 30}
          - {retract: a, new_end: 9}
        expected: []
        """,
        "dropped.udm.yaml",
    )
    (g,) = load_fixture(dropped)
    assert run_fixture(g).failures[0].startswith("input: event 'a' never ends")


def test_an_element_the_stream_refuses_is_reported_once_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, end: 5, payload: 2}
          - {cti: 8}
          - {cti: 4}
        """,
    )
    # the input is no valid physical stream: the fixture is invalid (it
    # cannot run), as one retracting an id never inserted is, not failed
    with pytest.raises(FixtureError) as err:
        run_fixture(load_fixture(path)[0])
    assert str(err.value) == (
        f"{path}:6: input.2: CTI goes backwards: the latest CTI is 8; CTIs must not decrease "
        "(Cti(4)); correct the element, or expect the error with expected_error"
    )


def test_several_documents_are_several_fixtures(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE + "---\n" + ISSUE_EXAMPLE.replace("over hopping windows", "again")
    fixtures = load_fixture(write(tmp_path, text))
    assert [(f.name, f.line) for f in fixtures] == [
        ("median over hopping windows", 1),
        ("median again", 15),
    ]


# ------------------------------------------------------------ running


def test_a_passing_fixture_runs_four_ways(tmp_path: Path) -> None:
    (f,) = load_fixture(
        write(
            tmp_path,
            GOOD,
        )
    )
    result = run_fixture(f)
    assert result.passed, result.failures
    assert [w.name for w in result.ways] == [
        "host",
        "host (conservative)",
        "reordered",
        "reference",
    ]
    for way in result.ways:
        assert way.cht == Cht([(-5, 5, 5.5), (0, 10, 5.5)]), way.name


def test_a_wrong_expectation_fails_every_way_with_a_diff(tmp_path: Path) -> None:
    (f,) = load_fixture(write(tmp_path, BAD))
    result = run_fixture(f)
    assert result.failures == [
        f"{name} differs from expected: 0 missing, 1 extra"
        for name in ("host", "host (conservative)", "reordered", "reference")
    ]


def test_tolerance_for_floats(tmp_path: Path) -> None:
    text = """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        tolerance: 0.01
        input:
          - {insert: a, start: 1, payload: 1.0}
          - {insert: b, start: 2, payload: 2.0}
        expected:
          - {start: 0, end: 10, payload: 1.51}
        """
    assert run_fixture(load_fixture(write(tmp_path, text))[0]).passed
    strict = text.replace("tolerance: 0.01", "tolerance: 0.001")
    assert not run_fixture(load_fixture(write(tmp_path, strict))[0]).passed


def test_expected_error_must_happen_in_every_way(tmp_path: Path) -> None:
    text = """\
        udm: stats.median
        window: {kind: tumbling, size: 10}
        input:
          - {insert: a, start: 1, payload: {temp: 1}}
        expected_error: "pass field='<name>'"
        """
    assert run_fixture(load_fixture(write(tmp_path, text))[0]).passed
    wrong = text.replace("pass field='<name>'", "no such message")
    result = run_fixture(load_fixture(write(tmp_path, wrong))[0])
    assert len(result.failures) == 4
    assert result.failures[0].startswith(
        "host: expected an error containing 'no such message', got UdmInvocationError: UDM 'median'"
    )
    fine = text.replace("payload: {temp: 1}", "payload: 1")
    result = run_fixture(load_fixture(write(tmp_path, fine))[0])
    assert result.failures[0] == (
        "host: expected an error containing \"pass field='<name>'\", but it succeeded"
    )


def test_an_unknown_udm_fails_with_the_registry_hint(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("udm: stats.median", "udm: stats.medain")
    result = run_fixture(load_fixture(write(tmp_path, text))[0])
    assert result.failures[0].startswith(
        "UnknownUdmError: no UDM is registered as 'stats.medain'; did you mean stats.median"
    )


def test_declared_properties_are_checked(tmp_path: Path) -> None:
    base = """\
        udm: test_fixtures:{udm}
        window: {{kind: tumbling, size: 10}}
        input:
          - {{insert: a, start: 1, payload: 7}}
          - {{insert: b, start: 2, payload: 3}}
          - {{insert: c, start: 3, payload: 5}}
        """
    leaky = run_fixture(load_fixture(write(tmp_path, base.format(udm="LeakySum")))[0])
    assert "declared invertible, but in window [0, 10) removing 7 gives 15 instead of 8" in (
        leaky.failures
    )
    first = run_fixture(load_fixture(write(tmp_path, base.format(udm="first_value")))[0])
    assert first.failures == [
        "declared order_insensitive, but window [0, 10) gives 7 in canonical order and 5 in "
        "order [5, 3, 7]"
    ]
    honest = run_fixture(load_fixture(write(tmp_path, base.format(udm="HonestFirst")))[0])
    assert honest.passed, honest.failures
    # a window that never ends reads inf, as the fixture wrote it (it read 2**63 - 1)
    snapshot = base.format(udm="first_value").replace(
        "{kind: tumbling, size: 10}", "{kind: snapshot}"
    )
    snapshot = snapshot.replace("payload: 5}", "end: inf, payload: 5}")
    snapshot = snapshot.replace("payload: 3}", "end: inf, payload: 3}")
    opened = run_fixture(load_fixture(write(tmp_path, snapshot))[0])
    assert any(
        f.startswith("declared order_insensitive, but window [3, inf) gives ")
        for f in opened.failures
    ), opened.failures
    skipping = run_fixture(load_fixture(write(tmp_path, base.format(udm="SkippingSum")))[0])
    assert (
        "add_many differs from add: in window [0, 10) adding [7, 3, 5] at once gives 8 "
        "instead of 15" in skipping.failures
    )


class Spill(TimeSensitiveOperator):
    """Declares (by default) output_within_window, but its output runs five
    ticks past the window's end."""

    def compute_result(
        self, events: list[IntervalEvent[int]], window: WindowDescriptor
    ) -> list[IntervalEvent[int]]:
        return [IntervalEvent(e.start, window.end + 5, e.payload) for e in events]


class HonestSpill(Spill):
    properties = Properties(output_within_window=False)


def test_output_within_window_is_checked_under_keep(tmp_path: Path) -> None:
    body = """\
        udm: test_fixtures:{udm}
        window: {{kind: tumbling, size: 10}}
        output_policy: keep
        input:
          - {{insert: a, start: 1, payload: 7}}
          - {{cti: 20}}
        expected:
          - {{start: 1, end: 15, payload: 7}}
        """
    spill = run_fixture(load_fixture(write(tmp_path, body.format(udm="Spill")))[0])
    assert spill.failures == [
        "declared output_within_window, but window [0, 10) produced [1, 15) 7; declare "
        "output_within_window=False if outputs may leave their window"
    ]
    honest = run_fixture(load_fixture(write(tmp_path, body.format(udm="HonestSpill")))[0])
    assert honest.passed, honest.failures


def test_equivalent_stream_keeps_the_cht() -> None:
    import random

    cht = Cht([(1, 5, "a"), (3, INFINITY, "b"), (3, 4, "a")])
    stream = equivalent_stream(cht, random.Random(1))
    assert derive_cht(stream)[0] == cht
    assert any(isinstance(e, Retract) and e.new_end == e.start for e in stream)  # the ghost


def test_equivalent_stream_stays_within_time_near_its_last_tick(tmp_path: Path) -> None:
    """The reordered way inserted [INFINITY - 1, INFINITY) with a wrong end
    beyond INFINITY, no valid time, and so failed a valid fixture
    (black-box round 11, B8): every wrong end is a valid time now, shorter
    than the truth where no longer one fits, none for a one-tick event."""
    import random

    cht = Cht(
        [
            (INFINITY - 1, INFINITY, "last"),
            (INFINITY - 5, INFINITY, "open"),
            (INFINITY - 9, INFINITY - 1, "closed"),
            (INFINITY - 3, INFINITY - 2, "one tick"),
        ]
    )
    for seed in range(20):
        stream = equivalent_stream(cht, random.Random(seed))
        assert all(e.end <= INFINITY for e in stream if isinstance(e, Insert)), seed
        assert derive_cht(stream)[0] == cht, seed
    (f,) = load_fixture(
        write(
            tmp_path,
            """\
            udm: stats.max
            window: {kind: snapshot}
            input:
              - {insert: b, start: 9223372036854775806, end: inf, payload: 2}
            expected:
              - {start: 9223372036854775806, end: inf, payload: 2}
            """,
        )
    )
    result = run_fixture(f)
    assert result.passed, result.failures
    assert [(w.name, w.cht) for w in result.ways][2] == (
        "reordered",
        Cht([(INFINITY - 1, INFINITY, 2)]),
    )


# ------------------------------------------------------------ the generator


def spec(**kwargs: Any) -> GenerateSpec:
    return GenerateSpec(**{"events": 60, "seed": 1, **kwargs})


def events_of(stream: list[Any]) -> Cht:
    return derive_cht(stream)[0]


def test_generated_streams_are_valid_reproducible_and_sized() -> None:
    for duration in ("point", "short", "long", "infinite"):
        s = spec(duration=duration, speculation=0.3, disorder="high", cti_every=3)
        stream = scenario(s, window=HoppingWindow(10, 5))
        assert stream == scenario(s, window=HoppingWindow(10, 5))  # from the seed alone
        cht = events_of(stream)  # validates: CTIs never violated, retractions match
        assert len(cht) == 60, duration
        durations = {e.end - e.start for e in cht}
        if duration == "point":
            assert durations == {1}


def test_dimensions_change_what_they_say() -> None:
    in_order = scenario(spec(disorder="none", cti_every=0))
    starts = [e.start for e in in_order if isinstance(e, Insert)]
    assert starts == sorted(starts)
    shuffled = scenario(spec(disorder="high", cti_every=0))
    assert [e.start for e in shuffled if isinstance(e, Insert)] != sorted(starts)

    eager = scenario(spec(cti_every=1))
    lazy = scenario(spec(cti_every=20))
    assert sum(isinstance(e, Cti) for e in eager) > 3 * sum(isinstance(e, Cti) for e in lazy)
    assert not any(isinstance(e, Cti) for e in scenario(spec(cti_every=0)))

    speculative = scenario(spec(speculation=0.5, cti_every=0))
    assert sum(isinstance(e, Retract) for e in speculative) > 10
    assert not any(isinstance(e, Retract) for e in scenario(spec(cti_every=0)))

    dup = events_of(scenario(spec(duplicates=0.5, duration="point")))
    assert len({e.start for e in dup}) < 45

    def mean_overlap(level: str) -> float:
        cht = events_of(scenario(spec(overlap=level, duration="short")))
        return sum(sum(1 for o in cht if o.start < e.end and e.start < o.end) for e in cht) / len(
            cht
        )

    assert mean_overlap("low") < mean_overlap("medium") < mean_overlap("high")

    edges = events_of(scenario(spec(boundary=True, duration="short"), window=HoppingWindow(10, 5)))
    lifetimes = [(e.start, e.end) for e in edges]
    assert len(set(lifetimes)) < len(lifetimes)  # identical lifetimes
    assert any(e.start % 5 == 0 and e.end - e.start == 10 for e in edges)  # on window edges


def test_open_events_are_closed_for_grid_windows_only() -> None:
    s = spec(duration="infinite", cti_every=0)
    assert all(e.end < INFINITY for e in events_of(scenario(s, window=HoppingWindow(10, 5))))
    assert any(e.end == INFINITY for e in events_of(scenario(s)))


def test_infinite_events_may_start_at_the_beginning_of_time_except_on_grids() -> None:
    """The paper's infinite events span the whole time line (LE = -inf and
    RE = inf): over snapshot and count windows about half the scenarios open
    with an event from MIN_TIME; over grid windows, which refuse such an
    event, none does."""
    for window in (None, SnapshotWindow(), CountByStartWindow(3)):
        firsts = [
            min(
                e.start
                for e in events_of(scenario(spec(duration="infinite", seed=k), window=window))
            )
            for k in range(20)
        ]
        assert 4 <= firsts.count(MIN_TIME) <= 16, window
        assert all(f == MIN_TIME or f >= 0 for f in firsts)
    grid = [
        scenario(spec(duration="infinite", seed=k), window=HoppingWindow(10, 5)) for k in range(20)
    ]
    assert all(e.start > MIN_TIME for s in grid for e in events_of(s))


def test_durations_and_gaps_scale_with_the_grid_window() -> None:
    """Durations and gaps are in tenths of a grid window's size: the same
    seed over hour windows gives the stream over 10-tick windows, times
    scaled by 360,000,000 ticks (6 minutes); before, "short" events lasted
    5 ticks under hour windows, so every event fell in one window."""
    hour = 3_600_000_000
    small = events_of(scenario(spec(cti_every=0, disorder="none"), window=TumblingWindow(10)))
    large = events_of(scenario(spec(cti_every=0, disorder="none"), window=TumblingWindow(hour)))
    spans = [e.end - e.start for e in large]
    assert sum(spans) / len(spans) > hour / 4  # short: about half a window
    assert len({e.start // hour for e in large}) > 10  # the 60 events spread over windows
    assert len(small) == len(large) == 60
    assert events_of(scenario(spec(), window=TumblingWindow(10))) == events_of(
        scenario(spec(), window=TumblingWindow(5))
    )  # a tick is the least unit: windows of 10 ticks or fewer see the streams as before


def test_composition_unions_scenarios_with_keys_and_shift(tmp_path: Path) -> None:
    (f,) = load_fixture(
        write(
            tmp_path,
            """\
            udm: stats.mean
            window: {kind: tumbling, size: 10}
            key: sensor
            value: value
            generate:
              - {events: 20, key: a, seed: 1}
              - {events: 30, key: b, shift: 1000, seed: 2}
            """,
        )
    )
    from udm.testing import compose

    cht = events_of(compose(f.generators(), 0, [20, 30], f.window_spec(), f.key))
    by_key: dict[str, list[Any]] = {}
    for e in cht:
        by_key.setdefault(e.payload["sensor"], []).append(e)
    assert {k: len(v) for k, v in by_key.items()} == {"a": 20, "b": 30}
    assert min(e.start for e in by_key["b"]) >= 1000
    result = run_fixture(f)
    assert result.passed, result.failures
    assert result.checked_streams == 11  # the scenario plus 10 hypothesis examples


def test_each_intent_of_a_composition_keeps_its_own_disorder() -> None:
    """The later intents' disorder was silently ignored (the docs' example
    of a highly disordered second sensor arrived almost in order)."""
    calm = GenerateSpec(events=40, duration="point", disorder="none", key="a", seed=1)
    wild = GenerateSpec(events=40, duration="point", disorder="high", key="b", seed=2)
    stream = compose([calm, wild], 0, [40, 40], TumblingWindow(10), "sensor")

    def starts(prefix: str) -> list[int]:
        return [e.start for e in stream if isinstance(e, Insert) and str(e.id).startswith(prefix)]

    assert len(starts("s0.")) == len(starts("s1.")) == 40
    assert starts("s0.") == sorted(starts("s0."))  # disorder: none
    inversions = sum(a > b for a, b in itertools.pairwise(starts("s1.")))
    assert inversions >= 10  # disorder: high
    # one intent, or intents of one disorder: the streams are as before
    assert compose([calm], 0, [40]) == scenario(calm, 0, 40)


def test_stream_settings_come_from_the_first_intent(tmp_path: Path) -> None:
    """examples was the largest of the intents' (10 for any intent that did
    not set it), so the docs' example drew 10 streams where it said 3."""
    text = """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        key: sensor
        value: value
        generate:
          - {events: 10, key: a, seed: 1, examples: 3}
          - {events: 10, key: b, shift: 25, disorder: high, seed: 2}
        """
    result = run_fixture(load_fixture(write(tmp_path, text))[0])
    assert result.passed, result.failures
    assert result.checked_streams == 4  # the scenario plus the first intent's 3
    path = write(tmp_path, text.replace("seed: 2}", "seed: 2, examples: 5, cti_every: 2}"))
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value) == (
        f"{path}:7: generate.1.cti_every: intent 1 sets cti_every, examples, which the composed "
        "stream takes from the first intent only (one stream, one CTI eagerness and one count "
        "of streams drawn); move them to intent 0"
    )
    # beside a mistake of the intent's own, not hidden by it (docs/testing.md)
    path = write(tmp_path, text.replace("seed: 2}", "seed: 2, cti_every: 2, overlap: huge}"))
    with pytest.raises(FixtureError) as err:
        load_fixture(path)
    assert str(err.value).splitlines()[-2:] == [
        f"{path}:7: generate.1.overlap: Input should be 'low', 'medium' or 'high'",
        f"{path}:7: generate.1.cti_every: intent 1 sets cti_every, which the composed stream "
        "takes from the first intent only (one stream, one CTI eagerness and one count of "
        "streams drawn); move it to intent 0",
    ]


def test_an_empty_list_of_intents_is_a_mistake_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: nothing to generate
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        generate: []
        """,
        "empty.udm.yaml",
    )
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    message = (
        f"{path}:4: generate: is an empty list; give an intent (a mapping such as "
        "{events: 50}) or a list of one or more intents"
    )
    assert str(info.value) == message
    result = CliRunner().invoke(app, ["test", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.output.splitlines()[:2] == ["invalid fixture", message]
    with pytest.raises(ValueError, match="compose needs at least one intent"):
        compose([], 0, [])


def test_a_failure_shrinks_to_a_minimal_saveable_fixture(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: leaky
        udm: test_fixtures:LeakySum
        window: {kind: tumbling, size: 10}
        check_properties: false
        generate: {events: 200, duration: short, overlap: high, speculation: 0.3, seed: 3}
        """,
    )
    result = run_fixture(load_fixture(path)[0])
    assert not result.passed
    assert result.minimal is not None
    saved = write(tmp_path, result.minimal, "minimal.udm.yaml")
    (minimal,) = load_fixture(saved)
    inserts = [e for e in minimal.elements() if isinstance(e, Insert)]
    # far smaller than the 200 events, and it holds the payload remove() mishandles
    assert len(inserts) <= 20 and 7 in [e.payload for e in inserts]
    assert minimal.expected is not None  # the reference evaluator's answer, to check by hand
    assert not run_fixture(minimal).passed  # and it still fails


def test_a_failure_that_does_not_reproduce_still_fails(tmp_path: Path) -> None:
    """The search's failing stream is reported, with the reason, when its
    shrunk version passes on the final re-check (it had reported PASS)."""
    path = write(
        tmp_path,
        """\
        name: once
        udm: test_fixtures:WrongOnce
        window: {kind: tumbling, size: 10}
        check_properties: false
        generate: {events: 30, seed: 1, examples: 5}
        """,
    )
    WrongOnce.calls = 0
    result = run_fixture(load_fixture(path)[0])
    assert not result.passed
    assert result.failures[-1].startswith("this failure does not reproduce: the stream of seed 0")
    # the search's own differences are kept
    assert "differs from reference" in result.failures[0]
    assert result.minimal is not None and result.checked_streams == 1


# ------------------------------------------------------------ udm-cli test and pytest


def test_udm_cli_test_exit_codes_diff_and_plot(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        GOOD,
        "good.udm.yaml",
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["test", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "1 passed, 0 failed" in ok.output
    # paths reaching one file several times run it once (it ran and counted twice)
    again = runner.invoke(app, ["test", str(good), str(tmp_path), str(good), "--no-pytest"])
    assert again.exit_code == 0, again.output
    assert "1 passed, 0 failed" in again.output
    bad = write(
        tmp_path,
        BAD,
        "bad.udm.yaml",
    )
    png = tmp_path / "out.png"
    failed = runner.invoke(app, ["test", str(good), str(bad), "--plot", str(png)])
    assert failed.exit_code == 1
    assert "1 passed, 1 failed" in failed.output
    assert "host differs from expected: 0 missing, 1 extra" in failed.output
    assert "(not expected)" in failed.output and "[-5, 5)  5.5" in failed.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "timeline of bad.udm.yaml" in failed.output
    broken = write(tmp_path, "udm: x\nwindow: {kind: weekly}\ninput: []\n", "broken.udm.yaml")
    invalid = runner.invoke(app, ["test", str(broken)])
    assert invalid.exit_code == 1 and f"{broken}:2: window.kind" in invalid.output
    unknown = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {retract: b, new_end: 4}
        """,
        "unknown.udm.yaml",
    )
    invalid = runner.invoke(app, ["test", str(unknown)])
    assert invalid.exit_code == 1
    assert f"{unknown}:4: input.0: retract 'b' of an event not inserted" in invalid.output
    assert "no *.udm.yaml fixtures" not in invalid.output
    missing = runner.invoke(app, ["test", str(tmp_path / "nope.udm.yaml")])
    assert missing.exit_code == 1 and "no such file or directory" in missing.output


def test_invalid_fixtures_are_counted_in_the_summary(tmp_path: Path) -> None:
    """A file that does not load and a fixture whose input retracts an id
    it never inserted are not "0 failed": the summary counts them."""
    write(tmp_path, GOOD, "good.udm.yaml")
    write(tmp_path, "udm: x\nwindow: {kind: weekly}\ninput: []\n", "broken.udm.yaml")
    write(
        tmp_path,
        """\
        name: retracts a stranger
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        input:
          - {retract: b, new_end: 4}
        """,
        "stranger.udm.yaml",
    )
    result = CliRunner().invoke(app, ["test", str(tmp_path), "--no-pytest"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    lines = [line.rstrip() for line in result.output.splitlines()]
    assert lines[-1] == "1 passed, 0 failed, 2 invalid"
    rows = [re.sub(r"\s*│\s*", "|", line) for line in lines if line.startswith("│")]
    assert rows == [
        "|good.udm.yaml: median over hopping windows|stats.median|kind=hopping, size=10, hop=5"
        "|1|PASS|",
        "|broken.udm.yaml|-|-|0|INVALID|",
        "|stranger.udm.yaml: retracts a stranger|stats.mean|kind=tumbling, size=10|0|INVALID|",
    ]
    # only invalid ones: still a summary, not silence
    only = CliRunner().invoke(
        app, ["test", str(tmp_path / "broken.udm.yaml")], env={"COLUMNS": "200"}
    )
    assert only.exit_code == 1
    assert only.output.splitlines()[-1] == "0 passed, 0 failed, 1 invalid"
    # without invalid ones the line is as before
    good = CliRunner().invoke(app, ["test", str(tmp_path / "good.udm.yaml")])
    assert good.exit_code == 0 and good.output.splitlines()[-1] == "1 passed, 0 failed"


def test_nothing_to_test_says_why(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    runner = CliRunner()
    result = runner.invoke(app, ["test", str(empty)], env={"COLUMNS": "300"})
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"error: no *.udm.yaml fixtures or Python tests in {empty}"
    )
    tests = tmp_path / "some_test.py"
    tests.write_text("def test_it() -> None:\n    assert True\n")
    skipped = runner.invoke(app, ["test", str(tests), "--no-pytest"], env={"COLUMNS": "300"})
    assert skipped.exit_code == 1
    assert skipped.output.splitlines() == [
        f"error: nothing to run: {tests} is a Python test file, skipped because of "
        "--no-pytest (drop --no-pytest to run Python tests)"
    ]
    folder = runner.invoke(app, ["test", str(empty), "--no-pytest"], env={"COLUMNS": "300"})
    assert folder.exit_code == 1
    assert folder.output.splitlines() == [
        f"error: no *.udm.yaml fixtures in {empty} (Python tests were skipped because of "
        "--no-pytest)"
    ]


def test_pytest_collects_fixture_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        BAD,
        "bad.udm.yaml",
    )
    write(
        tmp_path,
        GOOD.replace("name: median over hopping windows", "name: good one"),
        "good.udm.yaml",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "FAILED bad.udm.yaml::median over hopping windows" in result.stdout
    assert "host differs from expected: 0 missing, 1 extra" in result.stdout


def test_a_saved_minimal_stream_keeps_the_comparison_settings(tmp_path: Path) -> None:
    from udm.testing.runner import stream_to_yaml

    path = write(
        tmp_path,
        """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        tolerance: 0.01
        abs_tolerance: 0.5
        check_properties: false
        generate: {events: 4}
        """,
    )
    (f,) = load_fixture(path)
    text = stream_to_yaml(f, [Insert("e0", 1, 2, 3.0), Cti(10)])
    assert "tolerance: 0.01\nabs_tolerance: 0.5\ncheck_properties: false\ninput:" in text
    saved = tmp_path / "saved.udm.yaml"
    saved.write_text(text)
    (again,) = load_fixture(saved)
    assert (again.tolerance, again.abs_tolerance, again.check_properties) == (0.01, 0.5, False)


def test_a_saved_minimal_stream_keeps_the_ends_of_time(tmp_path: Path) -> None:
    """An event from MIN_TIME to INFINITY is written -inf and inf, read
    back as the same ticks, and the saved fixture passes."""
    from udm.testing.runner import stream_to_yaml

    path = write(
        tmp_path,
        """\
        udm: stats.max
        window: {kind: snapshot}
        generate: {events: 4, duration: infinite}
        """,
    )
    (f,) = load_fixture(path)
    stream = [Insert("e0", MIN_TIME, INFINITY, 3.0), Insert("e1", 5, 9, 4.0)]
    text = stream_to_yaml(f, stream)
    assert "start: -inf" in text and "end: inf" in text
    saved = tmp_path / "saved.udm.yaml"
    saved.write_text(text)
    (again,) = load_fixture(saved)
    assert again.expected is not None
    assert [(e.start, e.end, e.payload) for e in again.expected] == [
        (MIN_TIME, 5, 3.0),
        (5, 9, 4.0),
        (9, INFINITY, 3.0),
    ]
    assert run_fixture(again).passed


# ------------------------------------------------------------ composed scenarios


KEYED_CHAIN = """\
    name: largest 3-tick mean per 6 ticks, per sensor
    udm: stats.mean
    window: {kind: tumbling, size: 3}
    key: sensor
    value: v
    then:
      - udm: stats.max
        window: {kind: tumbling, size: 6}
    input:
      - {insert: a, start: 0, payload: {sensor: s1, v: 2}}
      - {insert: b, start: 1, payload: {sensor: s1, v: 4}}
      - {insert: c, start: 1, payload: {sensor: s2, v: 10}}
      - {insert: d, start: 4, end: 9, payload: {sensor: s2, v: 20}}
      - {insert: e, start: 5, payload: {sensor: s1, v: 1}}
      - {insert: f, start: 2, payload: {sensor: s1, v: 6}}   # late: s1's [0, 3) was out
      - {retract: d, new_end: 5}
      - {cti: 12}
    expected:  # means: s1 [0, 3) 4.0, [3, 6) 1.0; s2 [0, 3) 10.0, [3, 6) 20.0
      - {start: 0, end: 6, key: s1, payload: 4.0}
      - {start: 0, end: 6, key: s2, payload: 20.0}
    """


def test_a_composed_scenario_feeds_each_output_stream_to_the_next_udm(tmp_path: Path) -> None:
    """The test-framework paper composes single-operator scenarios: the
    output of one is the input of the next. With a key, every step runs per
    group (s1's maximum would be 20.0 if the second step mixed the groups;
    s2's would be 20.0 in [6, 12) too if d's retraction were not passed on),
    and the first step's corrections reach the second: the speculative
    host output s1's [0, 3) as 3.0 before f arrived, then retracted it."""
    (f,) = load_fixture(write(tmp_path, KEYED_CHAIN))
    from udm.testing.chain import FixtureChain, build_chain

    first_step = FixtureChain(f, build_chain(f).steps[:1])
    way = first_step.host(f.elements(), "speculative", "raise")
    assert way.outputs is not None
    assert [(e.start, e.payload) for e in way.outputs if isinstance(e, Retract)] == [(0, 3.0)]
    result = run_fixture(f)
    assert result.passed, result.failures
    expected = Cht([(0, 6, {"key": "s1", "payload": 4.0}), (0, 6, {"key": "s2", "payload": 20.0})])
    for way in result.ways:
        assert way.cht == expected, way.name
    wrong = KEYED_CHAIN.replace("key: s1, payload: 4.0", "key: s1, payload: 20.0")
    failed = run_fixture(load_fixture(write(tmp_path, wrong, "w.udm.yaml"))[0])
    assert failed.failures == [
        f"{name} differs from expected: 1 missing, 1 extra"
        for name in ("host", "host (conservative)", "reordered", "reference")
    ]


def test_a_composed_scenario_checks_each_steps_properties(tmp_path: Path) -> None:
    """first_value declares order_insensitive falsely; in the second step it
    sees the first step's means, 4.0 and 1.0, in one window."""
    body = KEYED_CHAIN.replace("stats.max", "test_fixtures:first_value").split("    expected:")[0]
    result = run_fixture(load_fixture(write(tmp_path, body))[0])
    assert result.failures == [
        "step 2 (test_fixtures:first_value): declared order_insensitive, but window [0, 6) "
        "gives 4.0 in canonical order and 1.0 in order [1.0, 4.0]"
    ]


def test_a_generated_composed_failure_shrinks_to_a_saveable_chain(tmp_path: Path) -> None:
    """LeakySum's remove() ignores 7: as the second step it sees the first
    step's maxima, some of them 7, corrected by retractions."""
    path = write(
        tmp_path,
        """\
        name: leaky chain
        udm: stats.max
        window: {kind: tumbling, size: 4}
        then:
          - udm: test_fixtures:LeakySum
            window: {kind: tumbling, size: 8}
        check_properties: false
        generate: {events: 200, duration: short, overlap: high, speculation: 0.3, seed: 3}
        """,
    )
    result = run_fixture(load_fixture(path)[0])
    assert not result.passed
    assert result.minimal is not None
    assert "then:\n  - udm: test_fixtures:LeakySum\n    window: {kind: tumbling, size: 8}\n" in (
        result.minimal
    )
    (minimal,) = load_fixture(write(tmp_path, result.minimal, "minimal.udm.yaml"))
    assert minimal.then is not None and minimal.then[0].udm == "test_fixtures:LeakySum"
    assert len([e for e in minimal.elements() if isinstance(e, Insert)]) <= 20
    assert not run_fixture(minimal).passed  # and it still fails
    correct = path.read_text().replace("test_fixtures:LeakySum", "stats.max")
    passing = run_fixture(load_fixture(write(tmp_path, correct, "ok.udm.yaml"))[0])
    assert passing.passed, passing.failures
    assert passing.checked_streams == 11  # the full-size stream and ten searched


@pytest.mark.parametrize(
    ("then", "message"),
    [
        ("then: []\n", ":4: then: List should have at least 1 item"),
        ("then:\n  - {udm: stats.max}\n", ":5: then.0: udm 'stats.max' needs a window"),
        (
            "then:\n  - {where: demo.is_hot, window: {kind: snapshot}}\n",
            ":5: then.0: where applies a UDF to each event (its lifetime unchanged): drop "
            "window, which only windowed UDMs take",
        ),
        (
            "then:\n  - {select: demo.f, udm: stats.max}\n",
            ":5: then.0: give one operation: udm and window (a windowed UDA or UDO), where (a "
            "UDF that keeps the events it is true for) or select (a UDF that maps payloads); "
            "got ['udm', 'select']",
        ),
        (
            "then:\n  - {udm: stats.max, window: {kind: snapshot}, key: k}\n",
            ":5: then.0.key: Extra inputs are not permitted",
        ),
    ],
)
def test_composed_scenario_mistakes_name_the_step(tmp_path: Path, then: str, message: str) -> None:
    body = "udm: stats.mean\nwindow: {kind: tumbling, size: 10}\ninput: []\n" + then
    with pytest.raises(FixtureError, match=re.escape(message)):
        load_fixture(write(tmp_path, body))


# ------------------------------------------------------------ UDFs in fixtures


calls = {"n": 0}


@function
def counter_sign(x: float) -> float:
    """Declared deterministic (the default), but flips its sign every call."""
    calls["n"] += 1
    return x if calls["n"] % 2 else -x


@function
def above(x: float, limit: float) -> bool:
    return x > limit


KEYED_UDF_CHAIN = """\
    name: mean of readings above 10, per sensor
    where: test_fixtures:above
    args: {limit: 10}
    value: v
    key: sensor
    then:
      - udm: stats.mean
        window: {kind: tumbling, size: 10}
        value: v
    input:
      - {insert: a, start: 1, payload: {sensor: s1, v: 12}}
      - {insert: b, start: 2, payload: {sensor: s1, v: 5}}
      - {insert: c, start: 3, end: 30, payload: {sensor: s2, v: 30}}
      - {insert: d, start: 4, end: 8, payload: {sensor: s2, v: 2}}
      - {insert: e, start: 9, payload: {sensor: s1, v: 20}}
      - {retract: c, new_end: 6}
      - {retract: d, new_end: 5}
      - {cti: 10}
    expected:
      - {start: 0, end: 10, key: s1, payload: 16.0}
      - {start: 0, end: 10, key: s2, payload: 30.0}
    """


def test_a_udf_filter_runs_on_the_physical_stream_per_group(tmp_path: Path) -> None:
    """b and d fail the filter, and d's retraction goes with it; c's
    shortening passes (c alone would leave s2's window [10, 20) otherwise)."""
    (f,) = load_fixture(write(tmp_path, KEYED_UDF_CHAIN))
    result = run_fixture(f)
    assert result.passed, result.failures
    expected = Cht(
        [(0, 10, {"key": "s1", "payload": 16.0}), (0, 10, {"key": "s2", "payload": 30.0})]
    )
    for way in result.ways:
        assert way.cht == expected, way.name
    unfiltered = KEYED_UDF_CHAIN.replace("limit: 10", "limit: 0")
    failed = run_fixture(load_fixture(write(tmp_path, unfiltered, "u.udm.yaml"))[0])
    assert failed.failures == [
        f"{name} differs from expected: 2 missing, 2 extra"
        for name in ("host", "host (conservative)", "reordered", "reference")
    ]


def test_a_udf_alone_and_a_udf_after_a_windowed_udm(tmp_path: Path) -> None:
    body = """\
        select: stats.zscore
        args: {mean: 20}
        input:
          - {insert: a, start: 1, end: 4, payload: 23}
        expected_error: "UDF 'stats.zscore' failed on payload 23: TypeError"
        ---
        select: stats.zscore
        args: {mean: 20, stdev: 2}
        key: k
        input:
          - {insert: a, start: 1, end: 4, payload: 23}
        expected_error: "payload 23 has no field 'k'"
        ---
        udm: stats.max
        window: {kind: tumbling, size: 10}
        then:
          - {select: stats.zscore, args: {mean: 20, stdev: 2}}
          - {where: test_fixtures:above, args: {limit: 0}}
        input:
          - {insert: a, start: 1, payload: 23}
          - {insert: b, start: 12, payload: 17}
          - {insert: c, start: 25, payload: 26}
        expected:
          - {start: 0, end: 10, payload: 1.5}
          - {start: 20, end: 30, payload: 3.0}
        """
    for fixture in load_fixture(write(tmp_path, body)):
        result = run_fixture(fixture)
        assert result.passed, result.failures
        if fixture.expected is not None:
            assert [w.cht for w in result.ways] == [Cht([(0, 10, 1.5), (20, 30, 3.0)])] * 4


def test_a_udf_declared_deterministic_is_called_twice_per_payload(tmp_path: Path) -> None:
    body = """\
        select: test_fixtures:counter_sign
        input:
          - {insert: a, start: 1, payload: 3}
        """
    result = run_fixture(load_fixture(write(tmp_path, body))[0])
    gave = {"it gave 3, then -3", "it gave -3, then 3"}  # the parity depends on earlier calls
    udf_check = [m for m in result.failures if m.startswith("declared deterministic, but on")]
    assert len(udf_check) == 1 and any(
        udf_check[0] == f"declared deterministic, but on payload 3 {g}; declare "
        "@function(deterministic=False) if it may"
        for g in gave
    ), result.failures


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "where: stats.mean\n",
            "where: 'stats.mean' is a time-insensitive incremental aggregate, "
            "not a UDF (@function); run it with udm: and a window",
        ),
        (
            "udm: stats.zscore\nwindow: {kind: snapshot}\n",
            "udm: 'stats.zscore' is a UDF "
            "(@function), applied per event: write where: stats.zscore (a filter) or select: "
            "stats.zscore (a projection), without a window",
        ),
    ],
)
def test_a_udf_and_a_windowed_udm_are_not_confused(tmp_path: Path, body: str, message: str) -> None:
    result = run_fixture(load_fixture(write(tmp_path, body + "input: []\n"))[0])
    assert result.failures == [f"ValueError: {message}"]


def test_a_generated_udf_chain_shrinks_and_saves(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: leaky after a filter
        where: test_fixtures:above
        args: {limit: 3}
        then:
          - udm: test_fixtures:LeakySum
            window: {kind: tumbling, size: 10}
        check_properties: false
        generate: {events: 200, duration: short, overlap: high, speculation: 0.3, seed: 3}
        """,
    )
    result = run_fixture(load_fixture(path)[0])
    assert not result.passed and result.minimal is not None
    assert result.minimal.splitlines()[1:4] == [
        "where: test_fixtures:above",
        'args: {"limit": 3}',
        "then:",
    ]
    (minimal,) = load_fixture(write(tmp_path, result.minimal, "minimal.udm.yaml"))
    assert not run_fixture(minimal).passed


# ------------------------------------------------------------ stream shape and order


ORDER = """\
    udm: stats.mean
    window: {kind: tumbling, size: 10}
    output_order: start
    input:
      - {insert: a, start: 1, payload: 2}
      - {insert: b, start: 15, payload: 4}
      - {insert: c, start: 25, payload: 6}
      - {insert: d, start: 3, payload: 4}   # late: [0, 10) is output again after [10, 20)
      - {cti: 30}
    expected:
      - {start: 0, end: 10, payload: 3.0}
      - {start: 10, end: 20, payload: 4.0}
      - {start: 20, end: 30, payload: 6.0}
    """


def test_output_order_and_shape_are_checked_when_stated(tmp_path: Path) -> None:
    """The paper's output stream verifier checks the stream's shape and
    ordering; a fixture states what its sink needs."""
    result = run_fixture(load_fixture(write(tmp_path, ORDER))[0])
    late = "starts before the insert before it (Insert(id=OutputId(key=None, n=1), start=10, "
    assert result.failures == [
        f"host: output Insert(id=OutputId(key=None, n=2), start=0, end=10, payload=3.0) {late}"
        "end=20, payload=4.0)), but output_order is start",
        f"reordered: output Insert(id=OutputId(key=None, n=2), start=0, end=10, payload=2.0) "
        f"{late}end=20, payload=4.0)), but output_order is start",
    ]  # the conservative host outputs each window once, when final: in order
    unordered = run_fixture(load_fixture(write(tmp_path, ORDER.replace("start\n", "any\n", 1)))[0])
    assert unordered.passed, unordered.failures
    point = """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        output_policy: point_end
        output_shape: point
        input:
          - {insert: a, start: 1, payload: 2}
          - {insert: b, start: 12, payload: 4}
          - {insert: c, start: 3, payload: 4}
        expected:
          - {start: 9, end: 10, payload: 3.0}
          - {start: 19, end: 20, payload: 4.0}
        """
    assert run_fixture(load_fixture(write(tmp_path, point, "p.udm.yaml"))[0]).passed
    edge = run_fixture(
        load_fixture(write(tmp_path, point.replace("shape: point", "shape: edge"), "e.udm.yaml"))[0]
    )
    assert edge.failures[0] == (
        "host: output Insert(id=OutputId(key=None, n=0), start=9, end=10, payload=2.0) breaks "
        "output_shape edge: an edge event is inserted open (end inf) and ended by a retraction"
    )
    assert len(edge.failures) == 3  # host, conservative, reordered
    with pytest.raises(
        FixtureError, match=r":4: output_shape: Input should be 'point', 'interval'"
    ):
        load_fixture(write(tmp_path, point.replace("shape: point", "shape: dot"), "d.udm.yaml"))


# ------------------------------------------------------------ non-deterministic UDMs


@aggregate(deterministic=False)
def any_member(values: list[int]) -> int:
    """A sample of one: honestly not deterministic."""
    import random

    return random.choice(values)


SAMPLE = """\
    udm: test_fixtures:any_member
    window: {kind: tumbling, size: 10}
    key: k
    compare: lifetimes
    input:
      - {insert: a, start: 1, payload: {k: x, v: 1}}
      - {insert: b, start: 2, end: 14, payload: {k: x, v: 2}}
      - {insert: c, start: 3, payload: {k: y, v: 3}}
      - {retract: b, new_end: 8}
    expected:
      - {start: 0, end: 10, key: x}
      - {start: 0, end: 10, key: y}
    """


def test_a_non_deterministic_udm_is_checked_by_lifetimes(tmp_path: Path) -> None:
    """compare: lifetimes checks which windows produce output (and all the
    stream properties), not the values; b's retraction leaves no [10, 20)."""
    result = run_fixture(load_fixture(write(tmp_path, SAMPLE))[0])
    assert result.passed, result.failures
    for way in result.ways:
        assert way.cht == Cht([(0, 10, {"key": "x"}), (0, 10, {"key": "y"})]), way.name
    late = SAMPLE.replace("new_end: 8", "new_end: 12")  # b now reaches [10, 20) too
    failed = run_fixture(load_fixture(write(tmp_path, late, "late.udm.yaml"))[0])
    assert failed.failures == [
        f"{name} differs from expected: 0 missing, 1 extra"
        for name in ("host", "host (conservative)", "reordered", "reference")
    ]
    with pytest.raises(FixtureError, match="compare: lifetimes ignores payloads"):
        valued = SAMPLE.replace("key: y}", "key: y, payload: 3}")
        load_fixture(write(tmp_path, valued, "v.udm.yaml"))


def test_an_error_in_a_chain_names_its_step(tmp_path: Path) -> None:
    """The second step reads the first one's results (floats), which have
    no field 'v': every way says which step failed."""
    body = """\
        udm: stats.mean
        window: {kind: tumbling, size: 10}
        value: v
        then:
          - udm: stats.max
            window: {kind: tumbling, size: 20}
            value: v
        input:
          - {insert: a, start: 1, payload: {v: 2}}
        expected: []
        """
    result = run_fixture(load_fixture(write(tmp_path, body))[0])
    missing = "payload 2.0 has no field 'v'; check the value= argument"
    for way in result.ways:
        assert way.error is not None and way.error.startswith("StepError: step 2 (stats.max): ")
        assert missing in way.error, way.name


@pytest.mark.parametrize("start, datetimes", [("-inf", False), ("2024-01-01T00:00:00Z", True)])
def test_minus_inf_does_not_make_a_ticks_fixture_a_datetime_one(
    tmp_path: Path, start: str, datetimes: bool
) -> None:
    path = write(
        tmp_path,
        f"""
        udm: stats.max
        window: {{kind: snapshot}}
        input:
          - {{insert: a, start: "{start}", payload: 1}}
        expected: []
        """,
    )
    (fixture,) = load_fixture(path)
    assert fixture.written_with_datetimes() is datetimes


def test_a_saved_minimal_stream_reorders_with_the_seed_it_failed_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from udm.testing import runner

    path = write(
        tmp_path,
        """
        udm: stats.max
        window: {kind: tumbling, size: 10}
        reorder_seed: 1454
        input:
          - {insert: a, start: 1, end: 2, payload: 1}
        """,
    )
    (fixture,) = load_fixture(path)
    draws: list[float] = []
    shuffle = runner.equivalent_stream

    def recording(cht: Any, rng: random.Random, last: int = INFINITY - 1) -> Any:
        draws.append(rng.random())
        return shuffle(cht, rng, last)

    monkeypatch.setattr(runner, "equivalent_stream", recording)
    assert run_fixture(fixture).passed
    assert draws == [random.Random(1454).random()]
    text = runner.stream_to_yaml(fixture, fixture.elements(), reorder_seed=1454)
    assert "\nreorder_seed: 1454\ninput:\n" in text
    assert "reorder_seed" not in runner.stream_to_yaml(fixture, fixture.elements())
