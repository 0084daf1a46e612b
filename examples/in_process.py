"""udm in-process (no Spark): UDMs written with udm.sdk over a small sensor stream.

Three sensors report a temperature every 10 s, valid until the next reading. The
physical stream has a correction (retract + insert), a shortened lifetime, a late
reading and CTIs. We derive its CHT and evaluate several windows in-process.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from udm import host, sdk
from udm.host import Cht, Cti, Insert, Retract

S = 1_000_000  # ticks per second (1 tick = 1 microsecond)
READINGS = {  # temperature at 0 s, 10 s, 20 s, ...; s2's 35.0 is a glitch
    "s1": [20.0, 21.5, 23.0, 22.0, 21.0, 20.5],
    "s2": [18.0, 18.5, 19.0, 35.0, 19.5, 20.0],
    "s3": [25.0, 24.0, 26.5, 27.0, 26.0],
}


def sensor_stream() -> list[host.Element]:
    stream: list[host.Element] = []
    for i in range(6):
        t = i * 10 * S
        if i in (2, 4):
            stream.append(Cti(t))  # nothing later changes time before t
        for sensor, temps in READINGS.items():
            if i < len(temps):
                payload = {"sensor": sensor, "temp": temps[i]}
                stream.append(Insert(f"{sensor}-{i}", t, t + 10 * S, payload))
        if i == 2:  # a late reading for [5 s, 15 s) arrives after CTI 20 s: dropped
            stream.append(Insert("s1-late", 5 * S, 15 * S, {"sensor": "s1", "temp": 99.0}))
        if i == 3:  # the glitch is retracted (new end = start) and replaced
            stream.append(Retract("s2-3", 30 * S, 40 * S, 30 * S))
            stream.append(Insert("s2-3b", 30 * S, 40 * S, {"sensor": "s2", "temp": 19.2}))
        if i == 5:  # s3 went offline at 45 s: its last reading ends early
            stream.append(Retract("s3-4", 40 * S, 50 * S, 45 * S))
    stream.append(Cti(60 * S))
    return stream


@sdk.aggregate
def median(values: Sequence[float]) -> float:
    return statistics.median(values)


@sdk.aggregate
def count(values: Sequence[float]) -> int:
    return len(values)


@sdk.aggregate
def spread(values: Sequence[float]) -> float:
    return max(values) - min(values)


class Mean(sdk.IncrementalAggregate):
    """Incremental: a host adds and removes readings instead of recomputing windows."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] - value, state[1] - 1)

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class TimeWeightedAverage(sdk.TimeSensitiveAggregate):
    """Weighs each reading by how long it is valid (inside the window when clipped)."""

    def compute_result(
        self, events: Sequence[sdk.IntervalEvent[float]], w: sdk.WindowDescriptor
    ) -> float:
        return sum(e.payload * e.duration for e in events) / sum(e.duration for e in events)


def queries(cht: Cht, until: int) -> dict[str, dict[Any, Cht]]:
    """Each query's output CHT per sensor, for the windows ending by `until`."""
    by_sensor = partial(host.evaluate_by_key, cht, "sensor", value="temp", watermark=until)
    return {
        "Median per sensor, tumbling 20 s": by_sensor(host.TumblingWindow(20 * S), median),
        "Incremental mean, hopping 20 s every 10 s": by_sensor(
            host.HoppingWindow(20 * S, 10 * S), Mean
        ),
        "Time-weighted average, tumbling 15 s, full input clipping": by_sensor(
            host.TumblingWindow(15 * S), TimeWeightedAverage, input_clipping="full"
        ),
        "Mean of the last 3 readings (count by start; output at the window's last tick)": (
            by_sensor(host.CountByStartWindow(3), Mean)
        ),
        "All sensors, snapshot windows (one per change of the live readings)": {
            "readings": host.evaluate(cht, host.SnapshotWindow(), count, watermark=until),
            "spread": host.evaluate(
                cht, host.SnapshotWindow(), spread, value="temp", watermark=until
            ),
        },
    }


def seconds(t: int) -> str:
    return f"{t // S}s" if t % S == 0 else f"{t / S:.6f}s"


def lifetime(start: int, end: int) -> str:
    return f"point {seconds(start)}" if end == start + 1 else f"[{seconds(start)}, {seconds(end)})"


def cell(value: Any) -> str:
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def show(console: Console, title: str, results: dict[Any, Cht]) -> None:
    console.print(f"[bold]{title}[/bold]")
    table = Table()
    table.add_column("output lifetime")
    columns = sorted(results)
    for column in columns:
        table.add_column(str(column), justify="right")
    lifetimes = sorted({(e.start, e.end) for cht in results.values() for e in cht})
    for start, end in lifetimes:
        cells = [
            next((cell(e.payload) for e in results[c] if (e.start, e.end) == (start, end)), "-")
            for c in columns
        ]
        table.add_row(lifetime(start, end), *cells)
    console.print(table)


def main() -> None:
    console = Console(width=100, highlight=False)
    stream = sensor_stream()
    cht, stats = host.derive_cht(stream, cti_policy="adjust")
    console.print(
        f"Physical stream: {len(stream)} elements -> CHT of {len(cht)} events; "
        f"CTI policy 'adjust' dropped {stats.dropped_inserts} late insert(s).\n"
    )
    until = max(e.time for e in stream if isinstance(e, Cti))
    for title, results in queries(cht, until).items():
        show(console, title, results)
    console.print(f"Only windows ending by the last CTI ({seconds(until)}) are output.")


if __name__ == "__main__":
    main()
