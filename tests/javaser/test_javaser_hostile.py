"""Hostile Java serialization streams and Flink RowData snapshots: every one is a typed
:class:`JavaSerializationError` / :class:`StateFormatError` saying what and where; nothing named in
the bytes is instantiated, nothing hangs, no length in the data is trusted before it is checked."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import JavaSerializationError, SnapshotError, StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.javaser import read_logical_type, read_stream, write_logical_type
from statemorph.javaser.classes import flink_policy
from statemorph.javaser.reader import MAX_DEPTH
from statemorph.serializers import RowDataSerializer
from statemorph.serializers.primitives import LongSerializerSnapshot
from statemorph.types import ArrayType, IntType, LogicalType, StructuredType, parse_type
from statemorph.typeutils import read_serializer_snapshot, write_nested_snapshots, write_serializer_snapshot

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
HEADER = bytes.fromhex("ACED0005")


def read(data: bytes) -> LogicalType:
    return read_logical_type(DataInputDeserializer(data))


def utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def object_of_class(name: str, suid: int = 1, flags: int = 0x02) -> bytes:
    """``TC_OBJECT TC_CLASSDESC name suid flags, no fields, no annotation, no superclass``."""
    return HEADER + b"\x73\x72" + utf(name) + struct.pack(">qBH", suid, flags, 0) + b"\x78\x70"


def test_every_prefix_of_a_type_stream_is_a_typed_error() -> None:
    data = write_logical_type(parse_type(EVENTS))
    for cut in range(len(data)):
        with pytest.raises(JavaSerializationError):
            read(data[:cut])


def test_every_prefix_of_a_flink_snapshot_is_a_typed_error() -> None:
    blob = write_serializer_snapshot(RowDataSerializer(EVENTS + "").flink_snapshot_configuration())
    for cut in range(0, len(blob), 7):
        with pytest.raises(StateFormatError):
            read_serializer_snapshot(blob[:cut])
    with pytest.raises(StateFormatError, match="trailing"):
        read_serializer_snapshot(blob + b"\x00")


@pytest.mark.parametrize("header", ["ACED0004", "DEADBEEF", "0000ACED", "ACED"])
def test_wrong_magic_or_version(header: str) -> None:
    with pytest.raises(JavaSerializationError, match="AC ED 00 05|truncated stream header"):
        read(bytes.fromhex(header) + write_logical_type(IntType())[4:])


@pytest.mark.parametrize("name", [
    "java.util.HashMap",
    "org.apache.commons.collections.functors.InvokerTransformer",
    "com.sun.org.apache.xalan.internal.xsltc.trax.TemplatesImpl",
    "java.lang.Runtime",
    "org.apache.flink.table.types.logical.DistinctType",  # (RawType, StructuredType are whitelisted for SQL)
    "",
])
def test_classes_off_the_whitelist_are_refused_by_name(name: str) -> None:
    with pytest.raises(JavaSerializationError, match="not on the whitelist") as e:
        read(object_of_class(name))
    assert repr(name) in str(e.value) and e.value.offset == 5  # the class descriptor after TC_OBJECT


def test_a_whitelisted_class_with_another_serial_version_uid_is_refused() -> None:
    with pytest.raises(JavaSerializationError, match="serialVersionUID 2, expected 1"):
        read(object_of_class("org.apache.flink.table.types.logical.IntType", suid=2))


def test_a_whitelisted_class_with_another_shape_is_refused() -> None:
    # IntType declared with no superclass: not the descriptor Flink writes
    with pytest.raises(JavaSerializationError, match="does not have the shape"):
        read(object_of_class("org.apache.flink.table.types.logical.IntType"))
    with pytest.raises(JavaSerializationError, match="externalizable"):
        read(object_of_class("org.apache.flink.table.types.logical.IntType", flags=0x0C))


def test_huge_declared_lengths_are_checked_before_allocating() -> None:
    with pytest.raises(JavaSerializationError, match="truncated"):
        read(HEADER + b"\x74\xff\xff" + b"abc")  # TC_STRING of 65535 bytes, 3 present
    with pytest.raises(JavaSerializationError, match="exceeds the limit"):
        read(HEADER + b"\x7c" + struct.pack(">q", 1 << 62))  # TC_LONGSTRING
    array_desc = b"\x72" + utf("[Ljava.lang.Object;") + struct.pack(">qBH", -8012369246846506644, 2, 0) + b"\x78\x70"
    with pytest.raises(JavaSerializationError, match="exceeds the limit"):
        read(HEADER + b"\x75" + array_desc + struct.pack(">i", 0x7FFFFFFF))
    with pytest.raises(JavaSerializationError, match="truncated"):
        read(HEADER + b"\x75" + array_desc + struct.pack(">i", 60000))


def test_a_row_field_count_that_lies_is_refused() -> None:
    data = bytearray(write_logical_type(parse_type("ROW<a INT, b INT>")))
    at = data.index(bytes.fromhex("7704 00000002"))  # ArrayList writeObject data: i32 size
    data[at + 2:at + 6] = struct.pack(">i", 3)
    with pytest.raises(JavaSerializationError, match="declares 2 elements"):
        read(bytes(data))


def test_deep_nesting_is_bounded() -> None:
    t: LogicalType = IntType()
    for _ in range(MAX_DEPTH + 10):
        t = ArrayType(t)
    with pytest.raises(JavaSerializationError, match="nested more than"):
        read(write_logical_type(t))
    shallow: LogicalType = IntType()
    for _ in range(80):  # within the stream limit, beyond the type limit
        shallow = ArrayType(shallow)
    with pytest.raises(JavaSerializationError, match="nested more than 64"):
        read(write_logical_type(shallow))


def test_cyclic_and_dangling_references_are_refused() -> None:
    data = write_logical_type(ArrayType(IntType()))
    at = data.index(b"\x74\x00\x05ARRAY") + 8  # the elementType object follows the root constant
    # handles: 0 ArrayType desc, 1 signature, 2 LogicalType desc, 3 signature, 4 the ArrayType itself
    with pytest.raises(JavaSerializationError, match="cyclic back reference"):
        read(data[:at] + b"\x71\x00\x7e\x00\x04")
    with pytest.raises(JavaSerializationError, match="unknown handle"):
        read(data[:at] + b"\x71\x00\x7e\x7f\xff")


@pytest.mark.parametrize("code", [0x79, 0x7B, 0x7D, 0x77, 0x00, 0xFF])
def test_unexpected_type_codes(code: int) -> None:
    with pytest.raises(JavaSerializationError, match="unexpected|proxy"):
        read(HEADER + bytes([code]) + bytes(16))


def test_values_are_checked_after_the_classes() -> None:
    ts = write_logical_type(parse_type("TIMESTAMP(3)"))
    with pytest.raises(JavaSerializationError, match="unknown timestamp kind 'REGULAX'"):
        read(ts.replace(b"\x74\x00\x07REGULAR", b"\x74\x00\x07REGULAX"))
    with pytest.raises(JavaSerializationError, match="type root BIGINT, expected INTEGER"):
        read(write_logical_type(IntType()).replace(b"\x74\x00\x07INTEGER", b"\x74\x00\x06BIGINT"))
    dec = write_logical_type(parse_type("DECIMAL(10, 2)"))
    with pytest.raises(JavaSerializationError, match="precision"):
        read(dec[:-8] + struct.pack(">ii", 99, 2))


def test_a_nested_snapshot_that_does_not_fit_its_type_is_refused() -> None:
    out = DataOutputSerializer()
    out.write_int(2)
    out.write_utf("org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot")
    out.write_int(3)
    out.write_int(1)
    out.write(write_logical_type(IntType()))
    write_nested_snapshots(out, [LongSerializerSnapshot()])
    with pytest.raises(SnapshotError, match="field #0 of type INT has a LongSerializerSnapshot"):
        read_serializer_snapshot(out.get_copy_of_buffer())


def test_a_huge_field_count_is_refused() -> None:
    out = DataOutputSerializer()
    out.write_int(2)
    out.write_utf("org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot")
    out.write_int(3)
    out.write_int(0x7FFFFFFF)
    with pytest.raises(StateFormatError, match="field types"):
        read_serializer_snapshot(out.get_copy_of_buffer())


SNAPSHOT = write_serializer_snapshot(RowDataSerializer(
    "ROW<a ARRAY<DECIMAL(5, 5)>, m MAP<STRING, TIMESTAMP(3)>, r ROW<x INT NOT NULL>>"
).flink_snapshot_configuration())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SNAPSHOT) - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_corrupted_snapshots_read_or_raise_typed_errors(edits: list[tuple[int, int]]) -> None:
    data = bytearray(SNAPSHOT)
    for at, byte in edits:
        data[at] = byte
    try:
        read_serializer_snapshot(bytes(data))
    except StateFormatError:
        pass


def test_the_reader_never_reads_past_its_stream() -> None:
    data = write_logical_type(IntType()) + write_logical_type(parse_type("STRING"))
    src = DataInputDeserializer(data)
    read_stream(src, flink_policy)
    assert read_logical_type(src) == parse_type("STRING") and src.available() == 0


FIRST = "org.apache.flink.table.runtime.functions.aggregate." \
        "FirstValueWithRetractAggFunction$FirstValueWithRetractAccumulator"


def test_structured_types_round_trip_and_their_shape_is_checked() -> None:
    """An inline STRUCTURED type (with or without its class literal) reads back equal; a class name
    that is not its class literal's, or another comparison constant, is refused naming it; a user's
    class (off the whitelist) is written as the literal of a class that is not Serializable and
    reads back; a name that is no Java class name is not written."""
    t = parse_type(f"ROW<a STRUCTURED<'{FIRST}', `firstValue` STRING, `firstOrder` BIGINT NOT NULL 'o'>>")
    data = write_logical_type(t)
    assert read(data) == t
    for every_prefix in range(0, len(data), 11):
        with pytest.raises(JavaSerializationError):
            read(data[:every_prefix])
    no_class = parse_type("STRUCTURED<'com.acme.Acc', v INT>")
    assert isinstance(no_class, StructuredType)
    assert read(write_logical_type(no_class)) == no_class
    with pytest.raises(JavaSerializationError, match="'com.acme.Acc-1' is not a Java class name"):
        write_logical_type(StructuredType(no_class.fields, class_name="com.acme.Acc-1"))
    bare = StructuredType(no_class.fields, class_name="com.acme.Acc", has_implementation_class=False)
    assert read(write_logical_type(bare)) == bare
    renamed = data.replace(utf(FIRST), utf(FIRST[:-1] + "X"), 1)  # the className string comes first
    with pytest.raises(JavaSerializationError, match="has implementation class " + FIRST.replace("$", r"\$")):
        read(renamed)
    other = data.replace(utf("EQUALS"), utf("FULLXX"), 1)
    with pytest.raises(JavaSerializationError, match="with comparison FULLXX"):
        read(other)
