"""Namespaces of keyed state and Flink's ``VoidNamespaceSerializer``.

Every keyed state entry lives under (key, namespace). State that is not windowed uses the single
``VoidNamespace``, written as one zero byte. Its snapshot is a ``SimpleTypeSerializerSnapshot``
under Flink's class name, so savepoint metadata carries the same snapshot bytes Flink writes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import MalformedDataError, SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..typeutils import SimpleTypeSerializerSnapshot, TypeSerializer, register_snapshot


class _VoidNamespaceType:
    """The one namespace of non-windowed state (Flink's ``VoidNamespace.INSTANCE``)."""

    _instance: ClassVar[_VoidNamespaceType | None] = None

    def __new__(cls) -> _VoidNamespaceType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "VoidNamespace"

    def __reduce__(self) -> str:
        return "VoidNamespace"


VoidNamespace = _VoidNamespaceType()


class VoidNamespaceSerializer(TypeSerializer[Any]):
    """Writes ``VoidNamespace`` as a single ``0x00`` byte and reads it back.

    Flink 2.3's ``getLength()`` answers 0 although one byte is written; only the sign matters to
    Flink (it decides whether composite keys need length suffixes), so this class answers the
    truthful 1, which has the same sign.
    """

    SQL_TYPE = "VOID (not windowed)"
    VALUELESS = True

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if value is not VoidNamespace and value is not None:
            raise SerializationError(f"VoidNamespaceSerializer writes only VoidNamespace, got {value!r}")
        out.write_byte(0)

    def deserialize(self, src: DataInputDeserializer) -> Any:
        pos = src.position
        b = src.read_byte()
        if b != 0:
            raise MalformedDataError(f"VoidNamespace byte at offset {pos} is 0x{b & 0xFF:02X}, expected 0x00")
        return VoidNamespace

    def get_length(self) -> int:
        return 1

    def is_immutable_type(self) -> bool:
        return True

    def snapshot_configuration(self) -> VoidNamespaceSerializerSnapshot:
        return VoidNamespaceSerializerSnapshot()


@register_snapshot()
class VoidNamespaceSerializerSnapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
    SERIALIZER = VoidNamespaceSerializer


__all__ = ["VoidNamespace", "VoidNamespaceSerializer", "VoidNamespaceSerializerSnapshot"]
