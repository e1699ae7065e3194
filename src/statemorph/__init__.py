"""statemorph: evolve the schema of serialized stream-processing state without losing it.

Flink's serializer / snapshot model in Python, byte-identical to Flink 2.x for the built-in
formats, with compiled kernels for bulk migration over Arrow buffers.
"""

from . import compat, errors, io, row, serializers, snapshot
from .compat import SchemaCompatibility
from .errors import (
    IncompatibleSchemaError,
    SnapshotError,
    StateFormatError,
    StateMigrationError,
    StatemorphError,
)
from .row import Row, RowKind
from .snapshot import read_versioned_snapshot, write_versioned_snapshot

__version__ = "0.1.0"

__all__ = [
    "IncompatibleSchemaError",
    "Row",
    "RowKind",
    "SchemaCompatibility",
    "SnapshotError",
    "StateFormatError",
    "StateMigrationError",
    "StatemorphError",
    "compat",
    "errors",
    "io",
    "read_versioned_snapshot",
    "row",
    "serializers",
    "snapshot",
    "write_versioned_snapshot",
]
