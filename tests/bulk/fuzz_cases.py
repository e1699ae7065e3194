"""The bulk fuzz cases and the rules that judge them, shared by ``bulk/test_fuzz_arrow.py`` and the
long-running fuzzer (``fuzz/families.py``): the serializers with valid values, the RowData
migrations, the per-value migrations, and the differences between the bulk and the per-value
paths that are allowed (values Arrow cannot hold, DATE / TIME values Python cannot)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import re
from typing import Any

from statemorph import serializers as S
from statemorph.errors import SerializationError
from statemorph.types import Timestamp

COMPACT = ("ROW<a INT NOT NULL, b STRING, c ROW<x BIGINT, y DOUBLE>, d DECIMAL(10, 2), e TIMESTAMP(3), "
           "f DATE, g BYTES, h BOOLEAN, i TINYINT, j SMALLINT, k FLOAT, l TIME>")
COMPACT_ADDED = ("ROW<a INT NOT NULL, b STRING, c ROW<x BIGINT, y DOUBLE, z STRING>, d DECIMAL(10, 2), "
                 "e TIMESTAMP(3), f DATE, g BYTES, h BOOLEAN, i TINYINT, j SMALLINT, k FLOAT, l TIME, m INT>")
COMPACT_REORDERED = ("ROW<b STRING, a INT NOT NULL, c ROW<x BIGINT, y DOUBLE>, d DECIMAL(10, 2), e TIMESTAMP(3), "
                     "f DATE, g BYTES, h BOOLEAN, i TINYINT, j SMALLINT, k FLOAT, l TIME>")
NESTED = "ROW<a INT, b ARRAY<STRING>, c MAP<STRING, ROW<p BIGINT>>, d DECIMAL(30, 4), e TIMESTAMP(9)>"
NESTED_ADDED = "ROW<a INT, b ARRAY<STRING>, c MAP<STRING, ROW<p BIGINT, q INT>>, d DECIMAL(30, 4), e TIMESTAMP(9)>"
MAPS = ("ROW<a INT, m MAP<STRING, ARRAY<INT>>, xs ARRAY<ARRAY<STRING>>, ms MULTISET<BIGINT>, "
        "dm ARRAY<MAP<INT, DECIMAL(10, 2)>>>")


def compact_rows() -> list[Any]:
    base = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)
    return [
        (i, f"s{i}é" * (i % 3), (i * 1000, i / 3) if i % 4 else None, decimal.Decimal(f"{i}.25"),
         base + datetime.timedelta(days=i), datetime.date(2020, 1, 1 + i), bytes([i]) * i, i % 2 == 0, i - 3,
         i * 100, float(i) / 2, datetime.time(i % 24, 1, 2))
        for i in range(6)
    ]


def nested_rows() -> list[Any]:
    return [
        (i, ["x" * i, None], {"k": (i,), "n": None}, decimal.Decimal("12345678901234567890.1234") + i,
         datetime.datetime(2021, 1, 1, 0, 0, i, 123456))
        for i in range(5)
    ]


def map_rows() -> list[Any]:
    return [
        (i, {"k" * (i + 1): [i, None], "other-long-key": []}, [["x" * i, None], [], None], {i: 2, -i - 1: 1},
         [{i: decimal.Decimal(f"{i}.50"), 7: None}, {}, None])
        for i in range(5)
    ]


CASES: dict[str, tuple[Any, list[Any]]] = {
    "RowDataCompact": (S.RowDataSerializer(COMPACT), compact_rows()),
    "RowDataNested": (S.RowDataSerializer(NESTED), nested_rows()),
    "RowDataMaps": (S.RowDataSerializer(MAPS), map_rows()),
    "Int": (S.IntSerializer(), [1, -2, 3, 1 << 30]),
    "Long": (S.LongSerializer(), [1, -2, 1 << 40]),
    "Double": (S.DoubleSerializer(), [1.5, -0.0, 3.25]),
    "String": (S.StringSerializer(), ["a", "héllo😀", "", "x" * 200]),
    "Bytes": (S.BytePrimitiveArraySerializer(), [b"", b"abc", bytes(range(200))]),
    # Tuple / POJO: arrow.decode cannot build an Arrow array of them yet
    "ListString": (S.ListSerializer(S.StringSerializer()), [["a"], [], ["b", "c"]]),
}
MIGRATIONS: dict[str, tuple[str, str]] = {
    "compact-add": (COMPACT, COMPACT_ADDED),
    "compact-reorder": (COMPACT, COMPACT_REORDERED),
    "compact-as-is": (COMPACT, COMPACT),
    "nested-add": (NESTED, NESTED_ADDED),
}


# The reference tier refuses DATE values outside years 1..9999 (Python's datetime range) and TIME
# values outside one day; the bulk tier keeps them (Arrow date32 / time32 hold them, Flink does
# not check either). Such rows may go either way; every other verdict must match exactly.
RANGE_ONLY = re.compile(r"DATE -?\d+ days since epoch is outside years|TIME value -?\d+ ms is outside")


def has_lone_surrogate(value: Any) -> bool:
    """A str with a lone UTF-16 surrogate (legal in Java and Python, not in an Arrow string)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, (list, tuple)):
        return any(has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    return False


def beyond_arrow_nanos(value: Any) -> bool:
    """A nanosecond timestamp whose millis overflow int64 nanoseconds: a legal Flink value that no
    Arrow timestamp('ns') holds, so the bulk API may reject its row."""
    if isinstance(value, Timestamp):
        return not -(2**63) <= value.millis * 1_000_000 + value.nano_of_millisecond < 2**63
    if isinstance(value, (list, tuple)):
        return any(beyond_arrow_nanos(v) for v in value)
    if isinstance(value, dict):
        return any(beyond_arrow_nanos(k) or beyond_arrow_nanos(v) for k, v in value.items())
    return False


def reencoded(ser: Any, value: Any) -> bytes | None:
    """The reference's bytes for a decoded value; None where the value cannot be written back
    (a corrupt compact DECIMAL decodes to more digits than its precision, as in Flink, and
    encode refuses it; the bulk encoder with on_error="null" nulls it too)."""
    return reencoded_with(ser.to_bytes, value)


def reencoded_with(write: Any, value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return write(value)  # type: ignore[no-any-return]
    except SerializationError:
        return None


def without_row_kind(ser: Any, column: list[bytes | None]) -> list[bytes | None]:
    """An Arrow struct has no RowKind (decode keeps the fields only), so the kind byte of a
    BinaryRowData (after the i32 length) is left out of the comparison."""
    if not isinstance(ser, S.RowDataSerializer):
        return column
    return [None if b is None else b[:4] + b"\x00" + b[5:] for b in column]


@dataclasses.dataclass
class Person:
    name: str | None = None
    age: int | None = None


@dataclasses.dataclass
class PersonV2:
    name: str | None = None
    age: int | None = None
    email: str | None = None


AVRO_V1 = {"type": "record", "name": "User", "namespace": "fuzz", "fields": [
    {"name": "id", "type": "long"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "nick", "type": ["null", "string"], "default": None}]}
AVRO_V2 = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "score", "type": "int", "default": 7}]}
ROW_FIELDS = [S.IntSerializer(), S.StringSerializer(), S.DoubleSerializer()]

# (old serializer, new serializer, valid old values): migrations that run per value or through
# the flink-core Row remap, POJO or Avro kernels
PER_VALUE_MIGRATIONS: dict[str, tuple[Any, Any, list[Any]]] = {
    "pojo-add-field": (
        S.PojoSerializer(Person, {"name": S.StringSerializer(), "age": S.IntSerializer()}, "fuzz.Person"),
        S.PojoSerializer(PersonV2, {"name": S.StringSerializer(), "age": S.IntSerializer(),
                                    "email": S.StringSerializer()}, "fuzz.Person"),
        [Person("a", 1), Person(None, 2), Person("héllo", None)]),
    "avro-add-field": (S.AvroSerializer(AVRO_V1), S.AvroSerializer(AVRO_V2),
                       [{"id": 1, "tags": ["x"], "nick": None}, {"id": -5, "tags": [], "nick": "n"}]),
    "row-drop-kind": (S.RowSerializer(ROW_FIELDS), S.RowSerializer(ROW_FIELDS, supports_row_kind=False),
                      [(1, "a", 2.0), (None, None, -1.5), (3, "é" * 5, None)]),
    "enum-append": (S.EnumSerializer(["A", "B"], "p.E"), S.EnumSerializer(["A", "B", "C"], "p.E"), ["A", "B"]),
}
