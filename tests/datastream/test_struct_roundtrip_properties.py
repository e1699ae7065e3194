"""Property tests over random nested Tuple / Row / POJO structures of basic types: values round-trip,
byte copies are exact, snapshots round-trip byte for byte and restore a serializer that reads and
rewrites the same bytes, and a snapshot is compatible as is with its own serializer."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.row import Row, RowKind
from statemorph.serializers import (
    BooleanSerializer,
    DoubleSerializer,
    IntSerializer,
    LongSerializer,
    PojoSerializer,
    RowSerializer,
    StringSerializer,
    TupleSerializer,
)
from statemorph.serializers.pojo import java_string_order
from statemorph.typeutils import TypeSerializer, read_versioned_snapshot, write_versioned_snapshot

Schema = tuple[TypeSerializer[Any], st.SearchStrategy[Any]]

LEAVES: list[Schema] = [
    (IntSerializer(), st.integers(-(2**31), 2**31 - 1)),
    (LongSerializer(), st.integers(-(2**63), 2**63 - 1)),
    (StringSerializer(), st.text(max_size=6)),
    (DoubleSerializer(), st.floats(allow_nan=False)),
    (BooleanSerializer(), st.booleans()),
]

FIELD_NAMES = st.text(alphabet="abcxyzAB_", min_size=1, max_size=4).filter(str.isidentifier)


@st.composite
def schemas(draw: st.DrawFn, depth: int = 2) -> Schema:
    kinds = ["leaf", "leaf"] + (["tuple", "row", "pojo", "pojo_class"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        return draw(st.sampled_from(LEAVES))
    n = draw(st.integers(1, 4))
    children = [draw(schemas(depth - 1)) for _ in range(n)]
    sers = [c[0] for c in children]
    if kind == "tuple":
        return TupleSerializer(sers), st.tuples(*(c[1] for c in children))
    if kind == "row":
        supports_kind = draw(st.booleans())
        names = draw(st.none() | st.lists(FIELD_NAMES, min_size=n, max_size=n, unique=True))
        ser = RowSerializer(sers, supports_kind, names)
        fields = st.tuples(*(c[1] | st.none() for c in children))
        kinds_st = st.sampled_from(list(RowKind)) if supports_kind else st.just(RowKind.INSERT)
        return ser, st.builds(Row, fields, kinds_st)
    names = draw(st.lists(FIELD_NAMES, min_size=n, max_size=n, unique=True))
    field_values = {name: c[1] | st.none() for name, c in zip(names, children, strict=True)}
    if kind == "pojo":
        return PojoSerializer(None, dict(zip(names, sers, strict=True)), "p.Gen"), st.fixed_dictionaries(field_values)
    cls = dataclasses.make_dataclass("Gen", names)
    ser = PojoSerializer(cls, dict(zip(names, sers, strict=True)), "p.GenClass")
    return ser, st.builds(cls, **field_values)


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[TypeSerializer[Any], Any]:
    ser, values = draw(schemas())
    return ser, draw(values)


@settings(max_examples=60)
@given(schema_and_value())
def test_value_round_trip_and_exact_copy(sv):
    ser, value = sv
    data = ser.to_bytes(value)
    back = ser.from_bytes(data)
    assert back == value
    if isinstance(value, Row) and isinstance(ser, RowSerializer) and ser.supports_row_kind:
        assert back.kind is value.kind
    assert ser.to_bytes(back) == data
    out = DataOutputSerializer()
    src = DataInputDeserializer(data)
    ser.copy_bytes(src, out)
    assert out.get_copy_of_buffer() == data and src.available() == 0


@settings(max_examples=40)
@given(schema_and_value())
def test_snapshot_round_trip_restores_an_equivalent_serializer(sv):
    ser, value = sv
    snap_bytes = write_versioned_snapshot(ser.snapshot_configuration())
    snap = read_versioned_snapshot(snap_bytes)
    assert write_versioned_snapshot(snap) == snap_bytes
    restored = snap.restore_serializer()
    assert write_versioned_snapshot(restored.snapshot_configuration()) == snap_bytes
    data = ser.to_bytes(value)
    assert restored.to_bytes(restored.from_bytes(data)) == data
    assert snap.resolve_schema_compatibility(ser).is_compatible_as_is()
    # migrating a value to the serializer it came from is the identity on bytes
    out = DataOutputSerializer()
    snap.migrate_state(restored, ser, DataInputDeserializer(data), out)
    assert out.get_copy_of_buffer() == data


@settings(max_examples=60)
@given(st.lists(st.text(max_size=5), max_size=8))
def test_java_string_order_is_utf16_code_unit_order(names):
    assert sorted(names, key=java_string_order) == sorted(names, key=lambda s: s.encode("utf-16-be"))


@settings(max_examples=60)
@given(
    st.lists(st.none() | st.integers(-5, 5), min_size=0, max_size=20),
    st.sampled_from(list(RowKind)),
    st.booleans(),
)
def test_row_mask_layout(fields, kind, supports_kind):
    ser = RowSerializer([IntSerializer()] * len(fields), supports_kind)
    data = ser.to_bytes(Row(fields, kind))
    bits = ([bool(kind & 1), bool(kind & 2)] if supports_kind else []) + [f is None for f in fields]
    nbytes = (len(bits) + 7) // 8
    expected_mask = bytes(
        sum(0x80 >> j for j in range(8) if 8 * i + j < len(bits) and bits[8 * i + j]) for i in range(nbytes)
    )
    assert data[:nbytes] == expected_mask
    assert len(data) == nbytes + 4 * sum(f is not None for f in fields)
