"""kill -9 during ``python -m statemorph migrate`` (issue 16): whenever the run dies, the source is
intact, the destination is absent or complete, and a rerun cleans up what the dead run left and
succeeds. Kill points are file-system events of the run (claimed, temporary directory, part file
open, metadata written, destination renamed), not delays, so the test does not depend on speed;
a run that finishes before its kill point exercises the "complete" branch."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from processes import child_env

from statemorph import serializers as S
from statemorph.engine.local import write_state
from statemorph.savepoint import read_state_table, verify_savepoint

ROWS = 200_000
OLD = "ROW<id BIGINT, name STRING>"
NEW = "ROW<name STRING, id BIGINT, extra INT>"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A savepoint whose migration does real work for a while (bulk-encoded once per module)."""
    base = tmp_path_factory.mktemp("kill9")
    table = pa.table({"key": pa.array(range(ROWS), pa.int64()), "id": pa.array(range(ROWS), pa.int64()),
                      "name": pa.array([f"name-{i}" for i in range(ROWS)])})
    src = base / "src"
    write_state(src, table, name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD), value=["id", "name"])
    schema = base / "new.toml"
    schema.write_text(f"[states.events]\ntype = '''{NEW}'''\n", encoding="utf-8")
    return src, schema


def digest_tree(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def temp_dirs(parent: Path) -> list[Path]:
    return [p for p in parent.iterdir() if p.name.startswith(".dst.statemorph-tmp-")]


KILL_POINTS = {
    "at start": lambda parent: True,
    "claimed": lambda parent: (parent / ".dst.statemorph-claim").exists(),
    "temporary directory": lambda parent: bool(temp_dirs(parent)),
    "part file open": lambda parent: any(any(t.rglob("*.parquet")) for t in temp_dirs(parent)),
    "metadata written": lambda parent: any((t / "_metadata.json").exists() for t in temp_dirs(parent)),
    "renamed": lambda parent: (parent / "dst").exists(),
}


def migrate_cmd(src: Path, schema: Path, dst: Path) -> list[str]:
    return [sys.executable, "-m", "statemorph", "migrate", str(src), "--schema", str(schema), "--out", str(dst)]


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_leaves_the_source_intact_and_the_destination_absent_or_complete(big, tmp_path, point):
    src, schema = big
    before = digest_tree(src)
    dst = tmp_path / "dst"
    env = child_env()
    p = subprocess.Popen(migrate_cmd(src, schema, dst), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        reached = KILL_POINTS[point]
        while p.poll() is None and not reached(tmp_path):
            time.sleep(0.002)  # polling for the event, not timing anything
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert digest_tree(src) == before, "the source savepoint changed"
    if dst.exists():  # complete, or not there at all
        assert verify_savepoint(dst).state("events").rows == ROWS
        assert read_state_table(dst, "events").num_rows == ROWS
    finished = dst.exists()
    rerun = subprocess.run(migrate_cmd(src, schema, dst), capture_output=True, text=True, env=env, timeout=600)
    if finished:  # refused (never overwritten), but what the dead run left next to it is removed
        assert rerun.returncode == 2 and "already exists" in rerun.stderr, rerun.stderr
    else:
        assert rerun.returncode == 0, rerun.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]
    assert verify_savepoint(dst).state("events").rows == ROWS
    assert digest_tree(src) == before
