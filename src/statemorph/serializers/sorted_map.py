"""Flink SQL's ``SortedMapSerializer`` (``org.apache.flink.table.runtime.typeutils``): the sorted map
of sort key → count that RetractableTopNFunction keeps per partition (its ``sorted-map`` value state).

Why it is its own class: the values are laid out as a DataStream map (``AbstractMapSerializer``:
``i32 size ‖ (key ‖ bool isNull ‖ [value])*``, the entries in the comparator's order), but the
snapshot records the comparator that orders them, Java-serialized, and Flink restores the state only
under an equal comparator. statemorph never runs that comparator: a map it reads keeps the order
the bytes have (Flink's) and is written back in that order.

Snapshot (``SortedMapSerializerSnapshot``, version 3, not a composite snapshot)::

    JAVASER(comparator) ‖ NestedSerializersSnapshotDelegate(key, value)

The comparator is Flink's ``ComparableRecordComparator`` around a ``GeneratedRecordComparator`` (the
generated class's name and Java code): read with the whitelisting reader of
:mod:`statemorph.javaser` (:func:`~statemorph.javaser.classes.comparator_policy`) only to find
where it ends and to name the class, kept as its bytes and written back verbatim.

The map keys are sort keys: their bytes place them, and the comparator is generated for their
type, so neither the keys nor the counts migrate; a schema file may restate the type (a no-op),
anything else is refused naming the state's type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..errors import SnapshotError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..javaser import read_stream
from ..javaser.classes import comparator_policy
from ..javaser.nodes import JObject, JString
from ..types import LogicalType
from ..typeutils import (
    SchemaCompatibility,
    TypeSerializer,
    TypeSerializerSnapshot,
    flink_snapshot,
    read_nested_snapshots,
    register_snapshot,
    write_nested_snapshots,
)
from .collections import MapSerializer
from .table_snapshots import RUNTIME

_COMPARATOR = "org.apache.flink.table.runtime.operators.rank.ComparableRecordComparator"


class SortedMapSerializer(MapSerializer):
    """A ``SortedMap<K, V>`` as a dict in the order its bytes have; ``comparator`` is the snapshot's
    Java-serialized comparator stream, kept verbatim (never rebuilt), ``comparator_class`` the name of
    the class Flink generated for it (for messages)."""

    def __init__(self, key_serializer: TypeSerializer[Any], value_serializer: TypeSerializer[Any],
                 comparator: bytes, comparator_class: str = "") -> None:
        super().__init__(key_serializer, value_serializer)
        self.comparator = comparator
        self.comparator_class = comparator_class

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        """Flink's snapshot, its key and value snapshots in the classes Flink writes (a RowData sort
        key as Flink's ``RowDataSerializerSnapshot``): only Flink has this serializer."""
        return SortedMapSerializerSnapshot(self.comparator, [flink_snapshot(self.key_serializer),
                                                             flink_snapshot(self.value_serializer)],
                                           self.comparator_class)

    flink_snapshot_configuration = snapshot_configuration

    def successor_for(self, t: LogicalType) -> TypeSerializer[Any]:
        """Itself, for its own type only: the keys are sort keys ordered by a generated comparator."""
        if str(t) != self.describe_type():
            raise ValueError(
                f"Flink's SortedMapSerializer (a retractable Top-N's sort key -> count) keeps its type "
                f"{self.describe_type()}: its keys are the sort keys, placed by their bytes and ordered by the "
                f"comparator Flink generated for them, so they cannot be migrated (got {t})")
        return self

    def _config(self) -> tuple[Any, ...]:
        return (self.key_serializer, self.value_serializer, self.comparator)

    def __repr__(self) -> str:
        return (f"SortedMapSerializer({self.key_serializer!r}, {self.value_serializer!r}, "
                f"comparator={self.comparator_class or 'unknown'})")


def _comparator_class(node: Any, what: str) -> str:
    """The generated comparator's class name, checking the stream holds Flink's comparator."""
    if not isinstance(node, JObject) or node.desc.name != _COMPARATOR:
        found = getattr(getattr(node, "desc", None), "name", type(node).__name__)
        raise SnapshotError(f"{what}: expected a {_COMPARATOR}, found {found}")
    generated = node.values.get("generatedRecordComparator")
    name = generated.values.get("className") if isinstance(generated, JObject) else None
    if not isinstance(name, JString):
        raise SnapshotError(f"{what}: the comparator has no generated class name")
    return name.value


@register_snapshot()
class SortedMapSerializerSnapshot(TypeSerializerSnapshot):
    IDENTIFIER = RUNTIME + "SortedMapSerializerSnapshot"
    VERSION: ClassVar[int] = 3

    def __init__(self, comparator: bytes, nested: Sequence[TypeSerializerSnapshot],
                 comparator_class: str = "") -> None:
        self.comparator = comparator
        self.nested_snapshots = list(nested)
        self.comparator_class = comparator_class

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write(self.comparator)
        write_nested_snapshots(out, self.nested_snapshots)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> SortedMapSerializerSnapshot:
        start = src.position
        what = f"SortedMapSerializerSnapshot comparator at offset {start}"
        name = _comparator_class(read_stream(src, comparator_policy, what), what)
        data, _, _ = src.window()
        comparator = bytes(data[start:src.position])
        nested = read_nested_snapshots(src, cls.__name__)
        if len(nested) != 2:
            raise SnapshotError(f"SortedMapSerializerSnapshot at offset {start}: {len(nested)} nested serializers, "
                                f"expected 2 (key, value)")
        return cls(comparator, nested, name)

    def restore_serializer(self) -> SortedMapSerializer:
        key, value = (s.restore_serializer() for s in self.nested_snapshots)
        return SortedMapSerializer(key, value, self.comparator, self.comparator_class)

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """Compatible as is with the same comparator and serializers; anything else incompatible
        (Flink compares the comparators; statemorph migrates no sort key)."""
        if not isinstance(new_serializer, SortedMapSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from SortedMapSerializer to {type(new_serializer).__name__}")
        if new_serializer.comparator != self.comparator:
            return SchemaCompatibility.incompatible("the comparator of a SortedMapSerializer changed")
        if new_serializer != self.restore_serializer():
            return SchemaCompatibility.incompatible(
                f"the sort keys and counts of a SortedMapSerializer cannot be migrated "
                f"(from {self.restore_serializer().describe_type()} to {new_serializer.describe_type()})")
        return SchemaCompatibility.compatible_as_is()

    def __repr__(self) -> str:
        return f"SortedMapSerializerSnapshot(v3, {self.comparator_class or 'comparator'}, {self.nested_snapshots!r})"


__all__ = ["SortedMapSerializer", "SortedMapSerializerSnapshot"]
