"""Every docstring example of udm.sdk and udm.host runs (sortedcontainers style:
an example where it explains more than prose, checked by the suite)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import udm.host
import udm.sdk


def _modules() -> list[str]:
    names = []
    for package in (udm.sdk, udm.host):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            # Spark's modules need a session; the pytest plugin needs pytest's state
            if ".spark" in info.name or info.name.endswith("pytest_plugin"):
                continue
            names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_there_are_docstring_examples() -> None:
    attempted = sum(
        doctest.testmod(importlib.import_module(n), report=False).attempted for n in MODULES
    )
    assert attempted >= 10
