"""Schema evolution with state, in the spirit of Flink's ``SchemaEvolutionWithStateITCase``:
value, list and map state written with the old type, savepoint, restore with the evolved type on
either backend, every entry read back, savepoint again, restore again. Incompatible changes fail
with the reason and leave the savepoint byte-identical."""

import dataclasses
from typing import Optional

import pyarrow as pa
import pytest

from statemorph.engine import check_savepoint
from statemorph.errors import ExitCode, StateMigrationError
from statemorph.savepoint import read_metadata, read_state_table
from statemorph.serializers import (
    AvroSerializer,
    IntSerializer,
    LongSerializer,
    PojoSerializer,
    RowDataSerializer,
    RowSerializer,
    StringSerializer,
)
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statemorph.types import parse_type

BACKENDS = {"heap": HashMapStateBackend, "rocksdb": EmbeddedRocksDBStateBackend}
PAIRS = [("heap", "heap"), ("heap", "rocksdb"), ("rocksdb", "rocksdb"), ("rocksdb", "heap")]
N = 25

# -- the type families ---------------------------------------------------------------------------

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_V2 = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING, appVersion STRING>>"
EVENTS_BAD = "ROW<eventId STRING, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"


@dataclasses.dataclass
class Event:
    id: int = 0
    name: Optional[str] = None  # noqa: UP045 - the POJO field type as written


@dataclasses.dataclass
class EventV2:
    id: int = 0
    name: Optional[str] = None  # noqa: UP045
    score: Optional[int] = None  # noqa: UP045


@dataclasses.dataclass
class EventBad:
    id: int = 0
    name: Optional[str] = None  # noqa: UP045


POJO_CLASS = "com.example.Event"
USER = {"type": "record", "name": "User", "namespace": "com.example",
        "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
USER_V2 = {"type": "record", "name": "User", "namespace": "com.example",
           "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                      {"name": "email", "type": ["null", "string"], "default": None}]}
USER_BAD = {"type": "record", "name": "User", "namespace": "com.example",
            "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                       {"name": "email", "type": "string"}]}


@dataclasses.dataclass
class Family:
    old: object
    new: object
    bad: object
    make: object  # i -> old value
    evolved: object  # i -> the value read back with the new serializer
    bad_reason: str


FAMILIES = {
    "rowdata": Family(
        RowDataSerializer(parse_type(EVENTS)), RowDataSerializer(parse_type(EVENTS_V2)),
        RowDataSerializer(parse_type(EVENTS_BAD)),
        lambda i: (i, (i % 7, 1700000000000 + i, f"dev-{i}")),
        lambda i: (i, (i % 7, 1700000000000 + i, f"dev-{i}", None)),
        "eventId: BIGINT -> STRING"),
    "pojo": Family(
        PojoSerializer(Event, {"id": IntSerializer(), "name": StringSerializer()}, java_class_name=POJO_CLASS),
        PojoSerializer(EventV2, {"id": IntSerializer(), "name": StringSerializer(), "score": LongSerializer()},
                       java_class_name=POJO_CLASS),
        PojoSerializer(EventBad, {"id": LongSerializer(), "name": StringSerializer()}, java_class_name=POJO_CLASS),
        lambda i: Event(i, f"n{i}"),
        lambda i: EventV2(i, f"n{i}", None),
        "id: IntSerializer -> LongSerializer"),
    "avro": Family(
        AvroSerializer(USER), AvroSerializer(USER_V2), AvroSerializer(USER_BAD),
        lambda i: {"id": i, "name": f"u{i}"},
        lambda i: {"id": i, "name": f"u{i}", "email": None},
        "email"),
    "row": Family(
        RowSerializer([IntSerializer(), StringSerializer()]),
        RowSerializer([IntSerializer(), StringSerializer()]),  # flink-core Row: positional, as-is only
        RowSerializer([IntSerializer(), StringSerializer(), IntSerializer()]),
        lambda i: (i, f"r{i}"),
        lambda i: (i, f"r{i}"),
        "arity changed from 2 to 3"),
}


def descriptors(fam, ser):
    return [ValueStateDescriptor("events", ser), ListStateDescriptor("history", ser),
            MapStateDescriptor("by_slot", IntSerializer(), ser)]


def populate(backend, fam):
    v, lst, m = (backend.get_state(d) for d in descriptors(fam, fam.old))
    for i in range(N):
        backend.set_current_key(f"user-{i}")
        v.update(fam.make(i))
        lst.add_all([fam.make(i), fam.make(i + 1000)])
        m.put_all({0: fam.make(i), 1: fam.make(i + 2000)})
        if i % 5 == 0:
            m.put(2, None)


def verify(backend, fam, ser, value_of):
    v, lst, m = (backend.get_state(d) for d in descriptors(fam, ser))
    for i in range(N):
        backend.set_current_key(f"user-{i}")
        assert v.value() == value_of(i), f"value of user-{i}"
        assert lst.get() == [value_of(i), value_of(i + 1000)], f"list of user-{i}"
        expected = {0: value_of(i), 1: value_of(i + 2000)}
        if i % 5 == 0:
            expected[2] = None
        assert dict(m.items()) == expected, f"map of user-{i}"
    return v, lst, m


def tree(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("first,second", PAIRS)
def test_evolve_restore_savepoint_restore(tmp_path, family, first, second):
    fam = FAMILIES[family]
    b = BACKENDS[first](StringSerializer(), 128)
    populate(b, fam)
    sp1 = tmp_path / "sp1"
    b.savepoint(sp1)
    b.close()
    before = tree(sp1)

    report = check_savepoint(sp1, descriptors(fam, fam.new), key_serializer=StringSerializer())
    expect_migration = fam.new != fam.old
    assert report.exit_status == (1 if expect_migration else 0), report.summary
    if expect_migration:
        assert all(s.plan for s in report.states), report.summary

    with BACKENDS[second].restore(sp1, key_serializer=StringSerializer()) as r:
        v, lst, _ = verify(r, fam, fam.new, fam.evolved)
        r.set_current_key("user-0")
        v.update(fam.evolved(99))
        lst.add(fam.evolved(98))
        sp2 = tmp_path / "sp2"
        r.savepoint(sp2)
    assert tree(sp1) == before, "restoring changed the source savepoint"

    assert check_savepoint(sp2, descriptors(fam, fam.new)).exit_status == 0
    other = "heap" if second == "rocksdb" else "rocksdb"
    with BACKENDS[other].restore(sp2) as r2:
        v2, lst2, m2 = (r2.get_state(d) for d in descriptors(fam, fam.new))
        r2.set_current_key("user-0")
        assert v2.value() == fam.evolved(99)
        assert lst2.get() == [fam.evolved(0), fam.evolved(1000), fam.evolved(98)]
        r2.set_current_key("user-3")
        assert v2.value() == fam.evolved(3) and m2.get(1) == fam.evolved(2003)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_incompatible_change_fails_and_leaves_savepoint_identical(tmp_path, family, backend):
    fam = FAMILIES[family]
    b = BACKENDS[backend](StringSerializer(), 128)
    populate(b, fam)
    sp = tmp_path / "sp"
    b.savepoint(sp)
    b.close()
    before = tree(sp)

    report = check_savepoint(sp, descriptors(fam, fam.bad))
    assert report.exit_status == ExitCode.INCOMPATIBLE
    assert fam.bad_reason in report.state("events").reasons[0]
    assert "INCOMPATIBLE" in report.summary

    with BACKENDS[backend].restore(sp) as r:
        for desc in descriptors(fam, fam.bad):
            with pytest.raises(StateMigrationError) as e:
                r.get_state(desc)
            assert repr(desc.name) in str(e.value) and fam.bad_reason in str(e.value)
        verify(r, fam, fam.old, fam.make)  # still readable with the old serializers
    assert tree(sp) == before


def test_heap_rocksdb_heap_round_trip_keeps_rows_identical(tmp_path):
    fam = FAMILIES["rowdata"]
    b = HashMapStateBackend(StringSerializer(), 1000)  # 2-byte key group prefix in RocksDB
    populate(b, fam)
    b.savepoint(tmp_path / "a")
    b.close()
    with EmbeddedRocksDBStateBackend.restore(tmp_path / "a", db_path=tmp_path / "db") as r:
        r.savepoint(tmp_path / "b")  # nothing registered: states pass through in their old schema
    with HashMapStateBackend.restore(tmp_path / "b") as h:
        verify(h, fam, fam.old, fam.make)
        h.savepoint(tmp_path / "c")
    metas = [read_metadata(tmp_path / n) for n in "abc"]
    for name in ("events", "history", "by_slot"):
        tables = [read_state_table(tmp_path / n, name) for n in "abc"]
        assert tables[0].num_rows > 0
        assert tables[0].equals(tables[1]) and tables[1].equals(tables[2])
        assert metas[0].state(name).value_serializer == metas[2].state(name).value_serializer


def test_rescaling_rules(tmp_path):
    fam = FAMILIES["avro"]
    b = HashMapStateBackend(StringSerializer(), 128)
    populate(b, fam)
    b.savepoint(tmp_path / "sp")
    from statemorph.errors import SavepointError

    with pytest.raises(SavepointError, match="max_parallelism 128.*256"):
        HashMapStateBackend.restore(tmp_path / "sp", max_parallelism=256)
    groups = {b.key_group_of(f"user-{i}") for i in range(N)}
    b.close()
    lo = sorted(groups)[len(groups) // 2]
    for cls in BACKENDS.values():
        with cls.restore(tmp_path / "sp", key_group_range=(lo, 127)) as part:
            v = part.get_state(ValueStateDescriptor("events", fam.old))
            seen = 0
            for i in range(N):
                kg = part.key_group_of(f"user-{i}")
                if kg >= lo:
                    part.set_current_key(f"user-{i}")
                    assert v.value() == fam.make(i)
                    seen += 1
                else:
                    with pytest.raises(ValueError, match="outside"):
                        part.set_current_key(f"user-{i}")
            assert seen > 0
            part.savepoint(tmp_path / f"part-{cls.__name__}")
        t = read_state_table(tmp_path / f"part-{cls.__name__}", "events")
        assert t.num_rows == seen and min(t.column("key_group").to_pylist()) >= lo


def test_key_serializer_must_be_compatible_as_is(tmp_path):
    b = HashMapStateBackend(StringSerializer(), 128)
    b.get_state(ValueStateDescriptor("v", IntSerializer()))
    b.savepoint(tmp_path / "sp")
    b.close()
    for cls in BACKENDS.values():
        with pytest.raises(StateMigrationError, match="key serializer"):
            cls.restore(tmp_path / "sp", key_serializer=LongSerializer())
    report = check_savepoint(tmp_path / "sp", [], key_serializer=LongSerializer())
    assert report.exit_status == ExitCode.INCOMPATIBLE and report.key is not None


def test_savepoint_rows_use_one_row_per_list_element(tmp_path):
    fam = FAMILIES["row"]
    b = EmbeddedRocksDBStateBackend(StringSerializer(), 128)
    populate(b, fam)
    b.savepoint(tmp_path / "sp")
    b.close()
    t = read_state_table(tmp_path / "sp", "history")
    assert t.num_rows == 2 * N
    assert t.column("index").to_pylist().count(1) == N
    ser = fam.old
    assert sorted(ser.from_bytes(x) for x in t.column("value").to_pylist())[:2] == [(0, "r0"), (1, "r1")]
    assert t.schema.field("value").type == pa.binary()


@pytest.mark.parametrize("first,second", PAIRS)
def test_enum_with_appended_constant_uses_the_reconfigured_serializer(tmp_path, first, second):
    import enum

    from statemorph.serializers import EnumSerializer
    from statemorph.state import Outcome

    class Color(enum.Enum):
        RED = 0
        GREEN = 1

    class ColorV2(enum.Enum):
        RED = 0
        GREEN = 1
        BLUE = 2

    old = EnumSerializer(Color, java_class_name="com.example.Color")
    new = EnumSerializer(ColorV2, java_class_name="com.example.Color")
    b = BACKENDS[first](StringSerializer(), 128)
    v = b.get_state(ValueStateDescriptor("color", old))
    for i in range(6):
        b.set_current_key(f"k{i}")
        v.update(Color.GREEN if i % 2 else Color.RED)
    b.savepoint(tmp_path / "sp")
    b.close()
    report = check_savepoint(tmp_path / "sp", [ValueStateDescriptor("color", new)])
    assert report.exit_status == 0 and report.state("color").outcome is Outcome.RECONFIGURED
    with BACKENDS[second].restore(tmp_path / "sp") as r:
        v = r.get_state(ValueStateDescriptor("color", new))
        for i in range(6):
            r.set_current_key(f"k{i}")
            assert v.value() == (ColorV2.GREEN if i % 2 else ColorV2.RED)
        v.update(ColorV2.BLUE)
        r.savepoint(tmp_path / "sp2")
    with BACKENDS[first].restore(tmp_path / "sp2") as r2:
        v = r2.get_state(ValueStateDescriptor("color", new))
        r2.set_current_key("k5")
        assert v.value() is ColorV2.BLUE
