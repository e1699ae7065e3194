"""The Spark engine migrates a real Flink savepoint from S3 to S3 in place: the driver reads
``_metadata`` and the keyed-state headers (to plan) and nothing else, the Spark tasks read their
key-group ranges from the source objects and write the new state files under the destination
prefix, unchanged files are copied server-side, and ``_metadata`` is written last. The result
is the local engine's savepoint byte for byte and real Flink restores it; a run that fails
mid-way leaves no ``_metadata`` and no temporary prefix.

S3 is moto's server (a real S3 HTTP API on a local port, ``tests/s3_server.py``); Spark runs in
local mode. The driver's reads are recorded by wrapping the filesystem object the driver is
given (a public input of ``migrate_flink_savepoint``: a
:class:`~statemorph.savepoint.storage.Location`); the wrapper pickles to the plain filesystem, so
the executors use S3 unrecorded."""

from __future__ import annotations

import json
import operator
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from s3_server import s3_filesystem, tree, upload
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, reshape
from savepoint.flink.format_helpers import expected, hashable

from statemorph import engine, serializers
from statemorph.cli.main import main
from statemorph.engine.spark_flink import read_flink_state_df
from statemorph.savepoint.flink import FileHandle, FlinkSavepoint, RelativeFileHandle
from statemorph.savepoint.storage import SCRATCH, Location
from statemorph.state import ValueStateDescriptor

pytestmark = pytest.mark.spark
CASE = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy"
SRC = CASE / "savepoint"
EVOLVED = EVOLVED_EVENTS.replace('"', "")
DESCS = {"events-state": [ValueStateDescriptor("events", serializers.RowDataSerializer(EVOLVED))]}


@pytest.fixture()
def executor_env(spark: Any, s3_env: dict[str, str]) -> Iterator[None]:
    """The S3 variables on the executors too (what ``spark.executorEnv.*`` sets on a cluster):
    a URI opened from the environment carries its endpoint and region to the executors, and
    each executor takes the credentials from its own environment."""
    env = spark.sparkContext.environment
    saved = {k: env.get(k) for k in s3_env}
    env.update(s3_env)
    yield
    for k, v in saved.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v


class _RecordedFile:
    def __init__(self, f: Any, path: str, reads: list[tuple[str, int, int]]) -> None:
        self.f, self.path, self.reads = f, path, reads

    def read_at(self, n: int, offset: int) -> bytes:
        data = self.f.read_at(n, offset)
        self.reads.append((self.path, offset, len(data)))
        return data  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)


class DriverFS:
    """The real S3 filesystem as the driver uses it: every byte range read, object written and
    server-side copy is recorded. Pickled (to an executor) it becomes the plain filesystem."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self.reads: list[tuple[str, int, int]] = []
        self.streamed: list[str] = []
        self.writes: list[str] = []
        self.copies: list[tuple[str, str]] = []

    def open_input_file(self, path: str) -> _RecordedFile:
        return _RecordedFile(self.fs.open_input_file(path), path, self.reads)

    def open_input_stream(self, path: str) -> Any:
        self.streamed.append(path)
        return self.fs.open_input_stream(path)

    def open_output_stream(self, path: str) -> Any:
        self.writes.append(path)
        return self.fs.open_output_stream(path)

    def copy_file(self, src: str, dst: str) -> None:
        self.copies.append((src, dst))
        self.fs.copy_file(src, dst)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)

    def __reduce__(self) -> Any:
        return operator.getitem, ((self.fs,), 0)


def _header_ends(savepoint: Path) -> dict[str, int]:
    """Each state file's keyed-state header size: the bytes before its first key group."""
    sp = FlinkSavepoint(savepoint)
    out = {}
    for op in sp.operators:
        for _, stream in sp.keyed_streams(op):
            d = stream.handle.delegate
            if isinstance(d, (FileHandle, RelativeFileHandle)):
                out[sp.directory.relative_name(d)] = stream.header_end
    return out


def test_spark_tasks_read_and_write_s3_the_driver_only_plans(spark: Any, s3_env: dict[str, str], bucket: str,
                                                             tmp_path: Path) -> None:
    source = tmp_path / "sp"
    shutil.copytree(SRC, source)
    (source / "carried-unchanged").write_bytes(b"a file next to _metadata that the migration carries over\n")
    upload(source, f"s3://{bucket}/sp")
    driver = DriverFS(s3_filesystem(s3_env))
    src = Location(driver, f"{bucket}/sp", f"s3://{bucket}/sp")
    dst = Location(driver, f"{bucket}/sp2", f"s3://{bucket}/sp2")

    report = engine.migrate_flink_savepoint(src, dst, DESCS, spark=spark, tasks=4)
    local = engine.migrate_flink_savepoint(source, tmp_path / "local", DESCS)

    assert report.engine == "spark" and report.migrated == local.migrated and report.rows > 0
    assert report.source == f"s3://{bucket}/sp" and report.destination == f"s3://{bucket}/sp2"
    assert tree(f"s3://{bucket}/sp2") == tree(str(tmp_path / "local"))  # every file, _metadata too, byte for byte
    # the driver: _metadata whole, each state file's header and no byte past it
    headers = _header_ends(source)
    state_reads = [(p.rsplit("/", 1)[-1], off, n) for p, off, n in driver.reads if not p.endswith("/_metadata")]
    assert {name for name, _, _ in state_reads} == set(headers)
    assert all(off + n <= headers[name] for name, off, n in state_reads), state_reads
    assert driver.streamed == []
    # the driver wrote _metadata only (the new state files came from the tasks) and copied the
    # unchanged file server-side
    assert driver.writes == [f"{bucket}/sp2/_metadata"]
    assert driver.copies == [(f"{bucket}/sp/carried-unchanged", f"{bucket}/sp2/carried-unchanged")]
    assert not any(SCRATCH in rel for rel in tree(f"s3://{bucket}/sp2"))
    assert tree(f"s3://{bucket}/sp") == tree(str(source))  # the source is only read


def test_files_the_store_cannot_copy_are_streamed_by_tasks(spark: Any, s3_env: dict[str, str], bucket: str,
                                                           tmp_path: Path) -> None:
    """From a local savepoint to S3 no server-side copy exists: the unchanged file is streamed
    by a Spark task, not by the driver."""
    source = tmp_path / "sp"
    shutil.copytree(SRC, source)
    (source / "carried-unchanged").write_bytes(b"x" * 100_000)
    driver = DriverFS(s3_filesystem(s3_env))
    dst = Location(driver, f"{bucket}/sp2", f"s3://{bucket}/sp2")
    report = engine.migrate_flink_savepoint(source, dst, DESCS, spark=spark, tasks=2)
    engine.migrate_flink_savepoint(source, tmp_path / "local", DESCS)
    assert report.carried_files == 1
    assert tree(f"s3://{bucket}/sp2") == tree(str(tmp_path / "local"))
    assert driver.writes == [f"{bucket}/sp2/_metadata"] and driver.copies == [] and driver.reads == []


def _damage_last_key_group(savepoint: Path) -> None:
    """Overwrite the middle of the last key group of the second subtask's file (same size): the
    driver plans fine, the task reading that range fails."""
    sp = FlinkSavepoint(savepoint)
    op = sp.operator("events-state")
    _, stream = list(sp.keyed_streams(op))[1]
    name = sp.directory.relative_name(stream.handle.delegate)  # type: ignore[arg-type]
    last = stream.extents[-1]
    path = savepoint / name
    data = bytearray(path.read_bytes())
    mid = (last.offset + last.end) // 2
    data[mid - 8:mid + 8] = b"\xff" * 16
    path.write_bytes(bytes(data))


def test_a_failed_run_leaves_no_metadata_and_no_temporary_prefix(spark: Any, s3_env: dict[str, str], bucket: str,
                                                                 tmp_path: Path) -> None:
    """Three of the four key-group-range tasks write their parts under the temporary prefix, the
    fourth fails on its damaged key group: the bucket keeps object versions, so what the run wrote
    and then removed is visible afterwards."""
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"])
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    source = tmp_path / "sp"
    shutil.copytree(SRC, source)
    _damage_last_key_group(source)
    upload(source, f"s3://{bucket}/sp")
    fs = s3_filesystem(s3_env)
    src = Location(fs, f"{bucket}/sp", f"s3://{bucket}/sp")
    dst = Location(fs, f"{bucket}/sp2", f"s3://{bucket}/sp2")
    with pytest.raises(Exception, match="key group 127: corrupt Snappy-framed key group"):  # as Spark reports it
        engine.migrate_flink_savepoint(src, dst, DESCS, spark=spark, tasks=4)
    assert dst.files() == []  # no _metadata, no part under .statemorph-tmp, no state file
    written = {v["Key"] for v in client.list_object_versions(Bucket=bucket, Prefix="sp2/").get("Versions", [])}
    assert any(k.startswith(f"sp2/{SCRATCH}/") for k in written), written  # parts were there, and are gone
    assert "sp2/_metadata" not in written
    assert tree(f"s3://{bucket}/sp") == tree(str(source))


def test_a_task_error_is_one_typed_line_from_the_cli(spark: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A Spark task that refuses a damaged key group fails its job; the CLI prints the task's typed
    error as one line with its exit status (4: damaged savepoint), not Spark's traceback."""
    source = tmp_path / "sp"
    shutil.copytree(SRC, source)
    _damage_last_key_group(source)
    schema = tmp_path / "new.toml"
    schema.write_text(f'[operators.events-state.states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    status = main(["migrate", str(source), "--schema", str(schema), "--out", str(tmp_path / "out"),
                   "--engine", "spark"])
    err = capsys.readouterr().err
    assert status == 4, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[0].startswith("statemorph: error: ") and "key group 127: corrupt Snappy-framed" in lines[0]
    assert "Traceback" not in err and "py4j" not in err.lower()
    assert not (tmp_path / "out").exists()


@pytest.fixture()
def cli_result(spark: Any, s3_env: dict[str, str], bucket: str, executor_env: None, tmp_path: Path,
               capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, Any]]:
    """``statemorph migrate s3://... --engine spark --out s3://...`` in this process (the command
    uses the running session), the result downloaded."""
    upload(SRC, f"s3://{bucket}/sp")
    schema = tmp_path / "new.toml"
    schema.write_text(f'[operators.events-state.states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    status = main(["migrate", f"s3://{bucket}/sp", "--schema", str(schema), "--out", f"s3://{bucket}/sp2",
                   "--engine", "spark", "--json"])
    out = capsys.readouterr().out
    assert status == 0, out
    got = tmp_path / "got"
    got.mkdir()
    for rel, data in tree(f"s3://{bucket}/sp2").items():
        (got / rel).write_bytes(data)
    return got, json.loads(out)


def test_cli_migrates_s3_to_s3_with_spark(cli_result: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    got, doc = cli_result
    assert doc["engine"] == "spark" and doc["source"].startswith("s3://") and doc["destination"].endswith("/sp2")
    engine.migrate_flink_savepoint(SRC, tmp_path / "local", DESCS)
    assert tree(str(got)) == tree(str(tmp_path / "local"))


def test_cli_refuses_an_existing_s3_destination(spark: Any, s3_env: dict[str, str], bucket: str,
                                                executor_env: None, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Also on a cluster master: a Flink savepoint's URIs are no longer staged on the driver."""
    upload(SRC, f"s3://{bucket}/sp")
    upload(SRC, f"s3://{bucket}/taken")
    schema = tmp_path / "new.toml"
    schema.write_text(f'[operators.events-state.states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    status = main(["migrate", f"s3://{bucket}/sp", "--schema", str(schema), "--out", f"s3://{bucket}/taken",
                   "--engine", "spark", "--master", "spark://elsewhere:7077"])
    err = capsys.readouterr().err
    assert status == 2 and "already exists" in err and err.count("\n") == 1, err
    assert tree(f"s3://{bucket}/taken") == tree(str(SRC))


@pytest.mark.java
def test_s3_result_restores_in_real_flink(real_flink: ModuleType, cli_result: tuple[Path, dict[str, Any]]) -> None:
    got, _ = cli_result
    (result,) = real_flink.restore([(got, CASE / "spec.json")], events_type=EVOLVED_EVENTS)
    assert result.ok, f"Flink refused the migrated savepoint: {result.exception}: {result.message}"
    entries = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
    assert entries == {k: reshape(v, EVOLVED_EVENTS_FIELDS) if k[1] == "events" else v
                       for k, v in expected(CASE).items()}


def test_dataframe_tasks_read_their_ranges_from_s3(spark: Any, s3_env: dict[str, str], bucket: str) -> None:
    upload(SRC, f"s3://{bucket}/sp")
    driver = DriverFS(s3_filesystem(s3_env))
    df = read_flink_state_df(spark, Location(driver, f"{bucket}/sp", f"s3://{bucket}/sp"), "events-state", "events",
                             tasks=3)
    local = engine.read_flink_state_table(SRC, "events-state", "events")
    rows = sorted(df.collect(), key=lambda r: (r["key_group"], r["key"]))
    assert len(rows) == local.num_rows > 0
    want = sorted(zip(local.column("key_group").to_pylist(), local.column("key").to_pylist(),
                      local.column("value").to_pylist(), strict=True), key=lambda t: (t[0], t[1]))
    assert [(r["key_group"], r["key"], r["value"].asDict(recursive=True)) for r in rows] == want
    headers = _header_ends(SRC)
    state_reads = [(p.rsplit("/", 1)[-1], off, n) for p, off, n in driver.reads if not p.endswith("/_metadata")]
    assert all(off + n <= headers[name] for name, off, n in state_reads), state_reads
