"""Rewriting a canonical Flink savepoint with migrated values, atomically.

Only the keyed-state streams of subtasks holding a changed state are rewritten: keys, key groups
and every other state's entries are copied verbatim, the changed states' values go through the
caller's migration in batches (per ~64k values, across key groups), their serializer snapshots are
replaced in the header, offsets and sizes are recomputed, and each key group is Snappy-framed
again when the source was compressed. Everything else (other operators, operator state, timers,
master and coordinator state, the CheckpointProperties trailer) is carried over byte for byte;
unchanged files are hard-linked (copied across file systems; copied server-side within one remote
filesystem). The new savepoint is written the way every statemorph savepoint is
(:class:`~statemorph.savepoint.files.StagedDirectory`): the destination claimed exclusively, a
recognisable temporary directory next to it (removed on failure and on SIGINT / SIGTERM, and by a
later run when a killed run left it), fsync, one rename; it appears complete or not at all, a
file-system failure is one :class:`~statemorph.errors.OutputError` line naming the path, and the
source is only ever read (an output inside it is refused). A remote destination prefix gets the
object-store form of the same promise (:class:`~statemorph.savepoint.storage.StagedPrefix`)."""

from __future__ import annotations

import contextvars
import copy
import errno
import os
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ...bulk.serial_clock import PARALLEL, WRITE, timed
from ...errors import DestinationError, FlinkSavepointError, OutputError, SavepointPathError, UnsupportedStateError
from ...io import DataInputDeserializer, DataOutputSerializer
from ...typeutils import SnapshotRegistry
from ..files import StagedDirectory, destination_taken, inside, output_error
from ..storage import Location, StagedPrefix, Target, copy_server_side, stream_copy
from .envelope import snapshot_from_envelope
from .files import SavepointDirectory
from .handles import (
    ByteStreamHandle,
    FileHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
    StreamHandle,
    read_keyed_handle,
    write_keyed_handle,
)
from .keyed_header import VALUE_SERIALIZER, StateMetaInfo
from .keyed_writer import KeyedStreamWriter, keep_inline
from .layout import FieldCodec
from .metadata import METADATA_FILE_NAME, CheckpointMetadata, OperatorState, serialize_metadata
from .migrate_stream import DEFAULT_BATCH_VALUES, ValueMigration, migrated_encoded_key_groups, migrated_header
from .operator_state_migrate import OperatorChanges, check_operator_changes, write_operator_changes
from .reader import FlinkSavepoint, KeyedStream

Changes = Mapping[tuple[str, str], tuple[bytes, ValueMigration]]
DEFAULT_INLINE_THRESHOLD = 20 * 1024
"""Flink's default ``execution.checkpointing.data-inline-threshold``: smaller streams live in
``_metadata``."""
MIGRATABLE = ("value", "list", "map", "reducing", "aggregating")


@dataclass
class FlinkRewriteResult:
    """What a rewrite did: per (operator, state) the number of values migrated, and the files."""

    migrated: dict[tuple[str, str], int]
    rewritten_streams: int
    carried_files: int


def rewrite(
    src_dir: str | os.PathLike[str] | Location,
    dst_dir: str | os.PathLike[str] | Location,
    changes: Changes,
    *,
    registry: SnapshotRegistry | None = None,
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
    batch_values: int = DEFAULT_BATCH_VALUES,
    run_jobs: RunJobs | None = None,
    threads: int = 1,
    run_copies: RunCopies | None = None,
    operator_changes: OperatorChanges | None = None,
) -> FlinkRewriteResult:
    """Write ``dst_dir``: ``src_dir`` with the states in ``changes`` migrated.

    ``run_jobs`` runs the per-stream jobs (:class:`StreamJob`, one per subtask stream holding a
    changed state) and returns their results in order; by default they run here
    (:func:`run_local_jobs`: with ``threads`` > 1, two streams at a time on one set of
    workers). A parallel runner (Spark) runs :func:`run_stream_job` for each job where the files
    are.
    ``run_copies`` streams the unchanged files that a remote store cannot copy inside itself
    (:data:`RunCopies`; by default here).

    ``changes`` maps ``(operator uid or uid hash, state name)`` to ``(envelope, migrate)``:
    ``envelope`` is the new PER-VALUE serializer snapshot in Flink's top-level form (``i32 2 ‖
    UTF class ‖ i32 version ‖ payload``; the list element, the map value, the value without its
    TTL wrapper: List, Map and TTL wrappers are kept), and ``migrate`` turns a ``pa.BinaryArray``
    of old per-value bytes (as the Parquet form stores them: no TTL timestamp, no map null flag,
    one list element per item) into an array of new bytes of the same length.
    ``operator_changes`` does the same for operator states (list elements, broadcast map values;
    :mod:`.operator_state_migrate`), whose streams are rewritten here. ``threads``: the
    worker threads (key groups are read, migrated and compressed in parallel while each job
    writes; ``migrate`` is then called from those threads).

    Either side may be remote (a URI or a :class:`~statemorph.savepoint.storage.Location`): a
    remote source is read in place (byte ranges), a remote destination is written as
    :class:`~statemorph.savepoint.storage.StagedPrefix` describes (``_metadata`` last, nothing
    left behind on failure).
    """
    remote = Location.of(dst_dir)
    if remote is not None:
        return _rewrite_to_prefix(src_dir, remote, changes, registry, inline_threshold, batch_values, run_jobs,
                                  threads, run_copies, operator_changes)
    dst = Path(dst_dir)  # type: ignore[arg-type]
    if destination_taken(dst):
        raise DestinationError(f"{dst}: already exists; a savepoint is never overwritten")
    src = FlinkSavepoint(src_dir, registry)
    plan = _plan(src, changes, registry)
    op_plan = check_operator_changes(src, operator_changes or {}, registry)
    if not dst.parent.is_dir():
        raise DestinationError(f"{dst}: the parent directory does not exist")
    local_src = None if isinstance(src_dir, Location) or src.directory.location is not None else src_dir
    with StagedDirectory(dst, source=local_src) as staged:
        try:
            report, metadata = _write(src, plan, staged.temp, inline_threshold, batch_values, run_jobs, threads,
                                      run_copies, op_plan)
            _write_file(staged.temp / METADATA_FILE_NAME, metadata)
            return report
        except OSError as e:  # a write the helpers below did not name (e.g. in a Spark task)
            raise output_error(e, getattr(e, "filename", None) or staged.temp, "write") from e


def _rewrite_to_prefix(src_dir: str | os.PathLike[str] | Location, dst: Location, changes: Changes,
                       registry: SnapshotRegistry | None, inline_threshold: int, batch_values: int,
                       run_jobs: RunJobs | None, threads: int, run_copies: RunCopies | None,
                       operator_changes: OperatorChanges | None = None) -> FlinkRewriteResult:
    """:func:`rewrite` into a remote prefix (:class:`~statemorph.savepoint.storage.StagedPrefix`):
    stream files written at their final names, unchanged files copied server-side, ``_metadata``
    last; on any failure nothing is left under the prefix."""
    src = FlinkSavepoint(src_dir, registry)
    plan = _plan(src, changes, registry)
    op_plan = check_operator_changes(src, operator_changes or {}, registry)
    with StagedPrefix(dst, source=src.directory.location) as staged:
        try:
            report, metadata = _write(src, plan, staged.temp, inline_threshold, batch_values, run_jobs, threads,
                                      run_copies, op_plan)
            staged.commit(METADATA_FILE_NAME, metadata)
            return report
        except OSError as e:
            raise OutputError(f"cannot write {dst.uri}: {e}") from e


@dataclass
class _Change:
    op: OperatorState
    state: str
    envelope: bytes
    migrate: ValueMigration
    label: tuple[str, str]


def _plan(src: FlinkSavepoint, changes: Changes, registry: SnapshotRegistry | None) -> list[_Change]:
    out = []
    for (ident, state), (envelope, migrate) in changes.items():
        op = src.operator(ident)
        found = False
        for _, stream in src.keyed_streams(op):
            for m in stream.header.states:
                if m.name == state:
                    found = True
                    check_migratable(op, m)
        if not found:
            raise FlinkSavepointError(f"{src.path}: {op.label()} has no keyed state named {state!r}")
        snapshot_from_envelope(envelope, registry)  # fail before writing anything
        out.append(_Change(op, state, envelope, migrate, (ident, state)))
    return out


def check_migratable(op: OperatorState, m: StateMetaInfo) -> None:
    if m.kind not in MIGRATABLE:
        raise FlinkSavepointError(
            f"{op.label()} state {m.name!r} is {m.kind} state ({m.state_type}); only value, list, map, reducing and "
            f"aggregating state values can be migrated"
        )
    value, _ = m.value_snapshot_unwrapped()
    if value is None:
        top = m.serializer(VALUE_SERIALIZER)
        raise FlinkSavepointError(
            f"{op.label()} state {m.name!r}: its value serializer snapshot "
            f"{top.class_name if top else '(none)'} cannot be taken apart into the per-value snapshot"
        )
    if m.kind == "list" and not FieldCodec(value, "list element").known:
        raise UnsupportedStateError(
            f"{op.label()} state {m.name!r}: unsupported state: list elements of {value.class_name} cannot be told "
            f"apart (the snapshot class is not registered), so the list cannot be migrated"
        )


@dataclass(frozen=True)
class StreamJob:
    """One subtask's keyed-state stream to rewrite into ``name`` of the staging directory: the
    unit of parallel work (it reads only that stream, writes only that file)."""

    op_index: int
    subtask: int
    name: str
    states: tuple[str, ...]
    inline_threshold: int
    batch_values: int
    threads: int = 1


@dataclass(frozen=True)
class StreamResult:
    """What a stream job hands back: the new keyed handle in ``_metadata``'s own encoding (plain
    bytes, parsed by the driver like any handle) and the values migrated per state."""

    handle: bytes
    counts: tuple[tuple[str, int], ...]


RunCopies = Callable[[list[tuple[str, int | None]], Target], None]
"""Streams unchanged files (relative name, size ``_metadata`` records, if any) from the source
into the target: the files a store cannot copy inside itself. A parallel runner (Spark) streams
them on the executors."""
RunJobs = Callable[[list[StreamJob], Target], list[StreamResult]]
"""Runs the stream jobs into the staging directory or remote destination prefix (the second
argument), results in job order."""


def run_stream_job(src: FlinkSavepoint, job: StreamJob, changes: Mapping[str, tuple[bytes, ValueMigration]],
                   tmp: str | os.PathLike[str] | Location, pool: Executor | None = None) -> StreamResult:
    """Rewrite one subtask stream of ``src`` into the staging directory ``tmp``; ``changes`` maps
    the job's state names to (new per-value envelope, value migration). ``pool``: worker threads
    shared with the jobs that run at the same time (:func:`run_local_jobs`)."""
    op = src.operators[job.op_index]
    for st, stream in src.keyed_streams(op):
        if st.index != job.subtask:
            continue
        chs = [_Change(op, name, *changes[name], (op.uid or op.uid_hash, name)) for name in job.states]
        target = tmp if isinstance(tmp, Location) else Path(tmp)
        handle, counts = _rewrite_stream(stream, chs, target, job.name, job.inline_threshold, job.batch_values,
                                         op.max_parallelism, job.threads, pool)
        out = DataOutputSerializer()
        write_keyed_handle(out, handle)
        return StreamResult(out.get_copy_of_buffer(), tuple((label[1], n) for label, n in counts.items()))
    raise FlinkSavepointError(f"{src.path}: {op.label()} has no keyed stream of subtask {job.subtask}")


def _write(src: FlinkSavepoint, plan: list[_Change], tmp: Target, threshold: int, batch_values: int,
           run_jobs: RunJobs | None = None, threads: int = 1,
           run_copies: RunCopies | None = None,
           op_plan: dict[int, dict[str, Any]] | None = None) -> tuple[FlinkRewriteResult, bytes]:
    """Every file of the new savepoint but ``_metadata`` into ``tmp``; returns the report and
    the new ``_metadata`` bytes (the caller writes them last)."""
    meta = copy.deepcopy(src.metadata)
    by_op: dict[int, list[_Change]] = {}
    for ch in plan:
        by_op.setdefault(id(ch.op), []).append(ch)
    jobs: list[StreamJob] = []
    replaced: set[str] = set()
    for op_index, op in enumerate(src.operators):
        op_changes = by_op.get(id(op), [])
        for st, stream in src.keyed_streams(op) if op_changes else ():
            mine = tuple(ch.state for ch in op_changes if any(m.name == ch.state for m in stream.header.states))
            if not mine:
                continue
            old_delegate = stream.handle.delegate
            jobs.append(StreamJob(op_index, st.index, _stream_file_name(src.directory, old_delegate), mine,
                                  threshold, batch_values, threads))
            if isinstance(old_delegate, (FileHandle, RelativeFileHandle)):
                replaced.add(src.directory.relative_name(old_delegate))
    if run_jobs is None:
        def run_jobs(js: list[StreamJob], staging: Target) -> list[StreamResult]:
            return run_local_jobs(js, lambda j, pool: run_stream_job(src, j, {
                ch.state: (ch.envelope, ch.migrate) for ch in by_op[id(src.operators[j.op_index])]}, staging, pool),
                threads)
    results = run_jobs(jobs, tmp)
    migrated = {ch.label: 0 for ch in plan}
    for job, result in zip(jobs, results, strict=True):
        op = src.operators[job.op_index]
        new_st = next(s for s in meta.operators[job.op_index].subtasks or []
                      if s.index == job.subtask and not s.finished)
        new_st.managed_keyed = _parse_keyed_handle(result.handle, f"{op.label()} subtask {job.subtask}")
        labels = {ch.state: ch.label for ch in by_op[id(op)]}
        for state, n in result.counts:
            migrated[labels[state]] += n
    op_counts, op_replaced, op_streams = write_operator_changes(src, meta, op_plan or {}, tmp, threshold)
    migrated.update(op_counts)
    replaced |= op_replaced
    carried = carry_files(src.directory, meta, replaced, tmp, run_copies)
    src.directory.relativize(meta)
    return FlinkRewriteResult(migrated, len(jobs) + op_streams, carried), serialize_metadata(meta)


STREAMS_AT_ONCE = 2
"""Subtask streams a local run rewrites at the same time: the next one starts while the workers
finish the last key groups of the one before, so no worker waits between files; two are enough
for that, and memory stays that of two streams in flight whatever the parallelism."""


def run_local_jobs(jobs: list[StreamJob], run: Callable[[StreamJob, Executor | None], StreamResult],
                   threads: int) -> list[StreamResult]:
    """The stream jobs of a local run, results in job order. With ``threads`` > 1, up to
    :data:`STREAMS_AT_ONCE` jobs run at once, each keeping its own file's order
    (:class:`~statemorph.bulk.chunks.PlacedInOrder`), their key groups taken by one set of
    ``2 × threads`` workers in the order the jobs hand them in; each job runs in a copy of this
    thread's context (the run's :mod:`~statemorph.bulk.serial_clock`, inside its parallel stage).

    The first job to fail stops the run: the jobs not started never start, the work queued for
    the workers is dropped (the job running beside it then fails on its next hand-over, and its
    error is not the one raised), and its error is raised once the threads have stopped; so does
    an interrupt of this thread."""
    if threads <= 1 or len(jobs) <= 1:
        return [run(j, None) for j in jobs]
    with timed(PARALLEL), ThreadPoolExecutor(2 * threads, "statemorph-worker") as workers, \
            ThreadPoolExecutor(STREAMS_AT_ONCE, "statemorph-stream") as streams:
        futures = [streams.submit(contextvars.copy_context().run, run, j, workers) for j in jobs]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f.exception() for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                raise failed
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            workers.shutdown(wait=False, cancel_futures=True)
            raise


def _parse_keyed_handle(data: bytes, where: str) -> KeyGroupsHandle:
    src = DataInputDeserializer(data)
    handle = read_keyed_handle(src, where)
    if not isinstance(handle, KeyGroupsHandle) or src.available() != 0:
        raise FlinkSavepointError(f"{where}: a rewritten stream handed back a handle that is not one key-groups handle")
    return handle


def _stream_file_name(d: SavepointDirectory, delegate: StreamHandle) -> str:
    if isinstance(delegate, (FileHandle, RelativeFileHandle)):
        return d.relative_name(delegate)
    return str(uuid.uuid4())


def _rewrite_stream(
    stream: KeyedStream, changes: list[_Change], tmp: Target, name: str, threshold: int, batch_values: int,
    max_parallelism: int, threads: int = 1, pool: Executor | None = None,
) -> tuple[KeyGroupsHandle, dict[tuple[str, str], int]]:
    header = migrated_header(stream.header, {ch.state: ch.envelope for ch in changes})
    counts: dict[str, int] = {}
    old = stream.handle
    with timed(PARALLEL):  # the workers run from here; this thread keeps the order (and writes, to an object store)
        with timed(WRITE):
            out = KeyedStreamWriter(tmp, name, header, old.start_key_group, len(old.offsets))
        with out:
            placed = out.placed()  # a local file: the workers write their key groups at their places
            for kg, data in migrated_encoded_key_groups(stream, {ch.state: ch.migrate for ch in changes},
                                                        max_parallelism, batch_values=batch_values, counts=counts,
                                                        workers=threads, placed=placed, pool=pool):
                with timed(WRITE):
                    if placed is None:
                        out.add_encoded_key_group(kg, data)
                    else:
                        out.add_written_key_group(kg, data)
            with timed(WRITE):
                inline = keep_inline(old.delegate, out.pos, threshold)
                inline_name = old.delegate.name if isinstance(old.delegate, ByteStreamHandle) else name
                handle = out.finish(inline, inline_name, old.code, old.handle_id)
    return handle, {ch.label: counts.get(ch.state, 0) for ch in changes}


def carry_files(d: SavepointDirectory, meta: CheckpointMetadata, replaced: set[str], tmp: Target,
                run_copies: RunCopies | None = None) -> int:
    """Hard-link (or copy) every file the new metadata still references, plus any other regular
    file at the top of the source directory; the replaced streams are not carried. Each is opened
    first (a regular file inside the source, of the size ``_metadata`` records). A remote source
    or destination is copied inside the store when both are on one filesystem
    (:func:`~statemorph.savepoint.storage.copy_server_side`: the bytes never pass through this
    process); what the store cannot copy is streamed by ``run_copies`` (default: here)."""
    if isinstance(tmp, Location) or d.location is not None:
        return _carry_objects(d, meta, replaced, tmp, run_copies)
    n = 0
    for rel, size in d.carried_files(meta, replaced).items():
        target = inside(tmp, rel, f"{d.path}: carried file", SavepointPathError)
        if target.exists():
            continue
        with d.files.open(rel, size=size, recorded_in=METADATA_FILE_NAME) as f:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(d.resolve(RelativeFileHandle(rel, f.size)), target, follow_symlinks=False)
                    linked = os.lstat(target)
                    if (linked.st_dev, linked.st_ino) != f.identity:  # replaced since it was checked
                        os.unlink(target)
                        f.copy_to(target)
                except OSError as e:
                    if e.errno not in _CANNOT_LINK:
                        raise
                    f.copy_to(target)
            except OSError as e:
                raise output_error(e, target) from e
        n += 1
    return n


def _carry_objects(d: SavepointDirectory, meta: CheckpointMetadata, replaced: set[str], tmp: Target,
                   run_copies: RunCopies | None) -> int:
    """Each file is checked here (a regular file of the recorded size: file information only),
    copied inside the store when it can be, and otherwise streamed by ``run_copies``."""
    files = d.carried_files(meta, replaced)
    src = d.location
    pending = []
    for rel, size in files.items():
        with d.files.open(rel, size=size, recorded_in=METADATA_FILE_NAME) as f:
            if src is not None and copy_server_side(src.child(rel), tmp, rel, f.size):
                continue
        pending.append((rel, size))
    if pending:
        (run_copies or partial(stream_files, d))(pending, tmp)
    return len(files)


def stream_files(d: SavepointDirectory, files: list[tuple[str, int | None]], tmp: Target) -> None:
    """The default :data:`RunCopies`: stream each file through this process, opened with the
    checks of :meth:`SavepointDirectory.open` (size as ``_metadata`` records)."""
    for rel, size in files:
        with d.files.open(rel, size=size, recorded_in=METADATA_FILE_NAME) as f:
            try:
                stream_copy(f, tmp, rel)
            except OSError as e:
                raise output_error(e, f"{tmp.uri if isinstance(tmp, Location) else tmp}/{rel}") from e


_CANNOT_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
"""Hard-linking refused (another file system, a file system without links): the file is copied."""


def _write_file(path: Path, data: bytes) -> None:
    try:
        with open(path, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise output_error(e, path) from e
