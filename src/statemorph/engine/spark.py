"""statemorph on Spark: savepoint rewrites, the State Processor read path, bootstrap, and UDFs.

Why Spark: a savepoint's states are Parquet datasets of Flink's bytes, so a rewrite is read →
kernel → write, partition-parallel, over as many executors as the data needs. The driver decides
everything first from the metadata alone (:func:`statemorph.engine.plan_rewrite`: which states to
copy, which to migrate, which are incompatible), so an incompatible state stops the job before any
task runs; the executors run the same batch transforms as the local engine (pickled as snapshot
bytes, not as Python objects); the driver then adopts the task output files into a savepoint
written atomically (temporary directory, fsync, rename).

Paths are local or shared-filesystem paths (NFS, a mounted bucket) that the driver and every
executor see under the same name. statemorph must be installed on the executors' Python (``pip
install statemorph`` there, or a packed environment shipped with ``spark.archives``; ``--py-files``
cannot carry compiled modules); see docs/spark.md.

::

    from statemorph import spark as sms
    spark = sms.session("local[2]")
    sms.migrate_savepoint(spark, "sp-v1", "sp-v2", [ValueStateDescriptor("events", new_ser)])
    sms.read_state(spark, "sp-v2", "events").show()
    df.withColumn("value", sms.migrate_udf(old_snapshot, new_ser)("value"))   # a pandas UDF on a column
    df.mapInArrow(sms.migrate_udf(old_snapshot, new_ser), df.schema)        # or on Arrow batches
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..extras import require
from ..savepoint.parquet.reader import read_metadata, state_files
from ..savepoint.parquet.writer import SavepointWriter, StateWriter
from .batches import ColumnDecoder, ColumnMigrator, StateDecoder, StateEncoder
from .local import RewriteReport, TransformFactory, add_planned_state, copy_state, open_writer
from .plan import MIGRATE, StatePlan, plan_rewrite

PARQUET_COMPRESSION = "zstd"
"""The savepoint writer's Parquet compression, so Spark-written files match local ones."""
PAGE_CHECKSUMS_WRITE = {"parquet.page.write-checksum.enabled": "true"}
PAGE_CHECKSUMS_VERIFY = {"parquet.page.verify-checksum.enabled": "true"}
"""Parquet page CRCs: written by Spark tasks as by the local writer, and verified when Spark reads
a savepoint's files (Hadoop options passed per read / write)."""


def ensure_python_env(master: str | None) -> None:
    """In local mode, run the Python workers with this interpreter (the one that has statemorph)
    unless ``PYSPARK_PYTHON`` says otherwise. Must happen before the SparkContext starts."""
    if (master is None or master.startswith("local")) and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


def session(master: str | None = "local[2]", app_name: str = "statemorph",
            conf: Mapping[str, str] | None = None, log_level: str = "WARN",
            jvm_log: str | os.PathLike[str] | None = None) -> Any:
    """A SparkSession configured for statemorph jobs (Arrow on, UI off in local mode, UTC).
    Whoever starts it stops it (``spark.stop()``) when done, as the CLI does. ``jvm_log``: a file
    that receives everything the JVM this call starts prints, and its Python workers' stderr
    (:func:`statemorph.engine.spark_jvm.jvm_output`), instead of this process's stdout and stderr;
    no effect when the JVM is already running."""
    from .spark_jvm import jvm_output

    require("pyspark", "the Spark engine")
    ensure_python_env(master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": PARQUET_COMPRESSION,
        # bigger Arrow batches to the Python workers: the per-batch cost of a kernel call is fixed
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        # a Python worker serves task after task (Spark's default, stated because it matters): a
        # fresh one per task would start Python, import statemorph, pyarrow and numpy and build
        # the migration's machine code again for every key-group range
        "spark.python.worker.reuse": "true",
    }
    if master is None or master.startswith("local"):
        settings.update({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"})
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    with jvm_output(None if jvm_log is None else Path(jvm_log)):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def _spark_schema(schema: pa.Schema) -> Any:
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


def migrate_savepoint(spark: Any, src: str | os.PathLike[str], dst: str | os.PathLike[str],
                      new_descriptors: Iterable[Any] | Mapping[str, Any], *, on_error: str = "raise",
                      transform: TransformFactory | None = None, verify: bool = True) -> RewriteReport:
    """Rewrite savepoint ``src`` into ``dst`` for the new descriptors, on Spark.

    Same plan and same result as :func:`statemorph.engine.migrate_savepoint`: states needing no
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


def read_state(spark: Any, savepoint: str | os.PathLike[str], state: str, *, operator: str | None = None,
               flatten: bool = True, on_error: str = "raise", verify: bool = True, tasks: int | None = None) -> Any:
    """One state as a typed DataFrame: ``key``, ``namespace`` (windowed state only), ``user_key``
    (map state), ``index`` (list state) and the value, decoded from its serializer (RowData, Row,
    POJO, Avro, primitives...); row values become one column per field with ``flatten``.
    ``verify`` checks the files' sha256 on the driver first (see :func:`migrate_savepoint`).

    A Flink savepoint (a directory with ``_metadata``) keeps keyed state per operator: name it with
    ``operator`` (uid or uid hash); the state is read by key-group ranges, ``tasks`` of them
    (:func:`statemorph.engine.spark_flink.read_flink_state_df`)."""
    from ..savepoint.flink import is_flink_savepoint

    if is_flink_savepoint(savepoint):
        from ..errors import UsageError
        from .spark_flink import read_flink_state_df

        if operator is None:
            raise UsageError(f"{savepoint} is a Flink savepoint: name the operator (operator=<uid or uid hash>)")
        return read_flink_state_df(spark, savepoint, operator, state, flatten=flatten, tasks=tasks)
    md = read_metadata(savepoint)
    st = md.state(state)
    dec = StateDecoder.for_state(st, flatten=flatten, on_error=on_error)
    schema = dec.output_schema(st.kind.value == "list")
    for_spark = pa.schema([f.with_type(_spark_arrow_type(f.type)) for f in schema])
    spark_schema = _spark_schema(for_spark)
    files = state_files(savepoint, st, verify=verify, metadata=md)
    if not files:
        return spark.createDataFrame([], spark_schema)
    fn = dec.map_batches if for_spark == schema else _SparkBatches(dec.map_batches, for_spark)
    return _read_files(spark, files).mapInArrow(fn, spark_schema)


def savepoint_metadata(spark: Any, savepoint: str | os.PathLike[str], *, count_entries: bool = True) -> Any:
    """Flink savepoint ``savepoint``'s operators and keyed states as a DataFrame, one row per
    state (:func:`statemorph.engine.flink_savepoint_metadata`), like Flink's ``savepoint_metadata``."""
    from .flink import flink_savepoint_metadata

    return spark.createDataFrame(flink_savepoint_metadata(savepoint, count_entries=count_entries))


def read_operator_state(spark: Any, savepoint: str | os.PathLike[str], state: str, *, operator: str,
                        decode: bool = True) -> Any:
    """One operator state (list, union list or broadcast state) of a Flink savepoint's operator as a
    DataFrame, with the columns of :func:`statemorph.engine.read_flink_operator_state`. Operator
    state is small (sources' splits and offsets, broadcast rules) and each stream is bounded, so the
    driver reads it and Spark gets the table."""
    from .flink import read_flink_operator_state

    return spark.createDataFrame(read_flink_operator_state(savepoint, operator, state, decode=decode))


def write_savepoint(spark: Any, dst: str | os.PathLike[str], *, operator: str, key_serializer: Any,
                    states: Mapping[str, Any], max_parallelism: int = 128, parallelism: int = 1,
                    compression: bool = False, tasks: int | None = None,
                    base: str | os.PathLike[str] | None = None) -> Any:
    """Bootstrap a new Flink canonical savepoint on Spark: one keyed operator (uid ``operator``)
    with ``states`` (name → :class:`statemorph.engine.StateData` whose ``data`` is a DataFrame or
    an Arrow table), at ``max_parallelism`` / ``parallelism``, or added to a copy of savepoint
    ``base``. Encoding, the shuffle into ``tasks`` key-group ranges and the stream writes run on
    the executors (:func:`statemorph.engine.write_flink_savepoint`)."""
    from .bootstrap import write_flink_savepoint

    return write_flink_savepoint(dst, operator=operator, key_serializer=key_serializer, states=states,
                                 max_parallelism=max_parallelism, parallelism=parallelism, compression=compression,
                                 spark=spark, tasks=tasks, base=base)


def rescale_savepoint(spark: Any, src: str | os.PathLike[str], dst: str | os.PathLike[str], operator: str, *,
                      max_parallelism: int, parallelism: int | None = None, tasks: int | None = None) -> Any:
    """Re-assign ``operator``'s keyed state of Flink savepoint ``src`` to ``max_parallelism`` key
    groups (and ``parallelism`` subtasks) on Spark (:func:`statemorph.engine.rescale_flink_savepoint`)."""
    from .rescale import rescale_flink_savepoint

    return rescale_flink_savepoint(src, dst, operator, max_parallelism=max_parallelism, parallelism=parallelism,
                                   spark=spark, tasks=tasks)


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
    out = df.mapInArrow(enc.map_batches, _spark_schema(enc.output_schema()))
    with SavepointWriter(dst, max_parallelism=max_parallelism, key_serializer=key_serializer) as w:
        sw = w.add_state(name, kind, value_serializer=value_serializer, user_key_serializer=user_key_serializer)
        _write_and_adopt(out, w, sw)
    return Path(dst)


# -- UDFs users drop into their own pipelines -------------------------------------------------------

class ArrowColumnUDF:
    """A column transform usable two ways:

    - ``df.mapInArrow(udf, schema)``: called with an iterator of Arrow record batches, it rewrites
      the configured column of each batch (the fast path: no pandas);
    - ``udf("value")`` / ``udf(col("value"))``: a pandas UDF over one binary column.
    """

    def __init__(self, transform: Any) -> None:
        self.transform = transform
        self._pandas: Any = None

    def __call__(self, arg: Any) -> Any:
        from pyspark.sql import Column

        if isinstance(arg, (str, Column)):
            return self.pandas_udf()(arg)
        return self.transform.map_batches(arg)

    def output_schema(self, schema: Any) -> Any:
        """The Spark schema ``mapInArrow`` needs, from the input DataFrame's schema."""
        from pyspark.sql.pandas.types import to_arrow_schema

        return _spark_schema(self.transform.output_schema(to_arrow_schema(schema)))

    def pandas_udf(self) -> Any:
        if self._pandas is None:
            self._pandas = _make_pandas_udf(self.transform)
        return self._pandas


def _make_pandas_udf(transform: Any) -> Any:
    import pandas as pd
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.pandas.types import from_arrow_type

    out_type = transform.output_type(pa.binary())
    spark_type = from_arrow_type(out_type)
    column = transform.column

    if pa.types.is_struct(out_type):
        def fn_struct(s: pd.Series) -> pd.DataFrame:
            arr = pa.array(s, type=pa.binary(), from_pandas=True)
            out = transform.transform(arr)
            return pa.Table.from_struct_array(out).to_pandas()

        fn_struct.__name__ = f"decode_{column}"
        fn_struct.__annotations__ = {"s": pd.Series, "return": pd.DataFrame}  # real types, not strings
        return pandas_udf(fn_struct, returnType=spark_type)  # type: ignore[call-overload]

    def fn(s: pd.Series) -> pd.Series:
        arr = pa.array(s, type=pa.binary(), from_pandas=True)
        return transform.transform(arr).to_pandas()

    fn.__name__ = f"{type(transform).__name__.lower()}_{column}"
    fn.__annotations__ = {"s": pd.Series, "return": pd.Series}
    return pandas_udf(fn, returnType=spark_type)  # type: ignore[call-overload]


def migrate_udf(prior_snapshot: Any, new_serializer: Any, column: str = "value", *,
                on_error: str = "raise") -> ArrowColumnUDF:
    """Migrate a binary column written under ``prior_snapshot`` (a snapshot, its bytes, or the old
    serializer) to ``new_serializer``'s schema. Works in ``mapInArrow`` and as a pandas UDF."""
    return ArrowColumnUDF(ColumnMigrator(prior_snapshot, new_serializer, column, on_error=on_error))


def decode_udf(serializer: Any, column: str = "value", *, on_error: str = "raise") -> ArrowColumnUDF:
    """Decode a binary column written by ``serializer`` (or described by its snapshot) into typed
    values (a struct for rows). Works in ``mapInArrow`` and as a pandas UDF."""
    return ArrowColumnUDF(ColumnDecoder(serializer, column, on_error=on_error))


__all__ = [
    "ArrowColumnUDF",
    "decode_udf",
    "ensure_python_env",
    "migrate_savepoint",
    "migrate_udf",
    "read_operator_state",
    "read_state",
    "rescale_savepoint",
    "savepoint_metadata",
    "session",
    "write_savepoint",
    "write_state",
]
