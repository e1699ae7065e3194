"""RowDataSerializer bytes against the real Flink 2.3 output quoted in docs/formats.md §7."""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal

import pytest

from statemorph.errors import SerializationError
from statemorph.row import Row, RowKind
from statemorph.serializers import RowDataSerializer
from statemorph.types import Timestamp, parse_type


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


def test_bigint_and_inline_string() -> None:
    s = RowDataSerializer("ROW<a BIGINT, b STRING>")
    b = s.to_bytes((7, "abc"))
    assert b == hx("00000018 0000000000000000 0700000000000000 6162630000000083")
    assert s.from_bytes(b) == (7, "abc")
    assert s.from_bytes(b).kind is RowKind.INSERT


def test_long_string_goes_to_var_part() -> None:
    s = RowDataSerializer("ROW<a BIGINT, b STRING>")
    b = s.to_bytes((7, "hello world!"))
    assert b == hx("00000028 0000000000000000 0700000000000000 0C00000018000000 68656C6C6F20776F726C642100000000")
    assert s.from_bytes(b) == (7, "hello world!")


def test_row_kind_and_nulls() -> None:
    s = RowDataSerializer("ROW<a BIGINT, b STRING>")
    b = s.to_bytes(Row((None, None), RowKind.UPDATE_BEFORE))
    assert b == hx("00000018 0103000000000000" + "00" * 16)
    back = s.from_bytes(b)
    assert back == (None, None) and back.kind is RowKind.UPDATE_BEFORE


NESTED = ("ROW<i INT, r ROW<x INT>, arr ARRAY<INT>, m MAP<VARCHAR(10),INT>, d20 DECIMAL(20,2), d10 DECIMAL(10,2), "
          "ts6 TIMESTAMP(6), ts3 TIMESTAMP(3), bo BOOLEAN, db DOUBLE, vb VARBINARY>")
NESTED_HEX = (
    "000000D8"
    "0000000000000000"
    "0500000000000000" "1000000060000000" "1800000070000000" "2400000088000000" "02000000B0000000"
    "3930000000000000" "40E20100C0000000" "E803000000000000" "0100000000000000" "000000000000F83F"
    "09000000C8000000"
    "0000000000000000 0600000000000000"
    "03000000 02000000 01000000 00000000 03000000 00000000"
    "10000000 01000000 00000000 6B00000000000081 01000000 00000000 01000000 00000000 00000000"
    "3039" + "00" * 14 +
    "E803000000000000"
    "010203040506070809 00000000000000"
)


def test_nested_row_of_every_kind_matches_flink() -> None:
    s = RowDataSerializer(NESTED)
    value = (5, (6,), [1, None, 3], {"k": 1}, Decimal("123.45"), Decimal("123.45"),
             Timestamp(1000, 123456), dt.datetime(1970, 1, 1, 0, 0, 1), True, 1.5, bytes(range(1, 10)))
    b = s.to_bytes(value)
    assert b == hx(NESTED_HEX)
    back = s.from_bytes(b)
    assert back == value
    assert back[4].as_tuple().exponent == -2
    # a datetime with the same instant writes the same bytes as the Timestamp
    assert s.to_bytes(value[:6] + (dt.datetime(1970, 1, 1, 0, 0, 1, 123456),) + value[7:]) != b  # 123456 µs
    same = value[:6] + (Timestamp(1000, 123456),) + value[7:]
    assert s.to_bytes(same) == b


def test_array_of_strings_matches_flink_array_bytes() -> None:
    s = RowDataSerializer("ROW<a ARRAY<STRING>>")
    b = s.to_bytes((["a", None, "abcdefghij"],))
    array = hx("03000000 02000000 6100000000000081 0000000000000000 0A00000020000000 6162636465666768696A000000000000")
    assert b == hx("00000040 0000000000000000 3000000010000000") + array
    assert s.from_bytes(b) == (["a", None, "abcdefghij"],)


def test_null_noncompact_decimal_and_timestamp_reserve_nothing() -> None:
    s = RowDataSerializer("ROW<d DECIMAL(20,2), t TIMESTAMP(6)>")
    assert s.to_bytes((None, None)) == hx("00000018 0003000000000000" + "00" * 16)


def test_float_nan_payload_kept_in_rows_canonical_in_arrays() -> None:
    payload = struct.unpack(">f", bytes.fromhex("7FC00001"))[0]
    row = RowDataSerializer("ROW<f FLOAT>").to_bytes((payload,))
    assert row[12:20] == hx("0100C07F00000000")
    arr = RowDataSerializer("ROW<a ARRAY<FLOAT>>").to_bytes(([payload],))
    assert arr[-8:-4] == hx("0000C07F")
    assert math.isnan(RowDataSerializer("ROW<a ARRAY<DOUBLE>>").from_bytes(
        RowDataSerializer("ROW<a ARRAY<DOUBLE>>").to_bytes(([float("nan")],)))[0][0])


def test_events_example() -> None:
    t = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
    s = RowDataSerializer(t)
    b = s.to_bytes((7, (3, 1700000000000, "phone")))
    nested = hx("0000000000000000 0300000000000000 0068E5CF8B010000 70686F6E65000085")
    assert b == hx("00000038 0000000000000000 0700000000000000 2000000018000000") + nested
    assert s.from_bytes(b) == (7, (3, 1700000000000, "phone"))


@pytest.mark.parametrize(
    "type_text, value",
    [
        ("BOOLEAN", False),
        ("TINYINT", -128),
        ("SMALLINT", 32767),
        ("INT", -(2**31)),
        ("BIGINT", 2**63 - 1),
        ("FLOAT", 1.5),
        ("DOUBLE", -0.0),
        ("DECIMAL(38, 10)", Decimal("-1234567890123456789012345678.0123456789")),
        ("DECIMAL(19, 0)", Decimal("-1")),
        ("DECIMAL(18, 18)", Decimal("0.999999999999999999")),
        ("CHAR(3)", "xyz"),
        ("VARCHAR(10)", "héllo wörld"),
        ("STRING", ""),
        ("STRING", "😀😀"),
        ("BINARY(2)", b"\x00\x01"),
        ("BYTES", b"12345678"),
        ("DATE", dt.date(1, 1, 1)),
        ("DATE", dt.date(9999, 12, 31)),
        ("TIME(3)", dt.time(23, 59, 59, 999000)),
        ("TIMESTAMP(3)", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
        ("TIMESTAMP(6)", dt.datetime(2024, 2, 29, 12, 0, 0, 123456)),
        ("TIMESTAMP(9)", Timestamp(-1, 999_999)),
        ("TIMESTAMP_LTZ(3)", dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)),
        ("TIMESTAMP_LTZ(6)", dt.datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=dt.timezone.utc)),
        ("ARRAY<BOOLEAN>", [True, None, False]),
        ("ARRAY<SMALLINT NOT NULL>", [1, 2, 3]),
        ("ARRAY<DECIMAL(20, 1)>", [Decimal("1.5"), None]),
        ("ARRAY<TIMESTAMP(9)>", [Timestamp(5, 7), None]),
        ("ARRAY<ROW<a INT, b STRING>>", [(1, "long string here"), None, (None, None)]),
        ("ARRAY<ARRAY<STRING>>", [["x"], [], None]),
        ("MAP<STRING, BIGINT>", {"a": 1, None: None, "long key value": 3}),
        ("MAP<INT, ROW<x DOUBLE>>", {1: (1.0,), 2: None}),
        ("MAP<ARRAY<INT>, INT>", {(1, 2): 3}),
        ("MULTISET<STRING>", {"a": 2, "bb": 1}),
        ("ROW<>", ()),
    ],
)
def test_round_trip_each_type(type_text: str, value: object) -> None:
    s = RowDataSerializer(f"ROW<f {type_text}, g INT>")
    b = s.to_bytes((value, 42))
    assert len(b) >= 4 and int.from_bytes(b[:4], "big") == len(b) - 4
    assert (len(b) - 4) % 8 == 0 or type_text in ()
    back = s.from_bytes(b)
    assert back == (value, 42)
    assert s.to_bytes(back) == b


def test_decimal_rounding_and_overflow() -> None:
    s = RowDataSerializer("ROW<d DECIMAL(5, 2)>")
    assert s.from_bytes(s.to_bytes((Decimal("1.005"),))) == (Decimal("1.01"),)
    assert str(s.from_bytes(s.to_bytes((7,)))[0]) == "7.00"
    with pytest.raises(SerializationError, match="d: .*more than 5 digits"):
        s.to_bytes((Decimal("1000.00"),))
    with pytest.raises(SerializationError, match="not a finite"):
        s.to_bytes((Decimal("NaN"),))
    with pytest.raises(SerializationError, match="more than 5 digits"):
        s.to_bytes((Decimal("1e1000000"),))
    with pytest.raises(SerializationError, match="expected decimal.Decimal"):
        s.to_bytes((1.5,))


def test_timestamp_value_forms() -> None:
    s = RowDataSerializer("ROW<a TIMESTAMP(6), b TIMESTAMP_LTZ(3), c TIMESTAMP(9)>")
    naive = dt.datetime(2020, 5, 6, 7, 8, 9, 123456)
    aware = dt.datetime(2020, 5, 6, 9, 8, 9, 123000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    back = s.from_bytes(s.to_bytes((naive, aware, naive)))
    assert back[0] == naive and back[0].tzinfo is None
    assert back[1] == aware and back[1].tzinfo == dt.timezone.utc
    assert back[2] == Timestamp.from_datetime(naive)
    with pytest.raises(SerializationError, match="a: .*naive"):
        s.to_bytes((aware, None, None))
    with pytest.raises(SerializationError, match="b: .*aware"):
        s.to_bytes((None, naive, None))
    # stored nanoseconds that are not whole microseconds come back as a Timestamp (lossless)
    odd = s.to_bytes((Timestamp(0, 1), None, None))
    assert s.from_bytes(odd)[0] == Timestamp(0, 1)


@pytest.mark.parametrize(
    "value, fragment",
    [
        ((1,), "has 1 fields"),
        (("x", None), "eventId: cannot write str"),
        ((1, (None, None, 5)), "metadata.deviceType: cannot write int"),
        ((2**63, None), "out of range"),
        ((True, None), "eventId: cannot write bool"),
        ((1, "abc"), "metadata: cannot write str"),
    ],
)
def test_bad_values_name_the_field(value: tuple[object, ...], fragment: str) -> None:
    s = RowDataSerializer("ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>")
    with pytest.raises(SerializationError, match=fragment):
        s.to_bytes(value)


def test_null_in_not_null_field_is_refused() -> None:
    s = RowDataSerializer("ROW<a INT NOT NULL, b ARRAY<INT NOT NULL>>")
    with pytest.raises(SerializationError, match="a: null in a NOT NULL field"):
        s.to_bytes((None, []))
    with pytest.raises(SerializationError, match=r"b\[1\]: null"):
        s.to_bytes((1, [1, None]))


def test_wide_rows_use_more_null_bit_words() -> None:
    fields = ", ".join(f"f{i} INT" for i in range(57))
    s = RowDataSerializer(f"ROW<{fields}>")
    value = tuple(None if i == 56 else i for i in range(57))
    b = s.to_bytes(value)
    assert len(b) == 4 + 16 + 8 * 57
    assert b[4 + 8] == 0x01  # bit 64 = field 56
    assert s.from_bytes(b) == value


def test_serializer_equality_and_type_argument() -> None:
    a = RowDataSerializer("ROW<a INT>")
    assert a == RowDataSerializer(parse_type("row<a int>"))  # type: ignore[arg-type]
    assert a != RowDataSerializer("ROW<a BIGINT>")
    with pytest.raises(TypeError):
        RowDataSerializer("INT")
