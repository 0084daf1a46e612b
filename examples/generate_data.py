"""Generate examples/data/readings.parquet: a week of temperature readings of six sensors.

Deterministic (fixed seed, fixed start date), so the committed file can be
regenerated bit for bit: ``.venv/bin/python examples/generate_data.py``.

Each sensor reports about every 10 s with jitter (irregular timestamps), its
temperature following a daily cycle plus a slowly wandering drift (AR(1)), and
white measurement noise. Two sensors run hot in the afternoons (they cross the
demo's alarm threshold), one goes offline for a few hours, and a few readings
are spikes, as real sensors do.

Columns: ``ts`` (timestamp, UTC, millisecond precision), ``sensor`` (string),
``temp`` (double, degrees Celsius, two decimals).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20240501
START = datetime(2024, 5, 1, tzinfo=UTC)
DAYS = 7
PERIOD_S = 10.0
OUT = Path(__file__).resolve().parent / "data" / "readings.parquet"

# sensor -> (mean temperature, daily amplitude): boiler rooms run hot
SENSORS: dict[str, tuple[float, float]] = {
    "boiler-1": (27.0, 5.0),
    "boiler-2": (26.0, 5.5),
    "hall": (21.0, 2.0),
    "lab": (22.5, 1.5),
    "office": (22.0, 3.0),
    "roof": (18.0, 8.0),
}
OFFLINE = ("lab", 2 * 86_400 + 10 * 3_600, 2 * 86_400 + 15 * 3_600)  # sensor, from, to (s)


def sensor_readings(
    rng: np.random.Generator, name: str, mean: float, amplitude: float
) -> tuple[np.ndarray, np.ndarray]:
    """(seconds since START, temperature) of one sensor."""
    n = int(DAYS * 86_400 / PERIOD_S)
    gaps = rng.uniform(0.7 * PERIOD_S, 1.3 * PERIOD_S, n)
    t = np.cumsum(gaps)
    t = t[t < DAYS * 86_400]
    # the daily cycle peaks at 15:00
    daily = amplitude * np.sin(2 * np.pi * (t / 86_400 - 9 / 24))
    drift = np.empty(len(t))
    level = 0.0
    shocks = rng.normal(0.0, 0.05, len(t))
    for i, shock in enumerate(shocks):  # AR(1): slow wandering around the cycle
        level = 0.999 * level + shock
        drift[i] = level
    noise = rng.normal(0.0, 0.15, len(t))
    temp = mean + daily + drift + noise
    spikes = rng.random(len(t)) < 0.0005
    temp[spikes] += rng.choice([-1.0, 1.0], spikes.sum()) * rng.uniform(5, 12, spikes.sum())
    if name == OFFLINE[0]:
        keep = (t < OFFLINE[1]) | (t >= OFFLINE[2])
        t, temp = t[keep], temp[keep]
    return t, np.round(temp, 2)


def generate() -> pa.Table:
    rng = np.random.default_rng(SEED)
    start_us = int(START.timestamp()) * 1_000_000
    parts = []
    for name, (mean, amplitude) in SENSORS.items():
        t, temp = sensor_readings(rng, name, mean, amplitude)
        ts = start_us + np.round(t * 1_000).astype(np.int64) * 1_000  # millisecond precision
        parts.append((ts, np.full(len(ts), name, dtype=object), temp))
    ts = np.concatenate([p[0] for p in parts])
    sensor = np.concatenate([p[1] for p in parts])
    temp = np.concatenate([p[2] for p in parts])
    order = np.lexsort((sensor, ts))  # by time, as a feed would deliver them
    return pa.table(
        {
            "ts": pa.array(ts[order], pa.timestamp("us", tz="UTC")),
            "sensor": pa.array(sensor[order], pa.string()),
            "temp": pa.array(temp[order], pa.float64()),
        }
    )


def main() -> None:
    table = generate()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        OUT,
        compression="zstd",
        compression_level=9,
        use_dictionary=["sensor"],
        column_encoding={"ts": "DELTA_BINARY_PACKED", "temp": "BYTE_STREAM_SPLIT"},
        row_group_size=1 << 20,
    )
    print(
        f"wrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}: "
        f"{table.num_rows:,} rows, {OUT.stat().st_size / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
