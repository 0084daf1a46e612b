"""Host snapshots: the incremental host's state as versioned plain data.

:meth:`Snapshots.snapshot` writes live events, windows with their states
and emitted outputs, watermarks, the validator and counters (pickled);
:meth:`Snapshots.restore` loads them into a host created with the same
query and options, which then resumes with identical output.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from sortedcontainers import SortedDict

from udm.host.gridpath import GridPath
from udm.host.hoststate import HostAttributes, KeyState, OutputId, WindowState
from udm.host.indexes import EventIndex, IndexedEvent
from udm.host.validation import CtiPolicy, LiveEvent, ValidationStats
from udm.host.versioned import dump_versioned, load_versioned
from udm.sdk.events import IntervalEvent

__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_VERSION", "Snapshots", "udm_arguments"]

SNAPSHOT_FORMAT = "udm-host-snapshot"
SNAPSHOT_VERSION = 2


class Snapshots(HostAttributes):
    """:class:`~udm.host.engine.Host`'s snapshot and restore, over the
    attributes the host sets up (declared here and in
    :class:`~udm.host.hoststate.HostAttributes` for the type checker)."""

    retractions: bool
    key_option: Any
    value_option: Any
    _arguments: str
    _fast: GridPath | None

    def snapshot(self) -> bytes:
        """The host's state as versioned plain data (pickled): live events,
        windows with their states and emitted outputs, watermarks, the
        validator and counters. :meth:`restore` resumes with identical
        output."""
        v = self.validator
        v.prune(force=True)  # what cleanup may forget need not be saved
        data = {
            "udm": self._label,
            "window": repr(self.window),
            "options": self._options(),
            "cti": self.cti,
            "output_cti": self.output_cti,
            "next_out": self._next_out,
            "seq": self._seq,
            "validator": {
                "cti": v.cti,
                "position": v.position,
                "stats": v.stats.as_dict(),
                "live": [
                    (i, ev.start, ev.end, ev.payload, ev.original_start) for i, ev in v.live.items()
                ],
                "dropped_ids": list(v.dropped_ids),
            },
            "fast": None if self._fast is None else self._fast.dump(),
            "keys": [
                {
                    "key": key,
                    "max_start": ks.max_start,
                    "final_upto": ks.final_upto,
                    "events": [
                        (ev.id, ev.start, ev.end, ev.payload, ev.seq) for ev in ks.index.by_start
                    ],
                    "endpoints": list(ks.index.endpoints.items()),
                    "windows": [
                        (
                            start,
                            w.end,
                            w.n_events,
                            w.state,
                            [(tuple(o), e.start, e.end, e.payload) for o, e in w.outputs],
                        )
                        for start, w in ks.wins.items()
                    ],
                }
                for key, ks in self.keys.items()
            ],
        }
        return dump_versioned(SNAPSHOT_FORMAT, SNAPSHOT_VERSION, data)

    def _options(self) -> dict[str, str]:
        """The query options a snapshot's state depends on, as text: a
        state restored under other options would give output matching
        neither query (a conservative host retracting, say)."""

        def described(option: Any) -> str:
            if callable(option):
                module = getattr(option, "__module__", "?")
                return f"{module}.{getattr(option, '__qualname__', option)}"
            return repr(option)

        return {
            "args": self._arguments,
            "input_clipping": self.clipping.value,
            "output_policy": self.policy.value,
            "consistency": self.consistency.value,
            "cti_policy": CtiPolicy.parse(self.validator.cti_policy).value,
            "key": described(self.key_option),
            "value": described(self.value_option),
            "retractions": str(self.retractions),
            "fast_path": str(self._fast is not None),
        }

    def restore(self, blob: bytes) -> None:
        """Load a :meth:`snapshot` into this host (created with the same
        query), replacing its state."""
        data = load_versioned(blob, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, "host snapshot")
        ours = self._options()
        theirs = data["options"]
        differ = [
            f"{k}: {theirs.get(k)} in the snapshot, {v} here"
            for k, v in ours.items()
            if theirs.get(k) != v
        ]
        if data["udm"] != self._label or data["window"] != repr(self.window):
            also = f"; its query options differ too ({'; '.join(differ)})" if differ else ""
            raise ValueError(
                f"snapshot of {data['udm']!r} over {data['window']} cannot be restored into a host "
                f"running {self._label!r} over {self.window!r}{also}"
            )
        if differ:
            raise ValueError(
                f"snapshot of {data['udm']!r} over {data['window']} was taken with other query "
                f"options ({'; '.join(differ)}); restore it into a host created with the same "
                "options"
            )
        self.cti, self.output_cti = data["cti"], data["output_cti"]
        self._next_out, self._seq = data["next_out"], data["seq"]
        vd = data["validator"]
        v = self.validator
        v.cti, v.position = vd["cti"], vd["position"]
        v.stats = ValidationStats(**vd["stats"])
        v.live = {i: LiveEvent(s, e, p, o) for i, s, e, p, o in vd["live"]}
        v.dropped_ids = set(vd["dropped_ids"])
        if self._fast is not None:
            self._fast.load(data["fast"])
        self.keys = {}
        self._key_of = {}
        newest: dict[Hashable, tuple[IndexedEvent, EventIndex]] = {}
        for kd in data["keys"]:
            ks = KeyState(max_start=kd["max_start"], final_upto=kd["final_upto"])
            for ident, s, e, p, seq in kd["events"]:
                ev = IndexedEvent(ident, s, e, p, seq)
                ks.index.add(ev)
                seen = newest.get(ident)
                if seen is None or seen[0].seq < seq:
                    if seen is not None and seen[1].by_id.get(ident) is seen[0]:
                        del seen[1].by_id[ident]
                    newest[ident] = (ev, ks.index)
                    self._key_of[ident] = kd["key"]
                elif ks.index is seen[1]:  # an expired event whose id was reused
                    ks.index.by_id[ident] = seen[0]
                else:
                    del ks.index.by_id[ident]
            ks.index.endpoints = SortedDict(kd["endpoints"])
            for start, end, n, state, outputs in kd["windows"]:
                w = WindowState(
                    end,
                    n,
                    state,
                    [(OutputId(*o), IntervalEvent(s, e, p)) for o, s, e, p in outputs],
                )
                ks.wins[start] = w
                ks.win_ends[end] = start
            ks.order = len(self.keys)  # (saved in their order of arrival)
            self.keys[kd["key"]] = ks
        # every key visited at the next CTI (a quiet one goes quiet again there)
        self._active, self._quiet, self._created = dict(self.keys), [], len(self.keys)


def udm_arguments(udm: Any) -> str:
    """A UDM instance's arguments as text, for a snapshot's options: a
    decorated UDM's ``args`` (``quantile(q=0.9)``), else the plain values
    (numbers, strings, bools, None, tuples of them) its ``__init__`` stored,
    which render the same in every process."""
    found = getattr(udm, "args", None)
    if not isinstance(found, dict):
        found = vars(udm) if hasattr(udm, "__dict__") else {}

    def plain(v: Any) -> bool:
        if isinstance(v, tuple):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, bool | int | float | str)

    return repr(sorted((str(k), v) for k, v in found.items() if plain(v)))
