"""Flink's own canonical savepoints: ``_metadata`` (versions 3 to 6), the keyed-state streams
(``KeyedBackendSerializationProxy`` v6 header, key-group blocks, Snappy framing), their key and
value layouts, a streaming reader that yields Arrow batches in the Parquet form's column shape,
and an atomic rewriter that migrates values and carries everything else over byte for byte.

Modules, one job each: :mod:`.handles` (state handles), :mod:`.metadata` (``_metadata``),
:mod:`.files` (safe file access), :mod:`.envelope` (serializer snapshots kept as exact bytes),
:mod:`.keyed_header`, :mod:`.keyed_blocks`, :mod:`.snappy`, :mod:`.layout`, :mod:`.reader`,
:mod:`.rewrite`.
"""

from __future__ import annotations

import os

from ...keyed.keygroups import key_group_prefix_bytes
from ..storage import Location
from .envelope import Snapshot, snapshot_from_envelope
from .files import SavepointDirectory
from .handles import ByteStreamHandle, FileHandle, KeyGroupsHandle, OperatorStreamHandle, RelativeFileHandle
from .keyed_blocks import StateRun, encode_key_group, parse_key_group, write_key_group
from .keyed_header import KeyedHeader, StateMetaInfo, parse_keyed_header, write_keyed_header
from .keyed_writer import KeyedStreamWriter, entries_from_batch, keep_inline
from .layout import StateLayout, build_composite_key
from .metadata import CheckpointMetadata, MasterState, OperatorState, SubtaskState, parse_metadata, serialize_metadata
from .migrate_stream import migrated_encoded_key_groups, migrated_header, migrated_key_groups
from .reader import FlinkSavepoint, KeyedStream, OperatorInfo, SavepointInfo, StateInfo, flink_state_schema
from .rewrite import FlinkRewriteResult, StreamJob, StreamResult, rewrite, run_stream_job
from .snappy import compress_key_group, decompress_key_group


def is_flink_savepoint(path: str | os.PathLike[str] | Location) -> bool:
    """True when ``path`` is a directory (or a remote prefix) holding something named Flink's
    ``_metadata``. Not only a regular file: a FIFO, a directory or a symlink by that name still
    claims the Flink form, so every verb reads it as a Flink savepoint and the reader refuses it
    (:class:`~statemorph.errors.UnsafeFileError`, one status for every verb) instead of each verb
    falling back to the Parquet form and failing in its own way."""
    loc = Location.of(path)
    if loc is None:
        return os.path.lexists(os.path.join(path, "_metadata"))  # type: ignore[arg-type]
    import pyarrow.fs as pafs

    return bool(loc.child("_metadata").kind() != pafs.FileType.NotFound)


__all__ = [
    "ByteStreamHandle",
    "CheckpointMetadata",
    "FileHandle",
    "FlinkSavepoint",
    "KeyGroupsHandle",
    "KeyedHeader",
    "KeyedStream",
    "KeyedStreamWriter",
    "MasterState",
    "OperatorInfo",
    "OperatorState",
    "OperatorStreamHandle",
    "RelativeFileHandle",
    "FlinkRewriteResult",
    "SavepointDirectory",
    "SavepointInfo",
    "Snapshot",
    "StateInfo",
    "StateLayout",
    "StateMetaInfo",
    "StateRun",
    "StreamJob",
    "StreamResult",
    "SubtaskState",
    "build_composite_key",
    "compress_key_group",
    "decompress_key_group",
    "encode_key_group",
    "entries_from_batch",
    "flink_state_schema",
    "is_flink_savepoint",
    "keep_inline",
    "key_group_prefix_bytes",
    "migrated_header",
    "migrated_encoded_key_groups",
    "migrated_key_groups",
    "parse_key_group",
    "parse_keyed_header",
    "parse_metadata",
    "rewrite",
    "run_stream_job",
    "serialize_metadata",
    "snapshot_from_envelope",
    "write_key_group",
    "write_keyed_header",
]
