"""Real Flink migrating a savepoint on restore beside ``statemorph migrate``, on the same savepoint.

The schema change is the one Flink migrates by itself: a POJO gaining a field. Real Flink takes the
savepoint (ci/flink's POJO job: ``ValueState<Profile>``, ``Profile {long id; String name; int count}``,
keyed by long, parallelism 2, max parallelism 128, keyed state in files) of ``n`` keys, once per
backend, cached under ``benchmarks/.cache/pojo``. Each round then runs, one after the other:

- **flink**: what a user does after adding ``double score`` to the class: start the job from the
  savepoint with version 2 of the class, in a fresh JVM (Flink resolves the POJO snapshot
  COMPATIBLE_AFTER_MIGRATION: RocksDB rewrites every value when the state is registered, the heap
  backend reads every old value into a new object), read a sample of keys, and stop with a new
  savepoint (``ci/flink/flink.py pojo_restore_savepoint``). Timed: the whole process, and inside it
  the restore (submission until every subtask's backend restored, MiniCluster start included),
  the state registration (RocksDB's migration), the stop-with-savepoint;
- **statemorph**: ``statemorph migrate SAVEPOINT --schema profile-v2.toml --out DST --threads 2``
  in a fresh process (wall time, Python start-up included, and the migration's own ``seconds``);
- **flink, statemorph's output**: the same Flink job on statemorph's savepoint: a plain restore
  (the snapshot is version 2's, nothing to migrate) and a new savepoint, the same work as the
  first run less the migration.

The sampled keys of both Flink runs must be equal and carry ``score`` 0.0. Usage, from the repo
root with the kernels built and ``ci/flink/setup.sh`` run::

    PYTHONPATH=src nice .venv/bin/python -m benchmarks.compare_pojo_migration --n 1000000 5000000 \\
        [--backend rocksdb hashmap] [--rounds 1] [--sample 1000]
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

from .spark_cluster_flink import flink_driver

CACHE = Path(__file__).resolve().parent / ".cache" / "pojo"
#: Long jobs get the JVM's normal compilers and room for 5 M heap objects (the driver's flags suit short jobs).
FLINK_JVM = ["-Xmx6g", "-Dlog4j2.level=WARN"]
SCHEMA = """\
[operators.state-op.states.profile]
serializer = "pojo"
type = "ROW<id BIGINT NOT NULL, name STRING, `count` INT NOT NULL, score DOUBLE NOT NULL>"
"""
FORMAT_VERSION = 1
"""Bumped when the generated savepoint changes, so a stale cache is taken again."""


def case(n: int, backend: str) -> tuple[Path, dict[str, Any]]:
    """The cached version-1 savepoint of ``n`` keys (taken by real Flink once) and its manifest."""
    target = CACHE / f"pojo-{backend}-{n}"
    manifest = target / "bench.json"
    if manifest.is_file():
        info: dict[str, Any] = json.loads(manifest.read_text())
        if info.get("format") == FORMAT_VERSION:
            return target, info
    shutil.rmtree(target, ignore_errors=True)
    spec = CACHE / f".pojo-{backend}-{n}.spec.json"
    spec.write_text(
        json.dumps(
            {
                "name": target.name,
                "backend": backend,
                "key_type": "long",
                "keys": n,
                "records_per_key": 1,
                "parallelism": 2,
                "storage": "filesystem",
            }
        )
    )
    t0 = time.perf_counter()
    flink_driver().pojo_generate([(spec, target)], pojo=1, jvm_flags=FLINK_JVM, timeout=3600)
    info = {
        "format": FORMAT_VERSION,
        "n": n,
        "backend": backend,
        "generate_s": round(time.perf_counter() - t0, 1),
        "bytes": sum(f.stat().st_size for f in (target / "savepoint").iterdir()),
    }
    manifest.write_text(json.dumps(info))
    spec.unlink()
    return target, info


def flink_cycle(savepoint: Path, spec: Path, out: Path, n: int, sample: int) -> Any:
    shutil.rmtree(out, ignore_errors=True)
    cycle = flink_driver().pojo_restore_savepoint(
        savepoint, spec, out, probe_keys=sample, stride=max(1, n // sample), pojo=2, jvm_flags=FLINK_JVM
    )
    if cycle.probed != sample or any(e["value"]["score"] != 0.0 for e in cycle.entries):
        raise RuntimeError(f"{savepoint}: probed {cycle.probed} of {sample} keys, or a score is not 0.0")
    return cycle


def statemorph_migrate(savepoint: Path, schema: Path, dst: Path, n: int) -> dict[str, float]:
    shutil.rmtree(dst, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "statemorph",
            "migrate",
            str(savepoint),
            "--schema",
            str(schema),
            "--out",
            str(dst),
            "--threads",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"statemorph migrate failed ({proc.returncode}):\n{proc.stderr}")
    report = json.loads(proc.stdout)
    if report["entries_migrated"] != n:
        raise RuntimeError(f"statemorph migrated {report['entries_migrated']} entries of {n}")
    return {"wall": wall, "seconds": float(report["seconds"])}


def _by_key(entries: list[dict[str, Any]]) -> dict[Any, Any]:
    """A sample as key -> value (the subtasks report their keys in any order)."""
    return {e["key"]: e["value"] for e in entries}


def _machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {java}, "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )


def _round(r: int, v1: Path, spec: Path, schema: Path, tmp: Path, n: int, sample: int) -> dict[str, float]:
    """One round: Flink's migrating cycle, statemorph migrate, Flink's plain cycle on its output."""
    flink = flink_cycle(v1, spec, tmp / "flink", n, sample)
    ours = statemorph_migrate(v1, schema, tmp / "statemorph", n)
    plain = flink_cycle(tmp / "statemorph", spec, tmp / "plain", n, sample)
    if _by_key(flink.entries) != _by_key(plain.entries):
        raise RuntimeError("Flink read other values from statemorph's savepoint than after its own migration")
    for label, c in (("flink migrates on restore", flink), ("flink restores statemorph's", plain)):
        print(
            f"  round {r + 1} {label:28} {c.seconds:6.1f} s whole job (restored {c.restored_s:.1f} s, "
            f"state registered {c.ready_s:.1f} s [registration {c.register_s:.1f} s], "
            f"new savepoint {c.savepoint_s:.1f} s)",
            flush=True,
        )
    print(
        f"  round {r + 1} {'statemorph migrate':28} {ours['wall']:6.1f} s whole command "
        f"(migration {ours['seconds']:.1f} s, {n / ours['seconds'] / 1e6:.2f} M entries/s); sample of {sample} "
        f"keys equal in both Flink runs; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return {
        "flink": flink.seconds,
        "flink_register": flink.register_s,
        "flink_ready": flink.ready_s,
        "plain": plain.seconds,
        "plain_ready": plain.ready_s,
        "ours": ours["wall"],
        "ours_migration": ours["seconds"],
    }


def _summary(rounds: list[dict[str, float]]) -> None:
    """Best (and median) of the rounds per figure."""

    def fig(k: str) -> str:
        xs = [r[k] for r in rounds]
        return f"{min(xs):.1f} s" + (f" (median {statistics.median(xs):.1f})" if len(xs) > 1 else "")

    print(
        f"  best of {len(rounds)}: flink migrating cycle {fig('flink')} [registration {fig('flink_register')}, "
        f"ready {fig('flink_ready')}]; statemorph migrate {fig('ours')} [migration {fig('ours_migration')}]; "
        f"flink plain cycle on statemorph's output {fig('plain')} [ready {fig('plain_ready')}]",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[1_000_000, 5_000_000])
    p.add_argument("--backend", nargs="+", default=["rocksdb", "hashmap"], choices=["rocksdb", "hashmap"])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--sample", type=int, default=1000, help="keys each Flink run reads back and compares")
    a = p.parse_args(argv)
    print(_machine(), flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)  # a fresh checkout has no cache yet
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        schema = Path(tmp) / "profile-v2.toml"
        schema.write_text(SCHEMA, encoding="utf-8")
        for n in a.n:
            for backend in a.backend:
                target, info = case(n, backend)
                v1, spec = target / "savepoint", target / "spec.json"
                print(
                    f"{backend} n={n:,}: savepoint {info['bytes'] / 1e6:.0f} MB, taken by real Flink in "
                    f"{info['generate_s']} s",
                    flush=True,
                )
                rounds = [_round(r, v1, spec, schema, Path(tmp), n, a.sample) for r in range(a.rounds)]
                _summary(rounds)
                shutil.rmtree(Path(tmp) / "flink", ignore_errors=True)
                shutil.rmtree(Path(tmp) / "plain", ignore_errors=True)
                shutil.rmtree(Path(tmp) / "statemorph", ignore_errors=True)


if __name__ == "__main__":
    main()
