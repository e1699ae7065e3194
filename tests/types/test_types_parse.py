"""Parsing and printing Flink SQL type strings."""

from __future__ import annotations

import datetime as dt

import pytest

from statemorph.errors import TypeParseError
from statemorph.types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowField,
    RowType,
    SmallIntType,
    StructuredType,
    Timestamp,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
    parse_row_type,
    parse_type,
)

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("BOOLEAN", BooleanType()),
        ("tinyint", TinyIntType()),
        ("SMALLINT", SmallIntType()),
        ("INT", IntType()),
        ("Integer", IntType()),
        ("BIGINT NOT NULL", BigIntType(nullable=False)),
        ("BIGINT NULL", BigIntType()),
        ("FLOAT", FloatType()),
        ("DOUBLE", DoubleType()),
        ("DOUBLE PRECISION", DoubleType()),
        ("DECIMAL", DecimalType(10, 0)),
        ("DECIMAL(5)", DecimalType(5, 0)),
        ("DECIMAL(20, 2)", DecimalType(20, 2)),
        ("NUMERIC(3,1)", DecimalType(3, 1)),
        ("CHAR", CharType(1)),
        ("CHAR(5)", CharType(5)),
        ("VARCHAR(10)", VarCharType(10)),
        ("STRING", VarCharType(MAX_LENGTH)),
        ("BINARY(3)", BinaryType(3)),
        ("VARBINARY(4)", VarBinaryType(4)),
        ("BYTES", VarBinaryType(MAX_LENGTH)),
        ("DATE", DateType()),
        ("TIME", TimeType(0)),
        ("TIME(3)", TimeType(3)),
        ("TIMESTAMP", TimestampType(6)),
        ("TIMESTAMP(3)", TimestampType(3)),
        ("TIMESTAMP(9) WITHOUT TIME ZONE", TimestampType(9)),
        ("TIMESTAMP_LTZ(3)", LocalZonedTimestampType(3)),
        ("TIMESTAMP WITH LOCAL TIME ZONE", LocalZonedTimestampType(6)),
        ("timestamp(2) with local time zone not null", LocalZonedTimestampType(2, nullable=False)),
        ("ARRAY<INT NOT NULL>", ArrayType(IntType(nullable=False))),
        ("MAP<STRING, ARRAY<INT>>", MapType(VarCharType(MAX_LENGTH), ArrayType(IntType()))),
        ("MULTISET<STRING>", MultisetType(VarCharType(MAX_LENGTH))),
        ("ROW<>", RowType(())),
        ("ROW(a INT, b STRING)", RowType.of(("a", IntType()), ("b", VarCharType(MAX_LENGTH)))),
        ("ROW<`a``b` INT 'it''s'>", RowType((RowField("a`b", IntType(), "it's"),))),
    ],
)
def test_parse(text: str, expected: object) -> None:
    assert parse_type(text) == expected


def test_events_example_round_trips_in_both_forms() -> None:
    t = parse_row_type(EVENTS)
    assert t.field_names == ["eventId", "metadata"]
    meta = t.fields[1].type
    assert isinstance(meta, RowType)
    assert meta.field_names == ["userId", "timestamp", "deviceType"]
    assert meta.field_index("deviceType") == 2
    assert meta.field_index("nope") == -1
    assert str(t) == "ROW<`eventId` BIGINT, `metadata` ROW<`userId` INT, `timestamp` BIGINT, `deviceType` STRING>>"
    assert t.as_serializable_string() == (
        "ROW<`eventId` BIGINT, `metadata` ROW<`userId` INT, `timestamp` BIGINT, "
        "`deviceType` VARCHAR(2147483647)>>"
    )
    assert parse_type(str(t)) == t
    assert parse_type(t.as_serializable_string()) == t


@pytest.mark.parametrize(
    "t, summary, serializable",
    [
        (VarCharType(MAX_LENGTH, nullable=False), "STRING NOT NULL", "VARCHAR(2147483647) NOT NULL"),
        (VarBinaryType(MAX_LENGTH), "BYTES", "VARBINARY(2147483647)"),
        (LocalZonedTimestampType(3), "TIMESTAMP_LTZ(3)", "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
        (LocalZonedTimestampType(3, nullable=False, kind="PROCTIME"), "TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*",
         "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"),
        (TimestampType(3, kind="ROWTIME"), "TIMESTAMP(3) *ROWTIME*", "TIMESTAMP(3)"),
        (DecimalType(20, 2), "DECIMAL(20, 2)", "DECIMAL(20, 2)"),
        (MapType(IntType(nullable=False), DoubleType()), "MAP<INT NOT NULL, DOUBLE>", "MAP<INT NOT NULL, DOUBLE>"),
        (RowType((RowField("x", IntType(), "a 'c'"),), nullable=False),
         "ROW<`x` INT 'a ''c'''> NOT NULL", "ROW<`x` INT 'a ''c'''> NOT NULL"),
    ],
)
def test_print(t: object, summary: str, serializable: str) -> None:
    assert str(t) == summary
    assert t.as_serializable_string() == serializable  # type: ignore[attr-defined]


def test_types_are_immutable_hashable_and_copyable() -> None:
    t = parse_type("ROW<a INT>")
    assert hash(t) == hash(parse_type("row<a int>"))
    assert {t: 1}[parse_type("ROW<a INT>")] == 1
    nn = t.copy(nullable=False)
    assert not nn.nullable and t.nullable and nn != t
    assert t.copy() is t
    with pytest.raises(AttributeError):
        t.nullable = False  # type: ignore[misc]
    # descriptions are part of equality, as in Flink
    assert parse_type("ROW<a INT 'x'>") != parse_type("ROW<a INT>")


@pytest.mark.parametrize(
    "text, position, fragment",
    [
        ("ROW<a INT, a BIGINT>", 11, "duplicate row field name 'a'"),
        ("DECIMAL(39, 0)", 8, "precision"),
        ("DECIMAL(5, 6)", 11, "scale"),
        ("VARCHAR(0)", 8, "length"),
        ("TIMESTAMP(10)", 10, "precision"),
        ("INT NOT", 7, "expected NULL"),
        ("FOO", 0, "unknown type 'FOO'"),
        ("ROW<a INT", 9, "expected ','"),
        ("MAP<INT>", 7, "expected ','"),
        ("ARRAY<INT> x", 11, "unexpected 'x'"),
        ("ROW<`a INT>", 4, "unterminated"),
        ("ROW<a INT 'x>", 10, "unterminated"),
        ("TIMESTAMP WITH TIME ZONE", 10, "not supported"),
        ("", 0, "expected a type"),
        ("ROW<1a INT>", 4, "expected a field name"),
        ("VARCHAR(99999999999)", 8, "too large"),
        ("INT *PROCTIME*", 4, "only a TIMESTAMP or TIMESTAMP_LTZ"),
        ("TIMESTAMP(3) *EVENTTIME*", 13, "unknown time attribute *EVENTTIME*"),
        ("TIMESTAMP(3) *PROCTIME", 22, "expected '*'"),
    ],
)
def test_parse_errors_point_at_the_position(text: str, position: int, fragment: str) -> None:
    with pytest.raises(TypeParseError) as err:
        parse_type(text)
    assert err.value.position == position
    assert fragment in str(err.value)


def test_deep_nesting_is_an_error_not_a_recursion_crash() -> None:
    text = "ARRAY<" * 5000 + "INT" + ">" * 5000
    with pytest.raises(TypeParseError, match="nested deeper"):
        parse_type(text)


def test_time_attributes_parse_back_and_do_not_take_part_in_equality() -> None:
    """Flink SQL state rows hold ``*PROCTIME*`` / ``*ROWTIME*`` columns; the kind is metadata in
    Flink (``LogicalType.equals`` ignores it) but part of the serialized type, so it round-trips."""
    t = parse_row_type("ROW<pt TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*, rt TIMESTAMP(3) *ROWTIME*, ts TIMESTAMP(3)>")
    assert [f.type.kind for f in t.fields] == ["PROCTIME", "ROWTIME", "REGULAR"]  # type: ignore[attr-defined]
    assert parse_type(str(t)) == t
    assert [f.type.kind for f in parse_row_type(str(t)).fields] == ["PROCTIME", "ROWTIME", "REGULAR"]  # type: ignore[attr-defined]
    assert t.fields[0].type == LocalZonedTimestampType(3, nullable=False)
    assert hash(t.fields[1].type) == hash(TimestampType(3))
    assert t.fields[0].type.copy(nullable=True).kind == "PROCTIME"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="timestamp kind"):
        TimestampType(3, kind="EVENTTIME")


def test_structured_types_print_as_flink_and_parse_back() -> None:
    """Flink's inline STRUCTURED format (``STRUCTURED<'class', attributes>``); a ROW of the same
    attributes is another type, and a STRUCTURED type needs its class name."""
    t = StructuredType((RowField("v", VarCharType(MAX_LENGTH)), RowField("o", BigIntType(), "it's")),
                       class_name="a.Acc", nullable=False)
    assert str(t) == "STRUCTURED<'a.Acc', `v` STRING, `o` BIGINT 'it''s'> NOT NULL"
    assert parse_type(str(t)) == t == parse_type(t.as_serializable_string())
    assert t != RowType(t.fields, nullable=False) and parse_type("ROW<>") == RowType()
    with pytest.raises(TypeParseError, match="class name"):
        parse_type("STRUCTURED<'', a INT>")
    with pytest.raises(TypeParseError, match="'string'"):
        parse_type("STRUCTURED<a INT>")


def test_parse_row_type_requires_a_row() -> None:
    with pytest.raises(TypeParseError, match="expected a ROW"):
        parse_row_type("INT")


def test_timestamp_value() -> None:
    ts = Timestamp.from_datetime(dt.datetime(1970, 1, 1, 0, 0, 1, 123456))
    assert ts == Timestamp(1123, 456000)
    assert ts.to_datetime() == dt.datetime(1970, 1, 1, 0, 0, 1, 123456)
    before = Timestamp.from_datetime(dt.datetime(1969, 12, 31, 23, 59, 59, 999999))
    assert before == Timestamp(-1, 999000)
    assert Timestamp.from_epoch_nanos(-1) == Timestamp(-1, 999999)
    aware = dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert Timestamp.from_datetime(aware) == Timestamp(0, 0)
    assert Timestamp(0).to_datetime(dt.timezone.utc) == dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(ValueError):
        Timestamp(0, 1_000_000)
