"""Flink's fixed-width primitive serializers (``org.apache.flink.api.common.typeutils.base``).

Each writes the ``java.io.DataOutput`` form of one Java primitive, big-endian. Python ints are
unbounded and Python floats are doubles, so every writer *range-checks* first: Java would never
see a 2**40 ``int``, and silently masking it would write a different value than the user holds.
None is rejected (Java throws an NPE); ``NullableSerializer`` is the way to store nulls.

The snapshots are Flink's ``XxxSerializer$XxxSerializerSnapshot`` classes (Simple, version 3,
empty content), so our snapshot bytes equal Flink's.
"""

from __future__ import annotations

import operator
import struct
from typing import Any, ClassVar

from ..errors import SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import BigIntType, BooleanType, CharType, DoubleType, FloatType, IntType, SmallIntType, TinyIntType
from ..typeutils import BulkKernel, TypeSerializer, TypeSerializerSnapshot, nested_simple_snapshot

_BASE = "org.apache.flink.api.common.typeutils.base."
_F32 = struct.Struct(">f")
_F32_MAX = 3.4028234663852886e38  # Float.MAX_VALUE; anything finite and larger overflows


def _reject(serializer: TypeSerializer[Any], value: Any, why: str) -> SerializationError:
    return SerializationError(f"{type(serializer).__name__} cannot write {value!r}: {why}")


class _IntegralSerializer(TypeSerializer[int]):
    """Shared range check for the signed two's-complement integer types."""

    JAVA: ClassVar[str]
    IMMUTABLE_VALUES = True

    def _check(self, value: Any) -> int:
        if value is None:
            raise _reject(self, value, f"a Java {self.JAVA} cannot be null (wrap it in NullableSerializer)")
        try:
            v = operator.index(value)
        except TypeError:
            raise _reject(self, value, f"expected an int for a Java {self.JAVA}, got {type(value).__name__}") from None
        limit = 1 << (8 * self.LENGTH - 1)
        if not -limit <= v < limit:
            raise _reject(self, value, f"out of range for a Java {self.JAVA} [{-limit}, {limit - 1}]")
        return v


def is_bool_like(value: Any) -> bool:
    """bool, numpy's bool scalar, or the ints 0/1: unambiguous truth values. Anything else
    (floats, strings, None) is more likely a bug than a boolean."""
    if value is True or value is False:
        return True
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return True
    return isinstance(value, int) and value in (0, 1)


class BooleanSerializer(TypeSerializer[bool]):
    """``writeBoolean``: ``01``/``00``; any non-zero byte reads as true, as in Flink."""

    KEY_HASH = "boolean"
    SQL_TYPE = "BOOLEAN"
    VALUE_TYPE = BooleanType()
    DATASTREAM_OF = ("BOOLEAN",)
    JAVA_ZERO = False
    BULK = BulkKernel("fixed", "LEAF_BOOL")
    LENGTH = 1
    IMMUTABLE_VALUES = True

    def serialize(self, value: bool, out: DataOutputSerializer) -> None:
        if value is True or value is False:
            out.write_boolean(value)
            return
        if value is None:
            raise _reject(self, value, "a Java boolean cannot be null (wrap it in NullableSerializer)")
        if is_bool_like(value):
            out.write_boolean(bool(value))
            return
        raise _reject(self, value, f"expected a bool, got {type(value).__name__}")

    def deserialize(self, src: DataInputDeserializer) -> bool:
        return src.read_boolean()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return BooleanSerializerSnapshot()


class ByteSerializer(_IntegralSerializer):
    LENGTH = 1
    KEY_HASH = "int"
    SQL_TYPE = "TINYINT"
    VALUE_TYPE = TinyIntType()
    DATASTREAM_OF = ("TINYINT",)
    JAVA_ZERO = 0
    BULK = BulkKernel("fixed", "LEAF_I8")
    JAVA = "byte"

    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_byte(self._check(value))

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_byte()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ByteSerializerSnapshot()


class ShortSerializer(_IntegralSerializer):
    LENGTH = 2
    KEY_HASH = "int"
    SQL_TYPE = "SMALLINT"
    VALUE_TYPE = SmallIntType()
    DATASTREAM_OF = ("SMALLINT",)
    JAVA_ZERO = 0
    BULK = BulkKernel("fixed", "LEAF_I16")
    JAVA = "short"

    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_short(self._check(value))

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_short()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ShortSerializerSnapshot()


class IntSerializer(_IntegralSerializer):
    LENGTH = 4
    KEY_HASH = "int"
    SQL_TYPE = "INT"
    VALUE_TYPE = IntType()
    DATASTREAM_OF = ("INTEGER",)
    JAVA_ZERO = 0
    BULK = BulkKernel("fixed", "LEAF_I32")
    JAVA = "int"

    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_int(self._check(value))

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_int()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return IntSerializerSnapshot()


class LongSerializer(_IntegralSerializer):
    LENGTH = 8
    KEY_HASH = "long"
    SQL_TYPE = "BIGINT"
    VALUE_TYPE = BigIntType()
    DATASTREAM_OF = ("BIGINT",)
    JAVA_ZERO = 0
    BULK = BulkKernel("fixed", "LEAF_I64")
    JAVA = "long"

    def serialize(self, value: int, out: DataOutputSerializer) -> None:
        out.write_long(self._check(value))

    def deserialize(self, src: DataInputDeserializer) -> int:
        return src.read_long()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return LongSerializerSnapshot()


def check_float(serializer: TypeSerializer[Any], value: Any, single: bool) -> float:
    """A Python number as the Java float/double it will become. Finite values beyond the float
    range are refused (Java's cast would turn them into infinity without telling anyone)."""
    if value is None:
        raise _reject(serializer, value, "a Java floating-point primitive cannot be null")
    if isinstance(value, (bool, str, bytes)):
        raise _reject(serializer, value, f"expected a float, got {type(value).__name__}")
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        raise _reject(serializer, value, f"expected a float, got {type(value).__name__}") from None
    if single and abs(f) > _F32_MAX and f != float("inf") and f != float("-inf"):
        # values that round to Float.MAX_VALUE are fine; struct decides exactly
        try:
            _F32.pack(f)
        except OverflowError:
            raise _reject(serializer, value, "out of range for a Java float") from None
    return f


class FloatSerializer(TypeSerializer[float]):
    """``writeFloat``: IEEE single, big-endian, every NaN canonicalised to ``7FC00000``."""

    KEY_HASH = "float"
    SQL_TYPE = "FLOAT"
    VALUE_TYPE = FloatType()
    DATASTREAM_OF = ("FLOAT",)
    JAVA_ZERO = 0.0
    BULK = BulkKernel("fixed", "LEAF_F32")
    LENGTH = 4
    IMMUTABLE_VALUES = True

    def serialize(self, value: float, out: DataOutputSerializer) -> None:
        out.write_float(check_float(self, value, True))

    def deserialize(self, src: DataInputDeserializer) -> float:
        return src.read_float()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return FloatSerializerSnapshot()


class DoubleSerializer(TypeSerializer[float]):
    """``writeDouble``: IEEE double, big-endian, NaN canonicalised to ``7FF8000000000000``."""

    KEY_HASH = "double"
    SQL_TYPE = "DOUBLE"
    VALUE_TYPE = DoubleType()
    DATASTREAM_OF = ("DOUBLE",)
    JAVA_ZERO = 0.0
    BULK = BulkKernel("fixed", "LEAF_F64")
    LENGTH = 8
    IMMUTABLE_VALUES = True

    def serialize(self, value: float, out: DataOutputSerializer) -> None:
        out.write_double(check_float(self, value, False))

    def deserialize(self, src: DataInputDeserializer) -> float:
        return src.read_double()

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return DoubleSerializerSnapshot()


def check_char(serializer: TypeSerializer[Any], value: Any) -> int:
    """A Java ``char`` is one UTF-16 code unit: a 1-character str below U+10000 (lone surrogates
    included, as Java allows them). An int code unit is accepted too."""
    if isinstance(value, str):
        if len(value) == 1 and ord(value) < 0x10000:
            return ord(value)
        why = ("a supplementary character needs two UTF-16 units" if len(value) == 1
               else f"expected one character, got {len(value)}")
        raise _reject(serializer, value, why)
    if value is None:
        raise _reject(serializer, value, "a Java char cannot be null (wrap it in NullableSerializer)")
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFF:
        return value
    raise _reject(serializer, value, "expected a 1-character str (one UTF-16 code unit)")


class CharSerializer(TypeSerializer[str]):
    """``writeChar``: one UTF-16 code unit, big-endian. Values are 1-character strings."""

    KEY_HASH = "char"
    SQL_TYPE = "CHAR(1)"
    VALUE_TYPE = CharType(1)
    DATASTREAM_OF = ("CHAR(1)",)
    JAVA_ZERO = "\0"
    BULK = BulkKernel("", "LEAF_CHAR")  # a field of kernel rows only: an Arrow string column is no UTF-16 char
    LENGTH = 2
    IMMUTABLE_VALUES = True

    def serialize(self, value: str, out: DataOutputSerializer) -> None:
        out.write_short(check_char(self, value))

    def deserialize(self, src: DataInputDeserializer) -> str:
        return chr(src.read_char())

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return CharSerializerSnapshot()


# Flink's XxxSerializer$XxxSerializerSnapshot classes, one each (the names are the classes')
(BooleanSerializerSnapshot, ByteSerializerSnapshot, ShortSerializerSnapshot, IntSerializerSnapshot,
 LongSerializerSnapshot, FloatSerializerSnapshot, DoubleSerializerSnapshot, CharSerializerSnapshot) = (
    nested_simple_snapshot(s, _BASE) for s in (BooleanSerializer, ByteSerializer, ShortSerializer, IntSerializer,
        LongSerializer, FloatSerializer, DoubleSerializer, CharSerializer))


__all__ = [
    "BooleanSerializer",
    "BooleanSerializerSnapshot",
    "ByteSerializer",
    "ByteSerializerSnapshot",
    "CharSerializer",
    "CharSerializerSnapshot",
    "DoubleSerializer",
    "DoubleSerializerSnapshot",
    "FloatSerializer",
    "FloatSerializerSnapshot",
    "IntSerializer",
    "IntSerializerSnapshot",
    "LongSerializer",
    "LongSerializerSnapshot",
    "ShortSerializer",
    "ShortSerializerSnapshot",
    "check_char",
    "check_float",
    "is_bool_like",
]
