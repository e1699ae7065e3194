"""Namespaces of keyed state and Flink's ``VoidNamespaceSerializer``.

Every keyed state entry lives under (key, namespace). State that is not windowed uses the single
``VoidNamespace``, written as one zero byte. Its snapshot is a ``SimpleTypeSerializerSnapshot``
under Flink's class name, so savepoint metadata carries the same snapshot bytes Flink writes.
"""

from __future__ import annotations

from typing import Any

from ..errors import MalformedDataError
from ..io import DataInputDeserializer
from ..typeutils import NamedSingleton, SingletonSerializer, TypeSerializerSnapshot, nested_simple_snapshot


class _VoidNamespaceType(NamedSingleton):
    """The one namespace of non-windowed state (Flink's ``VoidNamespace.INSTANCE``)."""

    NAME = "VoidNamespace"


VoidNamespace = _VoidNamespaceType()


class VoidNamespaceSerializer(SingletonSerializer):
    """Writes ``VoidNamespace`` as a single ``0x00`` byte and reads it back.

    Flink 2.3's ``getLength()`` answers 0 although one byte is written; only the sign matters to
    Flink (it decides whether composite keys need length suffixes), so this class answers the
    truthful 1, which has the same sign.
    """

    SQL_TYPE = "VOID (not windowed)"
    VALUELESS = True
    VALUE = VoidNamespace

    def deserialize(self, src: DataInputDeserializer) -> Any:
        pos = src.position
        b = src.read_byte()
        if b != 0:
            raise MalformedDataError(f"VoidNamespace byte at offset {pos} is 0x{b & 0xFF:02X}, expected 0x00")
        return VoidNamespace

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return VoidNamespaceSerializerSnapshot()


VoidNamespaceSerializerSnapshot = nested_simple_snapshot(VoidNamespaceSerializer, "org.apache.flink.runtime.state.")


__all__ = ["VoidNamespace", "VoidNamespaceSerializer", "VoidNamespaceSerializerSnapshot"]
