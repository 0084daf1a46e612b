"""Streaming execution: the incremental host per key inside Structured Streaming.

A streaming DataFrame of events (point or interval rows) or of physical
stream elements (``insert``/``retract``/``cti`` rows) is grouped by key and
fed, micro-batch after micro-batch, to one :class:`udm.host.Host` per key
running inside ``transformWithStateInPandas``. Keys are hashed into
buckets; each bucket keeps exactly one value in the state store (its keys'
pickled :meth:`Host.snapshot` blobs plus a few counters) and at most one
event-time timer: the per-call state API is slow, so everything else lives
in that one blob.

CTIs reach a key in three ways:

* in-band: a CTI row carrying the key (or any CTI row when there are no
  keys) is processed in order with the key's other rows, in the same
  micro-batch, so a window's output appears in the micro-batch in which the
  CTI passing its end arrives;
* generated: :class:`AdvanceTime` settings make CTIs from each key's own
  events (every N events or every duration of application time, minus a
  delay), as StreamInsight's advance-time settings do for a stream;
* broadcast: a CTI row with null keys sets the nullable CTI column, on which
  the query's watermark is defined (rows with a null CTI column, i.e. all
  events, are never late for Spark: nothing is silently dropped). Every key
  receives ``Cti(watermark)`` before its rows of the next micro-batch, or from
  its timer when it has no rows.

The output is a changelog: ``kind`` (``insert``, ``retract``, ``cti`` or
``stats``), ``seq`` (output order within the key and micro-batch), ``id``
(unique within the key), ``start``, ``end``, ``new_end``, the key columns,
the result column(s), and the counts ``late_dropped``, ``late_adjusted`` and
``invalid_dropped`` (set on ``stats`` rows only). :func:`write_changelog`
stores it idempotently per batch id and :func:`changelog_cht` turns it back
into the current CHT.
"""

from __future__ import annotations

import bisect
import gc
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from udm.host.engine import Host
from udm.host.errors import CtiViolationError, InvalidElementError
from udm.host.invoke import instantiate, udm_label
from udm.host.plan import UdmCall, ValueArg
from udm.host.policies import InputClipping, OutputPolicy
from udm.host.registry import resolve_udm
from udm.host.rows import normalize_value
from udm.host.spark.evaluate import _holds_integers, call_type, to_arrow_column
from udm.host.spark.frame import TimeKind, map_in_arrow, q, show_time
from udm.host.spark.members import key_codes, key_values, run_starts
from udm.host.spark.replay import _n, refuse_batch_options
from udm.host.spark.session import share_driver_python
from udm.host.spark.statebucket import BucketState
from udm.host.spark.types import arrow_schema
from udm.host.stream import Cti, Element, Insert, Retract
from udm.host.time import INFINITY, format_time, to_duration_ticks, to_ticks
from udm.host.validation import CtiPolicy
from udm.host.windows import WindowSpec, of_key

__all__ = [
    "AdvanceTime",
    "changelog_cht",
    "read_changelog",
    "start_stream",
    "stream_changelog",
    "stream_counts",
    "write_changelog",
]

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

_KIND = "udm__kind"
_ID = "udm__id"
_S = "udm__s"
_E = "udm__e"
_NE = "udm__ne"
_SEQ = "udm__seq"
_CTI = "udm__cti"
_GROUP = "udm__group"
_ROWS = "udm__rows"
_COUNTS = ("late_dropped", "late_adjusted", "invalid_dropped")


@dataclass(frozen=True)
class AdvanceTime:
    """StreamInsight-style CTI generation, per key.

    Args:
        every_events: issue a CTI after every N events of the key.
        every: or after this much application time (ticks or a
            ``timedelta``) has passed since the key's last generated CTI.
        delay: the CTI lags the latest event start by this much.
        policy: what happens to an event that arrives behind a CTI:
            ``drop`` or ``adjust`` (counted in the ``stats`` rows), or
            ``raise`` (fails the micro-batch, naming the event).
    """

    every_events: int | None = None
    every: Any = None
    delay: Any = 0
    policy: Literal["drop", "adjust", "raise"] = "drop"

    def __post_init__(self) -> None:
        if self.every_events is None and self.every is None:
            raise ValueError("AdvanceTime needs every_events=N or every=<duration>")
        if self.every_events is not None and self.every_events < 1:
            raise ValueError(f"every_events must be at least 1, not {self.every_events}")
        CtiPolicy.parse(self.policy)

    @property
    def every_ticks(self) -> int | None:
        return None if self.every is None else _duration(self.every)

    @property
    def delay_ticks(self) -> int:
        return _duration(self.delay)


def _duration(value: Any) -> int:
    return to_duration_ticks(value)


def _ticks(df: DataFrame, name: str) -> tuple[Column, TimeKind]:
    dtype = df.schema[name].dataType
    c = F.col(q(name))
    if isinstance(dtype, T.TimestampType | T.TimestampNTZType):
        return F.unix_micros(c.cast("timestamp")), "timestamp"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return c.cast("long"), "long"
    raise TypeError(
        f"column {name!r} has type {dtype.simpleString()}; streaming times must be timestamps "
        "or integer ticks"
    )


class _HostProcessor(StatefulProcessor):
    """The incremental hosts of one bucket of keys.

    The state API costs a round trip to the JVM per call, so keys are
    hashed into buckets and a bucket keeps exactly one value (its keys'
    :meth:`Host.snapshot` blobs and counters, pickled together) and at most
    one event-time timer: a few calls per bucket and micro-batch, whatever
    the number of keys and rows. Only the hosts of keys with rows (or that a
    new watermark reaches) are restored."""

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
            _S: "start",
            _E: "end",
            _NE: "new_end",
            _KIND: "kind",
            _ID: "id",
            _SEQ: "seq",
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
        self._delay = advance.delay_ticks if advance is not None else 0
        self._step = advance.every_ticks if advance is not None else None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = BucketState(handle, "hosts", self.buckets)

    # -------------------------------------------------------- state blob

    def _load_bucket(self) -> dict[str, Any]:
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

    def _save_bucket(self, bucket: dict[str, Any]) -> None:
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

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Any]:
        collecting = gc.isenabled()
        gc.disable()  # as in Host.process_many: no cycles, many short-lived objects
        try:
            yield from self._input_rows(rows, timerValues)
        finally:
            if collecting:
                gc.enable()

    def _input_rows(self, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Any]:
        import pandas as pd

        bucket = self._load_bucket()
        table = _unpack(rows)
        names = table.column_names
        if _SEQ in names and table.column(_SEQ).null_count < table.num_rows:
            table = table.take(pc.sort_indices(table, sort_keys=[(_SEQ, "ascending")]))
        elif self.events and _SEQ not in names:  # events come in start order
            table = table.take(pc.sort_indices(table, sort_keys=[(_S, "ascending")]))
        wm = timerValues.getCurrentWatermarkInMs()
        wm_ticks = wm * 1000 if wm > 0 else None
        lane = self._event_lane(bucket, table, wm_ticks) if self.events else None
        frames, seen = lane if lane is not None else self._row_lane(bucket, table, wm_ticks)
        if wm_ticks is not None:
            frames += self._advance(bucket, wm_ticks, skip=seen)
        self._save_bucket(bucket)
        out = [row for f in frames for row in f]
        if out:
            yield pd.DataFrame(out, columns=self.columns, dtype=object)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Any]:
        import pandas as pd

        bucket = self._load_bucket()
        bucket["timer"] = None  # a fired timer is gone
        frames = self._advance(bucket, timerValues.getCurrentWatermarkInMs() * 1000, set())
        self._save_bucket(bucket)
        out = [row for f in frames for row in f]
        if out:
            yield pd.DataFrame(out, columns=self.columns, dtype=object)

    def close(self) -> None:
        pass

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
        ids_given = _ID in cols  # an element stream's rows; an event stream ships none
        for name, value in ((_KIND, "insert"), (_ID, None), (_NE, None)):
            cols.setdefault(name, [value] * n)  # not shipped for an event stream
        payloads = self._payloads(table)
        kinds = [str(k).lower() for k in cols[_KIND]]
        cols[_KIND] = kinds
        by_key: dict[tuple[Any, ...], list[int]] = {}
        key_lists = [cols[k] for k in self.keys]
        rows_of = by_key.setdefault
        late = 0
        seqs = cols.get(_SEQ)
        for i, kt in enumerate(zip(*key_lists, strict=True) if key_lists else [()] * len(kinds)):
            broadcast = key_lists and kinds[i] == "cti" and all(v is None for v in kt)
            if broadcast and cols[_S][i] is not None:
                # a broadcast CTI: it served the watermark; here its order is
                # checked, as a host checks its CTIs
                late += self._broadcast_order(bucket, cols[_S][i], seqs and seqs[i])
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
        start_col, end_col = table.column(_S), table.column(_E)
        if start_col.null_count or (end_col.null_count and self.shape != "edge"):
            return None
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
        for at, c in _applied(starts, self._generated(meta, starts)):
            outputs += host.process_inserts(ids[lo:at], s[lo:at], e[lo:at], p[lo:at])
            outputs += host.process(Cti(c))
            lo = at
        if lo < len(s):
            outputs += host.process_inserts(ids[lo:], s[lo:], e[lo:], p[lo:])
        counts = (host.stats.dropped - before[0], host.stats.adjusted - before[1], 0)
        self._store(bucket, kt, host, meta)
        return self._frame(outputs, list(kt), counts)

    def _generated(self, meta: dict[str, Any], starts: np.ndarray) -> list[tuple[int, int]]:
        """:meth:`_generate` over a key's events at once: the positions and
        times of the CTIs it would issue after them (meta updated alike).
        Between two CTIs nothing changes the rules, so each next one is
        found by a search on the running maximum start."""
        adv = self.advance
        m = len(starts)
        if adv is None or not m:
            return []
        count0, every, step = meta["count"], adv.every_events, self._step
        runmax = np.maximum.accumulate(starts)
        if meta["max_start"] is not None:
            runmax = np.maximum(runmax, meta["max_start"])
        cand = (runmax - self._delay).tolist()
        gen = meta["gen"]
        out: list[tuple[int, int]] = []
        j = 0
        while j < m:
            due = m
            if every is not None:
                due = min(due, -(-(count0 + j + 1) // every) * every - count0 - 1)
            if step is not None:
                due = j if gen is None else min(due, bisect.bisect_left(cand, gen + step, j))
            if due >= m:
                break
            c = cand[due]
            if gen is None or c > gen:
                gen = c
                out.append((due, c))
            j = due + 1
        meta["count"] = count0 + m
        meta["max_start"] = int(runmax[-1])
        meta["gen"] = gen
        return out

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
        kinds, starts, ends, ids = cols[_KIND], cols[_S], cols[_E], cols[_ID]

        def shown(i: int) -> str:
            return _show_row({c: v[i] for c, v in cols.items()}, self.input_names)

        for i in indices:
            kind = kinds[i]
            s, e = starts[i], ends[i]
            if kind == "cti" and s is not None:
                element(Cti(s))
                continue
            # an event stream's rows have no ids; an element stream's need one
            no_id = ids_given and ids[i] is None
            reason = _check(kind, s, e, cols[_NE][i], self.shape, no_id)
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
                    ident = _ident(ident)
                run_ids.append(ident)
                run_starts.append(s)
                run_ends.append(end)
                run_payloads.append(payloads[i])
                cti = self._generate(meta, s)
                if cti is not None:
                    deferred = cti
            elif kind == "retract":
                try:
                    element(Retract(_ident(ids[i]), s, end, cols[_NE][i]))
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
        event starting at ``start``, if any."""
        adv = self.advance
        if adv is None:
            return None
        meta["count"] += 1
        if meta["max_start"] is None or start > meta["max_start"]:
            meta["max_start"] = start
        candidate = meta["max_start"] - self._delay
        due = False
        if adv.every_events is not None and meta["count"] % adv.every_events == 0:
            due = True
        step = self._step
        if step is not None and (meta["gen"] is None or candidate >= meta["gen"] + step):
            due = True
        if due and (meta["gen"] is None or candidate > meta["gen"]):
            meta["gen"] = candidate
            return int(candidate)
        return None

    def _frame(
        self, outputs: list[Element], key_values: list[Any], counts: tuple[int, int, int]
    ) -> list[dict[str, Any]]:
        """Output rows of one key (one DataFrame per call is built from all)."""
        rows: list[dict[str, Any]] = []
        for n, el in enumerate(outputs):
            row: dict[str, Any]
            if isinstance(el, Cti):
                row = {"kind": "cti", "id": None, _S: el.time, _E: None, _NE: None}
                result: Any = None
            elif isinstance(el, Insert):
                row = {"kind": "insert", "id": _n(el.id), _S: el.start, _E: el.end, _NE: None}
                result = el.payload
            else:
                row = {
                    "kind": "retract",
                    "id": _n(el.id),
                    _S: el.start,
                    _E: el.old_end,
                    _NE: el.new_end,
                }
                result = el.payload
            row["seq"] = n
            rows.append(self._finish(row, result, key_values))
        if any(counts):
            row = {"kind": "stats", "id": None, _S: None, _E: None, _NE: None, "seq": len(rows)}
            row.update(zip(_COUNTS, counts, strict=True))
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
        for c in _COUNTS:
            row.setdefault(c, None)
        return row

    def _result_label(self, row: dict[str, Any], key_values: list[Any]) -> str:
        window = f"[{format_time(row[_S])}, {format_time(row[_E])})"
        return f"UDM {udm_label(self.call.udm)!r} on window {window}{of_key(key_values)}"


def _applied(starts: np.ndarray, ctis: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where a key's generated CTIs ``(position, time)`` are applied, as
    ``(index, time)``, by the row lane's rule: a CTI waits; it is applied
    just before the first event after it, up to the next CTI's event, that
    starts before it (that event is late), else the next CTI supersedes it;
    the last one is applied at the end of the batch. One ``reduceat`` gives
    each CTI's minimum start in its range; only late ones are searched."""
    if not ctis:
        return []
    n = len(starts)
    first = np.array([pos + 1 for pos, _ in ctis], dtype=np.int64)
    times = [c for _, c in ctis]
    # reduceat's last range runs to the end, which is right for the CTI
    # before the last when the last was generated by the batch's last event
    if first[-1] < n:
        mins = np.minimum.reduceat(starts, first).tolist()
    else:
        mins = (
            [*np.minimum.reduceat(starts, first[:-1]).tolist(), None] if len(first) > 1 else [None]
        )
    out: list[tuple[int, int]] = []
    for j, c in enumerate(times):
        if mins[j] is not None and mins[j] < c:
            lo = int(first[j])  # its range holds a late event: the first one is it
            out.append((lo + int(np.argmax(starts[lo:] < c)), c))
        elif j + 1 == len(times):
            out.append((n, c))
    return out


#: the earliest broadcast CTI a Spark watermark carries: watermarks count
#: milliseconds from the epoch and never go below it
_MIN_BROADCAST = 1000


def _early_broadcast(ticks: int, seq: Any) -> str:
    where = f" (seq {seq})" if seq is not None else ""
    return (
        f"broadcast CTI at {ticks} ticks{where}: broadcast CTIs travel as Spark's watermark, "
        "which counts whole milliseconds from 1970-01-01 and never goes below it, so a CTI "
        f"before {_MIN_BROADCAST} ticks (1970-01-01T00:00:00.001) would be lost; give the CTI "
        "row a key (an in-band CTI of that key) or use times after the epoch"
    )


def _pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows to ship to the stateful processor, packed: one row per bucket
    and Arrow batch holding that bucket's rows as an Arrow IPC stream.

    ``transformWithStateInPandas`` regroups its input row by row in Python
    (about 10 us a row); a packed row costs that once for thousands of
    rows. A row with a CTI time (a broadcast CTI) travels alone with that
    time in the CTI column, so the watermark sees exactly what it would see
    unpacked."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        groups = batch.column(_GROUP).to_numpy(zero_copy_only=False)
        cti = batch.column(_CTI)
        has_cti = cti.is_valid().to_numpy(zero_copy_only=False)
        rows = pa.Table.from_batches([batch]).drop_columns([_GROUP, _CTI])
        out_groups: list[int] = []
        out_ctis: list[Any] = []
        blobs: list[bytes] = []
        for i in np.flatnonzero(has_cti).tolist():
            at = cti[i].as_py()
            if (ticks := to_ticks(at)) < _MIN_BROADCAST:  # Spark would drop it as late
                seq = rows.column(_SEQ)[i].as_py() if _SEQ in rows.column_names else None
                raise ValueError(_early_broadcast(ticks, seq))
            blob = _ipc(rows.slice(i, 1))
            out_groups.append(int(groups[i]))
            out_ctis.append(at)
            blobs.append(blob)
            # and a copy that is never late, for the processor to check the
            # CTI's order: Spark silently drops the first when it is behind
            # the watermark, i.e. when the broadcast CTIs go backwards
            out_groups.append(int(groups[i]))
            out_ctis.append(None)
            blobs.append(blob)
        events = np.flatnonzero(~has_cti)
        if len(events):
            order = events[np.argsort(groups[events], kind="stable")]
            ordered = groups[order]
            cuts = (np.flatnonzero(np.diff(ordered)) + 1).tolist()
            taken = rows.take(pa.array(order))
            for lo, hi in zip([0, *cuts], [*cuts, len(order)], strict=True):
                out_groups.append(int(ordered[lo]))
                out_ctis.append(None)
                blobs.append(_ipc(taken.slice(lo, hi - lo)))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(out_groups, pa.int32()),
                pa.array(out_ctis, cti.type),
                pa.array(blobs, pa.binary()),
            ],
            names=[_GROUP, _CTI, _ROWS],
        )


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _unpack(frames: Iterator[Any]) -> pa.Table:
    """A bucket's rows of one micro-batch, from the packed rows. A packed
    row with a CTI time served the watermark; its copy without one (see
    :func:`_pack`) is the one taken."""
    tables = [
        pa.ipc.open_stream(blob).read_all()
        for pdf in frames
        for blob, cti in zip(pdf[_ROWS].tolist(), pdf[_CTI].isna().tolist(), strict=True)
        if cti
    ]
    return pa.concat_tables(tables)


def _py(v: Any) -> Any:
    item = getattr(v, "item", None)
    if item is not None and callable(item):
        try:
            return item()
        except (ValueError, TypeError):
            return v
    if isinstance(v, float) and v != v:
        return None
    return v


def _ident(v: Any) -> Any:
    """An event id as Python: a whole float id (a JSON source's ``5.0``)
    is the integer id it stands for."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _check(
    kind: str, s: int | None, e: int | None, ne: int | None, shape: str, no_id: bool = False
) -> str | None:
    """Why an input row is invalid, or None (``no_id``: an element row
    whose id is null)."""
    if s is None:
        return "null start"
    if kind in ("insert", "retract") and no_id:
        return "null id (every insert of an element stream needs an id, which its retractions name)"
    if kind == "retract" and ne is None:
        return "null new_end (a full retraction gives the start itself)"
    if kind == "insert" and shape == "interval" and e is None:
        return "null end (interval events need an end; use shape='edge' for open events)"
    if kind == "insert" and e is not None and e <= s:
        return f"end {e} is not after start {s}"
    return None


def _show_row(row: dict[str, Any], names: dict[str, str]) -> str:
    """A row as the input wrote it: internal columns under the input's
    column names (``names``), those the input does not have left out."""
    shown = {}
    for k, v in row.items():
        if not k.startswith("udm__"):
            shown[k] = _py(v)
        elif k in names:
            shown[names[k]] = _py(v)
    return repr(shown)


def stream_changelog(
    df: DataFrame,
    window: WindowSpec,
    udm: Any,
    *,
    key: str | Sequence[str] | None = None,
    value: ValueArg = None,
    input: Literal["events", "elements"] = "events",
    start: str = "start",
    end: str | None = None,
    shape: Literal["point", "interval", "edge"] | None = None,
    kind: str = "kind",
    id: str = "id",
    new_end: str = "new_end",
    seq: str | None = None,
    advance: AdvanceTime | None = None,
    cti_policy: str = "raise",
    on_invalid: Literal["raise", "drop"] = "raise",
    input_clipping: InputClipping | str = InputClipping.NONE,
    output_policy: OutputPolicy | str | None = None,
    consistency: str = "speculative",
    returns: Any = None,
    name: str | None = None,
    state_buckets: int = 32,
    **udm_args: Any,
) -> DataFrame:
    """The output changelog of a windowed UDM over a streaming DataFrame.

    ``input="events"``: one event per row, ``start`` and ``end`` columns
    (no ``end``: point events); ``input="elements"``: physical stream rows
    with ``kind``, ``id``, ``start``, ``end`` (insert) / old end (retract),
    ``new_end`` and payload columns; a ``cti`` row with null keys reaches
    every key (through the watermark), one with keys only that key. ``seq``
    orders rows within a micro-batch (default: events by start time, elements
    in the order Spark delivers them, which is arbitrary: give elements a
    ``seq`` when a batch can hold several elements of one key).
    ``advance`` generates CTIs per key (then its policy is the CTI policy).
    The UDM's result type must be declared (annotation or ``returns=``):
    a streaming query cannot infer it from data. Keys are hashed into
    ``state_buckets`` buckets, each one state value and one timer (more
    buckets: less state rewritten per micro-batch when few keys are active;
    fewer: fewer state-store calls).
    """
    if not isinstance(window, WindowSpec):
        raise TypeError(
            f"window must be a window spec such as TumblingWindow(size) or "
            f"HoppingWindow(size, hop), not {window!r}"
        )
    refuse_batch_options(udm_args, "a streaming query runs", "CTIs (advance= or cti rows)")
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid={on_invalid!r}: use 'raise' or 'drop'")
    if shape == "point" and end is not None:
        raise ValueError(
            f"shape='point' takes no end column (got end={end!r}); a point lasts one tick"
        )
    keys = [key] if isinstance(key, str) else list(key or [])
    cols = list(df.columns)
    needed = [start, *keys]
    if input == "elements":
        needed += [kind, id]
        if end is None and "end" in cols:
            end = "end"
    elif input != "events":
        raise ValueError(f"input is 'events' or 'elements', not {input!r}")
    if end is not None:
        needed.append(end)
    if seq is not None:
        needed.append(seq)
    if isinstance(value, str):
        needed.append(value)
    missing = [c for c in needed if c not in cols]
    if missing:
        raise KeyError(f"columns {missing} are not in the streaming DataFrame; columns: {cols}")
    if input == "events":
        shape = shape or ("point" if end is None else "interval")
    else:
        shape = shape or "edge"
    instance = instantiate(resolve_udm(udm), udm_args or None)
    name = name or (instance.name or type(instance).__name__).replace(".", "_")
    call = UdmCall(name, instance, value, returns)
    policy = advance.policy if advance is not None else cti_policy
    options: dict[str, Any] = {
        "input_clipping": input_clipping,
        "output_policy": output_policy,
        "consistency": consistency,
        "cti_policy": policy,
    }
    Host(window, instance, value=call.value_fn, **options)  # validate options on the driver
    rtype = call_type(call)
    if rtype is None:
        raise TypeError(
            f"the result type of {name!r} is not declared; a streaming query cannot infer it "
            "from data: annotate the UDM's return type or pass returns= (e.g. 'double')"
        )
    s_ticks, time_kind = _ticks(df, start)
    if end is not None:
        e_ticks, e_kind = _ticks(df, end)
        if e_kind != time_kind:
            raise TypeError(f"{start!r} and {end!r} must both be ticks or both timestamps")
    elif shape == "point":
        e_ticks = s_ticks + F.lit(1)
    else:
        e_ticks = F.lit(None).cast("long")
    # the payload is the row's other columns, key columns included, as in
    # batch queries (events) and replay (elements, whose kind, id and
    # new_end describe the element, not the event)
    special = {start, end, seq, *keys}
    if input == "elements":
        special |= {kind, id, new_end}
    payload = [c for c in cols if c not in special]
    if input == "elements":
        kind_col = F.lower(F.col(q(kind)))
        id_col = F.col(q(id))
        ne_col = _ticks(df, new_end)[0] if new_end in cols else F.lit(None).cast("long")
    else:
        kind_col = F.lit("insert")
        id_col = F.lit(None).cast("long")
        ne_col = F.lit(None).cast("long")
    # rows of a key reach the host in this order within a micro-batch; Spark
    # delivers them in no particular order, and a generated CTI would make
    # the earlier-starting events of the same batch late
    if seq:
        order = F.col(q(seq)).cast("long")
    elif input == "events":
        order = s_ticks
    else:
        order = F.lit(None).cast("long")
    if state_buckets < 1:
        raise ValueError(f"state_buckets must be at least 1, not {state_buckets}")
    group = F.pmod(F.hash(*[F.col(q(k)) for k in keys]), F.lit(state_buckets)) if keys else F.lit(0)
    no_key: Column = F.lit(True)
    for k in keys:
        no_key = no_key & F.col(q(k)).isNull()
    is_cti = kind_col == "cti"
    # an event stream ships no kind, id or new end (every row is an insert
    # without id) and no order column unless given (the processor sorts
    # by start): every column costs per row on the way to Python
    shipped = [group.alias(_GROUP), *[F.col(q(k)) for k in keys]]
    if input == "elements":
        shipped += [kind_col.alias(_KIND), id_col.alias(_ID), ne_col.alias(_NE)]
    shipped += [s_ticks.alias(_S), e_ticks.alias(_E)]
    if seq:
        shipped.append(order.alias(_SEQ))
    shipped.append(F.when(is_cti & no_key, F.timestamp_micros(s_ticks)).alias(_CTI))
    norm = df.select(*shipped, *[F.col(q(c)) for c in payload])
    cti_type = T.TimestampType()
    packed_schema = T.StructType(
        [
            T.StructField(_GROUP, T.IntegerType(), False),
            T.StructField(_CTI, cti_type, True),
            T.StructField(_ROWS, T.BinaryType(), False),
        ]
    )
    packed = map_in_arrow(norm, _pack, packed_schema).withWatermark(_CTI, "0 seconds")
    schema_of = {f.name: f.dataType for f in df.schema.fields}
    result_fields: list[str] | None = None
    if isinstance(rtype, T.StructType):
        result_fields = rtype.fieldNames()
        result_struct = list(rtype.fields)
    else:
        result_struct = [T.StructField(name, rtype, True)]
    own = ("kind", "seq", "id", "start", "end", "new_end", *_COUNTS)
    clash = [c for c in [*keys, *(f.name for f in result_struct)] if c in own]
    if clash:
        what = "key column" if clash[0] in keys else "result column"
        raise ValueError(
            f"{what} {clash[0]!r} has the name of one of the changelog's own columns "
            f"({', '.join(own)}); rename it: a key column with withColumnRenamed before "
            "streaming, a result with name= (a struct result's fields in the UDM)"
        )
    fields = [
        T.StructField("kind", T.StringType(), False),
        T.StructField("seq", T.LongType(), False),
        T.StructField("id", T.LongType(), True),
        T.StructField(_S, T.LongType(), True),
        T.StructField(_E, T.LongType(), True),
        T.StructField(_NE, T.LongType(), True),
        *[T.StructField(k, schema_of[k], True) for k in keys],
        *[T.StructField(f.name, f.dataType, True) for f in result_struct],
        *[T.StructField(c, T.LongType(), True) for c in _COUNTS],
    ]
    out_schema = T.StructType(fields)
    processor = _HostProcessor(
        window,
        call,
        options,
        keys,
        [*keys, *payload],  # the keys are shipped as their own columns
        shape,
        advance,
        on_invalid,
        out_schema.fieldNames(),
        result_fields,
        timers=input == "elements",  # only element streams carry broadcast CTIs
        events=input == "events",
        buckets=state_buckets,
        input_names={
            _S: start,
            **({_E: end} if end is not None else {}),
            **({_SEQ: seq} if seq else {}),
            **({_KIND: kind, _ID: id, _NE: new_end} if input == "elements" else {}),
        },
        integer_fields={
            f.name: arrow_schema(T.StructType([f])).field(0).type
            for f in result_struct
            if _holds_integers(arrow_schema(T.StructType([f])).field(0).type)
        },
    )
    share_driver_python(packed.sparkSession)
    result = packed.groupBy(F.col(_GROUP)).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
    )
    changelog = result.select(
        "kind",
        "seq",
        "id",
        show_time(_S, time_kind).alias("start"),
        show_time(_E, time_kind).alias("end"),
        show_time(_NE, time_kind).alias("new_end"),
        *[F.col(q(k)) for k in keys],
        *[F.col(q(f.name)) for f in result_struct],
        *_COUNTS,
    )
    changelog._udm_state_buckets = state_buckets  # type: ignore[attr-defined]  # start_stream
    return changelog


# (internal columns start with "udm__": names with a leading underscore are
# renamed on their way into pandas)

# ------------------------------------------------------------------ sinks


def write_changelog(path: str) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function appending each micro-batch's changelog to
    Parquet under ``path/batch_id=N``, overwriting that directory: a batch
    replayed after a failure replaces its first attempt (exactly once)."""
    root = path.rstrip("/")

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(f"{root}/batch_id={batch_id}")

    return write


def start_stream(
    changelog: DataFrame,
    path: str,
    checkpoint: str,
    *,
    trigger: dict[str, Any] | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start writing a changelog (from :func:`stream_changelog`) to ``path``
    with :func:`write_changelog`, checkpointing to ``checkpoint``.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g.
    ``{"availableNow": True}`` or ``{"processingTime": "5 seconds"}``).
    Sets the session's state store to RocksDB, which
    ``transformWithStateInPandas`` requires.
    """
    buckets = getattr(changelog, "_udm_state_buckets", None)
    if buckets is not None:
        _check_state_buckets(checkpoint, buckets)
    spark = changelog.sparkSession
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    writer = changelog.writeStream.foreachBatch(write_changelog(path)).option(
        "checkpointLocation", checkpoint
    )
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


def _check_state_buckets(checkpoint: str, buckets: int) -> None:
    """Refuse to restart a local checkpoint with another ``state_buckets``:
    keys would hash to other buckets and lose their state without a word.
    (The worker also checks each bucket it loads, for other sinks.)"""
    from pathlib import Path

    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return
    marker = Path(checkpoint.removeprefix("file:")) / "udm-state-buckets"
    if marker.exists():
        written = int(marker.read_text().strip() or buckets)
        if written != buckets:
            raise ValueError(
                f"checkpoint {checkpoint!r} holds state written with state_buckets={written}; "
                f"restart with state_buckets={written}, or use a new checkpoint"
            )
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{buckets}\n")


def read_changelog(spark: Any, path: str) -> DataFrame:
    """The changelog written by :func:`write_changelog` (with ``batch_id``)."""
    frame: DataFrame = spark.read.parquet(path)
    return frame


def changelog_cht(changelog: DataFrame, keys: Sequence[str] = ()) -> DataFrame:
    """The current CHT of a changelog: each insert whose latest retraction
    (by ``batch_id``, then ``seq``) gives its end; fully retracted events
    are gone. Columns: ``start``, ``end``, the keys, the result columns."""
    keys = list(keys)
    skip = {"kind", "seq", "id", "start", "end", "new_end", "batch_id", *_COUNTS, *keys}
    results = [c for c in changelog.columns if c not in skip]
    k = [F.col(q(c)) for c in keys]
    inserts = changelog.where(F.col("kind") == "insert").select(
        *k, "id", "start", "end", *[F.col(q(c)) for c in results]
    )
    order = (
        F.struct(F.col("batch_id"), F.col("seq"))
        if "batch_id" in changelog.columns
        else (F.struct(F.col("seq")))
    )
    last = (
        changelog.where(F.col("kind") == "retract")
        .groupBy(*k, "id")
        .agg(F.max_by(F.col("new_end"), order).alias("__udm_new_end"))
        .select(
            *[F.col(q(c)).alias(f"__udm_k{i}") for i, c in enumerate(keys)],
            F.col("id").alias("__udm_id"),
            "__udm_new_end",
        )
    )
    # null-safe on the keys: null is a key value of its own
    match = F.col("id") == F.col("__udm_id")
    for i, c in enumerate(keys):
        match = match & F.col(q(c)).eqNullSafe(F.col(f"__udm_k{i}"))
    joined = inserts.join(last, match, "left")
    end_col = F.coalesce(F.col("__udm_new_end"), F.col("end"))
    joined = joined.withColumn(
        "end", F.when(F.col("__udm_new_end").isNull(), F.col("end")).otherwise(end_col)
    )
    return joined.where(F.col("end").isNull() | (F.col("end") > F.col("start"))).select(
        "start", "end", *k, *[F.col(q(c)) for c in results]
    )


def stream_counts(changelog: DataFrame) -> dict[str, int]:
    """Totals of the ``stats`` rows: late events dropped or adjusted by the
    CTI policy and invalid rows dropped by ``on_invalid='drop'``."""
    row = (
        changelog.where(F.col("kind") == "stats")
        .agg(*[F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in _COUNTS])
        .first()
    )
    return {c: int(row[c]) if row is not None else 0 for c in _COUNTS}


# ------------------------------------------- shared with graphstream.py

#: the packed rows' internal columns and helpers, which the operator-graph
#: processor (:mod:`udm.host.spark.graphstream`) ships and reads alike
GROUP_COL, CTI_COL, ROWS_COL, SEQ_COL = _GROUP, _CTI, _ROWS, _SEQ
COUNT_COLUMNS = _COUNTS
pack_rows = _pack
time_ticks = _ticks
row_problem = _check
python_id = _ident
show_row = _show_row
early_broadcast = _early_broadcast
MIN_BROADCAST = _MIN_BROADCAST
