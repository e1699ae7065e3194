"""Runs mutated inputs through a family's checks and records what happened.

The oracle, per input: the check returns (a valid result, or a typed ``StatemorphError``);
anything else is a finding:

- ``untyped``: another exception escaped (a ``KeyError``, ``IndexError``, ``OverflowError``…);
- ``disagree``: two paths that read the same bytes disagreed (see :mod:`.families`);
- ``memory``: ``MemoryError`` (the worker runs under ``RLIMIT_AS``, so a hostile length that
  makes a decoder allocate beyond the bound fails here instead of swapping the machine);
- ``rss``: the input raised the worker's peak RSS more than :data:`RSS_BOUND_MIB` above its RSS
  before it (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs`` before each
  input): memory taken and used, which ``RLIMIT_AS`` alone lets through up to its 1 GiB;
- ``hang``: the input used more than :data:`HANG_SECONDS` of CPU time (``SIGPROF``), or waited
  more than :data:`BLOCKED_SECONDS` of wall-clock time (``SIGALRM``: a blocking ``open`` of a
  FIFO uses no CPU); the parent's watchdog kills a worker stuck in C code. CPU time, not wall
  time, so that a ``nice`` worker starved of CPU by other jobs is never taken for a hang (a
  wall-clock alarm of 10 s made three such "hangs" in a million-input run at load 7, each
  judged ``ok`` in 0.1 s when replayed);
- ``crash``: the worker process died (a signal); the parent names the input from the
  worker's progress file and carries on after it.

Findings are minimised (greedy chunk removal while the same finding reproduces) and can be
written as regression inputs under ``tests/data/fuzz/<family>/``.

Input *i* is a pure function of the family and *i*, and a check is a pure function of its input,
so a worker judges each distinct input once: an input equal to one it judged clean before counts
with that outcome. Every figure keeps the two apart: ``inputs`` is ``distinct`` (inputs unlike
every earlier one of the run's worker) plus ``repeats`` plus ``unchecked`` (inputs past the
:data:`MEMO_INPUTS` a worker remembers, or lost with a dead worker, which may be either), so a
count of inputs cannot pass for a count of different ones.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from processes import TESTS, child_env

from statemorph.savepoint.flink.key_group_scan import MAX_ENTRY_BYTES

from .families import FAMILIES, Disagreement, Family
from .mutate import mutate, rng_for

HANG_SECONDS = 10.0
"""CPU seconds (every thread of the worker) after which an input is a hang (real inputs take
micro- to milliseconds)."""
BLOCKED_SECONDS = 120.0
"""Wall-clock seconds after which an input is a hang whatever CPU it used: one blocked in a system
call uses none. Far above any starvation seen (a ``nice -n 19`` worker at load 7 took 10 s for an
input of 0.1 s), and below the parent's watchdog (:func:`run_families`)."""
ADDRESS_SPACE_HEADROOM = 1 << 30
"""RLIMIT_AS of a worker: its address space after loading everything, plus this (1 GiB)."""
REGRESSIONS = Path(TESTS) / "data" / "fuzz"
RSS_BOUND_MIB = 2 * (MAX_ENTRY_BYTES >> 20) + 64
"""The most one input may raise a worker's peak RSS (MiB): an entry of the largest size a reader
holds (``MAX_ENTRY_BYTES``) twice over (the window it is read into, the copy handed out), and
64 MiB. Before the reader held such an entry at most twice, input 8789 of ``sparse-and-bomb``
raised it 1,156 MiB (docs/reliability.md, "The sparse-and-bomb worker's 1,418 MB, explained")."""
RETURN_ABOVE_MIB = 64
"""After an input that left the worker's RSS this much above its start, the Arrow pool's free
pages go back to the OS (the pool keeps them for reuse, and the next input's peak would stack on
them)."""
MEMO_INPUTS = 1 << 22
"""Distinct inputs a worker remembers (8-byte digests as ints, about 75 MB a million)."""
REPORT_EVERY = 600.0
"""Seconds between a long run's progress lines on stderr (input reached, distinct, findings so far,
inputs a second); a finding is reported on stderr as it is found, so a run of hours shows one at once."""


class Hang(BaseException):
    """Raised by the SIGPROF / SIGALRM handler: BaseException, so no ``except Exception`` in a decoder
    eats it. ``args[0]`` says which limit the input reached."""


@dataclasses.dataclass
class Finding:
    family: str
    target: str
    index: int
    kind: str
    message: str
    data: bytes

    def signature(self) -> str:
        return f"{self.kind}:{self.message.splitlines()[0][:60] if self.message else ''}"

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "target": self.target, "index": self.index, "kind": self.kind,
                "message": self.message[:2000], "hex": self.data.hex()}


@dataclasses.dataclass
class Stats:
    family: str
    inputs: int = 0
    outcomes: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    max_rss_mb: float = 0.0
    first: dict[str, int] = dataclasses.field(default_factory=dict)  # outcome -> first input index with it
    distinct: int = 0  # inputs unlike every earlier one of the worker
    repeats: int = 0  # inputs equal to an earlier one (counted with its outcome)
    unchecked: int = 0  # past the worker's memory of inputs, or lost with a dead worker: either
    input_rss_mb: float = 0.0  # the most one input raised the peak RSS
    input_rss_at: int = -1  # that input's index

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "inputs": self.inputs, "outcomes": dict(sorted(self.outcomes.items())),
                "findings": [f.to_json() for f in self.findings], "seconds": round(self.seconds, 1),
                "max_rss_mb": round(self.max_rss_mb, 1), "first": self.first, "distinct": self.distinct,
                "repeats": self.repeats, "unchecked": self.unchecked,
                "input_rss_mb": round(self.input_rss_mb, 1), "input_rss_at": self.input_rss_at}

    def add(self, other: dict[str, Any]) -> None:
        """Fold in a worker's :meth:`to_json` for the same family."""
        self.inputs += other["inputs"]
        self.outcomes.update(other["outcomes"])
        self.seconds += other["seconds"]
        self.max_rss_mb = max(self.max_rss_mb, other["max_rss_mb"])
        self.distinct += other["distinct"]
        self.repeats += other["repeats"]
        self.unchecked += other["unchecked"]
        if other.get("input_rss_mb", 0.0) > self.input_rss_mb:
            self.input_rss_mb, self.input_rss_at = other["input_rss_mb"], other["input_rss_at"]
        for k, v in other["first"].items():
            self.first.setdefault(k, v)
        self.findings += [Finding(f["family"], f["target"], f["index"], f["kind"], f["message"],
                                  bytes.fromhex(f["hex"])) for f in other["findings"]]


def input_for(family: Family, index: int) -> tuple[str, bytes, str]:
    """Input ``index`` of ``family``: (target name, bytes, mutation names). Pure and deterministic."""
    r = rng_for(family.name, index)
    target = family.targets[r.randrange(len(family.targets))]
    if family.mutator is not None:
        data, ops = family.mutator(target.seed, r)
    else:
        data, ops = mutate(target.seed, r, family.pool, family.json_aware)
    return target.name, data, ops


def input_digest(target: str, data: bytes) -> int:
    """What tells two inputs apart: 8 bytes of BLAKE2b over the target and the bytes (a collision
    among a million inputs has odds of about 1 in 37 million)."""
    return int.from_bytes(hashlib.blake2b(target.encode() + b"\0" + data, digest_size=8).digest(), "little")


def distinct_inputs(family: Family, start: int, count: int) -> int:
    """How many of inputs ``start .. start+count`` of ``family`` differ from every other one:
    generated and hashed, not run (what ``--distinct`` prints)."""
    return len({input_digest(*input_for(family, i)[:2]) for i in range(start, start + count)})


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang("CPU time" if signum == signal.SIGPROF else "wall-clock time")


def judge(family: Family, target: str, data: bytes, hang_seconds: float = HANG_SECONDS,
          blocked_seconds: float = BLOCKED_SECONDS) -> tuple[str, str | None, str]:
    """(outcome label, finding kind or None, message) for one input."""
    check = family.target(target).check
    old = {sig: signal.signal(sig, _on_alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, hang_seconds)
    signal.setitimer(signal.ITIMER_REAL, blocked_seconds)
    try:
        return check(data), None, ""
    except Hang as e:
        limit = hang_seconds if e.args[0] == "CPU time" else blocked_seconds
        return "hang", "hang", f"no result after {limit} s of {e.args[0]}"
    except Disagreement as e:
        return "disagree", "disagree", str(e)
    except MemoryError as e:
        return "memory", "memory", f"{type(e).__name__}: {e}"
    except RecursionError as e:
        return "untyped", "untyped", f"RecursionError: {e}"
    except Exception as e:  # noqa: BLE001  (the oracle: only typed errors may leave a decoder)
        from statemorph.errors import StatemorphError

        if isinstance(e, StatemorphError):
            return f"error:{type(e).__name__}", None, ""
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else ""
        return "untyped", "untyped", f"{type(e).__name__}{where}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _kind_and_where(message: str) -> str:
    """What must stay the same while minimising: the exception class and the place it came from."""
    m = re.match(r"(\w+( at [\w.]+:\d+)?)", message)
    return m.group(1) if m else message[:40]


def minimise(family: Family, target: str, data: bytes, kind: str | None, message: str, budget: int = 400,
             outcome: str | None = None) -> bytes:
    """Greedy delta debugging: remove chunks (halving their size) while the same kind of finding
    (same exception class and place, or a disagreement), or the same ``outcome``, still reproduces."""
    want = _kind_and_where(message) if kind == "untyped" else kind

    def same(d: bytes) -> bool:
        o, k, msg = judge(family, target, d)
        if outcome is not None:
            return o == outcome
        return k == kind and (_kind_and_where(msg) if kind == "untyped" else k) == want

    best, chunk, tries = data, max(1, len(data) // 2), 0
    while chunk >= 1 and tries < budget:
        i, shrunk = 0, False
        while i < len(best) and tries < budget:
            cand = best[:i] + best[i + chunk:]
            tries += 1
            if cand != best and same(cand):
                best, shrunk = cand, True
            else:
                i += chunk
        if not shrunk:
            chunk //= 2
    return best


def save_regression(f: Finding) -> Path:
    """Write a finding as ``tests/data/fuzz/<family>/<sha12>.bin`` plus its ``.json`` description."""
    d = REGRESSIONS / f.family
    d.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(f.target.encode() + b"\0" + f.data).hexdigest()[:12]
    (d / f"{digest}.bin").write_bytes(f.data)
    meta = {"target": f.target, "kind": f.kind, "message": f.message.splitlines()[0][:300] if f.message else "",
            "found_by": f"python -m tests.fuzz --family {f.family} --start {f.index} --inputs 1"}
    (d / f"{digest}.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return d / f"{digest}.bin"


def regression_inputs() -> Iterator[tuple[str, str, Path]]:
    """(family, target, .bin path) of every saved regression input."""
    for meta in sorted(REGRESSIONS.glob("*/*.json")):
        yield meta.parent.name, json.loads(meta.read_text(encoding="utf-8"))["target"], meta.with_suffix(".bin")


# ---------------------------------------------------------------------------------------- worker

def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """How far one piece of work raises the process's peak RSS: the peak (``VmHWM``) is reset to
    the current RSS through ``/proc/self/clear_refs`` before it, read after it. Linux only; where
    ``/proc`` does not allow it, :attr:`works` is False and every figure is 0."""

    def __init__(self) -> None:
        try:
            self.clear = os.open("/proc/self/clear_refs", os.O_WRONLY)
            self.status = os.open("/proc/self/status", os.O_RDONLY)
            self.works = True
        except OSError:
            self.works = False
        self.before = 0
        self.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        """The process's peak RSS so far (resetting VmHWM resets ``ru_maxrss`` too)."""

    def __enter__(self) -> PeakRss:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.works:
            os.close(self.clear)
            os.close(self.status)
            self.works = False

    def _kib(self, field: bytes) -> int:
        text = os.pread(self.status, 1 << 16, 0)
        at = text.index(field + b":") + len(field) + 1
        return int(text[at:text.index(b"kB", at)])

    def rss_mib(self) -> float:
        return self._kib(b"VmRSS") / 1024 if self.works else 0.0

    def start(self) -> None:
        if self.works:
            os.pwrite(self.clear, b"5", 0)  # the peak RSS starts again from the current RSS
            self.before = self._kib(b"VmRSS")

    def grew_mib(self) -> float:
        """MiB the peak RSS rose above the RSS at :meth:`start`."""
        if not self.works:
            self.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            return 0.0
        hwm = self._kib(b"VmHWM")
        self.peak_mib = max(self.peak_mib, hwm / 1024)
        return (hwm - self.before) / 1024


def measured(family: Family, target: str, data: bytes, rss: PeakRss, hang_seconds: float = HANG_SECONDS,
             bound_mib: float = RSS_BOUND_MIB) -> tuple[str, str | None, str, float]:
    """:func:`judge` and how far the input raised the peak RSS (MiB); an input that raised it more
    than ``bound_mib`` with no other finding is an ``rss`` finding."""
    rss.start()
    outcome, kind, message = judge(family, target, data, hang_seconds)
    grew = rss.grew_mib()
    if kind is None and grew > bound_mib:
        return outcome, "rss", f"peak RSS rose {grew:.0f} MiB above the {bound_mib:.0f} MiB one input may take", grew
    return outcome, kind, message, grew


class _Progress:
    """The index being judged, in a small file, so a parent can name the input that killed us."""

    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600) if path else -1

    def set(self, family_no: int, index: int) -> None:
        if self.fd >= 0:
            os.pwrite(self.fd, struct.pack("<iq", family_no, index), 0)


def run_worker(names: list[str], start: int, count: int, seconds: float, progress: str | None,
               resume: tuple[int, int] = (0, 0), limit_memory: bool = True) -> Iterator[Stats]:
    """Judge inputs ``start .. start+count`` of each family (or as many as fit in ``seconds`` per
    family); yields one :class:`Stats` per family. ``resume=(n, i)`` skips the families before
    the n-th and starts that one at input ``i`` (a worker taking over from a dead one)."""
    families = [FAMILIES[n]() for n in names]
    # warm every path once (imports, plan compilation) before the address space is measured
    for fam in families[resume[0]:]:
        for t in fam.targets[:3]:
            judge(fam, t.name, t.seed, hang_seconds=120)
    if limit_memory:
        bound = _vm_bytes() + ADDRESS_SPACE_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (bound, resource.getrlimit(resource.RLIMIT_AS)[1]))
    prog = _Progress(progress)
    rss = PeakRss()
    baseline = rss.rss_mib()
    for no, fam in enumerate(families):
        if no < resume[0]:
            continue
        stats = Stats(fam.name)
        judged: dict[int, str | None] = {}  # digest of an input -> its outcome (None: a finding, judged again)
        t0 = report = time.monotonic()
        for index in range(resume[1] if no == resume[0] else start, start + count):
            now = time.monotonic()
            if seconds and now - t0 > seconds:
                break
            if now - report > REPORT_EVERY:
                report = now
                print(f"  {fam.name}: at input {index}, {stats.inputs} inputs ({stats.distinct} distinct), "
                      f"{len(stats.findings)} findings, {stats.inputs / (now - t0):.1f} inputs/s",
                      file=sys.stderr, flush=True)
            prog.set(no, index)
            target, data, _ = input_for(fam, index)
            digest = input_digest(target, data)
            stats.inputs += 1
            known = judged.get(digest, "")
            if known == "":
                if len(judged) < MEMO_INPUTS:
                    stats.distinct += 1
                else:
                    stats.unchecked += 1
            else:
                stats.repeats += 1
                if known is not None:
                    stats.outcomes[known] += 1
                    continue
            outcome, kind, message, grew = measured(fam, target, data, rss)
            stats.outcomes[outcome] += 1
            stats.first.setdefault(outcome, index)
            if grew > stats.input_rss_mb:
                stats.input_rss_mb, stats.input_rss_at = grew, index
            if kind is not None:
                stats.findings.append(Finding(fam.name, target, index, kind, message, data))
                first = message.splitlines()[0][:200] if message else ""
                print(f"  {fam.name}: {kind} at input {index} ({target}): {first}", file=sys.stderr, flush=True)
            if len(judged) < MEMO_INPUTS:
                judged[digest] = None if kind is not None else sys.intern(outcome)
            if rss.rss_mib() > baseline + RETURN_ABOVE_MIB:
                pa.default_memory_pool().release_unused()
        stats.seconds = time.monotonic() - t0
        stats.max_rss_mb = rss.peak_mib
        yield stats


# ---------------------------------------------------------------------------------------- parent

def run_families(names: list[str], start: int, count: int, seconds: float = 0.0, watchdog: float = 300.0,
                 log: Any = None) -> list[Stats]:
    """Run families in one worker subprocess (its own RLIMIT_AS): a worker that dies or makes no
    progress for ``watchdog`` seconds becomes a ``crash`` / ``hang`` finding for the input it was
    on, and a new worker carries on after that input."""
    totals = {n: Stats(n) for n in names}
    tag = f"/tmp/statemorph-fuzz-{os.getpid()}-{time.monotonic_ns()}"
    progress, results = f"{tag}.progress", f"{tag}.json"  # files, not pipes: no size limit, no deadlock
    resume = (0, start)
    while True:
        cmd = [sys.executable, "-m", "tests.fuzz", "--worker", "--start", str(start), "--inputs", str(count),
               "--seconds", str(seconds), "--progress", progress, "--json", results,
               "--resume", f"{resume[0]}:{resume[1]}"]
        for n in names:
            cmd += ["--family", n]
        for f in (progress, results):
            if os.path.exists(f):
                os.unlink(f)
        proc = subprocess.Popen(cmd, cwd=str(Path(__file__).resolve().parents[2]),
                                env=child_env(PYTHONFAULTHANDLER="1"))
        last, last_at = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.2)
            now = _read_progress(progress)
            if now != last:
                last, last_at = now, time.monotonic()
            elif time.monotonic() - last_at > watchdog + 300 * (last is None):
                proc.kill()
                break
        rc = proc.wait()
        done = json.loads(Path(results).read_text(encoding="utf-8")) if os.path.exists(results) else []
        for s in done:
            totals[s["family"]].add(s)
        if rc == 0:
            break
        at = _read_progress(progress)
        if at is None:
            raise RuntimeError(f"fuzz worker failed before its first input (exit {rc}): {' '.join(cmd)}")
        no, bad = at
        name = names[no]
        target, data, _ = input_for(FAMILIES[name](), bad)
        kind = "hang" if rc == -signal.SIGKILL else "crash"
        total = totals[name]
        # the dead worker's outcomes for this family before ``bad`` are lost: counted as such
        before = bad - (resume[1] if no == resume[0] else start)
        total.inputs += before + 1
        if before:
            total.outcomes["unrecorded (worker died)"] += before
        total.unchecked += before + 1
        total.outcomes[kind] += 1
        total.findings.append(Finding(name, target, bad, kind, f"worker exit status {rc}", data))
        if log is not None:
            print(f"  {name}: {kind} at input {bad} ({target}), continuing", file=log, flush=True)
        resume = (no, bad + 1)
    for f in (progress, results):
        if os.path.exists(f):
            os.unlink(f)
    return [totals[n] for n in names]


def _read_progress(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read(12)
    except FileNotFoundError:
        return None
    return struct.unpack("<iq", raw) if len(raw) == 12 else None
