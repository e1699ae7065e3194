"""statemorph: evolve the schema of serialized stream-processing state without losing it.

Flink's serializer / snapshot model in Python, byte-identical to Flink 2.x for the built-in
formats, with compiled kernels for bulk migration over Arrow buffers.
"""

from . import errors, io, row, serializers, typeutils
from .errors import (
    IncompatibleSchemaError,
    SnapshotError,
    StateFormatError,
    StateMigrationError,
    StatemorphError,
)
from .row import Row, RowKind
from .typeutils import SchemaCompatibility, read_versioned_snapshot, write_versioned_snapshot

# ``statemorph.snapshot`` and ``statemorph.compat`` (0.1.0's names for the snapshot and the
# compatibility modules) name the package that now holds both, so ``from statemorph import snapshot``
# keeps working; new code imports ``statemorph.typeutils``.
compat = snapshot = typeutils

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
    "typeutils",
    "write_versioned_snapshot",
]
