"""Floors for the incremental host's benchmark cases that need more than a
dict loop: a minimal host with the host's output contract on a stream.

Kept apart from ``cases_host.py`` (which imports it where a case times
it) so each module stays short; no case is defined here.
"""

from __future__ import annotations

from typing import Any

from udm.host import Insert, OutputId, Retract
from udm.host.stream import insert_of, retract_of


def minimal_late_host(elements: list[Any], uda: Any, size: int) -> int:
    """A lower bound for any host with this one's contract over the late
    stream (``cases_host.late_stream``), over the same elements: per insert the
    UDA's ``add`` on a per-(key, window) state and the record a retraction
    needs (id -> [start, end, value, key]); per retraction the record's
    removal and the UDA's ``remove``; a key's window emitted (``result``
    and one output ``Insert`` with its id) when an event of that key moves
    past its end; a late event or retraction changing an emitted window
    retracts its output and inserts the new one (none when the window is
    left empty). No validation, CTI, output CTI or cleanup (so the windows
    the CTIs would finalize are emitted at the end)."""
    add, remove, initial, result = uda.add, uda.remove, uda.initial_state, uda.result
    acc: dict[tuple[Any, int], list[Any]] = {}  # (key, window) -> [state, n, output]
    events: dict[Any, list[Any]] = {}
    top: dict[Any, int] = {}  # key -> its latest window
    out: list[Any] = []
    n_out = 0
    for el in elements:
        t = type(el)
        if t is Insert:
            p = el.payload
            key, value = p["k"], p["v"]
            j = el.start // size
            w = acc.get((key, j))
            if w is None:
                w = acc[(key, j)] = [initial(), 0, None]
            w[0] = add(w[0], value)
            w[1] += 1
            events[el.id] = [el.start, el.end, value, key]
            old = w[2]
            if old is not None:  # an emitted window changed (False: emitted empty)
                if old:
                    out.append(retract_of(old.id, old.start, old.end, old.start, old.payload))
                w[2] = new = insert_of(
                    tuple.__new__(OutputId, (key, n_out)), j * size, j * size + size, result(w[0])
                )
                n_out += 1
                out.append(new)
                continue
            last = top.get(key)
            if last is None or j > last:
                for jj in range(j if last is None else last, j):
                    v = acc.get((key, jj))
                    if v is not None and v[2] is None and v[1]:
                        v[2] = new = insert_of(
                            tuple.__new__(OutputId, (key, n_out)),
                            jj * size,
                            jj * size + size,
                            result(v[0]),
                        )
                        n_out += 1
                        out.append(new)
                top[key] = j
        elif t is Retract:
            start, _end, value, key = events.pop(el.id)
            j = start // size
            w = acc[(key, j)]
            w[0] = remove(w[0], value)
            w[1] -= 1
            old = w[2]
            if old:
                out.append(retract_of(old.id, old.start, old.end, old.start, old.payload))
                if w[1]:
                    w[2] = new = insert_of(
                        tuple.__new__(OutputId, (key, n_out)),
                        j * size,
                        j * size + size,
                        result(w[0]),
                    )
                    n_out += 1
                    out.append(new)
                else:
                    w[2] = False
    for (key, j), w in acc.items():
        if w[2] is None and w[1]:
            out.append(
                insert_of(
                    tuple.__new__(OutputId, (key, n_out)), j * size, j * size + size, result(w[0])
                )
            )
            n_out += 1
    return len(out)
