"""The Spark engine migrates a Flink savepoint by key-group ranges (several tasks per subtask
stream, each stream assembled from its parts on the executors) to the same bytes as the local
engine."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from statemorph import engine, serializers
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.state import ValueStateDescriptor

pytestmark = pytest.mark.spark
SAVEPOINTS = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints"
EVOLVED = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT,"
           " appVersion STRING, sessionId BIGINT>>")


def _files(root: Path) -> list[str]:
    """The state files' digests (a stream that outgrows inline storage gets a fresh random name)."""
    return sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()
                  if p.is_file() and p.name != "_metadata")


@pytest.mark.parametrize("case,tasks", [("kinds-hashmap-p2-files-snappy", 7), ("kinds-rocksdb-p1-files-mp256", 4),
                                        ("events-rocksdb-p2-files-snappy", 1), ("kinds-rocksdb-p2-rowkey", 3)])
def test_key_group_range_tasks_write_the_local_bytes(spark, tmp_path, case, tasks):
    spec = json.loads((SAVEPOINTS / case / "spec.json").read_text())
    new = serializers.RowDataSerializer(EVOLVED)
    states = [s for s in ("events", "ttl_events") if s in spec["states"]]
    descs = {spec["uid"]: [ValueStateDescriptor(s, new, ttl=s.startswith("ttl_")) for s in states]}
    src = SAVEPOINTS / case / "savepoint"
    a = engine.migrate_flink_savepoint(src, tmp_path / "local", descs)
    b = engine.migrate_flink_savepoint(src, tmp_path / "spark", descs, spark=spark, tasks=tasks)
    assert b.engine == "spark" and b.migrated == a.migrated and b.rewritten_streams == a.rewritten_streams
    assert _files(tmp_path / "spark") == _files(tmp_path / "local")
    assert not (tmp_path / "spark" / ".parts").exists()
    for state in states:
        assert engine.read_flink_state_table(tmp_path / "spark", spec["uid"], state).equals(
            engine.read_flink_state_table(tmp_path / "local", spec["uid"], state))
    assert FlinkSavepoint(tmp_path / "spark").operator(spec["uid"]).max_parallelism == spec["max_parallelism"]


_LEAN = """
import sys
from pathlib import Path

import statemorph.engine.spark_flink  # what a fresh Python worker imports for its first range task
from statemorph import engine, serializers
from statemorph.state import ValueStateDescriptor

src, dst, evolved = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
descs = {"events-state": [ValueStateDescriptor("events", serializers.RowDataSerializer(evolved))]}
engine.migrate_flink_savepoint(src, dst, descs)  # the range task's code path: read, migrate, encode
print(" ".join(sorted(m for m in ("pandas", "pyarrow.parquet", "pyarrow.compute", "statemorph.engine.bootstrap",
                                  "statemorph.engine.local", "statemorph.savepoint.parquet") if m in sys.modules)))
"""


def test_a_range_task_imports_only_its_runner(tmp_path):
    """Every fresh Spark Python worker imports the task module for its first task: it must not
    pull in the other runners, the Parquet form or pandas (about a second of each executor's
    first task, see benchmarks/RESULTS.md), neither at import nor while it migrates."""
    import subprocess
    import sys

    from processes import child_env

    src = SAVEPOINTS / "events-rocksdb-p2-files-snappy" / "savepoint"
    out = subprocess.run([sys.executable, "-c", _LEAN, str(src), str(tmp_path / "out"), EVOLVED], env=child_env(),
                         capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "", out.stdout
    assert (tmp_path / "out" / "_metadata").is_file()


def test_cli_task_bytes_cuts_key_groups_into_tasks(spark, tmp_path, monkeypatch):
    """``migrate --engine spark --task-bytes 256``: key groups stored in more than 256 bytes are cut
    into pieces (a cut task each, more migrate tasks than key groups, from Spark's status
    tracker); the state files are the local engine's with the same slices."""
    from statemorph.cli.main import main
    from statemorph.savepoint.flink import key_group_scan

    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 64)
    case = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256"
    spec = json.loads((case / "spec.json").read_text())
    schema = tmp_path / "new.toml"
    schema.write_text(f'[operators."{spec["uid"]}".states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    tracker = spark.sparkContext.statusTracker()
    before = {p: set(tracker.getJobIdsForGroup(f"statemorph-{p}")) for p in ("cut", "migrate")}
    assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(tmp_path / "spark"),
                 "--engine", "spark", "--task-bytes", "256", "-q"]) == 0
    tasks = {p: sum(tracker.getStageInfo(s).numTasks for j in set(tracker.getJobIdsForGroup(f"statemorph-{p}")) - ids
                    for s in list(tracker.getJobInfo(j).stageIds)) for p, ids in before.items()}
    sp = FlinkSavepoint(case / "savepoint")
    sizes = [e.end - e.offset for _, stream in sp.keyed_streams(sp.operator(spec["uid"])) for e in stream.extents]
    large = sum(n > 256 for n in sizes)
    assert large and tasks["cut"] == large
    assert tasks["migrate"] > len(sizes) and len(sizes) < spec["max_parallelism"]
    assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(tmp_path / "local"),
                 "-q"]) == 0
    assert _files(tmp_path / "spark") == _files(tmp_path / "local")
