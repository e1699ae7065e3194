"""Flink's ``AvroSerializer`` for generic Avro records, its snapshot, and schema evolution.

Bytes (docs/formats.md §2.11) are written by a plan compiled once per schema (``_avro_codec``);
values look like fastavro's (records → dict, enums → symbol, unions → the plain value or fastavro's
``(name, value)`` tuple, logical types as fastavro maps them).

The snapshot (§4.9) stores the runtime class name and the schema as Avro Java prints it
(``Schema.toString(false)``, reproduced by ``_avro_schema.java_schema_json``), so snapshot bytes
equal Flink's. Compatibility follows ``AvroSerializerSnapshot.resolveSchemaCompatibility``: the same
schema (Avro's ``Schema.equals``, which ignores docs and aliases) is AS_IS; a new schema that can
read the old one under Avro's rules is COMPATIBLE_AFTER_MIGRATION; anything else is INCOMPATIBLE,
with a reason naming the field path and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import SnapshotError, StateMigrationError, TypeParseError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..typeutils import SchemaCompatibility, TypeSerializer, TypeSerializerSnapshot, register_snapshot
from ._avro_codec import AvroCodec
from ._avro_resolve import ResolutionError, Resolver, avro_checker_verdict
from ._avro_schema import AvroNode, NamedNode, build_tree, java_schema_json, load_schema
from .strings import read_string, write_string

GENERIC_RECORD_CLASS = "org.apache.avro.generic.GenericRecord"


class AvroSerializer(TypeSerializer[Any]):
    """Serializes Avro values the way Flink's ``AvroSerializer`` stores them in state.

    ``schema`` is a schema dict (or list / primitive name) or its JSON text; it is validated by
    fastavro. ``java_class_name`` is the runtime class Flink records in the snapshot (default
    ``org.apache.avro.generic.GenericRecord``; give the SpecificRecord class name to match a Flink
    job that uses generated classes).
    """

    def __init__(self, schema: str | Mapping[str, Any] | list[Any], java_class_name: str | None = None) -> None:
        try:
            raw, parsed = load_schema(schema)
            self._raw = raw
            self.parsed_schema: Any = parsed
            self.schema_json: str = java_schema_json(raw)
            self._equality_key = java_schema_json(_strip_doc_and_aliases(raw))
            self.root: AvroNode = build_tree(parsed)
            root_path = self.root.name if isinstance(self.root, NamedNode) else self.root.kind
            self._codec = AvroCodec(self.root, root_path)
        except RecursionError:
            raise TypeParseError("Avro schema is nested too deeply") from None
        self.java_class_name: str = java_class_name or GENERIC_RECORD_CLASS

    @property
    def codec(self) -> AvroCodec:
        return self._codec

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        self._codec.serialize(value, out)

    def deserialize(self, src: DataInputDeserializer) -> Any:
        return self._codec.deserialize(src)

    SCHEMA_FAMILY = "avro"

    def describe_type(self) -> str:
        schema = self.schema_json
        return f"AVRO {schema if len(schema) <= 120 else schema[:117] + '...'}"

    def snapshot_configuration(self) -> AvroSerializerSnapshot:
        return AvroSerializerSnapshot(self.java_class_name, self.schema_json)

    def same_schema(self, other: AvroSerializer) -> bool:
        """Avro Java's ``Schema.equals``: structure, names, defaults, order and properties; not docs
        or aliases."""
        return self._equality_key == other._equality_key

    def _config(self) -> tuple[Any, ...]:
        return (self.schema_json, self.java_class_name)

    def __repr__(self) -> str:
        return f"AvroSerializer({self.schema_json!r}, java_class_name={self.java_class_name!r})"


def _strip_doc_and_aliases(s: Any) -> Any:
    """The schema without the parts Avro's ``Schema.equals`` ignores (docs, aliases)."""
    if isinstance(s, list):
        return [_strip_doc_and_aliases(x) for x in s]
    if not isinstance(s, Mapping):
        return s
    out = {k: v for k, v in s.items() if k not in ("doc", "aliases")}
    if isinstance(out.get("type"), (Mapping, list)):
        out["type"] = _strip_doc_and_aliases(out["type"])
    for key in ("items", "values"):
        if key in out:
            out[key] = _strip_doc_and_aliases(out[key])
    if out.get("type") in ("record", "error") and isinstance(out.get("fields"), list):
        out["fields"] = [
            {**{k: v for k, v in f.items() if k not in ("doc", "aliases")}, "type": _strip_doc_and_aliases(f["type"])}
            if isinstance(f, Mapping) and "type" in f else f
            for f in out["fields"]
        ]
    return out


class MigrationPlan:
    """The compiled resolution from an old schema to a new one (built once per pair)."""

    def __init__(self, old: AvroSerializer, new: AvroSerializer) -> None:
        self.old = old
        self.new = new
        # plain values for callers of migrate_value; tuple-tagged union values for byte migration, so
        # the new bytes use exactly the union branch Avro's resolution picks
        resolver = Resolver(old.root, new.root, old.codec, new.codec, tag_unions=False)
        self.transform = resolver.transform
        self.changes: list[str] = resolver.changes
        self.byte_transform = Resolver(old.root, new.root, old.codec, new.codec, tag_unions=True).transform


@register_snapshot()
class AvroSerializerSnapshot(TypeSerializerSnapshot):
    """``org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot``.

    v3: ``FSTR(runtime class) ‖ FSTR(schema JSON)``; reads v2 (``UTF ‖ UTF``) and v1 (``UTF(schema)``,
    the class falls back to GenericRecord as Flink does when no class of the schema's name exists).
    """

    BYTE_REMAP: ClassVar[tuple[str, type] | None] = ("avro", AvroSerializer)

    IDENTIFIER: ClassVar[str] = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
    VERSION: ClassVar[int] = 3
    MIN_READ_VERSION: ClassVar[int] = 1

    def __init__(self, runtime_class: str, schema_json: str) -> None:
        self.runtime_class = runtime_class
        self.schema_json = schema_json
        self._serializer: AvroSerializer | None = None
        self._plans: dict[tuple[str, str], MigrationPlan] = {}

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        write_string(out, self.runtime_class)
        write_string(out, self.schema_json)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> AvroSerializerSnapshot:
        start = src.position
        if read_version >= 3:
            runtime_class = read_string(src)
            schema_json = read_string(src)
        elif read_version == 2:
            runtime_class = src.read_utf()
            schema_json = src.read_utf()
        else:
            runtime_class = GENERIC_RECORD_CLASS
            schema_json = src.read_utf()
        if runtime_class is None or schema_json is None:
            raise SnapshotError(f"AvroSerializerSnapshot at offset {start}: runtime class or schema is null")
        snap = cls(runtime_class, schema_json)
        try:
            snap._serializer = AvroSerializer(schema_json, runtime_class)
        except TypeParseError as e:
            raise SnapshotError(f"AvroSerializerSnapshot at offset {start} holds an invalid schema: {e}") from None
        # Flink re-parses the schema and writes Schema.toString(false) back: the canonical form
        snap.schema_json = snap._serializer.schema_json
        return snap

    def restore_serializer(self) -> AvroSerializer:
        if self._serializer is None:
            self._serializer = AvroSerializer(self.schema_json, self.runtime_class)
        return self._serializer

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        if not isinstance(new_serializer, AvroSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from AvroSerializer to {type(new_serializer).__name__}")
        old = self.restore_serializer()
        if old.same_schema(new_serializer):
            return SchemaCompatibility.compatible_as_is()
        # the official checker gives the verdict; our resolver (same rules) gives path-precise reasons
        # and the migration plan; a schema pair either one rejects is incompatible
        verdict = avro_checker_verdict(new_serializer.parsed_schema, old.parsed_schema)
        try:
            plan = self._plan(new_serializer)
        except ResolutionError as e:
            return SchemaCompatibility.incompatible(e.reason)
        if verdict is not None and not verdict[0]:
            return SchemaCompatibility.incompatible(f"Avro schema compatibility check failed: {verdict[1]}")
        summary = "; ".join(plan.changes[:20]) + (f"; and {len(plan.changes) - 20} more" if len(plan.changes) > 20
                                                    else "")
        return SchemaCompatibility.compatible_after_migration(
            f"Avro schema changed: {summary}" if summary else
            "Avro schema changed; the new (reader) schema can read the old (writer) schema", plan=plan)

    def _plan(self, new_serializer: AvroSerializer) -> MigrationPlan:
        key = (new_serializer.schema_json, new_serializer.java_class_name)
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = MigrationPlan(self.restore_serializer(), new_serializer)
            except RecursionError:
                raise ResolutionError("", "the schemas are nested too deeply to resolve", "") from None
            self._plans[key] = plan
        return plan

    def _checked_plan(self, new_serializer: TypeSerializer[Any]) -> MigrationPlan:
        if not isinstance(new_serializer, AvroSerializer):
            raise StateMigrationError(f"cannot migrate Avro state to {type(new_serializer).__name__}")
        try:
            return self._plan(new_serializer)
        except ResolutionError as e:
            raise StateMigrationError(f"cannot migrate Avro state: {e.reason}") from None

    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        """An old record (as read with the old schema) resolved into the new schema."""
        plan = self._checked_plan(new_serializer)
        try:
            return plan.transform(value)
        except RecursionError:
            raise StateMigrationError("Avro value is nested too deeply to migrate (Python recursion limit)") from None

    def migrate_element(
        self, prior: TypeSerializer[Any], new: TypeSerializer[Any], element: Any, out: DataOutputSerializer
    ) -> None:
        plan = self._checked_plan(new)
        try:
            migrated = plan.byte_transform(element)
        except RecursionError:
            raise StateMigrationError("Avro value is nested too deeply to migrate (Python recursion limit)") from None
        new.serialize(migrated, out)

    def __repr__(self) -> str:
        return f"AvroSerializerSnapshot({self.runtime_class!r}, {self.schema_json!r})"


__all__ = ["AvroSerializer", "AvroSerializerSnapshot", "GENERIC_RECORD_CLASS", "MigrationPlan"]
