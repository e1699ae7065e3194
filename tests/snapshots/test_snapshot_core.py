"""The snapshot model itself: versioned persistence, the registry, Simple and Composite bases,
and how nested results combine. Uses small test-only serializers in a child registry so the
mechanism is tested independently of the built-in formats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from statemorph.errors import MalformedDataError, UnknownSnapshotError, UnsupportedVersionError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.typeutils import (
    DEFAULT_REGISTRY,
    CompositeTypeSerializerSnapshot,
    SchemaCompatibility,
    SimpleTypeSerializerSnapshot,
    TypeSerializer,
    TypeSerializerSnapshot,
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

REGISTRY = DEFAULT_REGISTRY.child()


class U8Serializer(TypeSerializer[int]):
    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_byte(value)

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_unsigned_byte()

    def get_length(self) -> int:
        return 1

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return U8Snapshot()


class U16Serializer(U8Serializer):
    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_short(value)

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_unsigned_short()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return U16Snapshot()


class U8Snapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "test.U8Snapshot"
    SERIALIZER = U8Serializer


class U16Snapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "test.U16Snapshot"
    SERIALIZER = U16Serializer


class ReconfiguringSnapshot(U8Snapshot):
    """Answers 'reconfigured' for a U8 serializer: stands in for an Enum with appended constants."""

    IDENTIFIER = "test.ReconfiguringSnapshot"

    def resolve_new_serializer(self, new_serializer):
        return SchemaCompatibility.compatible_with_reconfigured_serializer(U8Serializer())


class MigratingSnapshot(U8Snapshot):
    IDENTIFIER = "test.MigratingSnapshot"

    def resolve_new_serializer(self, new_serializer):
        return SchemaCompatibility.compatible_after_migration("widened")

    def migrate_value(self, value, new_serializer):
        return value * 256


class PairSerializer(TypeSerializer[tuple]):
    def __init__(self, a: TypeSerializer, b: TypeSerializer, tag: int = 0) -> None:
        self.a, self.b, self.tag = a, b, tag

    def serialize(self, value, out):
        self.a.serialize(value[0], out)
        self.b.serialize(value[1], out)

    def deserialize(self, src):
        return (self.a.deserialize(src), self.b.deserialize(src))

    def snapshot_configuration(self):
        return PairSnapshot(self)

    def _config(self):
        return (self.a, self.b, self.tag)


class PairSnapshot(CompositeTypeSerializerSnapshot):
    IDENTIFIER = "test.PairSnapshot"
    OUTER_VERSION = 2
    SERIALIZER_CLASS = PairSerializer

    def get_nested_serializers(self, outer: Any) -> Sequence[TypeSerializer[Any]]:
        return [outer.a, outer.b]

    def create_outer_serializer_with_nested_serializers(self, nested):
        return PairSerializer(nested[0], nested[1], self.tag)

    def set_outer_from_serializer(self, serializer):
        self.tag = serializer.tag

    def write_outer_snapshot(self, out):
        out.write_int(self.tag)

    def read_outer_snapshot(self, outer_version, src):
        self.tag = src.read_int()

    def resolve_outer_schema_compatibility(self, new_serializer):
        if new_serializer.tag != self.tag:
            return SchemaCompatibility.incompatible(f"tag changed from {self.tag} to {new_serializer.tag}")
        return SchemaCompatibility.compatible_as_is()

    def nested_names(self):
        return ["left", "right"]

    def migrate_nested_values(self, value, new_serializer, migrate):
        return (migrate(0, value[0]), migrate(1, value[1]))


for cls in (U8Snapshot, U16Snapshot, ReconfiguringSnapshot, MigratingSnapshot, PairSnapshot):
    REGISTRY.register(cls)
REGISTRY.register(U16Snapshot, "com.example.LegacyU16SerializerSnapshot")


def test_versioned_layout_is_flinks():
    blob = write_versioned_snapshot(U8Snapshot())
    assert blob == b"\x00\x0ftest.U8Snapshot\x00\x00\x00\x03"
    assert write_serializer_snapshot(U8Snapshot()) == b"\x00\x00\x00\x02" + blob


def test_round_trip_through_registry():
    snap = PairSnapshot(PairSerializer(U8Serializer(), U16Serializer(), tag=7))
    back = read_versioned_snapshot(write_versioned_snapshot(snap), REGISTRY)
    assert back == snap
    assert back.restore_serializer() == PairSerializer(U8Serializer(), U16Serializer(), tag=7)
    assert read_serializer_snapshot(write_serializer_snapshot(snap), REGISTRY) == snap


def test_composite_layout_has_magic_and_delegate():
    blob = write_versioned_snapshot(PairSnapshot(PairSerializer(U8Serializer(), U8Serializer(), 1)))
    content = blob[len(b"\x00\x10test.PairSnapshot") + 4 :]
    assert content[:4] == (911108).to_bytes(4, "big")
    assert content[4:8] == (2).to_bytes(4, "big")
    assert content[8:12] == (1).to_bytes(4, "big")  # outer content: the tag
    assert content[12:24] == (1333245).to_bytes(4, "big") + (1).to_bytes(4, "big") + (2).to_bytes(4, "big")


def test_aliases_resolve_to_the_same_class():
    name = b"com.example.LegacyU16SerializerSnapshot"
    blob = len(name).to_bytes(2, "big") + name + b"\x00\x00\x00\x03"
    assert isinstance(read_versioned_snapshot(blob, REGISTRY), U16Snapshot)


def test_unknown_identifier_is_typed_and_never_imported():
    blob = b"\x00\x0eos.system.Evil\x00\x00\x00\x03"
    with pytest.raises(UnknownSnapshotError, match="os.system.Evil"):
        read_versioned_snapshot(blob, REGISTRY)


def test_future_version_is_rejected():
    blob = b"\x00\x0ftest.U8Snapshot\x00\x00\x00\x09"
    with pytest.raises(UnsupportedVersionError, match="version 9"):
        read_versioned_snapshot(blob, REGISTRY)


def test_legacy_simple_v2_reads_and_drops_class_name():
    blob = b"\x00\x0ftest.U8Snapshot\x00\x00\x00\x02\x00\x03abc"
    assert isinstance(read_versioned_snapshot(blob, REGISTRY), U8Snapshot)


def test_trailing_garbage_is_rejected():
    with pytest.raises(MalformedDataError, match="2 trailing bytes"):
        read_versioned_snapshot(write_versioned_snapshot(U8Snapshot()) + b"xx", REGISTRY)


def test_corrupt_magic_is_reported_with_offset():
    blob = bytearray(write_versioned_snapshot(PairSnapshot(PairSerializer(U8Serializer(), U8Serializer()))))
    blob[24] ^= 0xFF  # inside the composite magic, after identifier and version
    with pytest.raises(MalformedDataError, match="offset 23: magic"):
        read_versioned_snapshot(bytes(blob), REGISTRY)


def test_envelope_version_one_is_explained():
    with pytest.raises(UnsupportedVersionError, match="pre-1.7"):
        read_serializer_snapshot(b"\x00\x00\x00\x01", REGISTRY)


def test_simple_rule():
    assert U8Snapshot().resolve_schema_compatibility(U8Serializer()).is_compatible_as_is()
    result = U8Snapshot().resolve_schema_compatibility(U16Serializer())
    assert result.is_incompatible() and "U8Serializer to U16Serializer" in result.reason


def _pair_snapshot_with(left: TypeSerializerSnapshot, right: TypeSerializerSnapshot, tag=0) -> PairSnapshot:
    snap = PairSnapshot(PairSerializer(U8Serializer(), U8Serializer(), tag))
    snap.nested_snapshots = [left, right]
    return snap


def test_composite_combines_nested_results():
    new = PairSerializer(U8Serializer(), U8Serializer())
    assert _pair_snapshot_with(U8Snapshot(), U8Snapshot()).resolve_schema_compatibility(new).is_compatible_as_is()

    reconf = _pair_snapshot_with(U8Snapshot(), ReconfiguringSnapshot()).resolve_schema_compatibility(new)
    assert reconf.is_compatible_with_reconfigured_serializer()
    assert reconf.get_reconfigured_serializer() == PairSerializer(U8Serializer(), U8Serializer())

    migr = _pair_snapshot_with(MigratingSnapshot(), ReconfiguringSnapshot()).resolve_schema_compatibility(new)
    assert migr.is_compatible_after_migration() and "left: widened" in migr.reason

    bad = _pair_snapshot_with(MigratingSnapshot(), U16Snapshot()).resolve_schema_compatibility(new)
    assert bad.is_incompatible() and bad.reason.startswith("right: ")

    outer = _pair_snapshot_with(U8Snapshot(), U8Snapshot(), tag=3).resolve_schema_compatibility(new)
    assert outer.is_incompatible() and "tag changed from 3 to 0" in outer.reason


def test_composite_rejects_other_serializer_classes():
    result = _pair_snapshot_with(U8Snapshot(), U8Snapshot()).resolve_schema_compatibility(U8Serializer())
    assert result.is_incompatible() and "PairSerializer" in result.reason


def test_migrate_state_reads_old_and_writes_new():
    snap = _pair_snapshot_with(MigratingSnapshot(), U8Snapshot())
    prior = PairSerializer(U8Serializer(), U8Serializer())
    new = PairSerializer(U16Serializer(), U8Serializer())
    out = DataOutputSerializer()
    snap.migrate_state(prior, new, DataInputDeserializer(b"\x02\x09"), out)
    assert out.get_copy_of_buffer() == new.to_bytes((512, 9))
