"""The Parquet form on Spark: savepoint rewrites, the State Processor read path and bootstrap.

Why Spark: a savepoint's states are Parquet datasets of Flink's bytes, so a rewrite is read →
kernel → write, partition-parallel, over as many executors as the data needs. The driver decides
everything first from the metadata alone (:func:`statemorph.engine.plan_rewrite`: which states to
copy, which to migrate, which are incompatible), so an incompatible state stops the job before any
task runs; the executors run the same batch transforms as the local engine (pickled as snapshot
bytes, not as Python objects); the driver then adopts the task output files into a savepoint
written atomically (temporary directory, fsync, rename).

Paths are local or shared-filesystem paths (NFS, a mounted bucket) that the driver and every
executor see under the same name. The public entry points (either format) are in
:mod:`statemorph.engine.spark`.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..savepoint.parquet.reader import read_metadata, state_files
from ..savepoint.parquet.writer import SavepointWriter, StateWriter
from .batches import ColumnMigrator, StateDecoder, StateEncoder
from .local import RewriteReport, TransformFactory, add_planned_state, copy_state, open_writer
from .plan import MIGRATE, StatePlan, plan_rewrite

PARQUET_COMPRESSION = "zstd"
"""The savepoint writer's Parquet compression, so Spark-written files match local ones."""
PAGE_CHECKSUMS_WRITE = {"parquet.page.write-checksum.enabled": "true"}
PAGE_CHECKSUMS_VERIFY = {"parquet.page.verify-checksum.enabled": "true"}
"""Parquet page CRCs: written by Spark tasks as by the local writer, and verified when Spark reads
a savepoint's files (Hadoop options passed per read / write)."""


def spark_schema(schema: pa.Schema) -> Any:
    """``schema`` as a Spark schema."""
    # pyspark is an optional dependency (the spark extra): imported where it is used
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """``t`` as Spark's Arrow bridge takes it: timestamps in microseconds only (TIMESTAMP(3) and
    TIMESTAMP_LTZ(3) decode to milliseconds, e.g. the proctime column of Flink SQL state)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", t.tz)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_spark_arrow_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(_spark_arrow_type(t.key_type), t.item_field.with_type(_spark_arrow_type(t.item_type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field.with_type(_spark_arrow_type(t.value_type))
        return pa.list_(item) if pa.types.is_list(t) else pa.large_list(item)
    return t


class _SparkBatches:
    """The decoder's batches cast to :func:`_spark_arrow_type` (a safe cast: a timestamp with
    nanoseconds Spark cannot hold raises rather than being truncated)."""

    def __init__(self, fn: Any, schema: pa.Schema) -> None:
        self.fn, self.schema = fn, schema

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in self.fn(batches):
            yield b.cast(self.schema)


def _write_and_adopt(df: Any, w: SavepointWriter, sw: StateWriter) -> int:
    """Let Spark write ``df`` as Parquet into the savepoint's temporary directory, then adopt the
    part files (renamed, checksummed) into the state. Returns the number of rows."""
    staging = w.temp_dir / "_spark" / sw.meta.directory
    df.write.option("compression", PARQUET_COMPRESSION).options(**PAGE_CHECKSUMS_WRITE).parquet(str(staging))
    rows = 0
    for part in sorted(Path(staging).glob("part-*.parquet")):
        rows += sw.add_file(part, move=True).rows
    shutil.rmtree(w.temp_dir / "_spark", ignore_errors=True)
    sw.close()
    return rows


def _read_files(spark: Any, files: list[Path]) -> Any:
    return spark.read.options(**PAGE_CHECKSUMS_VERIFY).parquet(*[str(f) for f in files])


def migrate_parquet_savepoint(spark: Any, src: str | os.PathLike[str], dst: str | os.PathLike[str],
                              new_descriptors: Iterable[Any] | Mapping[str, Any], *, on_error: str = "raise",
                              transform: TransformFactory | None = None, verify: bool = True) -> RewriteReport:
    """Rewrite savepoint ``src`` (the Parquet form) into ``dst`` for the new descriptors, on Spark.

    Same plan and same result as :func:`statemorph.engine.local.migrate_parquet_savepoint`: states needing no
    migration are copied as they are (file bytes unchanged); the ``value`` column of states
    compatible after migration is rewritten by the kernels inside ``mapInArrow``; an incompatible
    state raises :class:`~statemorph.errors.IncompatibleSchemaError` before anything is written.
    ``dst`` appears atomically or not at all. ``verify`` checks every source file against its
    recorded sha256 on the driver first (one extra read of the data there; turn it off for
    savepoints too large for that, the Parquet readers still check structure and row counts).
    """
    t0 = time.perf_counter()
    src = os.fspath(src)
    md = read_metadata(src)
    plan = plan_rewrite(src, md, new_descriptors)
    plan.raise_if_incompatible()
    report = RewriteReport(src, os.fspath(dst), plan, "spark")
    with open_writer(dst, plan) as w:
        for sp in plan.states:
            if (sp.action == MIGRATE or transform is not None) and sp.meta.files:
                report.rows[sp.name] = _migrate_state(spark, src, w, sp, on_error, transform, verify)
            else:
                report.rows[sp.name] = copy_state(src, w, sp, None)
    report.seconds = time.perf_counter() - t0
    return report


def _migrate_state(spark: Any, src: str, w: SavepointWriter, sp: StatePlan, on_error: str,
                   transform: TransformFactory | None, verify: bool) -> int:
    files = state_files(src, sp.meta, verify=verify, metadata=sp.savepoint_meta)
    df = _read_files(spark, files)
    fn = transform(sp) if transform is not None else ColumnMigrator(
        sp.prior_value_snapshot, sp.new_serializer, "value", on_error=on_error)
    map_batches = fn.map_batches if hasattr(fn, "map_batches") else _BatchMap(fn)
    out = df.mapInArrow(map_batches, df.schema)
    return _write_and_adopt(out, w, add_planned_state(w, sp))


class _BatchMap:
    """Wraps a per-batch function into the iterator form ``mapInArrow`` calls."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield self.fn(b)


def read_parquet_state_df(spark: Any, savepoint: str | os.PathLike[str], state: str, *, flatten: bool = True,
                          on_error: str = "raise", verify: bool = True) -> Any:
    """One state as a typed DataFrame: ``key``, ``namespace`` (windowed state only), ``user_key``
    (map state), ``index`` (list state) and the value, decoded from its serializer (RowData, Row,
    POJO, Avro, primitives...); row values become one column per field with ``flatten``.
    ``verify`` checks the files' sha256 on the driver first (see :func:`migrate_parquet_savepoint`)."""
    md = read_metadata(savepoint)
    st = md.state(state)
    dec = StateDecoder.for_state(st, flatten=flatten, on_error=on_error)
    schema = dec.output_schema(st.kind.value == "list")
    for_spark = pa.schema([f.with_type(_spark_arrow_type(f.type)) for f in schema])
    df_schema = spark_schema(for_spark)
    files = state_files(savepoint, st, verify=verify, metadata=md)
    if not files:
        return spark.createDataFrame([], df_schema)
    fn = dec.map_batches if for_spark == schema else _SparkBatches(dec.map_batches, for_spark)
    return _read_files(spark, files).mapInArrow(fn, df_schema)


def write_state(spark: Any, df: Any, dst: str | os.PathLike[str], *, name: str, key_serializer: Any,
                value_serializer: Any, kind: str = "value", user_key_serializer: Any = None,
                max_parallelism: int = 128, key: str = "key", value: str | list[str] = "value",
                user_key: str = "user_key", index: str = "index") -> Path:
    """Bootstrap: a new savepoint with one state built from a DataFrame (the State Processor
    "write" path). Keys, user keys and values are encoded in bulk on the executors; key groups
    are computed as Flink assigns them. ``value`` names one column, or several columns that make up
    a row value (for RowData / Row serializers); list state needs an ``index`` column."""
    enc = StateEncoder(key_serializer, value_serializer, max_parallelism=max_parallelism, kind=kind, key=key,
                       value=value, user_key_serializer=user_key_serializer, user_key=user_key, index=index)
    out = df.mapInArrow(enc.map_batches, spark_schema(enc.output_schema()))
    with SavepointWriter(dst, max_parallelism=max_parallelism, key_serializer=key_serializer) as w:
        sw = w.add_state(name, kind, value_serializer=value_serializer, user_key_serializer=user_key_serializer)
        _write_and_adopt(out, w, sw)
    return Path(dst)


__all__ = ["PARQUET_COMPRESSION", "migrate_parquet_savepoint", "read_parquet_state_df", "spark_schema", "write_state"]
