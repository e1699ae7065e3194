"""The keyed-state handle of native savepoints and incremental RocksDB checkpoints
(``IncrementalRemoteKeyedStateHandle``, type codes 5 and 11 of Flink's
``MetadataV2V3SerializerBase``), read and written as plain data.

Layout (code 11; code 5, Flink before 1.16, lacks the checkpointed size and the handle id)::

    i64 checkpoint id ‖ UTF backend id ‖ i32 start key group ‖ i32 key-group count ‖
    [i64 checkpointed size] ‖ stream handle (the meta data: the keyed-state header) ‖
    shared files ‖ private files ‖ [UTF state handle id]

where a file list is ``i32 n`` then ``n`` times ``UTF local file name ‖ stream handle``: the
RocksDB file (``000012.sst``, ``MANIFEST-000004``, ``CURRENT``, ``OPTIONS-000007``) and where
its bytes are (a file of the savepoint or checkpoint, or inline in ``_metadata``). Reading a
handle opens nothing; :mod:`.native` does.

Handles this reader refuses name the setting that made them: changelog handles
(``state.changelog.enabled``) and file-merging segments
(``execution.checkpointing.file-merging.enabled``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import MalformedDataError, NotCanonicalSavepointError
from ...io import DataInputDeserializer, DataOutputSerializer
from .handles import (
    KEY_GROUPS_CODES,
    NULL_HANDLE,
    KeyedHandle,
    StreamHandle,
    read_keyed_handle,
    read_stream_handle,
    write_stream_handle,
)

INCREMENTAL_HANDLE = 5
INCREMENTAL_HANDLE_V2 = 11
INCREMENTAL_CODES = (INCREMENTAL_HANDLE, INCREMENTAL_HANDLE_V2)
CHANGELOG_CODES = (8, 9, 10, 13, 14)
SEGMENT_CODES = (15, 16, 17)
MAX_FILES_PER_HANDLE = 1 << 20
"""The most RocksDB files one subtask's handle may list (shared and private each): a RocksDB
instance of 100 TB in 64 MB SSTs has 1.6 M; a hostile count is refused before it is read."""


@dataclass(slots=True)
class RocksFile:
    """One file of a RocksDB instance (``HandleAndLocalPath``): its name in the instance
    directory and where its bytes are."""

    local_name: str
    handle: StreamHandle


@dataclass(slots=True)
class IncrementalHandle:
    """One subtask's RocksDB instance: its key-group range, the meta data stream (the state meta
    infos, as at the head of a canonical keyed-state stream), the shared files (SSTs, which
    several checkpoints may reference) and the private ones (MANIFEST, CURRENT, OPTIONS)."""

    code: int
    checkpoint_id: int
    backend_id: str
    start_key_group: int
    key_group_count: int
    checkpointed_size: int | None
    meta: StreamHandle
    shared: list[RocksFile]
    private: list[RocksFile]
    handle_id: str | None = None

    @property
    def key_groups(self) -> range:
        return range(self.start_key_group, self.start_key_group + self.key_group_count)

    def files(self) -> list[RocksFile]:
        return [*self.shared, *self.private]


def read_native_keyed_handle(src: DataInputDeserializer, where: str) -> KeyedHandle | IncrementalHandle:
    """A keyed handle of a native savepoint or checkpoint: an incremental RocksDB handle, or a
    key-groups handle (the hashmap backend's, and RocksDB's full snapshots)."""
    at = src.position
    data, pos, end = src.window()
    code = data[pos] if pos < end else NULL_HANDLE
    if code in INCREMENTAL_CODES:
        src.read_unsigned_byte()
        return _read_incremental(src, code, at, where)
    if code in CHANGELOG_CODES:
        raise NotCanonicalSavepointError(
            f"{where} holds a changelog state-backend handle (type code {code} at offset {at}): written with "
            f"state.changelog.enabled: true, which statemorph does not read; take a native or canonical savepoint "
            f"(or a checkpoint without the changelog)")
    if code not in KEY_GROUPS_CODES and code != NULL_HANDLE:
        raise MalformedDataError(f"{where}: unknown keyed state handle type code {code} at offset {at}")
    return read_keyed_handle(src, where)


def _read_incremental(src: DataInputDeserializer, code: int, at: int, where: str) -> IncrementalHandle:
    checkpoint_id = src.read_long()
    backend_id = src.read_utf()
    start = src.read_int()
    n = src.read_int()
    if start < 0 or n < 0 or start + n > 32768:
        raise MalformedDataError(
            f"{where}: key-group range {start}..{start + n - 1} at offset {at} is outside 0..32767")
    size = src.read_long() if code == INCREMENTAL_HANDLE_V2 else None
    meta = _stream(src, f"{where} meta data")
    shared = _files(src, f"{where} shared files")
    private = _files(src, f"{where} private files")
    handle_id = src.read_utf() if code == INCREMENTAL_HANDLE_V2 else None
    return IncrementalHandle(code, checkpoint_id, backend_id, start, n, size, meta, shared, private, handle_id)


def _stream(src: DataInputDeserializer, where: str) -> StreamHandle:
    data, pos, end = src.window()
    if pos < end and data[pos] in SEGMENT_CODES:
        raise NotCanonicalSavepointError(
            f"{where}: a file-merging segment handle (type code {data[pos]} at offset {pos}): written with "
            f"execution.checkpointing.file-merging.enabled: true, which statemorph does not read; take a native "
            f"or canonical savepoint (or a checkpoint without file merging)")
    return read_stream_handle(src, where)


def _files(src: DataInputDeserializer, where: str) -> list[RocksFile]:
    n = src.check_length(src.read_int(), where, unit=3)
    if n > MAX_FILES_PER_HANDLE:
        raise MalformedDataError(f"{where}: {n} files is more than the {MAX_FILES_PER_HANDLE} statemorph reads")
    out = []
    for _ in range(n):
        name = src.read_utf()
        out.append(RocksFile(name, _stream(src, f"{where} {name!r}")))
    return out



def write_incremental_handle(out: DataOutputSerializer, handle: IncrementalHandle) -> None:
    """The bytes :func:`read_native_keyed_handle` reads (Flink's own), so an unchanged
    ``_metadata`` is written back byte for byte."""
    out.write_byte(handle.code)
    out.write_long(handle.checkpoint_id)
    out.write_utf(handle.backend_id)
    out.write_int(handle.start_key_group)
    out.write_int(handle.key_group_count)
    if handle.code == INCREMENTAL_HANDLE_V2:
        out.write_long(handle.checkpointed_size or 0)
    write_stream_handle(out, handle.meta)
    for files in (handle.shared, handle.private):
        out.write_int(len(files))
        for f in files:
            out.write_utf(f.local_name)
            write_stream_handle(out, f.handle)
    if handle.code == INCREMENTAL_HANDLE_V2:
        out.write_utf(handle.handle_id or "")
