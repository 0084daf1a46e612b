"""The window operator: UDMs over windows, as one operator of the graph.

It is the incremental :class:`~udm.host.Host` (StreamInsight's window and
event indexes, speculation and retractions, cleanup at CTIs), one per UDM
of the window operation, fed the operator's input stream; this module only
turns the hosts' outputs into rows of the query (the group's key columns
and one column per result, struct results flattened into fields) and, for
several aggregates over the same windows, joins their outputs window by
window into one event. A snapshot window over the stream is CEDR's
snapshot-oriented aggregate.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from udm.host.engine import Consistency, Host
from udm.host.operators.base import CtiTracker, Operator
from udm.host.plan import UdmCall, WindowOp
from udm.host.rows import key_of, normalize_value, returns_is_struct
from udm.host.stream import Cti, Element, Insert, Retract

__all__ = ["WindowOperator"]


class WindowOperator(Operator):
    """A window operation (one or more UDMs) per group of ``keys``."""

    name = "window"

    def __init__(
        self,
        op: WindowOp,
        keys: Sequence[str],
        consistency: Consistency = Consistency.SPECULATIVE,
    ) -> None:
        super().__init__(1)
        self.op = op
        self.keys = tuple(keys)
        self.key_values: dict[Hashable, tuple[Any, ...]] = {}
        self._kept = 0  # keys in key_values after its last pruning (_forget_keys)
        self._kept_slots = 0  # windows in slots after its last pruning (_forget_final)
        key_fn = self._key_fn()
        self.hosts = [
            Host(
                op.window,
                call.udm,
                key=key_fn,
                input_clipping=op.clipping,
                output_policy=op.policy,
                value=call.value_fn,
                consistency=consistency,
            )
            for call in op.calls
        ]
        self.name = f"window {op.window.describe()}"
        self.combined = len(op.calls) > 1
        # several UDMs: each call's live outputs, and the windows emitted whole
        self.ctis = CtiTracker(len(op.calls))
        self.live: list[dict[Any, tuple[Hashable, int, int, Any]]] = [{} for _ in op.calls]
        self.slots: dict[tuple[Hashable, int, int], dict[int, Any]] = {}
        self.slot_ids: dict[tuple[Hashable, int, int], Any] = {}
        self._next = 0
        # per call: the fields of the struct results seen (None: no struct yet)
        self.fields: list[dict[str, None] | None] = [None for _ in op.calls]

    def struct_fields(self) -> list[list[str] | None]:
        """Per call, the fields of its struct results (``None``: scalar
        results), as :func:`udm.host.rows.result_columns` takes them."""
        return [None if f is None else list(f) for f in self.fields]

    def _key_fn(self) -> Callable[[Any], Hashable] | None:
        if not self.keys:
            return None
        keys = self.keys

        def key(payload: Mapping[str, Any]) -> Hashable:
            return key_of(payload, keys)

        return key

    # ------------------------------------------------------------ inputs

    def on_insert(self, port: int, element: Insert) -> None:
        if self.keys:
            k = key_of(element.payload, self.keys)
            if k not in self.key_values:
                self.key_values[k] = tuple(element.payload[c] for c in self.keys)
        self._feed(element)

    def on_retract(self, port: int, element: Retract) -> None:
        self._feed(element)

    def on_cti(self, port: int, time: int) -> None:
        self._feed(Cti(time))
        if len(self.key_values) > 2 * self._kept + 64:  # amortized, as the validator's prune
            self._forget_keys()

    def _forget_keys(self) -> None:
        """Forget the columns of keys no host holds any more (the hosts drop
        a key with no live event and no open window at a CTI): a later
        event of the key brings them again, and only inserts read them."""
        hosts = self.hosts
        self.key_values = {
            k: v for k, v in self.key_values.items() if any(h.holds_key(k) for h in hosts)
        }
        self._kept = len(self.key_values)

    def _feed(self, element: Element) -> None:
        for i, host in enumerate(self.hosts):
            outputs = host.process(element)
            if self.combined:
                for out in outputs:
                    self._combine(i, out)
            else:
                for out in outputs:
                    self._single(out)

    # ------------------------------------------------------------ outputs

    def _row(self, key: Hashable, results: Sequence[Any]) -> dict[str, Any]:
        row: dict[str, Any] = dict(zip(self.keys, self.key_values.get(key, ()), strict=False))
        for i, (call, result) in enumerate(zip(self.op.calls, results, strict=True)):
            fields = _put(row, call, normalize_value(result), self.op.multi)
            if fields is not None:
                seen = self.fields[i]
                if seen is None:
                    seen = self.fields[i] = {}
                seen.update(dict.fromkeys(fields))
        return row

    def _single(self, out: Element) -> None:
        if type(out) is Insert:
            key = out.id.key  # type: ignore[attr-defined]
            self.emit(Insert(out.id, out.start, out.end, self._row(key, [out.payload])))
        else:
            self.emit(out)

    def _combine(self, i: int, out: Element) -> None:
        if type(out) is Cti:
            low = self.ctis.advance(i, out.time, self.emit)
            if low is not None and len(self.slots) > 2 * self._kept_slots + 64:  # amortized
                self._forget_final(low)
            return
        live = self.live[i]
        if type(out) is Insert:
            key = out.id.key  # type: ignore[attr-defined]
            live[out.id] = (key, out.start, out.end, out.payload)
            self._slot_add((key, out.start, out.end), i, out.payload)
            return
        assert type(out) is Retract
        key, start, old_end, payload = live.pop(out.id)
        self._slot_remove((key, start, old_end), i)
        if out.new_end > start:
            live[out.id] = (key, start, out.new_end, payload)
            self._slot_add((key, start, out.new_end), i, payload)

    def _forget_final(self, low: int) -> None:
        """Forget the outputs (of every call) and windows that end before
        ``low``, the output CTI of every call: no call can retract such an
        output (the retraction's sync time would precede its CTI) or add one
        to such a window, so they are final; without this a combined window
        operation keeps every window it ever emitted."""
        for live in self.live:
            for oid in [oid for oid, (_, _, end, _) in live.items() if end < low]:
                del live[oid]
        for slot in [slot for slot in self.slots if slot[2] < low]:
            del self.slots[slot]
            self.slot_ids.pop(slot, None)
        self._kept_slots = len(self.slots)

    def _slot_add(self, slot: tuple[Hashable, int, int], i: int, payload: Any) -> None:
        results = self.slots.setdefault(slot, {})
        results[i] = payload
        if len(results) == len(self.hosts):
            cid = ("window", self._next)
            self._next += 1
            self.slot_ids[slot] = cid
            ordered = [results[j] for j in range(len(self.hosts))]
            self.emit(Insert(cid, slot[1], slot[2], self._row(slot[0], ordered)))

    def _slot_remove(self, slot: tuple[Hashable, int, int], i: int) -> None:
        results = self.slots.get(slot)
        if results is None:
            return
        cid = self.slot_ids.pop(slot, None)
        if cid is not None:
            self.emit(Retract(cid, slot[1], slot[2], slot[1]))
        results.pop(i, None)
        if not results:
            del self.slots[slot]

    def get_state(self) -> dict[str, Any]:
        self._forget_keys()  # a snapshot should be small
        if self.combined:
            self._forget_final(self.ctis.output)
        return {
            "emitted": self.emitted,
            "hosts": [host.snapshot() for host in self.hosts],
            "key_values": self.key_values,
            "ctis": self.ctis,
            "live": self.live,
            "slots": self.slots,
            "slot_ids": self.slot_ids,
            "next": self._next,
            "fields": self.fields,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        for host, blob in zip(self.hosts, state["hosts"], strict=True):
            host.restore(blob)
        self.emitted, self.key_values, self.ctis = (
            state["emitted"],
            state["key_values"],
            state["ctis"],
        )
        self._kept = len(self.key_values)
        self._kept_slots = len(self.slots)
        self.live, self.slots, self.slot_ids = state["live"], state["slots"], state["slot_ids"]
        self._next, self.fields = state["next"], state["fields"]

    def state_size(self) -> int:
        return sum(h.memory_size[0] for h in self.hosts)


def _put(row: dict[str, Any], call: UdmCall, value: Any, multi: bool) -> list[str] | None:
    """Put one result in a row: a struct's fields as columns (returned),
    anything else as the call's column."""
    declared = returns_is_struct(call.returns)
    if isinstance(value, dict) and declared is not False:
        for field, v in value.items():
            row[f"{call.name}_{field}" if multi else field] = v
        return list(value)
    row[call.name] = value
    return None
