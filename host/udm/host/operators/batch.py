"""Runs of elements pushed through the graph at once, and inserts as columns.

Pushing element by element costs a Python call and an :class:`Insert`
object per element on every edge; an operator with a vectorized algorithm
(the join) can do better when it is handed a whole run. So an operator
also accepts a run (:meth:`udm.host.operators.base.Operator.push_batch`),
and may emit its inserts as an :class:`InsertBatch`: columns (ids, starts,
ends, payloads) that only become :class:`Insert` objects when a consumer
iterates them. A consumer without a batched algorithm takes the run
element by element, so every operator stays correct on runs; only the
ones that can use columns skip the objects.

A run means exactly what its elements pushed one by one in order mean:
an operator's batched path must give the same output stream (up to the
order of inserts between two CTIs, which does not change its CHT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, overload

from udm.host.stream import Cti, Insert

if TYPE_CHECKING:  # (numpy is optional: see udm.host.operators.join.HAVE_NUMPY)
    import numpy as np

__all__ = ["InsertBatch", "runs"]


#: the slot setters of Insert's fields (frozen dataclass: its __setattr__ refuses)
_INSERT_SLOTS: tuple[Callable[[Any, Any], None], ...] = tuple(
    getattr(Insert, name).__set__ for name in ("id", "start", "end", "payload")
)


class InsertBatch(Sequence[Insert]):
    """Inserts held as columns: ``ids`` and ``payloads`` lists, ``starts``
    and ``ends`` int64 arrays (times fit: :data:`~udm.host.time.INFINITY`
    is the int64 maximum). Indexing or iterating builds the
    :class:`Insert` objects; :attr:`starts`/:attr:`ends` read as columns
    do not.

    >>> import numpy as np
    >>> batch = InsertBatch([("a", "b")], np.array([5]), np.array([10]), [{"k": 1}])
    >>> list(batch)
    [Insert(id=('a', 'b'), start=5, end=10, payload={'k': 1})]
    """

    __slots__ = ("ends", "ids", "payloads", "starts")

    def __init__(
        self, ids: list[Any], starts: np.ndarray, ends: np.ndarray, payloads: list[Any]
    ) -> None:
        self.ids = ids
        self.starts = starts
        self.ends = ends
        self.payloads = payloads

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Insert: ...

    @overload
    def __getitem__(self, index: slice) -> list[Insert]: ...

    def __getitem__(self, index: int | slice) -> Insert | list[Insert]:
        if isinstance(index, slice):
            return list(self)[index]
        return Insert(
            self.ids[index], int(self.starts[index]), int(self.ends[index]), self.payloads[index]
        )

    def __iter__(self) -> Iterator[Insert]:
        # Insert(...) without its __init__: the times are ints already (from
        # int64 columns), so __post_init__'s conversion has nothing to do,
        # and filling the slots directly builds the object in half the time
        new = object.__new__
        set_id, set_start, set_end, set_payload = _INSERT_SLOTS
        for ident, s, e, p in zip(
            self.ids, self.starts.tolist(), self.ends.tolist(), self.payloads, strict=True
        ):
            obj = new(Insert)
            set_id(obj, ident)
            set_start(obj, s)
            set_end(obj, e)
            set_payload(obj, p)
            yield obj

    def __repr__(self) -> str:
        return f"InsertBatch({list(self)!r})"


def runs(elements: Iterable[Any], limit: int = 4096) -> Iterator[list[Any]]:
    """``elements`` cut into runs that end at a CTI (or at ``limit``
    elements): what a feeder hands to ``push_batch``. A CTI closes a run
    because it is where an operator frees state and may emit.

    >>> [len(r) for r in runs([Insert(0, 0, 1), Cti(1), Insert(1, 1, 2)])]
    [2, 1]
    """
    if isinstance(elements, list):
        yield from _list_runs(elements, limit)
        return
    run: list[Any] = []
    append = run.append
    for el in elements:
        append(el)
        if type(el) is Cti or len(run) >= limit:
            yield run
            run = []
            append = run.append
    if run:
        yield run


def _list_runs(elements: list[Any], limit: int) -> Iterator[list[Any]]:
    # the CTIs found by list.index over the elements' types: a scan in C
    kinds = list(map(type, elements))
    begin, total = 0, len(elements)
    while begin < total:
        stop = min(begin + limit, total)
        with suppress(ValueError):  # (no CTI before the limit)
            stop = kinds.index(Cti, begin, stop) + 1
        yield elements[begin:stop]
        begin = stop
