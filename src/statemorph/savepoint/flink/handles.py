"""The state handles a canonical Flink savepoint's ``_metadata`` can hold, read and written with
their one-byte type codes (Flink's ``MetadataV2V3SerializerBase``).

Handles are plain data: reading one never opens a file (that is :mod:`.files`' job), and writing
one gives back exactly the bytes it was read from, so an unchanged handle round-trips byte for
byte. Handles that only native savepoints and checkpoints hold (incremental RocksDB, changelog,
file-merging segments) are refused here with :class:`NotCanonicalSavepointError`: their data is
not in the canonical format. Incremental RocksDB handles are read by :mod:`.native_handles` when
a native savepoint or checkpoint is read as such (:mod:`.native`).
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass

from ...errors import MalformedDataError, NotCanonicalSavepointError, SavepointPathError
from ...io import DataInputDeserializer, DataOutputSerializer
from ..files import check_relative_path

NULL_HANDLE = 0
BYTE_STREAM_HANDLE = 1
FILE_HANDLE = 2
KEY_GROUPS_HANDLE = 3
OPERATOR_STREAM_HANDLE = 4
RELATIVE_FILE_HANDLE = 6
SAVEPOINT_KEY_GROUPS_HANDLE = 7
KEY_GROUPS_HANDLE_V2 = 12

KEY_GROUPS_CODES = (KEY_GROUPS_HANDLE, SAVEPOINT_KEY_GROUPS_HANDLE, KEY_GROUPS_HANDLE_V2)

NOT_CANONICAL = {
    5: "an incremental RocksDB handle (native savepoint or incremental checkpoint)",
    11: "an incremental RocksDB handle (native savepoint or incremental checkpoint)",
    8: "a changelog state-backend handle (changelog checkpoint)",
    14: "a changelog state-backend handle (changelog checkpoint)",
    9: "an in-memory changelog handle (changelog checkpoint)",
    10: "a changelog file handle (changelog checkpoint)",
    13: "a changelog file handle (changelog checkpoint)",
    15: "a file-merging segment handle (checkpoint with file merging)",
    16: "an empty file-merging segment handle (checkpoint with file merging)",
    17: "a file-merging operator-state handle (checkpoint with file merging)",
}

DISTRIBUTION_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


@dataclass(slots=True)
class ByteStreamHandle:
    """Inline state (code 1): the bytes live in ``_metadata``; ``name`` is only a name."""

    name: str
    data: bytes


@dataclass(slots=True)
class FileHandle:
    """An absolute file path (code 2), written when the file system injects entropy."""

    path: str
    size: int


@dataclass(slots=True)
class RelativeFileHandle:
    """A file next to ``_metadata`` (code 6), the normal case for a savepoint."""

    relative_path: str
    size: int


StreamHandle = ByteStreamHandle | FileHandle | RelativeFileHandle | None


@dataclass(slots=True)
class OperatorStateInfo:
    """One operator (non-keyed) state inside an :class:`OperatorStreamHandle`."""

    name: str
    mode: int
    offsets: MutableSequence[int]

    def __post_init__(self) -> None:
        self.offsets = _longs(self.offsets)


@dataclass(slots=True)
class OperatorStreamHandle:
    """Operator state (code 4): named partition offsets into a delegate stream. Passed through."""

    states: list[OperatorStateInfo]
    delegate: StreamHandle


@dataclass(slots=True)
class KeyGroupsHandle:
    """Keyed state of one subtask: one offset per key group of its range into ``delegate``.

    ``code`` is 7 (``KeyGroupsSavepointStateHandle``, canonical savepoints), 12
    (``KeyGroupsStateHandle`` with a handle id, full checkpoints) or 3 (the legacy form).
    An offset of 0 marks an empty key group.
    """

    code: int
    start_key_group: int
    offsets: MutableSequence[int]
    delegate: StreamHandle
    handle_id: str | None = None

    def __post_init__(self) -> None:
        self.offsets = _longs(self.offsets)

    @property
    def key_groups(self) -> range:
        return range(self.start_key_group, self.start_key_group + len(self.offsets))


KeyedHandle = KeyGroupsHandle | None


def _longs(values: MutableSequence[int]) -> MutableSequence[int]:
    """Offsets as an ``array('q')``: 8 bytes each, as in the file (a list holds a pointer and an
    int object per offset: five times that), and one type, so handles compare equal by value."""
    return values if isinstance(values, array) else array("q", values)


def file_name(handle: FileHandle | RelativeFileHandle, where: str) -> str:
    """The checked name, relative to the savepoint directory, of the file a handle names: a
    relative path must pass :func:`~statemorph.savepoint.files.check_relative_path` (the rule for
    every path read from any input); an absolute path (written when the file system injected
    entropy) is taken by its file name inside the savepoint, so a relocated savepoint still reads
    and nothing outside is opened. Refusals are :class:`SavepointPathError` naming ``where``."""
    if isinstance(handle, RelativeFileHandle):
        return check_relative_path(handle.relative_path, f"{where}: state file", SavepointPathError)
    name = handle.path.rstrip("/").rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        raise SavepointPathError(f"{where}: absolute state file path {handle.path!r} has no usable file name")
    return check_relative_path(name, f"{where}: absolute state file path {handle.path!r}", SavepointPathError)


def _check_count(src: DataInputDeserializer, n: int, what: str, unit: int) -> int:
    return src.check_length(n, what, unit=unit)


def _file_size(size: int, what: str) -> int:
    """A file handle's recorded size, refused when negative (after the whole handle is read)."""
    if size < 0:
        raise MalformedDataError(f"{what} has negative size {size}")
    return size


def read_stream_handle(src: DataInputDeserializer, where: str) -> StreamHandle:
    """One stream handle (codes 0, 1, 2, 6); anything else is refused naming the code."""
    at = src.position
    code = src.read_unsigned_byte()
    if code == NULL_HANDLE:
        return None
    if code == BYTE_STREAM_HANDLE:
        name = src.read_utf()
        n = src.read_int()
        _check_count(src, n, f"inline state bytes of {where}", 1)
        return ByteStreamHandle(name, src.read_fully(n, f"inline state bytes of {where}"))
    if code == FILE_HANDLE:
        size = src.read_long()
        path = src.read_utf()
        return FileHandle(path, _file_size(size, f"{where}: file handle at offset {at}"))
    if code == RELATIVE_FILE_HANDLE:
        rel = src.read_utf()
        size = src.read_long()
        return RelativeFileHandle(rel, _file_size(size, f"{where}: relative file handle at offset {at}"))
    _refuse(code, at, where, "stream state handle")
    raise AssertionError  # unreachable: _refuse always raises


def write_stream_handle(out: DataOutputSerializer, handle: StreamHandle) -> None:
    if handle is None:
        out.write_byte(NULL_HANDLE)
    elif isinstance(handle, ByteStreamHandle):
        out.write_byte(BYTE_STREAM_HANDLE)
        out.write_utf(handle.name)
        out.write_int(len(handle.data))
        out.write(handle.data)
    elif isinstance(handle, FileHandle):
        out.write_byte(FILE_HANDLE)
        out.write_long(handle.size)
        out.write_utf(handle.path)
    elif isinstance(handle, RelativeFileHandle):
        out.write_byte(RELATIVE_FILE_HANDLE)
        out.write_utf(handle.relative_path)
        out.write_long(handle.size)
    else:
        raise TypeError(f"not a stream state handle: {type(handle).__name__}")


def read_operator_handle(src: DataInputDeserializer, where: str) -> OperatorStreamHandle | None:
    at = src.position
    code = src.read_unsigned_byte()
    if code == NULL_HANDLE:
        return None
    if code != OPERATOR_STREAM_HANDLE:
        _refuse(code, at, where, "operator state handle")
    # a state entry takes at least 2 (name) + 1 (mode) + 4 (offset count) bytes
    n = _check_count(src, src.read_int(), f"operator states of {where}", 7)
    states = []
    for _ in range(n):
        name = src.read_utf()
        mode = src.read_unsigned_byte()
        if mode >= len(DISTRIBUTION_MODES):
            raise MalformedDataError(
                f"{where}: operator state {name!r} has distribution mode {mode} at offset {src.position - 1} "
                f"(known: 0..{len(DISTRIBUTION_MODES) - 1})"
            )
        k = _check_count(src, src.read_int(), f"offsets of operator state {name!r} of {where}", 8)
        states.append(OperatorStateInfo(name, mode, src.read_longs(k, f"offsets of operator state {name!r}")))
    return OperatorStreamHandle(states, read_stream_handle(src, where))


def _write_offsets(out: DataOutputSerializer, offsets: Sequence[int]) -> None:
    """A handle's offsets as Flink writes them: their count, then each as a long."""
    out.write_int(len(offsets))
    for o in offsets:
        out.write_long(o)


def write_operator_handle(out: DataOutputSerializer, handle: OperatorStreamHandle | None) -> None:
    if handle is None:
        out.write_byte(NULL_HANDLE)
        return
    out.write_byte(OPERATOR_STREAM_HANDLE)
    out.write_int(len(handle.states))
    for s in handle.states:
        out.write_utf(s.name)
        out.write_byte(s.mode)
        _write_offsets(out, s.offsets)
    write_stream_handle(out, handle.delegate)


def read_keyed_handle(src: DataInputDeserializer, where: str) -> KeyedHandle:
    at = src.position
    code = src.read_unsigned_byte()
    if code == NULL_HANDLE:
        return None
    if code not in KEY_GROUPS_CODES:
        _refuse(code, at, where, "keyed state handle")
    start = src.read_int()
    n = _check_count(src, src.read_int(), f"key-group offsets of {where}", 8)
    if start < 0 or start + n > 32768:
        raise MalformedDataError(
            f"{where}: key-group range {start}..{start + n - 1} at offset {at} is outside 0..32767"
        )
    offsets = src.read_longs(n, f"key-group offsets of {where}")
    delegate = read_stream_handle(src, where)
    handle_id = src.read_utf() if code == KEY_GROUPS_HANDLE_V2 else None
    return KeyGroupsHandle(code, start, offsets, delegate, handle_id)


def write_keyed_handle(out: DataOutputSerializer, handle: KeyedHandle) -> None:
    if handle is None:
        out.write_byte(NULL_HANDLE)
        return
    out.write_byte(handle.code)
    out.write_int(handle.start_key_group)
    _write_offsets(out, handle.offsets)
    write_stream_handle(out, handle.delegate)
    if handle.code == KEY_GROUPS_HANDLE_V2:
        out.write_utf(handle.handle_id or "")


def _refuse(code: int, at: int, where: str, what: str) -> None:
    known = NOT_CANONICAL.get(code)
    if known is not None:
        more = (" (`statemorph inspect` and `convert` read it; `convert --to canonical` makes one)"
                if code in (5, 11) else "")
        raise NotCanonicalSavepointError(
            f"{where} holds {known} (type code {code} at offset {at}): this is not a canonical "
            f"savepoint{more}; take one with the CANONICAL format (the default, "
            f"`stop --type canonical` / SavepointFormatType.CANONICAL)"
        )
    raise MalformedDataError(f"{where}: unknown {what} type code {code} at offset {at}")
