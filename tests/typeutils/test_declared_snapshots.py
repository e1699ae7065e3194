"""The one-line snapshot classes (``simple_snapshot``), the singletons and the composites that name
their nested serializers in ``NESTED``: built once in typeutils, they keep Flink's names, pickle
by name and take serializers apart and back together as the hand-written classes did."""

from __future__ import annotations

import importlib
import pickle

import pytest

from statemorph import serializers as S
from statemorph.errors import SerializationError
from statemorph.keyed.namespace import VoidNamespace, VoidNamespaceSerializer
from statemorph.serializers.windows import GlobalWindow, GlobalWindowSerializer, TimeWindowSerializer
from statemorph.typeutils import (
    DEFAULT_REGISTRY,
    CompositeTypeSerializerSnapshot,
    SimpleTypeSerializerSnapshot,
    read_serializer_snapshot,
    write_serializer_snapshot,
)


def _simple_snapshot_classes() -> list[type[SimpleTypeSerializerSnapshot]]:
    return sorted({c for c in DEFAULT_REGISTRY._classes.values() if issubclass(c, SimpleTypeSerializerSnapshot)},
                  key=lambda c: c.IDENTIFIER)


def test_each_simple_snapshot_class_is_bound_to_its_name_in_its_module() -> None:
    classes = _simple_snapshot_classes()
    assert len(classes) >= 23
    for cls in classes:
        assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls, cls
        snap = cls()
        assert type(pickle.loads(pickle.dumps(snap))) is cls
        if cls.restore_serializer is SimpleTypeSerializerSnapshot.restore_serializer:  # not a table field's
            assert type(snap.restore_serializer()) is cls.SERIALIZER


def test_flink_names_of_the_one_line_snapshots() -> None:
    base = "org.apache.flink.api.common.typeutils.base."
    assert S.IntSerializer().snapshot_configuration().IDENTIFIER == base + "IntSerializer$IntSerializerSnapshot"
    assert (S.StringArraySerializer().snapshot_configuration().IDENTIFIER
            == base + "array.StringArraySerializer$StringArraySerializerSnapshot")
    assert (VoidNamespaceSerializer().snapshot_configuration().IDENTIFIER
            == "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot")


@pytest.mark.parametrize("value, serializer", [(VoidNamespace, VoidNamespaceSerializer()),
                                               (GlobalWindow, GlobalWindowSerializer())])
def test_a_singleton_is_one_instance_written_as_one_zero_byte(value: object, serializer: S.TypeSerializer) -> None:
    assert type(value)() is value and pickle.loads(pickle.dumps(value)) is value
    assert serializer.to_bytes(value) == b"\x00" == serializer.to_bytes(None)
    assert serializer.get_length() == 1 and serializer.is_immutable_type()
    with pytest.raises(SerializationError, match=f"{type(serializer).__name__} writes only {value!r}, got 3"):
        serializer.to_bytes(3)


def test_lengths_and_immutability_are_declared() -> None:
    assert [s.get_length() for s in (S.BooleanSerializer(), S.ShortSerializer(), S.IntSerializer(),
                                     S.LongSerializer(), S.CharSerializer(), TimeWindowSerializer())] == [
        1, 2, 4, 8, 2, 16]
    assert S.StringSerializer().get_length() == -1 and S.StringSerializer().is_immutable_type()
    value = ["a"]
    assert S.ListSerializer(S.StringSerializer()).copy(value) == value
    assert S.ListSerializer(S.StringSerializer()).copy(value) is not value  # lists are copied through the bytes


@pytest.mark.parametrize("serializer, names", [
    (S.ListSerializer(S.IntSerializer()), ["element"]),
    (S.MapSerializer(S.StringSerializer(), S.LongSerializer()), ["key", "value"]),
    (S.NullableSerializer(S.IntSerializer(), True), ["value"]),
    (S.TupleSerializer([S.IntSerializer(), S.StringSerializer()]), ["f0", "f1"]),
])
def test_nested_serializers_come_apart_and_back(serializer: S.TypeSerializer, names: list[str]) -> None:
    snap = serializer.snapshot_configuration()
    assert isinstance(snap, CompositeTypeSerializerSnapshot)
    assert snap.nested_names() == names
    assert len(snap.get_nested_serializers(serializer)) == len(names)
    assert snap.restore_serializer() == serializer
    again = read_serializer_snapshot(write_serializer_snapshot(snap))
    assert again.restore_serializer() == serializer
