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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import FlinkSavepointError, UnsafeFileError
from ..io import DataOutputSerializer
from ..savepoint.files import check_relative_path, output_error
from ..savepoint.flink import (
    FlinkSavepoint,
    KeyedStreamWriter,
    SavepointDirectory,
    StreamResult,
    keep_inline,
    key_group_scan,
    migrated_encoded_key_groups,
    migrated_header,
)
from ..savepoint.flink.handles import ByteStreamHandle, KeyGroupsHandle, RelativeFileHandle, write_keyed_handle
from ..savepoint.flink.key_group_scan import KeyGroupPiece, key_group_pieces
from ..savepoint.flink.keyed_header import write_keyed_header
from ..savepoint.flink.metadata import METADATA_FILE_NAME
from ..savepoint.flink.reader import KeyedStream
from ..savepoint.flink.splits import KeyGroupSplit, key_group_splits
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


# -- migrate: Spark tasks by key-group ranges and pieces of key groups ------------------------------

PLACE_BYTES = 8 << 20
"""Bytes an assembly task holds at a time while it copies a part into its place in a state file."""

Shipped = Mapping[str, tuple[bytes, bytes, bytes]]
"""A stream job's states: name → (new per-value envelope, prior and new value snapshot bytes)."""
Part = tuple[int, int, list[tuple[int, int]], int, dict[str, int]]
"""What a range task hands back: (job, part number, (key group, offset) of each piece it wrote,
the part's size, values migrated per state)."""


def _run_tasks(spark: Any, phase: str, items: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """``fn`` over ``items``, one Spark task each, in the job group ``statemorph-<phase>``: each
    phase's tasks are found under that name in Spark's UI and status tracker. The caller's own
    job group and description are restored afterwards."""
    sc = spark.sparkContext
    keys = ("spark.jobGroup.id", "spark.job.description")
    before = [sc.getLocalProperty(k) for k in keys]
    sc.setLocalProperty(keys[0], f"statemorph-{phase}")
    sc.setLocalProperty(keys[1], f"statemorph: {phase} ({len(items)} tasks)")
    try:
        return list(sc.parallelize(items, max(1, len(items))).map(fn).collect())
    finally:
        for k, v in zip(keys, before, strict=True):
            sc.setLocalProperty(k, v)


@contextmanager
def _subtask_stream(sp: FlinkSavepoint, op_index: int, subtask: int) -> Iterator[KeyedStream]:
    """The keyed-state stream of one subtask of one operator, open while the block runs."""
    for st, stream in sp.keyed_streams(sp.operators[op_index]):
        if st.index == subtask:
            yield stream
            return  # the streams' generator, dropped here, closes the stream
    raise FileNotFoundError(f"{sp.path}: no keyed stream of subtask {subtask}")


class _CutTask:
    """Phase 0, on an executor: where one key group stored in more than a task's share is cut
    into runs of pieces (:func:`~statemorph.savepoint.flink.key_group_scan.key_group_pieces`: its
    :class:`~statemorph.savepoint.flink.key_group_scan.KeyGroupCut` run piece after piece,
    holding one piece, the hand-over recorded where a run begins)."""

    def __init__(self, src: Source, slice_bytes: int) -> None:
        self.src, self.slice_bytes = src, slice_bytes

    def __call__(self, item: tuple[int, int, int, int]) -> list[KeyGroupPiece]:
        op_index, subtask, key_group, piece_bytes = item
        with _subtask_stream(FlinkSavepoint(self.src), op_index, subtask) as stream:
            ext = next(e for e in stream.extents if e.key_group == key_group)
            return key_group_pieces(stream.source, ext, stream.header.compressed, len(stream.header.states),
                                    stream.where, self.slice_bytes, piece_bytes)


class _PartTask:
    """Phase 1, on an executor: migrate one key-group range (or one piece of a large key group)
    of one subtask stream and write its encoded key groups, back to back, into a part file of the
    scratch area (:func:`~statemorph.savepoint.storage.scratch`: local, or under the remote
    destination), sliced as the driver's ``slice_bytes`` says (the local engine's rule, so the
    bytes are the local engine's). Returns where each key group starts in the part, the part's
    size and the counts (:data:`Part`)."""

    def __init__(self, src: Source, target: Target, threads: int, slice_bytes: int) -> None:
        self.src, self.target, self.threads, self.slice_bytes = src, target, threads, slice_bytes

    def __call__(self, item: tuple[int, int, Any, KeyGroupSplit, Shipped]) -> Part:
        job_index, part, job, split, snaps = item
        sp = FlinkSavepoint(self.src)
        changes = {state: value_migration(read_versioned_snapshot(prior),
                                           read_versioned_snapshot(new).restore_serializer())
                   for state, (_, prior, new) in snaps.items()}
        counts: dict[str, int] = {}
        offsets: list[tuple[int, int]] = []
        with _subtask_stream(sp, job.op_index, job.subtask) as stream:
            out = NewFile(scratch(self.target), _part_name(job.name, part))
            try:
                for kg, data in migrated_encoded_key_groups(stream, changes, sp.operators[job.op_index].max_parallelism,
                                                            key_groups=split.key_groups,
                                                            batch_values=job.batch_values, counts=counts,
                                                            workers=self.threads, slice_bytes=self.slice_bytes,
                                                            piece=split.piece):
                    offsets.append((kg, out.pos))
                    out.write(data)
                out.finish()
            except BaseException:
                out.abort()
                raise
        return job_index, part, offsets, out.pos, counts


def _part_name(name: str, part: int) -> str:
    return f"{name.replace('/', '_')}.{part}"


class _AssembleTask:
    """Phase 2 where a state file cannot be written in place (a remote destination) or becomes
    inline, on an executor: one subtask's new stream = the migrated header, then its parts in
    key-group order (offsets shifted), written where the rewriter expects it (the bytes go from
    the parts to the stream on the executor, never through the driver); the parts are removed.
    Returns the job's :class:`~statemorph.savepoint.flink.StreamResult`."""

    def __init__(self, src: Source, target: Target) -> None:
        self.src, self.target = src, target

    def __call__(self, item: tuple[Any, Shipped, list[Part]]) -> Any:
        job, snaps, parts = item
        counts: dict[str, int] = {s: 0 for s in job.states}
        parts_at = scratch(self.target)
        with _subtask_stream(FlinkSavepoint(self.src), job.op_index, job.subtask) as stream:
            header = migrated_header(stream.header, {s: snaps[s][0] for s in job.states})
            old = stream.handle
            with KeyedStreamWriter(self.target, job.name, header, old.start_key_group, len(old.offsets)) as out:
                for _, part, offsets, size, part_counts in parts:
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
        return _stream_result(handle, job.states, counts)


def _stream_result(handle: KeyGroupsHandle, states: tuple[str, ...], counts: Mapping[str, int]) -> StreamResult:
    buf = DataOutputSerializer()
    write_keyed_handle(buf, handle)
    return StreamResult(buf.get_copy_of_buffer(), tuple((s, counts.get(s, 0)) for s in states))


class _PlaceTask:
    """Phase 2 on a filesystem, on an executor: copy one part, :data:`PLACE_BYTES` at a time,
    into its place in the new state file, which the driver created holding the header; the part
    is removed. A state file is thus assembled by as many tasks as it has parts, all at once."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __call__(self, item: tuple[str, int, str, int]) -> None:
        rel, size, name, offset = item
        parts_at = scratch(self.target)
        path = self.target / check_relative_path(name, "new state file", UnsafeFileError)
        try:
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise output_error(e, path) from e
        try:
            with open_written(parts_at, rel, size, FlinkSavepointError) as f:
                done = 0
                while done < size:
                    data = memoryview(f.read_range(done, min(PLACE_BYTES, size - done), f"part {rel}"))
                    while data:
                        n = os.pwrite(fd, data, offset + done)
                        data, done = data[n:], done + n
            os.fsync(fd)
        except OSError as e:
            raise output_error(e, path) from e
        finally:
            os.close(fd)
        remove_file(parts_at, rel)


def _key_group_offsets(handle: KeyGroupsHandle, head: int, parts: list[Part], where: str) -> list[int]:
    """Where each key group starts in a stream assembled from ``parts`` after a header of
    ``head`` bytes, as :class:`~statemorph.savepoint.flink.KeyedStreamWriter` records it (the
    place of its first piece; 0 for a key group without entries)."""
    offsets = [0] * len(handle.offsets)
    base, last = head, -1
    for _, _, placed, size, _ in parts:
        for kg, pos in placed:
            i = kg - handle.start_key_group
            if not 0 <= i < len(offsets) or kg < last:
                raise FlinkSavepointError(f"{where}: key group {kg} is out of order or outside the stream's range")
            if kg != last:
                offsets[i] = base + pos
            last = kg
        base += size
    return offsets


class _Assembly:
    """The driver's half of phase 2 for one stream job: a state file assembled in place (the
    driver writes the header once, :class:`_PlaceTask` s copy the parts into place, the driver
    records the offsets) or, for a remote destination or an inline result, one
    :class:`_AssembleTask`."""

    def __init__(self, sp: FlinkSavepoint, target: Target, job: Any, snaps: Shipped, parts: list[Part]) -> None:
        self.job, self.snaps, self.parts, self.target = job, snaps, parts, target
        with _subtask_stream(sp, job.op_index, job.subtask) as stream:
            self.old = stream.handle
            self.where = stream.where
            self.head = write_keyed_header(migrated_header(stream.header, {s: snaps[s][0] for s in job.states}))
        self.size = len(self.head) + sum(p[3] for p in parts)
        self.in_place = isinstance(target, Path) and not keep_inline(self.old.delegate, self.size,
                                                                     job.inline_threshold)

    def places(self) -> list[tuple[str, int, str, int]]:
        """Create the state file holding the header; the (part, size, file, offset) to copy."""
        head = NewFile(self.target, self.job.name)
        try:
            head.write(self.head)
            head.finish()
        except BaseException:
            head.abort()
            raise
        out, at = [], len(self.head)
        for _, part, _, size, _ in self.parts:
            out.append((_part_name(self.job.name, part), size, self.job.name, at))
            at += size
        return out

    def result(self) -> StreamResult:
        """Once every part is in place: the file's size checked, the stream's handle."""
        assert isinstance(self.target, Path)
        path = self.target / self.job.name
        try:
            size = os.stat(path, follow_symlinks=False).st_size
        except OSError as e:
            raise output_error(e, path, "read back") from e
        if size != self.size:
            raise FlinkSavepointError(f"{path}: {size} bytes after the assembly, {self.size} expected")
        offsets = _key_group_offsets(self.old, len(self.head), self.parts, self.where)
        handle = KeyGroupsHandle(self.old.code, self.old.start_key_group, offsets,
                                 RelativeFileHandle(self.job.name, self.size), self.old.handle_id)
        counts: dict[str, int] = {}
        for *_, part_counts in self.parts:
            for s, n in part_counts.items():
                counts[s] = counts.get(s, 0) + n
        return _stream_result(handle, self.job.states, counts)


def split_stream_jobs(spark: Any, src: Source, shipped: Mapping[tuple[int, str], tuple[bytes, bytes, bytes]],
                      threads: int, tasks: int, task_bytes: int | None = None) -> Any:
    """A ``run_jobs`` for the Flink rewriter (:func:`statemorph.savepoint.flink.rewrite`) in three
    Spark phases; no entry passes through the driver, only plans, handles and counts:

    1. **cut** (only when some key group is stored in more than a task's share): the driver cuts
       every subtask stream to rewrite into key-group ranges of about equal bytes
       (:func:`key_group_splits`, ``tasks`` of them or ``task_bytes`` each, planned from
       ``_metadata``); a key group larger than a share is scanned by a task that finds where it
       is cut into pieces, at the starts of the slices the local engine makes of it;
    2. **migrate**: each range or piece is migrated by a task into a part file, so a savepoint
       makes as many tasks as its bytes allow, whatever its max parallelism;
    3. **assemble**: on a filesystem the driver writes each new state file's header and one task
       per part copies the part into its place (a state file is assembled by many tasks at
       once); the driver records the key groups' offsets. A remote destination (no writes at an
       offset) or an inline result is assembled by one task per stream.

    Every task holds about a slice (:data:`~statemorph.savepoint.flink.key_group_scan.SLICE_BYTES`,
    read here on the driver and shipped, so every task slices as the local engine does) or
    :data:`PLACE_BYTES`, whatever a key group's size.

    ``src`` is a local path every executor sees or a remote
    :class:`~statemorph.savepoint.storage.Location` (each task opens it and reads only its byte
    ranges); the rewriter's target is a local staging directory or the remote destination
    prefix, which the tasks write directly."""

    def run(jobs: list[Any], staging: Target) -> list[Any]:
        if not jobs:
            return []
        target = staging if isinstance(staging, Location) else Path(os.path.abspath(staging))
        slice_bytes = key_group_scan.SLICE_BYTES
        sp = FlinkSavepoint(src)
        op_splits: dict[int, list[KeyGroupSplit]] = {}
        mine: list[list[KeyGroupSplit]] = []
        for job in jobs:
            if job.op_index not in op_splits:
                op_splits[job.op_index] = key_group_splits(sp.operators[job.op_index], tasks, task_bytes=task_bytes,
                                                           cut_above=slice_bytes)
            mine.append([s for s in op_splits[job.op_index] if s.subtask == job.subtask])
        cuts = [(job.op_index, job.subtask, s.key_groups.start, s.cut)
                for job, splits in zip(jobs, mine, strict=True) for s in splits if s.cut]
        pieces = iter(_run_tasks(spark, "cut", cuts, _CutTask(src, slice_bytes)) if cuts else [])
        mine = [[p for s in splits for p in (s.cut_into(next(pieces)) if s.cut else [s])] for splits in mine]
        snaps = [{s: shipped[(job.op_index, s)] for s in job.states} for job in jobs]
        work = [(i, k, job, split, snaps[i]) for i, job in enumerate(jobs) for k, split in enumerate(mine[i])]
        parts = _run_tasks(spark, "migrate", work, _PartTask(src, target, threads, slice_bytes)) if work else []
        by_job: dict[int, list[Part]] = {i: [] for i in range(len(jobs))}
        for p in parts:
            by_job[p[0]].append(p)
        assemblies = [_Assembly(sp, target, job, snaps[i], sorted(by_job[i], key=lambda p: p[1]))
                      for i, job in enumerate(jobs)]
        placed = [a for a in assemblies if a.in_place]
        whole = [a for a in assemblies if not a.in_place]
        places = [item for a in placed for item in a.places()]
        items: list[Any] = [(None, item) for item in places] + [(a.job, (a.job, a.snaps, a.parts)) for a in whole]
        done = _run_tasks(spark, "assemble", items, _Assembler(src, target)) if items else []
        results = {id(a): a.result() for a in placed}
        results.update({id(a): r for a, r in zip(whole, done[len(places):], strict=True)})
        if parts:
            remove_scratch(target)
        return [results[id(a)] for a in assemblies]

    return run


class _Assembler:
    """A task of the assemble phase: a part put in place (:class:`_PlaceTask`) or a whole stream
    assembled (:class:`_AssembleTask`), as the driver chose for its state file."""

    def __init__(self, src: Source, target: Target) -> None:
        self.whole = _AssembleTask(src, target)
        self.place = _PlaceTask(target) if isinstance(target, Path) else None

    def __call__(self, item: tuple[Any, Any]) -> Any:
        job, work = item
        if job is None and self.place is not None:
            return self.place(work)
        return self.whole(work)


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
