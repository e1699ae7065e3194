"""statemorph on Spark: savepoint rewrites, the State Processor read path, bootstrap, and UDFs,
for either savepoint format (:func:`statemorph.engine.formats.format_of` decides; the Parquet form
runs in :mod:`.spark_parquet`, Flink's canonical savepoints in :mod:`.spark_flink`).

The driver decides everything first from the metadata alone (the one planner), so an
incompatible state stops the job before any task runs; the executors run the same batch
transforms as the local engine (pickled as snapshot bytes, not as Python objects), and the
result appears atomically.

Paths are local or shared-filesystem paths (NFS, a mounted bucket) that the driver and every
executor see under the same name. statemorph must be installed on the executors' Python (``pip
install statemorph`` there, or a packed environment shipped with ``spark.archives``; ``--py-files``
cannot carry compiled modules); see docs/spark.md.

::

    from statemorph.engine import spark as sms
    spark = sms.session("local[2]")
    sms.migrate_savepoint(spark, "sp-v1", "sp-v2", [ValueStateDescriptor("events", new_ser)])
    sms.read_state(spark, "sp-v2", "events").show()
    df.withColumn("value", sms.migrate_udf(old_snapshot, new_ser)("value"))   # a pandas UDF on a column
    df.mapInArrow(sms.migrate_udf(old_snapshot, new_ser), df.schema)        # or on Arrow batches
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..extras import require
from .batches import ColumnDecoder, ColumnMigrator
from .bootstrap import write_flink_savepoint
from .flink import flink_savepoint_metadata, read_flink_operator_state
from .formats import DataFrame, Descriptors, MigrateReport, OnSpark, SparkSession, flink_reader, format_of
from .local import TransformFactory
from .rescale import rescale_flink_savepoint
from .spark_jvm import jvm_output
from .spark_parquet import PARQUET_COMPRESSION, spark_schema, write_state


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
    require("pyspark", "the Spark engine")
    ensure_python_env(master)
    from pyspark.sql import SparkSession  # the optional dependency, after require() named its extra

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


def migrate_savepoint(spark: SparkSession, src: str | os.PathLike[str], dst: str | os.PathLike[str],
                      new_descriptors: Descriptors, *, on_error: str = "raise",
                      transform: TransformFactory | None = None, verify: bool = True,
                      tasks: int | None = None, task_bytes: int | None = None) -> MigrateReport:
    """Rewrite savepoint ``src`` into ``dst`` for the new descriptors, on Spark (either format:
    :meth:`~statemorph.engine.formats.SavepointFormat.rewrite` with the :class:`OnSpark` runner).

    Same plan and same result as :func:`statemorph.engine.migrate_savepoint`: states needing no
    migration are copied as they are; the values of states compatible after migration are
    rewritten by the kernels in Spark tasks; an incompatible state raises
    :class:`~statemorph.errors.IncompatibleSchemaError` before anything is written. ``dst``
    appears atomically or not at all. The Parquet form: ``verify`` checks every source file
    against its recorded sha256 on the driver first (one extra read of the data there; turn it
    off for savepoints too large for that, the Parquet readers still check structure and row
    counts), ``transform`` replaces the migration step. A Flink savepoint: ``tasks`` key-group
    ranges, or ranges (and pieces of large key groups) of about ``task_bytes`` stored bytes
    (:func:`statemorph.engine.migrate_flink_savepoint`)."""
    return format_of(src).rewrite(src, dst, new_descriptors, on_error=on_error,
                                  runner=OnSpark(spark, tasks=tasks, task_bytes=task_bytes, transform=transform,
                                                 verify=verify))


def read_state(spark: SparkSession, savepoint: str | os.PathLike[str], state: str, *, operator: str | None = None,
               flatten: bool = True, on_error: str = "raise", verify: bool = True,
               tasks: int | None = None) -> DataFrame:
    """One state as a typed DataFrame: ``key``, ``namespace`` (windowed state only), ``user_key``
    (map state), ``index`` (list state) and the value, decoded from its serializer (RowData, Row,
    POJO, Avro, primitives...); row values become one column per field with ``flatten``.
    ``verify`` checks the files' sha256 on the driver first (the Parquet form).

    A Flink savepoint keeps keyed state per operator: name it with ``operator`` (uid or uid
    hash); the state is read by key-group ranges, ``tasks`` of them
    (:func:`statemorph.engine.spark_flink.read_flink_state_df`)."""
    return format_of(savepoint).read(savepoint, state, operator=operator, flatten=flatten, on_error=on_error,
                                     runner=OnSpark(spark, tasks=tasks, verify=verify))


def savepoint_metadata(spark: Any, savepoint: str | os.PathLike[str], *, count_entries: bool = True) -> Any:
    """Flink savepoint ``savepoint``'s operators and keyed states as a DataFrame, one row per
    state (:func:`statemorph.engine.flink_savepoint_metadata`), like Flink's ``savepoint_metadata``."""
    return spark.createDataFrame(flink_savepoint_metadata(savepoint, count_entries=count_entries,
                                                          reader=flink_reader(savepoint)))


def read_operator_state(spark: Any, savepoint: str | os.PathLike[str], state: str, *, operator: str,
                        decode: bool = True) -> Any:
    """One operator state (list, union list or broadcast state) of a Flink savepoint's operator as a
    DataFrame, with the columns of :func:`statemorph.engine.read_flink_operator_state`. Operator
    state is small (sources' splits and offsets, broadcast rules) and each stream is bounded, so the
    driver reads it and Spark gets the table."""
    return spark.createDataFrame(read_flink_operator_state(savepoint, operator, state, decode=decode,
                                                           reader=flink_reader(savepoint)))


def write_savepoint(spark: Any, dst: str | os.PathLike[str], *, operator: str, key_serializer: Any,
                    states: Mapping[str, Any], max_parallelism: int = 128, parallelism: int = 1,
                    compression: bool = False, tasks: int | None = None,
                    base: str | os.PathLike[str] | None = None) -> Any:
    """Bootstrap a new Flink canonical savepoint on Spark: one keyed operator (uid ``operator``)
    with ``states`` (name → :class:`statemorph.engine.StateData` whose ``data`` is a DataFrame or
    an Arrow table), at ``max_parallelism`` / ``parallelism``, or added to a copy of savepoint
    ``base``. Encoding, the shuffle into ``tasks`` key-group ranges and the stream writes run on
    the executors (:func:`statemorph.engine.write_flink_savepoint`)."""
    return write_flink_savepoint(dst, operator=operator, key_serializer=key_serializer, states=states,
                                 max_parallelism=max_parallelism, parallelism=parallelism, compression=compression,
                                 spark=spark, tasks=tasks, base=base)


def rescale_savepoint(spark: Any, src: str | os.PathLike[str], dst: str | os.PathLike[str], operator: str, *,
                      max_parallelism: int, parallelism: int | None = None, tasks: int | None = None) -> Any:
    """Re-assign ``operator``'s keyed state of Flink savepoint ``src`` to ``max_parallelism`` key
    groups (and ``parallelism`` subtasks) on Spark (:func:`statemorph.engine.rescale_flink_savepoint`)."""
    return rescale_flink_savepoint(src, dst, operator, max_parallelism=max_parallelism, parallelism=parallelism,
                                   spark=spark, tasks=tasks)


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
        from pyspark.sql import Column  # pyspark, the optional spark extra, is there when a UDF is called

        if isinstance(arg, (str, Column)):
            return self.pandas_udf()(arg)
        return self.transform.map_batches(arg)

    def output_schema(self, schema: Any) -> Any:
        """The Spark schema ``mapInArrow`` needs, from the input DataFrame's schema."""
        from pyspark.sql.pandas.types import to_arrow_schema  # the optional spark extra

        return spark_schema(self.transform.output_schema(to_arrow_schema(schema)))

    def pandas_udf(self) -> Any:
        if self._pandas is None:
            self._pandas = _make_pandas_udf(self.transform)
        return self._pandas


def _make_pandas_udf(transform: Any) -> Any:
    # pandas and pyspark (the spark extra) only for a pandas UDF: mapInArrow needs neither
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
