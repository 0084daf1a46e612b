"""What a query run dropped, by reason (``on_invalid="drop"``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["QueryMetrics"]

#: counts of internal bookkeeping (rows read) carry this prefix
INTERNAL_PREFIX = "__udm_"

log = logging.getLogger("udm.query")


class QueryMetrics:
    """What a run dropped under ``on_invalid="drop"``, by reason, and what a
    physical stream's ``cti_policy`` dropped or adjusted (``late (drop):
    dropped inserts``, ``late (adjust): adjusted inserts``, ...).

    For the Spark engine the counts are observed while the output is
    computed (no extra job), so they exist once an action on the output
    DataFrame has finished; ``invalid_rows()`` returns ``None`` before that
    (or waits with ``wait=True``).
    """

    def __init__(self, counts: Mapping[str, int] | None = None, observation: Any = None) -> None:
        self._counts = dict(counts) if counts is not None else None
        self._observation = observation
        self._logged = False

    def mark_reported(self) -> None:
        """The caller reports the dropped rows itself (``udm-cli run`` prints
        them with its output): they are not also logged as a warning."""
        self._logged = True

    def _ready(self) -> bool:
        if self._counts is not None or self._observation is None:
            return True
        try:
            return bool(self._observation._jo.future().isCompleted())
        except Exception:  # pragma: no cover - other Spark builds
            return True

    def invalid_rows(self, wait: bool = False) -> dict[str, int] | None:
        """Rows dropped by reason (only reasons that occurred), or ``None``
        if the output has not been computed yet and ``wait`` is false."""
        if self._counts is None and self._observation is not None:
            if not wait and not self._ready():
                return None
            got = self._observation.get
            self._counts = {k: int(v or 0) for k, v in got.items()}
        counts = {
            k: v for k, v in (self._counts or {}).items() if v and not k.startswith(INTERNAL_PREFIX)
        }
        if counts and not self._logged:
            self._logged = True
            adjusted = sum(n for k, n in counts.items() if "adjusted" in k)
            if adjusted:  # a CTI policy's "adjust": kept, with a changed lifetime
                log.warning(
                    "dropped %d and adjusted %d input rows: %s",
                    sum(counts.values()) - adjusted,
                    adjusted,
                    counts,
                )
            else:
                log.warning("dropped %d invalid input rows: %s", sum(counts.values()), counts)
        return counts

    def rows_read(self, wait: bool = False) -> int | None:
        """Source rows the run read, valid or not (observed with the drops;
        ``None`` when nothing was observed)."""
        self.invalid_rows(wait=wait)
        read = (self._counts or {}).get(INTERNAL_PREFIX + "rows")
        return None if read is None else int(read)

    @property
    def dropped(self) -> int:
        """Total rows dropped (waits for the output to be computed)."""
        return sum((self.invalid_rows(wait=True) or {}).values())

    def __repr__(self) -> str:
        return f"QueryMetrics(invalid_rows={self.invalid_rows()!r})"


# ------------------------------------------------------------ validation
