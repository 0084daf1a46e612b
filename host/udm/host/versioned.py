"""Versioned pickles: the one layout both snapshot kinds are saved in.

A host snapshot (:mod:`udm.host.hostsnapshot`) and an operator-graph
snapshot (:class:`udm.host.engines.livegraph.LiveGraph`) are a pickled dict
tagged with a format name and a layout version, so a blob of the wrong
kind, or from a udm whose layout differs, is refused with a message
rather than half-restored.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["dump_versioned", "load_versioned"]


def dump_versioned(kind: str, version: int, fields: dict[str, Any]) -> bytes:
    """``fields`` pickled under the tags ``format`` (``kind``) and ``version``."""
    return pickle.dumps({"format": kind, "version": version, **fields}, pickle.HIGHEST_PROTOCOL)


def load_versioned(blob: bytes, kind: str, version: int, what: str) -> dict[str, Any]:
    """The dict :func:`dump_versioned` saved, once its tags are checked:
    ``ValueError`` naming ``what`` (``host snapshot``) when the blob is not
    of this ``kind`` or was written in another layout ``version``."""
    try:
        data = pickle.loads(blob)
    except Exception as exc:  # garbage can fail unpickling in any way at all
        raise ValueError(
            f"not a udm {what}: the {type(blob).__name__} given cannot be read "
            f"({type(exc).__name__}: {exc}); pass the bytes a snapshot() returned"
        ) from None
    if not isinstance(data, dict) or data.get("format") != kind:
        raise ValueError(f"not a udm {what}")
    if data.get("version") != version:
        raise ValueError(
            f"{what} version {data.get('version')} is not supported "
            f"(this udm reads version {version})"
        )
    return data
