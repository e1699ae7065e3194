"""Hostile input for Tuple / Row / POJO data and snapshots: truncation at every byte, bad flags,
corrupt optional-map headers, absurd counts and lengths. Every failure must be a typed
StateFormatError whose message says where (an offset), and nothing may allocate by a length read
from the data."""

from __future__ import annotations

import dataclasses
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import (
    MalformedDataError,
    SnapshotError,
    StateFormatError,
    TruncatedDataError,
    UnsupportedVersionError,
)
from statemorph.row import Row, RowKind
from statemorph.serializers import (
    IntSerializer,
    LongSerializer,
    PojoSerializer,
    RowSerializer,
    StringSerializer,
    TupleSerializer,
)
from statemorph.serializers.pojo import OPTIONAL_MAP_HEADER
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

POJO_SNAP = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
OPTMAP = OPTIONAL_MAP_HEADER.to_bytes(8, "big")


def utf(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


@dataclasses.dataclass
class Event:
    id: int | None
    name: str | None
    tags: tuple | None


def pojo() -> PojoSerializer:
    return PojoSerializer(
        Event,
        {
            "id": LongSerializer(),
            "name": StringSerializer(),
            "tags": TupleSerializer([IntSerializer(), StringSerializer()]),
        },
        "p.Event",
    )


def nested_row() -> RowSerializer:
    inner = RowSerializer([IntSerializer(), StringSerializer()], field_names=["a", "b"])
    return RowSerializer([LongSerializer(), inner, pojo()], field_names=["id", "inner", "event"])


SAMPLES = [
    (TupleSerializer([IntSerializer(), StringSerializer(), LongSerializer()]), (1, "héllo", -1)),
    (nested_row(), Row((7, Row((3, "x"), RowKind.DELETE), Event(5, "e", (1, "t"))), RowKind.UPDATE_AFTER)),
    (pojo(), Event(1, None, (2, "zz"))),
]


def assert_located(err: BaseException) -> None:
    assert isinstance(err, StateFormatError), type(err)
    assert "offset" in str(err), str(err)


@pytest.mark.parametrize(("ser", "value"), SAMPLES, ids=["tuple", "row", "pojo"])
def test_data_truncated_at_every_byte(ser, value):
    data = ser.to_bytes(value)
    for cut in range(len(data)):
        with pytest.raises(StateFormatError) as ei:
            ser.from_bytes(data[:cut])
        assert_located(ei.value)


@pytest.mark.parametrize(("ser", "value"), SAMPLES, ids=["tuple", "row", "pojo"])
def test_snapshot_truncated_at_every_byte(ser, value):
    snap = write_versioned_snapshot(ser.snapshot_configuration())
    for cut in range(len(snap)):
        with pytest.raises(StateFormatError) as ei:
            read_versioned_snapshot(snap[:cut])
        assert_located(ei.value)


def test_truncation_inside_nested_field_reports_field_path():
    ser = nested_row()
    data = ser.to_bytes(Row((7, Row((3, "xyz")), None)))
    with pytest.raises(TruncatedDataError) as ei:
        ser.from_bytes(data[:-1])
    assert "inner.b" in str(ei.value)
    assert ei.value.offset >= 0


@pytest.mark.parametrize("flags", [0x00, 0x03, 0x06, 0x10, 0x80, 0xFF])
def test_bad_pojo_flags_byte(flags):
    with pytest.raises(MalformedDataError, match=f"0x{flags:02X} at offset 0"):
        pojo().from_bytes(bytes([flags]))


def test_bad_pojo_flags_inside_row_names_offset_and_path():
    ser = nested_row()
    data = bytearray(ser.to_bytes(Row((7, None, Event(1, "a", (1, "b"))))))
    # mask (1 byte) + long (8 bytes): the POJO flags byte is at offset 9
    data[9] = 0x20
    with pytest.raises(MalformedDataError, match="offset 9") as ei:
        ser.from_bytes(bytes(data))
    assert "event" in str(ei.value)


def test_bad_pojo_field_null_flag():
    data = bytearray(pojo().to_bytes(Event(1, "a", (1, "b"))))
    data[1] = 0x02
    with pytest.raises(MalformedDataError, match="null flag 0x02 at offset 1"):
        pojo().from_bytes(bytes(data))


def test_row_mask_padding_bits_are_rejected():
    ser = RowSerializer([IntSerializer(), StringSerializer()])
    with pytest.raises(MalformedDataError, match="padding bits .* at offset 0|at offset 0: padding"):
        ser.from_bytes(bytes.fromhex("11 00 00 00 01"))


def test_trailing_bytes_are_rejected():
    ser, value = SAMPLES[0]
    with pytest.raises(MalformedDataError, match="trailing"):
        ser.from_bytes(ser.to_bytes(value) + b"\x00")


def pojo_snapshot_body(fields: bytes, n: int) -> bytes:
    return utf(POJO_SNAP) + i32(2) + utf("p.X") + OPTMAP + i32(n) + fields + OPTMAP + i32(0) + OPTMAP + i32(0)


def test_corrupt_optional_map_header():
    good = write_versioned_snapshot(pojo().snapshot_configuration())
    at = good.index(OPTMAP)
    bad = good[:at] + b"\xff" + good[at + 1 :]
    with pytest.raises(MalformedDataError, match=f"header .* at offset {at}|at offset {at}: optional-map header"):
        read_versioned_snapshot(bad)


def no_big_allocation(fn) -> BaseException:
    tracemalloc.start()
    try:
        with pytest.raises(StateFormatError) as ei:
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"peak allocation {peak} bytes"
    return ei.value


def test_absurd_optional_map_count_allocates_nothing():
    data = pojo_snapshot_body(b"", 0x7FFFFFFF)
    err = no_big_allocation(lambda: read_versioned_snapshot(data))
    assert isinstance(err, TruncatedDataError) and "offset" in str(err)


def test_negative_optional_map_count():
    with pytest.raises(MalformedDataError, match="negative length -1"):
        read_versioned_snapshot(pojo_snapshot_body(b"", -1))


def test_absurd_frame_length_allocates_nothing():
    entry = utf("a") + b"\x01" + i32(0x7FFFFFF0)
    data = pojo_snapshot_body(entry, 1)
    err = no_big_allocation(lambda: read_versioned_snapshot(data))
    assert isinstance(err, TruncatedDataError) and "key frame" in str(err)


def test_absurd_nested_count_in_row_snapshot_allocates_nothing():
    good = write_versioned_snapshot(RowSerializer([IntSerializer()]).snapshot_configuration())
    delegate = good.index(i32(1333245))
    bad = good[: delegate + 8] + i32(0x7FFFFFFF) + good[delegate + 12 :]
    err = no_big_allocation(lambda: read_versioned_snapshot(bad))
    assert isinstance(err, TruncatedDataError)


def test_corrupt_composite_magic_and_versions():
    good = write_versioned_snapshot(RowSerializer([IntSerializer()]).snapshot_configuration())
    magic = good.index(i32(911108))
    with pytest.raises(MalformedDataError, match=f"offset {magic}"):
        read_versioned_snapshot(good[:magic] + i32(1) + good[magic + 4 :])
    with pytest.raises(UnsupportedVersionError):
        read_versioned_snapshot(good[: magic + 4] + i32(5) + good[magic + 8 :])
    pojo_snap = write_versioned_snapshot(pojo().snapshot_configuration())
    version_at = 2 + len(POJO_SNAP)
    for v in (1, 3):
        with pytest.raises(UnsupportedVersionError):
            read_versioned_snapshot(pojo_snap[:version_at] + i32(v) + pojo_snap[version_at + 4 :])


def test_garbage_inside_a_value_frame_becomes_an_absent_field():
    """Frames keep the stream in step: a corrupt field snapshot is absent (as in Flink), and
    restoring a serializer from it fails with a typed error naming the field."""
    garbage = b"\xff\xff\xff"
    key = utf("p.X") + utf("a")
    entry = utf("a") + b"\x01" + i32(len(key)) + key + b"\x01" + i32(len(garbage)) + garbage
    snap = read_versioned_snapshot(pojo_snapshot_body(entry, 1))
    with pytest.raises(SnapshotError, match="'a'.*offset"):
        snap.restore_serializer()


@settings(max_examples=80)
@given(st.binary(max_size=64))
def test_random_bytes_never_crash_data_readers(data):
    for ser, _ in SAMPLES:
        try:
            ser.from_bytes(data)
        except StateFormatError as e:
            assert "offset" in str(e)


@settings(max_examples=60)
@given(st.data())
def test_mutated_snapshots_fail_typed_or_read(data):
    ser, _ = data.draw(st.sampled_from(SAMPLES))
    good = bytearray(write_versioned_snapshot(ser.snapshot_configuration()))
    pos = data.draw(st.integers(0, len(good) - 1))
    good[pos] = data.draw(st.integers(0, 255))
    try:
        snap = read_versioned_snapshot(bytes(good))
    except StateFormatError:
        return
    try:
        snap.restore_serializer()
    except StateFormatError:
        pass


def test_duplicate_field_in_optional_map_is_rejected():
    key = utf("p.X") + utf("a")
    value = utf("org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot") + i32(3)
    entry = utf("a") + b"\x01" + i32(len(key)) + key + b"\x01" + i32(len(value)) + value
    data = pojo_snapshot_body(entry + entry, 2)
    second = data.index(entry) + len(entry)
    with pytest.raises(MalformedDataError, match=f"duplicate key 'a' at offset {second}"):
        read_versioned_snapshot(data)


def test_same_field_under_two_key_names_is_rejected():
    key = utf("p.X") + utf("a")
    value = utf("org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot") + i32(3)
    tail = b"\x01" + i32(len(key)) + key + b"\x01" + i32(len(value)) + value
    data = pojo_snapshot_body(utf("a") + tail + utf("a2") + tail, 2)
    with pytest.raises(MalformedDataError, match=r"\['a'\] listed twice"):
        read_versioned_snapshot(data)


def test_tuple_snapshot_without_fields_is_a_format_error() -> None:
    """Found by fuzzing: a Tuple snapshot whose nested count is 0 (one corrupt i32) used to read and
    then fail in restore_serializer with a bare ValueError; now the read itself names the offset."""
    import struct

    from statemorph import serializers
    from statemorph.errors import MalformedDataError
    from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

    ser = serializers.TupleSerializer([serializers.IntSerializer()])
    blob = write_versioned_snapshot(ser.snapshot_configuration())
    delegate = struct.pack(">ii", 1333245, 1)
    head = blob[: blob.index(delegate) + len(delegate)]
    with pytest.raises(MalformedDataError, match=r"0 nested serializer snapshots, the format has 1\.\.25"):
        read_versioned_snapshot(head + struct.pack(">i", 0))
