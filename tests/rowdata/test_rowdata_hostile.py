"""Corrupt and hostile RowData bytes and snapshots: typed errors naming the field path and byte
offset; no crash, hang or large allocation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import MalformedDataError, SnapshotError, StateFormatError, TruncatedDataError
from statemorph.io import DataOutputSerializer
from statemorph.migration import migrate_bytes
from statemorph.serializers import RowDataSerializer
from statemorph.serializers.rowdata import RowDataSerializerSnapshot
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW_EVENTS = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT, extra STRING>>"


def framed(body: bytes | bytearray) -> bytes:
    return struct.pack(">i", len(body)) + bytes(body)


def events_body(device: str = "a long device type") -> bytearray:
    return bytearray(RowDataSerializer(EVENTS).to_binary_row((7, (3, 17, device))))


def test_huge_declared_length_is_rejected_without_allocating() -> None:
    with pytest.raises(TruncatedDataError, match="RowData bytes"):
        RowDataSerializer(EVENTS).from_bytes(b"\x7f\xff\xff\xff" + bytes(24))


def test_length_smaller_than_fixed_part() -> None:
    with pytest.raises(MalformedDataError, match="smaller than the fixed part"):
        RowDataSerializer(EVENTS).from_bytes(framed(bytes(8)))


def test_truncated_prefix() -> None:
    with pytest.raises(TruncatedDataError):
        RowDataSerializer(EVENTS).from_bytes(b"\x00\x00")


def test_bad_row_kind() -> None:
    body = events_body()
    body[0] = 9
    with pytest.raises(MalformedDataError, match=r"invalid RowKind byte 9 \(at byte offset 4\)"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_null_bits_beyond_arity() -> None:
    body = events_body()
    body[1] |= 0x80
    with pytest.raises(MalformedDataError, match="null bits set beyond"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_nested_offset_outside_the_row_names_the_field() -> None:
    body = events_body()
    struct.pack_into("<Q", body, 16, (4096 << 32) | 64)  # metadata slot
    with pytest.raises(MalformedDataError, match=r"^metadata: nested row .* \(at byte offset 20\)"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_offset_into_the_fixed_part_is_rejected() -> None:
    body = events_body()
    struct.pack_into("<Q", body, 16, (0 << 32) | 24)
    with pytest.raises(MalformedDataError, match="metadata: nested row at relative offset 0"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_string_reference_outside_nested_row_names_the_path() -> None:
    body = events_body()
    nested = 24  # nested row starts after the outer fixed part
    slot = nested + 8 + 16
    struct.pack_into("<Q", body, slot, (1000 << 32) | 18)
    with pytest.raises(MalformedDataError, match=rf"^metadata\.deviceType: .*at byte offset {4 + slot}\)"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_invalid_inline_length_and_utf8() -> None:
    s = RowDataSerializer("ROW<s STRING>")
    body = bytearray(s.to_binary_row(("abc",)))
    body[15] = 0x8F
    with pytest.raises(MalformedDataError, match="s: inline data length 15"):
        s.from_bytes(framed(body))
    body = bytearray(s.to_binary_row(("abc",)))
    body[8] = 0xFF
    with pytest.raises(MalformedDataError, match="s: invalid UTF-8"):
        s.from_bytes(framed(body))


def test_inline_marker_on_a_structure_slot() -> None:
    body = events_body()
    body[23] |= 0x80
    with pytest.raises(MalformedDataError, match="metadata: ROW slot has the inline marker"):
        RowDataSerializer(EVENTS).from_bytes(framed(body))


def test_hostile_array_count_fails_fast() -> None:
    s = RowDataSerializer("ROW<a ARRAY<BIGINT>>")
    body = bytearray(s.to_binary_row(([1, 2],)))
    struct.pack_into("<i", body, 16, 0x7FFFFFFF)
    with pytest.raises(MalformedDataError, match="a: array declares 2147483647 elements"):
        s.from_bytes(framed(body))
    struct.pack_into("<i", body, 16, -5)
    with pytest.raises(MalformedDataError, match="negative array element count"):
        s.from_bytes(framed(body))


def test_bad_map_sizes() -> None:
    s = RowDataSerializer("ROW<m MAP<INT, INT>>")
    body = bytearray(s.to_binary_row(({1: 2},)))
    struct.pack_into("<i", body, 16, 1 << 20)
    with pytest.raises(MalformedDataError, match="m: map key array size"):
        s.from_bytes(framed(body))
    body = bytearray(s.to_binary_row(({1: 2},)))
    struct.pack_into("<i", body, 16 + 4 + 16, 0)  # value array says 0 elements
    with pytest.raises(MalformedDataError, match="m: map has 1 keys but 0 values"):
        s.from_bytes(framed(body))


def test_bad_decimal_and_timestamp_slots() -> None:
    s = RowDataSerializer("ROW<d DECIMAL(20, 2), t TIMESTAMP(6)>")
    from decimal import Decimal

    from statemorph.types import Timestamp

    good = bytearray(s.to_binary_row((Decimal("1.00"), Timestamp(1, 2))))
    body = bytearray(good)
    struct.pack_into("<I", body, 8, 17)
    with pytest.raises(MalformedDataError, match=r"d: DECIMAL\(20, 2\) byte length 17"):
        s.from_bytes(framed(body))
    body = bytearray(good)
    struct.pack_into("<I", body, 16, 1_000_000)
    with pytest.raises(MalformedDataError, match="t: TIMESTAMP nano-of-millisecond 1000000"):
        s.from_bytes(framed(body))


def test_out_of_range_date_and_time() -> None:
    s = RowDataSerializer("ROW<d DATE, t TIME>")
    body = bytearray(s.to_binary_row((None, None)))
    body[1] = 0
    struct.pack_into("<i", body, 8, 2**31 - 1)
    with pytest.raises(MalformedDataError, match="d: DATE"):
        s.from_bytes(framed(body))
    struct.pack_into("<i", body, 8, 0)
    struct.pack_into("<i", body, 16, -1)
    with pytest.raises(MalformedDataError, match="t: TIME value -1"):
        s.from_bytes(framed(body))


def test_migration_validates_before_remapping() -> None:
    snap = RowDataSerializer(EVENTS).snapshot_configuration()
    body = events_body()
    struct.pack_into("<Q", body, 24 + 8 + 16, (1000 << 32) | 18)
    with pytest.raises(MalformedDataError, match="metadata.deviceType"):
        migrate_bytes(snap, RowDataSerializer(NEW_EVENTS), framed(body))
    with pytest.raises(MalformedDataError, match="trailing"):
        migrate_bytes(snap, RowDataSerializer(NEW_EVENTS), framed(events_body()) + b"\x00")


@settings(max_examples=150)
@given(st.data())
def test_mutated_bytes_give_typed_errors_only(data: st.DataObject) -> None:
    s = RowDataSerializer("ROW<a INT, s STRING, r ROW<x DECIMAL(25, 3), y ARRAY<STRING>>, m MAP<STRING, BIGINT>, "
                          "t TIMESTAMP(9)>")
    from decimal import Decimal

    from statemorph.types import Timestamp

    good = bytearray(s.to_bytes((1, "a long string!!", (Decimal("12.345"), ["x", None, "yyyyyyyyyy"]),
                                 {"k": 1, "long key value": None}, Timestamp(5, 6))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    blob = bytes(good[:cut]) if data.draw(st.booleans()) else bytes(good)
    new = RowDataSerializer("ROW<s STRING, a INT, r ROW<y ARRAY<STRING>, z INT, x DECIMAL(25, 3)>, "
                            "m MAP<STRING, BIGINT>, t TIMESTAMP(9)>")
    for action in (lambda: s.from_bytes(blob), lambda: migrate_bytes(s.snapshot_configuration(), new, blob)):
        try:
            action()
        except StateFormatError:
            pass


def _snapshot_bytes(n: int, fields: list[tuple[str, str]]) -> bytes:
    out = DataOutputSerializer()
    out.write_utf(RowDataSerializerSnapshot.IDENTIFIER)
    out.write_int(1)
    out.write_int(n)
    for name, text in fields:
        out.write_long_utf(name)
        out.write_long_utf(text)
        out.write_boolean(False)
    return out.get_copy_of_buffer()


def test_hostile_snapshots() -> None:
    with pytest.raises(TruncatedDataError, match="RowData snapshot fields"):
        read_versioned_snapshot(_snapshot_bytes(0x7FFFFFFF, []))
    with pytest.raises(SnapshotError, match=r"field #0 \('a'\) .*unreadable type"):
        read_versioned_snapshot(_snapshot_bytes(1, [("a", "ROW<b FOO>")]))
    with pytest.raises(SnapshotError, match="duplicate field name 'a'"):
        read_versioned_snapshot(_snapshot_bytes(2, [("a", "INT"), ("a", "INT")]))
    with pytest.raises(SnapshotError, match="empty field name"):
        read_versioned_snapshot(_snapshot_bytes(1, [("", "INT")]))
    good = write_versioned_snapshot(RowDataSerializer(EVENTS).snapshot_configuration())
    for cut in range(len(good)):
        with pytest.raises(StateFormatError):
            read_versioned_snapshot(good[:cut])


def test_overlapping_references_cannot_blow_up_decoding() -> None:
    # ARRAY<ARRAY<ARRAY<INT>>> where every element points at the same inner array: without a work
    # budget this decodes to n^3 items from a few hundred bytes
    n = 30
    inner = bytearray(struct.pack("<i", n) + bytes(4) + bytes(4 * n))
    inner += bytes((-len(inner)) % 8)

    def shared(child: bytes) -> bytearray:
        header = 4 + ((n + 31) // 32) * 4
        fixed = (header + 8 * n + 7) & ~7
        buf = bytearray(fixed)
        struct.pack_into("<i", buf, 0, n)
        for i in range(n):
            struct.pack_into("<Q", buf, header + 8 * i, (fixed << 32) | len(child))
        return buf + child

    outer = shared(bytes(shared(bytes(inner))))
    body = bytearray(16) + outer
    struct.pack_into("<Q", body, 8, (16 << 32) | len(outer))
    s = RowDataSerializer("ROW<a ARRAY<ARRAY<ARRAY<INT>>>>")
    with pytest.raises(MalformedDataError, match="references overlap"):
        s.from_bytes(framed(body))
