"""What every savepoint format tells the planner about its states, and nothing more.

The planner (:mod:`statemorph.engine.plan`) decides per state from a :class:`StateDescription`:
its name, kind, entry count, TTL flag and the serializer snapshots of its key, namespace, value
(list element, map value) and map user key, as versioned snapshot bytes. Where the bytes live
(Parquet files, Flink keyed-state files) is the format's business; a new format plugs in by
describing its states this way (:class:`SavepointDescription`), and ``check`` / ``migrate`` / the
API / Spark plan it with no change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..errors import StateFormatError
from ..io import DataInputDeserializer
from ..keyed.kinds import StateKind
from ..typeutils import SnapshotRegistry, TypeSerializerSnapshot

SNAPSHOT_ROLES = ("key_serializer", "namespace_serializer", "value_serializer", "user_key_serializer")
"""The serializer roles of a keyed state, in the order formats record them."""


KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"


def opaque_type(raw: bytes) -> str:
    """The type of a versioned snapshot statemorph does not read (``UTF(class) ‖ i32 version ‖
    payload``), as Flink SQL writes a type it cannot look into: ``RAW('<class>')``, the class as
    precisely as the bytes say: the type class a ``KryoSerializerSnapshot`` records first in its
    payload, otherwise the snapshot class itself (a user or Scala snapshot). What ``inspect``
    prints and a schema file gives back with ``serializer = "opaque"``."""
    src = DataInputDeserializer(raw)
    name = "unknown"
    try:
        name = src.read_utf()
        if name == KRYO_SNAPSHOT:
            src.read_int()
            name = src.read_utf() or name
    except (StateFormatError, ValueError, UnicodeDecodeError):
        pass
    return "RAW('" + name.replace("'", "''") + "')"


class StateDescription(Protocol):
    """One stored state, as the planner sees it."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> StateKind: ...

    @property
    def rows(self) -> int:
        """Entries (list elements count one each)."""
        ...

    @property
    def ttl(self) -> bool:
        """Whether the state was written with time-to-live (values wrapped with their timestamp)."""
        ...

    def snapshot_bytes(self, role: str) -> bytes:
        """The versioned snapshot bytes of ``role`` (one of :data:`SNAPSHOT_ROLES`); a role the
        state does not have is a SavepointError."""
        ...

    def snapshot(self, role: str, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot:
        """The parsed snapshot of ``role``; one that cannot be read is a SavepointError naming the
        state and the role."""
        ...


# Optional members a format may add (the planner reads them with getattr):
#  - ``new_snapshot_bytes(serializer) -> bytes``: the versioned snapshot a new serializer is
#    recorded with (default: its ``snapshot_configuration()``; Flink's form writes Flink's class);
#  - ``carries_unread_snapshots``: snapshots the planner cannot read are carried over as exact
#    bytes (Flink savepoints), instead of refusing a state whose snapshot the new metadata copies.


class SavepointDescription(Protocol):
    """A whole savepoint, as the planner sees it: states in the order the format keeps them."""

    @property
    def max_parallelism(self) -> int: ...

    @property
    def states(self) -> Mapping[str, StateDescription]: ...

    def key_snapshot(self, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot: ...


__all__ = ["SNAPSHOT_ROLES", "SavepointDescription", "StateDescription"]
