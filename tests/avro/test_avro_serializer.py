"""AvroSerializer: Flink's state bytes for Avro values, value mapping, snapshot layout."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest

from statemorph.errors import SerializationError, SnapshotError, TypeParseError
from statemorph.io import DataOutputSerializer
from statemorph.serializers import AvroSerializer, AvroSerializerSnapshot
from statemorph.serializers.strings import encode_string
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

SNAP_ID = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"

CHECKED_SCHEMA = {
    "type": "record", "name": "R", "fields": [
        {"name": "id", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "s", "type": ["null", "string"]},
        {"name": "arr", "type": {"type": "array", "items": "int"}},
        {"name": "m", "type": {"type": "map", "values": "boolean"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    ],
}


def test_checked_example_from_flink_formats_2_11_is_byte_exact():
    s = AvroSerializer(CHECKED_SCHEMA)
    value = {"id": 1, "l": -2, "s": "hé", "arr": [5, 6], "m": {"k": True}, "e": "B"}
    expected = bytes.fromhex(
        "00000001" "FFFFFFFFFFFFFFFE" "00000001 00000003 68C3A9".replace(" ", "")
        + "02 00000005 00000006 00".replace(" ", "")
        + "01 00000001 6B 01 00".replace(" ", "")
        + "00000001"
    )
    assert s.to_bytes(value) == expected
    assert s.from_bytes(expected) == value


@pytest.mark.parametrize(
    "schema, value, hex_bytes",
    [
        ("null", None, ""),
        ("boolean", True, "01"),
        ("int", -1, "ffffffff"),
        ("long", 1 << 40, "0000010000000000"),
        ("float", 1.5, "3fc00000"),
        ("double", -0.0, "8000000000000000"),
        ("double", float("nan"), "7ff8000000000000"),
        ("float", 1e300, "7f800000"),  # Java's (float) cast of a huge double
        ("string", "", "00000000"),
        ("bytes", b"\x00\xff", "0000000200ff"),
        ({"type": "fixed", "name": "F", "size": 3}, b"abc", "616263"),
        ({"type": "array", "items": "int"}, [], "00"),
        ({"type": "map", "values": "int"}, {}, "00"),
        ({"type": "array", "items": "null"}, [None] * 200, "c80100"),  # VARLEN(200) = C8 01
        (["null", "int"], None, "00000000"),
        (["null", "int"], 7, "0000000100000007"),
    ],
)
def test_primitive_and_container_encodings(schema, value, hex_bytes):
    s = AvroSerializer(schema)
    assert s.to_bytes(value).hex() == hex_bytes
    back = s.from_bytes(bytes.fromhex(hex_bytes))
    if value == value and schema != "float":  # NaN and float32 rounding aside, exact round trip
        assert back == value


def test_reader_accepts_several_array_blocks_like_avro_java():
    s = AvroSerializer({"type": "array", "items": "int"})
    data = bytes.fromhex("01 00000001 02 00000002 00000003 00".replace(" ", ""))
    assert s.from_bytes(data) == [1, 2, 3]


def test_logical_types_follow_fastavro_mapping_and_java_decimal_bytes():
    schema = {"type": "record", "name": "L", "fields": [
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "fdec", "type": {"type": "fixed", "name": "D", "size": 4, "logicalType": "decimal",
                                  "precision": 8, "scale": 1}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
    s = AvroSerializer(schema)
    utc = dt.timezone.utc
    value = {
        "dec": decimal.Decimal("-1.28"),
        "fdec": decimal.Decimal("12.5"),
        "d": dt.date(1970, 1, 2),
        "tm": dt.time(0, 0, 1, 500000),
        "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc),
        "tu": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
        "lt": dt.datetime(2024, 2, 29, 12, 0),
        "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    }
    data = s.to_bytes(value)
    # -128 unscaled is one byte 0x80 (Java BigInteger.toByteArray), fixed is sign-extended
    assert data[:5] == bytes.fromhex("0000000180")
    assert data[5:9] == (125).to_bytes(4, "big")
    assert data[9:13] == (1).to_bytes(4, "big")
    assert data[13:17] == (1500).to_bytes(4, "big")
    assert data[17:25] == (1000).to_bytes(8, "big")
    assert data[25:33] == (-1).to_bytes(8, "big", signed=True)
    assert s.from_bytes(data) == value
    # raw values are accepted on write too, as in fastavro
    raw = dict(value, d=1, ts=1000)
    assert s.to_bytes(raw) == data


def test_decimal_with_too_many_fraction_digits_is_rejected_with_path():
    s = AvroSerializer({"type": "record", "name": "P", "fields": [
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}}]})
    with pytest.raises(SerializationError, match=r"P\.price"):
        s.to_bytes({"price": decimal.Decimal("1.234")})


def test_union_branch_choice_like_fastavro():
    rec_a = {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}
    rec_b = {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"},
                                                       {"name": "y", "type": "string"}]}
    s = AvroSerializer(["null", rec_a, rec_b, "float", "double", "string"])
    assert s.to_bytes({"x": 1, "y": "z"})[:4] == (2).to_bytes(4, "big")  # most matching fields
    assert s.to_bytes({"x": 1})[:4] == (1).to_bytes(4, "big")
    assert s.to_bytes(1.5)[:4] == (4).to_bytes(4, "big")  # double preferred over float
    assert s.to_bytes(("float", 1.5))[:4] == (3).to_bytes(4, "big")  # tuple notation
    assert s.to_bytes(("B", {"x": 1, "y": "q"}))[:4] == (2).to_bytes(4, "big")
    assert s.from_bytes(s.to_bytes(("float", 1.5))) == 1.5
    with pytest.raises(SerializationError, match="matches no branch"):
        s.to_bytes(b"bytes")


def test_missing_field_uses_default_and_null_union():
    s = AvroSerializer({"type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["a"]},
        {"name": "note", "type": ["null", "string"]},
    ]})
    assert s.from_bytes(s.to_bytes({"id": 3})) == {"id": 3, "tags": ["a"], "note": None}
    with pytest.raises(SerializationError, match=r"Event\.id.*no value and no default"):
        s.to_bytes({"tags": []})


def test_bad_values_name_the_field_path():
    s = AvroSerializer({"type": "record", "name": "Event", "fields": [
        {"name": "location", "type": {"type": "record", "name": "Loc", "fields": [
            {"name": "lat", "type": "double"}, {"name": "n", "type": "int"}]}}]})
    with pytest.raises(SerializationError, match=r"Event\.location\.lat.*expected float"):
        s.to_bytes({"location": {"lat": "north", "n": 1}})
    with pytest.raises(SerializationError, match=r"Event\.location\.n.*out of range for int"):
        s.to_bytes({"location": {"lat": 1.0, "n": 1 << 31}})
    with pytest.raises(SerializationError, match="expected bool"):
        AvroSerializer("boolean").to_bytes(1)
    with pytest.raises(SerializationError, match="not a symbol"):
        AvroSerializer({"type": "enum", "name": "E", "symbols": ["A"]}).to_bytes("B")
    with pytest.raises(SerializationError, match="needs 2 bytes"):
        AvroSerializer({"type": "fixed", "name": "F", "size": 2}).to_bytes(b"abc")
    with pytest.raises(SerializationError, match="UTF-8"):
        AvroSerializer("string").to_bytes("\ud800")


def test_recursive_schema_round_trips():
    s = AvroSerializer({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]})
    value = {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}}
    data = s.to_bytes(value)
    assert data.hex() == "00000001" "00000001" "00000002" "00000001" "00000003" "00000000"
    assert s.from_bytes(data) == value


def test_named_type_references_and_namespaces():
    s = AvroSerializer({"type": "record", "name": "Outer", "namespace": "com.acme", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "Id", "size": 2}},
        {"name": "b", "type": "Id"},
        {"name": "c", "type": "com.acme.Id"},
    ]})
    assert s.from_bytes(s.to_bytes({"a": b"01", "b": b"23", "c": b"45"})) == {"a": b"01", "b": b"23", "c": b"45"}
    assert s.schema_json == (
        '{"type":"record","name":"Outer","namespace":"com.acme","fields":[{"name":"a","type":'
        '{"type":"fixed","name":"Id","size":2}},{"name":"b","type":"Id"},{"name":"c","type":"Id"}]}'
    )


def test_schema_json_is_avro_java_compact_form():
    # expected string printed by Avro 1.12.1 Java Schema.toString(false) for the same input
    schema = {"type": "record", "name": "Event", "namespace": "com.x", "doc": "d", "aliases": ["Old"], "fields": [
        {"name": "id", "type": "int", "custom": 1},
        {"name": "loc", "type": {"type": "record", "name": "Loc", "fields": [
            {"name": "x", "type": "double", "default": 1e20}]}, "aliases": ["location"]},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "e", "type": {"type": "enum", "name": "E", "namespace": "other", "symbols": ["A", "B"],
                               "default": "A", "doc": "ed", "aliases": ["X", "y.Z"]}},
        {"name": "self", "type": ["null", "Event", "other.E"], "order": "descending", "doc": "x\u0001\n\"y"},
    ]}
    expected = (
        '{"type":"record","name":"Event","namespace":"com.x","doc":"d","fields":[{"name":"id","type":"int",'
        '"custom":1},{"name":"loc","type":{"type":"record","name":"Loc","fields":[{"name":"x","type":"double",'
        '"default":1.0E20}]},"aliases":["location"]},{"name":"d","type":{"type":"bytes","logicalType":"decimal",'
        '"precision":4,"scale":2}},{"name":"e","type":{"type":"enum","name":"E","namespace":"other","doc":"ed",'
        '"symbols":["A","B"],"default":"A","aliases":["X","y.Z"]}},{"name":"self","type":["null","Event",'
        '"other.E"],"doc":"x\\u0001\\n\\"y","order":"descending"}],"aliases":["Old"]}'
    )
    assert AvroSerializer(schema).schema_json == expected
    assert AvroSerializer(json.dumps(schema, indent=2)).schema_json == expected
    assert AvroSerializer(expected).schema_json == expected


def test_invalid_schema_is_a_type_parse_error():
    with pytest.raises(TypeParseError):
        AvroSerializer({"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nope"}]})
    with pytest.raises(TypeParseError):
        AvroSerializer("{not json")


def test_snapshot_v3_layout_and_round_trip():
    s = AvroSerializer(CHECKED_SCHEMA)
    snap = s.snapshot_configuration()
    out = DataOutputSerializer()
    snap.write_snapshot(out)
    assert out.get_copy_of_buffer() == encode_string("org.apache.avro.generic.GenericRecord") + encode_string(
        s.schema_json)
    blob = write_versioned_snapshot(snap)
    assert blob[:2 + len(SNAP_ID)] == len(SNAP_ID).to_bytes(2, "big") + SNAP_ID.encode()
    assert blob[2 + len(SNAP_ID):6 + len(SNAP_ID)] == (3).to_bytes(4, "big")
    back = read_versioned_snapshot(blob)
    assert isinstance(back, AvroSerializerSnapshot)
    assert back.restore_serializer() == s
    assert read_serializer_snapshot(write_serializer_snapshot(snap)).schema_json == s.schema_json
    custom = AvroSerializer(CHECKED_SCHEMA, java_class_name="com.acme.R")
    assert read_versioned_snapshot(write_versioned_snapshot(custom.snapshot_configuration())).runtime_class == \
        "com.acme.R"


def _utf(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def test_snapshot_v2_and_v1_are_readable():
    s = AvroSerializer(CHECKED_SCHEMA)
    head = _utf(SNAP_ID)
    v2 = head + (2).to_bytes(4, "big") + _utf("com.acme.R") + _utf(json.dumps(CHECKED_SCHEMA))
    snap2 = read_versioned_snapshot(v2)
    assert snap2.runtime_class == "com.acme.R" and snap2.schema_json == s.schema_json
    v1 = head + (1).to_bytes(4, "big") + _utf(json.dumps(CHECKED_SCHEMA))
    snap1 = read_versioned_snapshot(v1)
    assert snap1.runtime_class == "org.apache.avro.generic.GenericRecord"
    assert snap1.restore_serializer().from_bytes(s.to_bytes({"id": 1, "l": 2, "s": None, "arr": [], "m": {},
                                                             "e": "A"}))["e"] == "A"


def test_snapshot_with_invalid_schema_is_a_snapshot_error():
    blob = _utf(SNAP_ID) + (3).to_bytes(4, "big") + encode_string("x") + encode_string('{"type":"nope"}')
    with pytest.raises(SnapshotError, match="invalid schema"):
        read_versioned_snapshot(blob)
    blob = _utf(SNAP_ID) + (3).to_bytes(4, "big") + encode_string(None) + encode_string("int")
    with pytest.raises(SnapshotError, match="null"):
        read_versioned_snapshot(blob)


def test_equality_and_copy():
    a = AvroSerializer(CHECKED_SCHEMA)
    b = AvroSerializer(json.dumps(CHECKED_SCHEMA))
    assert a == b and hash(a) == hash(b)
    assert a != AvroSerializer(CHECKED_SCHEMA, java_class_name="x.Y")
    v = {"id": 1, "l": 2, "s": "x", "arr": [1], "m": {"a": False}, "e": "A"}
    c = a.copy(v)
    assert c == v and c is not v and c["arr"] is not v["arr"]
    assert a.get_length() == -1
