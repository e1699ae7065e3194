"""Shared data for the benchmark suite: the Events workload (old and new schema), built once per
session with numpy and the bulk API, plus a summary table printed at the end of the run.

Run: ``.venv/bin/python -m pytest benchmarks/ --benchmark-only`` (from the repo root). Set
``STATEMORPH_BENCH_N`` to change the entry count (default 2,000,000)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from statemorph import arrow, serializers

N = int(os.environ.get("STATEMORPH_BENCH_N", "2000000"))
OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
       "appVersion STRING, sessionId BIGINT>>")
DEVICES = ["phone", "tablet", "desktop", "smart-tv", "wearable-device", "car-infotainment-unit"]

RATES: dict[str, dict[str, Any]] = {}


@dataclass
class Events:
    n: int
    struct: pa.StructArray
    old_bytes: pa.BinaryArray
    so: Any
    sn: Any
    snapshot: Any


def make_struct(n: int, seed: int = 7) -> pa.StructArray:
    rng = np.random.default_rng(seed)
    event_id = (np.arange(n, dtype=np.int64) * 7919 + 1_000_000_000_000)
    user_id = rng.integers(0, 50_000_000, n, dtype=np.int32)
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(0, 50, n, dtype=np.int64))
    dev_idx = rng.choice(len(DEVICES), n, p=[0.45, 0.15, 0.15, 0.1, 0.1, 0.05]).astype(np.int32)
    device = pa.DictionaryArray.from_arrays(pa.array(dev_idx), pa.array(DEVICES)).cast(pa.string())
    meta = pa.StructArray.from_arrays([pa.array(user_id), pa.array(ts), device], ["userId", "timestamp", "deviceType"])
    return pa.StructArray.from_arrays([pa.array(event_id), meta], ["eventId", "metadata"])


@pytest.fixture(scope="session")
def events() -> Events:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    struct = make_struct(N)
    old_bytes = arrow.encode(struct, so, threads=2)
    return Events(N, struct, old_bytes, so, sn, so.snapshot_configuration())


def record(name: str, benchmark: Any, entries: int, **extra: Any) -> None:
    """Store entries/s (from the benchmark's best round) for the summary table."""
    stats = benchmark.stats.stats if hasattr(benchmark.stats, "stats") else benchmark.stats
    best = float(stats.min)
    rate = entries / best if best > 0 else float("nan")
    benchmark.extra_info.update(entries=entries, entries_per_s=rate, **extra)
    RATES[name] = {"entries_per_s": rate, "entries": entries, **extra}


def record_external(name: str, rate: float, entries: int, **extra: Any) -> None:
    RATES[name] = {"entries_per_s": rate, "entries": entries, **extra}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RATES:
        return
    tr = terminalreporter
    tr.write_sep("=", "statemorph Events workload (entries/s, best round)")
    tr.write_line(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                  f"Python {platform.python_version()}, pyarrow {pa.__version__}, numpy {np.__version__}, N={N}")
    for name, r in sorted(RATES.items()):
        extra = ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("entries_per_s", "entries"))
        tr.write_line(f"{name:42s} {r['entries_per_s']:>16,.0f}  (n={r['entries']:,}) {extra}")
