"""Native savepoints and retained checkpoints of Flink's RocksDB backend: described, read as the
entries of a canonical savepoint, and converted into one (:meth:`NativeSavepoint.write_savepoint`,
which :mod:`.native_writer` uses to write a native savepoint too).

A native savepoint (``stop --type native``) is a directory of ``_metadata`` and the files of
each subtask's RocksDB instance; a retained incremental checkpoint is ``chk-N/_metadata`` whose
handles name files of the job's checkpoint directory (``shared/``, ``taskowned/``, ``chk-N/``)
by absolute paths. Each subtask's handle (:class:`.native_handles.IncrementalHandle`) lists its
RocksDB files and a meta data stream that holds the state meta infos exactly as at the head of a
canonical keyed-state stream.

Why the entries need no translation: since Flink 1.13 a canonical savepoint stores RocksDB's own
key and value bytes (key-group prefix ‖ key ‖ namespace [‖ user key]; list values joined by
``,``; map values with a null flag), whichever backend wrote it. So reading a RocksDB instance
column family by column family (one per state, named as the state) and key group by key group
gives the :class:`.keyed_blocks.StateRun` s a canonical stream holds, and converting writes them
with :class:`.keyed_writer.KeyedStreamWriter`.

Files are opened only through the containment rule: a savepoint's by
:func:`.handles.file_name`; a checkpoint's absolute paths by their last two parts, which must be
``shared/<name>``, ``taskowned/<name>`` or ``chk-N/<name>`` of this checkpoint, inside the job
directory (:func:`checkpoint_namer`); each file is used by one handle
(:func:`.metadata.check_metadata`). An instance is opened read-only (``rocksdict``) from hard
links (copies across file systems) of its files in a private temporary directory, named as the
handle names them; nothing of the input is ever written.

The instance is opened with the options of its own ``OPTIONS`` file, which name Flink's merge
operator (``StringAppendTESTOperator``, part of RocksDB): list state appended with ``add`` is
still a stack of merge operands in the SSTs, and only that operator reads it. RocksDB opens and
checks the instance; its entries are then read from the SST files themselves (:mod:`.sst`, in
bulk, merge operands joined by the same rule), and a column family with a table feature that
reader does not read goes through RocksDB's iterator (:meth:`RocksInstance.state_runs`). Changelog and
file-merging checkpoints are refused with one line naming the setting that made them.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ...errors import FlinkSavepointError, NotCanonicalSavepointError, SavepointPathError, StatemorphError
from ...extras import require
from ...keyed.keygroups import key_group_prefix_bytes
from ...typeutils import SnapshotRegistry
from ..files import SavepointDir, SeenFiles, StagedDirectory, check_relative_path, output_error
from .files import MAX_METADATA_BYTES, FileStream, InlineStream, StreamSource
from .handles import (
    SAVEPOINT_KEY_GROUPS_HANDLE,
    ByteStreamHandle,
    FileHandle,
    KeyGroupsHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    StreamHandle,
    file_name,
)
from .key_group_scan import SLICE_BYTES
from .keyed_blocks import END_OF_KEY_GROUP, FLAG, KeyGroupExtent, StateRun, key_group_extents
from .keyed_header import KeyedHeader, parse_keyed_header
from .keyed_writer import KeyedStreamWriter
from .metadata import (
    METADATA_FILE_NAME,
    NATIVE_HANDLES,
    SUBTASK_HANDLES,
    CheckpointMetadata,
    FileNamer,
    OperatorState,
    SubtaskState,
    handle_files,
    parse_metadata,
    serialize_metadata,
)
from .native_handles import IncrementalHandle, RocksFile
from .snappy import MAX_CHUNK_DATA, STREAM_IDENTIFIER, frame_key_group
from .sst import (
    FamilyReader,
    FlatBatch,
    SstTable,
    SstUnsupported,
    family_tables,
    flat_batch,
    latest_options,
    merge_delimiters,
)

MAX_META_BYTES = 64 << 20
"""The largest meta data stream (state meta infos) read; a real one is a few KiB."""
_CHECKPOINT_DIR = re.compile(r"chk-\d+")
_ROCKSDICT_CONFIG = "rocksdict-config.json"
InstanceWriter = Callable[[OperatorState, SubtaskState, IncrementalHandle, Path, str], None]
"""What :meth:`NativeSavepoint.write_savepoint` calls for each RocksDB instance: ``(operator,
subtask, handle, staging directory, file name)``; it writes the instance's new form there and
sets the subtask's handle."""
_LOG = logging.getLogger(__name__)


def checkpoint_namer(chk: str) -> FileNamer:
    """The containment rule of a retained checkpoint ``chk`` (``chk-N``): a file handle names a
    file of the job's checkpoint directory; an absolute path by its last two parts, which must be
    ``shared/``, ``taskowned/`` or ``chk/`` and a plain name (so a relocated checkpoint still
    reads and nothing outside the job directory is opened), a relative one inside ``chk``."""
    def name(handle: FileHandle | RelativeFileHandle, where: str) -> str:
        if isinstance(handle, RelativeFileHandle):
            return f"{chk}/{file_name(handle, where)}"
        parts = handle.path.rstrip("/").rsplit("/", 2)
        if len(parts) < 3 or parts[-2] not in ("shared", "taskowned", chk):
            raise SavepointPathError(
                f"{where}: file {handle.path!r} is not in the checkpoint's shared/, taskowned/ or {chk}/ directory; "
                f"refused")
        return check_relative_path(f"{parts[-2]}/{parts[-1]}", f"{where}: file {handle.path!r}", SavepointPathError)
    return name


class _FlatJson:
    """``to_json`` of a record whose fields are all JSON values already: the fields as they are."""

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class InstanceFile(_FlatJson):
    """One file of a subtask's RocksDB instance, for ``inspect``: its name in the instance, where
    it is (a path relative to the directory, or ``inline``) and its size."""

    local_name: str
    source: str
    size: int


@dataclass
class NativeStateInfo(_FlatJson):
    name: str
    kind: str
    entries: int = 0
    bytes: int = 0


@dataclass
class NativeSubtaskInfo:
    index: int
    key_groups: str
    files: list[InstanceFile] = field(default_factory=list)
    readers: dict[str, str] = field(default_factory=dict)
    """Per state, how its column family is read (:attr:`RocksInstance.readers`), when asked."""

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "key_groups": self.key_groups, "size": self.size,
                "files": [f.to_json() for f in self.files], "readers": self.readers}


@dataclass
class NativeOperatorInfo:
    name: str | None
    uid: str | None
    uid_hash: str
    parallelism: int
    max_parallelism: int
    subtasks: list[NativeSubtaskInfo]
    states: list[NativeStateInfo]

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {k: v for k, v in self.__dict__.items() if k not in ("subtasks", "states")}
        d["subtasks"] = [s.to_json() for s in self.subtasks]
        d["states"] = [s.to_json() for s in self.states]
        return d


@dataclass
class NativeInfo:
    path: str
    format: str
    metadata_version: int
    checkpoint_id: int
    operators: list[NativeOperatorInfo]

    def to_json(self) -> dict[str, object]:
        return {"format": self.format, "metadata_version": self.metadata_version,
                "checkpoint_id": self.checkpoint_id, "operators": [o.to_json() for o in self.operators]}


def is_native(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` needs this module's reader: a native savepoint (incremental RocksDB
    handles), or a retained checkpoint's ``chk-N`` directory (its job directory holding
    ``shared/``: absolute file paths into it). What ``format_of`` asks before choosing the
    canonical reader; reads only ``_metadata`` and checks nothing (the reader refuses what is
    wrong with its own message), so a directory that is no Flink savepoint answers False."""
    p = Path(path)
    if checkpoint_dir(p) is not None:
        return (p / METADATA_FILE_NAME).is_file()
    meta = p / METADATA_FILE_NAME
    try:
        data = meta.read_bytes() if meta.is_file() and meta.stat().st_size <= MAX_METADATA_BYTES else b""
        parsed = parse_metadata(data, str(meta), native=True, check=False)
    except (OSError, FlinkSavepointError):
        return False
    return any(st.managed_native is not None for op in parsed.operators for st in op.subtasks or [])


def checkpoint_dir(p: Path) -> str | None:
    """``chk-N`` when ``p`` is a retained checkpoint's directory (named so, beside ``shared/``)."""
    return p.name if _CHECKPOINT_DIR.fullmatch(p.name) and (p.parent / "shared").is_dir() else None


def refuse_hashmap_format(source: StreamSource, extents: list[KeyGroupExtent], where: str) -> None:
    """A full checkpoint holds key groups in the canonical layout (RocksDB's full snapshots) or
    in the hashmap backend's own (``HeapSnapshotStrategy``: ``i32 key group`` first, then each
    state's objects serialized whole), which only its serializers can delimit: refused, one line.
    The canonical layout starts with a state id and a key length (or a Snappy frame), so its
    first four bytes never read as the key group's number for key groups from 1 on."""
    for e in extents:
        if e.key_group >= 1 and e.end - e.offset >= 4:
            if source.read_at(e.offset, 4, "key-group start") == e.key_group.to_bytes(4, "big"):
                raise NotCanonicalSavepointError(
                    f"{where}: a checkpoint of the hashmap backend (state.backend.type: hashmap), whose key groups "
                    f"are in that backend's own format, which statemorph does not read; take a canonical or native "
                    f"savepoint, or a checkpoint of the RocksDB backend")
            return


class NativeSavepoint:
    """A native savepoint directory, or a retained checkpoint's ``chk-N`` directory (its job
    directory holding ``shared/``), opened read-only."""

    def __init__(self, path: str | os.PathLike[str], registry: SnapshotRegistry | None = None) -> None:
        p = Path(path)
        self.registry = registry
        self.checkpoint = checkpoint_dir(p)
        root = p.parent if self.checkpoint else p
        self.path = p
        self.files = SavepointDir(root, unsafe=SavepointPathError, damaged=FlinkSavepointError)
        self.namer: FileNamer = checkpoint_namer(self.checkpoint) if self.checkpoint else file_name
        meta_name = f"{self.checkpoint}/{METADATA_FILE_NAME}" if self.checkpoint else METADATA_FILE_NAME
        self.metadata: CheckpointMetadata = parse_metadata(
            self.files.read_small(meta_name, MAX_METADATA_BYTES), f"{p}/{METADATA_FILE_NAME}",
            native=True, namer=self.namer)
        self._check_distinct()

    def _check_distinct(self) -> None:
        """Every file the handles name is a different file: ``_metadata`` refuses one name used
        twice; two names reaching one inode (a hard link, a symlink inside the directory) are
        refused here, before anything is read (the canonical reader's rule, for every file of
        every RocksDB instance too). A missing file is refused when it is opened."""
        seen = SeenFiles(SavepointPathError)
        for op in self.metadata.operators:
            for st in op.subtasks or []:
                for attr in (*SUBTASK_HANDLES, *NATIVE_HANDLES):
                    for fh, _ in handle_files(getattr(st, attr)):
                        rel = self.namer(fh, str(self.path))
                        try:
                            info = os.stat(self.files.resolve(rel))
                        except OSError:
                            continue
                        seen.add_identity((info.st_dev, info.st_ino), f"{self.files.path}/{rel}")

    @property
    def format(self) -> str:
        """``native savepoint``, ``incremental checkpoint chk-N`` (RocksDB instances sharing files
        with other checkpoints through ``shared/``) or ``checkpoint chk-N`` (full ones: RocksDB's,
        every file its own in ``chk-N/``, or key-group streams)."""
        if self.checkpoint is None:
            return "native savepoint"
        incremental = any(h.shared for _, _, h in self.instances())
        return f"{'incremental ' if incremental else ''}checkpoint {self.checkpoint}"

    def instances(self) -> Iterator[tuple[OperatorState, SubtaskState, IncrementalHandle]]:
        """Every subtask's RocksDB instance (managed keyed state); raw keyed state in an
        incremental handle is refused (Flink never writes one)."""
        for op in self.metadata.operators:
            for st in op.subtasks or []:
                if st.raw_native is not None:
                    raise FlinkSavepointError(f"{self.path}: {op.label()} subtask {st.index}: raw keyed state in an "
                                              f"incremental RocksDB handle is not supported")
                if st.managed_native is not None:
                    yield op, st, st.managed_native

    def _where(self, op: OperatorState, st: SubtaskState) -> str:
        return f"{self.path}: {op.label()} subtask {st.index}"

    def _stream_bytes(self, handle: StreamHandle, where: str, limit: int) -> bytes:
        if isinstance(handle, ByteStreamHandle):
            return handle.data
        if handle is None:
            raise FlinkSavepointError(f"{where}: no data stream")
        if handle.size > limit:
            raise FlinkSavepointError(f"{where}: {handle.size} bytes exceeds the {limit}-byte limit")
        with self.files.open(self.namer(handle, where), size=handle.size, recorded_in=METADATA_FILE_NAME) as f:
            return b"".join(f.chunks())

    def header(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle) -> KeyedHeader:
        """The state meta infos of one instance (its meta data stream: a canonical keyed-state
        header with nothing after it)."""
        where = f"{self._where(op, st)} meta data"
        data = self._stream_bytes(handle.meta, where, MAX_META_BYTES)
        return parse_keyed_header(data, len(data), where, self.registry)

    def instance_files(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle) -> list[InstanceFile]:
        where = self._where(op, st)
        out = []
        for f in handle.files():
            h = f.handle
            if isinstance(h, ByteStreamHandle):
                out.append(InstanceFile(f.local_name, "inline", len(h.data)))
            elif h is not None:
                out.append(InstanceFile(f.local_name, self.namer(h, where), h.size))
        return out

    def open_instance(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle,
                      header: KeyedHeader | None = None) -> RocksInstance:
        """The instance of ``handle``, opened read-only (``header``: its :meth:`header`, when
        already read)."""
        return RocksInstance(self, handle, header or self.header(op, st, handle), op.max_parallelism,
                             self._where(op, st))

    def inspect(self, count_entries: bool = True, readers: bool = False) -> NativeInfo:
        """Operators, their subtasks' RocksDB files and states; ``count_entries``: every entry is
        read to count entries and bytes; ``readers``: each instance is opened to say how each
        state's column family is read (its SST files, or RocksDB and why)."""
        ops: dict[int, NativeOperatorInfo] = {}
        for op, st, handle in self.instances():
            info = ops.get(id(op))
            if info is None:
                info = ops[id(op)] = NativeOperatorInfo(op.name, op.uid, op.uid_hash, op.parallelism,
                                                        op.max_parallelism, [], [])
            r = handle.key_groups
            info.subtasks.append(NativeSubtaskInfo(st.index, f"{r.start}..{r.stop - 1}",
                                                   self.instance_files(op, st, handle)))
            header = self.header(op, st, handle)
            states = {s.name: s for s in info.states}
            infos = []
            for m in header.states:
                s = states.get(m.name)
                if s is None:
                    s = NativeStateInfo(m.name, m.kind)
                    info.states.append(s)
                infos.append(s)
            if readers:
                with RocksInstance(self, handle, header, op.max_parallelism, self._where(op, st)) as db:
                    info.subtasks[-1].readers = db.sst_readers()
            if count_entries:
                with RocksInstance(self, handle, header, op.max_parallelism, self._where(op, st)) as db:
                    for sid, s in enumerate(infos):
                        for run in db.state_runs(sid):
                            s.entries += len(run.keys)
                            s.bytes += sum(map(len, run.keys)) + sum(map(len, run.values))
        return NativeInfo(str(self.path), self.format, self.metadata.version, self.metadata.checkpoint_id,
                          list(ops.values()))

    def to_canonical(self, dst: str | os.PathLike[str]) -> dict[str, int]:
        """Write a canonical savepoint of the same state to ``dst`` (staged, appearing whole or
        not at all): each instance becomes one keyed-state stream, key group by key group
        (:meth:`write_savepoint`). Returns the entries written per ``operator/state``;
        ``self.metadata`` stays as read."""
        counts: dict[str, int] = {}

        def canonical(op: OperatorState, st: SubtaskState, handle: IncrementalHandle, out: Path, name: str) -> None:
            st.managed_keyed = self._write_instance(op, st, handle, out, name, counts)
            st.managed_native = None

        self.write_savepoint(dst, canonical)
        return counts

    def write_savepoint(self, dst: str | os.PathLike[str], write_instance: InstanceWriter) -> None:
        """Write a savepoint of this one's state to ``dst`` (staged, appearing whole or not at
        all): ``write_instance(op, subtask, handle, out, name)`` writes each RocksDB instance into
        the staging directory ``out`` (files named from ``name``) and sets the subtask's new
        handle (a copy of ``self.metadata``'s); operator-state and key-group files are copied
        (named ``op-N``, ``keyed-N``: a checkpoint's absolute paths become relative ones);
        ``_metadata`` keeps everything else. The one writer of a canonical (:meth:`to_canonical`)
        and of a native savepoint (:mod:`.native_writer`)."""
        meta = copy.deepcopy(self.metadata)
        with StagedDirectory(dst) as staged:
            out = staged.temp
            n = 0
            for op in meta.operators:
                for st in op.subtasks or []:
                    for attr in ("managed_operator", "raw_operator"):
                        h = getattr(st, attr)
                        if isinstance(h, OperatorStreamHandle):
                            h.delegate = self._copy_stream(h.delegate, out, f"op-{n}", self._where(op, st))
                            n += 1
                    for attr in ("managed_keyed", "raw_keyed"):
                        kh: KeyGroupsHandle | None = getattr(st, attr)
                        if kh is not None:
                            self._check_full(kh, self._where(op, st))
                            kh.delegate = self._copy_stream(kh.delegate, out, f"keyed-{n}", self._where(op, st))
                            n += 1
                    if st.managed_native is not None:
                        write_instance(op, st, st.managed_native, out, f"keyed-{n}")
                        n += 1
            try:
                (out / METADATA_FILE_NAME).write_bytes(serialize_metadata(meta))
            except OSError as e:
                raise output_error(e, out / METADATA_FILE_NAME) from e
            staged.commit()

    def _check_full(self, handle: KeyGroupsHandle, where: str) -> None:
        """A full snapshot's stream (checkpoints only) must be in the canonical layout."""
        if self.checkpoint is None or handle.delegate is None:
            return
        if isinstance(handle.delegate, ByteStreamHandle):
            source: StreamSource = InlineStream(handle.delegate.data, where)
        else:
            f = self.files.open(self.namer(handle.delegate, where), size=handle.delegate.size,
                                recorded_in=METADATA_FILE_NAME)
            source = FileStream(f, f.label)
        with source:
            refuse_hashmap_format(source, key_group_extents(handle, source.size, where)[1], where)

    def _copy_stream(self, handle: StreamHandle, out: Path, name: str, where: str) -> StreamHandle:
        if not isinstance(handle, (FileHandle, RelativeFileHandle)):
            return handle
        with self.files.open(self.namer(handle, where), size=handle.size, recorded_in=METADATA_FILE_NAME) as f:
            f.copy_to(out / name)
        return RelativeFileHandle(name, handle.size)

    def _write_instance(self, op: OperatorState, st: SubtaskState, handle: IncrementalHandle, out: Path,
                        name: str, counts: dict[str, int]) -> KeyGroupsHandle:
        with self.open_instance(op, st, handle) as db, \
                KeyedStreamWriter(out, name, db.header, handle.start_key_group, handle.key_group_count) as w:
            names = [f"{op.uid or op.uid_hash}/{m.name}" for m in db.header.states]
            db.write_to(w, db.header.compressed)
            for sid, n in db.counts.items():
                counts[names[sid]] = counts.get(names[sid], 0) + n
            return w.finish(inline=False, code=SAVEPOINT_KEY_GROUPS_HANDLE)


PIECE_BYTES = 16 * MAX_CHUNK_DATA
"""The bytes of a key group encoded and handed to the stream writer at a time (1 MiB): a whole
number of Snappy chunks, so the pieces' frames concatenate into the one framed stream Flink
reads for the key group."""
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")


def write_block(entries: Iterator[tuple[int, bytes, bytes]], writer: Any, key_group: int, compressed: bool,
                where: str) -> None:
    """One key group's ``(state id, key, value)`` entries (grouped by state) as its canonical
    block (:func:`write_runs`, the entries taken a few thousand at a time)."""
    write_runs(_entry_runs(entries), writer, key_group, compressed, where)


def _entry_runs(entries: Iterator[tuple[int, bytes, bytes]],
                most: int = 4096) -> Iterator[tuple[int, list[bytes], list[bytes], bool]]:
    """Entries as :func:`write_runs`' slices of at most ``most`` entries (one held back, to know
    whether it ends its state's run)."""
    sid_now = -1
    keys: list[bytes] = []
    values: list[bytes] = []
    for sid, k, v in entries:
        if sid != sid_now and keys:
            yield sid_now, keys, values, True
            keys, values = [], []
        elif len(keys) > most:
            yield sid_now, keys[:-1], values[:-1], False
            keys, values = keys[-1:], values[-1:]
        sid_now = sid
        keys.append(k)
        values.append(v)
    if keys:
        yield sid_now, keys, values, True


def write_runs(runs: Iterable[tuple[int, list[bytes], list[bytes], bool]], writer: Any, key_group: int,
               compressed: bool, where: str) -> None:
    """One key group's entries as its canonical block: ``runs`` are ``(state id, keys, values,
    last)`` slices grouped by state, ``last`` when a slice ends its state's entries in the group.
    ``i16 state id`` before each state's entries, the last entry's key flagged, ``0xFFFF`` at the
    end (:func:`.keyed_blocks.write_key_group`'s bytes, Snappy-framed alike), handed to
    ``writer.add_encoded_key_group`` in pieces; nothing for a key group without entries. A slice
    is encoded with one join (no call per entry: the native conversion's hot loop)."""
    out: _BlockWriter | None = None
    sid_now = -1
    pack = _I32.pack
    for sid, keys, values, last in runs:
        if not keys:
            continue
        if not all(k and not k[0] & FLAG for k in keys):
            raise FlinkSavepointError(f"{where}: key group {key_group}: a RocksDB key that does not start with "
                                      f"its key-group prefix")
        if out is None:
            out = _BlockWriter(writer, key_group, compressed)
        if sid != sid_now:
            out.add(_U16.pack(sid))
            sid_now = sid
        n = len(keys) - 1 if last else len(keys)
        out.add(b"".join([b for k, v in zip(keys[:n], values[:n], strict=True)
                          for b in (pack(len(k)), k, pack(len(v)), v)]))
        if last:
            k, v = keys[-1], values[-1]
            out.add(b"".join((pack(len(k)), bytes((k[0] | FLAG,)), k[1:], pack(len(v)), v)))
    if out is not None:
        out.add(_U16.pack(END_OF_KEY_GROUP))
        out.finish()


class _BlockWriter:
    """One key group's canonical block, written to a :class:`KeyedStreamWriter` in pieces of
    :data:`PIECE_BYTES` (Snappy-framed when the stream is compressed: the first piece carries
    the stream identifier, the next ones only their chunks)."""

    def __init__(self, writer: KeyedStreamWriter, key_group: int, compressed: bool) -> None:
        self.writer = writer
        self.key_group = key_group
        self.compressed = compressed
        self.buf = bytearray()
        self.first = True

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) >= PIECE_BYTES:
            self._flush(len(self.buf) // PIECE_BYTES * PIECE_BYTES)

    def _flush(self, n: int) -> None:
        piece = bytes(self.buf[:n])
        del self.buf[:n]
        data: Any = piece
        if self.compressed:
            framed = frame_key_group(piece)
            data = framed if self.first else memoryview(framed)[len(STREAM_IDENTIFIER):]
        self.writer.add_encoded_key_group(self.key_group, data)
        self.first = False

    def finish(self) -> None:
        self._flush(len(self.buf))


class _Ahead:
    """An iterator of state runs with the next run in view."""

    def __init__(self, runs: Iterator[StateRun]) -> None:
        self.runs = runs
        self.run: StateRun | None = next(runs, None)

    def take(self) -> StateRun:
        run = self.run
        assert run is not None
        self.run = next(self.runs, None)
        return run


def instance_options(directory: Path) -> tuple[Any, Any, dict[str, Any]]:
    """``(rocksdict, db options, column-family options by name)`` of the RocksDB instance whose
    files are in ``directory``, from its own OPTIONS file: they give Flink's merge operator
    (StringAppendTESTOperator, built into RocksDB), without which an appended list value cannot
    be read; rocksdict's own config file, written here, forces raw mode (bytes in, bytes out:
    nothing is ever decoded; :func:`check_raw` proves it once the instance is open)."""
    rd = require("rocksdict", "reading a native savepoint")
    (directory / _ROCKSDICT_CONFIG).write_text('{"raw_mode":true,"prefix_extractors":{}}')
    opts, families = rd.Options.load_latest(str(directory))
    return rd, opts, families


def check_raw(db: Any, where: str) -> None:
    """Refuse an instance rocksdict did not open in raw mode (a str key is then accepted)."""
    try:
        db.get("statemorph-raw-mode-probe")
    except KeyError:
        return  # raw mode refuses a str key
    raise FlinkSavepointError(f"{where}: rocksdict did not open the instance in raw mode; refused")


def rocks_file_name(name: str, where: str) -> str:
    """``name``, a RocksDB file's name in its instance, checked: a plain file name (the
    containment rule, no directory) other than rocksdict's config file."""
    name = check_relative_path(name, f"{where}: RocksDB file", SavepointPathError)
    if "/" in name or name == _ROCKSDICT_CONFIG:
        raise SavepointPathError(f"{where}: RocksDB file name {name!r} is not a plain file name; refused")
    return name


def place_file(sp: NativeSavepoint, f: RocksFile, directory: Path, where: str, link: bool = True) -> None:
    """Put RocksDB file ``f`` of ``sp`` into ``directory`` under its name in the instance (a
    plain name, checked): a hard link to the savepoint's file when ``link`` and the file system
    allows (the same file, checked by identity), else a copy; an inline file is written. A
    native savepoint's writer carries files with it too, named as they are in the new one."""
    name = rocks_file_name(f.local_name, where)
    target = directory / name
    h = f.handle
    if isinstance(h, ByteStreamHandle):
        target.write_bytes(h.data)
        return
    if h is None:
        raise FlinkSavepointError(f"{where}: RocksDB file {name!r} has no data stream")
    rel = sp.namer(h, where)
    with sp.files.open(rel, size=h.size, recorded_in=METADATA_FILE_NAME) as src:
        if link:
            try:
                os.link(sp.files.resolve(rel), target)
                same = os.stat(target)
                if (same.st_dev, same.st_ino) == src.identity:
                    return
                os.unlink(target)
            except OSError:
                pass
        src.copy_to(target)


class RocksInstance:
    """One subtask's RocksDB instance, opened read-only from links to its files in a private
    temporary directory (removed on close); one column family per state of ``header``."""

    def __init__(self, sp: NativeSavepoint, handle: IncrementalHandle, header: KeyedHeader, max_parallelism: int,
                 where: str) -> None:
        self.header = header
        self.handle = handle
        self.where = where
        self.prefix = key_group_prefix_bytes(max_parallelism)
        self.counts: dict[int, int] = {}
        """Entries :meth:`write_to` wrote, per state id."""
        self.readers: dict[str, str] = {}
        """How :meth:`state_runs` read each state: ``"sst"`` (the SST files, :mod:`.sst`) or
        ``"rocksdb: <why>"`` (through RocksDB, and why the SST reader did not)."""
        self._tables: dict[str, list[SstTable]] | str | None = None
        self._delimiters: dict[str, int] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="statemorph-rocksdb-"))
        try:
            for f in handle.files():
                place_file(sp, f, self.dir, self.where)
            rd, opts, families = instance_options(self.dir)
            self.db = rd.Rdict(str(self.dir), options=opts, column_families=families,
                               access_type=rd.AccessType.read_only())
            check_raw(self.db, where)
            self.families: dict[int, Any] = {
                sid: self.db.get_column_family(m.name) for sid, m in enumerate(header.states) if m.name in families}
        except BaseException as e:
            shutil.rmtree(self.dir, ignore_errors=True)
            if isinstance(e, StatemorphError):
                raise
            if isinstance(e, Exception) and not isinstance(e, (KeyError, TypeError, AttributeError)):
                raise FlinkSavepointError(f"{where}: RocksDB cannot open the instance: {self._said(e)}") from e
            raise

    def _said(self, e: BaseException) -> str:
        """RocksDB's message on one line, its files named as the handle names them (not by the
        private directory they are linked into)."""
        return " ".join(str(e).replace(f"{self.dir}/", "").split())


    def _refused(self, sid: int, e: Exception) -> FlinkSavepointError:
        """The typed error of a RocksDB status error while state ``sid`` is iterated."""
        name = self.header.states[sid].name
        if "merge_operator" in str(e):
            return FlinkSavepointError(
                f"{self.where}: state {name!r} holds RocksDB merge operands (list state appended with add()) "
                f"and the instance's OPTIONS file names no merge operator to read them")
        return FlinkSavepointError(f"{self.where}: state {name!r}: RocksDB: {self._said(e)}")

    def state_runs(self, sid: int, only: range | None = None, slice_bytes: int = SLICE_BYTES) -> Iterator[StateRun]:
        """The entries of state ``sid`` (of the key groups of ``only``) as runs of one key group
        each, a large group as consecutive runs of about ``slice_bytes``: what :meth:`key_groups`
        yields for one state. Read from the SST files themselves in bulk (:mod:`.sst`: no Python
        call per entry, the table reader's hot loop); a column family with a table feature that
        reader does not read is read through RocksDB (:meth:`rocks_state_runs`), the reason in
        :attr:`readers` and the log, from the first key not yet delivered."""
        read = self._sst_read(sid, only)
        if read is None:
            return
        reader, start, stop = read
        after: bytes | None = None
        if reader is not None:
            with self._sst_errors(sid):
                for run in reader.runs(sid, start, stop, self.prefix, slice_bytes):
                    after = run.keys[-1]
                    yield run
                return
        yield from self.rocks_state_runs(sid, only, slice_bytes, after)

    def state_batches(self, sid: int) -> Iterator[FlatBatch]:
        """Every entry of state ``sid`` as flat buffers (:meth:`.sst.FamilyReader.batches`: read
        from the SST files without a Python object per entry, key groups not told apart): what
        the native writer's SST writer takes. A column family the SST reader does not read is read
        through RocksDB (:meth:`rocks_state_runs`, its runs laid out flat), as :meth:`state_runs`
        falls back. A batch is valid until the next one is asked for (its buffers are reused)."""
        read = self._sst_read(sid, None)
        if read is None:
            return
        reader, start, stop = read
        after: bytes | None = None
        if reader is not None:
            with self._sst_errors(sid):
                for batch in reader.batches(start, stop):
                    after = batch.kdata[batch.koff[batch.n - 1]:batch.koff[batch.n]].tobytes()
                    yield batch
                return
        for run in self.rocks_state_runs(sid, None, SLICE_BYTES, after):
            yield flat_batch(run.keys, run.values)

    def _sst_read(self, sid: int, only: range | None) -> tuple[FamilyReader | None, bytes, bytes] | None:
        """What a read of state ``sid`` (the key groups of ``only``) takes from the SST files: the
        column family's reader (None: read through RocksDB) and the user-key bounds of the key
        groups; None when there is nothing to read."""
        r = self._range(only)
        if sid not in self.families or not len(r):
            return None
        p = self.prefix
        stop = r.stop.to_bytes(p, "big") if r.stop < 1 << (8 * p) else b""
        return self._family_reader(sid), r.start.to_bytes(p, "big"), stop

    @contextlib.contextmanager
    def _sst_errors(self, sid: int) -> Iterator[None]:
        """Around a read from the SST files: a table feature the reader does not read sends the
        rest of the read through RocksDB (the reason in :attr:`readers`); a damaged file's error
        names the state."""
        try:
            yield
        except SstUnsupported as e:
            self._fall_back(sid, str(e))
        except FlinkSavepointError as e:
            raise FlinkSavepointError(f"{self.where}: state {self.header.states[sid].name!r}: {e}") from e

    def _family_reader(self, sid: int) -> FamilyReader | None:
        """The SST reader of state ``sid``'s column family, or None (the reason in :attr:`readers`)."""
        name = self.header.states[sid].name
        if self._tables is None:
            try:
                live = [str(f["name"]).lstrip("/") for f in self.db.live_files()]
                if any("/" in n or n == _ROCKSDICT_CONFIG or not (self.dir / n).is_file() for n in live):
                    raise SstUnsupported(f"RocksDB lists live files outside the instance: {live}")
                self._tables = family_tables(self.dir, live)
                self._delimiters = merge_delimiters(latest_options(self.dir))
            except SstUnsupported as e:
                self._tables = str(e)
            except FlinkSavepointError as e:
                raise FlinkSavepointError(f"{self.where}: {e}") from e
        if isinstance(self._tables, str):
            self._fall_back(sid, self._tables)
            return None
        if self.readers.get(name, "sst") != "sst":
            return None
        self.readers[name] = "sst"
        return FamilyReader(self._tables.get(name, []), self._delimiters.get(name, -1))

    def sst_readers(self) -> dict[str, str]:
        """:attr:`readers` for every state, as far as the files' footers and properties tell (a
        feature met inside a data block is known only once read)."""
        for sid in self.families:
            self._family_reader(sid)
        return dict(self.readers)

    def _fall_back(self, sid: int, why: str) -> None:
        name = self.header.states[sid].name
        self.readers[name] = f"rocksdb: {why}"
        _LOG.info("%s: state %r is read through RocksDB, not from its SST files: %s", self.where, name, why)

    def rocks_state_runs(self, sid: int, only: range | None = None, slice_bytes: int = SLICE_BYTES,
                         after: bytes | None = None) -> Iterator[StateRun]:
        """:meth:`state_runs` through RocksDB's iterator (``rocksdict``: four Python calls per
        entry), in one pass over the column family; from the first key after ``after`` when given."""
        cf = self.families.get(sid)
        r = self._range(only)
        if cf is None or not len(r):
            return
        p = self.prefix
        start, last = r.start.to_bytes(p, "big"), (r.stop - 1).to_bytes(p, "big")
        it = cf.iter()
        try:
            it.seek(start if after is None or after < start else after)
            if after is not None and it.valid() and it.key() == after:
                it.next()
            valid, key, value, step = it.valid, it.key, it.value, it.next
            keys: list[bytes] = []
            values: list[bytes] = []
            group, size = start, 0
            while valid():
                k = key()
                g = k[:p]
                if g != group:
                    if g > last:
                        break
                    if keys:
                        yield StateRun(sid, keys, values)
                        keys, values, size = [], [], 0
                    group = g
                v = value()
                keys.append(k)
                values.append(v)
                size += len(k) + len(v) + 8
                if size >= slice_bytes:
                    yield StateRun(sid, keys, values)
                    keys, values, size = [], [], 0
                step()
            it.status()  # an iterator stops on an error (a merge operand it cannot merge): raise it
            if keys:
                yield StateRun(sid, keys, values)
        except Exception as e:  # rocksdict raises plain Exception for RocksDB status errors
            raise self._refused(sid, e) from e
        finally:
            del it

    def _range(self, only: range | None) -> range:
        r = self.handle.key_groups
        return r if only is None else range(max(r.start, only.start), min(r.stop, only.stop))

    def key_groups(self, only: range | None = None, slice_bytes: int = SLICE_BYTES,
                   states: set[int] | None = None) -> Iterator[tuple[int, list[StateRun]]]:
        """Every non-empty key group of the instance's range (and of ``only``) as canonical state
        runs (of ``states`` only, when given), a large one as consecutive slices of about
        ``slice_bytes`` (consecutive items then share a key group, as
        :func:`.key_group_scan.scanned_groups` yields them): each state's column family is read
        once (:meth:`state_runs`), side by side; memory holds one slice, whatever a key group's size."""
        p = self.prefix
        heads = {sid: _Ahead(self.state_runs(sid, only, slice_bytes))
                 for sid in self.families if states is None or sid in states}
        for kg in self._range(only):
            g = kg.to_bytes(p, "big")
            runs: list[StateRun] = []
            size = 0
            for head in heads.values():
                while head.run is not None and head.run.keys[0][:p] == g:
                    run = head.take()
                    runs.append(run)
                    size += sum(map(len, run.keys)) + sum(map(len, run.values)) + 8 * len(run.keys)
                    if size >= slice_bytes:
                        yield kg, runs
                        runs, size = [], 0
            if runs:
                yield kg, runs

    def write_to(self, writer: KeyedStreamWriter, compressed: bool) -> None:
        """Every non-empty key group of the instance, encoded as a canonical stream's blocks
        (Snappy-framed when ``compressed``) and appended to ``writer`` in pieces
        (:class:`_BlockWriter`): no key group is ever held whole (each state's column family is
        read in slices, :meth:`state_runs`, one pass each, side by side)."""
        p = self.prefix
        heads = {sid: _Ahead(self.state_runs(sid)) for sid in self.families}
        for kg in self._range(None):
            g = kg.to_bytes(p, "big")
            write_runs(self._group_slices(heads, g), writer, kg, compressed, self.where)

    def _group_slices(self, heads: dict[int, _Ahead], g: bytes) -> Iterator[tuple[int, list[bytes], list[bytes], bool]]:
        """The slices of key group ``g`` (its prefix), state by state, for :func:`write_runs`."""
        for sid, head in heads.items():
            while head.run is not None and head.run.keys[0][:len(g)] == g:
                run = head.take()
                self.counts[sid] = self.counts.get(sid, 0) + len(run.keys)
                yield sid, run.keys, run.values, head.run is None or head.run.keys[0][:len(g)] != g

    def close(self) -> None:
        tables = getattr(self, "_tables", None)
        if isinstance(tables, dict):
            for ts in tables.values():
                for t in ts:
                    t.close()
            self._tables = None
        db = getattr(self, "db", None)
        if db is not None:
            self.families.clear()
            db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RocksInstance:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
