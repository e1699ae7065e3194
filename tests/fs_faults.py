"""File-system faults for the write tests of every savepoint form (issue 16): a full file system, a
read-only mount, the checks that a failure is one typed line and leaves nothing behind, and the
drivers that kill or signal a writing child at a chosen point.

The fixtures mount real file systems, so they need root; without it they skip and say why. A test
module uses them by importing them (``from fs_faults import read_only_dir, tiny_fs``)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest


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


def digest_tree(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path``, by relative name (a source must not change)."""
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def kill_9_when(cmd: list[str], reached: Callable[[], bool], env: dict[str, str]) -> None:
    """Run ``cmd`` and SIGKILL it as soon as ``reached()`` holds (a file-system event of the run,
    polled, not a delay), or after it ended by itself."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        while p.poll() is None and not reached():
            time.sleep(0.002)  # polling for the event, not timing anything
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()


def signal_when_ready(cmd: list[str], ready: str, sig: int, env: dict[str, str],
                      part_way: Callable[[], bool]) -> tuple[int, str]:
    """Run ``cmd``, wait for the line ``ready`` on its stdout, check ``part_way()`` (the write has
    begun), send ``sig``; the child's exit status and stderr."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == ready
        assert part_way(), "the writer should be part way"
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err


def kill_points(data_file: str, metadata_file: str, dst: str = "dst") -> dict[str, Callable[[Path], bool]]:
    """The points of a run writing ``<parent>/<dst>`` at which a kill -9 test stops it, each a
    test of the parent directory: at start, destination claimed, temporary directory made, a data
    file (glob ``data_file``) open in it, its metadata file written, renamed into place."""

    def temp_dirs(parent: Path) -> list[Path]:
        return [p for p in parent.iterdir() if p.name.startswith(f".{dst}.statemorph-tmp-")]

    return {
        "at start": lambda parent: True,
        "claimed": lambda parent: (parent / f".{dst}.statemorph-claim").exists(),
        "temporary directory": lambda parent: bool(temp_dirs(parent)),
        "data file open": lambda parent: any(any(t.rglob(data_file)) for t in temp_dirs(parent)),
        "metadata written": lambda parent: any((t / metadata_file).exists() for t in temp_dirs(parent)),
        "renamed": lambda parent: (parent / dst).exists(),
    }
