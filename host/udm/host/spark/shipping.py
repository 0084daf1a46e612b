"""Shipping Python code to Spark's executors, and explaining what was not.

UDMs travel to the executors by cloudpickle: a class or function defined
in a module the driver imported is pickled *by reference* (its module
and name), so the executor's Python worker must import that module. On a
local master the workers share the driver's machine and paths; on a
cluster, and through Spark Connect, the code has to be sent. This module
zips modules and packages (with directory entries, so namespace packages
import from the zip) and adds them to the session: ``addPyFile`` on a
classic session, ``addArtifacts(pyfile=True)`` under Spark Connect.

Only pure-Python code ships this way; a package with compiled extensions
must be installed on the cluster (see docs/cluster.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "NOT_SHIPPED",
    "Shipment",
    "add_py_files",
    "folder_zip",
    "module_zip",
    "ship_folder",
    "ship_modules",
    "with_dirs",
    "worker_import_problem",
]

#: top-level modules never shipped: udm itself and the runtime it needs
#: must be installed where the executors run (``udm-cli package``)
NOT_SHIPPED = frozenset(
    {"udm", "pyspark", "py4j", "numpy", "pandas", "pyarrow", "pluggy", "sortedcontainers"}
)

#: folders never searched for a query folder's code
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})
#: compiled extension suffixes, which cannot be imported from a zip
_COMPILED = (".so", ".pyd", ".dylib")
#: a fixed timestamp, so equal code gives an equal zip (and name)
_EPOCH = (1980, 1, 1, 0, 0, 0)

_work: tempfile.TemporaryDirectory[str] | None = None


def _work_dir() -> Path:
    """Where the zips live: they must outlast the session (executors
    fetch them from the driver while jobs run), so for the whole process."""
    global _work
    if _work is None:
        _work = tempfile.TemporaryDirectory(prefix="udm-ship-")
    return Path(_work.name)


@dataclass
class Shipment:
    """What was shipped to the executors, and what could not be."""

    files: list[Path] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # module -> why

    def merge(self, other: Shipment) -> None:
        """Add what ``other`` ships to this shipment, so the files of several
        UDMs' modules go in one upload."""
        self.files += other.files
        self.modules += other.modules
        self.skipped |= other.skipped


def _zip(name: str, members: Iterable[tuple[str, Path | None]]) -> Path:
    """A zip of ``(archive name, file)`` members (``None``: a directory
    entry), named after ``name`` and a hash of the content, so equal code
    gives the same file and changed code a new one (Spark refuses a
    second file of one name with other content)."""
    members = sorted(members)
    digest = hashlib.sha256()
    for arcname, path in members:
        digest.update(arcname.encode() + b"\0")
        if path is not None:
            digest.update(path.read_bytes())
    target = _work_dir() / f"{name}-{digest.hexdigest()[:12]}.zip"
    if not target.exists():
        partial = target.with_suffix(".part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for arcname, path in members:
                info = zipfile.ZipInfo(arcname, _EPOCH)
                if path is None:
                    info.external_attr = 0o40755 << 16 | 0x10  # a directory
                    zf.writestr(info, b"")
                else:
                    info.external_attr = 0o644 << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
        partial.replace(target)
    return target


def with_dirs(files: dict[str, Path]) -> Iterator[tuple[str, Path | None]]:
    """The members for ``files`` (archive name -> file) plus an entry for
    every directory above them: zipimport finds a namespace package (a
    folder without ``__init__.py``) only by its directory entry."""
    dirs: set[str] = set()
    for arcname in files:
        parts = arcname.split("/")[:-1]
        dirs |= {"/".join(parts[: i + 1]) + "/" for i in range(len(parts))}
    yield from ((d, None) for d in dirs)
    yield from files.items()


def _code_files(folder: Path) -> dict[str, Path]:
    """The ``.py`` files under ``folder`` by archive name, skipping hidden
    folders, caches, virtualenvs and installed packages (data next to a
    query file stays where it is)."""
    found: dict[str, Path] = {}
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and not (here / d / "pyvenv.cfg").exists()
        )
        for name in files:
            if name.endswith(".py"):
                found[(here / name).relative_to(folder).as_posix()] = here / name
    return found


def folder_zip(folder: Path) -> Path | None:
    """A zip of the Python code under ``folder`` (importable as it is
    from the folder), or None when there is none."""
    files = _code_files(folder)
    if not files:
        return None
    return _zip(re.sub(r"\W", "_", folder.name) or "code", with_dirs(files))


def module_zip(name: str, allow_runtime: bool = False) -> tuple[Path | None, str]:
    """A zip of the top-level module or package ``name`` as installed
    here, or None and why it is not shipped (``allow_runtime``: zip udm's
    own runtime dependencies too, for ``udm-cli package``)."""
    top = name.split(".")[0]
    if top in NOT_SHIPPED and not (allow_runtime and top != "udm"):
        return None, "must be installed on the cluster"
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return None, "is part of Python"
    if top == "__main__":
        return None, "is the running script (its UDMs are pickled by value)"
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None, "is not importable here (defined in the query file, shipped with its UDMs)"
    files: dict[str, Path] = {}
    if spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            base = Path(location)
            for root, dirs, names in os.walk(base):
                dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
                for fname in names:
                    path = Path(root) / fname
                    if fname.endswith(".pyc"):
                        continue
                    files[f"{top}/{path.relative_to(base).as_posix()}"] = path
    elif spec.origin and spec.origin.endswith(".py"):
        files[f"{top}.py"] = Path(spec.origin)
    else:
        return None, f"is not pure Python ({spec.origin}): install it on the cluster"
    compiled = [a for a in files if a.endswith(_COMPILED) or ".cpython-" in a]
    if compiled:
        return None, f"has compiled extensions ({compiled[0]}): install it on the cluster"
    return _zip(top, with_dirs(files)), ""


def add_py_files(spark: Any, paths: Iterable[Path]) -> None:
    """Add ``.py``/``.zip``/``.egg`` files to the executors' import path:
    ``addArtifacts(pyfile=True)`` under Spark Connect, else ``addPyFile``."""
    from udm.host.spark.session import is_connect

    for path in paths:
        if is_connect(spark):
            spark.addArtifacts(str(path), pyfile=True)
        else:
            spark.sparkContext.addPyFile(str(path))


def ship_folder(spark: Any, folder: Path) -> Shipment:
    """Ship the Python code under ``folder`` (a query file's or a
    script's), importable on the executors as it is from the folder."""
    zipped = folder_zip(folder)
    shipment = Shipment()
    if zipped is not None:
        add_py_files(spark, [zipped])
        shipment.files.append(zipped)
        shipment.modules += sorted(
            {n.split("/")[0].removesuffix(".py") for n in zipfile.ZipFile(zipped).namelist()}
        )
    return shipment


def ship_modules(spark: Any, names: Iterable[str], exclude: Iterable[Path] = ()) -> Shipment:
    """Ship the top-level packages of the modules ``names`` (a UDM
    library's), except udm and its runtime, Python's own modules, modules
    that are not importable here, and those under the ``exclude`` folders
    (already shipped with them)."""
    shipment = Shipment()
    roots = [p.resolve() for p in exclude]
    for top in sorted({n.split(".")[0] for n in names}):
        module = sys.modules.get(top)
        source = getattr(module, "__file__", None) or ""
        if source and any(Path(source).resolve().is_relative_to(r) for r in roots):
            continue
        zipped, why = module_zip(top)
        if zipped is None:
            shipment.skipped[top] = why
            continue
        add_py_files(spark, [zipped])
        shipment.files.append(zipped)
        shipment.modules.append(top)
    return shipment


_IMPORT_ERROR = re.compile(
    r"^\s*(?P<error>(?:ModuleNotFoundError|ImportError):\s*(?P<text>.*?))\s*$", re.MULTILINE
)
_MODULE = re.compile(r"No module named '(?P<module>[^']+)'")


def worker_import_problem(text: str) -> str | None:
    """For the text of a Spark error whose cause is an import that failed
    in a Python worker: which module, what to do, and the worker's own
    error line; None for any other error."""
    found = list(_IMPORT_ERROR.finditer(text))
    if not found:
        return None
    last = found[-1]  # the innermost: the worker's own exception
    error = last.group("error")
    named = _MODULE.search(last.group("text"))
    module = named.group("module") if named else None
    what = f"module {module!r}" if module else "a module"
    top = (module or "").split(".")[0]
    if top in NOT_SHIPPED:
        advice = (
            f"{top} must be importable by the executors' Python: install udm with its "
            "runtime (numpy, pandas, pyarrow, pluggy, sortedcontainers) there, ship "
            "`udm-cli package`'s zip with --py-files, or ship a virtual environment "
            "packed by venv-pack with --archives; check which Python the workers run "
            "(PYSPARK_PYTHON where the executors or the Spark Connect server start: a "
            "Connect server reads that variable, not spark.pyspark.python) "
            "(docs/cluster.md)"
        )
    else:
        advice = (
            "udm-cli run ships the query file's folder and the UDM libraries a query uses "
            "by name, unless --no-ship; ship other modules with --py-files FILE.py|FILE.zip "
            "(SparkContext.addPyFile, or addArtifacts(..., pyfile=True) under Spark "
            "Connect), or install them in the executors' Python (docs/cluster.md)"
        )
    return f"a Spark Python worker could not import {what}: {advice}. The worker said: {error}"
