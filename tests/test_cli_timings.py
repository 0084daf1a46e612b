"""``udm-cli run --profile`` (udm.cli.timings): parsing Spark's timing
metrics, CPU of the process tree, and the report's lines (no Spark)."""

from __future__ import annotations

import os

import pytest

from udm.cli.timings import Profile, SparkWork, parse_duration, tree_cpu


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("350 ms", 0.35),
        ("1.2 s", 1.2),
        ("2.0 m", 120.0),
        (
            "total (min, med, max (stageId: taskId))\n"
            "12.5 s (1 ms, 3.0 s, 4.1 s (stage 3.0: task 7))",
            12.5,
        ),
        ("1,234 ms", 1.234),
        ("", 0.0),
        ("n/a", 0.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_tree_cpu_counts_this_process() -> None:
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("no /proc")
    before = tree_cpu()
    assert before is not None
    sum(i * i for i in range(300_000))  # some CPU
    after = tree_cpu()
    assert after is not None and after >= before
    assert tree_cpu(root=2**22 + 12345) is None  # no such process


def test_disabled_profile_records_nothing() -> None:
    profile = Profile(False)
    times = profile.query("q")
    with profile.setup("load"), profile.phase(times, "write"):
        pass
    assert profile.queries == [] and profile.before == {}
    assert times.seconds == {}


def test_profile_lines() -> None:
    profile = Profile(True)
    with profile.setup("load"):
        pass
    times = profile.query("hourly")
    with profile.phase(times, "plan"):
        pass
    with profile.phase(times, "write"):
        pass
    assert profile.query("hourly") is times
    assert list(times.seconds) == ["plan", "write"]
    times.work["write"] = SparkWork(1, 4, 6, 12, 35.6, 7.0)
    lines = profile.lines()
    assert lines[0].startswith("profile (wall seconds")
    assert lines[1].startswith("  load: ")
    assert lines[2].startswith("  hourly: ")
    assert lines[3].startswith("    plan: ")
    assert lines[4].startswith("    write: ")
    assert lines[4].endswith(
        "[1 SQL executions, 4 jobs, 6 stages, 12 tasks; Python workers 35.6 s "
        "(Python code 7.0 s), task time summed]"
    )
    assert lines[-1] == ("  (Spark's job and Python metrics need a classic session, not Connect)")
