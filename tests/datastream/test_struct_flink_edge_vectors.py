"""Tuple / Row / POJO against vectors of real Flink 2.3.0 (flink-dist-2.3.0.jar): ``serialize`` and
``TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot`` (the envelope form), the
``edge/struct*`` and ``edge/evo*`` lines of tests/data/golden/edge.jsonl, which the golden generator
(``ci/golden/cases.py``, ``ci/golden/generate.sh``) writes; it reproduces byte for byte the vectors a
throw-away harness first wrote for this file (TypeExtractor / RowTypeInfo / TupleTypeInfo).

They cover what docs/formats.md §7 does not: POJO field order beyond ASCII (Java UTF-16 order),
nested POJO snapshots, rows nesting rows and POJOs, a ``supportsRowKind=false`` snapshot, nested
tuples. The Java side was::

    class Inner { public int x; public String y; }
    class Weird { public int B; public String a; public Long b; public String ｱ; public Integer 𝐀;
                  public Inner inner; }
    weird = {B=1, a="x", b=null, ｱ="k", 𝐀=5, inner={x=3, y=null}}
    RowTypeInfo(INT, STRING, RowTypeInfo(INT, STRING), Inner) ← +U(1, null, -D(2, "z"), {x=7, y="q"})
    new RowSerializer({Int, String}, null, false)              ← (4, null)
    TupleTypeInfo(INT, Tuple2(LONG, STRING), STRING)           ← (9, (-1, "é"), "")

and a POJO evolution in two JVMs, ``class Evo { int a; String gone; long keep; }`` then
``class Evo { int a; long keep; String added; }``: the v1 data and snapshot (``evo_old_*``);
reading them under v2 gave COMPATIBLE_AFTER_MIGRATION, the restored serializer re-wrote the value
(``evo_restored_rewrite``, ``gone`` written as null) and its snapshot with the removed field as
``missing-field-at-1`` (``evo_restored_snap``); the v2 serializer wrote ``evo_new_data``. (The
generator's POJO fields are boxed; Flink's bytes and snapshots are the same for primitive fields.)
"""

from __future__ import annotations

import dataclasses

import pytest
from snapshots.specs import golden_lines

from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.row import Row, RowKind
from statemorph.serializers import (
    IntSerializer,
    LongSerializer,
    PojoSerializer,
    RowSerializer,
    StringSerializer,
    TupleSerializer,
)
from statemorph.typeutils import read_serializer_snapshot, write_serializer_snapshot

EDGE = golden_lines("edge")
_EVO = EDGE["edge/evo"]
FLINK = {
    **{f"{n}_data": EDGE[f"edge/struct/{n}"]["hex"] for n in ("weird", "row", "legacy", "tuple")},
    **{f"{n}_snap": EDGE[f"edge/struct_snapshot/{n}"]["envelope_hex"] for n in ("weird", "row", "legacy", "tuple")},
    "evo_old_data": _EVO["old_hex"],
    "evo_old_snap": EDGE["edge/evo_old_snapshot"]["envelope_hex"],
    "evo_restored_rewrite": _EVO["restored_hex"],
    "evo_restored_snap": _EVO["restored_envelope_hex"],
    "evo_new_data": _EVO["new_hex"],
}


@dataclasses.dataclass
class Inner:
    x: int
    y: str | None


def inner() -> PojoSerializer:
    return PojoSerializer(Inner, {"x": IntSerializer(), "y": StringSerializer()}, "p.Inner")


def weird() -> PojoSerializer:
    # 'ｱ' and '𝐀' cannot be dataclass fields (Python NFKC-normalises identifiers), so dict mode
    fields = {
        "B": IntSerializer(),
        "a": StringSerializer(),
        "b": LongSerializer(),
        "\uff71": StringSerializer(),
        "\U0001d400": IntSerializer(),
        "inner": inner(),
    }
    return PojoSerializer(None, fields, "p.Weird")


CASES = {
    "weird": (weird(), {"B": 1, "a": "x", "b": None, "\uff71": "k", "\U0001d400": 5, "inner": Inner(3, None)}),
    "row": (
        RowSerializer(
            [IntSerializer(), StringSerializer(), RowSerializer([IntSerializer(), StringSerializer()]), inner()],
            field_names=["id", "name", "sub", "pojo"],
        ),
        Row((1, None, Row((2, "z"), RowKind.DELETE), Inner(7, "q")), RowKind.UPDATE_AFTER),
    ),
    "legacy": (RowSerializer([IntSerializer(), StringSerializer()], supports_row_kind=False), (4, None)),
    "tuple": (
        TupleSerializer([IntSerializer(), TupleSerializer([LongSerializer(), StringSerializer()]), StringSerializer()]),
        (9, (-1, "é"), ""),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_data_bytes_equal_flink(name):
    ser, value = CASES[name]
    expected = bytes.fromhex(FLINK[f"{name}_data"])
    assert ser.to_bytes(value) == expected
    assert ser.from_bytes(expected) == value


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot_bytes_equal_flink(name):
    ser, value = CASES[name]
    expected = bytes.fromhex(FLINK[f"{name}_snap"])
    assert write_serializer_snapshot(ser.snapshot_configuration()) == expected
    snap = read_serializer_snapshot(expected)
    assert write_serializer_snapshot(snap) == expected
    restored = snap.restore_serializer()
    data = bytes.fromhex(FLINK[f"{name}_data"])
    assert restored.to_bytes(restored.from_bytes(data)) == data
    assert snap.resolve_schema_compatibility(ser).is_compatible_as_is()


def test_weird_field_order_is_java_order():
    assert weird().field_names == ["B", "a", "b", "inner", "\U0001d400", "\uff71"]


def test_restored_row_reads_flink_row_as_dicts_for_pojos():
    snap = read_serializer_snapshot(bytes.fromhex(FLINK["row_snap"]))
    value = snap.restore_serializer().from_bytes(bytes.fromhex(FLINK["row_data"]))
    assert value == (1, None, (2, "z"), {"x": 7, "y": "q"})
    assert value.kind is RowKind.UPDATE_AFTER and value[2].kind is RowKind.DELETE


def test_pojo_field_removed_and_added_like_flink():
    old_snap = read_serializer_snapshot(bytes.fromhex(FLINK["evo_old_snap"]))
    old_data = bytes.fromhex(FLINK["evo_old_data"])
    restored = old_snap.restore_serializer()
    assert restored.from_bytes(old_data) == {"a": 1, "gone": "g", "keep": 2}
    new = PojoSerializer(None, {"a": IntSerializer(), "keep": LongSerializer(), "added": StringSerializer()}, "p.Evo")
    compat = old_snap.resolve_schema_compatibility(new)
    assert compat.is_compatible_after_migration()
    assert "gone" in compat.reason and "added" in compat.reason
    out = DataOutputSerializer()
    old_snap.migrate_state(restored, new, DataInputDeserializer(old_data), out)
    assert out.get_copy_of_buffer() == bytes.fromhex(FLINK["evo_new_data"])


def test_restored_snapshot_with_missing_field_like_flink():
    """Flink's re-snapshot of a serializer restored without field ``gone``: key absent, name
    ``missing-field-at-1``; values are read and dropped, and written as null."""
    data = bytes.fromhex(FLINK["evo_restored_snap"])
    snap = read_serializer_snapshot(data)
    assert write_serializer_snapshot(snap) == data
    restored = snap.restore_serializer()
    assert restored.field_names == ["a", "keep"]
    assert restored.from_bytes(bytes.fromhex(FLINK["evo_old_data"])) == {"a": 1, "keep": 2}
    assert restored.to_bytes({"a": 1, "keep": 2}) == bytes.fromhex(FLINK["evo_restored_rewrite"])
    assert write_serializer_snapshot(restored.snapshot_configuration()) == data
