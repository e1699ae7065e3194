"""Failing tests for bugs found by the fuzz / API-contract work in modules its author does not own.

Each test names the module, the input and the expected behaviour; they fail until the owner fixes
the bug (then they simply pass and stay as regression tests).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statemorph import serializers
from statemorph.state import RocksDBStateBackend, ValueStateDescriptor


def test_rocksdb_close_releases_the_database_lock(tmp_path: Path) -> None:
    """state/rocksdb.py: ``close()`` closes the main handle but not the column-family handles
    (``RocksDBStateTable.cf``), so rocksdict keeps the DB open and its LOCK held. Reopening the
    same path in the same process then fails with a bare ``builtins.Exception`` ("IO error: lock
    hold by current process ... LOCK: No locks available") - e.g. a second restore into
    ``db_path="db"``, or the design's contract run twice in one process."""
    db = tmp_path / "db"
    r = RocksDBStateBackend(serializers.StringSerializer(), db_path=db)
    events = r.get_state(ValueStateDescriptor("events", serializers.IntSerializer()))
    r.set_current_key("user-1")
    events.update(3)
    r.close()
    shutil.rmtree(db)
    r2 = RocksDBStateBackend(serializers.StringSerializer(), db_path=db)
    r2.close()


def test_rocksdb_relative_db_paths_in_different_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """state/rocksdb.py: RocksDB locks by the path string it is given, so two backends opened
    with ``db_path="db"`` from different working directories collide although they are different
    directories. Resolving ``db_path`` to an absolute path before opening avoids it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    r1 = RocksDBStateBackend(serializers.StringSerializer(), db_path="db")
    try:
        monkeypatch.chdir(tmp_path / "b")
        r2 = RocksDBStateBackend(serializers.StringSerializer(), db_path="db")
        r2.close()
    finally:
        r1.close()
