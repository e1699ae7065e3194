"""Property tests for schema evolution: for random POJO field sets (fields added, removed, kept)
and Row kind-flag changes, the compatibility answer follows the §5 rules and ``migrate_state``
writes exactly what reading with the old serializer and writing with the new one gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.row import Row, RowKind
from statemorph.serializers import IntSerializer, LongSerializer, PojoSerializer, RowSerializer, StringSerializer
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

TYPES = {
    "int": (IntSerializer(), st.integers(-(2**31), 2**31 - 1)),
    "long": (LongSerializer(), st.integers(-(2**63), 2**63 - 1)),
    "str": (StringSerializer(), st.text(max_size=5)),
}
NAMES = ["a", "b", "c", "d", "e", "f"]


def migrate(old_ser, new_ser, data: bytes) -> tuple[Any, bytes]:
    snap = read_versioned_snapshot(write_versioned_snapshot(old_ser.snapshot_configuration()))
    compat = snap.resolve_schema_compatibility(new_ser)
    out = DataOutputSerializer()
    snap.migrate_state(snap.restore_serializer(), new_ser, DataInputDeserializer(data), out)
    return compat, out.get_copy_of_buffer()


@st.composite
def pojo_evolution(draw: st.DrawFn):
    types = {n: draw(st.sampled_from(sorted(TYPES))) for n in NAMES}
    old_names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    new_names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    old = PojoSerializer(None, {n: TYPES[types[n]][0] for n in old_names}, "p.Evolving")
    new = PojoSerializer(None, {n: TYPES[types[n]][0] for n in new_names}, "p.Evolving")
    value = draw(st.none() | st.fixed_dictionaries({n: TYPES[types[n]][1] | st.none() for n in old_names}))
    return old, new, value


@settings(max_examples=60)
@given(pojo_evolution())
def test_pojo_field_add_remove_migration(case):
    old, new, value = case
    compat, migrated = migrate(old, new, old.to_bytes(value))
    if set(old.field_names) == set(new.field_names):
        assert compat.is_compatible_as_is()
    else:
        assert compat.is_compatible_after_migration()
        for n in set(old.field_names) ^ set(new.field_names):
            assert n in compat.reason
    if value is None:
        expected = new.to_bytes(None)
    else:
        expected = new.to_bytes({n: value.get(n) for n in new.field_names})
    assert migrated == expected


@settings(max_examples=60)
@given(
    st.lists(st.sampled_from(sorted(TYPES)), min_size=0, max_size=10).flatmap(
        lambda ts: st.tuples(
            st.just(ts),
            st.tuples(*(TYPES[t][1] | st.none() for t in ts)),
            st.sampled_from(list(RowKind)),
            st.booleans(),
        )
    )
)
def test_row_kind_flag_change_migration(case):
    types, fields, kind, old_flag = case
    sers = [TYPES[t][0] for t in types]
    old = RowSerializer(sers, old_flag)
    new = RowSerializer(sers, not old_flag)
    data = old.to_bytes(Row(fields, kind))
    compat, migrated = migrate(old, new, data)
    assert compat.is_compatible_after_migration()
    assert migrated == new.to_bytes(old.from_bytes(data))
    back = new.from_bytes(migrated)
    assert back == fields
    # one side of the change has no kind bits: the old one reads INSERT, or the new one drops it
    assert back.kind is RowKind.INSERT
