"""Shared fixtures: one small local SparkSession for the whole test session.

Starting Spark costs seconds, so every Spark test shares the session-scoped
``spark`` fixture: ``local[2]`` (CI machines have two cores), two shuffle
partitions, no UI, Arrow on, UTC session time zone and quiet logs. Tests that
need it are skipped, with the reason, only when no Java runtime is installed.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


# CI (CI=true) runs every property test on a fixed, derandomized set of
# examples so a run on main is reproducible; local runs draw new examples each
# time (and replay failures from .hypothesis/), which is where new bugs are found.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if _in_ci():
    settings.load_profile("ci")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``UDM_SKIP_CLUSTER=1`` skips the cluster tests (a minute or two of
    servers starting) on a developer's machine; never in CI."""
    if _in_ci() or os.environ.get("UDM_SKIP_CLUSTER", "").lower() not in ("1", "true", "yes"):
        return
    skip = pytest.mark.skip(reason="UDM_SKIP_CLUSTER is set (CI runs these tests)")
    for item in items:
        if "cluster" in item.keywords:
            item.add_marker(skip)


def _java_missing() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return None
    if shutil.which("java"):
        return None
    return "no Java runtime found (install Java 17 or set JAVA_HOME); Spark tests need it"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _java_missing()
    if reason:
        pytest.skip(reason)
    # Python workers must run this interpreter (with udm installed) and be
    # able to import test modules: UDMs defined at module level in a test
    # file are pickled by reference.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(TESTS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("TZ", "UTC")

    from udm.host.spark.session import local_session

    # small and deterministic: two partitions, no adaptive re-planning
    session = local_session(
        "udm-tests",
        conf={
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    try:
        yield session
    finally:
        session.stop()
