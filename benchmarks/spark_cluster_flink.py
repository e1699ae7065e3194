"""Issue 14's proof at scale: a Flink savepoint with two subtask files and millions of entries,
migrated by statemorph on a multi-process Spark cluster, restored by real Flink, values sampled.

Why a script and not a test: at 10 M entries the build, the migration and Flink's restore take
minutes on a 2-core machine. It prints its figures and exits non-zero when any sampled value is
wrong or missing, when Flink refuses the savepoint, or when the job did not run on the cluster's
executors.

Steps:

1. the Events savepoint of ``--n`` entries (``benchmarks/flink_savepoint.py``: the real Flink 2.3
   savepoint ``events-rocksdb-p2-files-snappy`` as template, parallelism 2, so two keyed-state
   files, max parallelism 128, Snappy-framed key groups), built once into ``--cache``;
2. ``engine.migrate_flink_savepoint(..., spark=session, tasks=...)`` to the evolved Events type on
   ``--master`` (default ``local-cluster[2,1,2048]``: a master and two worker JVMs, each executor a
   separate JVM with its own Python workers). The executors run this interpreter
   (``PYSPARK_PYTHON``) with this checkout's ``src`` on ``PYTHONPATH``: on one machine nothing needs
   shipping (docs/spark.md has the recipe for real clusters). Spark's worker directories go to a
   private ``SPARK_HOME`` (links to pyspark's) so nothing lands in the installed pyspark;
3. real Flink 2.3 (``ci/flink/flink.py restore_timed``; ``ci/flink/setup.sh`` must have run)
   restores the migrated savepoint with the evolved type into RocksDB (parallelism 2) and reads
   ``--sample`` keys spread evenly over the key indices (``0, n/sample, 2n/sample, ...``); every
   sampled value must equal the built value reshaped by field name (new fields null).

Run from the repository root (kernels built)::

    PYTHONPATH=src .venv/bin/python -m benchmarks.spark_cluster_flink --n 10000000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import flink_savepoint as F

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / ".cache" / "flink"
#: the evolved type's field names, nested rows as (name, fields): what Flink renders after migration
NEW_FIELDS: tuple[Any, ...] = (
    "eventId", ("metadata", ("deviceType", "location", "userId", "timestamp", "appVersion", "sessionId")))
FLINK_JVM = ["-Xmx2g", "-Dlog4j2.level=WARN"]


def flink_driver() -> ModuleType:
    """ci/flink/flink.py, loaded by path (it is a script, not a package)."""
    name = "statemorph_ci_flink_driver"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / "flink" / "flink.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reshape(row: dict[str, Any], fields: tuple[Any, ...]) -> dict[str, Any]:
    """``row`` (an object by field name) evolved to ``fields``: by name, missing fields null."""
    out: dict[str, Any] = {}
    for f in fields:
        if isinstance(f, tuple):
            name, sub = f
            out[name] = None if row.get(name) is None else reshape(row[name], sub)
        else:
            out[f] = row.get(f)
    return out


def private_spark_home(root: Path) -> Path:
    """pyspark's Spark (links to its entries) with a ``work`` directory of its own: local-cluster
    workers keep their executors' directories and logs in ``$SPARK_HOME/work``."""
    import pyspark

    home = root / "spark-home"
    home.mkdir()
    for entry in Path(pyspark.__file__).parent.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    (home / "work").mkdir()
    return home


def cluster_session(master: str, root: Path, executor_memory: str) -> Any:
    """A session on ``master`` whose executors import this checkout's statemorph."""
    import statemorph
    from statemorph.engine.spark import session

    src = str(Path(statemorph.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if master.startswith("local-cluster"):
        os.environ["SPARK_HOME"] = str(private_spark_home(root))
    return session(master, app_name="statemorph-scale-proof",
                   conf={"spark.executor.memory": executor_memory,
                         "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
                         "spark.python.worker.reuse": "true",
                         "spark.ui.showConsoleProgress": "false"})


def executor_logs(root: Path) -> list[Path]:
    """The executors' stderr files under the private SPARK_HOME (one per executor process)."""
    return sorted((root / "spark-home" / "work").rglob("stderr"))


def check_sample(entries: list[dict[str, Any]], stride: int, sample: int) -> list[str]:
    """Every sampled key's events value against the built value evolved; the problems found."""
    import numpy as np

    idx = np.arange(sample, dtype=np.int64) * stride
    keys = F.int_keys(idx).tolist()
    built = F.events_struct(idx).to_pylist()
    want = {k: reshape(v, NEW_FIELDS) for k, v in zip(keys, built, strict=True)}
    got: dict[int, Any] = {}
    problems = []
    for e in entries:
        if e["state"] == F.STATE:
            got[e["key"]] = e["value"]
    for k, w in want.items():
        if k not in got:
            problems.append(f"key {k}: no events value after the restore")
        elif got[k] != w or list(got[k]["metadata"]) != list(w["metadata"]):
            problems.append(f"key {k}: Flink read {json.dumps(got[k])}, expected {json.dumps(w)}")
    extra = set(got) - set(want)
    if extra:
        problems.append(f"{len(extra)} keys read that were not probed, e.g. {sorted(extra)[:3]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="entries (default 10,000,000)")
    ap.add_argument("--master", default="local-cluster[2,1,2048]")
    ap.add_argument("--executor-memory", default="1536m")
    ap.add_argument("--tasks", type=int, default=None, help="key-group-range tasks (default 2x parallelism)")
    ap.add_argument("--threads", type=int, default=1, help="worker threads per task")
    ap.add_argument("--sample", type=int, default=1000, help="keys Flink reads back and checks")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--workdir", type=Path, default=None, help="where the output goes (default: a temp dir)")
    a = ap.parse_args(argv)
    from statemorph.engine import migrate_flink_savepoint
    from statemorph.serializers import RowDataSerializer
    from statemorph.state import ValueStateDescriptor

    t0 = time.perf_counter()
    sp = F.build(a.cache, a.n, True)
    print(f"savepoint: {sp.path} ({a.n:,} entries, {len(sp.files)} keyed-state files {sp.files}, "
          f"{sp.disk_bytes / 1e6:.1f} MB on disk, {sp.state_bytes / 1e6:.1f} MB of key groups; "
          f"ready in {time.perf_counter() - t0:.1f} s)", flush=True)
    if len(sp.files) != 2:
        print(f"FAIL: expected two subtask files, found {len(sp.files)}")
        return 1
    work = Path(tempfile.mkdtemp(prefix="statemorph-scale-proof-", dir=a.workdir))
    try:
        spark = cluster_session(a.master, work, a.executor_memory)
        try:
            sc = spark.sparkContext
            print(f"spark {spark.version} on {sc.master}, default parallelism {sc.defaultParallelism}; "
                  f"load average {os.getloadavg()}", flush=True)
            dst = work / "migrated"
            descriptors = {F.UID: [ValueStateDescriptor(F.STATE, RowDataSerializer(F.NEW))]}
            t1, c1 = time.perf_counter(), time.process_time()
            report = migrate_flink_savepoint(sp.path, dst, descriptors, spark=spark, tasks=a.tasks,
                                             threads=a.threads)
            seconds = time.perf_counter() - t1
            print(f"migrated on Spark: {report.rows:,} entries in {seconds:.1f} s "
                  f"({report.rows / seconds / 1e6:.2f} M entries/s, {sp.state_bytes / seconds / 1e6:.0f} MB/s "
                  f"of key groups; driver CPU {time.process_time() - c1:.1f} s); load average {os.getloadavg()}",
                  flush=True)
        finally:
            spark.stop()
        if report.rows != a.n:
            print(f"FAIL: migrated {report.rows} entries of {a.n}")
            return 1
        logs = executor_logs(work)
        if a.master.startswith("local-cluster"):
            print(f"executor processes that logged: {len(logs)}")
            if not logs:
                print("FAIL: no executor log: the job did not run on the cluster's executors")
                return 1
        stride = max(1, a.n // a.sample)
        sample = min(a.sample, a.n)
        t2 = time.perf_counter()
        restored = flink_driver().restore_timed(dst, sp.path.parent / "spec.json", sample, jvm_flags=FLINK_JVM,
                                                stride=stride, events_type=F.NEW)
        print(f"real Flink 2.3 restored the migrated savepoint (RocksDB, parallelism 2) in "
              f"{time.perf_counter() - t2:.1f} s (JVM start-up included); probed {restored.probed} keys, "
              f"{restored.found} with an events value; load average {os.getloadavg()}", flush=True)
        problems = check_sample(restored.entries, stride, sample)
        if restored.probed != sample:
            problems.append(f"Flink probed {restored.probed} keys, not {sample}")
        for p in problems[:20]:
            print("WRONG:", p)
        if problems:
            print(f"FAIL: {len(problems)} problems in {sample} sampled keys")
            return 1
        print(f"OK: all {sample} sampled keys (every {stride:,}th key index) hold the expected evolved value")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
