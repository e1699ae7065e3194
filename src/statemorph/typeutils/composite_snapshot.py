"""Flink's ``CompositeTypeSerializerSnapshot``: the snapshot of a serializer built from nested
serializers, its ``NestedSerializersSnapshotDelegate`` block, and the rule that combines the nested
answers (Flink's ``IntermediateCompatibilityResult``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from ..errors import MalformedDataError, UnsupportedVersionError
from ..io import DataInputDeserializer, DataOutputSerializer
from .serializer import SchemaCompatibility, TypeSerializer, TypeSerializerSnapshot
from .versioned import read_versioned_snapshot_from, write_versioned_snapshot_to


class IntermediateCompatibility:
    """Combination of nested results (Flink's ``IntermediateCompatibilityResult``): any
    incompatible wins, then any migration, then any reconfiguration."""

    def __init__(self, results: Iterable[tuple[str, SchemaCompatibility]]) -> None:
        self.results = list(results)

    @property
    def incompatible_reasons(self) -> list[str]:
        return [_label(name, r.reason) for name, r in self.results if r.is_incompatible()]

    def is_incompatible(self) -> bool:
        return any(r.is_incompatible() for _, r in self.results)

    def needs_migration(self) -> bool:
        return any(r.is_compatible_after_migration() for _, r in self.results)

    def is_reconfigured(self) -> bool:
        return any(r.is_compatible_with_reconfigured_serializer() for _, r in self.results)

    def migration_reasons(self) -> list[str]:
        return [_label(name, r.reason or "needs migration") for name, r in self.results
                if r.is_compatible_after_migration()]


def _label(name: str, reason: str) -> str:
    if not name:
        return reason
    return f"{name}: {reason}" if reason else name


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
    NESTED: ClassVar[dict[str, str]] = {}
    """A fixed set of nested serializers: each one's name in messages (``element``, ``key``) and the
    attribute of the outer serializer that holds it, in Flink's order (List:
    ``{"element": "element_serializer"}``). It gives :meth:`get_nested_serializers`,
    :meth:`nested_names` and ``NESTED_ARITY``; a composite with a variable count (tuple, row)
    overrides those instead."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "NESTED" in vars(cls) and "NESTED_ARITY" not in vars(cls):
            cls.NESTED_ARITY = (len(cls.NESTED), len(cls.NESTED))

    nested_snapshots: list[TypeSerializerSnapshot]

    def __init__(self, serializer: TypeSerializer[Any] | None = None) -> None:
        self.nested_snapshots = []
        if serializer is not None:
            self.nested_snapshots = [s.snapshot_configuration() for s in self.get_nested_serializers(serializer)]
            self.set_outer_from_serializer(serializer)

    # -- subclass hooks --------------------------------------------------------------------
    def get_nested_serializers(self, outer: TypeSerializer[Any]) -> Sequence[TypeSerializer[Any]]:
        """The nested serializers of ``outer``, in Flink's order (by default those ``NESTED`` names)."""
        if not self.NESTED:
            raise NotImplementedError(f"{type(self).__name__} names no nested serializers")
        assert isinstance(outer, self.SERIALIZER_CLASS)
        return [getattr(outer, attribute) for attribute in self.NESTED.values()]

    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]:
        """The outer serializer around ``nested``; by default ``SERIALIZER_CLASS(*nested)``, for an
        outer serializer without configuration of its own."""
        return self.SERIALIZER_CLASS(*nested)  # type: ignore[no-any-return]

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
        _expect_magic(src, cls.MAGIC, f"corrupt {cls.__name__}", "magic number")
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
        return list(self.NESTED) if self.NESTED else [f"#{i}" for i in range(len(self.nested_snapshots))]

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


def _expect_magic(src: DataInputDeserializer, expected: int, what: str, word: str) -> None:
    """Read the 4-byte magic number Flink writes before a snapshot block; a wrong one is damage."""
    start = src.position
    magic = src.read_int()
    if magic != expected:
        raise MalformedDataError(f"{what} at offset {start}: {word} 0x{magic & 0xFFFFFFFF:08X} != 0x{expected:08X}")


def flink_snapshot(serializer: Any) -> TypeSerializerSnapshot:
    """``serializer``'s snapshot in the classes Flink itself writes: a serializer whose statemorph
    snapshot differs from Flink's (RowData) gives Flink's form, also when it is nested inside a
    composite (a list of rows, a map to rows)."""
    flink_form = getattr(serializer, "flink_snapshot_configuration", None)
    if flink_form is not None:
        return flink_form()  # type: ignore[no-any-return]
    snap = serializer.snapshot_configuration()
    if isinstance(snap, CompositeTypeSerializerSnapshot):
        snap.nested_snapshots = [flink_snapshot(s) for s in snap.get_nested_serializers(serializer)]
    return snap  # type: ignore[no-any-return]


def read_nested_snapshots(src: DataInputDeserializer, owner: str) -> list[TypeSerializerSnapshot]:
    """Read a ``NestedSerializersSnapshotDelegate`` block."""
    _expect_magic(src, CompositeTypeSerializerSnapshot.DELEGATE_MAGIC, f"corrupt nested snapshots of {owner}", "magic")
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


__all__ = ["CompositeTypeSerializerSnapshot", "IntermediateCompatibility", "flink_snapshot", "read_nested_snapshots",
           "write_nested_snapshots"]
