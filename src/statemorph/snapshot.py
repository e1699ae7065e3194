"""Versioned serializer snapshots, their persistence, and the registry that maps identifiers to
snapshot classes.

A snapshot is written as ``UTF(identifier) ‖ i32 version ‖ content`` (Flink's
``writeVersionedSnapshot``). Identifiers of Flink-format snapshots are Flink's Java class names,
so the bytes equal Flink's; they resolve **only** through :class:`SnapshotRegistry`, never by
importing anything named in the data.
"""

from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from .compat import CompatibilityType, IntermediateCompatibility, SchemaCompatibility
from .errors import MalformedDataError, UnknownSnapshotError, UnsupportedVersionError
from .io import DataInputDeserializer, DataOutputSerializer

if TYPE_CHECKING:
    from .serializers.base import TypeSerializer

S = TypeVar("S", bound="type[TypeSerializerSnapshot]")


class SnapshotRegistry:
    """Identifier (and alias) → snapshot class. The only way a name in data becomes code."""

    def __init__(self, parent: SnapshotRegistry | None = None) -> None:
        self._classes: dict[str, type[TypeSerializerSnapshot]] = {}
        self._parent = parent

    def register(self, cls: type[TypeSerializerSnapshot], *aliases: str) -> None:
        for name in (cls.IDENTIFIER, *aliases):
            if not name:
                raise ValueError(f"{cls.__name__} has no identifier")
            known = self._classes.get(name)
            if known is not None and known is not cls:
                raise ValueError(f"snapshot identifier {name!r} already registered to {known.__name__}")
            self._classes[name] = cls

    def resolve(self, identifier: str) -> type[TypeSerializerSnapshot]:
        cls = self._classes.get(identifier)
        if cls is None and self._parent is not None:
            return self._parent.resolve(identifier)
        if cls is None:
            raise UnknownSnapshotError(
                f"unknown serializer snapshot identifier {identifier!r}: it is not registered "
                f"(register its class with statemorph.snapshot.register_snapshot)"
            )
        return cls

    def __contains__(self, identifier: str) -> bool:
        return identifier in self._classes or (self._parent is not None and identifier in self._parent)

    def child(self) -> SnapshotRegistry:
        """A registry that adds classes on top of this one without changing it."""
        return SnapshotRegistry(self)


DEFAULT_REGISTRY = SnapshotRegistry()
_ACTIVE_REGISTRY: contextvars.ContextVar[SnapshotRegistry] = contextvars.ContextVar(
    "statemorph_snapshot_registry", default=DEFAULT_REGISTRY
)


def register_snapshot(*aliases: str) -> Callable[[S], S]:
    """Class decorator: add a snapshot class (and alias identifiers) to the default registry."""

    def deco(cls: S) -> S:
        DEFAULT_REGISTRY.register(cls, *aliases)
        return cls

    return deco


class TypeSerializerSnapshot(ABC):
    """A versioned record of a serializer's write schema, persisted next to the state.

    Subclasses set ``IDENTIFIER``, ``VERSION`` (current) and ``MIN_READ_VERSION``; they
    implement ``write_snapshot`` and the ``read_snapshot`` constructor, ``restore_serializer``
    and ``resolve_new_serializer`` (the rule, from the old snapshot's side), which
    ``resolve_schema_compatibility`` applies in either of Flink's directions.
    """

    IDENTIFIER: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    MIN_READ_VERSION: ClassVar[int] = 1

    def get_current_version(self) -> int:
        return self.VERSION

    @abstractmethod
    def write_snapshot(self, out: DataOutputSerializer) -> None: ...

    @classmethod
    @abstractmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot: ...

    @abstractmethod
    def restore_serializer(self) -> TypeSerializer[Any]: ...

    def resolve_schema_compatibility(
        self, other: TypeSerializerSnapshot | TypeSerializer[Any]
    ) -> SchemaCompatibility:
        """Can state written under one schema be read under another? Both of Flink's directions:

        - Flink 2.x: ``new_snapshot.resolve_schema_compatibility(old_snapshot)``, called on the
          snapshot of the NEW serializer with the OLD snapshot read from the savepoint;
        - Flink 1.x (kept): ``old_snapshot.resolve_schema_compatibility(new_serializer)``.

        One rule answers both: the 2.x direction restores this (new) snapshot's serializer and asks
        the old snapshot, so every snapshot class implements the rule once, in
        :meth:`resolve_new_serializer`, and the two directions cannot disagree.
        """
        if isinstance(other, TypeSerializerSnapshot):
            return other.resolve_schema_compatibility(self.restore_serializer())
        return self.resolve_new_serializer(other)

    @abstractmethod
    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """The compatibility rule of this snapshot class: this (old) snapshot judges the new
        serializer. Callers use :meth:`resolve_schema_compatibility` (either direction)."""

    # -- migration -------------------------------------------------------------------------
    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        """Turn a value read with ``restore_serializer()`` into the value the new serializer
        writes. Identity unless the value's shape changes (rows, POJOs, Avro records)."""
        return value

    def migrate_element(
        self, prior: TypeSerializer[Any], new: TypeSerializer[Any], element: Any, out: DataOutputSerializer
    ) -> None:
        """Write one already-deserialized old ``element`` in the new schema."""
        new.serialize(self.migrate_value(element, new), out)

    def migrate_state(
        self,
        prior: TypeSerializer[Any],
        new: TypeSerializer[Any],
        src: DataInputDeserializer,
        out: DataOutputSerializer,
    ) -> None:
        """Read one value in the old schema from ``src`` and write it in the new one to ``out``."""
        self.migrate_element(prior, new, prior.deserialize(src), out)

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return False
        assert isinstance(other, TypeSerializerSnapshot)
        return write_versioned_snapshot(self) == write_versioned_snapshot(other)

    def __hash__(self) -> int:
        return hash(write_versioned_snapshot(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(v{self.VERSION})"


# -- persistence ------------------------------------------------------------------------------

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


# -- the two bases ------------------------------------------------------------------------------

class SimpleTypeSerializerSnapshot(TypeSerializerSnapshot):
    """For serializers without configuration: an empty content, version 3. Compatible as is
    exactly when the new serializer is of the same class; anything else is incompatible."""

    VERSION: ClassVar[int] = 3
    MIN_READ_VERSION: ClassVar[int] = 2
    SERIALIZER: ClassVar[Callable[[], TypeSerializer[Any]]]

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        pass

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        if read_version < 3:
            src.read_utf()  # v2 stored the serializer class name; it carries no information
        return cls()

    def restore_serializer(self) -> TypeSerializer[Any]:
        return type(self).SERIALIZER()

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        old = self.restore_serializer()
        if type(new_serializer) is type(old):
            return SchemaCompatibility.compatible_as_is()
        return SchemaCompatibility.incompatible(
            f"type changed from {type(old).__name__} to {type(new_serializer).__name__}"
        )


class CompositeTypeSerializerSnapshot(TypeSerializerSnapshot):
    """For serializers built from nested serializers (List, Map, Nullable, Tuple, Row, ...).

    Layout (Flink's format since 1.8): ``i32 911108 ‖ i32 outerVersion ‖ outer content ‖
    i32 1333245 ‖ i32 1 ‖ i32 n ‖ VERSIONED(nested)*``. Subclasses supply the outer part and
    how to take a serializer apart and put it back together.
    """

    VERSION: ClassVar[int] = 3
    MIN_READ_VERSION: ClassVar[int] = 3
    MAGIC: ClassVar[int] = 911108
    DELEGATE_MAGIC: ClassVar[int] = 1333245
    DELEGATE_VERSION: ClassVar[int] = 1
    OUTER_VERSION: ClassVar[int] = 1
    MIN_OUTER_VERSION: ClassVar[int] = 1
    SERIALIZER_CLASS: ClassVar[type]
    # how many nested snapshots the format allows (List (1, 1), Map (2, 2), Tuple (1, 25) ...).
    # Checked on read, so a corrupt count is a format error instead of a failure on restore.
    NESTED_ARITY: ClassVar[tuple[int, int]] = (0, 1 << 20)

    nested_snapshots: list[TypeSerializerSnapshot]

    def __init__(self, serializer: TypeSerializer[Any] | None = None) -> None:
        self.nested_snapshots = []
        if serializer is not None:
            self.nested_snapshots = [s.snapshot_configuration() for s in self.get_nested_serializers(serializer)]
            self.set_outer_from_serializer(serializer)

    # -- subclass hooks --------------------------------------------------------------------
    @abstractmethod
    def get_nested_serializers(self, outer: TypeSerializer[Any]) -> Sequence[TypeSerializer[Any]]: ...

    @abstractmethod
    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]: ...

    def set_outer_from_serializer(self, serializer: TypeSerializer[Any]) -> None:
        """Capture the outer configuration (padding, tuple class, row-kind flag) from a serializer."""

    def write_outer_snapshot(self, out: DataOutputSerializer) -> None:
        """Write the outer configuration; empty by default."""

    def read_outer_snapshot(self, outer_version: int, src: DataInputDeserializer) -> None:
        """Read the outer configuration written by ``write_outer_snapshot``."""

    def resolve_outer_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """Compare the outer configuration; AS_IS, AFTER_MIGRATION or INCOMPATIBLE."""
        return SchemaCompatibility.compatible_as_is()

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        """Rebuild ``value`` with ``migrate(i, nested_value)`` applied to the values held by nested
        serializer i. Needed only for composites whose nested values can change shape."""
        raise NotImplementedError(f"{type(self).__name__} cannot migrate nested values")

    # -- the fixed format -----------------------------------------------------------------
    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_int(self.MAGIC)
        out.write_int(self.OUTER_VERSION)
        self.write_outer_snapshot(out)
        out.write_int(self.DELEGATE_MAGIC)
        out.write_int(self.DELEGATE_VERSION)
        out.write_int(len(self.nested_snapshots))
        for nested in self.nested_snapshots:
            write_versioned_snapshot_to(out, nested)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        snap = cls.__new__(cls)
        snap.nested_snapshots = []
        start = src.position
        magic = src.read_int()
        if magic != cls.MAGIC:
            raise MalformedDataError(
                f"corrupt {cls.__name__} at offset {start}: magic number 0x{magic & 0xFFFFFFFF:08X} "
                f"!= 0x{cls.MAGIC:08X}"
            )
        outer_version = src.read_int()
        if outer_version > cls.OUTER_VERSION or outer_version < cls.MIN_OUTER_VERSION:
            raise UnsupportedVersionError(
                f"{cls.__name__} outer version {outer_version} at offset {start + 4} is not supported "
                f"(reads {cls.MIN_OUTER_VERSION}..{cls.OUTER_VERSION})"
            )
        snap.read_outer_snapshot(outer_version, src)
        nested_at = src.position
        snap.nested_snapshots = read_nested_snapshots(src, cls.__name__)
        low, high = cls.NESTED_ARITY
        if not low <= len(snap.nested_snapshots) <= high:
            allowed = str(low) if low == high else f"{low}..{high}"
            raise MalformedDataError(
                f"corrupt {cls.__name__} at offset {nested_at}: {len(snap.nested_snapshots)} nested "
                f"serializer snapshots, the format has {allowed}"
            )
        return snap

    # -- compatibility ----------------------------------------------------------------------
    def restore_serializer(self) -> TypeSerializer[Any]:
        return self.create_outer_serializer_with_nested_serializers(
            [s.restore_serializer() for s in self.nested_snapshots]
        )

    def nested_names(self) -> list[str]:
        """Labels for nested serializers in messages (``element``, ``key``, ``f0`` ...)."""
        return [f"#{i}" for i in range(len(self.nested_snapshots))]

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        if not isinstance(new_serializer, self.SERIALIZER_CLASS):
            return SchemaCompatibility.incompatible(
                f"serializer changed from {self.SERIALIZER_CLASS.__name__} to {type(new_serializer).__name__}"
            )
        new_nested = list(self.get_nested_serializers(new_serializer))
        if len(new_nested) != len(self.nested_snapshots):
            return SchemaCompatibility.incompatible(
                f"{self.SERIALIZER_CLASS.__name__} arity changed from {len(self.nested_snapshots)} "
                f"to {len(new_nested)}"
            )
        outer = self.resolve_outer_schema_compatibility(new_serializer)
        names = self.nested_names()
        nested = IntermediateCompatibility(
            (names[i], old.resolve_schema_compatibility(new))
            for i, (old, new) in enumerate(zip(self.nested_snapshots, new_nested, strict=True))
        )
        if outer.is_incompatible() or nested.is_incompatible():
            reasons = ([outer.reason] if outer.is_incompatible() else []) + nested.incompatible_reasons
            return SchemaCompatibility.incompatible("; ".join(reasons))
        if outer.is_compatible_after_migration() or nested.needs_migration():
            reasons = ([outer.reason] if outer.reason else []) + nested.migration_reasons()
            return SchemaCompatibility.compatible_after_migration("; ".join(reasons))
        if nested.is_reconfigured():
            rebuilt = [
                r.get_reconfigured_serializer() if r.is_compatible_with_reconfigured_serializer()
                else new_nested[i]
                for i, (_, r) in enumerate(nested.results)
            ]
            return SchemaCompatibility.compatible_with_reconfigured_serializer(
                self.create_outer_serializer_with_nested_serializers(rebuilt)
            )
        return SchemaCompatibility.compatible_as_is()

    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        new_nested = list(self.get_nested_serializers(new_serializer))
        snaps = self.nested_snapshots
        if all(type(s).migrate_value is TypeSerializerSnapshot.migrate_value for s in snaps):
            return value
        return self.migrate_nested_values(
            value, new_serializer, lambda i, v: snaps[i].migrate_value(v, new_nested[i])
        )


def read_nested_snapshots(src: DataInputDeserializer, owner: str) -> list[TypeSerializerSnapshot]:
    """Read a ``NestedSerializersSnapshotDelegate`` block."""
    start = src.position
    magic = src.read_int()
    if magic != CompositeTypeSerializerSnapshot.DELEGATE_MAGIC:
        raise MalformedDataError(
            f"corrupt nested snapshots of {owner} at offset {start}: magic 0x{magic & 0xFFFFFFFF:08X} "
            f"!= 0x{CompositeTypeSerializerSnapshot.DELEGATE_MAGIC:08X}"
        )
    version = src.read_int()
    if version != CompositeTypeSerializerSnapshot.DELEGATE_VERSION:
        raise UnsupportedVersionError(f"nested snapshots of {owner}: delegate version {version} is not supported")
    # each nested snapshot takes at least 6 bytes (empty identifier + version)
    n = src.check_length(src.read_int(), f"nested snapshots of {owner}", unit=6)
    return [read_versioned_snapshot_from(src) for _ in range(n)]


def write_nested_snapshots(out: DataOutputSerializer, snaps: Sequence[TypeSerializerSnapshot]) -> None:
    out.write_int(CompositeTypeSerializerSnapshot.DELEGATE_MAGIC)
    out.write_int(CompositeTypeSerializerSnapshot.DELEGATE_VERSION)
    out.write_int(len(snaps))
    for s in snaps:
        write_versioned_snapshot_to(out, s)


__all__ = [
    "CompatibilityType",
    "CompositeTypeSerializerSnapshot",
    "DEFAULT_REGISTRY",
    "MAX_NESTING_DEPTH",
    "SchemaCompatibility",
    "SimpleTypeSerializerSnapshot",
    "SnapshotRegistry",
    "TypeSerializerSnapshot",
    "read_nested_snapshots",
    "read_serializer_snapshot",
    "read_versioned_snapshot",
    "read_versioned_snapshot_from",
    "register_snapshot",
    "write_nested_snapshots",
    "write_serializer_snapshot",
    "write_versioned_snapshot",
    "write_versioned_snapshot_to",
]
