"""Hostile Flink savepoint directories give one typed line, never a traceback or a hang.

Each case (:data:`faults.CASES`) runs in a subprocess with a timeout, through the Flink reader
(``python -m tests.fuzz.faults DIR``: every state read to the end) and through the CLI
(``python -m statemorph inspect DIR``). A FIFO that were opened would block, ``/dev/zero``
would never end and a 2^62 size would allocate: the timeout and the typed line catch all three.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .faults import CASES, FILES, INLINE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.fuzz
TIMEOUT = 120  # seconds; a clean read of these savepoints takes about one


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _one_typed_line(p: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("statemorph: error: "), p.stderr
    assert p.returncode in (2, 4), (p.returncode, p.stderr)  # USAGE / DAMAGED_SAVEPOINT (errors.ExitCode)
    return lines[0]


def test_the_clean_savepoints_read() -> None:
    for d in (FILES, INLINE):
        p = _run("-m", "tests.fuzz.faults", str(d))
        assert p.returncode == 0 and int(p.stdout.split()[0]) > 0, p.stderr


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_directory_through_the_reader(tmp_path: Path, case: str) -> None:
    d = CASES[case](tmp_path / "sp")
    _one_typed_line(_run("-m", "tests.fuzz.faults", str(d)))


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_directory_through_the_cli(tmp_path: Path, case: str) -> None:
    d = CASES[case](tmp_path / "sp")
    _one_typed_line(_run("-m", "statemorph", "inspect", str(d)))
