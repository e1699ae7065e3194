"""Hostile Flink savepoint directories give one typed line, never a traceback or a hang.

Each case (:data:`faults.CASES`) runs through the Flink reader (``python -m tests.fuzz.faults``:
every state read to the end, all cases in one subprocess, each under its own time guard) and
through the CLI (``python -m statemorph inspect DIR``, one subprocess per case, two at a time,
each with a timeout). A FIFO that were opened would block, ``/dev/zero`` would never end and a
2^62 size would allocate: the time guards and the typed line catch all three. (On this branch's
base the CLI reads only the Parquet form, so its answer to these directories is the typed
"not a complete savepoint" line; the cases hold it to one typed line once it reads Flink's form.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from processes import child_env

from .faults import CASES, FILES, INLINE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.fuzz
TIMEOUT = 120  # seconds; a clean read of these savepoints takes about one


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _one_typed_line(p: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("statemorph: error: "), p.stderr
    assert p.returncode in (2, 4), (p.returncode, p.stderr)  # USAGE / DAMAGED_SAVEPOINT (errors.ExitCode)
    return lines[0]


@pytest.fixture(scope="module")
def through_the_reader(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every case (and the two clean savepoints) read in one subprocess, each DIR under its own
    time guard: case name → the JSON answer of ``python -m tests.fuzz.faults``."""
    root = tmp_path_factory.mktemp("faults")
    dirs = {case: str(build(root / case)) for case, build in CASES.items()}
    dirs.update({"clean-files": str(FILES), "clean-inline": str(INLINE)})
    p = _run("-m", "tests.fuzz.faults", *dirs.values())
    assert p.returncode == 0, p.stderr
    answers = [json.loads(line) for line in p.stdout.splitlines()]
    return {case: a for case, a in zip(dirs, answers, strict=True)}


def test_the_clean_savepoints_read(through_the_reader: dict[str, dict[str, Any]]) -> None:
    for case in ("clean-files", "clean-inline"):
        a = through_the_reader[case]
        assert a["status"] == 0 and int(str(a["line"]).split()[0]) > 0, a


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_directory_through_the_reader(through_the_reader: dict[str, dict[str, Any]], case: str) -> None:
    a = through_the_reader[case]
    assert a["status"] in (2, 4), a  # USAGE / DAMAGED_SAVEPOINT (errors.ExitCode); not untyped, not hang
    line = str(a["line"])
    assert line.startswith("statemorph: error: ") and "\n" not in line, line


@pytest.fixture(scope="module")
def through_the_cli(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("faults-cli")
    dirs = {case: str(build(root / case)) for case, build in CASES.items()}
    with ThreadPoolExecutor(2) as pool:
        done = pool.map(lambda d: _run("-m", "statemorph", "inspect", d), dirs.values())
        return dict(zip(dirs, done, strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_directory_through_the_cli(through_the_cli: dict[str, subprocess.CompletedProcess[str]],
                                           case: str) -> None:
    _one_typed_line(through_the_cli[case])
