"""The stateful processor of a streaming query's operator graphs.

One :class:`GraphProcessor` serves a bucket of keys in
``transformWithStateInPandas`` (see :mod:`udm.host.spark.graphstream`,
which builds the query): it restores a key's
:class:`~udm.host.engines.livegraph.LiveGraph` from the bucket's one state
value, feeds it the key's rows of the micro-batch source by source (and
the watermark, every source's CTI), and writes its output as changelog
rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming.stateful_processor import TimerValues

from udm.host.engines.livegraph import LiveGraph
from udm.host.errors import CtiViolationError
from udm.host.plan import PlanNode
from udm.host.spark.advance import CtiGenerator
from udm.host.spark.evaluate import to_arrow_column
from udm.host.spark.statebucket import BucketProcessor
from udm.host.spark.streamoptions import AdvanceTime
from udm.host.spark.streamrows import (
    COUNT_COLUMNS,
    CTI_COL,
    E_COL,
    ID_COL,
    KIND_COL,
    NE_COL,
    ROWS_COL,
    S_COL,
    SEQ_COL,
    WHY_COL,
    python_id,
    row_problem,
    show_row,
    stats_row,
)
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, format_time
from udm.host.validation import CtiPolicy

__all__ = ["E_COL", "ID_COL", "KIND_COL", "NE_COL", "SRC_COL", "S_COL", "GraphProcessor"]

#: the internal columns of a source's rows (besides the packed rows')
SRC_COL = "udm__src"


class GraphProcessor(BucketProcessor):
    """The operator graphs of one bucket of keys (one per key), kept as
    one pickled state value with the bucket's event-time timer."""

    state_name = "graphs"

    def __init__(
        self,
        plan: PlanNode,
        keys: list[str],
        payloads: list[list[str]],
        out_columns: list[str],
        columns: list[str],
        *,
        consistency: Any,
        policy: str,
        advance: AdvanceTime | None,
        on_invalid: list[str],
        shapes: list[str],
        events: bool,
        buckets: int,
        integer_fields: dict[str, pa.DataType],
    ) -> None:
        self.plan = plan
        self.keys = keys
        self.payloads = payloads
        self.out_columns = out_columns
        self.columns = columns
        self.consistency = consistency
        self.policy = policy
        self.advance = advance
        self.ctis = CtiGenerator.of(advance) if advance is not None else None
        self.on_invalid = on_invalid
        self.shapes = shapes
        self.events = events
        self.buckets = buckets
        self.integer_fields = integer_fields

    # -------------------------------------------------------- state blob

    def load_bucket(self) -> dict[str, Any]:
        return self.state.load(
            lambda: {"keys": {}, "timer": None, "buckets": self.buckets, "broadcast": {}}
        )

    def save_bucket(self, bucket: dict[str, Any]) -> None:
        wanted = None
        if not self.events:  # broadcast CTIs reach idle keys through a timer
            wanted = min(
                (max(e["wm"], 0) // 1000 + 1 for e in bucket["keys"].values() if e["open"]),
                default=None,
            )
        self.state.save(bucket, wanted, timed=not self.events)

    def _graph(self, entry: dict[str, Any] | None) -> tuple[LiveGraph, dict[str, Any]]:
        graph = LiveGraph(self.plan, self.consistency, self.policy)
        if entry is None:
            meta = {
                "wm": -1,
                "ids": {},
                "next": 0,
                "n": [0] * len(self.payloads),
                "gen": [[0, None, None] for _ in self.payloads],  # count, max start, CTI
            }
            return graph, meta
        graph.restore(entry["graph"])
        return graph, entry

    def _store(
        self, bucket: dict[str, Any], kt: tuple[Any, ...], graph: LiveGraph, meta: dict[str, Any]
    ) -> None:
        meta["graph"] = graph.snapshot()
        meta["open"] = graph.cti < INFINITY
        bucket["keys"][kt] = meta

    # ---------------------------------------------------------- handlers

    def batch_rows(self, rows: Iterator[Any], timerValues: TimerValues) -> list[dict[str, Any]]:
        bucket = self.load_bucket()
        wm_ms = timerValues.getCurrentWatermarkInMs()
        wm = wm_ms * 1000 if wm_ms > 0 else None
        by_key: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
        late = 0
        for src, row in self._rows(rows):
            kt = tuple(row[k] for k in self.keys)
            if self.keys and row.get(KIND_COL) == "cti" and all(v is None for v in kt):
                late += self._broadcast_order(bucket, src, row)
                continue  # it served the source's watermark
            by_key.setdefault(kt, []).append((src, row))
        out: list[dict[str, Any]] = []
        for kt, key_rows in by_key.items():
            out += self._key(bucket, kt, key_rows, wm)
        if late:
            out.append(self._stats([None] * len(self.keys), (late, 0, 0), 0))
        if wm is not None:
            out += self._advance(bucket, wm, set(by_key))
        self.save_bucket(bucket)
        return out

    def timer_rows(self, bucket: dict[str, Any], wm: int) -> list[dict[str, Any]]:
        return self._advance(bucket, wm, set())

    def _rows(self, frames: Iterator[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The micro-batch's rows, source by source, each in its order
        (``seq``, else events by start, else as delivered)."""
        tables: dict[int, list[pa.Table]] = {}
        for pdf in frames:
            for blob, no_cti in zip(
                pdf[ROWS_COL].tolist(), pdf[CTI_COL].isna().tolist(), strict=True
            ):
                if no_cti:  # a broadcast CTI's copy with a time served the watermark
                    table = pa.ipc.open_stream(blob).read_all()
                    tables.setdefault(table.column(SRC_COL)[0].as_py(), []).append(table)
        for src in sorted(tables):
            table = pa.concat_tables(tables[src])
            names = table.column_names
            if SEQ_COL in names and table.column(SEQ_COL).null_count < table.num_rows:
                table = table.take(pc.sort_indices(table, sort_keys=[(SEQ_COL, "ascending")]))
            elif self.events:
                table = table.take(pc.sort_indices(table, sort_keys=[(S_COL, "ascending")]))
            for row in table.to_pylist():
                yield src, row

    def _broadcast_order(self, bucket: dict[str, Any], src: int, row: dict[str, Any]) -> int:
        """1 if a source's broadcast CTI goes backwards and the policy drops
        it (Spark dropped it from the watermark), else 0; raises under
        ``raise``."""
        t = row[S_COL]
        latest = bucket["broadcast"].get(src)
        if latest is None or t >= latest:
            bucket["broadcast"][src] = t
            return 0
        if CtiPolicy.parse(self.policy) is CtiPolicy.RAISE:
            raise CtiViolationError(
                Cti(t),
                row.get(SEQ_COL) or 0,
                f"broadcast CTI of source {src} goes backwards: its latest broadcast CTI is "
                f"{format_time(latest)}; fix the source, or use cti_policy='drop'",
            )
        return 1

    def _advance(self, bucket: dict[str, Any], wm: int, skip: set[Any]) -> list[dict[str, Any]]:
        """Bring every open key of the bucket to the watermark."""
        out = []
        for kt, entry in list(bucket["keys"].items()):
            if kt in skip or not entry["open"] or wm <= entry["wm"]:
                continue
            graph, meta = self._graph(entry)
            outputs = self._watermark(graph, meta, wm)
            self._store(bucket, kt, graph, meta)
            out += self._frame(outputs, list(kt), meta, (0, 0, 0))
        return out

    def _watermark(self, graph: LiveGraph, meta: dict[str, Any], wm: int) -> list[Any]:
        """Every source has reached the watermark (the least of theirs)."""
        meta["wm"] = wm
        out: list[Any] = []
        for src in range(len(self.payloads)):
            if graph.entries[src].validator.cti < wm:
                out += graph.push(src, Cti(wm))
        return out

    def _key(
        self,
        bucket: dict[str, Any],
        kt: tuple[Any, ...],
        rows: list[tuple[int, dict[str, Any]]],
        wm: int | None,
    ) -> list[dict[str, Any]]:
        """Feed one key's rows of the micro-batch to its graph."""
        graph, meta = self._graph(bucket["keys"].get(kt))
        before = graph.late
        outputs: list[Any] = []
        if wm is not None and wm > meta["wm"]:
            outputs += self._watermark(graph, meta, wm)
        invalid = 0
        for src, row in rows:
            element = self._element(src, row, meta, kt)
            if element is None:
                invalid += 1
                continue
            outputs += graph.push(src, element)
            if type(element) is Insert and self.advance is not None:
                cti = self._generate(meta["gen"][src], element.start)
                if cti is not None:
                    outputs += graph.push(src, Cti(cti))
        after = graph.late
        counts = (after[0] - before[0], after[1] - before[1], invalid)
        self._store(bucket, kt, graph, meta)
        return self._frame(outputs, list(kt), meta, counts)

    def _element(
        self, src: int, row: dict[str, Any], meta: dict[str, Any], kt: tuple[Any, ...]
    ) -> Element | None:
        """The row as a physical element (None: invalid and dropped)."""
        kind = row.get(KIND_COL) or "insert"
        s, e = row[S_COL], row[E_COL]
        if kind == "cti" and s is not None:
            return Cti(s)
        ident = row.get(ID_COL)
        reason = row_problem(
            kind,
            s,
            e,
            row.get(NE_COL),
            self.shapes[src],
            not self.events and ident is None,
            row.get(WHY_COL),
        )
        if reason is None and kind not in ("insert", "retract"):
            reason = f"row kind {kind!r} is not insert, retract or cti"
        if reason:
            if self.on_invalid[src] == "drop":
                return None
            shown = show_row(
                {c: v for c, v in row.items() if c != SRC_COL}, {S_COL: "start", E_COL: "end"}
            )
            raise ValueError(
                f"invalid input row of source {src} for key {list(kt)}: {reason}: {shown}; "
                "fix the row or use on_invalid='drop'"
            )
        end = INFINITY if e is None else e
        if kind == "retract":
            return Retract(python_id(ident), s, end, row[NE_COL])
        if ident is None:  # an event stream's rows have no ids
            ident = meta["n"][src]
            meta["n"][src] += 1
        else:
            ident = python_id(ident)
        return Insert(ident, s, end, {c: row[c] for c in self.payloads[src]})

    def _generate(self, gen: list[Any], start: int) -> int | None:
        """The CTI ``advance`` issues after an event starting at ``start``
        (``gen``: the source's count, latest start and latest CTI)."""
        assert self.ctis is not None
        gen[0] += 1
        if gen[1] is None or start > gen[1]:
            gen[1] = start
        cti = self.ctis.due(gen[0], gen[1], gen[2])
        if cti is not None:
            gen[2] = cti
        return cti

    # ----------------------------------------------------------- output

    def _frame(
        self,
        outputs: list[Any],
        key_values: list[Any],
        meta: dict[str, Any],
        counts: tuple[int, int, int],
    ) -> list[dict[str, Any]]:
        """Changelog rows of one key's output; output ids become numbers
        unique within the key (kept until a CTI makes the event final)."""
        ids: dict[Any, list[int]] = meta["ids"]
        rows: list[dict[str, Any]] = []
        for el in outputs:
            kind = type(el)
            row: dict[str, Any]
            if kind is Cti:
                row = {"kind": "cti", "id": None, S_COL: el.time, E_COL: None, NE_COL: None}
                # an event ending before a CTI can no longer be retracted
                for ident in [i for i, (_, end) in ids.items() if end < el.time]:
                    del ids[ident]
            elif kind is Insert:
                n = meta["next"]
                meta["next"] += 1
                ids[el.id] = [n, el.end]
                row = {"kind": "insert", "id": n, S_COL: el.start, E_COL: el.end, NE_COL: None}
                self._payload(row, el.payload, key_values)
            elif kind is Retract:
                n, _ = ids[el.id]
                if el.new_end <= el.start:
                    del ids[el.id]
                else:
                    ids[el.id] = [n, el.new_end]
                row = {
                    "kind": "retract",
                    "id": n,
                    S_COL: el.start,
                    E_COL: el.old_end,
                    NE_COL: el.new_end,
                }
            else:
                continue  # ExternalCTIs are the graph's own business
            row["seq"] = len(rows)
            rows.append(self._complete(row, key_values))
        if any(counts):
            rows.append(self._stats(key_values, counts, len(rows)))
        return rows

    def _payload(self, row: dict[str, Any], payload: Any, key_values: list[Any]) -> None:
        for c in self.out_columns:
            row[c] = payload.get(c) if isinstance(payload, dict) else None
        for f, dtype in self.integer_fields.items():
            if row[f] is not None:
                to_arrow_column([row[f]], dtype, _label(f, row[S_COL], row[E_COL]))

    def _complete(self, row: dict[str, Any], key_values: list[Any]) -> dict[str, Any]:
        for c in self.out_columns:
            row.setdefault(c, None)
        row.update(zip(self.keys, key_values, strict=True))
        for c in COUNT_COLUMNS:
            row.setdefault(c, None)
        return row

    def _stats(
        self, key_values: list[Any], counts: tuple[int, int, int], seq: int
    ) -> dict[str, Any]:
        row = stats_row(counts, seq)
        return self._complete(row, key_values)


def _label(column: str, start: int, end: int) -> Callable[[int], str]:
    """How an error names an output value (for :func:`to_arrow_column`)."""
    text = f"output column {column!r} of the event [{format_time(start)}, {format_time(end)})"
    return lambda _: text
