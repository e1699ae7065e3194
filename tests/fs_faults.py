"""File-system faults for the write tests of every savepoint form (issue 16): a full file system, a
read-only mount, the checks that a failure is one typed line and leaves nothing behind, and the
drivers that kill or signal a writing child at a chosen point.

The fixtures mount real file systems, so they need root; without it they skip and say why. A test
module uses them by importing them (``from fs_faults import read_only_dir, tiny_fs``)."""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
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


FS_EVENTS = frozenset({"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.link",
                       "os.symlink", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree", "shutil.copyfile",
                       "fcntl.flock", "fcntl.lockf"})
"""Audit events of a change to the file system, raised just *before* the change is made."""

_CHILD = """
import runpy, sys, fs_faults
fs_faults.stop_child_at(*sys.argv[1:7])
sys.argv = ["statemorph", *sys.argv[7:]]
runpy.run_module("statemorph", run_name="__main__", alter_sys=True)
"""


def stop_child_at(point: str, parent: str, data_file: str, metadata_file: str, dst: str, marker: str) -> None:
    """In the child of :func:`kill_9_at`: stop this process (SIGSTOP, every thread) at the first
    moment the kill point ``point`` holds, after writing ``point`` to ``marker``.

    The point is tested before every file-system change the interpreter makes (an audit hook:
    nothing can happen between the point and the next Python-level change unseen), every
    millisecond in a thread (for what pyarrow's C++ writes), and at exit."""
    reached, where = kill_points(data_file, metadata_file, dst)[point], Path(parent)
    lock, done = threading.Lock(), []

    def check(*_: object) -> None:
        if done or not lock.acquire(blocking=False):  # also: the check's own listing of ``where``
            return
        try:
            if not done and reached(where):
                done.append(point)
                Path(marker).write_text(point, encoding="utf-8")
                os.kill(os.getpid(), signal.SIGSTOP)
        finally:
            lock.release()

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event in FS_EVENTS:
            check()

    def poll() -> None:
        while not done:
            check()
            time.sleep(0.001)

    sys.addaudithook(audit)
    threading.Thread(target=poll, daemon=True).start()
    atexit.register(check)


def kill_9_at(cmd: list[str], point: str, parent: Path, points: tuple[str, str, str], env: dict[str, str]) -> None:
    """Run ``cmd`` (``python -m statemorph ...``), stopped by itself at kill point ``point`` of
    :func:`kill_points` (``points`` are that function's arguments; the point is a test of
    ``parent``), and SIGKILL it there. Fails when the run ended without reaching the point: a
    missed point must not pass as the "finished" branch of a test."""
    assert cmd[:3] == [sys.executable, "-m", "statemorph"], cmd
    with tempfile.TemporaryDirectory(prefix="statemorph-kill-point-") as d:  # outside ``parent``
        marker = Path(d) / "reached"
        p = subprocess.Popen([sys.executable, "-c", _CHILD, point, str(parent), *points, str(marker), *cmd[3:]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            state = os.waitid(os.P_PID, p.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)  # stopped, or ended
            assert state is not None and state.si_code == os.CLD_STOPPED, (
                f"the run ended (exit status {p.wait()}) without reaching the kill point {point!r}: "
                f"{p.stderr.read().decode(errors='replace')[-2000:] if p.stderr else ''}")
            assert marker.read_text(encoding="utf-8") == point, "stopped, but not by the kill point"
            assert kill_points(*points)[point](parent), f"{point!r} no longer holds at the kill"
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stderr is not None:
                p.stderr.close()


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
