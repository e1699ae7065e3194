"""Rewriting a Flink canonical savepoint of Events RowData values (issue 12, item 8), compressed
(Snappy per key group) and not, beside its floor and beside real Flink restoring it, in one run.

- **statemorph migrate**: ``engine.migrate_flink_savepoint`` to the evolved Events type (local
  engine, 2 threads): read, decompress, migrate every value, recompress, write, fsync, atomic
  rename.
- **floor**: the same keyed-state files read, each key group Snappy-decoded, copied,
  Snappy-encoded as its own framed stream (cramjam) and written in the same layout, fsynced; for
  the uncompressed savepoint read, copy and write (``flink_savepoint.copy_floor``).
- **Flink restore**: real Flink 2.3 restoring the same savepoint as is (old type, RocksDB, the
  savepoint's parallelism 2) and reading the first 1,000 keys' values, timed as one whole Java
  process (``ci/flink/flink.py restore_timed``; JVM start-up included). Skipped without Java or
  the built ci/flink classes.

The savepoint (``STATEMORPH_BENCH_FLINK_N`` entries, default 10,000,000; parallelism 2, max
parallelism 128, int keys) is built once into ``benchmarks/.cache/flink`` (git-ignored) by
``flink_savepoint.build``; how and why: that module's docstring. Rounds:
``STATEMORPH_BENCH_FLINK_ROUNDS`` (default 3; the Flink restore runs once).

Run: ``.venv/bin/python -m pytest benchmarks/test_flink_rewrite.py --benchmark-only``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor

from . import flink_savepoint as F
from .conftest import record

N = int(os.environ.get("STATEMORPH_BENCH_FLINK_N", "10000000"))
ROUNDS = int(os.environ.get("STATEMORPH_BENCH_FLINK_ROUNDS", "3"))
CACHE = Path(__file__).resolve().parent / ".cache" / "flink"
PROBE_KEYS = 1000
#: A long restore gets the JVM's normal compilers (the ci driver's default flags suit short jobs).
FLINK_JVM = ["-Xmx2g", "-Dlog4j2.level=WARN"]
VARIANTS = [True, False]
IDS = ["snappy", "uncompressed"]


@pytest.fixture(scope="session", params=VARIANTS, ids=IDS)
def flink_sp(request: Any) -> F.BenchSavepoint:
    return F.build(CACHE, N, request.param)


def _label(sp: F.BenchSavepoint) -> str:
    return "snappy" if sp.compressed else "uncompressed"


def _record(name: str, benchmark: Any, sp: F.BenchSavepoint) -> None:
    stats = benchmark.stats.stats if hasattr(benchmark.stats, "stats") else benchmark.stats
    best = float(stats.min)
    record(name, benchmark, sp.n, state_mb_per_s=round(sp.state_bytes / best / 1e6, 1),
           file_mb_per_s=round(sp.disk_bytes / best / 1e6, 1), best_s=round(best, 3))


def _run(benchmark: Any, fn: Any, dst: Path, rounds: int = ROUNDS) -> None:
    def setup() -> None:
        shutil.rmtree(dst, ignore_errors=True)

    benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
    shutil.rmtree(dst, ignore_errors=True)


def test_flink_floor(benchmark: Any, flink_sp: F.BenchSavepoint, tmp_path: Path) -> None:
    extents = flink_sp.extents()
    dst = tmp_path / "floor"
    _run(benchmark, lambda: F.copy_floor(flink_sp, extents, dst), dst)
    what = "read, unsnappy, copy, snappy, write" if flink_sp.compressed else "read, copy, write"
    _record(f"flink {_label(flink_sp)}: floor ({what})", benchmark, flink_sp)


def test_flink_migrate(benchmark: Any, flink_sp: F.BenchSavepoint, tmp_path: Path) -> None:
    dst = tmp_path / "migrated"
    descriptors = {F.UID: [ValueStateDescriptor(F.STATE, RowDataSerializer(F.NEW))]}
    reports = []
    _run(benchmark, lambda: reports.append(migrate_flink_savepoint(flink_sp.path, dst, descriptors, threads=2)), dst)
    assert all(r.rows == flink_sp.n for r in reports), [r.rows for r in reports]
    _record(f"flink {_label(flink_sp)}: statemorph migrate", benchmark, flink_sp)


def _driver() -> Any:
    name = "statemorph_ci_flink"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, F.ROOT / "ci" / "flink" / "flink.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_flink_restore_real_flink(benchmark: Any, flink_sp: F.BenchSavepoint) -> None:
    driver = _driver()
    try:
        driver.classpath()
    except driver.FlinkUnavailable as e:
        pytest.skip(f"real Flink unavailable: {e}")
    results = []

    def restore() -> None:
        results.append(driver.restore_timed(flink_sp.path, flink_sp.path.parent / "spec.json", PROBE_KEYS,
                                            jvm_flags=FLINK_JVM))

    benchmark.pedantic(restore, rounds=1, iterations=1, warmup_rounds=0)
    assert all(r.probed == PROBE_KEYS and r.found == PROBE_KEYS for r in results), results
    _record(f"flink {_label(flink_sp)}: real Flink restore (whole JVM)", benchmark, flink_sp)
