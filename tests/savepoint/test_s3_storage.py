"""Savepoints on ``s3://`` against a real S3-compatible server started here (moto's server, an HTTP
S3 API in a thread of this process): the ``statemorph`` command reads and writes both savepoint
forms at bucket URIs with credentials and endpoint from the standard AWS variables, the result is
the one a local run gives, and the write protocol (metadata last, nothing left after a failed
upload, an existing prefix refused) holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from processes import child_env
from s3_server import tree, upload

from statemorph import serializers as S
from statemorph.engine import read_state_table, write_state
from statemorph.errors import OutputError, UnsafeFileError
from statemorph.savepoint.storage import Location, local_destination, local_source, publish

ROOT = Path(__file__).resolve().parents[2]
FLINK_SP = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy" / "savepoint"
EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
           "appVersion STRING, sessionId BIGINT>>")
STATEMORPH = str(Path(sys.executable).with_name("statemorph"))


def statemorph(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STATEMORPH, *argv], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=300)


def schema_file(tmp_path: Path, section: str) -> str:
    p = tmp_path / "new.toml"
    p.write_text(f'[{section}]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    return str(p)


@pytest.fixture()
def parquet_savepoint(tmp_path: Path) -> Path:
    old = S.RowDataSerializer(EVENTS)
    keys = list(range(40))
    table = pa.table({"key": keys, "eventId": [k * 10 for k in keys],
                      "metadata": [{"userId": k, "timestamp": 1_700_000_000_000 + k, "deviceType": "phone"}
                                   for k in keys]})
    return write_state(tmp_path / "sp", table, name="events", key_serializer=S.LongSerializer(),
                       value_serializer=old, value=["eventId", "metadata"])


def test_migrate_parquet_form_s3_to_s3(parquet_savepoint: Path, bucket: str, tmp_path: Path) -> None:
    upload(parquet_savepoint, f"s3://{bucket}/sp")
    schema = schema_file(tmp_path, "states.events")
    proc = statemorph("migrate", f"s3://{bucket}/sp", "--schema", schema, "--out", f"s3://{bucket}/sp2", "--json",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["source"] == f"s3://{bucket}/sp" and doc["destination"] == f"s3://{bucket}/sp2"
    assert "statemorph-" not in proc.stdout  # no local staging path leaks into what is printed
    local = statemorph("migrate", str(parquet_savepoint), "--schema", schema, "--out", str(tmp_path / "local2"),
                       cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    with local_source(f"s3://{bucket}/sp2") as got:
        assert read_state_table(got, "events").equals(read_state_table(tmp_path / "local2", "events"))
    inspected = statemorph("inspect", f"s3://{bucket}/sp2", "--json", cwd=tmp_path)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["states"][0]["value_type"].count("`location` STRING") == 1
    # the source prefix is untouched
    assert tree(f"s3://{bucket}/sp") == tree(str(parquet_savepoint))


def test_migrate_flink_savepoint_s3_to_s3(bucket: str, tmp_path: Path) -> None:
    upload(FLINK_SP, f"s3://{bucket}/flink/sp")
    schema = schema_file(tmp_path, "operators.events-state.states.events")
    proc = statemorph("migrate", f"s3://{bucket}/flink/sp", "--schema", schema, "--out", f"s3://{bucket}/flink/v2",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"s3://{bucket}/flink/v2" in proc.stdout
    local = statemorph("migrate", str(FLINK_SP), "--schema", schema, "--out", str(tmp_path / "v2"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert tree(f"s3://{bucket}/flink/v2") == tree(str(tmp_path / "v2"))


def test_existing_destination_prefix_is_refused(parquet_savepoint: Path, bucket: str, tmp_path: Path) -> None:
    upload(parquet_savepoint, f"s3://{bucket}/sp")
    upload(parquet_savepoint, f"s3://{bucket}/taken")
    before = tree(f"s3://{bucket}/taken")
    proc = statemorph("migrate", f"s3://{bucket}/sp", "--schema", schema_file(tmp_path, "states.events"),
                      "--out", f"s3://{bucket}/taken", cwd=tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr and proc.stderr.count("\n") == 1
    assert tree(f"s3://{bucket}/taken") == before


def test_missing_source_prefix(bucket: str, tmp_path: Path) -> None:
    proc = statemorph("inspect", f"s3://{bucket}/nothing-here", cwd=tmp_path)
    assert proc.returncode == 2 and f"s3://{bucket}/nothing-here" in proc.stderr


class RecordingFS:
    """The real S3 filesystem, with the order of its uploads recorded and, from upload number
    ``fail_at`` on, a failure like a network error (fault injection over the real server)."""

    def __init__(self, fs: Any, fail_at: int | None = None) -> None:
        self.fs, self.fail_at, self.opened = fs, fail_at, []

    def open_output_stream(self, path: str) -> Any:
        if self.fail_at is not None and len(self.opened) >= self.fail_at:
            raise OSError(f"injected network failure writing {path}")
        self.opened.append(path)
        return self.fs.open_output_stream(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)


@pytest.mark.parametrize("form", ["parquet", "flink"])
def test_metadata_is_published_last(form: str, parquet_savepoint: Path, bucket: str) -> None:
    source = parquet_savepoint if form == "parquet" else FLINK_SP
    loc = Location.open(f"s3://{bucket}/{form}")
    recording = RecordingFS(loc.fs)
    publish(source, Location(recording, loc.path, loc.uri))
    names = [p[len(loc.path) + 1:] for p in recording.opened]
    marker = "_metadata.json" if form == "parquet" else "_metadata"
    assert names[-1] == marker and names.count(marker) == 1 and len(names) > 1
    assert tree(loc.uri) == tree(str(source))


def test_failed_upload_leaves_nothing(parquet_savepoint: Path, bucket: str) -> None:
    loc = Location.open(f"s3://{bucket}/broken")
    files = [p for p in parquet_savepoint.rglob("*") if p.is_file()]
    recording = RecordingFS(loc.fs, fail_at=len(files) - 1)  # everything but the metadata goes up, then a failure
    with pytest.raises(OutputError, match="injected network failure"):
        publish(parquet_savepoint, Location(recording, loc.path, loc.uri))
    assert len(recording.opened) == len(files) - 1
    assert loc.files() == []


def test_unsafe_object_key_is_refused(bucket: str, s3_env: dict[str, str]) -> None:
    """An object key with ``..`` components (any S3 client can write one) never lands outside the
    local copy."""
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"])
    client.put_object(Bucket=bucket, Key="evil/_metadata.json", Body=b"{}")
    client.put_object(Bucket=bucket, Key="evil/state/../../../escaped", Body=b"x")
    with pytest.raises(UnsafeFileError, match="outside the savepoint"):
        with local_source(f"s3://{bucket}/evil"):
            pass


def test_a_failed_run_publishes_nothing(parquet_savepoint: Path, bucket: str) -> None:
    """The verb fails after writing its local result: nothing reaches the destination prefix."""
    with pytest.raises(RuntimeError, match="the verb failed"):
        with local_destination(f"s3://{bucket}/never") as local:
            shutil.copytree(parquet_savepoint, local)
            raise RuntimeError("the verb failed")
    assert Location.open(f"s3://{bucket}/never").files() == []
    with local_destination(f"s3://{bucket}/done") as local:
        shutil.copytree(parquet_savepoint, local)
    assert tree(f"s3://{bucket}/done") == tree(str(parquet_savepoint))
