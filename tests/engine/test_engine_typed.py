"""Typed read / bootstrap for every serializer family, and migration of non-RowData state."""

from __future__ import annotations

import dataclasses
import enum

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.bulk.types import arrow_type_for
from statemorph.engine import migrate_savepoint, read_state_table, write_state
from statemorph.savepoint import read_metadata
from statemorph.state import HashMapStateBackend, ValueStateDescriptor


class Color(enum.Enum):
    RED = 0
    GREEN = 1


@dataclasses.dataclass
class Point:
    x: int = 0
    label: str | None = None


@dataclasses.dataclass
class Point2:
    x: int = 0
    label: str | None = None
    z: int | None = None


AVRO = ('{"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}, '
        '{"name": "tags", "type": {"type": "array", "items": "string"}}, {"name": "s", "type": ["null", "string"]}]}')

CASES = [
    ("row", S.RowSerializer([S.IntSerializer(), S.StringSerializer()], field_names=["n", "s"]),
     [{"n": 1, "s": "a"}, {"n": 2, "s": None}]),
    ("tuple", S.TupleSerializer([S.LongSerializer(), S.DoubleSerializer()]),
     [{"f0": 1, "f1": 0.5}, {"f0": -3, "f1": 2.0}]),
    ("pojo", S.PojoSerializer(Point, {"x": S.IntSerializer(), "label": S.StringSerializer()}),
     [{"label": "p", "x": 3}, {"label": None, "x": 4}]),
    ("avro", S.AvroSerializer(AVRO), [{"id": 1, "tags": ["a", "b"], "s": None}, {"id": 2, "tags": [], "s": "q"}]),
    ("enum", S.EnumSerializer(Color), ["GREEN", "RED"]),
    ("list", S.ListSerializer(S.IntSerializer()), [[1, 2], []]),
    ("map", S.MapSerializer(S.StringSerializer(), S.LongSerializer()), [[("a", 1)], [("b", 2), ("c", 3)]]),
    ("long", S.LongSerializer(), [5, -7]),
]


@pytest.mark.parametrize(("label", "ser", "values"), CASES, ids=[c[0] for c in CASES])
def test_bootstrap_and_read_back(tmp_path, label, ser, values):
    t = arrow_type_for(ser)
    write_state(tmp_path / "sp", pa.table({"key": pa.array([10, 20], pa.int64()), "value": pa.array(values, t)}),
                name="s", key_serializer=S.LongSerializer(), value_serializer=ser)
    got = read_state_table(tmp_path / "sp", "s", flatten=False).sort_by("key")
    assert got.column("key").to_pylist() == [10, 20]
    # flink-core Row snapshots carry no field names (as in Flink): restored rows are f0, f1, ...
    def plain(vs):
        return [tuple(v.values()) if isinstance(v, dict) else v for v in vs]

    assert plain(got.column("value").to_pylist()) == plain(pa.array(values, t).to_pylist())
    # the reference backend reads the same state (the bytes are the serializer's)
    b = HashMapStateBackend.restore(tmp_path / "sp")
    st = b.get_state(ValueStateDescriptor("s", ser))
    b.set_current_key(10)
    assert st.value() is not None


def test_pojo_field_added_migrates(tmp_path):
    old = S.PojoSerializer(Point, {"x": S.IntSerializer(), "label": S.StringSerializer()}, java_class_name="p.Point")
    new = S.PojoSerializer(Point2, {"x": S.IntSerializer(), "label": S.StringSerializer(), "z": S.IntSerializer()},
                           java_class_name="p.Point")
    write_state(tmp_path / "v1", pa.table({"key": pa.array([1, 2], pa.int64()),
                                           "value": pa.array([{"label": "a", "x": 1}, {"label": None, "x": 2}],
                                                             arrow_type_for(old))}),
                name="points", key_serializer=S.LongSerializer(), value_serializer=old)
    report = migrate_savepoint(tmp_path / "v1", tmp_path / "v2", [ValueStateDescriptor("points", new)])
    assert report.plan.states[0].action == "migrate"
    got = read_state_table(tmp_path / "v2", "points").sort_by("key")
    assert got.to_pylist() == [{"key": 1, "label": "a", "x": 1, "z": None},
                               {"key": 2, "label": None, "x": 2, "z": None}]
    assert read_metadata(tmp_path / "v2").states["points"].snapshot("value_serializer").restore_serializer() \
        .field_names == new.field_names


def test_decode_errors_name_the_row(tmp_path):
    from statemorph.engine.batches import decode_column
    from statemorph.errors import StateFormatError

    ser = S.RowSerializer([S.IntSerializer()], field_names=["n"])
    arr = pa.array([ser.to_bytes((1,)), b"\x00\x01"], pa.binary())
    with pytest.raises(StateFormatError, match="row 1"):
        decode_column(arr, ser, arrow_type_for(ser))
    assert decode_column(arr, ser, arrow_type_for(ser), on_error="null").to_pylist() == [{"n": 1}, None]
