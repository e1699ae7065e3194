"""Flink's canonical savepoints on Spark: keyed state as DataFrames, read by key-group ranges.

Why: the driver plans from ``_metadata`` alone (:func:`~statemorph.savepoint.flink.splits.key_group_splits`
cuts every subtask stream into key-group ranges of about equal bytes); each Spark task opens the
savepoint itself, reads only its range's bytes and decodes them with the same code as the local
reader (:func:`statemorph.engine.read_flink_state`), so a DataFrame and a local Arrow table of one
state hold the same rows. The savepoint path must be one the executors see under the same name
(local mode, NFS, a mounted bucket).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from ..savepoint.flink import FlinkSavepoint
from ..savepoint.flink.splits import key_group_splits
from .flink import read_flink_state, read_flink_state_schema


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class _RangeReader:
    """What a Spark task runs: read the key-group ranges whose task ids arrive in its input."""

    def __init__(self, path: str, operator: str, state: str, ranges: list[tuple[int, int]], decode: bool,
                 threads: int) -> None:
        self.path, self.operator, self.state = path, operator, state
        self.ranges, self.decode, self.threads = ranges, decode, threads

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for task in b.column(0).to_pylist():
                start, stop = self.ranges[task]
                for out in read_flink_state(self.path, self.operator, self.state, decode=self.decode,
                                            threads=self.threads, key_groups=range(start, stop)):
                    if out.num_rows:
                        yield out


def read_flink_state_df(spark: Any, path: str | os.PathLike[str], operator: str, state: str, *,
                        decode: bool = True, tasks: int | None = None, threads: int = 1,
                        flatten: bool = False) -> Any:
    """One keyed state of one operator of a Flink savepoint as a DataFrame, with the columns of
    :func:`~statemorph.engine.read_flink_state` (``key_group``, ``key``, ``namespace``, [``user_key``
    | ``index``], ``value``[, ``ttl_timestamp``]; key, user key and value typed from the recorded
    serializers, a row value a struct). ``tasks`` (default: twice the default parallelism) is how
    many key-group ranges the state is cut into; ``flatten`` puts a row value's fields in
    top-level columns when their names do not clash with the others."""
    src = os.path.abspath(os.fspath(path))
    schema = read_flink_state_schema(src, operator, state, decode=decode)
    op = FlinkSavepoint(src).operator(operator)
    n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
    ranges = [(s.key_groups.start, s.key_groups.stop) for s in key_group_splits(op, n)]
    spark_schema = _spark_schema(schema)
    if not ranges:
        df = spark.createDataFrame([], spark_schema)
    else:
        ids = spark.range(0, len(ranges), 1, len(ranges)).select("id")
        df = ids.mapInArrow(_RangeReader(src, operator, state, ranges, decode, threads), spark_schema)
    value = schema.field("value").type if "value" in schema.names else None
    if flatten and value is not None and pa.types.is_struct(value):
        names = [value.field(i).name for i in range(value.num_fields)]
        others = [c for c in schema.names if c != "value"]
        if not set(names) & set(others) and len(set(names)) == len(names):
            df = df.select(*others, *[df["value"][f].alias(f) for f in names])
    return df


__all__ = ["read_flink_state_df"]
