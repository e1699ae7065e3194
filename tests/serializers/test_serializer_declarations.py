"""A serializer describes itself in its own module: its schema-file family, the SQL type inspect
prints, the DataStream default it is for a SQL type, its values' Arrow type and its bulk kernel.
A new serializer class declared here (and nowhere else) is picked up by every reader of those
declarations: ``schema_file``, ``inspect``'s type rendering, ``bulk/types.py`` and the capability
table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from statemorph import bulk
from statemorph import serializers as S
from statemorph.bulk import capabilities
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.schema_file import (
    SchemaFileError,
    datastream_serializer,
    describe_serializer,
    family_of,
    parse_schema,
    serializer_for,
)
from statemorph.types import DateType, parse_type
from statemorph.typeutils import SERIALIZER_CLASSES, BulkKernel, TypeSerializer, TypeSerializerSnapshot

_EPOCH = dt.date(1970, 1, 1)


@pytest.fixture
def epoch_day() -> Iterator[type[TypeSerializer[Any]]]:
    """A new primitive serializer (a date as its epoch day, a Java int), declared in one place;
    it leaves the registry when the test ends, so other tests see DATE unclaimed again."""

    class EpochDaySerializer(TypeSerializer[dt.date]):
        SQL_TYPE = "DATE"
        VALUE_TYPE = DateType()
        DATASTREAM_OF = ("DATE",)
        BULK = BulkKernel("fixed", "LEAF_I32")

        def serialize(self, value: dt.date, out: DataOutputSerializer) -> None:
            out.write_int((value - _EPOCH).days)

        def deserialize(self, src: DataInputDeserializer) -> dt.date:
            return _EPOCH + dt.timedelta(days=src.read_int())

        def snapshot_configuration(self) -> TypeSerializerSnapshot:
            raise NotImplementedError

    yield EpochDaySerializer
    SERIALIZER_CLASSES.remove(EpochDaySerializer)


def test_a_new_serializer_is_read_from_its_declarations(epoch_day: type[TypeSerializer[Any]]) -> None:
    ser = datastream_serializer(parse_type("DATE"))
    assert type(ser) is epoch_day
    assert describe_serializer(ser) == "DATE"
    assert family_of(ser) == "datastream"
    assert bulk.arrow_type_for(ser) == pa.date32()
    c = capabilities.codec(ser)
    assert c is not None and (c.family, c.arrow) == ("fixed", pa.date32())
    schema = parse_schema('[states.s]\ntype = "DATE"\n')
    assert type(serializer_for(schema.states["s"])) is epoch_day


def test_its_bulk_kernel_writes_what_the_serializer_writes(epoch_day: type[TypeSerializer[Any]]) -> None:
    ser = epoch_day()
    days = [dt.date(2024, 2, 29), None, dt.date(1969, 12, 31), dt.date(1970, 1, 1)]
    encoded = bulk.encode(pa.array(days, pa.date32()), ser).values
    assert encoded.to_pylist() == [None if d is None else ser.to_bytes(d) for d in days]
    assert bulk.decode(encoded, ser).values.to_pylist() == days


def test_a_declaration_is_the_declaring_class_s_own() -> None:
    """A subclass may change the format: it inherits no family, SQL type or kernel."""

    class Wider(S.IntSerializer):
        pass

    try:
        assert describe_serializer(Wider()) == "Wider"
        assert capabilities.codec(Wider()) is None
        assert capabilities.codec(S.IntSerializer()) is not None
    finally:
        SERIALIZER_CLASSES.remove(Wider)


def test_a_nested_place_keeps_the_family_the_savepoint_records_there() -> None:
    """Inside a list, map or tuple a ROW is built by the class the savepoint records at that place
    when that class's family builds ROWs (its ``SCHEMA_TYPE_ROOT``): RowData rows (a SQL operator's)
    and Flink tuples stay so, with the tuple's class; with nothing recorded, DataStream's Row."""
    t = parse_type("MAP<ROW<a INT, b STRING>, ARRAY<ROW<x BIGINT, y STRING>>>")
    like = S.MapSerializer(S.TupleSerializer([S.IntSerializer(), S.StringSerializer()], "com.example.Pair"),
                           S.ListSerializer(S.RowDataSerializer("ROW<x BIGINT>")))
    built = datastream_serializer(t, like=like)
    assert built.key_serializer == S.TupleSerializer([S.IntSerializer(), S.StringSerializer()], "com.example.Pair")
    assert built.key_serializer.tuple_class_name == "com.example.Pair"
    assert built.value_serializer.element_serializer == S.RowDataSerializer("ROW<x BIGINT, y STRING>")
    plain = datastream_serializer(t)
    assert type(plain.key_serializer) is S.RowSerializer
    assert type(plain.value_serializer.element_serializer) is S.RowSerializer


def test_only_a_family_declaring_schema_in_collections_takes_an_array_of_its_root() -> None:
    """``SCHEMA_IN_COLLECTIONS``: rowdata takes ``ARRAY<ROW>`` (RowData rows in a DataStream list);
    tuple, whose class does not declare it, still needs a ROW."""
    schema = parse_schema('[states.s]\nserializer = "rowdata"\ntype = "ARRAY<ROW<x INT>>"\n')
    assert serializer_for(schema.states["s"]) == S.ListSerializer(S.RowDataSerializer("ROW<x INT>"))
    with pytest.raises(SchemaFileError, match=r'serializer = "tuple" needs a ROW type, got ARRAY<ROW<`x` INT>>'):
        parse_schema('[states.s]\nserializer = "tuple"\ntype = "ARRAY<ROW<x INT>>"\n')


def test_datastream_of_claims_are_unique() -> None:
    """Two classes claiming one SQL type would make the schema file's choice depend on import order."""
    claims = [sql for cls in SERIALIZER_CLASSES for sql in cls.declared("DATASTREAM_OF", ())]
    assert len(claims) == len(set(claims)), claims


@pytest.mark.parametrize("ser,text", [
    (S.ListSerializer(S.NullableSerializer(S.LongSerializer())), "ARRAY<BIGINT>"),
    (S.MapSerializer(S.StringSerializer(), S.CharSerializer()), "MAP<STRING, CHAR(1)>"),
    (S.TupleSerializer([S.IntSerializer(), S.GlobalWindowSerializer()]), "ROW<`f0` INT, `f1` GLOBAL WINDOW>"),
    (S.IntPrimitiveArraySerializer(), "IntPrimitiveArraySerializer"),
    (S.StringDataSerializer(), "STRING"),
    (S.ArrayDataSerializer(parse_type("BIGINT")), "ARRAY<BIGINT>"),
    (S.ExternalSerializer(S.LongSerializer(), parse_type("BIGINT NOT NULL"), b"", False), "BIGINT NOT NULL"),
])
def test_inspect_renders_nested_serializers(ser: TypeSerializer[Any], text: str) -> None:
    assert describe_serializer(ser) == text


@pytest.fixture
def upper_string() -> Iterator[type[TypeSerializer[Any]]]:
    """A new variable-length serializer whose declaration names the kernel functions it runs
    through (here the string kernels' ``string_*``: the bytes are Flink's StringValue)."""

    class Utf16Text(TypeSerializer[str]):
        VALUE_TYPE = S.StringSerializer.VALUE_TYPE
        BULK = BulkKernel("varlen", "LEAF_STR", kernel="string")

        def serialize(self, value: str, out: DataOutputSerializer) -> None:
            S.StringSerializer().serialize(value, out)

        def deserialize(self, src: DataInputDeserializer) -> str:
            value = S.StringSerializer().deserialize(src)
            assert value is not None
            return value

        def snapshot_configuration(self) -> TypeSerializerSnapshot:
            raise NotImplementedError

    yield Utf16Text
    SERIALIZER_CLASSES.remove(Utf16Text)


def test_a_varlen_declaration_runs_the_kernels_it_names(upper_string: type[TypeSerializer[Any]]) -> None:
    ser = upper_string()
    texts = ["ä", None, "", "x" * 300]
    encoded = bulk.encode(pa.array(texts, pa.large_string()), ser).values
    assert encoded.to_pylist() == [None if t is None else ser.to_bytes(t) for t in texts]
    assert bulk.decode(encoded, ser).values.to_pylist() == texts
    assert capabilities.codec(ser) == capabilities.Codec("varlen", arrow=pa.string(), kernel="string")


def test_a_declared_leaf_is_a_kernel_row_field(epoch_day: type[TypeSerializer[Any]]) -> None:
    row = S.RowSerializer([S.IntSerializer(), epoch_day()], field_names=["a", "d"])
    assert capabilities.core_row_program(row) is not None
    assert capabilities.core_row_program(S.RowSerializer([S.IntSerializer(), S.EnumSerializer(["A"], "p.E")])) is None


def test_a_recorded_serializer_s_class_decides_its_successor() -> None:
    """``successor_for``: a SQL data view keeps its own type (and only it); a ROW where the savepoint
    recorded RowData stays RowData; other classes leave it to the DataStream defaults."""
    view = S.ExternalSerializer(S.LongSerializer(), parse_type("BIGINT NOT NULL"), b"", False)
    assert datastream_serializer(parse_type("BIGINT NOT NULL"), "s", view) is view
    with pytest.raises(SchemaFileError, match="^s: the state of a SQL data view keeps its type BIGINT NOT NULL"):
        datastream_serializer(parse_type("INT NOT NULL"), "s", view)
    row = parse_type("ROW<a INT, b STRING>")
    recorded = S.ListSerializer(S.RowDataSerializer("ROW<a INT>"))
    buffered = datastream_serializer(parse_type(f"ARRAY<{row}>"), "s", recorded)
    assert buffered == S.ListSerializer(S.RowDataSerializer(row))
    assert datastream_serializer(row, "s", S.RowDataSerializer("ROW<a INT>")) == S.RowDataSerializer(row)
    assert type(datastream_serializer(row, "s", S.IntSerializer())) is S.RowSerializer
