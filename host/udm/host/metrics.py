"""What a query run dropped, by reason (``on_invalid="drop"``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ROWS", "QueryMetrics"]

#: counts of internal bookkeeping (rows read) carry this prefix
INTERNAL_PREFIX = "__udm_"

#: the count of every row a dropping source read
ROWS = INTERNAL_PREFIX + "rows"

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
        self._parts: tuple[QueryMetrics, ...] = ()
        self._logged = False

    @classmethod
    def combined(cls, parts: Sequence[QueryMetrics]) -> QueryMetrics:
        """The metrics of a run reading several sources (a union, a join):
        each reason's count summed over ``parts``, read when asked. Summing
        when the plan is made would wait for a dropping Spark source's
        ``Observation``, which only an action on the output completes: the
        planning of a union of such a source never returned."""
        if len(parts) == 1:
            return parts[0]
        out = cls(None)
        out._parts = tuple(parts)
        return out

    def _raw(self, wait: bool) -> dict[str, int] | None:
        """Every count, internal ones too, or ``None`` while not ready."""
        if self._counts is None and self._parts:
            got = [p._raw(wait) for p in self._parts]
            if any(g is None for g in got):
                return None
            counts: dict[str, int] = {}
            for g in got:
                for reason, n in (g or {}).items():
                    counts[reason] = counts.get(reason, 0) + n
            if not all(g and ROWS in g for g in got):
                # a source that drops nothing is not observed: the rows the
                # run read are not known (rows_read() is None)
                counts.pop(ROWS, None)
            self._counts = counts
        elif self._counts is None and self._observation is not None:
            if not wait and not self._ready():
                return None
            got_obs = self._observation.get
            self._counts = {k: int(v or 0) for k, v in got_obs.items()}
        return self._counts if self._counts is not None else {}

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
        raw = self._raw(wait)
        if raw is None:
            return None
        counts = {k: v for k, v in raw.items() if v and not k.startswith(INTERNAL_PREFIX)}
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
        read = (self._counts or {}).get(ROWS)
        return None if read is None else int(read)

    @property
    def dropped(self) -> int:
        """Total rows dropped (waits for the output to be computed)."""
        return sum((self.invalid_rows(wait=True) or {}).values())

    def __repr__(self) -> str:
        return f"QueryMetrics(invalid_rows={self.invalid_rows()!r})"


# ------------------------------------------------------------ validation
