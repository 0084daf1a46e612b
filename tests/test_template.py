"""`udm-cli new` -> pip install -> `udm-cli list` / the package's pytest / `udm-cli test`.

The generated package must work with no edits: CI generates it into a temporary
directory, installs it (a real, non-editable pip install into a target
directory, so discovery goes through its installed entry point) and runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("generated")
    out = run(
        [str(BIN / "udm-cli"), "new", "lab_udms", "--no-input", "-o", str(root), "--author", "Ada"],
        cwd=root,
    )
    pkg = Path(out.strip())
    assert pkg == root / "lab-udms"
    site = root / "site"
    # install from a copy: the build leaves build/ and *.egg-info behind
    src = root / "src"
    shutil.copytree(pkg, src)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(src),
        ],
        cwd=root,
    )
    env = {**os.environ, "PYTHONPATH": str(site), "CI": "true"}
    return pkg, env


def test_generated_files(package: tuple[Path, dict[str, str]]) -> None:
    pkg, _ = package
    files = sorted(str(p.relative_to(pkg)) for p in pkg.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "fixtures/jumps_generated.udm.yaml",
        "fixtures/rms_tumbling.udm.yaml",
        "lab_udms/__init__.py",
        "lab_udms/py.typed",
        "pyproject.toml",
        "tests/test_udms.py",
    ]
    text = (pkg / "pyproject.toml").read_text()
    assert (
        'name = "lab-udms"' in text and '[project.entry-points.udm]\nlab_udms = "lab_udms"' in text
    )
    assert 'authors = [{ name = "Ada" }]' in text


def test_installed_package_is_discovered(package: tuple[Path, dict[str, str]]) -> None:
    pkg, env = package
    doc = json.loads(
        run([str(BIN / "udm-cli"), "list", "--library", "lab_udms", "--json"], pkg, env)
    )
    assert [(u["name"], u["flavor"]) for u in doc["udms"]] == [
        ("lab_udms.jumps", "time-sensitive non-incremental operator"),
        ("lab_udms.rms", "time-insensitive incremental aggregate"),
    ]
    assert doc["failed"] == []
    rms = next(u for u in doc["udms"] if u["name"] == "lab_udms.rms")
    assert {"invertible", "mergeable"} <= set(rms["properties"])


def test_generated_tests_pass(package: tuple[Path, dict[str, str]]) -> None:
    pkg, env = package
    out = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], pkg, env)
    assert "4 passed" in out


def test_udm_cli_test_passes(package: tuple[Path, dict[str, str]]) -> None:
    pkg, env = package
    run([str(BIN / "udm-cli"), "test", "."], pkg, env)


def test_generated_code_is_ruff_clean(package: tuple[Path, dict[str, str]]) -> None:
    """Lint and format: a new package's own CI (ruff check, ruff format
    --check) passes before its author changes a line."""
    pkg, _ = package
    assert run([str(BIN / "ruff"), "check", "--no-cache", "."], pkg) == "All checks passed!\n"
    formatted = run([str(BIN / "ruff"), "format", "--check", "--no-cache", "."], pkg)
    assert formatted == "3 files already formatted\n"


def test_generated_code_is_mypy_strict_clean(
    package: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """The package's tests passed a list of Inserts and Retracts that mypy
    typed list[object]. mypy finds udm's types in the make-built venv by
    itself (the import roots are on its path: udm-roots.pth), as a user's
    editor or CI would: no MYPYPATH, no shadow tree."""
    pkg, _ = package
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    cache = str(tmp_path / "cache")
    # udm followed silently, as an installed package is: only the new code is checked
    args = ["--strict", "--follow-imports=silent", "--cache-dir", cache, "."]
    out = run([str(BIN / "mypy"), *args], pkg, env)
    assert out.startswith("Success: no issues found"), out


def test_a_one_word_library_gets_a_project_folder_of_another_name(tmp_path: Path) -> None:
    """Folder ``geo`` holding package ``geo`` would shadow the installed
    library for code run next to it (a namespace package with no UDMs)."""
    out = run([str(BIN / "udm-cli"), "new", "geo", "--no-input", "-o", str(tmp_path)], tmp_path)
    assert Path(out.strip()) == tmp_path / "geo-udms"
    assert (tmp_path / "geo-udms" / "geo" / "__init__.py").is_file()
    text = (tmp_path / "geo-udms" / "pyproject.toml").read_text()
    assert 'name = "geo-udms"' in text and 'geo = "geo"' in text
    again = subprocess.run(
        [str(BIN / "udm-cli"), "new", "geo", "--no-input", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode != 0
    assert again.stderr.strip() == (
        f'error: "{tmp_path / "geo-udms"}" directory already exists; pass --force to '
        "overwrite or pick another --output-dir"
    )
