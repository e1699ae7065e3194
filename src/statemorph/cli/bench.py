"""``statemorph bench``: run the repository's pytest-benchmark suite and print its table.

The suite lives in the source checkout (``benchmarks/``), not in an installed package: the folder
is ``--dir``, else ``./benchmarks``, else the checkout this module was imported from. When none
exists (an installed wheel) the command says so in one line and exits 2."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError


def find_benchmarks(explicit: str | None) -> str:
    """The benchmark folder to run, or a UsageError saying where it was looked for."""
    if explicit is not None:
        if os.path.isdir(explicit):
            return explicit
        raise UsageError(f"benchmark directory {explicit!r} not found")
    checkout = Path(__file__).resolve().parents[3] / "benchmarks"  # <checkout>/src/statemorph/cli/bench.py
    for candidate in (Path("benchmarks"), checkout):
        if (candidate / "conftest.py").is_file():
            return str(candidate)
    raise UsageError("benchmark directory not found: the benchmarks ship with the source checkout, not the "
                     "installed package; run from a statemorph checkout or pass --dir")


def cmd_bench(args: argparse.Namespace) -> int:
    root = find_benchmarks(args.dir)
    cmd = [sys.executable, "-m", "pytest", root, "--benchmark-only", "-q", "-p", "no:cacheprovider",
           "--benchmark-columns=min,median,mean,ops,rounds", "--benchmark-sort=name"]
    env = dict(os.environ)
    if args.full:
        env["STATEMORPH_SCALE_N"] = "10000000"
    cmd += args.pytest_args
    print("running:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("bench", help="run the benchmark suite and print the table (extra arguments go to pytest)",
                       usage="statemorph bench [-h] [--dir DIR] [--full] [PYTEST ARGS ...]",
                       epilog="PYTEST ARGS: any other arguments go to pytest (e.g. -k local)")
    s.add_argument("--dir", default=None, help="benchmark directory (default: ./benchmarks, else the checkout's)")
    s.add_argument("--full", action="store_true", help="include the 10-million-entry scale benchmarks")
    s.set_defaults(func=cmd_bench, pytest_args=[])  # any other arguments go to pytest (e.g. -k local)


__all__ = ["cmd_bench", "find_benchmarks"]
