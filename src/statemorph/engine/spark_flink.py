"""Flink's canonical savepoints on Spark: keyed state as DataFrames, read by key-group ranges.

Why: the driver plans from ``_metadata`` alone (:func:`~statemorph.savepoint.flink.splits.key_group_splits`
cuts every subtask stream into key-group ranges of about equal bytes); each Spark task opens the
savepoint itself, reads only its range's bytes and decodes them with the same code as the local
reader (:func:`statemorph.engine.read_flink_state`), so a DataFrame and a local Arrow table of one
state hold the same rows. The savepoint path must be one the executors see under the same name
(local mode, NFS, a mounted bucket), or a ``pyarrow.fs`` URI (``s3://...``) they open themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import FlinkSavepointError
from ..io import DataOutputSerializer
from ..savepoint.flink import (
    FlinkSavepoint,
    KeyedStreamWriter,
    SavepointDirectory,
    StreamResult,
    keep_inline,
    migrated_encoded_key_groups,
    migrated_header,
)
from ..savepoint.flink.handles import ByteStreamHandle, write_keyed_handle
from ..savepoint.flink.metadata import METADATA_FILE_NAME
from ..savepoint.flink.splits import key_group_splits
from ..savepoint.storage import (
    Location,
    NewFile,
    Target,
    open_written,
    remove_file,
    remove_scratch,
    scratch,
    stream_copy,
)
from ..typeutils import read_versioned_snapshot
from .flink_ranges import read_flink_state, read_flink_state_schema, value_migration

Source = str | Location
"""A savepoint as Spark tasks receive it: a local path every executor sees, or a remote
:class:`~statemorph.savepoint.storage.Location` (its filesystem travels pickled)."""


def _spark_schema(schema: pa.Schema) -> Any:
    # pyspark is an optional dependency, and a Spark task never needs this: imported on use
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class _RangeReader:
    """What a Spark task runs: read the key-group ranges whose task ids arrive in its input."""

    def __init__(self, path: Source, operator: str, state: str, ranges: list[tuple[int, int]], decode: bool,
                 threads: int, reader: type[FlinkSavepoint]) -> None:
        self.path, self.operator, self.state = path, operator, state
        self.ranges, self.decode, self.threads, self.reader = ranges, decode, threads, reader

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for task in b.column(0).to_pylist():
                start, stop = self.ranges[task]
                for out in read_flink_state(self.path, self.operator, self.state, decode=self.decode,
                                            threads=self.threads, key_groups=range(start, stop),
                                            reader=self.reader):
                    if out.num_rows:
                        yield out


def read_flink_state_df(spark: Any, path: str | os.PathLike[str] | Location, operator: str, state: str, *,
                        decode: bool = True, tasks: int | None = None, threads: int = 1,
                        flatten: bool = False, reader: type[FlinkSavepoint] = FlinkSavepoint) -> Any:
    """One keyed state of one operator of a Flink savepoint as a DataFrame, with the columns of
    :func:`~statemorph.engine.read_flink_state` (``key_group``, ``key``, ``namespace``, [``user_key``
    | ``index``], ``value``[, ``ttl_timestamp``]; key, user key and value typed from the recorded
    serializers, a row value a struct). ``tasks`` (default: twice the default parallelism) is how
    many key-group ranges the state is cut into; ``flatten`` puts a row value's fields in
    top-level columns when their names do not clash with the others. ``path`` may be a URI or a
    :class:`~statemorph.savepoint.storage.Location`: each task then reads its byte ranges from the
    store, and the driver only ``_metadata`` and the headers. ``reader`` opens the savepoint on the
    driver and in each task (the format's: a native savepoint's tasks each open their RocksDB instance)."""
    src: Source = path if isinstance(path, Location) else Location.of(path) or os.path.abspath(os.fspath(path))
    schema = read_flink_state_schema(src, operator, state, decode=decode, reader=reader)
    op = reader(src).operator(operator)
    n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
    ranges = [(s.key_groups.start, s.key_groups.stop) for s in key_group_splits(op, n)]
    spark_schema = _spark_schema(schema)
    if not ranges:
        df = spark.createDataFrame([], spark_schema)
    else:
        ids = spark.range(0, len(ranges), 1, len(ranges)).select("id")
        df = ids.mapInArrow(_RangeReader(src, operator, state, ranges, decode, threads, reader), spark_schema)
    value = schema.field("value").type if "value" in schema.names else None
    if flatten and value is not None and pa.types.is_struct(value):
        names = [value.field(i).name for i in range(value.num_fields)]
        others = [c for c in schema.names if c != "value"]
        if not set(names) & set(others) and len(set(names)) == len(names):
            df = df.select(*others, *[df["value"][f].alias(f) for f in names])
    return df


__all__ = ["read_flink_state_df"]


# -- migrate: Spark tasks by key-group ranges ----------------------------------------------------

class _PartTask:
    """Phase 1 of a split rewrite, on an executor: migrate one key-group range of one subtask
    stream and write its encoded key groups, back to back, into a part file of the scratch area
    (:func:`~statemorph.savepoint.storage.scratch`: local, or under the remote destination).
    Returns where each key group starts in the part, the part's size and the counts."""

    def __init__(self, src: Source, target: Target, threads: int) -> None:
        self.src, self.target, self.threads = src, target, threads

    def __call__(self, item: tuple[int, int, Any, tuple[int, int], Mapping[str, tuple[bytes, bytes, bytes]]]) -> Any:
        job_index, part, job, (start, stop), snaps = item
        sp = FlinkSavepoint(self.src)
        changes = {state: value_migration(read_versioned_snapshot(prior),
                                           read_versioned_snapshot(new).restore_serializer())
                   for state, (_, prior, new) in snaps.items()}
        op = sp.operators[job.op_index]
        counts: dict[str, int] = {}
        offsets: list[tuple[int, int]] = []
        for st, stream in sp.keyed_streams(op):
            if st.index != job.subtask:
                continue
            out = NewFile(scratch(self.target), _part_name(job.name, part))
            try:
                for kg, data in migrated_encoded_key_groups(stream, changes, op.max_parallelism,
                                                            key_groups=range(start, stop),
                                                            batch_values=job.batch_values, counts=counts,
                                                            workers=self.threads):
                    offsets.append((kg, out.pos))
                    out.write(data)
                out.finish()
            except BaseException:
                out.abort()
                raise
            return job_index, part, offsets, out.pos, counts
        raise FileNotFoundError(f"{sp.path}: no keyed stream of subtask {job.subtask}")


def _part_name(name: str, part: int) -> str:
    return f"{name.replace('/', '_')}.{part}"


class _AssembleTask:
    """Phase 2, on an executor: one subtask's new stream = the migrated header, then its parts in
    key-group order (offsets shifted), written where the rewriter expects it (the local staging
    directory, or its final name under the remote destination: the bytes go from the parts to
    the stream on the executor, never through the driver); the parts are removed. Returns the
    job's :class:`~statemorph.savepoint.flink.StreamResult`."""

    def __init__(self, src: Source, target: Target) -> None:
        self.src, self.target = src, target

    def __call__(self, item: tuple[Any, Mapping[str, tuple[bytes, bytes, bytes]], list[Any]]) -> Any:
        job, snaps, parts = item
        sp = FlinkSavepoint(self.src)
        op = sp.operators[job.op_index]
        counts: dict[str, int] = {s: 0 for s in job.states}
        parts_at = scratch(self.target)
        for st, stream in sp.keyed_streams(op):
            if st.index != job.subtask:
                continue
            header = migrated_header(stream.header, {s: snaps[s][0] for s in job.states})
            old = stream.handle
            with KeyedStreamWriter(self.target, job.name, header, old.start_key_group, len(old.offsets)) as out:
                for _, part, offsets, size, part_counts in sorted(parts, key=lambda p: p[1]):
                    rel = _part_name(job.name, part)
                    ends = [o for _, o in offsets[1:]] + [size]
                    # one key group in memory at a time: a part is a whole key-group range, which
                    # at scale is gigabytes (a task's share of a subtask file)
                    with open_written(parts_at, rel, size, FlinkSavepointError) as f:
                        for (kg, begin), end in zip(offsets, ends, strict=True):
                            out.add_encoded_key_group(kg, f.read_range(begin, end - begin, f"key group {kg}"))
                    remove_file(parts_at, rel)
                    for s, n in part_counts.items():
                        counts[s] = counts.get(s, 0) + n
                inline = keep_inline(old.delegate, out.pos, job.inline_threshold)
                inline_name = old.delegate.name if isinstance(old.delegate, ByteStreamHandle) else job.name
                handle = out.finish(inline, inline_name, old.code, old.handle_id)
            buf = DataOutputSerializer()
            write_keyed_handle(buf, handle)
            return StreamResult(buf.get_copy_of_buffer(), tuple((s, counts[s]) for s in job.states))
        raise FileNotFoundError(f"{sp.path}: no keyed stream of subtask {job.subtask}")


def split_stream_jobs(spark: Any, src: Source, shipped: Mapping[tuple[int, str], tuple[bytes, bytes, bytes]],
                      threads: int, tasks: int) -> Any:
    """A ``run_jobs`` for the Flink rewriter (:func:`statemorph.savepoint.flink.rewrite`) that
    cuts every subtask stream to rewrite into key-group ranges of about equal bytes
    (:func:`key_group_splits`, planned from ``_metadata``), migrates the ranges as Spark tasks
    (so one big stream is many tasks), then assembles each stream from its parts in one task per
    stream on the executors: no entry passes through the driver, only handles and counts.

    ``src`` is a local path every executor sees or a remote
    :class:`~statemorph.savepoint.storage.Location` (each task opens it and reads only its byte
    ranges); the rewriter's target is a local staging directory or the remote destination
    prefix, which the tasks write directly."""

    def run(jobs: list[Any], staging: Target) -> list[Any]:
        if not jobs:
            return []
        target = staging if isinstance(staging, Location) else Path(os.path.abspath(staging))
        sp = FlinkSavepoint(src)
        splits: dict[int, list[Any]] = {}
        work = []
        for i, job in enumerate(jobs):
            op_splits = splits.setdefault(job.op_index, key_group_splits(sp.operators[job.op_index], tasks))
            snaps = {s: shipped[(job.op_index, s)] for s in job.states}
            for k, s in enumerate(x for x in op_splits if x.subtask == job.subtask):
                work.append((i, k, job, (s.key_groups.start, s.key_groups.stop), snaps))
        sc = spark.sparkContext
        parts = (sc.parallelize(work, max(1, len(work))).map(_PartTask(src, target, threads)).collect()
                 if work else [])
        by_job: dict[int, list[Any]] = {i: [] for i in range(len(jobs))}
        for p in parts:
            by_job[p[0]].append(p)
        assemble = [(job, {s: shipped[(job.op_index, s)] for s in job.states}, by_job[i])
                    for i, job in enumerate(jobs)]
        results: list[Any] = sc.parallelize(assemble, len(assemble)).map(_AssembleTask(src, target)).collect()
        if parts:
            remove_scratch(target)
        return results

    return run


class _CopyTask:
    """On an executor: stream one unchanged file of the source into the target (a file the store
    cannot copy inside itself, or a copy across filesystems), opened with the checks of
    :meth:`~statemorph.savepoint.flink.SavepointDirectory.open`."""

    def __init__(self, src: Source, target: Target) -> None:
        self.src, self.target = src, target

    def __call__(self, item: tuple[str, int | None]) -> None:
        rel, size = item
        with SavepointDirectory(self.src).files.open(rel, size=size, recorded_in=METADATA_FILE_NAME) as f:
            stream_copy(f, self.target, rel)


def split_copy_jobs(spark: Any, src: Source) -> Any:
    """A ``run_copies`` for the Flink rewriter: the unchanged files that must be streamed are
    streamed by Spark tasks, one per file, so their bytes never pass through the driver."""

    def run(files: list[tuple[str, int | None]], target: Target) -> None:
        where = target if isinstance(target, Location) else Path(os.path.abspath(target))
        spark.sparkContext.parallelize(files, len(files)).foreach(_CopyTask(src, where))

    return run


__all__ += ["split_copy_jobs", "split_stream_jobs"]
