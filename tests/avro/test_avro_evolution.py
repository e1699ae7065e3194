"""Avro schema evolution: compatibility verdicts with reasons, and migrated bytes."""

from __future__ import annotations

import copy

import pytest

from statemorph.errors import StateMigrationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.serializers import AvroSerializer, IntSerializer
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

BASE = {"type": "record", "name": "Event", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "VIEW"]}},
]}
OLD_VALUE = {"id": 7, "name": "ann", "kind": "VIEW"}


def evolve(old_schema, new_schema):
    """The restore path: snapshot of the old serializer, persisted, read back, asked about the new one."""
    old = AvroSerializer(old_schema)
    new = AvroSerializer(new_schema)
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    return old, new, snap, snap.resolve_schema_compatibility(new)


def migrate_bytes(snap, old, new, data: bytes) -> bytes:
    src = DataInputDeserializer(data)
    out = DataOutputSerializer()
    snap.migrate_state(snap.restore_serializer(), new, src, out)
    assert src.available() == 0
    return out.get_copy_of_buffer()


def with_fields(schema, fields):
    s = copy.deepcopy(schema)
    s["fields"] = fields
    return s


def assert_migrates(old_schema, new_schema, old_value, expected_new_value):
    old, new, snap, result = evolve(old_schema, new_schema)
    assert result.is_compatible_after_migration(), result
    assert result.plan is not None
    data = old.to_bytes(old_value)
    assert snap.migrate_value(old.from_bytes(data), new) == expected_new_value
    assert migrate_bytes(snap, old, new, data) == new.to_bytes(expected_new_value)
    return result


def test_same_schema_and_doc_only_change_are_as_is():
    assert evolve(BASE, BASE)[3].is_compatible_as_is()
    documented = copy.deepcopy(BASE)
    documented["doc"] = "events"
    documented["fields"][0]["doc"] = "the id"
    assert evolve(BASE, documented)[3].is_compatible_as_is()


def test_add_field_with_default():
    new = with_fields(BASE, BASE["fields"] + [{"name": "score", "type": "double", "default": 0.5}])
    assert_migrates(BASE, new, OLD_VALUE, dict(OLD_VALUE, score=0.5))


def test_add_nullable_record_field_with_null_default():
    loc = {"type": "record", "name": "Location", "fields": [{"name": "lat", "type": "double"}]}
    new = with_fields(BASE, BASE["fields"] + [{"name": "location", "type": ["null", loc], "default": None}])
    assert_migrates(BASE, new, OLD_VALUE, dict(OLD_VALUE, location=None))


def test_remove_field():
    new = with_fields(BASE, [f for f in BASE["fields"] if f["name"] != "name"])
    assert_migrates(BASE, new, OLD_VALUE, {"id": 7, "kind": "VIEW"})


def test_promote_int_to_long_and_long_to_double():
    new = with_fields(BASE, [{"name": "id", "type": "long"}] + BASE["fields"][1:])
    assert_migrates(BASE, new, OLD_VALUE, OLD_VALUE)
    new2 = with_fields(BASE, [{"name": "id", "type": "double"}] + BASE["fields"][1:])
    assert_migrates(BASE, new2, OLD_VALUE, dict(OLD_VALUE, id=7.0))


def test_string_to_bytes_promotion():
    new = with_fields(BASE, [BASE["fields"][0], {"name": "name", "type": "bytes"}, BASE["fields"][2]])
    assert_migrates(BASE, new, OLD_VALUE, dict(OLD_VALUE, name=b"ann"))


def test_reorder_fields():
    new = with_fields(BASE, list(reversed(BASE["fields"])))
    result = assert_migrates(BASE, new, OLD_VALUE, {"kind": "VIEW", "name": "ann", "id": 7})
    assert not result.is_compatible_as_is()


def test_rename_field_with_alias():
    new = with_fields(BASE, [BASE["fields"][0], {"name": "label", "type": "string", "aliases": ["name"]},
                             BASE["fields"][2]])
    assert_migrates(BASE, new, OLD_VALUE, {"id": 7, "label": "ann", "kind": "VIEW"})


def test_rename_record_with_alias():
    new = copy.deepcopy(BASE)
    new["name"] = "Occurrence"
    new["aliases"] = ["Event"]
    assert_migrates(BASE, new, OLD_VALUE, OLD_VALUE)
    unaliased = copy.deepcopy(BASE)
    unaliased["name"] = "Occurrence"
    result = evolve(BASE, unaliased)[3]
    assert result.is_incompatible()
    assert "name com.acme.Occurrence does not match writer record name com.acme.Event" in result.reason


def test_add_enum_symbol_at_end():
    new = with_fields(BASE, BASE["fields"][:2] + [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "VIEW", "BUY"]}}])
    assert_migrates(BASE, new, OLD_VALUE, OLD_VALUE)


def test_removed_enum_symbol_maps_to_reader_default_or_is_incompatible():
    no_default = with_fields(BASE, BASE["fields"][:2] + [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK"]}}])
    result = evolve(BASE, no_default)[3]
    assert result.is_incompatible()
    assert result.reason.startswith("record Event field kind: writer symbols ['VIEW'] are missing")
    with_default = with_fields(BASE, BASE["fields"][:2] + [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "OTHER"],
                                  "default": "OTHER"}}])
    assert_migrates(BASE, with_default, OLD_VALUE, dict(OLD_VALUE, kind="OTHER"))


def test_add_field_without_default_is_incompatible_with_path_and_rule():
    loc = {"type": "record", "name": "Location", "fields": [{"name": "lat", "type": "double"}]}
    new = with_fields(BASE, BASE["fields"] + [{"name": "location", "type": loc}])
    old, new_ser, snap, result = evolve(BASE, new)
    assert result.is_incompatible()
    assert result.reason.startswith(
        "record Event field location: reader field has no default and is missing in writer")
    assert "Event.location" in result.reason
    with pytest.raises(StateMigrationError, match="no default"):
        snap.migrate_value(OLD_VALUE, new_ser)


def test_change_string_to_int_is_incompatible():
    new = with_fields(BASE, [BASE["fields"][0], {"name": "name", "type": "int"}, BASE["fields"][2]])
    result = evolve(BASE, new)[3]
    assert result.is_incompatible()
    assert result.reason.startswith("record Event field name: reader type int cannot read writer type string")


def test_nested_incompatibility_names_the_full_path():
    def schema(lat_type):
        return {"type": "record", "name": "Event", "fields": [
            {"name": "where", "type": {"type": "record", "name": "Location", "fields": [
                {"name": "lat", "type": lat_type}]}}]}
    result = evolve(schema("double"), schema("int"))[3]
    assert result.is_incompatible()
    assert result.reason.startswith("record Location field lat: reader type int cannot read writer type double")
    assert "Event.where.lat" in result.reason
    assert_migrates(schema("int"), schema("double"), {"where": {"lat": 3}}, {"where": {"lat": 3.0}})


def test_not_an_avro_serializer_is_incompatible():
    old = AvroSerializer(BASE)
    result = old.snapshot_configuration().resolve_schema_compatibility(IntSerializer())
    assert result.is_incompatible() and "IntSerializer" in result.reason


def test_union_evolutions():
    def schema(t):
        return {"type": "record", "name": "U", "fields": [{"name": "v", "type": t}]}
    # a plain field becomes nullable
    assert_migrates(schema("string"), schema(["null", "string"]), {"v": "x"}, {"v": "x"})
    # the branches are promoted
    assert_migrates(schema(["null", "int"]), schema(["null", "long"]), {"v": 4}, {"v": 4})
    assert_migrates(schema(["null", "int"]), schema(["null", "long"]), {"v": None}, {"v": None})
    # a union narrowed to one type is incompatible: null has nowhere to go
    result = evolve(schema(["null", "string"]), schema("string"))[3]
    assert result.is_incompatible() and "writer union branch null" in result.reason


def test_byte_migration_keeps_the_union_branch_avro_resolution_picks():
    old = {"type": "record", "name": "U", "fields": [{"name": "v", "type": "long"}]}
    new = {"type": "record", "name": "U", "fields": [{"name": "v", "type": ["int", "long"]}]}
    o, n, snap, result = evolve(old, new)
    assert result.is_compatible_after_migration()
    migrated = migrate_bytes(snap, o, n, o.to_bytes({"v": 5}))
    # Avro resolves a writer long into the reader's long branch (index 1), not int
    assert migrated == (1).to_bytes(4, "big") + (5).to_bytes(8, "big")
    assert n.from_bytes(migrated) == {"v": 5}


def test_recursive_schema_evolution():
    def schema(extra):
        return {"type": "record", "name": "Node", "fields": [
            {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}] + extra}
    new = schema([{"name": "w", "type": "string", "default": "-"}])
    old_value = {"v": 1, "next": {"v": 2, "next": None}}
    assert_migrates(schema([]), new, old_value,
                    {"v": 1, "next": {"v": 2, "next": None, "w": "-"}, "w": "-"})


def test_defaults_are_not_shared_between_migrated_values():
    new = with_fields(BASE, BASE["fields"] + [
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["t"]}])
    old, new_ser, snap, _ = evolve(BASE, new)
    a = snap.migrate_value(OLD_VALUE, new_ser)
    a["tags"].append("changed")
    assert snap.migrate_value(OLD_VALUE, new_ser)["tags"] == ["t"]


def test_migration_plan_is_compiled_once_per_pair():
    new_schema = with_fields(BASE, BASE["fields"] + [{"name": "n", "type": "int", "default": 0}])
    old, new, snap, result = evolve(BASE, new_schema)
    assert snap._plan(new) is result.plan
    assert snap._plan(AvroSerializer(new_schema)) is result.plan


def test_without_the_avro_package_the_resolver_alone_decides(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_avro(name, *args, **kwargs):
        if name == "avro" or name.startswith("avro."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_avro)
    new = with_fields(BASE, BASE["fields"] + [{"name": "score", "type": "double", "default": 0.5}])
    assert_migrates(BASE, new, OLD_VALUE, dict(OLD_VALUE, score=0.5))
    bad = with_fields(BASE, [BASE["fields"][0], {"name": "name", "type": "int"}, BASE["fields"][2]])
    result = evolve(BASE, bad)[3]
    assert result.is_incompatible() and "record Event field name" in result.reason


def test_after_migration_reason_lists_the_changes():
    new = with_fields(BASE, [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "VIEW", "BUY"]}},
        {"name": "id", "type": "long"},
        {"name": "label", "type": "string", "aliases": ["name"]},
        {"name": "score", "type": "double", "default": 0.5},
    ])
    result = evolve(BASE, new)[3]
    assert result.is_compatible_after_migration()
    for change in ("Event.id: int promoted to long", "Event.name: renamed to label",
                   "Event.score: added with default 0.5", "Event: fields reordered"):
        assert change in result.reason
    removed = evolve(BASE, with_fields(BASE, BASE["fields"][:2]))[3]
    assert "Event.kind: removed" in removed.reason
