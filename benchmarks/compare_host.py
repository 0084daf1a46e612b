"""Two versions of the in-process host on the 1,000-key tumbling mean, in ONE process.

On a shared machine two benchmark runs minutes apart are not comparable
(issue #31's figures moved by 20% between runs), so this times another
version of the host (a ``git archive`` of its ``sdk`` and ``host``) and
this checkout's round-robin in one process, best of ``rounds``, wall and
CPU, against the dict loop of ``host.keys_tumbling_mean``, and checks that
both give the same output elements (ids, order, values). Each version is
imported in turn under the name ``udm`` with its own elements (the host
checks element types by identity). Run with ``-S`` so that the editable
install's finder does not pick the checkout for both::

    mkdir -p /tmp/base && git archive main sdk host | tar -x -C /tmp/base
    .venv/bin/python -S benchmarks/compare_host.py /tmp/base 1000000 8
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TUMBLE = 10_000


def load(root: str, site: list[str]) -> tuple[Any, Any]:
    """``udm.host`` and a mean UDA of the version under ``root``."""
    for name in [m for m in sys.modules if m == "udm" or m.startswith("udm.")]:
        del sys.modules[name]
    sys.path[:] = [f"{root}/sdk", f"{root}/host", *site]
    importlib.invalidate_caches()
    host = importlib.import_module("udm.host")
    sdk = importlib.import_module("udm.sdk")
    assert str(host.__file__).startswith(root), host.__file__  # not the other version

    class Mean(sdk.IncrementalAggregate):  # type: ignore[misc, name-defined]
        def initial_state(self) -> tuple[float, int]:
            return (0.0, 0)

        def add(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
            return (state[0] + payload, state[1] + 1)

        def remove(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
            return (state[0] - payload, state[1] - 1)

        def result(self, state: tuple[float, int]) -> float:
            return state[0] / state[1]

    return host, Mean


def elements(host: Any, n: int, keys: int) -> list[Any]:
    """The elements of ``host.keys_tumbling_mean`` (cases_host._elements)."""
    out: list[Any] = []
    for i in range(n):
        out.append(host.Insert(i, i, i + 1, {"k": i % keys, "v": float(i % 97)}))
        if i % 1000 == 999:
            out.append(host.Cti(i - 10))
    return out


def floor(els: list[Any], insert: type) -> int:
    """The dict loop of ``cases_host.floor_tumbling_mean``."""
    acc: dict[tuple[Any, int], list[float]] = {}
    for el in els:
        if type(el) is not insert:
            continue
        p = el.payload
        w = (p["k"], el.start // TUMBLE)
        s = acc.get(w)
        if s is None:
            acc[w] = [p["v"], 1]
        else:
            s[0] += p["v"]
            s[1] += 1
    return len({w: s[0] / s[1] for w, s in acc.items()})


def main(other: str, n: int, rounds: int) -> None:
    site = [p for p in sys.path if "site-packages" not in p and p not in ("", ".")]
    site += [str(p) for p in (HERE.parent / ".venv" / "lib").glob("python3*/site-packages")]
    contenders: dict[str, Any] = {}
    for name, root in (("other", other), ("this", str(HERE.parent))):
        host, mean = load(root, site)
        many, one = elements(host, n, 1000), elements(host, n, 1)

        def run(els: list[Any], host: Any = host, mean: Any = mean) -> list[Any]:
            h = host.Host(host.TumblingWindow(TUMBLE), mean, key="k", value="v")
            out: list[Any] = h.process_many(els) + h.flush()
            return out

        contenders[f"{name}_1000_keys"] = lambda run=run, els=many: run(els)
        contenders[f"{name}_1_key"] = lambda run=run, els=one: run(els)
        if name == "other":
            contenders["floor"] = lambda els=many, insert=host.Insert: floor(els, insert)
    wall, cpu, outputs = timed_rounds(contenders, rounds)
    for k in contenders:
        print(f"{k:16s} wall {wall[k]:.3f} s  cpu {cpu[k]:.3f} s")
    for v in ("other", "this"):
        print(
            f"{v}: 1,000 keys / dict loop: wall {wall[v + '_1000_keys'] / wall['floor']:.2f}, "
            f"cpu {cpu[v + '_1000_keys'] / cpu['floor']:.2f}; 1,000 keys / one key: "
            f"cpu {cpu[v + '_1000_keys'] / cpu[v + '_1_key']:.2f}"
        )
    for s in ("1000_keys", "1_key"):
        same = outputs[f"other_{s}"] == outputs[f"this_{s}"]
        print(f"same outputs ({s}): {same} ({len(outputs['this_' + s])} elements)")


def timed_rounds(
    contenders: dict[str, Any], rounds: int
) -> tuple[dict[str, float], dict[str, float], dict[str, list[Any]]]:
    """Best wall and CPU seconds of each contender over ``rounds``
    round-robin rounds, and each one's outputs of the first round (as
    type and repr, to compare versions; not the ``floor``'s)."""
    wall = {k: float("inf") for k in contenders}
    cpu = dict(wall)
    outputs: dict[str, list[Any]] = {}
    for r in range(rounds):
        for k, fn in contenders.items():
            w0, c0 = time.perf_counter(), time.process_time()
            got = fn()
            wall[k] = min(wall[k], time.perf_counter() - w0)
            cpu[k] = min(cpu[k], time.process_time() - c0)
            if r == 0 and k != "floor":
                outputs[k] = [(type(o).__name__, repr(o)) for o in got]
            # freed here, untimed: dropped at the next call's assignment it
            # would charge 100,000 outputs to the next contender (a one-key run)
            del got
    return wall, cpu, outputs


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000,
        int(sys.argv[3]) if len(sys.argv) > 3 else 8,
    )
