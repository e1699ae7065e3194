"""How the Flink savepoint rewrite and the migrate kernel scale with the thread count (issue 22,
items 3 and 4): one command for a many-core machine (shared/many-core-bench.md: the project as a
wheel bundle, no network, no Java) and the same figures at 1 and 2 threads here.

Usage (from the repository root)::

    python -m benchmarks.scaling [--threads 1,2,4,8,16] [--n 40000000] [--kernel-n 10000000]
        [--rounds 3] [--parts kernel,engine] [--json out.json]

On a machine with the bundle installed into ``/tmp/site``:
``PYTHONPATH=/tmp/site python3 -m benchmarks.scaling`` (the children run the same tree).

Two parts, each measured beside its own floor at the same thread count, interleaved round by
round so the machine's load hits both alike:

- ``kernel``: ``arrow.migrate`` over ``--kernel-n`` Events values (the savepoint's evolution,
  in one Arrow array) at T threads, warmed first (the plan's machine code compiled, the memory
  pool holding pages), beside a copy of the same number of output bytes (data + offsets) into a
  fresh pool buffer on T threads (``memmove`` per range, the GIL released): what any migrate
  that writes its output must at least do. In a child process of its own.
- ``engine``: ``engine.migrate_flink_savepoint(threads=T, timings=True)`` on the Events
  savepoint of ``flink_savepoint.build`` (Snappy, parallelism 2, max parallelism 128; ``--n``
  takes a comma-separated list of sizes), warm, in a fresh child per round, beside the parallel
  floor ``flink_savepoint.copy_floor(threads=T)`` (:mod:`benchmarks.serial_fraction` runs both):
  wall and CPU time, entries/s, the ratio to the floor, the serial fraction and the child's own
  peak RSS (``VmHWM``).

Printed: one table per part, the machine, and the load average before and after. Name the
machine beside every figure taken from it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import serial_fraction as S

_KERNEL_CHILD = """
import ctypes, json, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np, pyarrow as pa
from statemorph import arrow, kernels
from statemorph.serializers import RowDataSerializer
from benchmarks import flink_savepoint as F
n, rounds, threads = int(sys.argv[1]), int(sys.argv[2]), [int(t) for t in sys.argv[3].split(",")]
so, sn = RowDataSerializer(F.OLD), RowDataSerializer(F.NEW)
snap = so.snapshot_configuration()
old = arrow.encode(F.events_struct(np.arange(n)), so, threads=max(threads))
for t in threads:  # warm: machine code compiled, pool pages held, range threads started
    for _ in range(2):
        out = arrow.migrate(old, snap, sn, threads=t)
size = sum(b.size for b in out.buffers()[1:])
src = np.ones(size, dtype=np.uint8)
del out
pools = {t: ThreadPoolExecutor(t) for t in threads if t > 1}

def copy(t):
    dst = pa.allocate_buffer(size)
    step = -(-size // t)
    def one(j):
        a = j * step
        ctypes.memmove(dst.address + a, src.ctypes.data + a, max(0, min(size, a + step) - a))
    if t == 1:
        one(0)
    else:
        list(pools[t].map(one, range(t)))
    return dst

def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    del out
    return took

runs = {}
for _ in range(rounds):
    for t in threads:
        runs.setdefault(f"migrate@{t}", []).append(timed(lambda: arrow.migrate(old, snap, sn, threads=t)))
        runs.setdefault(f"copy@{t}", []).append(timed(lambda: copy(t)))
print(json.dumps({"n": n, "input_bytes": old.buffers()[2].size, "output_bytes": size, "tier": kernels.TIER,
                  "runs": runs}))
"""


def kernel_part(n: int, rounds: int, threads: list[int]) -> dict[str, Any]:
    """The kernel beside the parallel copy, in a child on the tree statemorph is imported from."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(S.INSTALLED), str(S.ROOT)]))
    load_before = os.getloadavg()
    out = subprocess.run([sys.executable, "-c", _KERNEL_CHILD, str(n), str(rounds), ",".join(map(str, threads))],
                         env=env, cwd=S.ROOT, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(load_before=load_before, load_after=os.getloadavg())
    return result


def kernel_table(result: dict[str, Any], threads: list[int]) -> list[str]:
    runs, n = result["runs"], result["n"]
    lines = [f"kernel: arrow.migrate of {n:,} Events values ({result['input_bytes'] / 1e6:.0f} MB in, "
             f"{result['output_bytes'] / 1e6:.0f} MB out, tier {result['tier']}) beside a copy of the output bytes; "
             f"load {result['load_before']} -> {result['load_after']}",
             "| threads | copy best | migrate best | M values/s | migrate / copy (best) | (medians) |",
             "|---:|---:|---:|---:|---:|---:|"]
    for t in threads:
        m, c = runs[f"migrate@{t}"], runs[f"copy@{t}"]
        lines.append(f"| {t} | {min(c) * 1e3:.0f} ms | {min(m) * 1e3:.0f} ms | {n / min(m) / 1e6:.0f} | "
                     f"{min(m) / min(c):.2f}x | {statistics.median(m) / statistics.median(c):.2f}x |")
    return lines


def engine_table(result: dict[str, Any], threads: list[int]) -> list[str]:
    runs, n = result["runs"], result["n"]
    lines = [f"engine: {n:,} entries, Snappy, {result['disk_bytes'] / 1e6:.0f} MB of files; "
             f"load {result['load_before']} -> {result['load_after']}",
             "| threads | floor | migrate | M entries/s | CPU s | migrate / floor (best) | (medians) "
             "| serial fraction | peak RSS |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in threads:
        fl, mg = runs[f"floor@{t}"], runs[f"migrate@{t}"]
        best_floor = min(r["seconds"] for r in fl)
        best = min(mg, key=lambda r: r["seconds"])
        med = statistics.median(r["seconds"] for r in mg) / statistics.median(r["seconds"] for r in fl)
        frac = (best.get("timings") or {}).get("serial_fraction")
        lines.append(f"| {t} | {best_floor:.2f} s | {best['seconds']:.2f} s | {n / best['seconds'] / 1e6:.2f} | "
                     f"{best['cpu']:.1f} | {best['seconds'] / best_floor:.2f}x | {med:.2f}x | "
                     f"{'-' if frac is None else f'{100 * frac:.1f} %'} | "
                     f"{max(r.get('peak_rss_mib', 0) for r in mg):.0f} MiB |")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2,4,8,16")
    p.add_argument("--n", default="40000000", help="entries of the engine's savepoint (comma-separated: several)")
    p.add_argument("--kernel-n", type=int, default=10_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--parts", default="kernel,engine")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    parts = set(a.parts.split(","))
    out: dict[str, Any] = {"machine": S.machine(), "threads": threads}
    print(f"machine: {out['machine']}", flush=True)
    if "kernel" in parts:
        out["kernel"] = kernel_part(a.kernel_n, a.rounds, threads)
        print("\n".join(kernel_table(out["kernel"], threads)), flush=True)
    if "engine" in parts:
        out["engine"] = []
        for n in (int(x) for x in a.n.split(",")):
            result = S.measure(n, a.rounds, threads, None)
            out["engine"].append(result)
            print("\n".join(engine_table(result, threads)), flush=True)
    if a.json is not None:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
