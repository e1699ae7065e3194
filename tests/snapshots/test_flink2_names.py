"""Flink 2.x names and the Flink 2.x direction of compatibility resolution.

Flink 2.0 removed ``RocksDBStateBackend`` (``EmbeddedRocksDBStateBackend`` is the name) and calls
its heap backend ``HashMapStateBackend``; the old statemorph names stay one release as deprecated
aliases of the same classes. Flink 2.x resolves compatibility from the new snapshot
(``new_snapshot.resolve_schema_compatibility(old_snapshot)``); the older direction
(``old_snapshot.resolve_schema_compatibility(new_serializer)``) gives the same answer.
"""

from __future__ import annotations

import enum
import warnings

import pytest

from statemorph import serializers as S
from statemorph import typeutils
from statemorph.typeutils import CompatibilityType


@pytest.mark.parametrize(("old", "new"), [("HeapStateBackend", "HashMapStateBackend"),
                                          ("RocksDBStateBackend", "EmbeddedRocksDBStateBackend")])
def test_old_backend_names_are_deprecated_aliases(old, new):
    import statemorph.state as state

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        current = getattr(state, new)  # the Flink 2.x name: no warning
    with pytest.warns(DeprecationWarning, match=rf"statemorph\.state\.{old} is deprecated.*use {new}"):
        alias = getattr(state, old)
    assert alias is current
    assert new in state.__all__ and old not in state.__all__


def test_deprecated_import_warns_at_the_import_site():
    with pytest.warns(DeprecationWarning) as record:
        from statemorph.state import HeapStateBackend  # noqa: F401
    assert record[0].filename == __file__


def test_old_name_still_restores(tmp_path):
    from statemorph.state import HashMapStateBackend, ValueStateDescriptor

    b = HashMapStateBackend(key_serializer=S.StringSerializer(), max_parallelism=128)
    b.get_state(ValueStateDescriptor("n", S.IntSerializer()))
    b.set_current_key("k")
    b.get_state(ValueStateDescriptor("n", S.IntSerializer())).update(3)
    b.savepoint(tmp_path / "sp")
    with pytest.warns(DeprecationWarning):
        from statemorph.state import HeapStateBackend
    r = HeapStateBackend.restore(tmp_path / "sp")
    r.set_current_key("k")
    assert r.get_state(ValueStateDescriptor("n", S.IntSerializer())).value() == 3


class Color(enum.Enum):
    RED = 0
    GREEN = 1


class ColorMore(enum.Enum):
    RED = 0
    GREEN = 1
    BLUE = 2


class ColorLess(enum.Enum):
    RED = 0


EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
PAIRS = [  # (old serializer, new serializer, expected result in both directions)
    (S.IntSerializer(), S.IntSerializer(), CompatibilityType.COMPATIBLE_AS_IS),
    (S.IntSerializer(), S.LongSerializer(), CompatibilityType.INCOMPATIBLE),
    (S.RowDataSerializer(EVENTS), S.RowDataSerializer(EVENTS.replace("STRING>>", "STRING, os STRING>>")),
     CompatibilityType.COMPATIBLE_AFTER_MIGRATION),
    (S.RowDataSerializer(EVENTS), S.RowDataSerializer(EVENTS.replace("userId INT", "userId STRING")),
     CompatibilityType.INCOMPATIBLE),
    (S.ListSerializer(S.StringSerializer()), S.ListSerializer(S.StringSerializer()),
     CompatibilityType.COMPATIBLE_AS_IS),
    (S.EnumSerializer(Color, java_class_name="p.Color"), S.EnumSerializer(ColorMore, java_class_name="p.Color"),
     CompatibilityType.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER),
    (S.EnumSerializer(Color, java_class_name="p.Color"), S.EnumSerializer(ColorLess, java_class_name="p.Color"),
     CompatibilityType.INCOMPATIBLE),
]


@pytest.mark.parametrize(("old", "new", "expected"), PAIRS)
def test_both_directions_give_the_same_answer(old, new, expected):
    # the old snapshot as a restore reads it from a savepoint
    old_snapshot = typeutils.read_versioned_snapshot(typeutils.write_versioned_snapshot(old.snapshot_configuration()))
    new_snapshot = new.snapshot_configuration()
    flink2 = new_snapshot.resolve_schema_compatibility(old_snapshot)
    flink1 = old_snapshot.resolve_schema_compatibility(new)
    assert flink2.type is expected and flink1.type is expected
    assert flink2.reason == flink1.reason
    if expected is CompatibilityType.INCOMPATIBLE:
        assert flink2.reason


def test_flink2_direction_reconfigured_serializer_reads_old_and_writes_new():
    old_snapshot = S.EnumSerializer(Color, java_class_name="p.Color").snapshot_configuration()
    new = S.EnumSerializer(ColorMore, java_class_name="p.Color")
    c = new.snapshot_configuration().resolve_schema_compatibility(old_snapshot)
    assert c.is_compatible_with_reconfigured_serializer()
    reconfigured = c.reconfigured_serializer
    assert reconfigured.from_bytes(S.EnumSerializer(Color, java_class_name="p.Color").to_bytes(Color.GREEN)).name \
        == "GREEN"
