"""Hostile bytes against the byte views: typed errors naming the offset, no big allocations."""

import pytest

from statemorph.errors import MalformedDataError, StateFormatError, TruncatedDataError
from statemorph.io import DataInputDeserializer, decode_modified_utf8


def test_huge_declared_length_fails_before_allocating():
    src = DataInputDeserializer(b"\x7f\xff\xff\xff" + b"\x00" * 6)
    n = src.read_int()
    with pytest.raises(TruncatedDataError, match="offset 4"):
        src.check_length(n, "list elements")


def test_negative_length_is_malformed():
    src = DataInputDeserializer(b"\xff\xff\xff\xfe")
    with pytest.raises(MalformedDataError, match="negative length -2"):
        src.check_length(src.read_int(), "array")


def test_read_utf_with_length_beyond_buffer():
    with pytest.raises(TruncatedDataError, match="offset 2"):
        DataInputDeserializer(b"\xff\xff" + b"ab").read_utf()


@pytest.mark.parametrize(
    "body,offset",
    [
        (b"\xc3", 0),  # partial 2-byte character
        (b"a\xc3\x41", 2),  # bad continuation byte
        (b"\xe2\x82", 0),  # partial 3-byte character
        (b"\xf0\x9f\x98\x80", 0),  # 4-byte UTF-8 is not modified UTF-8
        (b"ab\x80", 2),  # stray continuation byte
    ],
)
def test_invalid_modified_utf8(body, offset):
    with pytest.raises(MalformedDataError, match=f"offset {offset}"):
        decode_modified_utf8(body)


def test_every_truncation_of_a_record_is_a_typed_error():
    record = b"\x00\x05hello" + b"\x00\x00\x00\x07" + b"\x00" * 8
    for cut in range(len(record)):
        src = DataInputDeserializer(record[:cut])
        with pytest.raises(StateFormatError):
            src.read_utf()
            src.read_int()
            src.read_long()
