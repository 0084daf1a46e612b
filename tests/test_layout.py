"""The code style rules of CONTRIBUTING.md that a reader can check, checked.

Each test names the offending ``file:line``, so a failure says where to
look: a module over 600 lines (one concept per module), a public
definition without a docstring, a function over complexity 20 without a
word on why, a private name imported from another module.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the import roots of the packages the rules cover, and their package names
PACKAGES = {
    ROOT / "sdk" / "udm" / "sdk": "udm.sdk",
    ROOT / "host" / "udm" / "host": "udm.host",
    ROOT / "testing" / "udm" / "testing": "udm.testing",
    ROOT / "cli" / "udm" / "cli": "udm.cli",
}
MAX_LINES = 600
MAX_COMPLEXITY = 20
#: files being reworked on other branches when these checks came (the
#: incremental grid); their few undocumented methods are theirs to document
#: as they land, and then the file leaves this set
DOCSTRINGS_PENDING: set[str] = set()


def _modules() -> Iterator[tuple[Path, str]]:
    """Every module file of the packages, with its dotted name."""
    for folder, package in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield path, ".".join((package, *parts))


MODULES = list(_modules())


def _where(path: Path, line: int, root: Path = ROOT) -> str:
    return f"{path.relative_to(root)}:{line}"


def test_no_module_is_over_600_lines() -> None:
    long = [
        f"{_where(path, 1)} has {n} lines"
        for path, _ in MODULES
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, "split by concept: " + "; ".join(long)


# ------------------------------------------------------------ docstrings


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def _is_setter(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@x.setter``/``@x.deleter``: the property's getter documents it."""
    return any(
        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
        for d in node.decorator_list
    )


def _documented_in_base(cls: type, name: str) -> bool:
    """Whether ``name`` overrides a base class's documented definition: its
    docstring is the base's, which tools (``help``, mkdocstrings) show."""
    for base in cls.__mro__[1:]:
        if name in vars(base):
            member = vars(base)[name]
            doc = inspect.getdoc(getattr(member, "fget", member))
            return bool(doc)
    return False


def _undocumented(path: Path, module_name: str, root: Path = ROOT) -> Iterator[str]:
    """``file:line name`` of each public definition of a module without a
    docstring (the module is imported only to look up base classes)."""
    tree = ast.parse(path.read_text())
    if ast.get_docstring(tree) is None:
        yield f"{_where(path, 1, root)} module {module_name}"
    module: object | None = None

    def visit(body: list[ast.stmt], owner: list[str]) -> Iterator[str]:
        nonlocal module
        for node in body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if node.name.startswith("_"):
                continue
            plain = not isinstance(node, ast.ClassDef)
            if plain and (_is_overload(node) or _is_setter(node)):  # type: ignore[arg-type]
                continue
            if ast.get_docstring(node) is None:
                exempt = False
                if owner and plain:
                    if module is None:
                        module = importlib.import_module(module_name)
                    cls: object = module
                    for part in owner:
                        cls = getattr(cls, part)
                    exempt = isinstance(cls, type) and _documented_in_base(cls, node.name)
                if not exempt:
                    qualified = ".".join((*owner, node.name))
                    yield f"{_where(path, node.lineno, root)} {qualified}"
            if isinstance(node, ast.ClassDef):
                yield from visit(node.body, [*owner, node.name])

    yield from visit(tree.body, [])


def test_every_public_definition_has_a_docstring() -> None:
    """Public modules, classes, functions and methods say why they exist;
    a method overriding a documented base method inherits its docstring."""
    missing = [
        line
        for path, name in MODULES
        if str(path.relative_to(ROOT)) not in DOCSTRINGS_PENDING
        for line in _undocumented(path, name)
    ]
    assert not missing, f"{len(missing)} without a docstring:\n" + "\n".join(missing)


# ------------------------------------------------------------ complexity


def _ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed")
    return found


def _explains_complexity(path: Path, line: int) -> bool:
    """Whether the function at ``line`` says why it is complex: a comment
    or docstring mentioning its complexity."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.lineno == line:
            lines = path.read_text().splitlines()[node.lineno - 1 : node.end_lineno]
            return any("complexity" in text.lower() for text in lines)
    return False


def _too_complex(paths: list[str]) -> list[dict[str, Any]]:
    """ruff's C901 findings (mccabe over :data:`MAX_COMPLEXITY`) in ``paths``."""
    done = subprocess.run(
        [
            _ruff(),
            "check",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "json",
            "--exit-zero",
            *paths,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def test_complex_functions_say_why() -> None:
    """A function over complexity 20 (mccabe, as ruff's C901 counts) is
    either split or says why it is not (the word ``complexity`` in its
    docstring or a comment, with the reason)."""
    found = _too_complex([str(folder) for folder in PACKAGES])
    silent = [
        f"{_where(Path(v['filename']), v['location']['row'])} {v['message']}"
        for v in found
        if not _explains_complexity(Path(v["filename"]), v["location"]["row"])
    ]
    assert not silent, "split them or say why:\n" + "\n".join(silent)


def test_the_complexity_check_finds_a_complex_function(tmp_path: Path) -> None:
    """The check above can fail: ruff reports a function of 21 branches."""
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(21))
    source = tmp_path / "complex.py"
    source.write_text(f"def f(x):\n{branches}\n    return -1\n")
    assert [v["code"] for v in _too_complex([str(source)])] == ["C901"]
    assert not _explains_complexity(source, 1)


# ------------------------------------------------------------ private names


def test_no_private_name_is_imported_across_modules() -> None:
    """``from udm.x import _y`` couples a module to another's internals."""
    found = []
    for path, _ in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("udm"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{_where(path, node.lineno)} {node.module}.{alias.name}")
    assert not found, "\n".join(found)


def test_the_docstring_check_sees_a_missing_one() -> None:
    """The docstring check can fail: it names an undocumented function and
    method, and exempts an override of a documented base method."""
    import tempfile

    source = (
        '"""A module."""\n'
        "class Base:\n"
        '    """A base."""\n'
        "    def run(self):\n"
        '        """Documented."""\n'
        "class Child(Base):\n"
        '    """A child."""\n'
        "    def run(self):\n"
        "        return 1\n"
        "    def other(self):\n"
        "        return 2\n"
        "def free():\n"
        "    return 3\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "layout_probe_module.py"
        path.write_text(source)
        sys.path.insert(0, folder)
        try:
            found = [line.split(" ", 1)[1] for line in _undocumented(path, path.stem, path.parent)]
        finally:
            sys.path.remove(folder)
            sys.modules.pop("layout_probe_module", None)
    assert found == ["Child.other", "free"]
