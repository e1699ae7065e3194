"""File-system faults for the write tests of every savepoint form (issue 16): a full file system, a
read-only mount, and the checks that a failure is one typed line and leaves nothing behind.

The fixtures mount real file systems, so they need root; without it they skip and say why. A test
module uses them by importing them (``from fs_faults import read_only_dir, tiny_fs``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

#: the tests/ directory: a child Python that imports a test module needs it on its path too
TESTS = Path(__file__).resolve().parent


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def tiny_fs(tmp_path):
    """A 1 MiB tmpfs (ENOSPC after 1 MiB)."""
    d = tmp_path / "tiny"
    d.mkdir()
    if os.geteuid() != 0 or not _mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)]):
        pytest.skip("mounting a tmpfs needs root")
    yield d
    subprocess.run(["umount", str(d)], check=True)


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only bind mount of an empty directory (EROFS)."""
    real, ro = tmp_path / "rw", tmp_path / "ro"
    real.mkdir()
    ro.mkdir()
    if os.geteuid() != 0 or not _mount(["--bind", str(real), str(ro)]):
        pytest.skip("bind mounts need root")
    if not _mount(["-o", "remount,ro,bind", str(ro)]):
        subprocess.run(["umount", str(ro)], check=True)
        pytest.skip("read-only remount not permitted")
    yield ro
    subprocess.run(["umount", str(ro)], check=True)


def one_error_line(p: subprocess.CompletedProcess[str], status: int, pattern: str) -> None:
    """The command failed with ``status`` and said so in one ``statemorph: error:`` line matching
    ``pattern``, without a traceback."""
    assert p.returncode == status, p.stderr
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("statemorph: error:")]
    assert len(errors) == 1 and re.search(pattern, errors[0]), p.stderr


def leftovers(parent: Path) -> list[str]:
    """What statemorph writers keep next to a destination (temporary directories, claims)."""
    return sorted(p.name for p in parent.iterdir() if "statemorph-" in p.name)
