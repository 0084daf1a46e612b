"""How many rows of a source are invalid, and the first few.

Under ``on_invalid="raise"`` (and ``on_null_key="raise"``) a query fails
on the first invalid row Spark meets, inside the query itself (no extra
pass over valid data). When it does, :func:`summarized` runs one more job
over the source to say how many rows are invalid, by reason, and to show
the first few, so a user fixing the data sees the size of the problem
instead of one row per run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from udm.host.errors import InvalidEventError
from udm.host.plan import Source
from udm.host.spark.frame import Checks, quoted, source_checks

__all__ = ["SHOWN", "invalid_summary", "summarized"]

#: invalid rows shown in the message
SHOWN = 3


def invalid_summary(source: Source, shown: int = SHOWN) -> str | None:
    """``N invalid rows in all (by reason); the first few: ...`` for a
    DataFrame source's rows that fail its raising checks, or None."""
    if source.df is None:
        return None
    checks = source_checks(source)
    if not checks.raising:
        return None
    df = source.df
    problem = "__udm_problem"
    fields = ", ".join(quoted(c) for c in df.columns)
    row_json = f"to_json(struct({fields}), map('ignoreNullFields', 'false'))"
    bad = df.selectExpr(f"{Checks.problem(checks.raising)} AS {problem}", f"{row_json} AS row")
    bad = bad.where(f"{problem} IS NOT NULL")
    counts = {r[0]: int(r[1]) for r in bad.groupBy(problem).count().collect()}
    total = sum(counts.values())
    if not total:
        return None
    by_reason = ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts.items()))
    first = [f"{r.row} ({r[problem]})" for r in bad.limit(shown).collect()]
    rows = "row" if total == 1 else "rows"
    return f"{total:,} invalid {rows} in all ({by_reason}); the first {len(first)}: " + "; ".join(
        first
    )


@contextmanager
def summarized(source: Any) -> Iterator[None]:
    """Re-raise an :class:`InvalidEventError` with the count of the
    source's invalid rows and the first few (see :func:`invalid_summary`)."""
    try:
        yield
    except InvalidEventError as exc:
        if not isinstance(source, Source) or getattr(exc, "summarized", False):
            raise
        try:
            summary = invalid_summary(source)
        except Exception:  # the summary is a courtesy: never hide the error
            summary = None
        if summary is None:
            raise
        text = str(exc)
        head, sep, hint = text.partition(". Fix the data")
        enriched = InvalidEventError(f"{head}. {summary}{sep}{hint}")
        enriched.summarized = True  # type: ignore[attr-defined]
        enriched.spark_error = getattr(exc, "spark_error", None)  # type: ignore[attr-defined]
        raise enriched from None
