#!/usr/bin/env python3
"""Run real Flink from Python: take savepoints of the test matrix and check what a savepoint restores.

Wraps the Java programs in ci/flink/src (built by ci/flink/setup.sh) so tests and people call one
thing. Standard library only: the project's tests import it without Flink, and it runs with any
python3.

    flink.py generate [--flink 2.3.0|1.20.3|...] SPEC OUTDIR [SPEC OUTDIR ...]   # (VERSIONS)
    flink.py restore [--events-type TYPE] [--set FIELD=JSON ...] SAVEPOINT SPEC OUT.jsonl [...]
    flink.py regenerate DIR      # every DIR/*/spec.json again, with the Flink its "flink" field names
    flink.py restore-timed SAVEPOINT SPEC [PROBE_KEYS]   # restore only (plus PROBE_KEYS reads): for timing
                                                         # (restore_timed(stride=...) also returns a sample)
    flink.py sql-generate SPEC OUTDIR [SPEC OUTDIR ...]    # the Flink SQL job (SqlJobs.java)
    flink.py sql-restore SAVEPOINT SPEC OUT.jsonl [...]    # its changelog after a restore
    flink.py pojo-generate [--pojo 1|2] SPEC OUTDIR [...]  # the POJO job (PojoJobs.java), POJO version 1
    flink.py pojo-restore [--pojo 1|2] SAVEPOINT SPEC OUT.jsonl [...]   # read back with version 2

``generate`` writes OUTDIR/savepoint (the canonical savepoint), OUTDIR/expected.json (every state
of every key as the job wrote it) and OUTDIR/spec.json; OUTDIR is replaced as a whole. ``restore``
writes the JSON lines of every state of every key that Flink restored (the same entries as
expected.json) and exits 3 if Flink refused any savepoint, printing Flink's exception. Every
batch runs in ONE JVM (start-up dominates a small job) with its own temporary directory, removed
afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_VERSION = "2.3.0"
#: Every release ci/flink/setup.sh builds: 2.3.0 always, the others with --with-MAJOR.MINOR.
VERSIONS = ("2.3.0", "1.20.3", "1.19.3", "2.0.2", "2.1.3", "2.2.1")
#: Flink on Java 17 reflects into these JDK packages.
ADD_OPENS = [
    "java.base/java.util",
    "java.base/java.lang",
    "java.base/java.lang.reflect",
    "java.base/java.io",
    "java.base/java.nio",
    "java.base/sun.nio.ch",
    "java.base/java.net",
    "java.base/java.util.concurrent",
    "java.base/java.time",
    "java.base/java.text",
    "java.sql/java.sql",
]
#: Short-lived JVMs: the C1 compiler only and the serial collector roughly halve a small job's time.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx1g", "-Dlog4j2.level=WARN"]
#: Seconds allowed per job in a batch, on top of a fixed start-up allowance.
PER_JOB_TIMEOUT = 180
STARTUP_TIMEOUT = 120
#: The Java programs: the DataStream matrix (Main), the Flink SQL job (SqlJobs) and the POJO job (PojoJobs).
DATASTREAM_PROGRAM = "savepoints.Main"
SQL_PROGRAM = "savepoints.SqlJobs"
POJO_PROGRAM = "savepoints.PojoJobs"
#: The window job (WindowJobs): open windows at the savepoint, fired after the restore.
WINDOW_PROGRAM = "savepoints.WindowJobs"
#: The Flink SQL window job (SqlWindowJobs): a group-window and a window-TVF aggregation, windows open.
SQL_WINDOW_PROGRAM = "savepoints.SqlWindowJobs"
#: The Flink SQL Top-N / join job (SqlJoinJobs): Top-N, a regular join and an interval join.
SQL_JOIN_PROGRAM = "savepoints.SqlJoinJobs"
#: The Flink SQL aggregation job (SqlAggJobs): distinct, FIRST/LAST_VALUE, LISTAGG and over aggregations.
SQL_AGG_PROGRAM = "savepoints.SqlAggJobs"
#: The operator-state job (OperatorJobs): broadcast, list and union list state.
OPERATOR_PROGRAM = "savepoints.OperatorJobs"
#: The job of a state Kryo serializes beside well-typed ones (OpaqueJobs), named by a spec's "program".
OPAQUE_PROGRAM = "savepoints.OpaqueJobs"
SPEC_PROGRAMS = {"opaque": OPAQUE_PROGRAM}
#: The POJO job's state class comes in two versions (version 2 has one more field).
POJO_VERSIONS = (1, 2)


class FlinkUnavailable(RuntimeError):
    """Java or the built generator is missing: run ci/flink/setup.sh."""


class FlinkRunError(RuntimeError):
    """The Java program failed for a reason other than a refused restore (a bug or a broken environment)."""


@dataclass
class RestoreResult:
    """What one restore check found: the entries Flink read back, or why Flink refused the savepoint."""

    entries: list[dict[str, Any]] | None = None
    exception: str | None = None
    message: str | None = None
    chain: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.entries is not None


def build_dir() -> Path:
    return Path(os.environ.get("FLINK_BUILD") or HERE / "build")


def classpath(version: str = DEFAULT_VERSION) -> str:
    """The class path setup.sh built for ``version``; FlinkUnavailable when it has not been built."""
    if version not in VERSIONS:
        raise ValueError(f"unknown Flink version {version!r} (known: {', '.join(VERSIONS)})")
    if shutil.which("java") is None:
        raise FlinkUnavailable("java is not on PATH")
    cpfile = build_dir() / f"classpath-{version}"
    if not cpfile.is_file():
        flag = "" if version == DEFAULT_VERSION else f" --with-{version.rsplit('.', 1)[0]}"
        raise FlinkUnavailable(f"{cpfile} is missing: run ci/flink/setup.sh{flag}")
    stamp = build_dir() / f"classes-{version}" / ".stamp"
    changed = [src.name for src in sorted((HERE / "src").rglob("*.java"))
               if not stamp.is_file() or src.stat().st_mtime > stamp.stat().st_mtime]
    if changed:  # a merge or an edit since the last build: old classes would fail in confusing ways
        raise FlinkUnavailable(f"the built classes are older than {', '.join(changed[:3])}: run ci/flink/setup.sh")
    return cpfile.read_text().strip()


def pojo_classpath(pojo: int, version: str = DEFAULT_VERSION) -> str:
    """The class path of the POJO job with version ``pojo`` of its state class in front."""
    if pojo not in POJO_VERSIONS:
        raise ValueError(f"unknown POJO version {pojo!r} (known: {POJO_VERSIONS})")
    cp = classpath(version)
    classes = build_dir() / f"pojo-{version}" / f"v{pojo}"
    if not classes.is_dir():
        raise FlinkUnavailable(f"{classes} is missing: run ci/flink/setup.sh")
    return f"{classes}{os.pathsep}{cp}"


def _run_java(version: str, args: list[str], jobs: int, program: str = DATASTREAM_PROGRAM, *,
              pojo: int | None = None, jvm_flags: list[str] | None = None,
              timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``program`` in one JVM; ``pojo`` puts that version of the POJO job's class on the class
    path, ``jvm_flags`` replaces the short-job flags, ``timeout`` the per-job allowance."""
    cp = classpath(version) if pojo is None else pojo_classpath(pojo, version)
    with tempfile.TemporaryDirectory(prefix="statemorph-flink-") as tmp:
        cmd = ["java", *(JVM_FLAGS if jvm_flags is None else jvm_flags), f"-Djava.io.tmpdir={tmp}"]
        cmd += [f"--add-opens={p}=ALL-UNNAMED" for p in ADD_OPENS]
        cmd += ["-cp", cp, program, args[0], str(Path(tmp) / "work"), *args[1:]]
        timeout = STARTUP_TIMEOUT + (PER_JOB_TIMEOUT if timeout is None else timeout) * jobs
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired as e:  # run() has killed the JVM
            stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise FlinkRunError(f"{args[0]} of {jobs} job(s) timed out after {timeout} s:\n{_tail(stderr)}") from e


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def spec_program(spec: Path | dict[str, Any]) -> str:
    """The Java program a spec is a case of: the SQL job for a spec with ``sql_version``, the window
    jobs for ``window_job`` / ``sql_window_job``, the SQL Top-N / join job for ``sql_join_job``, the operator-state job for ``operator_job``, the
    one its ``program`` field names (``opaque``: OpaqueJobs), else the DataStream matrix."""
    data = spec if isinstance(spec, dict) else json.loads(Path(spec).read_text(encoding="utf-8"))
    if "sql_version" in data:
        return SQL_PROGRAM
    if data.get("window_job"):
        return WINDOW_PROGRAM
    if data.get("sql_window_job"):
        return SQL_WINDOW_PROGRAM
    if data.get("sql_join_job"):
        return SQL_JOIN_PROGRAM
    if data.get("sql_agg_job"):
        return SQL_AGG_PROGRAM
    if "operator_job" in data:
        return OPERATOR_PROGRAM
    name = data.get("program")
    if name is not None and name not in SPEC_PROGRAMS:
        raise ValueError(f"spec names an unknown program {name!r} (known: {', '.join(SPEC_PROGRAMS)})")
    return SPEC_PROGRAMS.get(name, DATASTREAM_PROGRAM) if name is not None else DATASTREAM_PROGRAM


def generate(pairs: list[tuple[Path, Path]], flink_version: str = DEFAULT_VERSION,
             program: str | None = None, **java: Any) -> None:
    """Take one savepoint per (spec file, output directory); each OUTDIR is replaced when all succeed.
    ``program`` is the Java job that takes them (the SQL job: :func:`sql_generate`, the POJO job:
    :func:`pojo_generate`; default: the one the specs name, see :func:`spec_program`); ``java`` goes
    to the JVM runner (``pojo``, ``jvm_flags``, ``timeout``)."""
    if program is None:
        programs = {spec_program(Path(spec)) for spec, _ in pairs}
        if len(programs) > 1:
            raise ValueError(f"one generate call runs one program; these specs name {sorted(programs)}")
        program = programs.pop() if programs else DATASTREAM_PROGRAM
    staged: list[tuple[Path, Path, Path]] = []
    args = ["generate"]
    for spec, out in pairs:
        out = Path(out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        shutil.rmtree(stage)
        staged.append((Path(spec), stage, out))
        args += [str(Path(spec).resolve()), str(stage)]
    try:
        proc = _run_java(flink_version, args, len(pairs), program, **java)
        if proc.returncode != 0:
            raise FlinkRunError(f"savepoint generator failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
        for spec, stage, out in staged:
            shutil.copyfile(spec, stage / "spec.json")
            if out.exists():
                shutil.rmtree(out)
            stage.rename(out)
    finally:
        for _, stage, _ in staged:
            shutil.rmtree(stage, ignore_errors=True)


def regenerate(root: Path) -> list[Path]:
    """Take every case under ``root`` (a directory per case holding spec.json) again; one JVM per
    Flink version and program (a spec with ``sql_version`` is a case of the SQL job)."""
    by_version: dict[tuple[str, str], list[tuple[Path, Path]]] = {}
    for spec in sorted(Path(root).glob("*/spec.json")):
        data = json.loads(spec.read_text(encoding="utf-8"))
        program = spec_program(data)
        keep = spec.parent.parent / f".{spec.parent.name}.spec.json"
        shutil.copyfile(spec, keep)  # generate() replaces the case directory, spec.json included
        by_version.setdefault((data.get("flink", DEFAULT_VERSION), program), []).append((keep, spec.parent))
    try:
        for (version, program), pairs in by_version.items():
            generate(pairs, version, program, **({"pojo": 1} if program == WINDOW_PROGRAM else {}))
    finally:
        for pairs in by_version.values():
            for keep, _ in pairs:
                keep.unlink(missing_ok=True)
    return [case for pairs in by_version.values() for _, case in pairs]


def restore(
    items: list[tuple[Path, Path]], events_type: str | None = None, overrides: dict[str, Any] | None = None,
    flink_version: str = DEFAULT_VERSION,
    program: str | None = None,
) -> list[RestoreResult]:
    """Restore each (savepoint, spec) in real Flink ``flink_version`` (2.3 unless given: Flink
    2.3 also restores 1.x savepoints) and read every state back (one JVM per program the specs
    name, see :func:`spec_program`, unless ``program`` names one for all).

    ``events_type`` (Flink SQL syntax) registers the events state with that row type instead of
    the spec's, e.g. the evolved Events type. ``overrides`` replaces other spec fields for the
    restoring job, e.g. ``{"backend": "rocksdb"}`` to restore a heap savepoint into RocksDB or
    ``{"parallelism": 1}`` to rescale. One JVM runs the whole batch. ``program`` is the job
    (:data:`OPERATOR_PROGRAM`: the operator-state job, whose broadcast state takes ``events_type``).
    """
    changes = dict(overrides or {})
    if events_type is not None:
        changes["events_type"] = events_type
    with tempfile.TemporaryDirectory(prefix="statemorph-restore-") as tmp:
        batches: dict[str, list[tuple[int, Path, Path]]] = {}
        for k, (savepoint, spec) in enumerate(items):
            spec_path = Path(spec).resolve()
            data = json.loads(spec_path.read_text(encoding="utf-8"))
            if changes:
                data.update(changes)
                spec_path = Path(tmp) / f"spec-{k}.json"
                spec_path.write_text(json.dumps(data), encoding="utf-8")
            batches.setdefault(program or spec_program(data), []).append((k, Path(savepoint).resolve(), spec_path))
        results: dict[int, RestoreResult] = {}
        for prog, batch in batches.items():
            args = ["restore"]
            outs = []
            for k, savepoint, spec_path in batch:
                out = Path(tmp) / f"out-{k}.jsonl"
                outs.append(out)
                args += [str(savepoint), str(spec_path), str(out)]
            done = _restore_results(_run_java(flink_version, args, len(batch), prog), outs)
            results.update({k: r for (k, _, _), r in zip(batch, done, strict=True)})
        return [results[k] for k in range(len(items))]


def _restore_results(proc: subprocess.CompletedProcess[str], outs: list[Path]) -> list[RestoreResult]:
    """What a restore batch wrote per item: OUT.jsonl, or OUT.jsonl.error when Flink refused it."""
    if proc.returncode not in (0, 3):
        raise FlinkRunError(f"restore checker failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    results = []
    for out in outs:
        err = Path(f"{out}.error")
        if err.is_file():
            e = json.loads(err.read_text(encoding="utf-8"))
            results.append(RestoreResult(exception=e["exception"], message=e["message"], chain=e["chain"]))
        elif out.is_file():
            results.append(RestoreResult(entries=read_entries(out)))
        else:
            raise FlinkRunError(f"restore checker wrote no result for {out.name}:\n{_tail(proc.stderr)}")
    return results


def sql_generate(pairs: list[tuple[Path, Path]]) -> None:
    """Take one savepoint of the Flink SQL job (ci/flink/src/savepoints/SqlJobs.java) per (spec,
    OUTDIR): OUTDIR/savepoint, OUTDIR/expected.json (the stateful SQL operators' uids and each
    query's last row per key) and OUTDIR/spec.json."""
    generate(pairs, DEFAULT_VERSION, SQL_PROGRAM)


def sql_restore(items: list[tuple[Path, Path]]) -> list[RestoreResult]:
    """Start the SQL job of each (savepoint, spec) (the spec's ``sql_version`` says which query
    version) from the savepoint with a bounded probe, in one JVM. ``entries`` of a result are
    ``{"uids": [...]}`` (the job's stateful SQL operators) and then every changelog row the
    queries emitted, ``{"query", "kind", "row"}``."""
    return _restore_batch(items, SQL_PROGRAM)


def _restore_batch(items: list[tuple[Path, Path]], program: str, flink_version: str = DEFAULT_VERSION,
                   **java: Any) -> list[RestoreResult]:
    """``program restore`` of every (savepoint, spec) in one JVM of Flink ``flink_version``, as
    spec'd (no overrides)."""
    with tempfile.TemporaryDirectory(prefix="statemorph-restore-") as tmp:
        args = ["restore"]
        outs = []
        for k, (savepoint, spec) in enumerate(items):
            out = Path(tmp) / f"out-{k}.jsonl"
            outs.append(out)
            args += [str(Path(savepoint).resolve()), str(Path(spec).resolve()), str(out)]
        return _restore_results(_run_java(flink_version, args, len(items), program, **java), outs)


def operator_generate(pairs: list[tuple[Path, Path]]) -> None:
    """Take one savepoint of the operator-state job (ci/flink/src/savepoints/OperatorJobs.java: broadcast,
    list and union list state) per (spec, OUTDIR); its specs carry ``"operator_job": true``."""
    generate(pairs, DEFAULT_VERSION, OPERATOR_PROGRAM)


def pojo_generate(pairs: list[tuple[Path, Path]], pojo: int = 1, **java: Any) -> None:
    """Take one savepoint of the POJO job (ci/flink/src/savepoints/PojoJobs.java) per (spec, OUTDIR)
    with version ``pojo`` of its state class: OUTDIR/savepoint, OUTDIR/spec.json and, for at most
    100,000 keys, OUTDIR/expected.json (every key's ``profile``)."""
    generate(pairs, DEFAULT_VERSION, POJO_PROGRAM, pojo=pojo, **java)


def pojo_restore(items: list[tuple[Path, Path]], pojo: int = 2) -> list[RestoreResult]:
    """Start the POJO job of each (savepoint, spec) from the savepoint with version ``pojo`` of the
    state class (version 2 on a version-1 savepoint: Flink migrates on restore) and read every key's
    ``profile`` back; one JVM for the batch."""
    return _restore_batch(items, POJO_PROGRAM, pojo=pojo)


def window_generate(pairs: list[tuple[Path, Path]]) -> None:
    """Take one savepoint of the window job (ci/flink/src/savepoints/WindowJobs.java) per (spec,
    OUTDIR), with version 1 of its POJO accumulator: OUTDIR/savepoint (every window still open),
    OUTDIR/expected.json (the windows a restore fires) and OUTDIR/spec.json. A spec with
    ``"window_job": true`` is regenerated with this program."""
    generate(pairs, DEFAULT_VERSION, WINDOW_PROGRAM, pojo=1)


def window_restore(items: list[tuple[Path, Path]], pojo: int = 1) -> list[RestoreResult]:
    """Start the window job of each (savepoint, spec) from the savepoint with version ``pojo`` of
    the accumulator class, send one more record per key (to the first ``window_probe_keys`` keys
    when the spec says so: the others' windows fire from their restored timers alone) and end the
    input; ``entries`` are the windows that fired, as expected.json has them. One JVM for the batch."""
    return _restore_batch(items, WINDOW_PROGRAM, pojo=pojo)


def sql_window_generate(pairs: list[tuple[Path, Path]]) -> None:
    """Take one savepoint of the Flink SQL window job (ci/flink/src/savepoints/SqlWindowJobs.java)
    per (spec, OUTDIR): OUTDIR/savepoint (every window open), OUTDIR/expected.json (the windows a
    restore fires) and OUTDIR/spec.json. A spec with ``"sql_window_job": true`` is regenerated
    with this program."""
    generate(pairs, DEFAULT_VERSION, SQL_WINDOW_PROGRAM)


def sql_window_restore(items: list[tuple[Path, Path]]) -> list[RestoreResult]:
    """Start the SQL window job of each (savepoint, spec) from the savepoint, send one more record
    per key and end the input; ``entries`` are the windows that fired. One JVM for the batch."""
    return _restore_batch(items, SQL_WINDOW_PROGRAM)


def sql_join_generate(pairs: list[tuple[Path, Path]]) -> None:
    """Take one savepoint of the Flink SQL Top-N / join job (ci/flink/src/savepoints/SqlJoinJobs.java)
    per (spec, OUTDIR): OUTDIR/savepoint, OUTDIR/expected.json (the stateful SQL operators' uids)
    and OUTDIR/spec.json. A spec with ``"sql_join_job": true`` is regenerated with this program."""
    generate(pairs, DEFAULT_VERSION, SQL_JOIN_PROGRAM)


def sql_join_restore(items: list[tuple[Path, Path]], flink_version: str = DEFAULT_VERSION) -> list[RestoreResult]:
    """Start the SQL Top-N / join job of each (savepoint, spec) (its ``sql_join_version`` says
    which queries) from the savepoint, send one probe record per key and one of a new key, and end
    the input; ``entries`` are every changelog row the queries emitted, ``{"query", "kind",
    "row"}``. One JVM for the batch, of Flink ``flink_version`` (the release that took them)."""
    return _restore_batch(items, SQL_JOIN_PROGRAM, flink_version)


def sql_agg_restore(items: list[tuple[Path, Path]], flink_version: str = DEFAULT_VERSION) -> list[RestoreResult]:
    """Start the SQL aggregation job (ci/flink/src/savepoints/SqlAggJobs.java; specs with
    ``"sql_agg_job": true``, ``sql_agg_version`` 1 or 2) of each (savepoint, spec) from the
    savepoint, send one more record per key and end the input; ``entries`` are every changelog row
    the queries emitted, ``{"query", "kind", "row"}``. One JVM for the batch, of Flink ``flink_version``."""
    return _restore_batch(items, SQL_AGG_PROGRAM, flink_version)


def window_vectors() -> dict[str, Any]:
    """What Flink's window serializers write (``WindowJobs vectors``): per serializer (TimeWindow,
    GlobalWindow, and Flink SQL's TableTimeWindow and CountWindow) its ``length``, its versioned
    ``snapshot`` bytes and the bytes of a few windows, in hex."""
    with tempfile.TemporaryDirectory(prefix="statemorph-window-vectors-") as tmp:
        out = Path(tmp) / "vectors.json"
        proc = _run_java(DEFAULT_VERSION, ["vectors", str(out)], 1, WINDOW_PROGRAM, pojo=1)
        if proc.returncode != 0 or not out.is_file():
            raise FlinkRunError(f"window vectors failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
        vectors: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return vectors


@dataclass
class PojoCycle:
    """One :func:`pojo_restore_savepoint`: the wall seconds of the whole Java process, the phases
    timed inside it (see PojoJobs.java), and the probed keys' entries."""

    seconds: float
    restored_s: float
    ready_s: float
    register_s: float
    probed_s: float
    savepoint_s: float
    probed: int
    entries: list[dict[str, Any]] = field(default_factory=list)


def pojo_restore_savepoint(savepoint: Path, spec: Path, out_dir: Path, probe_keys: int = 1, stride: int = 1,
                           pojo: int = 2, jvm_flags: list[str] | None = None) -> PojoCycle:
    """What a user runs after changing the POJO class: start the POJO job from ``savepoint`` with
    version ``pojo`` of the class (Flink migrates a version-1 savepoint on restore), read the
    ``profile`` of the key indices ``0, stride, 2*stride, ...`` (``probe_keys`` of them), and stop
    with a canonical savepoint into ``out_dir/savepoint`` (``out_dir`` must not exist). One fresh
    JVM; ``seconds`` is the whole process, JVM start-up included. A refused restore raises
    :class:`FlinkRunError`."""
    import time

    out_dir = Path(out_dir).resolve()
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists")
    with tempfile.TemporaryDirectory(prefix="statemorph-pojo-cycle-") as tmp:
        lines = Path(tmp) / "probed.jsonl"
        t0 = time.perf_counter()
        proc = _run_java(DEFAULT_VERSION, ["restore-savepoint", str(Path(savepoint).resolve()),
                                           str(Path(spec).resolve()), str(out_dir), str(probe_keys), str(stride),
                                           str(lines)], 1, POJO_PROGRAM, pojo=pojo, jvm_flags=jvm_flags,
                         timeout=30 * PER_JOB_TIMEOUT)
        seconds = time.perf_counter() - t0
        entries = read_entries(lines) if lines.is_file() else []
    timing = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
    if proc.returncode != 0 or timing is None:
        raise FlinkRunError(f"restore-savepoint of {savepoint} failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    t = json.loads(timing)
    return PojoCycle(seconds, t["restored_s"], t["ready_s"], t["register_s"], t["probed_s"], t["savepoint_s"],
                     t["probed"], entries)


@dataclass
class TimedRestore:
    """One timed restore (:func:`restore_timed`): wall seconds of the whole Java process, how many
    keys it probed and how many of them had an events value."""

    seconds: float
    probed: int
    found: int
    entries: list[dict[str, Any]] = field(default_factory=list)


def restore_timed(savepoint: Path, spec: Path, probe_keys: int = 0,
                  jvm_flags: list[str] | None = None, stride: int | None = None,
                  events_type: str | None = None) -> TimedRestore:
    """Restore ``savepoint`` in real Flink 2.3 with the spec's types, as is, in one fresh JVM, and
    read the states of its first ``probe_keys`` keys: the restore of every key group without the
    checker's JSON output of every key (which does not fit millions of keys). The time is the
    whole process, JVM start-up included. ``jvm_flags`` replaces the short-job flags (C1 only,
    1 GB heap) for long restores. A refused restore raises :class:`FlinkRunError`.

    With ``stride`` the probed key indices are ``0, stride, 2*stride, ...`` (a sample spread over
    the whole savepoint) and ``entries`` holds every state of every probed key, as :func:`restore`
    returns them, so the sample's values can be checked. ``events_type`` registers the events state
    with that row type (e.g. the evolved Events type of a migrated savepoint)."""
    import time

    cp = classpath(DEFAULT_VERSION)
    with tempfile.TemporaryDirectory(prefix="statemorph-restore-timed-") as tmp:
        spec_path = Path(spec).resolve()
        if events_type is not None:
            data = json.loads(spec_path.read_text(encoding="utf-8"))
            data["events_type"] = events_type
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps(data), encoding="utf-8")
        out = Path(tmp) / "probed.jsonl"
        cmd = ["java", *(JVM_FLAGS if jvm_flags is None else jvm_flags), f"-Djava.io.tmpdir={tmp}"]
        cmd += [f"--add-opens={p}=ALL-UNNAMED" for p in ADD_OPENS]
        cmd += ["-cp", cp, "savepoints.Main", "restore-timed", str(Path(tmp) / "work"),
                str(Path(savepoint).resolve()), str(spec_path), str(probe_keys)]
        if stride is not None:
            cmd += [str(stride), str(out)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=STARTUP_TIMEOUT + 30 * PER_JOB_TIMEOUT,
                              cwd=tmp)
        seconds = time.perf_counter() - t0
        entries = read_entries(out) if stride is not None and out.is_file() else []
    line = next((x for x in proc.stdout.splitlines() if x.startswith("restored ")), None)
    if proc.returncode != 0 or line is None:
        raise FlinkRunError(f"timed restore of {savepoint} failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    _, probed, found = line.split()
    return TimedRestore(seconds, int(probed), int(found), entries)


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a checker's JSON-lines output."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def expected_entries(case_dir: Path) -> list[dict[str, Any]]:
    """The entries a generated case's job wrote (its expected.json)."""
    data: dict[str, Any] = json.loads((Path(case_dir) / "expected.json").read_text(encoding="utf-8"))
    entries: list[dict[str, Any]] = data["entries"]
    return entries


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="take savepoints: SPEC OUTDIR [SPEC OUTDIR ...]")
    g.add_argument("--flink", default=DEFAULT_VERSION, choices=VERSIONS)
    g.add_argument("args", nargs="+")
    r = sub.add_parser("restore", help="check restores: SAVEPOINT SPEC OUT.jsonl [...]")
    r.add_argument("--events-type", default=None, help="register the events state with this row type")
    r.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="override a spec field")
    r.add_argument("args", nargs="+")
    rg = sub.add_parser("regenerate", help="take every DIR/*/spec.json again")
    rg.add_argument("dir", type=Path)
    rt = sub.add_parser("restore-timed", help="time a restore: SAVEPOINT SPEC [PROBE_KEYS]")
    rt.add_argument("savepoint", type=Path)
    rt.add_argument("spec", type=Path)
    rt.add_argument("probe_keys", type=int, nargs="?", default=0)
    sg = sub.add_parser("sql-generate", help="take savepoints of the SQL job: SPEC OUTDIR [SPEC OUTDIR ...]")
    sg.add_argument("args", nargs="+")
    sr = sub.add_parser("sql-restore", help="restore the SQL job: SAVEPOINT SPEC OUT.jsonl [...]")
    sr.add_argument("args", nargs="+")
    pg = sub.add_parser("pojo-generate", help="take savepoints of the POJO job: SPEC OUTDIR [SPEC OUTDIR ...]")
    pg.add_argument("--pojo", type=int, default=1, choices=POJO_VERSIONS, help="version of the state class")
    pg.add_argument("args", nargs="+")
    pr = sub.add_parser("pojo-restore", help="restore the POJO job: SAVEPOINT SPEC OUT.jsonl [...]")
    pr.add_argument("--pojo", type=int, default=2, choices=POJO_VERSIONS, help="version of the state class")
    pr.add_argument("args", nargs="+")
    ns = p.parse_args(argv)
    if ns.cmd in ("sql-generate", "sql-restore", "pojo-generate", "pojo-restore"):
        return _sql_main(p, ns)
    if ns.cmd == "restore-timed":
        r = restore_timed(ns.savepoint, ns.spec, ns.probe_keys)
        print(f"restored in {r.seconds:.2f} s; probed {r.probed} keys, {r.found} with an events value")
        return 0
    if ns.cmd == "regenerate":
        for case in regenerate(ns.dir):
            print(f"generated {case}")
        return 0
    if ns.cmd == "generate":
        if len(ns.args) % 2:
            p.error("generate takes SPEC OUTDIR pairs")
        generate([(Path(a), Path(b)) for a, b in zip(ns.args[::2], ns.args[1::2], strict=True)], ns.flink)
        return 0
    if len(ns.args) % 3:
        p.error("restore takes SAVEPOINT SPEC OUT.jsonl triples")
    triples = list(zip(ns.args[::3], ns.args[1::3], ns.args[2::3], strict=True))
    overrides = {}
    for item in ns.set:
        name, _, value = item.partition("=")
        overrides[name] = json.loads(value)
    results = restore([(Path(s), Path(sp)) for s, sp, _ in triples], ns.events_type, overrides)
    status = 0
    for (savepoint, _, out), res in zip(triples, results, strict=True):
        if res.ok:
            with open(out, "w", encoding="utf-8") as f:
                for e in res.entries or []:
                    f.write(json.dumps(e, ensure_ascii=False) + "\n")
        else:
            print(f"restore failed: {savepoint}: {res.exception}: {res.message}", file=sys.stderr)
            status = 3
    return status


def _sql_main(p: argparse.ArgumentParser, ns: argparse.Namespace) -> int:
    """The SQL and POJO jobs' verbs: generate pairs, restore triples written as JSON lines."""
    pojo = ns.cmd.startswith("pojo-")
    if ns.cmd.endswith("-generate"):
        if len(ns.args) % 2:
            p.error(f"{ns.cmd} takes SPEC OUTDIR pairs")
        pairs = [(Path(a), Path(b)) for a, b in zip(ns.args[::2], ns.args[1::2], strict=True)]
        pojo_generate(pairs, ns.pojo) if pojo else sql_generate(pairs)
        return 0
    if len(ns.args) % 3:
        p.error(f"{ns.cmd} takes SAVEPOINT SPEC OUT.jsonl triples")
    triples = list(zip(ns.args[::3], ns.args[1::3], ns.args[2::3], strict=True))
    items = [(Path(s), Path(sp)) for s, sp, _ in triples]
    status = 0
    for (savepoint, _, out), res in zip(triples, pojo_restore(items, ns.pojo) if pojo else sql_restore(items),
                                        strict=True):
        if res.ok:
            Path(out).write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in res.entries or []),
                                 encoding="utf-8")
        else:
            print(f"restore failed: {savepoint}: {res.exception}: {res.message}", file=sys.stderr)
            status = 3
    return status


if __name__ == "__main__":
    sys.exit(main())
