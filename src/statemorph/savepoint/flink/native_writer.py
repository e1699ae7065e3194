"""Writing a native savepoint: a native savepoint or retained RocksDB checkpoint, with some
states migrated, as a self-contained native savepoint that Flink restores into its RocksDB
backend (``execution.state-recovery.path``) without re-serializing a single unchanged entry.

Per subtask (one RocksDB instance):

- an instance holding no migrated state is carried as it is: every RocksDB file and the meta data
  stream hard-linked (copied across file systems; inline ones stay inline), its handle unchanged
  but for the file names, which become relative ones of the new directory. It is opened by RocksDB
  first (read-only), so a missing or truncated file or a MANIFEST naming other files is refused as
  the readers refuse it; its SST blocks are not read again (their checksums travel with them);
- an instance holding one is rebuilt: its files are placed in a private staging directory inside
  the output's staging directory (SSTs hard-linked, MANIFEST / CURRENT / OPTIONS copied: the
  input is never written) and opened read-write with the instance's own OPTIONS (Flink's merge
  operator and table options; automatic compactions off, so no carried SST is rewritten). Each
  migrated column family is dropped and created again with the same options, and its entries, read
  from the input instance in key order and migrated (value-like states without TTL as flat batches
  through the Arrow migration, :func:`_migrated_batches`; every other kind through
  :func:`.migrate_stream.migrated_key_groups`: the value layout of every state kind, TTL timestamps
  and map null flags kept), are written by the SST writer (:mod:`.sst_writer`, in the column
  family's table format; RocksDB's ``SstFileWriter`` for a format it does not write, said in
  :attr:`NativeWriteResult.writers`) as files of about :data:`SST_TARGET_BYTES` and ingested. A RocksDB
  checkpoint of the staged instance is the new instance: its SSTs of the other column families are
  the input's, checked to be the same bytes and carried from the input as they are; the new SSTs,
  MANIFEST, CURRENT and OPTIONS are new files. The meta data stream holds the state meta infos with
  the new serializer snapshots (:func:`.migrate_stream.migrated_header`, written by
  :func:`.keyed_header.write_keyed_header`, as for canonical savepoints).

Each new handle is the one Flink 2.3 writes for a native savepoint (``IncrementalRemoteKeyedStateHandle``,
type code 11): every file private, named by a relative file handle, a new file inline in
``_metadata`` as the input's file of its kind was (:func:`.keyed_writer.keep_inline`: the job's
own inline threshold, as far as it shows; else Flink's default), the checkpointed size the sum of
the files and the meta data,
a new backend id and handle id for a rebuilt instance. Operator-state streams are copied (a
checkpoint's absolute paths become relative ones); the output is staged
(:class:`~statemorph.savepoint.files.StagedDirectory`, through
:meth:`.native.NativeSavepoint.write_savepoint`): it appears whole or not at all.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import FlinkSavepointError, OutputError, StatemorphError, UnsupportedStateError
from ...typeutils import SnapshotRegistry
from ..files import output_error
from .envelope import snapshot_from_envelope
from .handles import ByteStreamHandle, FileHandle, RelativeFileHandle, StreamHandle
from .keyed_blocks import StateRun
from .keyed_header import KeyedHeader, write_keyed_header
from .keyed_writer import keep_inline
from .layout import StateLayout
from .metadata import OperatorState, SubtaskState
from .migrate_stream import ValueMigration, _migrate_array, migrated_header, migrated_key_groups
from .native import NativeSavepoint, RocksInstance, check_raw, instance_options, place_file, rocks_file_name
from .native_handles import INCREMENTAL_HANDLE_V2, IncrementalHandle, RocksFile
from .native_view import RocksKeyedStream
from .operator_ids import find_operator
from .rewrite import DEFAULT_INLINE_THRESHOLD, check_migratable
from .sst import FlatBatch, flat_batch, latest_options
from .sst_writer import SstFileBuilder, SstFormat, SstWriteUnsupported, sst_format

Changes = Mapping[tuple[str, str], tuple[bytes, ValueMigration]]
"""``(operator uid or uid hash, state)`` → (new per-value snapshot envelope, value migration), as
:func:`.rewrite.rewrite` takes them."""
SST_TARGET_BYTES = 64 << 20
"""The size at which a migrated column family's SST file is closed and the next one begun
(RocksDB's default ``target_file_size_base``)."""
BATCH_ENTRIES = 1 << 16
"""Migrated entries handed to the SST writer at once (state kinds migrated through runs)."""
FLAT_KINDS = ("value", "reducing", "aggregating")
"""State kinds whose entries are migrated as flat batches (without TTL: a value is one per-value
serialized value); list and map state, and TTL, go through the runs of
:func:`.migrate_stream.migrated_key_groups`."""
_CHUNK = 1 << 20
_LOG = logging.getLogger(__name__)


@dataclass
class NativeWriteResult:
    """What writing a native savepoint did: per (operator, state) the values migrated, the
    RocksDB instances rebuilt, and the files (RocksDB files and meta data streams) carried over
    as they are."""

    migrated: dict[tuple[str, str], int] = field(default_factory=dict)
    rebuilt_instances: int = 0
    carried_files: int = 0
    writers: dict[tuple[str, str], str] = field(default_factory=dict)
    """Per (operator, state) migrated, what wrote its SST files: ``"sst"`` (the SST writer,
    :mod:`.sst_writer`) or ``"rocksdb: <reason>"`` (RocksDB's ``SstFileWriter``, for a table format
    the SST writer does not write; also in the log)."""


def write_native(sp: NativeSavepoint, dst: str | os.PathLike[str], changes: Changes, *,
                 registry: SnapshotRegistry | None = None,
                 inline_threshold: int = DEFAULT_INLINE_THRESHOLD) -> NativeWriteResult:
    """Write ``dst``: ``sp`` with the states of ``changes`` migrated, as a native savepoint (see
    the module docstring). Every change is checked (its operator, a keyed state of a migratable
    kind, a readable snapshot) before anything is written; no change at all writes the same
    state as a self-contained native savepoint."""
    writer = _Writer(sp, _resolve(sp, changes, registry), registry, inline_threshold)
    sp.write_savepoint(dst, writer)
    return writer.result


@dataclass(frozen=True)
class _Change:
    envelope: bytes
    migrate: ValueMigration
    label: tuple[str, str]


def _resolve(sp: NativeSavepoint, changes: Changes,
             registry: SnapshotRegistry | None) -> dict[bytes, dict[str, _Change]]:
    """``changes`` per operator id and state name, each checked against the instances' headers."""
    out: dict[bytes, dict[str, _Change]] = {}
    for (ident, state), (envelope, migrate) in changes.items():
        op = find_operator(sp.metadata.operators, ident, lambda o: o)
        if op is None:
            known = ", ".join(o.uid or o.uid_hash for o in sp.metadata.operators)
            raise FlinkSavepointError(f"{sp.path}: no operator with uid or uid hash {ident!r} (operators: {known})")
        found = False
        for iop, st, handle in sp.instances():
            if iop is op:
                for m in sp.header(op, st, handle).states:
                    if m.name == state:
                        check_migratable(op, m)
                        found = True
        if not found:
            if any(st.managed_keyed is not None for st in op.subtasks or []):
                raise UnsupportedStateError(
                    f"{sp.path}: {op.label()}: keyed state in key-group streams, not RocksDB instances, cannot be "
                    f"migrated into a native savepoint; migrate --to canonical")
            raise FlinkSavepointError(f"{sp.path}: {op.label()} has no keyed state named {state!r}")
        snapshot_from_envelope(envelope, registry)  # fail before writing anything
        out.setdefault(op.operator_id, {})[state] = _Change(envelope, migrate, (ident, state))
    return out


class _StateStream(RocksKeyedStream):
    """One column family of an instance as a keyed stream whose key groups hold that state only,
    read in one pass (what :func:`.migrate_stream.migrated_key_groups` takes)."""

    def __init__(self, instance: RocksInstance, where: str, sid: int) -> None:
        super().__init__(lambda: instance, instance.header, instance.handle, where)
        self.sid = sid

    def key_groups(self, only: range | None = None) -> Iterator[tuple[int, list[StateRun]]]:
        p = self.instance.prefix
        for run in self.instance.state_runs(self.sid, only):
            yield int.from_bytes(run.keys[0][:p], "big"), [run]


class _Writer:
    """The :data:`.native.InstanceWriter` of a native savepoint: each instance carried or rebuilt."""

    def __init__(self, sp: NativeSavepoint, changes: dict[bytes, dict[str, _Change]],
                 registry: SnapshotRegistry | None, inline_threshold: int) -> None:
        self.sp = sp
        self.changes = changes
        self.registry = registry
        self.threshold = inline_threshold
        self.result = NativeWriteResult({ch.label: 0 for chs in changes.values() for ch in chs.values()})

    def __call__(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle, out: Path, name: str) -> None:
        where = f"{self.sp.path}: {op.label()} subtask {st.index}"
        header = self.sp.header(op, st, handle)
        names = {m.name for m in header.states}
        mine = {state: ch for state, ch in self.changes.get(op.operator_id, {}).items() if state in names}
        if not mine:
            with self.sp.open_instance(op, st, handle, header):  # RocksDB checks its MANIFEST: these files, these sizes
                pass
            st.managed_native = self._carried(handle, out, name, where)
            return
        new_header = migrated_header(header, {state: ch.envelope for state, ch in mine.items()}, self.registry)
        data = write_keyed_header(new_header)
        meta: StreamHandle = ByteStreamHandle(f"{name}-meta", data)
        if not self._inline(len(data), handle.meta):
            meta = RelativeFileHandle(f"{name}-meta", len(data))
            try:
                with open(out / meta.relative_path, "xb") as f:
                    f.write(data)
            except OSError as e:
                raise output_error(e, out / meta.relative_path) from e
        files = self._rebuilt(op, st, handle, header, mine, out, name, where)
        size = sum(_size(f.handle) for f in files) + _size(meta)
        st.managed_native = IncrementalHandle(INCREMENTAL_HANDLE_V2, handle.checkpoint_id, str(uuid.uuid4()),
                                              handle.start_key_group, handle.key_group_count, size, meta, [],
                                              files, str(uuid.uuid4()))
        self.result.rebuilt_instances += 1

    # -- an instance carried as it is ------------------------------------------------------------

    def _carried(self, handle: IncrementalHandle, out: Path, name: str, where: str) -> IncrementalHandle:
        """``handle`` with every file carried into ``out``; all private, as in Flink's own native
        savepoints (a checkpoint's shared files are this savepoint's own now)."""
        files = [RocksFile(f.local_name, self._carry(f.handle, out, f"{name}-{rocks_file_name(f.local_name, where)}",
                                                     where)) for f in handle.files()]
        meta = self._carry(handle.meta, out, f"{name}-meta", where)
        return IncrementalHandle(handle.code, handle.checkpoint_id, handle.backend_id, handle.start_key_group,
                                 handle.key_group_count, handle.checkpointed_size, meta, [], files, handle.handle_id)

    def _carry(self, h: StreamHandle, out: Path, new_name: str, where: str) -> StreamHandle:
        """One file of the input, as it is: inline stays inline, a file is hard-linked (copied
        across file systems) to ``new_name`` (checked: a plain name)."""
        self.result.carried_files += 1
        if not isinstance(h, (FileHandle, RelativeFileHandle)):
            return h
        try:
            place_file(self.sp, RocksFile(new_name, h), out, where)
        except OSError as e:
            raise output_error(e, out / new_name) from e
        return RelativeFileHandle(new_name, h.size)

    def _inline(self, size: int, like: StreamHandle | None) -> bool:
        """Whether a new file of the instance goes into ``_metadata``: as the input's file ``like``
        it was (:func:`.keyed_writer.keep_inline`: the job's own inline threshold, as far as it
        shows), else below Flink's default threshold."""
        return keep_inline(like, size, self.threshold) if like is not None else size < self.threshold

    # -- an instance rebuilt -----------------------------------------------------------------------

    def _rebuilt(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle, header: KeyedHeader,
                 mine: dict[str, _Change], out: Path, name: str, where: str) -> list[RocksFile]:
        """The files of the new instance (see the module docstring), written into ``out``."""
        work = Path(tempfile.mkdtemp(prefix=f".{name}-rocksdb-", dir=out))
        try:
            db_dir = work / "db"
            db_dir.mkdir()
            for f in handle.files():
                place_file(self.sp, f, db_dir, where, link=f.local_name.endswith(".sst"))
            with self.sp.open_instance(op, st, handle, header) as instance:
                checkpoint = self._migrated_instance(instance, header, mine, db_dir, work, op.max_parallelism, where)
            return self._collect(handle, checkpoint, out, name, where)
        except OSError as e:
            raise output_error(e, getattr(e, "filename", None) or work) from e
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _migrated_instance(self, instance: RocksInstance, header: KeyedHeader, mine: dict[str, _Change],
                           db_dir: Path, work: Path, max_parallelism: int, where: str) -> Path:
        """Open the staged instance read-write, replace each migrated column family by SSTs of its
        migrated entries, and take a RocksDB checkpoint of it; returns the checkpoint's directory."""
        try:
            rd, opts, families = instance_options(db_dir)
            opts.set_disable_auto_compactions(True)
            for o in families.values():
                o.set_disable_auto_compactions(True)
            db = rd.Rdict(str(db_dir), options=opts, column_families=families)
        except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
            raise FlinkSavepointError(f"{where}: RocksDB cannot open the instance: {_said(e, work)}") from e
        try:
            check_raw(db, where)
            for state, ch in mine.items():
                sid, _ = header.state(state)
                options = families.get(state)
                if options is None:
                    raise FlinkSavepointError(f"{where}: state {state!r} has no column family in the instance")
                ssts = self._write_state(rd, instance, sid, state, ch, options, work, max_parallelism)
                try:
                    db.drop_column_family(state)
                    cf = db.create_column_family(state, options)
                    if ssts:
                        ingest = rd.IngestExternalFileOptions()
                        ingest.set_move_files(True)
                        cf.ingest_external_file([str(p) for p in ssts], ingest)
                    del cf
                except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
                    raise OutputError(f"{where}: state {state!r}: RocksDB cannot replace the column family: "
                                      f"{_said(e, work)}") from e
            checkpoint = work / "checkpoint"
            try:
                rd.Checkpoint(db).create_checkpoint(str(checkpoint))
            except Exception as e:
                raise OutputError(f"{where}: RocksDB cannot write the new instance: {_said(e, work)}") from e
            return checkpoint
        finally:
            db.close()

    def _write_state(self, rd: Any, instance: RocksInstance, sid: int, state: str, ch: _Change, options: Any,
                     work: Path, max_parallelism: int) -> list[Path]:
        """The migrated entries of column family ``sid``, in key order, as SST files in ``work``:
        written by the SST writer (:mod:`.sst_writer`) in batches of flat buffers, or, for a table
        format it does not write, by RocksDB's ``SstFileWriter`` one entry at a time (the reason
        in :attr:`NativeWriteResult.writers` and the log)."""
        counts: dict[str, int] = {state: 0}
        fmt = self._sst_format(rd, options, state, ch, work, sid)
        layout = StateLayout(instance.header.state(state)[1], instance.header.key_serializer, max_parallelism,
                             f"{instance.where} state {state!r}")
        try:
            if fmt is not None and layout.kind in FLAT_KINDS and not layout.ttl:
                paths = _sst_files(fmt, _migrated_batches(instance, sid, layout.where, ch.migrate, counts, state),
                                   work, sid)
            else:
                stream = _StateStream(instance, instance.where, sid)
                groups = migrated_key_groups(stream, {state: ch.migrate}, max_parallelism, counts=counts)
                if fmt is None:
                    paths = _rocksdb_sst_files(rd, options, groups, work, sid)
                else:
                    paths = _sst_files(fmt, _runs_in_batches(groups), work, sid)
        except StatemorphError:
            raise
        except OSError as e:
            raise output_error(e, getattr(e, "filename", None) or work) from e
        except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
            raise OutputError(f"{instance.where}: state {state!r}: RocksDB cannot write an SST file: "
                              f"{_said(e, work)}") from e
        self.result.migrated[ch.label] += counts.get(state, 0)
        return paths

    def _sst_format(self, rd: Any, options: Any, state: str, ch: _Change, work: Path, sid: int) -> SstFormat | None:
        """The format the SST writer writes column family ``state`` in (:func:`.sst_writer.sst_format`:
        its OPTIONS and a one-entry file of RocksDB's ``SstFileWriter`` with its options), or None
        when it does not write it: then RocksDB's writer is used, and the reason recorded."""
        template = work / f"{sid}-format.sst"
        try:
            w = rd.SstFileWriter(options)
            w.open(str(template))
            w[b"\0"] = b""
            w.finish()
            fmt = sst_format(latest_options(work / "db"), state, template)
        except SstWriteUnsupported as e:
            self.result.writers[ch.label] = f"rocksdb: {e}"
            _LOG.info("%s: state %r is written by RocksDB's SstFileWriter, not the SST writer: %s",
                      self.sp.path, state, e)
            return None
        except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
            raise OutputError(f"{self.sp.path}: state {state!r}: RocksDB cannot write an SST file: "
                              f"{_said(e, work)}") from e
        finally:
            template.unlink(missing_ok=True)
        self.result.writers.setdefault(ch.label, "sst")
        return fmt

    def _collect(self, handle: IncrementalHandle, checkpoint: Path, out: Path, name: str,
                 where: str) -> list[RocksFile]:
        """The checkpoint's files as the new instance's: an SST of the input (a column family not
        migrated) carried from the input once it is checked to be the same bytes, the others
        (new SSTs, MANIFEST, CURRENT, OPTIONS) moved into ``out``. RocksDB's empty write-ahead log
        (nothing is written through it) and rocksdict's config file are left out."""
        inputs = {f.local_name: f for f in handle.files()}
        files = []
        for p in sorted(checkpoint.iterdir(), key=lambda q: q.name):
            size = p.stat().st_size
            if p.name == "rocksdict-config.json" or (p.name.endswith(".log") and size == 0):
                continue
            new_name = f"{name}-{p.name}"
            old = inputs.get(p.name)
            if old is not None and p.name.endswith(".sst"):
                if not self._is_input(p, old.handle, where):
                    raise FlinkSavepointError(f"{where}: RocksDB file {p.name!r} of the new instance is not the "
                                              f"input's; refused")
                files.append(RocksFile(p.name, self._carry(old.handle, out, new_name, where)))
            elif self._inline(size, _like(handle, p.name)):
                files.append(RocksFile(p.name, ByteStreamHandle(new_name, p.read_bytes())))
            else:
                os.rename(p, out / new_name)
                files.append(RocksFile(p.name, RelativeFileHandle(new_name, size)))
        return files

    def _is_input(self, p: Path, h: StreamHandle, where: str) -> bool:
        """Whether file ``p`` holds the bytes of the input's file ``h``."""
        if isinstance(h, ByteStreamHandle):
            return p.read_bytes() == h.data
        if not isinstance(h, (FileHandle, RelativeFileHandle)):
            return False
        return _same_bytes(p, Path(self.sp.files.resolve(self.sp.namer(h, where))))


def _sst_files(fmt: SstFormat, batches: Iterator[FlatBatch], work: Path, sid: int) -> list[Path]:
    """The migrated entries ``batches`` (in key order) written by the SST writer into ``work``."""
    builder = SstFileBuilder(fmt, work, str(sid), SST_TARGET_BYTES)
    try:
        for b in batches:
            builder.add(b.koff, b.kdata, b.voff, b.vdata, b.n)
        return builder.finish()
    except BaseException:
        builder.abort()
        raise


def _migrated_batches(instance: RocksInstance, sid: int, where: str, migrate: ValueMigration,
                      counts: dict[str, int], state: str) -> Iterator[FlatBatch]:
    """The entries of a value-like state without TTL (each value is one per-value serialized
    value) read as flat batches (:meth:`.native.RocksInstance.state_batches`) with their values
    migrated as Arrow arrays: keys and values never become Python objects."""
    for b in instance.state_batches(sid):
        if int(b.voff[b.n]) >= 1 << 31:
            raise FlinkSavepointError(f"{where}: a batch of {int(b.voff[b.n])} value bytes")
        values = pa.Array.from_buffers(pa.binary(), b.n, [None, pa.py_buffer(b.voff.astype(np.int32)),
                                                          pa.py_buffer(b.vdata)])
        new = _migrate_array(migrate, where, values)
        if isinstance(new, pa.ChunkedArray):
            new = new.combine_chunks()
        if not pa.types.is_binary(new.type) and not pa.types.is_large_binary(new.type):
            raise FlinkSavepointError(f"{where}: the value migration returned {new.type} values, not binary")
        width = np.int64 if pa.types.is_large_binary(new.type) else np.int32
        offsets = np.frombuffer(new.buffers()[1], width)[new.offset:new.offset + b.n + 1].astype(np.int64)
        data = new.buffers()[2]
        vdata = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        counts[state] += b.n
        yield FlatBatch(b.koff, b.kdata, offsets, vdata, b.n)


def _runs_in_batches(groups: Iterator[tuple[int, list[StateRun]]]) -> Iterator[FlatBatch]:
    """The migrated runs of ``groups`` laid out flat in batches of about :data:`BATCH_ENTRIES`
    entries (list and map state, TTL: migrated per value by :func:`.migrate_stream.migrated_key_groups`)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    for _, runs in groups:
        for run in runs:
            keys += run.keys
            values += run.values
        if len(keys) >= BATCH_ENTRIES:
            yield flat_batch(keys, values)
            keys, values = [], []
    if keys:
        yield flat_batch(keys, values)


def _rocksdb_sst_files(rd: Any, options: Any, groups: Iterator[tuple[int, list[StateRun]]], work: Path,
                       sid: int) -> list[Path]:
    """The migrated runs ``groups`` written by RocksDB's ``SstFileWriter`` (one call an entry)."""
    paths: list[Path] = []
    sst: Any = None
    for _, runs in groups:
        for run in runs:
            if sst is None:
                paths.append(work / f"{sid}-{len(paths)}.sst")
                sst = rd.SstFileWriter(options)
                sst.open(str(paths[-1]))
            for k, v in zip(run.keys, run.values, strict=True):
                sst[k] = v
            if sst.file_size() >= SST_TARGET_BYTES:
                sst.finish()
                sst = None
    if sst is not None:
        sst.finish()
    return paths


def _like(handle: IncrementalHandle, name: str) -> StreamHandle | None:
    """The input's file of the same kind as RocksDB file ``name`` (an SST, ``CURRENT``,
    ``MANIFEST-*``, ``OPTIONS-*``), if it has one."""
    def kind(n: str) -> str:
        return ".sst" if n.endswith(".sst") else n.split("-", 1)[0]

    return next((f.handle for f in handle.files() if kind(f.local_name) == kind(name)), None)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether files ``a`` and ``b`` hold the same bytes (one file by two links, or compared)."""
    if os.path.samefile(a, b):
        return True
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(_CHUNK), fb.read(_CHUNK)
            if x != y:
                return False
            if not x:
                return True


def _size(h: StreamHandle) -> int:
    if isinstance(h, ByteStreamHandle):
        return len(h.data)
    return h.size if isinstance(h, (FileHandle, RelativeFileHandle)) else 0


def _said(e: BaseException, work: Path) -> str:
    """RocksDB's message on one line, without the private staging directory's path."""
    return " ".join(str(e).replace(f"{work}/db/", "").replace(f"{work}/", "").split())


__all__ = ["NativeWriteResult", "SST_TARGET_BYTES", "write_native"]
