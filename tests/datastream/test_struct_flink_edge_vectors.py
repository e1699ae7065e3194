"""Tuple / Row / POJO against vectors produced by real Flink 2.3.0 (flink-dist-2.3.0.jar) with a
throw-away Java harness: TypeExtractor / RowTypeInfo / TupleTypeInfo serializers, ``serialize`` and
``TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot`` (the envelope form).

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
``missing-field-at-1`` (``evo_restored_snap``); the v2 serializer wrote ``evo_new_data``.
"""

from __future__ import annotations

import dataclasses

import pytest

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
from statemorph.snapshot import read_serializer_snapshot, write_serializer_snapshot

FLINK = {
    "weird_data": (
        "020000000001000278010002000000000301000000000500026b"
    ),
    "weird_snap": (
        "0000000200426f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "506f6a6f53657269616c697a6572536e617073686f74000000020007702e5765697264000004f2c69a3d7000000006000142"
        "010000000c0007702e57656972640001420100000054004e6f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f"
        "6e2e747970657574696c732e626173652e496e7453657269616c697a657224496e7453657269616c697a6572536e61707368"
        "6f7400000003000161010000000c0007702e5765697264000161010000005a00546f72672e6170616368652e666c696e6b2e"
        "6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e6753"
        "657269616c697a6572536e617073686f7400000003000162010000000c0007702e5765697264000162010000005600506f72"
        "672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e4c6f6e675365726961"
        "6c697a6572244c6f6e6753657269616c697a6572536e617073686f74000000030005696e6e657201000000100007702e5765"
        "6972640005696e6e6572010000015500426f72672e6170616368652e666c696e6b2e6170692e6a6176612e74797065757469"
        "6c732e72756e74696d652e506f6a6f53657269616c697a6572536e617073686f74000000020007702e496e6e6572000004f2"
        "c69a3d7000000002000178010000000c0007702e496e6e65720001780100000054004e6f72672e6170616368652e666c696e"
        "6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e496e7453657269616c697a657224496e745365726961"
        "6c697a6572536e617073686f7400000003000179010000000c0007702e496e6e6572000179010000005a00546f72672e6170"
        "616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c69"
        "7a657224537472696e6753657269616c697a6572536e617073686f7400000003000004f2c69a3d7000000000000004f2c69a"
        "3d70000000000006eda0b5edb08001000000110007702e57656972640006eda0b5edb0800100000054004e6f72672e617061"
        "6368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e496e7453657269616c697a657224"
        "496e7453657269616c697a6572536e617073686f74000000030003efbdb1010000000e0007702e57656972640003efbdb101"
        "0000005a00546f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e53"
        "7472696e6753657269616c697a657224537472696e6753657269616c697a6572536e617073686f7400000003000004f2c69a"
        "3d7000000000000004f2c69a3d7000000000"
    ),
    "row_data": (
        "5000000001c000000002027a020000000007000271"
    ),
    "row_snap": (
        "00000002004f6f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "526f7753657269616c697a657224526f7753657269616c697a6572536e617073686f7400000003000de70400000004010014"
        "57fd0000000100000004004e6f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e"
        "626173652e496e7453657269616c697a657224496e7453657269616c697a6572536e617073686f740000000300546f72672e"
        "6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e675365726961"
        "6c697a657224537472696e6753657269616c697a6572536e617073686f7400000003004f6f72672e6170616368652e666c69"
        "6e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e526f7753657269616c697a657224526f77536572"
        "69616c697a6572536e617073686f7400000003000de7040000000401001457fd0000000100000002004e6f72672e61706163"
        "68652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e496e7453657269616c697a65722449"
        "6e7453657269616c697a6572536e617073686f740000000300546f72672e6170616368652e666c696e6b2e6170692e636f6d"
        "6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e6753657269616c697a"
        "6572536e617073686f740000000300426f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c"
        "732e72756e74696d652e506f6a6f53657269616c697a6572536e617073686f74000000020007702e496e6e6572000004f2c6"
        "9a3d7000000002000178010000000c0007702e496e6e65720001780100000054004e6f72672e6170616368652e666c696e6b"
        "2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e496e7453657269616c697a657224496e7453657269616c"
        "697a6572536e617073686f7400000003000179010000000c0007702e496e6e6572000179010000005a00546f72672e617061"
        "6368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a"
        "657224537472696e6753657269616c697a6572536e617073686f7400000003000004f2c69a3d7000000000000004f2c69a3d"
        "7000000000"
    ),
    "legacy_data": (
        "4000000004"
    ),
    "legacy_snap": (
        "00000002004f6f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "526f7753657269616c697a657224526f7753657269616c697a6572536e617073686f7400000003000de70400000004000014"
        "57fd0000000100000002004e6f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e"
        "626173652e496e7453657269616c697a657224496e7453657269616c697a6572536e617073686f740000000300546f72672e"
        "6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e675365726961"
        "6c697a657224537472696e6753657269616c697a6572536e617073686f7400000003"
    ),
    "tuple_data": (
        "00000009ffffffffffffffff02e90101"
    ),
    "tuple_snap": (
        "0000000200436f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "5475706c6553657269616c697a6572536e617073686f7400000003000de7040000000200266f72672e6170616368652e666c"
        "696e6b2e6170692e6a6176612e7475706c652e5475706c6533001457fd0000000100000003004e6f72672e6170616368652e"
        "666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e496e7453657269616c697a657224496e7453"
        "657269616c697a6572536e617073686f740000000300436f72672e6170616368652e666c696e6b2e6170692e6a6176612e74"
        "7970657574696c732e72756e74696d652e5475706c6553657269616c697a6572536e617073686f7400000003000de7040000"
        "000200266f72672e6170616368652e666c696e6b2e6170692e6a6176612e7475706c652e5475706c6532001457fd00000001"
        "0000000200506f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e4c"
        "6f6e6753657269616c697a6572244c6f6e6753657269616c697a6572536e617073686f740000000300546f72672e61706163"
        "68652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a65"
        "7224537472696e6753657269616c697a6572536e617073686f740000000300546f72672e6170616368652e666c696e6b2e61"
        "70692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e675365"
        "7269616c697a6572536e617073686f7400000003"
    ),
    "evo_old_data": (
        "020000000001000267000000000000000002"
    ),
    "evo_old_snap": (
        "0000000200426f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "506f6a6f53657269616c697a6572536e617073686f74000000020005702e45766f000004f2c69a3d70000000030001610100"
        "00000a0005702e45766f0001610100000054004e6f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e7479"
        "70657574696c732e626173652e496e7453657269616c697a657224496e7453657269616c697a6572536e617073686f740000"
        "00030004676f6e65010000000d0005702e45766f0004676f6e65010000005a00546f72672e6170616368652e666c696e6b2e"
        "6170692e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e6753"
        "657269616c697a6572536e617073686f740000000300046b656570010000000d0005702e45766f00046b6565700100000056"
        "00506f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e4c6f6e6753"
        "657269616c697a6572244c6f6e6753657269616c697a6572536e617073686f7400000003000004f2c69a3d70000000000000"
        "04f2c69a3d7000000000"
    ),
    "evo_restored_rewrite": (
        "02000000000101000000000000000002"
    ),
    "evo_restored_snap": (
        "0000000200426f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e"
        "506f6a6f53657269616c697a6572536e617073686f74000000020005702e45766f000004f2c69a3d70000000030001610100"
        "00000a0005702e45766f0001610100000054004e6f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e7479"
        "70657574696c732e626173652e496e7453657269616c697a657224496e7453657269616c697a6572536e617073686f740000"
        "000300126d697373696e672d6669656c642d61742d3100010000005a00546f72672e6170616368652e666c696e6b2e617069"
        "2e636f6d6d6f6e2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e6753657269"
        "616c697a6572536e617073686f740000000300046b656570010000000d0005702e45766f00046b656570010000005600506f"
        "72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e2e747970657574696c732e626173652e4c6f6e6753657269"
        "616c697a6572244c6f6e6753657269616c697a6572536e617073686f7400000003000004f2c69a3d7000000000000004f2c6"
        "9a3d7000000000"
    ),
    "evo_new_data": (
        "02000000000101000000000000000002"
    ),
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
