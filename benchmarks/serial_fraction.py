"""The serial fraction of the Flink savepoint rewrite, and its time beside the parallel floor, at 1
and 2 threads (issue 22, item 3: on a 2-core machine the serial fraction bounds the speed-up on
any machine, where a scaling run cannot be made).

Usage (from the repo root, kernels built)::

    .venv/bin/python -m benchmarks.serial_fraction [--n 10000000] [--rounds 3] [--threads 1,2]
        [--baseline OLD_SRC] [--json out.json]

On the Events savepoint of ``flink_savepoint.build`` (Snappy, parallelism 2, max parallelism 128),
each round runs, for each thread count, one after the other: the parallel floor
(``flink_savepoint.copy_floor(threads=T)``: read, Snappy-decode, copy, Snappy-encode and write the
same key groups on T threads, in this process), then ``engine.migrate_flink_savepoint(threads=T,
timings=True)`` in a fresh child process that migrates once to warm up (LLVM loaded, the plan's
machine code compiled) and times a second migration; with ``--baseline`` (the ``src`` of an older
checkout with its kernels built) the same child on that tree, without timings. Rounds interleave
everything, so the machine's load hits every column alike.

Printed per thread count: the best and median wall time of each, the migration's CPU time, its
ratio to the floor of the same run (best to best, median to median), and the serial fraction of
the best round (``serial_s / cpu_s``, :mod:`statemorph.bulk.serial_clock`: the wall time outside
the workers' section plus the ordered writes, over the process's CPU time) with the speed-up it
allows on 2 and 16 cores (Amdahl). The load average before and after is printed too: the machine
is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import statemorph

from . import flink_savepoint as F

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = Path(statemorph.__file__).resolve().parents[1]
"""The tree statemorph is imported from here (the checkout's ``src``, or the ``--target`` folder of
a wheel bundle on a machine without network): what the timed children run."""
CACHE = Path(__file__).resolve().parent / ".cache" / "flink"
_CHILD = """
import json, shutil, sys, time
from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor
src, dst, uid, state, new, threads, measure = sys.argv[1:8]
descriptors = {uid: [ValueStateDescriptor(state, RowDataSerializer(new))]}
extra = {"timings": True} if measure == "1" else {}
migrate_flink_savepoint(src, dst, descriptors, threads=int(threads))  # warm-up: LLVM loaded, the plan compiled
shutil.rmtree(dst)
t0, c0 = time.perf_counter(), time.process_time()
report = migrate_flink_savepoint(src, dst, descriptors, threads=int(threads), **extra)
out = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "rows": report.rows}
out["timings"] = getattr(report, "timings", None)
with open("/proc/self/status") as f:  # this process's own peak (a spawned child's ru_maxrss starts at its parent's)
    out["peak_rss_mib"] = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
print(json.dumps(out))
"""


def migrate(src_dir: Path, sp: F.BenchSavepoint, dst: Path, threads: int, measure: bool) -> dict[str, Any]:
    """One warm migration in a child process on the tree ``src_dir``."""
    shutil.rmtree(dst, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(src_dir))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(sp.path), str(dst), F.UID, F.STATE, F.NEW, str(threads),
                          "1" if measure else "0"], env=env, check=True, capture_output=True, text=True).stdout
    shutil.rmtree(dst, ignore_errors=True)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if result["rows"] != sp.n:
        raise RuntimeError(f"{src_dir}: migrated {result['rows']} rows of {sp.n}")
    return result


def floor(sp: F.BenchSavepoint, extents: Any, dst: Path, threads: int) -> dict[str, Any]:
    shutil.rmtree(dst, ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()
    F.copy_floor(sp, extents, dst, threads)
    result = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    shutil.rmtree(dst, ignore_errors=True)
    return result


def amdahl(serial_fraction: float, cores: int) -> float:
    """The most speed-up ``cores`` give a run with this serial fraction."""
    return 1 / (serial_fraction + (1 - serial_fraction) / cores)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model or platform.processor(), "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "platform": platform.platform()}


def measure(n: int, rounds: int, threads: list[int], baseline: Path | None) -> dict[str, Any]:
    CACHE.mkdir(parents=True, exist_ok=True)
    sp = F.build(CACHE, n, True)
    extents = sp.extents()
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=CACHE.parent) as tmp:
        for _ in range(rounds):
            for t in threads:
                runs.setdefault(("floor", t), []).append(floor(sp, extents, Path(tmp) / "floor", t))
                if baseline is not None:
                    runs.setdefault(("before", t), []).append(migrate(baseline, sp, Path(tmp) / "before", t, False))
                runs.setdefault(("migrate", t), []).append(migrate(INSTALLED, sp, Path(tmp) / "after", t, True))
    return {"n": n, "disk_bytes": sp.disk_bytes, "state_bytes": sp.state_bytes, "machine": machine(),
            "load_before": load_before, "load_after": os.getloadavg(),
            "runs": {f"{k}@{t}": v for (k, t), v in runs.items()}}


def report(result: dict[str, Any], threads: list[int]) -> list[str]:
    runs = result["runs"]
    lines = [f"{result['n']:,} entries, Snappy, {result['disk_bytes'] / 1e6:.0f} MB of files; {result['machine']}",
             f"load average before {result['load_before']}, after {result['load_after']}"]
    for t in threads:
        fl = runs[f"floor@{t}"]
        best_floor = min(r["seconds"] for r in fl)
        med_floor = statistics.median(r["seconds"] for r in fl)
        for kind in ("before", "migrate"):
            rs = runs.get(f"{kind}@{t}")
            if not rs:
                continue
            best = min(rs, key=lambda r: r["seconds"])
            med = statistics.median(r["seconds"] for r in rs)
            line = (f"threads {t} {kind:7}: best {best['seconds']:.2f} s (CPU {best['cpu']:.2f} s, "
                    f"{result['n'] / best['seconds'] / 1e6:.2f} M entries/s), median {med:.2f} s; "
                    f"floor best {best_floor:.2f} s, median {med_floor:.2f} s; "
                    f"/ floor {best['seconds'] / best_floor:.2f}x "
                    f"(medians {med / med_floor:.2f}x); rounds " + ", ".join(f"{r['seconds']:.2f}" for r in rs))
            lines.append(line)
            timing = best.get("timings")
            if timing:
                fractions = [r["timings"]["serial_fraction"] for r in rs]
                s = timing["serial_fraction"]
                lines.append(f"    serial: {timing['serial_s']:.3f} s (write {timing['write_s']:.3f} s, outside the "
                             f"workers {timing['wall_s'] - timing['parallel_s']:.3f} s) of {timing['cpu_s']:.2f} s CPU "
                             f"= serial fraction {s:.3f} (rounds " + ", ".join(f"{f:.3f}" for f in fractions) +
                             f"); at most {amdahl(s, 2):.2f}x on 2 cores, {amdahl(s, 16):.2f}x on 16")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--baseline", type=Path, default=None, help="src of an older checkout, kernels built")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    result = measure(a.n, a.rounds, threads, a.baseline)
    print("\n".join(report(result, threads)), flush=True)
    if a.json is not None:
        a.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
