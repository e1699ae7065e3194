"""Java DataOutput semantics of the byte views, checked against bytes Flink 2.3 wrote."""

import math

import pytest

from statemorph.errors import MalformedDataError, SerializationError, TruncatedDataError
from statemorph.io import (
    DataInputDeserializer,
    DataOutputSerializer,
    decode_modified_utf8,
    encode_modified_utf8,
)


def written(fn, *args) -> bytes:
    out = DataOutputSerializer()
    getattr(out, fn)(*args)
    return out.get_copy_of_buffer()


@pytest.mark.parametrize(
    "fn,value,hex_",
    [
        ("write_boolean", True, "01"),
        ("write_boolean", False, "00"),
        ("write_byte", -1, "ff"),
        ("write_short", -2, "fffe"),
        ("write_char", "é", "00e9"),
        ("write_int", 42, "0000002a"),
        ("write_int", -(2**31), "80000000"),
        ("write_long", -1, "ffffffffffffffff"),
        ("write_long", 2**63 - 1, "7fffffffffffffff"),
        ("write_float", 1.5, "3fc00000"),
        ("write_double", 1.5, "3ff8000000000000"),
        ("write_float", float("nan"), "7fc00000"),
        ("write_double", float("nan"), "7ff8000000000000"),
        ("write_double", -0.0, "8000000000000000"),
        ("write_utf", "a\x00é😀", "000b61c080c3a9eda0bdedb880"),
    ],
)
def test_writes_match_java(fn, value, hex_):
    assert written(fn, value).hex() == hex_


def test_reads_invert_writes():
    out = DataOutputSerializer()
    out.write_boolean(True)
    out.write_byte(-5)
    out.write_short(-300)
    out.write_char(0xD83D)
    out.write_int(-(2**31))
    out.write_long(-(2**63))
    out.write_float(-0.0)
    out.write_double(math.inf)
    out.write_utf("héllo \x00 😀")
    src = DataInputDeserializer(out.get_copy_of_buffer())
    assert src.read_boolean() is True
    assert src.read_byte() == -5
    assert src.read_short() == -300
    assert src.read_char() == 0xD83D
    assert src.read_int() == -(2**31)
    assert src.read_long() == -(2**63)
    assert math.copysign(1.0, src.read_float()) == -1.0
    assert src.read_double() == math.inf
    assert src.read_utf() == "héllo \x00 😀"
    assert src.available() == 0
    src.expect_end("test")


def test_any_nonzero_byte_reads_as_true():
    assert DataInputDeserializer(b"\x7f").read_boolean() is True


def test_lone_surrogates_survive_modified_utf8():
    text = "a\ud800b\udfff"
    assert decode_modified_utf8(encode_modified_utf8(text)) == text


def test_write_utf_rejects_too_long_strings():
    with pytest.raises(SerializationError, match="65535"):
        DataOutputSerializer().write_utf("é" * 40000)


def test_truncation_names_offset():
    src = DataInputDeserializer(b"\x00\x00\x00\x01\x00\x00")
    src.read_int()
    with pytest.raises(TruncatedDataError, match="offset 4") as info:
        src.read_int()
    assert info.value.offset == 4 and info.value.needed == 4 and info.value.available == 2


def test_windowed_reads_stop_at_window_end():
    src = DataInputDeserializer(b"\x01\x02\x03\x04\x05", offset=1, length=2)
    assert src.read_fully(2) == b"\x02\x03"
    with pytest.raises(TruncatedDataError):
        src.read_byte()


def test_trailing_bytes_are_reported():
    src = DataInputDeserializer(b"\x00\x01")
    src.read_byte()
    with pytest.raises(MalformedDataError, match="1 trailing bytes"):
        src.expect_end("a value")
