"""Run every benchmark case, print a table, write benchmarks/results.json.

Each case runs in a fresh Python process (so its peak RSS is its own) and
every figure that has a target is reported as a ratio against a baseline
measured in the same run. ``make bench`` runs all cases; pass case names
(or prefixes) to run some: ``python benchmarks/run.py host.``.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Targets  # benchmarks/ is no package: its folder is on the path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"

# Peak RSS is the kernel's high-water mark of this process image (VmHWM):
# ru_maxrss also counts the parent's before exec on Linux, and the parent
# has imported every case module (Spark's among them), so it read ~110 MB
# for every case.
CHILD = """
import json, resource, sys
sys.path.insert(0, {here!r})
module = __import__({module!r})
result = module.CASES[{name!r}]()
def peak_mb():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result["peak_rss_mb"] = peak_mb()
print("RESULT " + json.dumps(result))
"""


def discover() -> dict[str, str]:
    """case name -> module name, from every benchmarks/cases_*.py."""
    sys.path.insert(0, str(HERE))
    cases: dict[str, str] = {}
    for path in sorted(HERE.glob("cases_*.py")):
        module = importlib.import_module(path.stem)
        for name in module.CASES:
            cases[name] = path.stem
    return cases


def run_case(name: str, module: str) -> dict[str, Any]:
    code = CHILD.format(here=str(HERE), module=module, name=name)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            result["wall_seconds"] = wall
            return result
    return {"error": (proc.stderr or proc.stdout)[-2000:], "wall_seconds": wall}


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the issues ask for, each with its target and verdict."""
    rows = Targets()
    t = results.get("host.throughput_1M", {})
    if "events_per_s" in t:
        rows.at_least(
            "host throughput, events/s (1M point events, tumbling, incremental sum)",
            t["events_per_s"],
            200_000,
        )
        rows.add(
            "host time / plain Python dict loop (the floor)",
            t["ratio_to_plain_loop"],
            "reported",
            None,
        )
    s = results.get("host.snapshot_incremental", {})
    if "speedup" in s:
        rows.at_least(
            "snapshot windows: incremental mean speed-up over re-evaluating affected windows",
            s["speedup"],
            20,
            ">= 20x",
        )
    a, b = results.get("host.scaling_1M", {}), results.get("host.scaling_10M", {})
    if "events_per_s" in a and "events_per_s" in b:
        ratio = a["events_per_s"] / b["events_per_s"]
        rows.at_most("scaling: events/s at 1M / events/s at 10M", ratio, 1.2)
        rss = b["peak_rss_mb"] / a["peak_rss_mb"]
        rows.at_most("scaling: peak RSS at 10M / peak RSS at 1M", rss, 1.2)
    return rows.rows + _extra_targets(results)


def _extra_targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for module in {m for m in discover().values()}:
        mod = importlib.import_module(module)
        fn = getattr(mod, "targets", None)
        if fn is not None:
            rows.extend(fn(results))
    return rows


def main(argv: list[str]) -> int:
    cases = discover()
    wanted = [n for n in cases if not argv or any(n.startswith(a) for a in argv)]
    results: dict[str, dict[str, Any]] = {}
    if RESULTS.exists() and argv:
        results = json.loads(RESULTS.read_text()).get("cases", {})
    for name in wanted:
        print(f"running {name} ...", flush=True)
        results[name] = run_case(name, cases[name])
        print("  " + json.dumps(results[name]), flush=True)
    rows = targets(results)
    report = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": "make bench",
        "cases": results,
        "targets": rows,
    }
    RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print()
    print(f"{'figure':<90} {'value':>14}  {'target':<12} met")
    for row in rows:
        value = row["value"]
        shown = f"{value:,.2f}" if isinstance(value, float | int) else str(value)
        met = {True: "yes", False: "NO", None: "-"}[row["met"]]
        print(f"{row['figure']:<90} {shown:>14}  {row['target']:<12} {met}")
    failed = [name for name, r in results.items() if "error" in r]
    for name in failed:
        print(f"\n{name} failed:\n{results[name]['error']}")
    print(f"\nwrote {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
