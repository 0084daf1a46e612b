"""``udm-cli package``: one zip of what a cluster's executors import to
run udm queries, for ``--py-files`` / ``spark.submit.pyFiles``.

It holds udm's engine (``udm.sdk`` and ``udm.host``; the CLI and its
dependencies stay out), every installed UDM library's top-level package,
and udm's pure-Python runtime dependencies (pluggy, sortedcontainers).
numpy, pandas and pyarrow are compiled and cannot be imported from a zip:
PySpark's Arrow support needs them on every executor anyway, and
docs/cluster.md shows how to ship them as a packed environment
(``spark.archives``) where a cluster lacks them.
"""

from __future__ import annotations

import importlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PURE_RUNTIME", "Package", "build_package"]

#: udm's runtime dependencies that are pure Python (zip-importable)
PURE_RUNTIME = ("pluggy", "sortedcontainers")
#: udm's packages the executors import (udm.cli and udm.templates are the CLI's)
ENGINE = ("udm.sdk", "udm.host")


@dataclass
class Package:
    """What went into the zip, by top-level name."""

    path: Path
    contents: list[str]
    skipped: dict[str, str]


def _package_files(name: str, prefix: str) -> dict[str, Path]:
    """The files of the imported package ``name`` under ``prefix/`` (no
    caches), from each of its locations."""
    module = importlib.import_module(name)
    files: dict[str, Path] = {}
    for location in getattr(module, "__path__", []):
        base = Path(location)
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files[f"{prefix}/{path.relative_to(base).as_posix()}"] = path
    return files


def build_package(target: Path) -> Package:
    """Write the executors' zip to ``target``: udm's engine, the installed
    UDM libraries and the pure-Python runtime, with directory entries (so
    the ``udm`` namespace package imports from it)."""
    from udm.host.registry import get_registry
    from udm.host.spark.shipping import module_zip

    files: dict[str, Path] = {}
    for name in ENGINE:
        files |= _package_files(name, name.replace(".", "/"))
    contents = ["udm"]
    skipped: dict[str, str] = {}
    registry = get_registry()
    # an installed library's UDMs live in its top-level package
    libraries = sorted(
        {e.source.split(":")[0].split(".")[0] for e in registry.entries if e.distribution}
    )
    for top in [*libraries, *PURE_RUNTIME]:
        if top in contents:
            continue
        zipped, why = module_zip(top, allow_runtime=True)
        if zipped is None:
            skipped[top] = why
            continue
        with zipfile.ZipFile(zipped) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    files[info.filename] = Path(zipped) / info.filename  # marker, read below
        contents.append(top)
    _write(target, files)
    return Package(target, contents, skipped)


def _write(target: Path, files: dict[str, Path]) -> None:
    """A zip of ``files`` (archive name -> file, or a member of a zip
    given as ``ZIP/member``) with an entry for every directory."""
    from udm.host.spark.shipping import with_dirs

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
        for arcname, path in sorted(with_dirs(files), key=lambda m: m[0]):
            info = zipfile.ZipInfo(arcname, (1980, 1, 1, 0, 0, 0))
            if path is None:
                info.external_attr = 0o40755 << 16 | 0x10
                out.writestr(info, b"")
                continue
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, _read(path))
    partial.replace(target)


def _read(path: Path) -> bytes:
    """A file's bytes, or a zip member's for ``ZIP/member`` paths."""
    if path.is_file():
        return path.read_bytes()
    for parent in path.parents:
        if parent.suffix == ".zip" and parent.is_file():
            with zipfile.ZipFile(parent) as zf:
                return zf.read(path.relative_to(parent).as_posix())
    raise FileNotFoundError(path)
