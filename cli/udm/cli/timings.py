"""``udm-cli run --profile``: where each query's time goes.

The CLI times the phases it controls, per query: **plan** (``to_dataframe``:
udm building the Spark plan, including the planner's small sample jobs),
**write** (the action that runs the query's Spark jobs and writes the
files) and **read** (reading the result back to count and preview it);
and, before the queries, **load** (starting Spark and calling the query
file's ``queries(spark)``). These work everywhere, Spark Connect included.

On a classic session (a driver-side JVM) it also reads what Spark's SQL
status store recorded for the SQL executions each phase ran (nothing is
added to the jobs): how many executions, jobs, stages and tasks, and
Spark's own Python metrics summed over every task: ``time to run Python
workers`` (from the first row sent to the last received: the workers'
share of the write, both cores together) and ``time to execute Python
code`` (inside udm's worker functions and the UDMs). Spark Connect keeps
that store on the server, so there the profile has the phases only.

On Linux each phase also shows the CPU seconds of this process and every
process it started (the local JVM and its Python workers, read from
``/proc``): on a machine shared with other jobs, wall time mostly
measures the load, CPU time what the phase itself cost.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Profile", "QueryTimes", "parse_duration"]

#: Spark's SQL metric names (PythonSQLMetrics) summed into the profile
PYTHON_TOTAL = "time to run Python workers"
PYTHON_CODE = "time to execute Python code"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a timing metric as Spark's status store formats it: the
    total (``1.2 s``, ``350 ms``, ``2.0 m``) on a line of its own, or
    ``total (min, med, max ...)`` followed by the total on the next line."""
    last = text.strip().splitlines()[-1] if text.strip() else ""
    found = re.match(r"\s*([0-9.,]+)\s*(ms|s|m|h)\b", last)
    if found is None:
        return 0.0
    return float(found.group(1).replace(",", "")) * _UNITS[found.group(2)]


@dataclass
class SparkWork:
    """What Spark recorded for the SQL executions of one phase."""

    executions: int = 0
    jobs: int = 0
    stages: int = 0
    tasks: int = 0
    python_total: float = 0.0
    python_code: float = 0.0

    def describe(self) -> str:
        """The Spark work in one line: executions, jobs, stages, tasks and the
        Python workers' time."""
        text = (
            f"{self.executions} SQL executions, {self.jobs} jobs, "
            f"{self.stages} stages, {self.tasks} tasks"
        )
        if self.python_total:
            text += (
                f"; Python workers {self.python_total:.1f} s "
                f"(Python code {self.python_code:.1f} s), task time summed"
            )
        return text


def tree_cpu(root: int | None = None) -> float | None:
    """CPU seconds (user + system, reaped children included) of process
    ``root`` (this one) and all its descendants; None without ``/proc``."""
    root = os.getpid() if root is None else root
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for name in names:
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        # after the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17)
        parent[int(name)] = int(fields[1])
        ticks[int(name)] = sum(int(x) for x in fields[11:15])
    if root not in ticks:
        return None
    total, todo = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class QueryTimes:
    """One query's phases (seconds) and, on a classic session, its Spark work."""

    name: str
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    work: dict[str, SparkWork] = field(default_factory=dict)

    def total(self) -> float:
        """The query's seconds over all its phases."""
        return sum(self.seconds.values())


class _StatusStore:
    """Spark's SQL status store on a classic session (py4j)."""

    def __init__(self, spark: Any) -> None:
        jsession = spark._jsparkSession
        self.store = jsession.sharedState().statusStore()
        self.tracker = spark.sparkContext.statusTracker()

    def execution_ids(self) -> set[int]:
        listed = self.store.executionsList()
        return {int(listed.apply(i).executionId()) for i in range(listed.size())}

    def work(self, ids: set[int]) -> SparkWork:
        out = SparkWork(executions=len(ids))
        for exec_id in sorted(ids):
            found = self.store.execution(exec_id)
            if found.isEmpty():
                continue
            ui = found.get()
            jobs = ui.jobs().keySet().toSeq()
            out.jobs += int(jobs.size())
            stages = ui.stages().toSeq()
            out.stages += int(stages.size())
            for i in range(stages.size()):
                info = self.tracker.getStageInfo(int(stages.apply(i)))
                if info is not None:
                    out.tasks += info.numTasks
            names: dict[int, str] = {}
            metrics = ui.metrics()
            for i in range(metrics.size()):
                m = metrics.apply(i)
                if m.name() in (PYTHON_TOTAL, PYTHON_CODE):
                    names[int(m.accumulatorId())] = m.name()
            if not names:
                continue
            values = self.store.executionMetrics(exec_id)
            for acc, name in names.items():
                value = values.get(acc)
                if value.isEmpty():
                    continue
                seconds = parse_duration(str(value.get()))
                if name == PYTHON_TOTAL:
                    out.python_total += seconds
                else:
                    out.python_code += seconds
        return out


class Profile:
    """The timings of one ``udm-cli run``; disabled, every phase is a no-op."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.queries: list[QueryTimes] = []
        self.before: dict[str, float] = {}
        self.before_cpu: dict[str, float] = {}
        self._store: _StatusStore | None = None

    def attach(self, spark: Any) -> None:
        """Read Spark's SQL status store when the session has one (classic)."""
        if not self.enabled or spark is None:
            return
        try:
            self._store = _StatusStore(spark)
        except Exception:  # Spark Connect, or an unexpected JVM: phases only
            self._store = None

    @contextmanager
    def setup(self, phase: str) -> Iterator[None]:
        """Time a phase before the queries (``load``)."""
        t0, c0 = time.perf_counter(), tree_cpu() if self.enabled else None
        try:
            yield
        finally:
            if self.enabled:
                self.before[phase] = self.before.get(phase, 0.0) + time.perf_counter() - t0
                c1 = tree_cpu()
                if c0 is not None and c1 is not None:
                    self.before_cpu[phase] = c1 - c0

    def query(self, name: str) -> QueryTimes:
        """The timings of query ``name`` (phases added with :meth:`phase`)."""
        found = next((t for t in self.queries if t.name == name), None)
        if found is None:
            found = QueryTimes(name)
            if self.enabled:
                self.queries.append(found)
        return found

    @contextmanager
    def phase(self, times: QueryTimes, phase: str) -> Iterator[None]:
        """Time ``phase`` of a query, and the Spark work it ran."""
        if not self.enabled:
            yield
            return
        store = self._store
        seen = _safe_ids(store)
        t0, c0 = time.perf_counter(), tree_cpu()
        try:
            yield
        finally:
            times.seconds[phase] = times.seconds.get(phase, 0.0) + time.perf_counter() - t0
            c1 = tree_cpu()
            if c0 is not None and c1 is not None:
                times.cpu[phase] = times.cpu.get(phase, 0.0) + c1 - c0
            if store is not None and seen is not None:
                after = _safe_ids(store)
                if after is not None:
                    # a JVM without these fields: the phases only
                    with suppress(Exception):
                        times.work[phase] = store.work(after - seen)

    def lines(self) -> list[str]:
        """The report, one line per phase: wall seconds, CPU seconds of
        the process tree, Spark's work."""
        out = ["profile (wall seconds; cpu: this process, the JVM and the Python workers):"]
        for phase, seconds in self.before.items():
            out.append(f"  {phase}: {seconds:.2f}{_cpu(self.before_cpu.get(phase))}")
        for t in self.queries:
            out.append(f"  {t.name}: {t.total():.2f}{_cpu(sum(t.cpu.values()) if t.cpu else None)}")
            for phase, seconds in t.seconds.items():
                work = t.work.get(phase)
                detail = f"  [{work.describe()}]" if work is not None and work.executions else ""
                out.append(f"    {phase}: {seconds:.2f}{_cpu(t.cpu.get(phase))}{detail}")
        if self._store is None and self.queries:
            out.append("  (Spark's job and Python metrics need a classic session, not Connect)")
        return out


def _cpu(seconds: float | None) -> str:
    return "" if seconds is None else f" (cpu {seconds:.2f})"


def _safe_ids(store: _StatusStore | None) -> set[int] | None:
    if store is None:
        return None
    try:
        return store.execution_ids()
    except Exception:
        return None
