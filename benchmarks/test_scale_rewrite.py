"""Savepoint rewrite at scale: the Events savepoint migrated end to end (read Parquet, verify,
migrate, write Parquet, checksum, atomic commit), with the local engine and with Spark local[2].

Each engine runs twice: with the migration kernels, and with an identity function in place of the
migration (same pipeline, same files). A plain pyarrow read-and-write of the same files is the
floor for the local engine. Peak memory is measured in fresh subprocesses at two entry counts.

Size: ``STATEMORPH_SCALE_N`` entries (default 1,000,000); ``statemorph bench --full`` sets it to
10,000,000. Spark cases are skipped when pyspark or java is missing. Rounds are few on purpose:
one round of 10M entries takes tens of seconds.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pyarrow.parquet as pq
import pytest

from statemorph import serializers as S
from statemorph.cli.demo import NEW_TYPE, OLD_TYPE, events_table
from statemorph.engine import IdentityTransform, migrate_savepoint, write_state
from statemorph.state import ValueStateDescriptor

from .conftest import record

SCALE_N = int(os.environ.get("STATEMORPH_SCALE_N", "1000000"))
ROUNDS = int(os.environ.get("STATEMORPH_SCALE_ROUNDS", "2"))
CHUNK = 1_000_000


def _build(path: str, n: int) -> str:
    """The v1 Events savepoint with ``n`` entries, generated and encoded chunk by chunk."""
    def batches() -> Any:
        for start in range(0, n, CHUNK):
            t = events_table(min(CHUNK, n - start), seed=start)
            # distinct keys per chunk: events_table numbers events from 1
            yield from t.set_column(0, "key", pa_add(t.column("key"), start * 7919)).to_batches(65536)

    write_state(path, batches(), name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD_TYPE), max_parallelism=128)
    return path


def pa_add(col: Any, offset: int) -> Any:
    import pyarrow.compute as pc

    return pc.add(col, offset)


@pytest.fixture(scope="module")
def scale_sp(tmp_path_factory: Any) -> str:
    return _build(str(tmp_path_factory.mktemp("scale") / "events-v1"), SCALE_N)


def _descs() -> list[Any]:
    return [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))]


def _identity(plan: Any) -> IdentityTransform:
    return IdentityTransform()


def _run(benchmark: Any, fn: Any, dst: str, warmup: int = 0) -> None:
    def setup() -> None:
        shutil.rmtree(dst, ignore_errors=True)

    benchmark.pedantic(fn, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=warmup)
    shutil.rmtree(dst, ignore_errors=True)


def test_scale_pyarrow_read_write(benchmark: Any, scale_sp: str, tmp_path: Any) -> None:
    """Floor: stream the same Parquet files through pyarrow (read batches → write zstd), nothing else."""
    files = sorted(glob.glob(os.path.join(scale_sp, "state-*", "*.parquet")))
    dst = str(tmp_path / "plain")

    def rw() -> None:
        os.makedirs(dst)
        for i, f in enumerate(files):
            pf = pq.ParquetFile(f)
            with pq.ParquetWriter(os.path.join(dst, f"part-{i:05d}.parquet"), pf.schema_arrow,
                                  compression="zstd") as w:
                for b in pf.iter_batches(65536):
                    w.write_batch(b)

    _run(benchmark, rw, dst)
    record("scale: pyarrow read+write", benchmark, SCALE_N)


def test_scale_local_identity(benchmark: Any, scale_sp: str, tmp_path: Any) -> None:
    dst = str(tmp_path / "ident")
    _run(benchmark, lambda: migrate_savepoint(scale_sp, dst, _descs(), transform=_identity), dst)
    record("scale: local rewrite, identity", benchmark, SCALE_N)


def test_scale_local_migrate(benchmark: Any, scale_sp: str, tmp_path: Any) -> None:
    dst = str(tmp_path / "mig")
    _run(benchmark, lambda: migrate_savepoint(scale_sp, dst, _descs(), threads=2), dst)
    record("scale: local rewrite, migrate", benchmark, SCALE_N)


@pytest.fixture(scope="module")
def spark() -> Any:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs java")
    from statemorph.engine.spark import session

    s = session("local[2]", conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"})
    yield s
    s.stop()


def test_scale_spark_identity(benchmark: Any, spark: Any, scale_sp: str, tmp_path: Any) -> None:
    from statemorph.engine.spark import migrate_savepoint as spark_migrate

    dst = str(tmp_path / "sident")
    # one warm-up round: the first Spark job of a session pays for JIT and Python worker start-up
    _run(benchmark, lambda: spark_migrate(spark, scale_sp, dst, _descs(), transform=_identity), dst, warmup=1)
    record("scale: spark local[2] rewrite, identity", benchmark, SCALE_N)


def test_scale_spark_migrate(benchmark: Any, spark: Any, scale_sp: str, tmp_path: Any) -> None:
    from statemorph.engine.spark import migrate_savepoint as spark_migrate

    dst = str(tmp_path / "smig")
    _run(benchmark, lambda: spark_migrate(spark, scale_sp, dst, _descs()), dst, warmup=1)
    record("scale: spark local[2] rewrite, migrate", benchmark, SCALE_N)


_PEAK = """
import json, resource, sys
from statemorph import serializers as S
from statemorph.engine import migrate_savepoint
from statemorph.cli.demo import NEW_TYPE
from statemorph.state import ValueStateDescriptor
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
migrate_savepoint(sys.argv[1], sys.argv[2], [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))])
print(json.dumps({"before_kib": base, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _peak_rss_mib(src: str, dst: str) -> float:
    out = subprocess.run([sys.executable, "-c", _PEAK, src, dst], check=True, capture_output=True, text=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_kib"]) / 1024


def test_scale_local_peak_memory(benchmark: Any, scale_sp: str, tmp_path: Any) -> None:
    """Peak RSS of a fresh process migrating N and 2N entries: bounded memory means (nearly) equal peaks."""
    double = _build(str(tmp_path / "double"), 2 * SCALE_N)
    peaks = {}
    for label, src in (("n", scale_sp), ("2n", double)):
        dst = str(tmp_path / f"peak-{label}")
        peaks[label] = _peak_rss_mib(src, dst)
        shutil.rmtree(dst, ignore_errors=True)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update(peak_rss_mib_n=peaks["n"], peak_rss_mib_2n=peaks["2n"])
    print(f"\npeak RSS: {SCALE_N:,} entries {peaks['n']:.0f} MiB, {2 * SCALE_N:,} entries {peaks['2n']:.0f} MiB")
    # not a timing: the memory bound is a correctness property of the streaming design
    assert peaks["2n"] < peaks["n"] * 1.25 + 64
