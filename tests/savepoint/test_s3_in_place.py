"""A Flink savepoint read and written in place at ``s3://`` (no staging), against moto's S3 server:
the rewriter gives the local bytes whichever side is remote, and a remote state file gets the
checks of a local one (its real size equal to the size ``_metadata`` records and only a regular
file opened, both before a byte is read; reads bounded by that size)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from s3_server import s3_filesystem, tree, upload

from statemorph import engine, serializers
from statemorph.errors import FlinkSavepointError, SavepointPathError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.storage import Location
from statemorph.state import ValueStateDescriptor

SRC = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy" / "savepoint"
EVOLVED = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
           "appVersion STRING, sessionId BIGINT>>")
DESCS = {"events-state": [ValueStateDescriptor("events", serializers.RowDataSerializer(EVOLVED))]}
STATE_FILE = sorted(p.name for p in SRC.iterdir() if p.name != "_metadata")[0]


@pytest.mark.parametrize("sides", ["s3-to-s3", "s3-to-local", "local-to-s3"])
def test_the_local_engine_reads_and_writes_in_place(sides: str, bucket: str, tmp_path: Path) -> None:
    """With a file next to ``_metadata`` that is carried over: copied inside the store (s3 to s3)
    or streamed (across filesystems)."""
    source = tmp_path / "sp"
    shutil.copytree(SRC, source)
    (source / "carried-unchanged").write_bytes(bytes(range(256)) * 5000)
    upload(source, f"s3://{bucket}/sp")
    src = f"s3://{bucket}/sp" if sides.startswith("s3") else source
    dst = f"s3://{bucket}/sp2" if sides.endswith("s3") else tmp_path / "sp2"
    report = engine.migrate_flink_savepoint(src, dst, DESCS)
    local = engine.migrate_flink_savepoint(source, tmp_path / "local", DESCS)
    assert report.migrated == local.migrated and report.rows > 0 and report.carried_files == 1
    assert tree(str(dst)) == tree(str(tmp_path / "local"))


def test_an_existing_destination_prefix_is_refused(bucket: str) -> None:
    upload(SRC, f"s3://{bucket}/sp")
    upload(SRC, f"s3://{bucket}/taken")
    with pytest.raises(Exception, match="already exists"):
        engine.migrate_flink_savepoint(f"s3://{bucket}/sp", f"s3://{bucket}/taken", DESCS)
    assert tree(f"s3://{bucket}/taken") == tree(str(SRC))


def test_a_state_object_of_another_size_is_refused_before_reading(bucket: str, s3_env: dict[str, str]) -> None:
    upload(SRC, f"s3://{bucket}/sp")
    fs = s3_filesystem(s3_env)
    with fs.open_output_stream(f"{bucket}/sp/{STATE_FILE}") as out:
        out.write((SRC / STATE_FILE).read_bytes()[:-1])
    with pytest.raises(FlinkSavepointError, match=rf"{STATE_FILE}: size \d+ != \d+ recorded in _metadata"):
        list(FlinkSavepoint(f"s3://{bucket}/sp").iter_state_batches("events-state", "events"))
    with pytest.raises(FlinkSavepointError, match="recorded in _metadata"):
        engine.migrate_flink_savepoint(f"s3://{bucket}/sp", f"s3://{bucket}/sp2", DESCS)
    assert Location.open(f"s3://{bucket}/sp2").files() == []


def test_a_prefix_where_a_state_file_belongs_is_refused(bucket: str, s3_env: dict[str, str]) -> None:
    upload(SRC, f"s3://{bucket}/sp")
    fs = s3_filesystem(s3_env)
    fs.delete_file(f"{bucket}/sp/{STATE_FILE}")
    with fs.open_output_stream(f"{bucket}/sp/{STATE_FILE}/inside") as out:
        out.write(b"x")
    with pytest.raises(SavepointPathError, match=f"{STATE_FILE}: is not a regular file"):
        list(FlinkSavepoint(f"s3://{bucket}/sp").iter_state_batches("events-state", "events"))


def test_reads_outside_a_remote_file_are_refused(bucket: str) -> None:
    upload(SRC, f"s3://{bucket}/sp")
    sp = FlinkSavepoint(f"s3://{bucket}/sp")
    size = (SRC / STATE_FILE).stat().st_size
    with sp.directory.files.open(STATE_FILE, size=size) as f:
        assert f.read_range(size - 4, 4) == (SRC / STATE_FILE).read_bytes()[-4:]
        with pytest.raises(FlinkSavepointError, match=rf"needs bytes {size - 4}\.\.{size + 1} but the file has {size}"):
            f.read_range(size - 4, 5)
    with pytest.raises(FlinkSavepointError, match="is missing"):
        sp.directory.files.open("no-such-file", size=1)
