"""Edge-case vectors of the real Flink 2.3.0 serializers: ``serialize`` output and
``writeVersionedSnapshot`` bytes, the ``edge`` group of the golden generator (``ci/golden/cases.py``,
run by ``ci/golden/generate.sh`` against flink-dist-2.3.0.jar) in tests/data/golden/edge.jsonl.
They cover what the spec examples do not: lone surrogates, varint boundaries, NaN payloads in
arrays, padded Nullable around a variable-length type, null map values, nested snapshots. The
enum class is ``Gen$Color`` (the binary name of the nested enum of the harness that first wrote
these vectors; the generator reproduces every one of them byte for byte)."""

from __future__ import annotations

import struct

import pytest
from snapshots.specs import golden_lines

from statemorph.serializers import (
    BooleanPrimitiveArraySerializer,
    BytesSerializer,
    CharPrimitiveArraySerializer,
    CharSerializer,
    DoublePrimitiveArraySerializer,
    EnumSerializer,
    FloatPrimitiveArraySerializer,
    IntSerializer,
    ListSerializer,
    LongArraySerializer,
    LongSerializer,
    MapSerializer,
    NullableSerializer,
    ShortPrimitiveArraySerializer,
    StringArraySerializer,
    StringSerializer,
)
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

NAN32 = struct.unpack(">f", bytes.fromhex("7FC00001"))[0]  # payload NaN: Flink writes it canonical
NAN64 = struct.unpack(">d", bytes.fromhex("7FF8000000000001"))[0]
MIN_SUBNORMAL32 = struct.unpack(">f", bytes.fromhex("00000001"))[0]
COLOR = EnumSerializer(["RED", "GREEN", "BLUE"], "Gen$Color")

EDGE = golden_lines("edge")

CASES = {
    "str_nul": (StringSerializer(), "a\x00b"),
    "str_lone_high": (StringSerializer(), "x\ud800y"),
    "str_lone_low_end": (StringSerializer(), "\udc00"),
    "str_boundaries": (StringSerializer(), "\u007f\u0080\u07ff\u0800\u3fff\u4000\uffff"),
    "str_emoji": (StringSerializer(), "\U0001F600z"),
    "chars": (CharPrimitiveArraySerializer(), ["a", "\ud83d", "\uffff"]),
    "bools": (BooleanPrimitiveArraySerializer(), [True, False, True]),
    "floats_nan": (FloatPrimitiveArraySerializer(), [NAN32, -0.0, MIN_SUBNORMAL32]),
    "doubles_nan": (DoublePrimitiveArraySerializer(), [NAN64, float("-inf")]),
    "shorts": (ShortPrimitiveArraySerializer(), [-32768, 1]),
    "longs": (LongArraySerializer(), [-(2**63), 2**63 - 1]),
    "strarr": (StringArraySerializer(), ["a", None, "é"]),
    "nullable_long_pad_null": (NullableSerializer(LongSerializer(), True), None),
    "nullable_long_pad_5": (NullableSerializer(LongSerializer(), True), 5),
    "nullable_str_pad_null": (NullableSerializer(StringSerializer(), True), None),
    "nullable_str_pad_x": (NullableSerializer(StringSerializer(), True), "x"),
    "map_int_str": (MapSerializer(IntSerializer(), StringSerializer()), {1: None, 2: "b", 3: None}),
    "list_str": (ListSerializer(StringSerializer()), ["a", None, ""]),
    "enum_blue": (COLOR, "BLUE"),
}


def same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_bytes_equal_flink(name):
    serializer, value = CASES[name]
    expected = bytes.fromhex(EDGE[f"edge/{name}"]["hex"])
    assert serializer.to_bytes(value) == expected
    assert same(serializer.from_bytes(expected), value)


def test_long_string_three_byte_length():
    expected = bytes.fromhex("818001") + b"q" * 16384  # 16385 = 0x4001 as a 3-byte varint
    assert expected == bytes.fromhex(EDGE["edge/str_long"]["hex"])
    assert StringSerializer().to_bytes("q" * 16384) == expected
    assert StringSerializer().from_bytes(expected) == "q" * 16384


SNAPSHOT_CASES = {
    "strarr": StringArraySerializer(),
    "bytes": BytesSerializer(),
    "char": CharSerializer(),
    "nullable_str_pad": NullableSerializer(StringSerializer(), True),
    "nullable_long_nopad": NullableSerializer(LongSerializer(), False),
    "map_str_list_long": MapSerializer(StringSerializer(), ListSerializer(LongSerializer())),
    "list_enum": ListSerializer(COLOR),
}


def test_every_case_has_its_flink_vector():
    assert {f"edge/{n}" for n in CASES} | {f"edge/snapshot/{n}" for n in SNAPSHOT_CASES} <= set(EDGE)


@pytest.mark.parametrize("name", sorted(SNAPSHOT_CASES))
def test_snapshot_bytes_equal_flink(name):
    serializer = SNAPSHOT_CASES[name]
    expected = bytes.fromhex(EDGE[f"edge/snapshot/{name}"]["snapshot_hex"])
    assert write_versioned_snapshot(serializer.snapshot_configuration()) == expected
    assert read_versioned_snapshot(expected).restore_serializer() == serializer
