"""Snapshot bytes: the versioned form ``UTF(identifier) ‖ i32 version ‖ content`` (Flink's
``writeVersionedSnapshot`` / ``readVersionedSnapshot``) and the top-level envelope Flink writes into
state meta info (``i32 2 ‖ VERSIONED(snapshot)``).

Identifiers of Flink-format snapshots are Flink's Java class names, so the bytes equal Flink's;
reading resolves them **only** through a :class:`~.registry.SnapshotRegistry`.
"""

from __future__ import annotations

import contextvars

from ..errors import MalformedDataError, UnsupportedVersionError
from ..io import DataInputDeserializer, DataOutputSerializer
from .registry import DEFAULT_REGISTRY, SnapshotRegistry
from .serializer import TypeSerializerSnapshot

# the registry that resolves identifiers while one snapshot (and everything nested in it) is read
_ACTIVE_REGISTRY: contextvars.ContextVar[SnapshotRegistry] = contextvars.ContextVar(
    "statemorph_snapshot_registry", default=DEFAULT_REGISTRY
)


def write_versioned_snapshot_to(out: DataOutputSerializer, snap: TypeSerializerSnapshot) -> None:
    out.write_utf(snap.IDENTIFIER)
    out.write_int(snap.get_current_version())
    snap.write_snapshot(out)


def write_versioned_snapshot(snap: TypeSerializerSnapshot) -> bytes:
    """``UTF(identifier) ‖ i32 version ‖ content``, Flink's ``writeVersionedSnapshot``."""
    out = DataOutputSerializer()
    write_versioned_snapshot_to(out, snap)
    return out.get_copy_of_buffer()


# Snapshots nest (a List of a Map of a Row ...) and are read recursively. Real schemas nest a few
# levels; a hostile file can nest thousands in a few kilobytes, which would end in a
# RecursionError (not a format error) while reading, restoring or resolving. Capped well below
# Python's recursion limit, so every recursive walk of a snapshot that was read is safe too.
MAX_NESTING_DEPTH = 64
_NESTING_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("statemorph_snapshot_depth", default=0)


def read_versioned_snapshot_from(
    src: DataInputDeserializer, registry: SnapshotRegistry | None = None
) -> TypeSerializerSnapshot:
    depth = _NESTING_DEPTH.get()
    if depth >= MAX_NESTING_DEPTH:
        raise MalformedDataError(
            f"serializer snapshot at offset {src.position} is nested more than {MAX_NESTING_DEPTH} levels deep"
        )
    depth_token = _NESTING_DEPTH.set(depth + 1)
    token = _ACTIVE_REGISTRY.set(registry) if registry is not None else None
    try:
        start = src.position
        identifier = src.read_utf()
        cls = _ACTIVE_REGISTRY.get().resolve(identifier)
        version = src.read_int()
        if version > cls.VERSION or version < cls.MIN_READ_VERSION:
            raise UnsupportedVersionError(
                f"snapshot {identifier!r} at offset {start} has version {version}; this library reads "
                f"versions {cls.MIN_READ_VERSION}..{cls.VERSION}"
            )
        return cls.read_snapshot(version, src)
    finally:
        if token is not None:
            _ACTIVE_REGISTRY.reset(token)
        _NESTING_DEPTH.reset(depth_token)


def read_versioned_snapshot(
    data: bytes | bytearray | memoryview | DataInputDeserializer, registry: SnapshotRegistry | None = None
) -> TypeSerializerSnapshot:
    """Read a snapshot written by :func:`write_versioned_snapshot`. Given bytes, the whole
    buffer must be one snapshot: trailing bytes are an error."""
    if isinstance(data, DataInputDeserializer):
        return read_versioned_snapshot_from(data, registry)
    src = DataInputDeserializer(data)
    snap = read_versioned_snapshot_from(src, registry)
    if src.available():
        raise MalformedDataError(
            f"{src.available()} trailing bytes after snapshot {snap.IDENTIFIER!r} at offset {src.position}"
        )
    return snap


ENVELOPE_VERSION = 2


def write_serializer_snapshot(snap: TypeSerializerSnapshot) -> bytes:
    """The top-level form Flink writes into state meta info: ``i32 2 ‖ VERSIONED(snap)``."""
    out = DataOutputSerializer()
    out.write_int(ENVELOPE_VERSION)
    write_versioned_snapshot_to(out, snap)
    return out.get_copy_of_buffer()


def read_serializer_snapshot(
    data: bytes | bytearray | memoryview, registry: SnapshotRegistry | None = None
) -> TypeSerializerSnapshot:
    src = DataInputDeserializer(data)
    version = src.read_int()
    if version != ENVELOPE_VERSION:
        raise UnsupportedVersionError(
            f"serializer snapshot envelope version {version} is not supported (only {ENVELOPE_VERSION}; "
            f"version 1 is the pre-1.7 TypeSerializerConfigSnapshot format)"
        )
    snap = read_versioned_snapshot_from(src, registry)
    src.expect_end(f"snapshot {snap.IDENTIFIER!r}")
    return snap


__all__ = [
    "ENVELOPE_VERSION",
    "MAX_NESTING_DEPTH",
    "read_serializer_snapshot",
    "read_versioned_snapshot",
    "read_versioned_snapshot_from",
    "write_serializer_snapshot",
    "write_versioned_snapshot",
    "write_versioned_snapshot_to",
]
