"""The assembly phase of the Spark engine's Flink rewrite (a task per part, copying it into its
place in the state file the driver created with the header) holds a bounded piece of a part at a
time, not a whole part: a part is a task's share of a subtask file, gigabytes at scale. Run in
this process through a stand-in for Spark's ``parallelize(...).map(...).collect()``, so the
reads can be watched; a truncated part is a typed error naming it, refused before it is read."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from statemorph import engine, serializers
from statemorph.engine import spark_flink
from statemorph.errors import FlinkSavepointError
from statemorph.savepoint.storage import open_written
from statemorph.state import ValueStateDescriptor

SAVEPOINTS = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints"
EVOLVED = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT,"
           " appVersion STRING, sessionId BIGINT>>")
SRC = SAVEPOINTS / "events-rocksdb-p2-files-snappy" / "savepoint"
DESCS = {"events-state": [ValueStateDescriptor("events", serializers.RowDataSerializer(EVOLVED))]}


class _Rdd:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def map(self, fn: Any) -> _Rdd:
        return _Rdd([fn(x) for x in self.items])

    def collect(self) -> list[Any]:
        return self.items


class _Context:
    defaultParallelism = 1

    def __init__(self, before_assembly: Any = None) -> None:
        self.calls = 0
        self.before_assembly = before_assembly
        self.properties: dict[str, str | None] = {}

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802 (Spark's name)
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802 (Spark's name)
        self.properties[key] = value

    def parallelize(self, items: list[Any], slices: int) -> _Rdd:
        self.calls += 1
        if self.calls == 2 and self.before_assembly is not None:
            self.before_assembly()
        return _Rdd(list(items))


class _Spark:
    def __init__(self, context: _Context) -> None:
        self.sparkContext = context


class _Watched:
    """A part opened by the assembly, its read sizes recorded."""

    def __init__(self, f: Any, sizes: list[int]) -> None:
        self.f, self.sizes = f, sizes

    def read_range(self, offset: int, n: int, what: str = "bytes") -> bytes:
        data = self.f.read_range(offset, n, what)
        self.sizes.append(len(data))
        return data  # type: ignore[no-any-return]

    def __enter__(self) -> _Watched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


def _digests(root: Path) -> list[str]:
    return sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()
                  if p.is_file() and p.name != "_metadata")


def test_assembly_holds_a_bounded_piece_of_a_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part is copied into its place in the state file :data:`~spark_flink.PLACE_BYTES` at a
    time (here 1 KiB): never the part at once."""
    reads: dict[str, list[int]] = {}

    def watched_open(target: Any, rel: str, size: int, damaged: Any) -> Any:
        return _Watched(open_written(target, rel, size, damaged), reads.setdefault(f"{target}/{rel}", []))

    monkeypatch.setattr(spark_flink, "open_written", watched_open)
    monkeypatch.setattr(spark_flink, "PLACE_BYTES", 1024)
    local = engine.migrate_flink_savepoint(SRC, tmp_path / "local", DESCS)
    split = engine.migrate_flink_savepoint(SRC, tmp_path / "split", DESCS, spark=_Spark(_Context()), tasks=1)
    assert split.migrated == local.migrated and _digests(tmp_path / "split") == _digests(tmp_path / "local")
    assert len(reads) == 2  # one part per subtask stream (tasks=1)
    for path, sizes in reads.items():
        assert len(sizes) > 4 and max(sizes) == 1024, path


def test_a_truncated_part_is_a_typed_error(tmp_path: Path) -> None:
    def truncate() -> None:
        part = next(tmp_path.rglob(".parts/*"))
        part.write_bytes(part.read_bytes()[:-10])

    with pytest.raises(FlinkSavepointError, match=r"size \d+ != \d+ recorded in the task that wrote it"):
        engine.migrate_flink_savepoint(SRC, tmp_path / "split", DESCS, spark=_Spark(_Context(truncate)), tasks=1)
    assert not (tmp_path / "split").exists()
