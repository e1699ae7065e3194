"""Flink's ``EnumSerializer`` (docs/formats.md §2.6, §5).

Data is an ``i32`` index into the serializer's constant list. That list is the declaration
order for a fresh serializer, but a *reconfigured* one keeps the old snapshot's order and appends
new constants, so old indices keep their meaning without rewriting any state.

A serializer built from a Python ``enum.Enum`` reads members; one restored from a snapshot has no
Python class (classes are never looked up by a name read from data), so it reads and writes
constant names. ``serialize`` always accepts a member or its name.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from ..errors import MalformedDataError, SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import STRING
from ..typeutils import SchemaCompatibility, TypeSerializer, TypeSerializerSnapshot, register_snapshot


class EnumSerializer(TypeSerializer[Any]):
    """A Java enum as an ``i32`` index.

    ``EnumSerializer(Color, "p.Color")`` for a Python enum (the Java class name is what Flink
    stores; it defaults to the Python module-qualified name), or
    ``EnumSerializer(["RED", "GREEN"], "p.Color")`` for constants known only by name.
    Equality is the Java class name plus the constant order, i.e. what decides the bytes."""

    VALUE_TYPE = STRING()  # a constant's name
    IMMUTABLE_VALUES = True
    LENGTH = 4

    def __init__(
        self,
        enum_class_or_constant_names: type[enum.Enum] | Sequence[str],
        java_class_name: str | None = None,
    ) -> None:
        src = enum_class_or_constant_names
        if isinstance(src, type) and issubclass(src, enum.Enum):
            self.enum_class: type[enum.Enum] | None = src
            names = [m.name for m in src]
            if java_class_name is None:
                java_class_name = f"{src.__module__}.{src.__qualname__}"
        elif isinstance(src, (str, bytes)) or not isinstance(src, Sequence):
            raise TypeError(f"EnumSerializer needs an enum.Enum class or a sequence of constant names, got {src!r}")
        else:
            self.enum_class = None
            names = list(src)
            if java_class_name is None:
                raise ValueError("EnumSerializer over constant names needs java_class_name (what Flink stores)")
        self.java_class_name: str = java_class_name
        self._set_names(names)

    def _set_names(self, names: Sequence[str]) -> None:
        names = tuple(names)
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"enum constant names must be str, got {n!r}")
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"duplicate enum constants {dupes} for {self.java_class_name}")
        self.constant_names: tuple[str, ...] = names
        self._index = {n: i for i, n in enumerate(names)}
        cls = self.enum_class
        if cls is not None:
            missing = [n for n in names if n not in cls.__members__]
            if missing:
                raise ValueError(f"{cls.__name__} has no constants {missing}")
            self._values: list[Any] = [cls[n] for n in names]
        else:
            self._values = list(names)

    @classmethod
    def with_order(
        cls, enum_class: type[enum.Enum] | None, names: Sequence[str], java_class_name: str
    ) -> EnumSerializer:
        """A serializer whose indices follow ``names`` (a reconfigured or restored serializer)."""
        ser = cls.__new__(cls)
        ser.enum_class = enum_class
        ser.java_class_name = java_class_name
        ser._set_names(names)
        return ser

    def value_of(self, name: str) -> Any:
        """The value this serializer reads for constant ``name`` (member or name)."""
        return self._values[self._index[name]]

    def _index_of(self, value: Any) -> int:
        if isinstance(value, enum.Enum):
            if self.enum_class is not None and not isinstance(value, self.enum_class):
                raise SerializationError(
                    f"EnumSerializer({self.java_class_name}) cannot write {value!r}: "
                    f"not a member of {self.enum_class.__name__}"
                )
            name = value.name
        elif isinstance(value, str):
            name = value
        elif value is None:
            raise SerializationError(
                f"EnumSerializer({self.java_class_name}) cannot write None (wrap it in NullableSerializer)"
            )
        else:
            raise SerializationError(
                f"EnumSerializer({self.java_class_name}) cannot write {value!r}: expected an enum member or name"
            )
        idx = self._index.get(name)
        if idx is None:
            raise SerializationError(
                f"EnumSerializer({self.java_class_name}) cannot write {value!r}: no constant {name!r} "
                f"(constants: {list(self.constant_names)})"
            )
        return idx

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        out.write_int(self._index_of(value))

    def deserialize(self, src: DataInputDeserializer) -> Any:
        at = src.position
        idx = src.read_int()
        if not 0 <= idx < len(self._values):
            raise MalformedDataError(
                f"enum index {idx} at offset {at} is out of range for {self.java_class_name} "
                f"with {len(self._values)} constants"
            )
        return self._values[idx]

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return EnumSerializerSnapshot(self.java_class_name, self.constant_names, self.enum_class)

    def _config(self) -> tuple[Any, ...]:
        return (self.java_class_name, self.constant_names)


@register_snapshot()
class EnumSerializerSnapshot(TypeSerializerSnapshot):
    """``UTF(enum class) ‖ i32 count ‖ UTF(name)*`` in serializer order, version 3.

    Flink reads every version with the same layout, and so do we. Where Flink fails while
    *reading* a snapshot whose constant no longer exists in the class ("Probably because an enum
    value was removed"), we read it fine and report INCOMPATIBLE at resolve time with a reason
    naming the missing constants: there is no Java class to check against at read time here.
    """

    IDENTIFIER = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
    VERSION = 3
    MIN_READ_VERSION = 1

    def __init__(
        self, java_class_name: str, constant_names: Sequence[str], enum_class: type[enum.Enum] | None = None
    ) -> None:
        self.java_class_name = java_class_name
        self.constant_names = tuple(constant_names)
        # in-process only (never persisted): lets a snapshot taken from a live serializer
        # restore one that still yields members
        self.enum_class = enum_class

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_utf(self.java_class_name)
        out.write_int(len(self.constant_names))
        for name in self.constant_names:
            out.write_utf(name)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        class_name = src.read_utf()
        at = src.position
        n = src.check_length(src.read_int(), f"constants of enum {class_name}", unit=2)
        names = [src.read_utf() for _ in range(n)]
        if len(set(names)) != n:
            raise MalformedDataError(f"enum {class_name} snapshot lists a constant twice (count at offset {at})")
        return cls(class_name, names)

    def restore_serializer(self) -> TypeSerializer[Any]:
        return EnumSerializer.with_order(self.enum_class, self.constant_names, self.java_class_name)

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        if not isinstance(new_serializer, EnumSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from EnumSerializer({self.java_class_name}) to {type(new_serializer).__name__}"
            )
        if new_serializer.java_class_name != self.java_class_name:
            return SchemaCompatibility.incompatible(
                f"enum class changed from {self.java_class_name} to {new_serializer.java_class_name}"
            )
        old, new = self.constant_names, new_serializer.constant_names
        if old == new:
            return SchemaCompatibility.compatible_as_is()
        present = set(new)
        missing = [n for n in old if n not in present]
        if missing:
            return SchemaCompatibility.incompatible(
                f"enum {self.java_class_name}: constants {missing} were removed or renamed; "
                f"state written with them cannot be read"
            )
        known = set(old)
        order = list(old) + [n for n in new if n not in known]
        reconfigured = EnumSerializer.with_order(new_serializer.enum_class, order, self.java_class_name)
        appended = order[len(old):]
        reason = (f"constants {appended} appended after the old ones" if appended
                  else "constants reordered; the old order is kept")
        return SchemaCompatibility.compatible_with_reconfigured_serializer(reconfigured, reason)

    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        """A name read by a class-less restored serializer becomes the new serializer's member."""
        if isinstance(new_serializer, EnumSerializer):
            name = value.name if isinstance(value, enum.Enum) else value
            if isinstance(name, str) and name in new_serializer._index:
                return new_serializer.value_of(name)
        return value

    def __repr__(self) -> str:
        return f"EnumSerializerSnapshot({self.java_class_name}, {list(self.constant_names)})"


__all__ = ["EnumSerializer", "EnumSerializerSnapshot"]
