"""Before / after figures of the Flink savepoint rewrite in one run, beside the floor.

Usage (from the repo root, kernels built in both trees)::

    .venv/bin/python -m benchmarks.compare_flink_rewrite BASELINE_SRC [--n 10000000] [--rounds 3]

``BASELINE_SRC`` is the ``src`` directory of an older checkout of statemorph with its kernels
built (e.g. ``git archive <commit> | tar -x -C /tmp/base`` and ``setup.py build_ext --inplace``
there). Each round runs, one after the other on the same savepoints (``flink_savepoint.build``,
compressed and not): the floor (``flink_savepoint.copy_floor``, in this process), the baseline's
``engine.migrate_flink_savepoint`` and this tree's, each in a fresh child process that migrates
once to warm up (LLVM loaded, the plan's machine code compiled, as in a benchmark's later rounds)
and then times a second migration, ``threads=2``. Rounds interleave the three so a
change in the machine's load hits all of them; the best round of each is reported, with the
ratios to the floor of the same run (best to best, and median to median).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import flink_savepoint as F

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / ".cache" / "flink"
_CHILD = """
import json, sys, time
from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor
import shutil
src, dst, uid, state, new = sys.argv[1:6]
descriptors = {uid: [ValueStateDescriptor(state, RowDataSerializer(new))]}
migrate_flink_savepoint(src, dst, descriptors, threads=2)  # warm-up: LLVM loaded, the plan compiled
shutil.rmtree(dst)
t0, c0 = time.perf_counter(), time.process_time()
report = migrate_flink_savepoint(src, dst, descriptors, threads=2)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "rows": report.rows}))
"""


def _migrate(src_dir: Path, sp: F.BenchSavepoint, dst: Path) -> dict[str, float]:
    shutil.rmtree(dst, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(src_dir))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(sp.path), str(dst), F.UID, F.STATE, F.NEW], env=env,
                         check=True, capture_output=True, text=True).stdout
    shutil.rmtree(dst, ignore_errors=True)
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    if result["rows"] != sp.n:
        raise RuntimeError(f"{src_dir}: migrated {result['rows']} rows of {sp.n}")
    return result


def _floor(sp: F.BenchSavepoint, dst: Path) -> dict[str, float]:
    shutil.rmtree(dst, ignore_errors=True)
    extents = sp.extents()
    t0, c0 = time.perf_counter(), time.process_time()
    F.copy_floor(sp, extents, dst)
    result = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    shutil.rmtree(dst, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("baseline_src", type=Path)
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    current = ROOT / "src"
    CACHE.mkdir(parents=True, exist_ok=True)  # a fresh checkout has no cache yet
    with tempfile.TemporaryDirectory(dir=CACHE.parent) as tmp:
        for compressed in (True, False):
            sp = F.build(CACHE, a.n, compressed)
            runs: dict[str, list[dict[str, float]]] = {"floor": [], "before": [], "after": []}
            for _ in range(a.rounds):
                runs["floor"].append(_floor(sp, Path(tmp) / "floor"))
                runs["before"].append(_migrate(a.baseline_src, sp, Path(tmp) / "before"))
                runs["after"].append(_migrate(current, sp, Path(tmp) / "after"))
            best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
            median = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
            label = "snappy" if compressed else "uncompressed"
            for k, r in best.items():
                rates = f"{sp.n / r['seconds'] / 1e6:.2f} M entries/s, {sp.state_bytes / r['seconds'] / 1e6:.0f} MB/s"
                all_s = ", ".join(f"{x['seconds']:.2f}" for x in runs[k])
                print(f"{label:12} {k:6} best {r['seconds']:.2f} s (cpu {r['cpu']:.2f} s; {rates}); "
                      f"rounds {all_s}; / floor {r['seconds'] / best['floor']['seconds']:.2f}x "
                      f"(medians {median[k] / median['floor']:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
