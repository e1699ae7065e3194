"""Peak memory of ``statemorph migrate`` against the entry count (issue 16: memory stays flat).

Why a script and not a benchmark test: the inputs run to tens of millions of entries (50 M Events
entries are ~0.7 GB of Parquet or ~1.5 GB of Snappy-framed Flink key groups) and each migration
takes tens of seconds to minutes on a 2-core machine; this is run by hand and its figures go to
``benchmarks/RESULTS.md``. The cheap regression check of the same property lives in
``tests/savepoint/test_memory_flat.py``.

For each form and entry count it builds the Events savepoint (old type
``ROW<eventId BIGINT, metadata ROW<userId INT, timestamp BIGINT, deviceType STRING>>``, value
state), runs ``python -m statemorph migrate SRC --schema NEW.toml --out DST`` as a child process
and reads that child's peak RSS from ``os.wait4`` (its own ``ru_maxrss``; the inputs are built by
other children), then deletes the output (and, unless ``--keep``, the input). Linux starts a
spawned child's ``ru_maxrss`` at its parent's peak, so this parent imports nothing heavy before
the runs (its peak stays at a few tens of MiB, far below any measured one):

- ``parquet``: statemorph's Parquet form, written with :func:`statemorph.engine.write_state` in
  1,000,000-entry chunks (files of ``rows_per_file`` rows, the writer's default);
- ``flink``: Flink's canonical form, built by ``benchmarks/flink_savepoint.py`` from the real
  savepoint ``tests/data/flink_savepoints/events-rocksdb-p2-files-snappy`` (two keyed-state
  files, Snappy-framed key groups).

Run from the repository root (kernels built)::

    PYTHONPATH=src .venv/bin/python -m benchmarks.memory_flatness --sizes 5M,20M,50M \\
        --forms parquet,flink --workdir /tmp/statemorph-memory

It prints one JSON line per run and a table; ``--json FILE`` writes them all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
       "appVersion STRING, sessionId BIGINT>>")
CHUNK = 1_000_000

_BUILD_PARQUET = """
import sys
import pyarrow.compute as pc
from statemorph import serializers as S
from statemorph.cli.demo import events_table
from statemorph.engine import write_state
path, n, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def batches():
    for start in range(0, n, chunk):
        t = events_table(min(chunk, n - start), seed=start)
        yield from t.set_column(0, "key", pc.add(t.column("key"), start * 7919)).to_batches(65536)
write_state(path, batches(), name="events", key_serializer=S.LongSerializer(),
            value_serializer=S.RowDataSerializer(sys.argv[4]), max_parallelism=128)
"""

_BUILD_FLINK = """
import sys
from pathlib import Path
from benchmarks.flink_savepoint import build
sp = build(Path(sys.argv[1]), int(sys.argv[2]), True)
print(sp.path)
"""


def parse_count(text: str) -> int:
    """``5M`` / ``200k`` / ``5000000`` → an int."""
    t = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale != 1 else t) * scale)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_measured(cmd: list[str]) -> tuple[int, float, int, str]:
    """Run ``cmd``; (exit status, seconds, the child's own peak RSS in KiB, stderr tail)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, time.perf_counter() - t0, usage.ru_maxrss, err.decode(errors="replace")[-2000:]


def build_input(form: str, n: int, workdir: Path) -> Path:
    if form == "parquet":
        path = workdir / f"parquet-{n}"
        if not path.exists():
            subprocess.run([sys.executable, "-c", _BUILD_PARQUET, str(path), str(n), str(CHUNK), OLD],
                           env=_env(), cwd=ROOT, check=True)
        return path
    out = subprocess.run([sys.executable, "-c", _BUILD_FLINK, str(workdir / "flink"), str(n)], env=_env(), cwd=ROOT,
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def schema_file(form: str, workdir: Path) -> Path:
    path = workdir / f"new-{form}.toml"
    table = "[states.events]" if form == "parquet" else "[operators.events-state.states.events]"
    path.write_text(f'{table}\ntype = """{NEW}"""\n')
    return path


def measure(form: str, n: int, workdir: Path, threads: int, keep: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    src = build_input(form, n, workdir)
    built = time.perf_counter() - t0
    dst = workdir / f"out-{form}-{n}"
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [sys.executable, "-m", "statemorph", "migrate", str(src), "--schema", str(schema_file(form, workdir)),
           "--out", str(dst), "--threads", str(threads), "--quiet"]
    status, seconds, peak_kib, err = run_measured(cmd)
    result = {"form": form, "entries": n, "exit_status": status, "seconds": round(seconds, 1),
              "peak_rss_mib": round(peak_kib / 1024, 1), "input_mb": round(_du(src) / 1e6, 1),
              "output_mb": round(_du(dst) / 1e6, 1) if dst.exists() else None, "build_seconds": round(built, 1),
              "threads": threads}
    if status != 0:
        result["stderr"] = err
    shutil.rmtree(dst, ignore_errors=True)
    if not keep:
        shutil.rmtree(src.parent if form == "flink" else src, ignore_errors=True)
    return result


def machine() -> dict[str, Any]:
    import pyarrow

    info: dict[str, Any] = {"python": platform.python_version(), "pyarrow": pyarrow.__version__,
                            "kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_kib"] = int(f.readline().split()[1])
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    info["loadavg"] = os.getloadavg()
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5M,20M,50M", help="entry counts, comma-separated (5M, 200k, ...)")
    ap.add_argument("--forms", default="parquet,flink", help="parquet, flink or both")
    ap.add_argument("--workdir", default="/tmp/statemorph-memory", help="where inputs and outputs go")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the built inputs (rebuilt otherwise)")
    ap.add_argument("--json", help="write every result and the machine info to this file")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    for form in [f.strip() for f in args.forms.split(",") if f.strip()]:
        for n in [parse_count(s) for s in args.sizes.split(",") if s.strip()]:
            r = measure(form, n, workdir, args.threads, args.keep)
            results.append(r)
            print(json.dumps(r), flush=True)
    doc = {"machine": machine(), "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    print(f"\n{'form':8} {'entries':>12} {'peak RSS MiB':>13} {'seconds':>8}")
    for r in results:
        print(f"{r['form']:8} {r['entries']:>12,} {r['peak_rss_mib']:>13} {r['seconds']:>8}")
    by_form: dict[str, list[float]] = {}
    for r in results:
        if r["exit_status"] == 0:
            by_form.setdefault(r["form"], []).append(r["peak_rss_mib"])
    for form, peaks in by_form.items():
        print(f"{form}: max/min peak = {max(peaks) / min(peaks):.3f}")
    return 0 if all(r["exit_status"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
