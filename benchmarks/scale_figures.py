"""Issue 14, item 5: end-to-end figures of the Flink savepoint migration at scale, per engine.

Why a script: each case is a fresh process tree, timed pass by pass, at tens of millions of entries;
it is run by hand and its figures go to ``benchmarks/RESULTS.md``.

For one Events savepoint (``benchmarks/flink_savepoint.py``: Flink 2.3 layout, two keyed-state
files, Snappy-framed key groups, max parallelism 128) each case runs in a fresh child process that
migrates it ``--passes`` times to the evolved Events type (``engine.migrate_flink_savepoint``),
deleting the output between passes, and prints each pass's wall time: the first pass is the cold
one (a user's single run: nothing imported but statemorph, no plan compiled, no buffer pooled, no
Spark worker started), the later ones warm. Each pass also reports the CPU seconds of the child's
process tree (the child, Spark's JVMs and Python workers that are alive at the pass's end), which
other jobs on a shared machine move far less than they move wall time. The child's start-up (imports, Spark session) is
timed apart. Peak memory is the peak of the summed RSS of the child and all its descendants
(Spark's JVMs and Python workers included), sampled every 0.2 s from ``/proc``, and the child's own
``ru_maxrss`` (the savepoint is built by another child, so this parent's peak, which Linux hands to
a spawned child's ``ru_maxrss`` as its start, stays small).

Cases (``--cases``, comma-separated): ``local1`` / ``local2`` (local engine, 1 / 2 worker threads),
``spark1`` / ``spark2`` (``local[1]`` / ``local[2]``, one thread per task), ``cluster`` (Spark
``local-cluster[2,1,2048]``: two worker JVMs, executors in their own processes).

Run from the repository root (kernels built)::

    PYTHONPATH=src .venv/bin/python -m benchmarks.scale_figures --n 20000000 --cases local1,local2,spark1,spark2,cluster
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / ".cache" / "flink"

_CHILD = """
import json, os, shutil, sys, tempfile, time
t0 = time.perf_counter()
case, src, work, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from benchmarks import flink_savepoint as F
from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor
spark, threads = None, {"local1": 1, "local2": 2}.get(case, 1)
if case in ("spark1", "spark2", "cluster"):
    from benchmarks.spark_cluster_flink import cluster_session
    master = {"spark1": "local[1]", "spark2": "local[2]", "cluster": "local-cluster[2,1,2048]"}[case]
    spark = cluster_session(master, __import__("pathlib").Path(work), "1536m")
print(json.dumps({"startup": time.perf_counter() - t0}), flush=True)
def tree_cpu():
    # CPU seconds (user + system) of this process and every live descendant (Spark's JVMs and
    # Python workers): far steadier than wall time on a machine other jobs share
    kids, cpu = {}, {}
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                with open(f"/proc/{e.name}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kids.setdefault(int(st[1]), []).append(int(e.name))
            cpu[int(e.name)] = int(st[11]) + int(st[12])
    todo, ticks = [os.getpid()], 0
    while todo:
        p = todo.pop()
        ticks += cpu.get(p, 0)
        todo.extend(kids.get(p, []))
    return ticks / os.sysconf("SC_CLK_TCK")
descriptors = {F.UID: [ValueStateDescriptor(F.STATE, RowDataSerializer(F.NEW))]}
for k in range(passes):
    dst = os.path.join(work, "out")
    t1, c1, tc1 = time.perf_counter(), time.process_time(), tree_cpu()
    report = migrate_flink_savepoint(src, dst, descriptors, threads=threads, spark=spark)
    sec, tree = time.perf_counter() - t1, tree_cpu() - tc1
    shutil.rmtree(dst)
    print(json.dumps({"pass": k, "seconds": sec, "cpu": time.process_time() - c1, "tree_cpu": tree,
                      "rows": report.rows, "load": os.getloadavg()}), flush=True)
if spark is not None:
    spark.stop()
"""


_BUILD = """
import json, sys
from pathlib import Path
from benchmarks import flink_savepoint as F
sp = F.build(Path(sys.argv[1]), int(sys.argv[2]), True)
print(json.dumps({"savepoint": str(sp.path), "files": len(sp.files), "disk_mb": round(sp.disk_bytes / 1e6, 1),
                  "state_mb": round(sp.state_bytes / 1e6, 1)}))
"""


def _env() -> dict[str, str]:
    """PYTHONPATH: this checkout's src (its kernels built in place) and its root (``benchmarks``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_rss(pid: int) -> int:
    """Summed RSS (bytes) of ``pid`` and all its descendants."""
    tree, todo, total = _children(), [pid], 0
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            pass
        todo.extend(tree.get(p, []))
    return total


def run_case(case: str, src: Path, n: int, passes: int, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, case, str(src), str(work), str(passes)], env=_env(),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stdout is not None and proc.stderr is not None
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.extend(proc.stderr.readlines()), daemon=True)  # type: ignore[union-attr]
    drain.start()
    lines = [json.loads(line) for line in proc.stdout if line.startswith("{")]
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    sampler.join()
    drain.join()
    code = os.waitstatus_to_exitcode(status)
    passes_out = [x for x in lines if "pass" in x]
    result: dict[str, Any] = {"case": case, "entries": n, "exit": code,
                              "startup_s": round(lines[0]["startup"], 2) if lines else None,
                              "passes_s": [round(p["seconds"], 2) for p in passes_out],
                              "passes_tree_cpu_s": [round(p["tree_cpu"], 2) for p in passes_out],
                              "rows_ok": all(p["rows"] == n for p in passes_out) and len(passes_out) == passes,
                              "peak_tree_rss_mib": round(peak[0] / 2**20, 1),
                              "child_maxrss_mib": round(usage.ru_maxrss / 1024, 1),
                              "load": [p["load"][0] for p in passes_out]}
    if passes_out:
        result["cold_mps"] = round(n / passes_out[0]["seconds"] / 1e6, 3)
        if len(passes_out) > 1:
            result["warm_best_mps"] = round(n / min(p["seconds"] for p in passes_out[1:]) / 1e6, 3)
    if code != 0:
        result["stderr"] = "".join(err)[-3000:]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000_000)
    ap.add_argument("--cases", default="local1,local2,spark1,spark2,cluster")
    ap.add_argument("--passes", type=int, default=3, help="migrations per case (the first is the cold one)")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/statemorph-scale"))
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    sp = json.loads(subprocess.run([sys.executable, "-c", _BUILD, str(a.cache), str(a.n)], env=_env(), cwd=ROOT,
                                   check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    print(json.dumps({**sp, "entries": a.n, "ready_s": round(time.perf_counter() - t0, 1), "load": os.getloadavg()}),
          flush=True)
    ok = True
    for case in [c.strip() for c in a.cases.split(",") if c.strip()]:
        r = run_case(case, Path(sp["savepoint"]), a.n, a.passes, a.workdir / case)
        if "cold_mps" in r:
            r["state_mb_per_s_cold"] = round(sp["state_mb"] * r["cold_mps"] / (a.n / 1e6), 1)
        print(json.dumps(r), flush=True)
        ok = ok and r["exit"] == 0 and r["rows_ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
