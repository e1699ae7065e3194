"""The long fuzz run: ``python -m tests.fuzz [--inputs N] [--family F ...] [--seconds S]``.

Prints, per family, the inputs judged (how many were distinct, how many repeated an earlier one),
their outcomes (``ok``, ``error:<Class>`` per typed error class, and any findings: ``untyped``,
``disagree``, ``memory``, ``rss``, ``hang``, ``crash``), the worker's peak RSS and the most one
input raised it; ``--distinct`` only generates the inputs and counts the distinct ones; ``--json
FILE`` writes the same as JSON, ``--save`` writes every finding (minimised, but for ``rss``) as a
regression input under ``tests/data/fuzz/``. Exit status 1 when anything was found. Run from the
repository root with ``PYTHONPATH=src:tests`` (``tests/`` is the import root of the test helpers
the families share with pytest, as ``pythonpath`` in pyproject.toml says).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .engine import Finding, Stats, distinct_inputs, input_for, minimise, run_families, run_worker, save_regression
from .families import FAMILIES, KNOWN


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--family", action="append", choices=list(FAMILIES), help="repeatable; default: all")
    p.add_argument("--inputs", type=int, default=int(os.environ.get("STATEMORPH_FUZZ_INPUTS", "100000")),
                   help="inputs per family (default $STATEMORPH_FUZZ_INPUTS or 100000)")
    p.add_argument("--start", type=int, default=0, help="first input index (inputs are numbered per family)")
    p.add_argument("--seconds", type=float, default=0.0, help="time budget per family (0 = none)")
    p.add_argument("--json", help="write the per-family results here")
    p.add_argument("--save", action="store_true", help="minimise findings (and the first input of each known "
                   "difference) and save them under tests/data/fuzz/")
    p.add_argument("--distinct", action="store_true", help="only generate the inputs and print how many are "
                   "distinct (nothing is run)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--progress", help=argparse.SUPPRESS)
    p.add_argument("--resume", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    names = a.family or list(FAMILIES)
    if a.worker:
        done = []
        for stats in run_worker(names, a.start, a.inputs, a.seconds, a.progress, _resume(a.resume, a.start)):
            done.append(stats.to_json())
            with open(a.json + ".tmp", "w", encoding="utf-8") as f:  # after each family: a crash keeps them
                json.dump(done, f)
            os.replace(a.json + ".tmp", a.json)
        return 0
    if a.distinct:
        for name in names:
            n = distinct_inputs(FAMILIES[name](), a.start, a.inputs)
            print(f"{name:17} {a.inputs:>9} inputs  {n:>9} distinct ({100 * n / max(a.inputs, 1):.1f} %)", flush=True)
        return 0
    results: list[Stats] = []
    for name in names:  # one worker per family: a long run prints each family as it ends
        stats = run_families([name], a.start, a.inputs, a.seconds, log=sys.stderr)[0]
        results.append(stats)
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(stats.outcomes.items(), key=lambda kv: -kv[1]))
        unchecked = f", {stats.unchecked} unchecked" if stats.unchecked else ""
        print(f"{name:17} {stats.inputs:>9} inputs ({stats.distinct} distinct, {stats.repeats} repeats{unchecked})  "
              f"{stats.seconds:7.0f} s  {stats.inputs / max(stats.seconds, 1e-9):6.1f}/s "
              f"({stats.distinct / max(stats.seconds, 1e-9):.1f} distinct/s)  peak RSS {stats.max_rss_mb:5.0f} MB "
              f"(one input: +{stats.input_rss_mb:.0f} MiB, input {stats.input_rss_at})  "
              f"findings {len(stats.findings)}  | {outcomes}", flush=True)
        for f in stats.findings[:20]:
            print(f"    {f.kind} at input {f.index} ({f.target}): {f.message.splitlines()[0][:200]}", flush=True)
        if a.save:
            fam = FAMILIES[name]()
            for outcome, index in sorted(stats.first.items()):
                if outcome.startswith("known:"):
                    target, data, _ = input_for(fam, index)
                    data = minimise(fam, target, data, None, "", outcome=outcome)
                    path = save_regression(Finding(name, target, index, outcome, KNOWN.get(outcome, outcome), data))
                    print(f"    saved {path} ({outcome})", flush=True)
            seen: set[str] = set()
            for f in stats.findings:
                if f.signature() in seen or f.kind in ("hang", "crash"):
                    continue
                seen.add(f.signature())
                if f.kind != "rss":  # judge alone does not measure memory: saved as found
                    f.data = minimise(fam, f.target, f.data, f.kind, f.message)
                print(f"    saved {save_regression(f)}", flush=True)
    total = sum(s.inputs for s in results)
    found = sum(len(s.findings) for s in results)
    print(f"{'total':17} {total:>9} inputs  findings {found}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump([s.to_json() for s in results], f, indent=1)
    return 1 if found else 0


def _resume(text: str | None, start: int) -> tuple[int, int]:
    if not text:
        return 0, start
    no, index = text.split(":")
    return int(no), int(index)


if __name__ == "__main__":
    sys.exit(main())
