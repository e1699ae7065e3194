"""``storage.NewFile`` hands a growing local file's pages to the disk on a thread of its own: the
caller (the thread that keeps a stream's order) never waits on the disk's queue, except for the
one request still running when the next is due, and ``finish`` waits for the last before fsync."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from statemorph.errors import OutputError
from statemorph.savepoint import storage

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")


def test_writeback_is_asked_for_off_the_writing_thread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[tuple[int, int, int]] = []
    fadvise = os.posix_fadvise

    def traced(fd: int, offset: int, n: int, advice: int) -> None:
        asked.append((threading.get_ident(), offset, n))
        fadvise(fd, offset, n, advice)

    monkeypatch.setattr(os, "posix_fadvise", traced)
    monkeypatch.setattr(storage, "WRITEBACK_BYTES", 1000)
    f = storage.NewFile(tmp_path, "stream")
    f.write(b"h" * 10)
    write_at = f.writer_at()
    assert write_at is not None
    for i in range(5):
        write_at(10 + 600 * i, bytes([i]) * 600)
        f.advance(600)
    f.finish()
    assert (tmp_path / "stream").read_bytes() == b"h" * 10 + b"".join(bytes([i]) * 600 for i in range(5))
    assert [(o, n) for _, o, n in asked] == [(0, 1210), (1210, 1200)]
    assert threading.get_ident() not in {t for t, _, _ in asked}


def test_a_failed_writeback_is_an_output_error_of_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def failing(fd: int, offset: int, n: int, advice: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "posix_fadvise", failing)
    monkeypatch.setattr(storage, "WRITEBACK_BYTES", 100)
    f = storage.NewFile(tmp_path, "stream")
    f.write(b"x" * 200)
    with pytest.raises(OutputError, match="stream"):
        f.finish()


def test_an_aborted_file_waits_for_its_writeback_and_goes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(*args: Any) -> None:
        started.set()
        release.wait(5)

    monkeypatch.setattr(os, "posix_fadvise", slow)
    monkeypatch.setattr(storage, "WRITEBACK_BYTES", 100)
    f = storage.NewFile(tmp_path, "stream")
    f.write(b"x" * 200)
    assert started.wait(5)
    threading.Timer(0.05, release.set).start()
    f.abort()
    assert release.is_set() and not (tmp_path / "stream").exists()
