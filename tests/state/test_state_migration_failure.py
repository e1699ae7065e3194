"""A migration that fails part way leaves the state entirely in its old schema (both backends):
the error names the state and the first bad entry, the old serializer still reads everything, and
the next savepoint is the old one again. A migration that succeeds writes the new schema."""

import pytest
import rocksdict

from statemorph.errors import StateMigrationError
from statemorph.savepoint import read_metadata, read_state_table
from statemorph.serializers import IntSerializer, LongSerializer, StringSerializer
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statemorph.typeutils import (
    DEFAULT_REGISTRY,
    SchemaCompatibility,
    SimpleTypeSerializerSnapshot,
    read_versioned_snapshot,
)

BAD = 13


class WideningIntSerializer(IntSerializer):
    """An int serializer whose snapshot lets a LongSerializer take over after migration, except
    that the value 13 cannot be migrated: a controlled failure in the middle of a state."""

    def snapshot_configuration(self):
        return WideningIntSnapshot()


class WideningIntSnapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "test.statemorph.state.WideningIntSerializerSnapshot"
    SERIALIZER = WideningIntSerializer

    def resolve_new_serializer(self, new_serializer):
        if type(new_serializer) is LongSerializer:
            return SchemaCompatibility.compatible_after_migration("int widened to long")
        return super().resolve_new_serializer(new_serializer)

    def migrate_value(self, value, new_serializer):
        if value == BAD:
            raise ValueError(f"{BAD} cannot be migrated")
        return value


# a child registry keeps this test-only snapshot class out of the global one
REGISTRY = DEFAULT_REGISTRY.child()
REGISTRY.register(WideningIntSnapshot)


def descriptors(ser):
    return [ValueStateDescriptor("v", ser), ListStateDescriptor("l", ser),
            MapStateDescriptor("m", IntSerializer(), ser)]


def write(tmp_path, values):
    b = HashMapStateBackend(StringSerializer(), 128)
    v, lst, m = (b.get_state(d) for d in descriptors(WideningIntSerializer()))
    for i in values:
        b.set_current_key(f"user-{i}")
        v.update(i)
        lst.add_all([100 + i, i])
        m.put(1, i)
        m.put(2, None)
    sp = tmp_path / "sp"
    b.savepoint(sp)
    b.close()
    return sp


@pytest.mark.parametrize("cls", [HashMapStateBackend, EmbeddedRocksDBStateBackend])
def test_failed_migration_leaves_old_schema(tmp_path, cls):
    sp = write(tmp_path, range(30))
    opts = {"db_path": tmp_path / "db"} if cls is EmbeddedRocksDBStateBackend else {}
    with cls.restore(sp, registry=REGISTRY, **opts) as r:
        for desc in descriptors(LongSerializer()):
            with pytest.raises(StateMigrationError) as e:
                r.get_state(desc)
            msg = str(e.value)
            assert f"state {desc.name!r}" in msg and "'user-13'" in msg and "cannot be migrated" in msg
            assert "left unchanged" in msg
        if cls is EmbeddedRocksDBStateBackend:  # the staging column families are gone
            assert sorted(rocksdict.Rdict.list_cf(str(tmp_path / "db"))) == ["default", "state-1", "state-2",
                                                                               "state-3"]
        v, lst, m = (r.get_state(d) for d in descriptors(WideningIntSerializer()))
        for i in range(30):
            r.set_current_key(f"user-{i}")
            assert (v.value(), lst.get(), dict(m.items())) == (i, [100 + i, i], {1: i, 2: None})
        r.savepoint(tmp_path / "again")
    for name in ("v", "l", "m"):
        assert read_state_table(sp, name).equals(read_state_table(tmp_path / "again", name))
        assert read_metadata(tmp_path / "again").state(name).value_serializer == \
            read_metadata(sp).state(name).value_serializer


@pytest.mark.parametrize("cls", [HashMapStateBackend, EmbeddedRocksDBStateBackend])
def test_successful_migration_writes_new_schema(tmp_path, cls):
    sp = write(tmp_path, [i for i in range(30) if i != BAD])
    opts = {"migration_batch_rows": 7} if cls is EmbeddedRocksDBStateBackend else {}
    with cls.restore(sp, registry=REGISTRY, **opts) as r:
        v, lst, m = (r.get_state(d) for d in descriptors(LongSerializer()))
        r.set_current_key("user-20")
        assert (v.value(), lst.get(), dict(m.items())) == (20, [120, 20], {1: 20, 2: None})
        v.update(2**40)  # only a long can hold this
        r.savepoint(tmp_path / "new")
    meta = read_metadata(tmp_path / "new")
    for name in ("v", "l", "m"):
        assert read_versioned_snapshot(meta.state(name).value_serializer).restore_serializer() == LongSerializer()
    values = read_state_table(tmp_path / "new", "v").column("value").to_pylist()
    assert len(values) == 29 and all(len(x) == 8 for x in values)
    with HashMapStateBackend.restore(tmp_path / "new") as h:
        v = h.get_state(ValueStateDescriptor("v", LongSerializer()))
        h.set_current_key("user-20")
        assert v.value() == 2**40


def test_snapshot_classes_resolve_only_through_the_given_registry(tmp_path):
    from statemorph.errors import UnsupportedStateError

    sp = write(tmp_path, range(3))
    for cls in (HashMapStateBackend, EmbeddedRocksDBStateBackend):  # a class not in the registry: unsupported (7)
        with pytest.raises(UnsupportedStateError, match="state 'v'.*WideningIntSerializerSnapshot"):
            cls.restore(sp)
