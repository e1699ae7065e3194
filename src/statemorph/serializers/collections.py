"""Flink's collection serializers: ``ListSerializer``, ``MapSerializer`` and the null-adding
wrapper ``NullableSerializer`` (docs/formats.md §2.5, §2.7, §4.4).

* List: ``i32 size ‖ element*``; no per-element null flag (a None element goes to the element
  serializer, which accepts it only if it handles null itself, e.g. String).
* Map: ``i32 size ‖ (key ‖ bool isNull ‖ [value])*``; null *values* are stored with the flag,
  keys have none. Entries are written in dict order, and a read dict keeps byte order, so a
  map that is read and written again keeps Java's (HashMap) order.
* Nullable: ``01 ‖ padding`` for None, ``00 ‖ inner`` otherwise; with padding a fixed-length
  inner type stays fixed-length.

Counts read from data are checked against the remaining bytes with the smallest possible
element size before any loop runs, so a hostile ``2**31-1`` fails at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MalformedDataError, SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import LogicalType
from ..typeutils import (
    CompositeTypeSerializerSnapshot,
    SchemaCompatibility,
    TypeSerializer,
    TypeSerializerSnapshot,
    register_snapshot,
)

_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
# a null-padding length in a snapshot is the fixed length of some serializer; anything above
# this is corrupt data, and refusing it keeps a hostile snapshot from allocating gigabytes
_MAX_PADDING = 1 << 16


def min_size(serializer: TypeSerializer[Any]) -> int:
    """A lower bound on the bytes one value takes, for validating counts read from data.
    Variable-length formats (and zero-width ones) are taken as one byte."""
    n = serializer.get_length()
    return n if n > 0 else 1


def _hashable(key: Any) -> Any:
    """Dict keys must be hashable; list-valued keys (arrays, lists) become tuples, which every
    sequence serializer accepts back."""
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def _sequence(owner: TypeSerializer[Any], value: Any) -> Sequence[Any]:
    if value is None:
        raise SerializationError(f"{type(owner).__name__} cannot write None (wrap it in NullableSerializer)")
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not hasattr(value, "__len__"):
        raise SerializationError(
            f"{type(owner).__name__} cannot write {type(value).__name__} {value!r:.60}: expected a list"
        )
    return value  # type: ignore[no-any-return]


class ListSerializer(TypeSerializer[list[Any]]):
    """``java.util.List<T>`` as a Python list (any sequence is accepted on write)."""

    DATASTREAM_OF = ("ARRAY",)

    def __init__(self, element_serializer: TypeSerializer[Any]) -> None:
        self.element_serializer = element_serializer

    def serialize(self, value: list[Any], out: DataOutputSerializer) -> None:
        items = _sequence(self, value)
        out.write_int(len(items))
        element = self.element_serializer
        for i, item in enumerate(items):
            try:
                element.serialize(item, out)
            except SerializationError as e:
                raise SerializationError(f"ListSerializer element [{i}]: {e}") from None

    def deserialize(self, src: DataInputDeserializer) -> list[Any]:
        n = src.check_length(src.read_int(), "list size", unit=min_size(self.element_serializer))
        read = self.element_serializer.deserialize
        return [read(src) for _ in range(n)]

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ListSerializerSnapshot(self)

    @classmethod
    def for_sql_type(cls, t: LogicalType, nested: Callable[[LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        (element,) = t.children()
        prior = like.element_serializer if isinstance(like, ListSerializer) else None
        return cls(nested(element, f"{where} element", prior))

    def describe_type(self) -> str:
        return f"ARRAY<{self.element_serializer.describe_type()}>"

    def _config(self) -> tuple[Any, ...]:
        return (self.element_serializer,)


class MapSerializer(TypeSerializer[dict[Any, Any]]):
    """``java.util.Map<K, V>`` as a dict; None values are stored with Flink's null flag."""

    DATASTREAM_OF = ("MAP",)

    def __init__(self, key_serializer: TypeSerializer[Any], value_serializer: TypeSerializer[Any]) -> None:
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer

    def serialize(self, value: dict[Any, Any], out: DataOutputSerializer) -> None:
        if not isinstance(value, Mapping):
            raise SerializationError(
                f"MapSerializer cannot write {type(value).__name__} {value!r:.60}: expected a dict"
            )
        out.write_int(len(value))
        ks, vs = self.key_serializer, self.value_serializer
        k: Any = None
        where = "key"
        try:
            for k, v in value.items():
                where = "key"
                ks.serialize(k, out)
                if v is None:
                    out.write_boolean(True)
                else:
                    where = "value"
                    out.write_boolean(False)
                    vs.serialize(v, out)
        except SerializationError as e:
            raise SerializationError(f"MapSerializer {where} of entry {k!r:.40}: {e}") from None

    def deserialize(self, src: DataInputDeserializer) -> dict[Any, Any]:
        n = src.check_length(src.read_int(), "map size", unit=min_size(self.key_serializer) + 1)
        read_key, read_value = self.key_serializer.deserialize, self.value_serializer.deserialize
        result: dict[Any, Any] = {}
        for _ in range(n):
            key = _hashable(read_key(src))
            result[key] = None if src.read_boolean() else read_value(src)
        return result

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return MapSerializerSnapshot(self)

    @classmethod
    def for_sql_type(cls, t: LogicalType, nested: Callable[[LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        key, value = t.children()
        keys, values = (like.key_serializer, like.value_serializer) if isinstance(like, MapSerializer) else (None, None)
        return cls(nested(key, f"{where} key", keys), nested(value, f"{where} value", values))

    def describe_type(self) -> str:
        return f"MAP<{self.key_serializer.describe_type()}, {self.value_serializer.describe_type()}>"

    def _config(self) -> tuple[Any, ...]:
        return (self.key_serializer, self.value_serializer)


class NullableSerializer(TypeSerializer[Any]):
    """Adds null support to a serializer that has none: a ``bool`` flag, then the value.

    With ``pad_null_if_fixed_length`` and a fixed-length inner serializer, a null is followed by
    that many zero bytes, so every value has the same size. Unlike Flink's ``equals`` (which
    compares only the inner serializer) equality here includes the padding, since the padding
    changes the bytes."""

    def __init__(self, inner: TypeSerializer[Any], pad_null_if_fixed_length: bool = False) -> None:
        length = inner.get_length()
        self.inner = inner
        self.padding_length = length if pad_null_if_fixed_length and length > 0 else 0

    @classmethod
    def with_padding(cls, inner: TypeSerializer[Any], padding_length: int) -> NullableSerializer:
        """The serializer a snapshot describes: the stored padding length is used as is."""
        if padding_length < 0:
            raise ValueError(f"null padding length must be >= 0, got {padding_length}")
        ser = cls(inner)
        ser.padding_length = padding_length
        return ser

    @staticmethod
    def wrap(inner: TypeSerializer[Any], pad_null_if_fixed_length: bool = False) -> TypeSerializer[Any]:
        """``NullableSerializer.wrap``: wraps unless ``inner`` already is a NullableSerializer."""
        if isinstance(inner, NullableSerializer):
            return inner
        return NullableSerializer(inner, pad_null_if_fixed_length)

    @staticmethod
    def accepts_null(serializer: TypeSerializer[Any]) -> bool:
        """``checkIfNullSupported``: does ``serializer`` write None and read it back as None?"""
        try:
            data = serializer.to_bytes(None)
        except (SerializationError, TypeError, ValueError, AttributeError):
            return False
        try:
            return serializer.from_bytes(data) is None
        except ValueError:
            return False

    @staticmethod
    def wrap_if_null_is_not_supported(
        inner: TypeSerializer[Any], pad_null_if_fixed_length: bool = False
    ) -> TypeSerializer[Any]:
        """``NullableSerializer.wrapIfNullIsNotSupported``: String and others that handle None
        themselves stay unwrapped."""
        if NullableSerializer.accepts_null(inner):
            return inner
        return NullableSerializer.wrap(inner, pad_null_if_fixed_length)

    @property
    def pad_null_if_fixed_length(self) -> bool:
        return self.padding_length > 0

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if value is None:
            out.write_boolean(True)
            if self.padding_length:
                out.write(bytes(self.padding_length))
        else:
            out.write_boolean(False)
            self.inner.serialize(value, out)

    def deserialize(self, src: DataInputDeserializer) -> Any:
        if src.read_boolean():
            if self.padding_length:
                src.skip_bytes(self.padding_length)
            return None
        return self.inner.deserialize(src)

    def get_length(self) -> int:
        return 1 + self.padding_length if self.padding_length else -1

    def is_immutable_type(self) -> bool:
        return self.inner.is_immutable_type()

    def describe_type(self) -> str:
        return self.inner.describe_type()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return NullableSerializerSnapshot(self)

    def _config(self) -> tuple[Any, ...]:
        return (self.inner, self.padding_length)

    def __repr__(self) -> str:
        return f"NullableSerializer({self.inner!r}, padding={self.padding_length})"


# -- snapshots ------------------------------------------------------------------------------------


def _skip_none(migrate: Callable[[int, Any], Any], i: int, value: Any) -> Any:
    """None never changes shape; nested migrations only ever see real values."""
    return None if value is None else migrate(i, value)


@register_snapshot()
class ListSerializerSnapshot(CompositeTypeSerializerSnapshot):
    IDENTIFIER = _BASE + "ListSerializerSnapshot"
    SERIALIZER_CLASS = ListSerializer
    NESTED = {"element": "element_serializer"}

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        return [_skip_none(migrate, 0, v) for v in value]


@register_snapshot()
class MapSerializerSnapshot(CompositeTypeSerializerSnapshot):
    IDENTIFIER = _BASE + "MapSerializerSnapshot"
    SERIALIZER_CLASS = MapSerializer
    NESTED = {"key": "key_serializer", "value": "value_serializer"}

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        return {_hashable(_skip_none(migrate, 0, k)): _skip_none(migrate, 1, v) for k, v in value.items()}


@register_snapshot()
class NullableSerializerSnapshot(CompositeTypeSerializerSnapshot):
    """Outer content: ``i32`` null-padding length. A padding change is INCOMPATIBLE, because
    the padded and unpadded forms of a null differ in length and Flink cannot tell them apart."""

    IDENTIFIER = _RUNTIME + "NullableSerializer$NullableSerializerSnapshot"
    SERIALIZER_CLASS = NullableSerializer
    OUTER_VERSION = 2
    MIN_OUTER_VERSION = 1
    NESTED = {"value": "inner"}
    padding_length: int = 0

    def set_outer_from_serializer(self, serializer: TypeSerializer[Any]) -> None:
        assert isinstance(serializer, NullableSerializer)
        self.padding_length = serializer.padding_length

    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]:
        return NullableSerializer.with_padding(nested[0], self.padding_length)

    def write_outer_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_int(self.padding_length)

    def read_outer_snapshot(self, outer_version: int, src: DataInputDeserializer) -> None:
        at = src.position
        padding = src.read_int()
        if not 0 <= padding <= _MAX_PADDING:
            raise MalformedDataError(
                f"corrupt NullableSerializerSnapshot: null padding length {padding} at offset {at} "
                f"(expected 0..{_MAX_PADDING})"
            )
        self.padding_length = padding

    def resolve_outer_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        assert isinstance(new_serializer, NullableSerializer)
        if new_serializer.padding_length != self.padding_length:
            return SchemaCompatibility.incompatible(
                f"null padding changed from {self.padding_length} to {new_serializer.padding_length} bytes "
                f"(pad_null_if_fixed_length differs); padded and unpadded nulls are not interchangeable"
            )
        return SchemaCompatibility.compatible_as_is()

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        return _skip_none(migrate, 0, value)


__all__ = [
    "ListSerializer",
    "ListSerializerSnapshot",
    "MapSerializer",
    "MapSerializerSnapshot",
    "NullableSerializer",
    "NullableSerializerSnapshot",
    "min_size",
]
