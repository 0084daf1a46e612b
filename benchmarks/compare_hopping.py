"""Two versions of the in-process host on the hopping median, in ONE process.

:mod:`compare_host`'s method (read its docstring) for ``host.hopping_median``:
1M point events over 1,000 keys, hopping windows of 10,000 / 1,000 ticks,
a non-incremental ``statistics.median`` through ``@aggregate``, a CTI every
1,000 events. Another version of the host (a ``git archive`` of its
``sdk`` and ``host``) and this checkout's run round-robin with the
bisect-slice median loop (``floors_median.floor_hopping_median``), best of
``rounds``, wall and CPU; both versions' outputs (ids, order, values) are
compared. Run with ``-S``::

    mkdir -p /tmp/base && git archive main sdk host | tar -x -C /tmp/base
    .venv/bin/python -S benchmarks/compare_hopping.py /tmp/base 1000000 4
"""

from __future__ import annotations

import importlib
import statistics
import sys
from typing import Any

# the elements of host.hopping_median are host.keys_tumbling_mean's (cases_host._elements)
from compare_host import HERE, elements, load

HOP = 1_000


def main(other: str, n: int, rounds: int) -> None:
    """Time ``other``'s host, this checkout's and the floor round-robin."""
    site = [p for p in sys.path if "site-packages" not in p and p not in ("", ".")]
    site += [str(p) for p in (HERE.parent / ".venv" / "lib").glob("python3*/site-packages")]
    contenders: dict[str, Any] = {}
    for name, root in (("other", other), ("this", str(HERE.parent))):
        host, _ = load(root, site)
        sdk = importlib.import_module("udm.sdk")
        els = elements(host, n, 1000)

        @sdk.aggregate  # type: ignore[misc]
        def median(values: list[float]) -> float:
            return float(statistics.median(values))

        def run(host: Any = host, els: list[Any] = els, median: Any = median) -> list[Any]:
            h = host.Host(host.HoppingWindow(HOP * 10, HOP), median, key="k", value="v")
            out: list[Any] = h.process_many(els) + h.flush()
            return out

        contenders[name] = run
        if name == "other":  # its Insert is the other version's (type checks)
            sys.path.append(str(HERE))
            floors = importlib.import_module("floors_median")
            loop = floors.floor_hopping_median
            contenders["floor"] = lambda els=els, loop=loop: loop(els, HOP * 10, HOP)
    from compare_host import timed_rounds  # this script's folder is on the path

    wall, cpu, outputs = timed_rounds(contenders, rounds)
    for k in contenders:
        print(f"{k:8s} wall {wall[k]:.3f} s  cpu {cpu[k]:.3f} s")
    for v in ("other", "this"):
        print(
            f"{v}: host / bisect-slice loop: wall {wall[v] / wall['floor']:.2f}, "
            f"cpu {cpu[v] / cpu['floor']:.2f}"
        )
    rel_wall, rel_cpu = wall["this"] / wall["other"], cpu["this"] / cpu["other"]
    print(f"this / other: wall {rel_wall:.3f}, cpu {rel_cpu:.3f}")
    same = outputs["other"] == outputs["this"]
    print(f"same outputs: {same} ({len(outputs['this'])} elements)")


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000,
        int(sys.argv[3]) if len(sys.argv) > 3 else 4,
    )
