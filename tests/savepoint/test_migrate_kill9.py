"""kill -9 during ``python -m statemorph migrate`` (issue 16): whenever the run dies, the source is
intact, the destination is absent or complete, and a rerun cleans up what the dead run left and
succeeds. Kill points are file-system events of the run (claimed, temporary directory, part file
open, metadata written, destination renamed), not delays: the run stops itself where its point
first holds and is killed there (``fs_faults.kill_9_at``), so the test does not depend on speed,
and a run that ends without reaching its point fails the test instead of passing as "complete"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from fs_faults import digest_tree, kill_9_at, kill_points
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


POINTS = ("*.parquet", "_metadata.json", "dst")
KILL_POINTS = kill_points(*POINTS)


def migrate_cmd(src: Path, schema: Path, dst: Path) -> list[str]:
    return [sys.executable, "-m", "statemorph", "migrate", str(src), "--schema", str(schema), "--out", str(dst)]


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_leaves_the_source_intact_and_the_destination_absent_or_complete(big, tmp_path, point):
    src, schema = big
    before = digest_tree(src)
    dst = tmp_path / "dst"
    env = child_env()
    kill_9_at(migrate_cmd(src, schema, dst), point, tmp_path, POINTS, env)
    assert digest_tree(src) == before, "the source savepoint changed"
    if dst.exists():  # complete, or not there at all
        assert verify_savepoint(dst).state("events").rows == ROWS
        assert read_state_table(dst, "events").num_rows == ROWS
    finished = point == "renamed"  # killed at its point: the destination is there only once renamed
    assert dst.exists() == finished, point
    rerun = subprocess.run(migrate_cmd(src, schema, dst), capture_output=True, text=True, env=env, timeout=600)
    if finished:  # refused (never overwritten), but what the dead run left next to it is removed
        assert rerun.returncode == 2 and "already exists" in rerun.stderr, rerun.stderr
    else:
        assert rerun.returncode == 0, rerun.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]
    assert verify_savepoint(dst).state("events").rows == ROWS
    assert digest_tree(src) == before


def test_a_run_that_never_reaches_its_kill_point_fails_the_test(big, tmp_path):
    """The driver itself: a point that never holds (no data file matches) is a failure, not a
    run that "finished before its point"."""
    src, schema = big
    never = ("*.no-such-file", "_metadata.json", "dst")
    with pytest.raises(AssertionError, match="without reaching the kill point 'data file open'"):
        kill_9_at(migrate_cmd(src, schema, tmp_path / "dst"), "data file open", tmp_path, never, child_env())
    assert verify_savepoint(tmp_path / "dst").state("events").rows == ROWS  # it ran to the end
