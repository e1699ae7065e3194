"""Property: statemorph's Java-serialization writer and its whitelisting reader agree.

For any logical type: the LogicalType stream reads back to an equal type and ends exactly where
it was written; re-writing what was read gives the same bytes; the serializer objects built for
ARRAY / MAP / MULTISET types (without ROW inside) parse under the whitelist; and a Flink
``RowDataSerializerSnapshot`` round-trips through the snapshot registry. (Byte identity with
Flink itself is proven by tests/golden/test_golden_flink_rowdata.py.)
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rowdata_types import logical_types, row_types

from statemorph.errors import JavaSerializationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.javaser import read_logical_type, read_stream, write_logical_type, write_logical_type_to, write_stream
from statemorph.javaser.classes import flink_policy
from statemorph.javaser.tableser import serializer_tree
from statemorph.serializers import FlinkRowDataSerializerSnapshot, RowDataSerializer
from statemorph.snapshot import read_serializer_snapshot, write_serializer_snapshot
from statemorph.types import LogicalType, RowType


def _has_row(t: LogicalType) -> bool:
    return isinstance(t, RowType) or any(_has_row(c) for c in t.children())


@settings(max_examples=150)
@given(logical_types)
def test_logical_type_stream_round_trips(t: LogicalType) -> None:
    data = write_logical_type(t)
    assert data[:4] == bytes.fromhex("ACED0005")
    src = DataInputDeserializer(data + b"\x99")  # the stream's end is found without a length
    back = read_logical_type(src)
    assert back == t
    assert src.available() == 1
    assert write_logical_type(back) == data


@settings(max_examples=60)
@given(st.lists(logical_types, min_size=1, max_size=4))
def test_concatenated_streams_are_separated(types: list[LogicalType]) -> None:
    out = DataOutputSerializer()
    for t in types:
        write_logical_type_to(out, t)
    src = DataInputDeserializer(out.get_copy_of_buffer())
    assert [read_logical_type(src) for _ in types] == types
    assert src.available() == 0


@settings(max_examples=100)
@given(logical_types.filter(lambda t: t.children() != () and not _has_row(t)))
def test_collection_serializer_objects_parse_under_the_whitelist(t: LogicalType) -> None:
    data = write_stream(serializer_tree(t))
    src = DataInputDeserializer(data)
    node = read_stream(src, flink_policy)
    assert src.available() == 0
    assert node.values["eleType" if t.type_root == "ARRAY" else "keyType"] is not None


def _row_in_collection(t: LogicalType, inside: bool = False) -> bool:
    if isinstance(t, RowType) and inside:
        return True
    nested = inside or not isinstance(t, RowType)
    return any(_row_in_collection(c, nested) for c in t.children())


def _generated(name: str) -> bool:
    return name[:1] == "f" and name[1:].isdigit()


@settings(max_examples=80)
@given(row_types.filter(lambda r: not any(_generated(n) for n in r.field_names)))
def test_flink_rowdata_snapshot_round_trips(row: RowType) -> None:
    ser = RowDataSerializer(row)
    if _row_in_collection(row):  # ARRAY / MAP / MULTISET of ROW: refused by name, never half-written
        with pytest.raises(JavaSerializationError, match="ROW"):
            write_serializer_snapshot(ser.flink_snapshot_configuration())
        return
    blob = write_serializer_snapshot(ser.flink_snapshot_configuration())
    snap = read_serializer_snapshot(blob)
    assert isinstance(snap, FlinkRowDataSerializerSnapshot)
    assert snap.field_types == row.field_types
    assert write_serializer_snapshot(snap) == blob
    # top-level names are not in Flink's bytes: matched by position, so the same row is AS_IS
    assert snap.resolve_schema_compatibility(ser).is_compatible_as_is()
