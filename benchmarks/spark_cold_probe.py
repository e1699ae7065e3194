"""Issue 14, item 5(b): where the first (cold) pass of a Spark migration of a Flink savepoint
spends its extra seconds, per Python worker.

Why a script: a cold pass happens once per fresh Spark application, so it is measured by starting
one; it is run by hand and its figures go to ``benchmarks/RESULTS.md``.

It migrates the Events savepoint of ``benchmarks/flink_savepoint.py`` ``--passes`` times on
``--master`` with the phase-1 tasks (:class:`statemorph.engine.spark_flink._PartTask`) replaced by
:class:`ProbePartTask`, which runs the same task and appends one JSON line per task to a file every
executor sees: when its Python worker was forked, how long the worker took to import numpy,
pyarrow and statemorph's task module (wall and CPU), how long the migration's machine code took to
build (``llvmlite``; nothing on later tasks of the same worker), the task's wall and CPU time and
its page faults. The driver adds, per pass, the CPU seconds of its process tree by kind (driver,
Spark's JVM, the Python daemon and its workers).

Run from the repository root (kernels built)::

    PYTHONPATH=src .venv/bin/python -m benchmarks.spark_cold_probe --n 20000000
"""

from __future__ import annotations

import os
import resource
import sys
import time

_LOADED = time.time()
_CPU_LOADED = sum(os.times()[:2])
_t = time.perf_counter()
import numpy  # noqa: E402,F401
import pyarrow  # noqa: E402,F401

import statemorph.engine.spark_flink as spark_flink  # noqa: E402

_IMPORT_S = time.perf_counter() - _t
_IMPORT_CPU_S = sum(os.times()[:2]) - _CPU_LOADED

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")
_TASKS = 0


def _stat(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _started(pid: int | str) -> float:
    """When process ``pid`` started, as a ``time.time()`` value."""
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - up + int(_stat(pid)[19]) / _TICK


class ProbePartTask(spark_flink._PartTask):
    """The phase-1 task, timed: its record goes to ``$STATEMORPH_PROBE_OUT``."""

    def __call__(self, item: Any) -> Any:
        global _TASKS
        _TASKS += 1
        t0, cpu0 = time.time(), sum(os.times()[:2])
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        jit_s = _machine_code_seconds(item[4])
        result = super().__call__(item)
        with open(os.environ["STATEMORPH_PROBE_OUT"], "a") as f:
            f.write(json.dumps({
                "pid": os.getpid(), "task_in_worker": _TASKS, "forked": _started(os.getpid()),
                "module_loaded": _LOADED, "cpu_before_imports": _CPU_LOADED, "imports_s": _IMPORT_S,
                "imports_cpu_s": _IMPORT_CPU_S, "machine_code_s": jit_s, "start": t0, "end": time.time(),
                "cpu_s": sum(os.times()[:2]) - cpu0,
                "page_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0}) + "\n")
        return result


def _machine_code_seconds(snaps: Any) -> float:
    """Build the machine code the task's migrations use (``llvmlite`` imported on first use), so
    its cost shows apart: the task then finds it built."""
    from statemorph.bulk import capabilities
    from statemorph.kernels import jit
    from statemorph.typeutils import read_versioned_snapshot

    t = time.perf_counter()
    for _, prior, new in snaps.values():
        old, ser = read_versioned_snapshot(prior), read_versioned_snapshot(new).restore_serializer()
        prog, kernel = capabilities.remap_program(old, ser, old.resolve_schema_compatibility(ser))
        if kernel == "rowdata":
            jit.plan_code(prog.matrix)
    return time.perf_counter() - t


def tree_cpu() -> dict[str, float]:
    """CPU seconds of this process and its live descendants, by kind."""
    kids: dict[int, list[int]] = {}
    info: dict[int, tuple[float, str]] = {}
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            st = _stat(e.name)
            with open(f"/proc/{e.name}/cmdline") as f:
                cmd = f.read().split("\0")
        except OSError:
            continue
        kids.setdefault(int(st[1]), []).append(int(e.name))
        info[int(e.name)] = ((int(st[11]) + int(st[12])) / _TICK, " ".join(cmd))
    out: dict[str, float] = {}
    todo = [os.getpid()]
    while todo:
        p = todo.pop()
        cpu, cmd = info.get(p, (0.0, ""))
        kind = ("driver" if p == os.getpid() else "jvm" if "java" in cmd.split(" ")[0]
                else "python workers" if "pyspark.daemon" in cmd else "other")
        out[kind] = out.get(kind, 0.0) + cpu
        todo.extend(kids.get(p, []))
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks import flink_savepoint as F
    from benchmarks.spark_cluster_flink import CACHE, cluster_session
    from statemorph.engine import migrate_flink_savepoint
    from statemorph.serializers import RowDataSerializer
    from statemorph.state import ValueStateDescriptor

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/statemorph-cold-probe"))
    a = ap.parse_args(argv)
    sp = F.build(a.cache, a.n, True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    a.workdir.mkdir(parents=True)
    records = a.workdir / "tasks.jsonl"
    os.environ["STATEMORPH_PROBE_OUT"] = str(records)  # the executors' Python workers inherit it
    root = str(Path(__file__).resolve().parents[1])  # the workers import this module by name
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    spark = cluster_session(a.master, a.workdir, "1536m")
    # by its module name, not __main__'s copy (cloudpickle would ship that one by value)
    from benchmarks.spark_cold_probe import ProbePartTask as by_name

    spark_flink._PartTask = by_name  # type: ignore[misc]  # what split_stream_jobs ships
    descriptors = {F.UID: [ValueStateDescriptor(F.STATE, RowDataSerializer(F.NEW))]}
    for k in range(a.passes):
        dst = a.workdir / "out"
        cpu0, t0 = tree_cpu(), time.time()
        migrate_flink_savepoint(sp.path, dst, descriptors, threads=1, spark=spark)
        t1, cpu1 = time.time(), tree_cpu()
        shutil.rmtree(dst)
        tasks = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
        print(json.dumps({"pass": k, "seconds": round(t1 - t0, 2), "load": os.getloadavg()[0],
                          "cpu_s": {kind: round(cpu1.get(kind, 0) - cpu0.get(kind, 0), 2) for kind in cpu1}}))
        for r in sorted((r for r in tasks if t0 <= r["start"] <= t1), key=lambda r: r["start"]):
            first = r["task_in_worker"] == 1
            print(json.dumps({
                "worker": r["pid"], "task_in_worker": r["task_in_worker"],
                **({"forked_at": round(r["forked"] - t0, 2), "task_module_at": round(r["module_loaded"] - t0, 2),
                    "worker_setup_cpu_s": round(r["cpu_before_imports"], 2), "imports_s": round(r["imports_s"], 2),
                    "imports_cpu_s": round(r["imports_cpu_s"], 2), "machine_code_s": round(r["machine_code_s"], 3)}
                   if first else {}),
                "start_at": round(r["start"] - t0, 2), "seconds": round(r["end"] - r["start"], 2),
                "cpu_s": round(r["cpu_s"], 2), "page_faults": r["page_faults"]}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
