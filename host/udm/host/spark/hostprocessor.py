"""The stateful processor of a streaming query's incremental hosts.

One :class:`HostProcessor` serves a bucket of keys in
``transformWithStateInPandas`` (see :func:`udm.host.spark.streaming.stream_changelog`,
which builds the query): it restores each key's :class:`udm.host.Host`
from the bucket's one state value, feeds it the key's rows of the
micro-batch (an event stream's as columns, the event lane; any other row
by row, the row lane), brings idle keys to the watermark, and writes the
hosts' output as changelog rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming.stateful_processor import TimerValues

from udm.host.engine import Host
from udm.host.errors import CtiViolationError, InvalidElementError
from udm.host.invoke import udm_label
from udm.host.plan import UdmCall
from udm.host.rows import normalize_value
from udm.host.spark.advance import CtiGenerator, applied_ctis
from udm.host.spark.evaluate import to_arrow_column
from udm.host.spark.members import key_codes, key_values, run_starts
from udm.host.spark.replay import output_id
from udm.host.spark.statebucket import BucketProcessor
from udm.host.spark.streamoptions import AdvanceTime
from udm.host.spark.streamrows import (
    COUNT_COLUMNS,
    E_COL,
    ID_COL,
    KIND_COL,
    NE_COL,
    S_COL,
    SEQ_COL,
    WHY_COL,
    python_id,
    row_problem,
    show_row,
    stats_row,
    unpack_rows,
)
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, format_time
from udm.host.validation import CtiPolicy
from udm.host.windows import WindowSpec, of_key

# applied_ctis lived here before it joined the rest of CTI generation
__all__ = ["HostProcessor", "applied_ctis"]


class HostProcessor(BucketProcessor):
    """The incremental hosts of one bucket of keys.

    The state API costs a round trip to the JVM per call, so keys are
    hashed into buckets and a bucket keeps exactly one value (its keys'
    :meth:`Host.snapshot` blobs and counters, pickled together) and at most
    one event-time timer: a few calls per bucket and micro-batch, whatever
    the number of keys and rows. Only the hosts of keys with rows (or that a
    new watermark reaches) are restored."""

    state_name = "hosts"

    def __init__(
        self,
        window: WindowSpec,
        call: UdmCall,
        options: dict[str, Any],
        keys: list[str],
        payload: list[str],
        shape: str,
        advance: AdvanceTime | None,
        on_invalid: str,
        columns: list[str],
        result_fields: list[str] | None,
        timers: bool,
        events: bool = False,
        buckets: int = 32,
        integer_fields: dict[str, pa.DataType] | None = None,
        input_names: dict[str, str] | None = None,
    ) -> None:
        self.buckets = buckets
        # the input's names of the internal columns, for rows in messages
        self.input_names = input_names or {
            S_COL: "start",
            E_COL: "end",
            NE_COL: "new_end",
            KIND_COL: "kind",
            ID_COL: "id",
            SEQ_COL: "seq",
        }
        # result fields with integer parts, whose values are checked as batch
        # output is: Spark's pandas conversion would truncate 21.5 to 21
        self.integer_fields = integer_fields or {}
        self.window = window
        self.call = call
        self.options = options
        self.keys = keys
        self.payload = payload
        self.shape = shape
        self.advance = advance
        self.on_invalid = on_invalid
        self.columns = columns
        self.result_fields = result_fields
        self.timers = timers
        self.events = events
        self.bare = events and isinstance(call.value, str)
        self.ctis = CtiGenerator.of(advance) if advance is not None else None

    # -------------------------------------------------------- state blob

    def load_bucket(self) -> dict[str, Any]:
        return self.state.load(lambda: {"keys": {}, "timer": None, "buckets": self.buckets})

    def _host(self, entry: dict[str, Any] | None) -> tuple[Host, dict[str, Any]]:
        host = Host(
            self.window,
            self.call.udm,
            value=None if self.bare else self.call.value_fn,
            retractions=not self.events,  # an event stream is insert-only
            **self.options,
        )
        if entry is None:
            return host, {"n": 0, "count": 0, "max_start": None, "gen": None}
        host.restore(entry["host"])
        return host, entry["meta"]

    def _store(
        self, bucket: dict[str, Any], key: tuple[Any, ...], host: Host, meta: dict[str, Any]
    ) -> None:
        live, open_windows = host.memory_size
        bucket["keys"][key] = {
            "host": host.snapshot(),
            "meta": meta,
            "cti": host.cti,
            "open": bool(live or open_windows),
        }

    def save_bucket(self, bucket: dict[str, Any]) -> None:
        # one event-time timer per bucket, at the next millisecond after the
        # lowest CTI of its keys that have windows a later CTI could finish
        wanted = None
        if self.timers:
            wanted = min(
                (
                    max(e["cti"], 0) // 1000 + 1
                    for e in bucket["keys"].values()
                    if e["open"] and e["cti"] < INFINITY
                ),
                default=None,
            )
        self.state.save(bucket, wanted, timed=self.timers)

    # ---------------------------------------------------------- handlers

    def batch_rows(self, rows: Iterator[Any], timerValues: TimerValues) -> list[dict[str, Any]]:
        bucket = self.load_bucket()
        table = unpack_rows(rows)
        names = table.column_names
        if SEQ_COL in names and table.column(SEQ_COL).null_count < table.num_rows:
            table = table.take(pc.sort_indices(table, sort_keys=[(SEQ_COL, "ascending")]))
        elif self.events and SEQ_COL not in names:  # events come in start order
            table = table.take(pc.sort_indices(table, sort_keys=[(S_COL, "ascending")]))
        wm = timerValues.getCurrentWatermarkInMs()
        wm_ticks = wm * 1000 if wm > 0 else None
        lane = self._event_lane(bucket, table, wm_ticks) if self.events else None
        frames, seen = lane if lane is not None else self._row_lane(bucket, table, wm_ticks)
        if wm_ticks is not None:
            frames += self._advance(bucket, wm_ticks, skip=seen)
        self.save_bucket(bucket)
        return [row for f in frames for row in f]

    def timer_rows(self, bucket: dict[str, Any], wm: int) -> list[dict[str, Any]]:
        return [row for f in self._advance(bucket, wm, set()) for row in f]

    # ----------------------------------------------------------- helpers

    def _advance(
        self, bucket: dict[str, Any], wm: int, skip: set[tuple[Any, ...]]
    ) -> list[list[dict[str, Any]]]:
        """Bring every key of the bucket with open windows to the watermark."""
        frames = []
        for kt, entry in list(bucket["keys"].items()):
            if kt in skip or not entry["open"] or wm <= entry["cti"]:
                continue
            host, meta = self._host(entry)
            outputs = host.process(Cti(wm))
            self._store(bucket, kt, host, meta)
            frames.append(self._frame(outputs, list(kt), (0, 0, 0)))
        return frames

    def _row_lane(
        self, bucket: dict[str, Any], table: pa.Table, wm: int | None
    ) -> tuple[list[list[dict[str, Any]]], set[tuple[Any, ...]]]:
        """Every row of the micro-batch in turn, key by key: any element
        kind, any row, errors and drops named per row."""
        n = table.num_rows
        cols = {c: table.column(c).to_pylist() for c in table.column_names}
        ids_given = ID_COL in cols  # an element stream's rows; an event stream ships none
        for name, value in ((KIND_COL, "insert"), (ID_COL, None), (NE_COL, None)):
            cols.setdefault(name, [value] * n)  # not shipped for an event stream
        payloads = self._payloads(table)
        kinds = [str(k).lower() for k in cols[KIND_COL]]
        cols[KIND_COL] = kinds
        by_key: dict[tuple[Any, ...], list[int]] = {}
        key_lists = [cols[k] for k in self.keys]
        rows_of = by_key.setdefault
        late = 0
        seqs = cols.get(SEQ_COL)
        for i, kt in enumerate(zip(*key_lists, strict=True) if key_lists else [()] * len(kinds)):
            broadcast = key_lists and kinds[i] == "cti" and all(v is None for v in kt)
            if broadcast and cols[S_COL][i] is not None:
                # a broadcast CTI: it served the watermark; here its order is
                # checked, as a host checks its CTIs
                late += self._broadcast_order(bucket, cols[S_COL][i], seqs and seqs[i])
                continue
            # (one without a time served nothing: its key's lane counts or
            # raises it as invalid)
            rows_of(kt, []).append(i)
        frames = [
            self._rows(bucket, kt, key_rows, cols, payloads, wm, ids_given)
            for kt, key_rows in by_key.items()
        ]
        if late:  # counted on a stats row of the broadcast's (null) key
            frames.append(self._frame([], [None] * len(self.keys), (late, 0, 0)))
        return frames, set(by_key)

    def _broadcast_order(self, bucket: dict[str, Any], t: int, seq: Any) -> int:
        """1 if broadcast CTI ``t`` goes backwards and the CTI policy drops
        it (Spark has dropped it from the watermark), else 0; raises under
        ``raise``. Every broadcast CTI comes to this one bucket (null keys
        hash alike), which keeps the latest."""
        latest = bucket.get("broadcast")
        if latest is None or t >= latest:
            bucket["broadcast"] = t
            return 0
        if CtiPolicy.parse(self.options["cti_policy"]) is CtiPolicy.RAISE:
            where = "" if seq is None else f" (seq {seq})"
            raise CtiViolationError(
                Cti(t),
                0 if seq is None else seq,
                f"broadcast CTI{where} goes backwards: the latest broadcast CTI is "
                f"{format_time(latest)}; fix the source, or use cti_policy='drop' to drop "
                "and count such CTIs",
            )
        return 1

    def _payloads(self, table: pa.Table) -> list[Any]:
        """What the host receives per row: the value column's values when
        the UDM reads one column of an event stream (no retraction will
        need the rest), else a dict of the payload columns."""
        if self.bare:
            return cast(list[Any], table.column(self.call.value).to_pylist())
        if self.payload:
            return cast(list[Any], table.select(self.payload).to_pylist())
        return [{} for _ in range(table.num_rows)]

    def _event_lane(
        self, bucket: dict[str, Any], table: pa.Table, wm: int | None
    ) -> tuple[list[list[dict[str, Any]]], set[tuple[Any, ...]]] | None:
        """An event stream's micro-batch (inserts without ids), key by key
        as columns: numpy groups the rows by key (keeping their order),
        checks them and finds the CTIs the advance-time settings generate;
        the host takes each key's inserts in one call. None when a row is
        invalid: the row lane then names it or drops it."""
        n = table.num_rows
        start_col, end_col = table.column(S_COL), table.column(E_COL)
        if start_col.null_count or (end_col.null_count and self.shape != "edge"):
            return None
        if WHY_COL in table.column_names and table.column(WHY_COL).null_count < n:
            return None  # a time string is no valid time
        starts = start_col.to_numpy()
        ends = end_col.fill_null(INFINITY).to_numpy()
        if bool((ends <= starts).any()):
            return None
        codes = [key_codes(table.column(k)) for k in self.keys]
        order = np.lexsort(codes[::-1]) if codes else np.arange(n)  # stable: keeps seq order
        firsts = run_starts(*[c[order] for c in codes]) if codes else np.zeros(1, np.int64)
        run_key_values = key_values(table, self.keys, order[firsts])
        starts, ends = starts[order], ends[order]
        start_list, end_list = starts.tolist(), ends.tolist()
        payloads = self._payloads(table.take(pa.array(order)))
        bounds = [*firsts.tolist(), n]
        frames, seen = [], set()
        for j, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            kt = tuple(col[j] for col in run_key_values)
            seen.add(kt)
            frames.append(
                self._key_events(
                    bucket,
                    kt,
                    starts[lo:hi],
                    (start_list[lo:hi], end_list[lo:hi], payloads[lo:hi]),
                    wm,
                )
            )
        return frames, seen

    def _key_events(
        self,
        bucket: dict[str, Any],
        kt: tuple[Any, ...],
        starts: np.ndarray,
        columns: tuple[list[int], list[int], list[Any]],
        wm: int | None,
    ) -> list[dict[str, Any]]:
        """One key's events of the micro-batch (the event lane)."""
        host, meta = self._host(bucket["keys"].get(kt))
        before = host.stats.dropped, host.stats.adjusted
        outputs: list[Element] = []
        if wm is not None and wm > host.cti:
            outputs += host.process(Cti(wm))
        s, e, p = columns
        n0 = meta["n"]
        meta["n"] += len(s)
        ids = list(range(n0, n0 + len(s)))
        lo = 0
        generated = self.ctis.batch(meta, starts) if self.ctis is not None else []
        for at, c in applied_ctis(starts, generated):
            outputs += host.process_inserts(ids[lo:at], s[lo:at], e[lo:at], p[lo:at])
            outputs += host.process(Cti(c))
            lo = at
        if lo < len(s):
            outputs += host.process_inserts(ids[lo:], s[lo:], e[lo:], p[lo:])
        counts = (host.stats.dropped - before[0], host.stats.adjusted - before[1], 0)
        self._store(bucket, kt, host, meta)
        return self._frame(outputs, list(kt), counts)

    def _rows(
        self,
        bucket: dict[str, Any],
        kt: tuple[Any, ...],
        indices: list[int],
        cols: dict[str, list[Any]],
        payloads: list[Any],
        wm: int | None,
        ids_given: bool = True,
    ) -> list[dict[str, Any]]:
        """Feed one key's rows of this micro-batch to its host (``ids_given``:
        rows of an element stream, whose inserts need ids)."""
        key_values = list(kt)
        host, meta = self._host(bucket["keys"].get(kt))
        before = host.stats.dropped, host.stats.adjusted
        invalid = 0
        outputs: list[Element] = []
        # inserts go to the host in runs, as columns (Host.process_inserts)
        run_ids: list[Any] = []
        run_starts: list[int] = []
        run_ends: list[int] = []
        run_payloads: list[Any] = []
        # a generated CTI waits until an element it could affect: the next
        # generated one replaces it when no event in between starts before it
        deferred: int | None = None

        def element(el: Element | None) -> None:
            nonlocal deferred
            if run_ids:
                outputs.extend(host.process_inserts(run_ids, run_starts, run_ends, run_payloads))
                for pending in (run_ids, run_starts, run_ends, run_payloads):
                    pending.clear()
            if deferred is not None:
                outputs.extend(host.process(Cti(deferred)))
                deferred = None
            if el is not None:
                outputs.extend(host.process(el))

        if wm is not None and wm > host.cti:
            element(Cti(wm))
        kinds, starts, ends, ids = cols[KIND_COL], cols[S_COL], cols[E_COL], cols[ID_COL]
        whys = cols.get(WHY_COL)  # shipped only for string times

        def shown(i: int) -> str:
            return show_row({c: v[i] for c, v in cols.items()}, self.input_names)

        for i in indices:
            kind = kinds[i]
            s, e = starts[i], ends[i]
            if kind == "cti" and s is not None:
                element(Cti(s))
                continue
            # an event stream's rows have no ids; an element stream's need one
            no_id = ids_given and ids[i] is None
            why = whys[i] if whys is not None else None
            reason = row_problem(kind, s, e, cols[NE_COL][i], self.shape, no_id, why)
            if reason:
                if self.on_invalid == "drop":
                    invalid += 1
                    continue
                raise ValueError(
                    f"invalid input row for key {key_values}: {reason}: "
                    f"{shown(i)}; fix the row or use on_invalid='drop'"
                )
            assert s is not None
            end = INFINITY if e is None else e
            if kind == "insert":
                if deferred is not None and s < deferred:
                    element(None)  # late for the waiting CTI: the policy applies
                ident = ids[i]
                if ident is None:  # an event stream has no ids (an element's was checked)
                    ident = meta["n"]
                    meta["n"] += 1
                else:
                    ident = python_id(ident)
                run_ids.append(ident)
                run_starts.append(s)
                run_ends.append(end)
                run_payloads.append(payloads[i])
                cti = self._generate(meta, s)
                if cti is not None:
                    deferred = cti
            elif kind == "retract":
                try:
                    element(Retract(python_id(ids[i]), s, end, cols[NE_COL][i]))
                except InvalidElementError as exc:
                    unknown = exc.reason.startswith("unknown event id")
                    if unknown and self.keys and all(v is None for v in key_values):
                        raise InvalidElementError(
                            exc.element,
                            exc.position,
                            f"{exc.reason}; in a streaming query a retraction must carry "
                            "its event's key columns (each key's state is apart; replay, "
                            "which sees the whole stream, can find the key, streaming "
                            "cannot)",
                        ) from None
                    raise
            else:
                raise ValueError(f"row kind {kind!r} is not insert, retract or cti: {shown(i)}")
        element(None)
        counts = (
            host.stats.dropped - before[0],
            host.stats.adjusted - before[1],
            invalid,
        )
        self._store(bucket, kt, host, meta)
        return self._frame(outputs, key_values, counts)

    def _generate(self, meta: dict[str, Any], start: int) -> int | None:
        """The time of the CTI the advance-time settings issue after an
        event starting at ``start``, if any (``meta`` counts the event)."""
        if self.ctis is None:
            return None
        meta["count"] += 1
        if meta["max_start"] is None or start > meta["max_start"]:
            meta["max_start"] = start
        cti = self.ctis.due(meta["count"], meta["max_start"], meta["gen"])
        if cti is not None:
            meta["gen"] = cti
        return cti

    def _frame(
        self, outputs: list[Element], key_values: list[Any], counts: tuple[int, int, int]
    ) -> list[dict[str, Any]]:
        """Output rows of one key (one DataFrame per call is built from all)."""
        rows: list[dict[str, Any]] = []
        for n, el in enumerate(outputs):
            row: dict[str, Any]
            if isinstance(el, Cti):
                row = {"kind": "cti", "id": None, S_COL: el.time, E_COL: None, NE_COL: None}
                result: Any = None
            elif isinstance(el, Insert):
                row = {
                    "kind": "insert",
                    "id": output_id(el.id),
                    S_COL: el.start,
                    E_COL: el.end,
                    NE_COL: None,
                }
                result = el.payload
            else:
                row = {
                    "kind": "retract",
                    "id": output_id(el.id),
                    S_COL: el.start,
                    E_COL: el.old_end,
                    NE_COL: el.new_end,
                }
                result = el.payload
            row["seq"] = n
            rows.append(self._finish(row, result, key_values))
        if any(counts):
            row = stats_row(counts, len(rows))
            rows.append(self._finish(row, None, key_values))
        return rows

    def _finish(self, row: dict[str, Any], result: Any, key_values: list[Any]) -> dict[str, Any]:
        row.update(zip(self.keys, key_values, strict=True))
        value = normalize_value(result)
        if self.result_fields is None:
            row[self.call.name] = value
        else:
            for f in self.result_fields:
                row[f] = None if value is None else value[f]
        for f, dtype in self.integer_fields.items():
            if row[f] is not None:
                to_arrow_column([row[f]], dtype, lambda _: self._result_label(row, key_values))
        for c in COUNT_COLUMNS:
            row.setdefault(c, None)
        return row

    def _result_label(self, row: dict[str, Any], key_values: list[Any]) -> str:
        window = f"[{format_time(row[S_COL])}, {format_time(row[E_COL])})"
        return f"UDM {udm_label(self.call.udm)!r} on window {window}{of_key(key_values)}"
