"""Flink's ``_metadata`` file (versions 3 to 6), read into plain data and written back byte for
byte (``Checkpoints`` / ``MetadataV3Serializer`` .. ``MetadataV6Serializer``).

Layout: ``i32 0x4960672d ‖ i32 version ‖ i64 checkpoint id ‖ master states ‖ operators ‖
[V4+: Java-serialized CheckpointProperties to the end of the file]``. The trailer is kept as
opaque bytes (it is a Java object stream; nothing in it matters for state). Channel state of
unaligned checkpoints is refused: a savepoint never holds any.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...errors import (
    FlinkSavepointError,
    MalformedDataError,
    NotCanonicalSavepointError,
    SavepointPathError,
    StateFormatError,
)
from ...io import DataInputDeserializer, DataOutputSerializer
from ..files import UsedOnce
from .handles import (
    NULL_HANDLE,
    OPERATOR_STREAM_HANDLE,
    ByteStreamHandle,
    FileHandle,
    KeyedHandle,
    KeyGroupsHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    StreamHandle,
    file_name,
    read_keyed_handle,
    read_operator_handle,
    read_stream_handle,
    write_keyed_handle,
    write_operator_handle,
    write_stream_handle,
)
from .native_handles import IncrementalHandle, read_native_keyed_handle, write_incremental_handle

FileNamer = Callable[[FileHandle | RelativeFileHandle, str], str]
"""How a file handle's file is named relative to the directory its files are opened in (the
containment rule): :func:`.handles.file_name` for savepoints, the checkpoint's own for a retained
checkpoint (:func:`.native.checkpoint_namer`)."""

MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696
MIN_VERSION = 3
MAX_VERSION = 6
METADATA_FILE_NAME = "_metadata"
MAX_METADATA_RECORDS = 1 << 22
"""The most records (master states, operators, subtasks, state handles, operator-state entries)
one ``_metadata`` may hold (4,194,304). Each becomes Python objects of 150 to 190 bytes
(measured), where a file spends as little as 7 bytes on one (an operator-state entry with an
empty name and no offsets): the byte limit alone (``files.MAX_METADATA_BYTES``) would let a
hostile file take 20 times its size; with this bound a parse holds at most ~800 MB of them. A
real job is far below: a subtask with state is one record plus one per non-null handle, an
operator state one per state, so 300 stateful operators at parallelism 1,000 with two handles a
subtask make 0.9 M. Key-group and operator-state offsets are no records: ``array('q')``, 8 bytes
each as on disk, so a file of offsets (32,768 per keyed operator at the largest max parallelism)
parses into about its own size."""


@dataclass(slots=True)
class MasterState:
    """A checkpoint-master hook's state; passed through unchanged."""

    version: int
    name: str
    payload: bytes


@dataclass(slots=True)
class SubtaskState:
    """One subtask of an operator. ``finished`` subtasks have no body. The ``*_flag`` fields
    keep the raw presence ints of the operator-state singletons so the bytes round-trip."""

    index: int
    finished: bool = False
    managed_operator_flag: int = 0
    managed_operator: OperatorStreamHandle | None = None
    raw_operator_flag: int = 0
    raw_operator: OperatorStreamHandle | None = None
    managed_keyed: KeyedHandle = None
    raw_keyed: KeyedHandle = None
    managed_native: IncrementalHandle | None = None
    raw_native: IncrementalHandle | None = None
    """Incremental RocksDB handles (native savepoints, checkpoints: ``parse_metadata(native=True)``)
    in place of ``managed_keyed`` / ``raw_keyed``, kept apart so canonical code never meets one."""


@dataclass(slots=True)
class OperatorState:
    """One operator: identity, parallelism and per-subtask handles. ``subtasks`` is None for an
    operator whose tasks all finished (written as count -1)."""

    operator_id: bytes
    parallelism: int
    max_parallelism: int
    coordinator: StreamHandle
    subtasks: list[SubtaskState] | None
    name: str | None = None
    uid: str | None = None

    @property
    def uid_hash(self) -> str:
        """The OperatorID as Flink prints it (``AbstractID.toHexString``): the 16 bytes in file order."""
        return self.operator_id.hex()

    def label(self) -> str:
        """How messages name this operator: its uid when it has one, else its uid hash."""
        return f"operator {self.uid!r}" if self.uid else f"operator {self.uid_hash}"


@dataclass(slots=True)
class CheckpointMetadata:
    version: int
    checkpoint_id: int
    master_states: list[MasterState] = field(default_factory=list)
    operators: list[OperatorState] = field(default_factory=list)
    trailer: bytes = b""


def parse_metadata(data: bytes, where: str = METADATA_FILE_NAME, *, native: bool = False,
                   namer: FileNamer = file_name, check: bool = True) -> CheckpointMetadata:
    """Parse a whole ``_metadata`` file and :func:`check_metadata` it. Every failure is a
    :class:`FlinkSavepointError` (or a subclass) naming ``where``, the offset or the field.
    Incremental RocksDB handles (native savepoints, checkpoints) are refused unless ``native``;
    ``namer`` names each file handle's file (see :data:`FileNamer`); ``check=False`` (only to
    tell which reader a directory needs) skips :func:`check_metadata`."""
    paused = gc.isenabled()
    gc.disable()  # a parse makes objects by the million and no cycles: collections would only cost time
    try:
        meta = _parse(DataInputDeserializer(data), where, native)
    except FlinkSavepointError:
        raise
    except StateFormatError as e:
        raise FlinkSavepointError(f"{where}: {e}") from e
    finally:
        if paused:
            gc.enable()
    if check:
        check_metadata(meta, where, namer)
    return meta


SUBTASK_HANDLES = ("managed_operator", "raw_operator", "managed_keyed", "raw_keyed")
"""The four state handles of a subtask, by attribute name (also how messages name them)."""
NATIVE_HANDLES = {"managed_native": "managed_keyed", "raw_native": "raw_keyed"}
"""Where a subtask keeps an incremental RocksDB handle, and which keyed state it is."""


def check_metadata(meta: CheckpointMetadata, where: str, namer: FileNamer = file_name) -> None:
    """What a well-formed ``_metadata`` promises beyond its bytes, checked before anything reads a
    state file or writes a byte (Flink itself never writes otherwise):

    - operator ids (and uids, where set) are unique: a duplicated operator's state would be read,
      converted or migrated twice;
    - an operator's subtask indices are unique and below its parallelism;
    - each keyed handle's key-group range lies inside ``0 .. max parallelism - 1``, and the
      subtasks' ranges (managed and raw keyed state each) are disjoint: a key group is one
      subtask's;
    - every file a handle names is a plain relative name inside the savepoint (the containment
      rule of :func:`.handles.file_name`) and is used by one handle only
      (:class:`~statemorph.savepoint.files.UsedOnce`, the rule the Parquet form applies to its
      files): an operator-state handle naming a keyed-state file, or two subtasks sharing one,
      would be read twice or rewritten under the other's feet. The files of an incremental RocksDB
      handle count alike: a checkpoint's shared file, which other checkpoints reference too, is
      still one subtask's file in this one.

    Refusals are :class:`FlinkSavepointError` (paths: :class:`SavepointPathError`) naming
    ``where``, the operator, the subtask and the field."""
    ids: dict[bytes, str] = {}
    uids: dict[str, str] = {}
    files = UsedOnce(SavepointPathError, where)
    for i, op in enumerate(meta.operators):
        label = f"operator #{i} ({op.uid or op.uid_hash})"
        other = ids.setdefault(op.operator_id, label)
        if other is not label:
            raise FlinkSavepointError(f"{where}: {label}: operator id {op.uid_hash} is also {other}'s; an operator "
                                      f"appears once")
        if op.uid:
            other = uids.setdefault(op.uid, label)
            if other is not label:
                raise FlinkSavepointError(f"{where}: {label}: uid {op.uid!r} is also {other}'s; an operator appears "
                                          f"once")
        _check_subtasks(op, where, label, files, namer)


def handle_files(h: OperatorStreamHandle | KeyedHandle | IncrementalHandle
                 ) -> Iterator[tuple[FileHandle | RelativeFileHandle, str]]:
    """Every file a handle names, with what it is for (for messages)."""
    if isinstance(h, IncrementalHandle):
        for what, s in (("meta data", h.meta), *((f"file {f.local_name!r}", f.handle) for f in h.files())):
            if isinstance(s, (FileHandle, RelativeFileHandle)):
                yield s, what
    elif h is not None and isinstance(h.delegate, (FileHandle, RelativeFileHandle)):
        yield h.delegate, "stream"


def _check_subtasks(op: OperatorState, where: str, label: str, files: UsedOnce, namer: FileNamer) -> None:
    seen: set[int] = set()
    ranges: dict[str, list[tuple[range, int]]] = {"managed_keyed": [], "raw_keyed": []}
    for st in op.subtasks or []:
        if st.index in seen:
            raise FlinkSavepointError(f"{where}: {label}: subtask {st.index} appears twice; each subtask has one state")
        seen.add(st.index)
        if st.index >= op.parallelism:
            raise FlinkSavepointError(f"{where}: {label}: subtask {st.index} is outside the operator's parallelism "
                                      f"{op.parallelism} (subtasks 0..{op.parallelism - 1})")
        for attr in (*SUBTASK_HANDLES, *NATIVE_HANDLES):
            h = getattr(st, attr)
            if h is None:
                continue
            kind = NATIVE_HANDLES.get(attr, attr)
            user = f"{label} subtask {st.index} {kind.replace('_', ' ')} state"
            if isinstance(h, (KeyGroupsHandle, IncrementalHandle)):
                r = h.key_groups
                if r.stop > op.max_parallelism:
                    raise FlinkSavepointError(
                        f"{where}: {user}: key-group range {r.start}..{r.stop - 1} passes the max parallelism "
                        f"{op.max_parallelism} (key groups 0..{op.max_parallelism - 1})")
                if len(r):
                    ranges[kind].append((r, st.index))
            for fh, what in handle_files(h):
                files.add(namer(fh, f"{where}: {user}"), f"{user} {what}")
    for kind, rs in ranges.items():
        rs.sort(key=lambda x: x[0].start)
        for (a, sa), (b, sb) in zip(rs, rs[1:], strict=False):
            if b.start < a.stop:
                raise FlinkSavepointError(
                    f"{where}: {label}: {kind.replace('_', ' ')} state: key-group ranges {a.start}..{a.stop - 1} of "
                    f"subtask {sa} and {b.start}..{b.stop - 1} of subtask {sb} overlap; a key group belongs to one "
                    f"subtask")


def _parse(src: DataInputDeserializer, where: str, native: bool) -> CheckpointMetadata:
    if src.available() < 8:
        raise FlinkSavepointError(f"{where}: {src.available()} bytes is too short for a Flink _metadata file")
    magic = src.read_int() & 0xFFFFFFFF
    if magic != MAGIC:
        raise FlinkSavepointError(
            f"{where}: magic number 0x{magic:08X} is not Flink's 0x{MAGIC:08X}: not a Flink savepoint _metadata file"
        )
    version = src.read_int()
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise FlinkSavepointError(
            f"{where}: metadata version {version} is not supported (statemorph reads {MIN_VERSION}..{MAX_VERSION}: "
            f"Flink 1.11 to 2.x)"
        )
    checkpoint_id = src.read_long()
    if checkpoint_id < 0:
        raise MalformedDataError(f"negative checkpoint id {checkpoint_id} at offset 8")
    records = _Records(where)
    n_master = records.take(src, src.check_length(src.read_int(), "master states", unit=8), "master states")
    masters = [_read_master(src) for _ in range(n_master)]
    # an operator takes at least 16 (id) + 8 (parallelisms) + 1 (coordinator) + 4 (count) bytes
    n_ops = records.take(src, src.check_length(src.read_int(), "operator states", unit=29), "operator states")
    keyed = read_native_keyed_handle if native else read_keyed_handle
    operators = [_read_operator(src, version, i, records, keyed) for i in range(n_ops)]
    trailer = b""
    if version >= 4:
        trailer = src.read_fully(src.available(), "CheckpointProperties")
    else:
        src.expect_end("the last operator state")
    return CheckpointMetadata(version, checkpoint_id, masters, operators, trailer)


class _Records:
    """The records a parse has made objects of, counted before each group of them is read, so a
    file that declares more than :data:`MAX_METADATA_RECORDS` is refused before they exist."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.count = 0

    def take(self, src: DataInputDeserializer, n: int, what: str) -> int:
        self.count += max(n, 0)
        if self.count > MAX_METADATA_RECORDS:
            raise FlinkSavepointError(
                f"{self.where}: {what} at offset {src.position} make {self.count:,} records, more than the "
                f"{MAX_METADATA_RECORDS:,} statemorph reads from one _metadata (operators, subtasks, state handles, "
                f"operator-state entries; far above any real job's): refused before they are read"
            )
        return n

    def handle(self, src: DataInputDeserializer, what: str) -> None:
        """One handle is next; an operator-state handle's entries are counted from its declared
        number (after its type byte), before :func:`read_operator_handle` makes them."""
        data, pos, end = src.window()
        if pos < end and data[pos] == NULL_HANDLE:
            return
        entries = 0
        if pos + 5 <= end and data[pos] == OPERATOR_STREAM_HANDLE:
            entries = int.from_bytes(data[pos + 1:pos + 5], "big", signed=True)
        self.take(src, 1 + entries, what)


def _read_master(src: DataInputDeserializer) -> MasterState:
    at = src.position
    magic = src.read_int() & 0xFFFFFFFF
    if magic != MASTER_STATE_MAGIC:
        raise MalformedDataError(f"master state at offset {at}: magic 0x{magic:08X} != 0x{MASTER_STATE_MAGIC:08X}")
    n = src.read_int()
    if n <= 0:
        raise MalformedDataError(f"master state at offset {at}: length {n} is not positive")
    src.check_length(n, "master state", 1)
    body = DataInputDeserializer(src.read_fully(n, "master state"))
    version = body.read_int()
    name = body.read_utf()
    k = body.check_length(body.read_int(), f"master state {name!r} payload", 1)
    payload = body.read_fully(k, f"master state {name!r} payload")
    body.expect_end(f"master state {name!r}")
    return MasterState(version, name, payload)


KeyedReader = Callable[[DataInputDeserializer, str], KeyedHandle | IncrementalHandle]


def _read_operator(src: DataInputDeserializer, version: int, i: int, records: _Records,
                   keyed: KeyedReader) -> OperatorState:
    name = uid = None
    if version >= 5:
        name = src.read_utf()
        uid = src.read_utf()
    operator_id = src.read_fully(16, "operator id")
    where = f"operator #{i} ({uid or operator_id.hex()})"
    parallelism = src.read_int()
    max_parallelism = src.read_int()
    if parallelism < 0 or not 0 <= max_parallelism <= 32768:
        raise MalformedDataError(
            f"{where}: parallelism {parallelism} / max parallelism {max_parallelism} out of range"
        )
    coordinator = read_stream_handle(src, f"{where} coordinator state")
    if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
        raise MalformedDataError(f"{where}: the coordinator state must be inline, found {type(coordinator).__name__}")
    n_sub = src.read_int()
    subtasks: list[SubtaskState] | None = None
    if n_sub == -1:
        subtasks = None
    else:
        src.check_length(n_sub, f"subtask states of {where}", unit=4)
        records.take(src, n_sub, f"subtask states of {where}")
        subtasks = [_read_subtask(src, version, where, records, keyed) for _ in range(n_sub)]
    return OperatorState(operator_id, parallelism, max_parallelism, coordinator, subtasks, name, uid)


def _read_subtask(src: DataInputDeserializer, version: int, op_where: str, records: _Records,
                  keyed: KeyedReader) -> SubtaskState:
    raw_index = src.read_int()
    if raw_index < 0:
        return SubtaskState(index=-raw_index - 1, finished=True)
    where = f"{op_where} subtask {raw_index}"
    st = SubtaskState(index=raw_index)
    st.managed_operator_flag = src.read_int()
    if st.managed_operator_flag:
        records.handle(src, f"{where} managed operator state")
        st.managed_operator = read_operator_handle(src, f"{where} managed operator state")
    st.raw_operator_flag = src.read_int()
    if st.raw_operator_flag:
        records.handle(src, f"{where} raw operator state")
        st.raw_operator = read_operator_handle(src, f"{where} raw operator state")
    records.handle(src, f"{where} managed keyed state")
    managed = keyed(src, f"{where} managed keyed state")
    records.handle(src, f"{where} raw keyed state")
    raw = keyed(src, f"{where} raw keyed state")
    if isinstance(managed, IncrementalHandle):
        st.managed_native = managed
    else:
        st.managed_keyed = managed
    if isinstance(raw, IncrementalHandle):
        st.raw_native = raw
    else:
        st.raw_keyed = raw
    for what in ("input channel", "output (result subpartition)"):
        at = src.position
        n = src.read_int()
        if n != 0:
            raise NotCanonicalSavepointError(
                f"{where} holds {n} {what} state handle(s) at offset {at}: unaligned-checkpoint channel state "
                f"is never part of a savepoint; this is a checkpoint, a canonical savepoint is needed"
            )
    return st


# -- writing ---------------------------------------------------------------------------------

def serialize_metadata(meta: CheckpointMetadata) -> bytes:
    """The bytes Flink writes for ``meta`` (identical to the input when nothing changed)."""
    if not MIN_VERSION <= meta.version <= MAX_VERSION:
        raise FlinkSavepointError(f"cannot write _metadata version {meta.version} ({MIN_VERSION}..{MAX_VERSION})")
    out = DataOutputSerializer()
    out.write_int(MAGIC)
    out.write_int(meta.version)
    out.write_long(meta.checkpoint_id)
    out.write_int(len(meta.master_states))
    for ms in meta.master_states:
        body = DataOutputSerializer()
        body.write_int(ms.version)
        body.write_utf(ms.name)
        body.write_int(len(ms.payload))
        body.write(ms.payload)
        out.write_int(MASTER_STATE_MAGIC)
        out.write_int(len(body))
        out.write(body.buffer())
    out.write_int(len(meta.operators))
    for op in meta.operators:
        _write_operator(out, op, meta.version)
    if meta.version >= 4:
        out.write(meta.trailer)
    return out.get_copy_of_buffer()


def _write_operator(out: DataOutputSerializer, op: OperatorState, version: int) -> None:
    if version >= 5:
        out.write_utf(op.name or "")
        out.write_utf(op.uid or "")
    if len(op.operator_id) != 16:
        raise FlinkSavepointError(f"operator id must be 16 bytes, got {len(op.operator_id)}")
    out.write(op.operator_id)
    out.write_int(op.parallelism)
    out.write_int(op.max_parallelism)
    write_stream_handle(out, op.coordinator)
    if op.subtasks is None:
        out.write_int(-1)
        return
    out.write_int(len(op.subtasks))
    for st in op.subtasks:
        if st.finished:
            out.write_int(-st.index - 1)
            continue
        out.write_int(st.index)
        out.write_int(st.managed_operator_flag)
        if st.managed_operator_flag:
            write_operator_handle(out, st.managed_operator)
        out.write_int(st.raw_operator_flag)
        if st.raw_operator_flag:
            write_operator_handle(out, st.raw_operator)
        for native, keyed in ((st.managed_native, st.managed_keyed), (st.raw_native, st.raw_keyed)):
            if native is not None:
                write_incremental_handle(out, native)
            else:
                write_keyed_handle(out, keyed)
        out.write_int(0)
        out.write_int(0)
