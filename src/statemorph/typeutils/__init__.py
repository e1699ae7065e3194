"""Flink's type utilities (``org.apache.flink.api.common.typeutils``): the serializer contract,
snapshots, their registry and bytes. Imports run one way: serializer <- singleton, registry <-
versioned <- simple_snapshot / composite_snapshot. Every serializer in :mod:`statemorph.serializers` builds on it.
"""

from .composite_snapshot import (
    CompositeTypeSerializerSnapshot,
    IntermediateCompatibility,
    flink_snapshot,
    read_nested_snapshots,
    write_nested_snapshots,
)
from .registry import DEFAULT_REGISTRY, SnapshotRegistry, register_snapshot
from .serializer import (
    SERIALIZER_CLASSES,
    BulkKernel,
    CompatibilityType,
    SchemaCompatibility,
    TypeSerializer,
    TypeSerializerSnapshot,
    describe_serializer,
)
from .simple_snapshot import SimpleTypeSerializerSnapshot, nested_simple_snapshot, simple_snapshot
from .singleton import NamedSingleton, SingletonSerializer
from .versioned import (
    ENVELOPE_VERSION,
    MAX_NESTING_DEPTH,
    read_serializer_snapshot,
    read_versioned_snapshot,
    read_versioned_snapshot_from,
    write_serializer_snapshot,
    write_versioned_snapshot,
    write_versioned_snapshot_to,
)

__all__ = [
    "SERIALIZER_CLASSES", "BulkKernel", "CompatibilityType",
    "CompositeTypeSerializerSnapshot", "DEFAULT_REGISTRY", "ENVELOPE_VERSION",
    "IntermediateCompatibility", "MAX_NESTING_DEPTH", "SchemaCompatibility", "SimpleTypeSerializerSnapshot",
    "SnapshotRegistry", "TypeSerializer", "TypeSerializerSnapshot", "describe_serializer", "flink_snapshot",
    "read_nested_snapshots", "simple_snapshot", "nested_simple_snapshot", "NamedSingleton", "SingletonSerializer",
    "read_serializer_snapshot", "read_versioned_snapshot", "read_versioned_snapshot_from",
    "register_snapshot", "write_nested_snapshots", "write_serializer_snapshot", "write_versioned_snapshot",
    "write_versioned_snapshot_to",
]
