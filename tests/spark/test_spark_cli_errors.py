"""``statemorph migrate --engine spark`` failing, as a user's script meets it: the exit status of
the one table (``statemorph.errors.ExitCode``) and, under ``-q``, stderr exactly one
``statemorph: error:`` line: no log4j lines, no executor ``ERROR`` log, no worker traceback, no
Java stack. Each case starts a Spark JVM in its own process (about 20 s or more each): kept few."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from processes import child_env

from statemorph import serializers as S
from statemorph.engine.keys import key_groups
from statemorph.errors import ExitCode
from statemorph.savepoint import METADATA_FILE, SavepointWriter

pytestmark = pytest.mark.spark

OLD = "ROW<id BIGINT, name STRING>"
NEW = "ROW<id BIGINT, name STRING, score INT>"


@pytest.fixture(autouse=True)
def _needs_java():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")


def savepoint(path: Path, *, values: list[bytes] | None = None) -> Path:
    """A RowData value state ``v`` of 20 BIGINT keys in one part file (``values`` replace its bytes)."""
    ks, vs = S.LongSerializer(), S.RowDataSerializer(OLD)
    keys = list(range(20))
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks) as w:
        w.write_state("v", "value", pa.table({
            "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
            "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
            "namespace": pa.array([b"\x00"] * len(keys), pa.binary()),
            "value": pa.array(values or [vs.to_bytes((k, f"n{k}")) for k in keys], pa.binary())}),
            value_serializer=vs)
    return path


def migrate(sp: Path, tmp_path: Path, *extra: str, master: str = "local[1]") -> subprocess.CompletedProcess[str]:
    schema = tmp_path / "new.toml"
    schema.write_text(f"[states.v]\ntype = '{NEW}'\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "statemorph", "migrate", str(sp), "--schema", str(schema),
                           "--out", str(tmp_path / "out"), "--engine", "spark", "--master", master, *extra],
                          env=child_env(PYSPARK_PYTHON=sys.executable), capture_output=True, text=True,
                          check=False, cwd=tmp_path, timeout=900)


def only_error_line(done: subprocess.CompletedProcess[str], status: int, *needles: str) -> str:
    assert done.returncode == status, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("statemorph: error: "), done.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def spark_logs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("statemorph-spark-*.log")}


def test_a_page_checksum_failure_in_a_task_is_damage_as_with_the_local_engine(tmp_path):
    """The sha256 in the metadata recomputed after the flip (so the driver's check passes): Spark's
    Parquet reader finds the page CRC mismatch inside a task. Status 4 as the local engine."""
    sp = savepoint(tmp_path / "sp")
    meta = json.loads((sp / METADATA_FILE).read_text())
    entry = meta["states"][0]["files"][0]
    part = sp / entry["path"]
    footer = pq.ParquetFile(part).metadata
    column = footer.row_group(0).column(footer.num_columns - 1)  # the value column
    end = (column.dictionary_page_offset or column.data_page_offset) + column.total_compressed_size
    data = bytearray(part.read_bytes())
    data[end - 2] ^= 0x01  # inside the last page's payload
    part.write_bytes(bytes(data))
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    (sp / METADATA_FILE).write_text(json.dumps(meta))
    logs = spark_logs()
    line = only_error_line(migrate(sp, tmp_path, "-q"), ExitCode.DAMAGED_SAVEPOINT, "cannot be read", "CRC")
    assert entry["path"] in line and "in a Spark task" in line
    assert spark_logs() == logs  # the JVM's log of a run that failed for a known reason is removed
    assert not (tmp_path / "out").exists()


def test_a_typed_error_in_a_task_is_its_line_without_the_executor_log(tmp_path):
    """A value the kernel cannot read, raised in a Python worker: data error (5), and none of the
    executor's ERROR log or the worker's traceback that Spark prints on the way."""
    sp = savepoint(tmp_path / "sp", values=[b"\x00\x01"] * 20)  # truncated RowData values
    done = migrate(sp, tmp_path, "--json")
    only_error_line(done, ExitCode.DATA_ERROR, "in a Spark task")
    assert json.loads(done.stdout)["exit_status"] == ExitCode.DATA_ERROR


def test_a_bad_master_is_an_engine_error_on_one_line(tmp_path):
    """Spark refuses the master before a job runs: the engine's status (8), the JVM's own reason,
    no Java stack, no Python traceback; the line names the log, which is kept."""
    sp = savepoint(tmp_path / "sp")
    line = only_error_line(migrate(sp, tmp_path, "-q", master="bogus://nowhere"), ExitCode.ENGINE_ERROR,
                           "Spark did not start (--master bogus://nowhere)", "Master must")
    log = Path(line.rsplit("Spark's log: ", 1)[1])
    assert "Exception" in log.read_text()
    log.unlink()
