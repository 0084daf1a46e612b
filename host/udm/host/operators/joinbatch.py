"""The join's batched path: each side's live events as columns, and the
overlapping pairs of a run of inserts against the other side, found with
numpy instead of one dictionary lookup and one :class:`Insert` per event.

Keys are arbitrary hashables, so they are matched on their hashes
(:func:`key_hashes`), an equi-join on int64 codes (the other side sorted by
hash, ``searchsorted`` for each new event's range) filtered by overlap and
then by key equality as the per-event path's ``by_key`` dictionary decides
it (identity or ``==``), so a hash collision never pairs two keys. That
costs numpy time per candidate pair; the per-event path scans the same
candidates in Python. (Hashes rather than a dictionary of codes: no map
that grows with every key ever seen, and ``hash`` is the cheapest
per-event call there is.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from udm.host.operators.batch import InsertBatch

__all__ = ["ColumnarSide", "join_run", "key_hashes", "object_column", "overlapping_pairs"]

_EMPTY = np.empty(0, dtype=np.int64)


def object_column(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of ``values`` (``np.array`` would read tuples as rows)."""
    return np.fromiter(values, dtype=object, count=len(values))


def key_hashes(keys: Sequence[Hashable]) -> np.ndarray:
    """The keys' hashes, the codes the pairs are matched on (equal keys
    have equal hashes; :func:`overlapping_pairs` drops the collisions)."""
    return np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))


class ColumnarSide:
    """One side's live events as columns, in arrival order: int64 key
    codes, starts and ends; object ids, payloads and keys."""

    __slots__ = ("codes", "ends", "ids", "keys", "payloads", "starts")

    def __init__(self) -> None:
        self.codes = _EMPTY
        self.starts = _EMPTY
        self.ends = _EMPTY
        self.ids = object_column([])
        self.payloads = object_column([])
        self.keys = object_column([])

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def from_records(cls, events: Mapping[Any, list[Any]]) -> ColumnarSide:
        """The columns of the per-event form's ``id -> [start, end,
        payload, key]``, in its (arrival) order."""
        side = cls()
        if events:
            records = list(events.values())
            keys = [r[3] for r in records]
            side.append(
                key_hashes(keys),
                np.array([r[0] for r in records], dtype=np.int64),
                np.array([r[1] for r in records], dtype=np.int64),
                object_column(list(events)),
                object_column([r[2] for r in records]),
                object_column(keys),
            )
        return side

    def append(
        self,
        codes: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        ids: np.ndarray,
        payloads: np.ndarray,
        keys: np.ndarray,
    ) -> None:
        """Add events (O(live) copies: the batched path runs only on runs
        not much shorter than the live state, see ``JoinOperator``)."""
        if not len(self):
            self.codes, self.starts, self.ends = codes, starts, ends
            self.ids, self.payloads, self.keys = ids, payloads, keys
            return
        self.codes = np.concatenate((self.codes, codes))
        self.starts = np.concatenate((self.starts, starts))
        self.ends = np.concatenate((self.ends, ends))
        self.ids = np.concatenate((self.ids, ids))
        self.payloads = np.concatenate((self.payloads, payloads))
        self.keys = np.concatenate((self.keys, keys))

    def expire(self, time: int) -> None:
        """Forget the events that ended before ``time`` (as ``LiveEvents.expire``)."""
        if not len(self):
            return
        keep = self.ends >= time
        if keep.all():
            return
        idx = np.flatnonzero(keep)
        self.codes, self.starts, self.ends = self.codes[idx], self.starts[idx], self.ends[idx]
        self.ids, self.payloads, self.keys = self.ids[idx], self.payloads[idx], self.keys[idx]

    def rows(self) -> list[tuple[Any, int, int, Any, Any]]:
        """``(id, start, end, payload, key)`` of every live event, in order."""
        return list(
            zip(
                self.ids.tolist(),
                self.starts.tolist(),
                self.ends.tolist(),
                self.payloads.tolist(),
                self.keys.tolist(),
                strict=True,
            )
        )


def overlapping_pairs(
    other: ColumnarSide, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(new index, other position)`` of every new event (``codes`` from
    :func:`key_hashes` of ``keys``, ``starts``, ``ends``) and live event of
    ``other`` with the same key whose lifetimes overlap, ordered by new
    index, then by the other side's arrival order (as the per-event path
    would emit them)."""
    if not len(other) or not len(codes):
        return _EMPTY, _EMPTY
    order = np.argsort(other.codes, kind="stable")
    sorted_codes = other.codes[order]
    lo = np.searchsorted(sorted_codes, codes, "left")
    count = np.searchsorted(sorted_codes, codes, "right") - lo
    total = int(count.sum())
    if not total:
        return _EMPTY, _EMPTY
    new = np.repeat(np.arange(len(codes)), count)
    first = np.cumsum(count) - count
    pos = order[np.repeat(lo - first, count) + np.arange(total)]
    keep = (other.starts[pos] < ends[new]) & (other.ends[pos] > starts[new])
    new, pos = new[keep], pos[keep]
    mine, theirs = keys[new], other.keys[pos]
    same = np.asarray(mine == theirs, dtype=bool)
    if not same.all():  # a collision, or a key unequal to itself (NaN)
        for i in np.flatnonzero(~same).tolist():
            same[i] = mine[i] is theirs[i]
        new, pos = new[same], pos[same]
    return new, pos


def join_run(
    this: ColumnarSide,
    other: ColumnarSide,
    port: int,
    run: tuple[Sequence[Any], Any, Any, Sequence[Any]],
    key_fn: Callable[[Any], Hashable],
    combine: Callable[[Any, Any], Any],
    predicate: Callable[[Any, Any], Any] | None,
) -> InsertBatch | None:
    """Join a run of inserts arriving on ``port`` (its ``(ids, starts,
    ends, payloads)``) against ``other``'s live events, add them to
    ``this``, and return the output pairs (``None``: no pair).

    The key function per event, then ``predicate`` and ``combine`` per
    overlapping pair of equal keys, called in the per-event path's order
    (by new event, then by the other side's arrival) with the left payload
    first."""
    ids, starts, ends, payloads = run
    if not isinstance(starts, np.ndarray):  # (lists of ints: fromiter is the fastest)
        starts = np.fromiter(starts, dtype=np.int64, count=len(starts))
        ends = np.fromiter(ends, dtype=np.int64, count=len(ends))
    keys = list(map(key_fn, payloads))
    codes, key_col = key_hashes(keys), object_column(keys)
    new, pos = overlapping_pairs(other, codes, starts, ends, key_col)
    id_col, payload_col = object_column(ids), object_column(payloads)
    out = None
    if len(new) and predicate is not None:
        mine, theirs = payload_col[new].tolist(), other.payloads[pos].tolist()
        lefts, rights = (mine, theirs) if port == 0 else (theirs, mine)
        keep = np.array([bool(x) for x in map(predicate, lefts, rights)], dtype=bool)
        new, pos = new[keep], pos[keep]
    if len(new):
        mine_ids, mine_payloads = id_col[new].tolist(), payload_col[new].tolist()
        their_ids, their_payloads = other.ids[pos].tolist(), other.payloads[pos].tolist()
        if port == 0:
            pair_ids = list(zip(mine_ids, their_ids, strict=True))
            payload = list(map(combine, mine_payloads, their_payloads))
        else:
            pair_ids = list(zip(their_ids, mine_ids, strict=True))
            payload = list(map(combine, their_payloads, mine_payloads))
        out = InsertBatch(
            pair_ids,
            np.maximum(starts[new], other.starts[pos]),
            np.minimum(ends[new], other.ends[pos]),
            payload,
        )
    this.append(codes, starts, ends, id_col, payload_col, key_col)
    return out
