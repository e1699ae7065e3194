"""Runs mutated inputs through a family's checks and records what happened.

The oracle, per input: the check returns (a valid result, or a typed ``StatemorphError``);
anything else is a finding:

- ``untyped``: another exception escaped (a ``KeyError``, ``IndexError``, ``OverflowError``…);
- ``disagree``: two paths that read the same bytes disagreed (see :mod:`.families`);
- ``memory``: ``MemoryError`` (the worker runs under ``RLIMIT_AS``, so a hostile length that
  makes a decoder allocate beyond the bound fails here instead of swapping the machine);
- ``hang``: the input ran longer than :data:`HANG_SECONDS` (``SIGALRM`` in Python code; the
  parent's watchdog kills a worker stuck in C code);
- ``crash``: the worker process died (a signal); the parent names the input from the
  worker's progress file and carries on after it.

Findings are minimised (greedy chunk removal while the same finding reproduces) and can be
written as regression inputs under ``tests/data/fuzz/<family>/``.
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

from processes import TESTS, child_env

from .families import FAMILIES, Disagreement, Family
from .mutate import mutate, rng_for

HANG_SECONDS = 10.0
"""An input that takes longer than this is a hang (real inputs decode in micro- to milliseconds)."""
ADDRESS_SPACE_HEADROOM = 1 << 30
"""RLIMIT_AS of a worker: its address space after loading everything, plus this (1 GiB)."""
REGRESSIONS = Path(TESTS) / "data" / "fuzz"


class Hang(BaseException):
    """Raised by the SIGALRM handler: BaseException, so no ``except Exception`` in a decoder eats it."""


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

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "inputs": self.inputs, "outcomes": dict(sorted(self.outcomes.items())),
                "findings": [f.to_json() for f in self.findings], "seconds": round(self.seconds, 1),
                "max_rss_mb": round(self.max_rss_mb, 1), "first": self.first}


def input_for(family: Family, index: int) -> tuple[str, bytes, str]:
    """Input ``index`` of ``family``: (target name, bytes, mutation names). Pure and deterministic."""
    r = rng_for(family.name, index)
    target = family.targets[r.randrange(len(family.targets))]
    if family.mutator is not None:
        data, ops = family.mutator(target.seed, r)
    else:
        data, ops = mutate(target.seed, r, family.pool, family.json_aware)
    return target.name, data, ops


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang()


def judge(family: Family, target: str, data: bytes, hang_seconds: float = HANG_SECONDS) -> tuple[str, str | None, str]:
    """(outcome label, finding kind or None, message) for one input."""
    check = family.target(target).check
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_seconds)
    try:
        return check(data), None, ""
    except Hang:
        return "hang", "hang", f"no result after {hang_seconds} s"
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
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


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
    for no, fam in enumerate(families):
        if no < resume[0]:
            continue
        stats = Stats(fam.name)
        t0 = time.monotonic()
        for index in range(resume[1] if no == resume[0] else start, start + count):
            if seconds and time.monotonic() - t0 > seconds:
                break
            prog.set(no, index)
            target, data, _ = input_for(fam, index)
            outcome, kind, message = judge(fam, target, data)
            stats.inputs += 1
            stats.outcomes[outcome] += 1
            stats.first.setdefault(outcome, index)
            if kind is not None:
                stats.findings.append(Finding(fam.name, target, index, kind, message, data))
        stats.seconds = time.monotonic() - t0
        stats.max_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        yield stats


# ---------------------------------------------------------------------------------------- parent

def run_families(names: list[str], start: int, count: int, seconds: float = 0.0, watchdog: float = 60.0,
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
            total = totals[s["family"]]
            total.inputs += s["inputs"]
            total.outcomes.update(s["outcomes"])
            total.seconds += s["seconds"]
            total.max_rss_mb = max(total.max_rss_mb, s["max_rss_mb"])
            for k, v in s["first"].items():
                total.first.setdefault(k, v)
            total.findings += [Finding(f["family"], f["target"], f["index"], f["kind"], f["message"],
                                       bytes.fromhex(f["hex"])) for f in s["findings"]]
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
