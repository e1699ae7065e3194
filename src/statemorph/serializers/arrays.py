"""Flink's primitive-array serializers and ``StringArraySerializer``
(``org.apache.flink.api.common.typeutils.base.array``).

Layout (docs/formats.md §2.4): ``i32 BE length ‖ elements``, each element in its primitive's
``DataOutput`` form. ``byte[]`` maps to ``bytes``; every other array maps to a ``list``. A null
array is refused (Flink throws ``IllegalArgumentException``); so is a null element, except in
``String[]`` whose elements are ``StringValue`` strings and may be null.

Numeric arrays are packed and unpacked with one ``struct`` call for the whole array; only when
that fails is the array walked element by element, to name the offending index in the error.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from typing import Any, ClassVar

from ..errors import SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import (
    BYTES,
    STRING,
    ArrayType,
    BigIntType,
    BooleanType,
    CharType,
    DoubleType,
    FloatType,
    IntType,
    SmallIntType,
)
from ..typeutils import BulkKernel, TypeSerializer, TypeSerializerSnapshot, nested_simple_snapshot
from .primitives import (
    BooleanSerializer,
    CharSerializer,
    DoubleSerializer,
    FloatSerializer,
    IntSerializer,
    LongSerializer,
    ShortSerializer,
    check_char,
    is_bool_like,
)
from .strings import encode_string, read_string

_BASE = "org.apache.flink.api.common.typeutils.base.array."
_I32 = struct.Struct(">i")


def _header(serializer: TypeSerializer[Any], value: Any) -> bytes:
    if value is None:
        raise SerializationError(f"{type(serializer).__name__} cannot write None: Flink arrays are never null")
    if isinstance(value, (str, dict, set)) or not hasattr(value, "__len__"):
        raise SerializationError(
            f"{type(serializer).__name__} cannot write {type(value).__name__} {value!r:.60}: expected a sequence"
        )
    return _I32.pack(len(value))


def _element_error(
    serializer: TypeSerializer[Any], element_serializer: TypeSerializer[Any], values: Sequence[Any]
) -> SerializationError:
    """Find the first element the element serializer refuses and say which one it is."""
    scratch = DataOutputSerializer()
    for i, v in enumerate(values):
        try:
            element_serializer.serialize(v, scratch)
        except SerializationError as e:
            return SerializationError(f"{type(serializer).__name__}: element [{i}]: {e}")
    return SerializationError(f"{type(serializer).__name__} cannot write {values!r:.80}")


class BytePrimitiveArraySerializer(TypeSerializer[bytes]):
    """``byte[]`` as ``bytes``; bytearray, memoryview and lists of ints in [-128, 255] are accepted."""

    SQL_TYPE = "BYTES"
    VALUE_TYPE = BYTES()
    DATASTREAM_OF = ("VARBINARY", "BINARY")
    BULK = BulkKernel("bytes", "LEAF_BYTES", kernel="bytes")

    def serialize(self, value: bytes, out: DataOutputSerializer) -> None:
        header = _header(self, value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        else:
            try:
                # operator.index first: only integers may be compared (a Decimal('sNaN') would
                # raise InvalidOperation on `<`, a float would slip into the range test)
                ints = [operator.index(v) for v in value]
                data = bytes(v & 0xFF if -128 <= v < 0 else v for v in ints)
            except (TypeError, ValueError):
                raise SerializationError(
                    f"BytePrimitiveArraySerializer cannot write {value!r:.80}: expected bytes or ints in [-128, 255]"
                ) from None
        out.write(header)
        out.write(data)

    def deserialize(self, src: DataInputDeserializer) -> bytes:
        n = src.check_length(src.read_int(), "byte[] length")
        return src.read_fully(n, "byte[] elements")

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return BytePrimitiveArraySerializerSnapshot()


class _PackedArraySerializer(TypeSerializer[list[Any]]):
    """An array of fixed-width numbers packed with one struct format character."""

    CODE: ClassVar[str]
    SIZE: ClassVar[int]
    JAVA: ClassVar[str]
    ELEMENT: ClassVar[type[TypeSerializer[Any]]]
    FLOATING: ClassVar[bool] = False

    def serialize(self, value: list[Any], out: DataOutputSerializer) -> None:
        header = _header(self, value)
        values = value
        if self.FLOATING:
            try:
                # NaN payloads are canonicalised by Flink's writeFloat/writeDouble; nan != nan
                values = [float("nan") if v != v else v for v in value]
            except TypeError:
                raise _element_error(self, self.ELEMENT(), value) from None
        try:
            body = struct.pack(f">{len(values)}{self.CODE}", *values)
        except (struct.error, TypeError, OverflowError):
            raise _element_error(self, self.ELEMENT(), value) from None
        if self.FLOATING and any(isinstance(v, bool) for v in value):
            # struct would take a bool as 1.0; the element serializer refuses it, so do we
            raise _element_error(self, self.ELEMENT(), value)
        out.write(header)
        out.write(body)

    def deserialize(self, src: DataInputDeserializer) -> list[Any]:
        n = src.check_length(src.read_int(), f"{self.JAVA}[] length", unit=self.SIZE)
        raw = src.read_fully(n * self.SIZE, f"{self.JAVA}[] elements")
        return list(struct.unpack(f">{n}{self.CODE}", raw))


class ShortPrimitiveArraySerializer(_PackedArraySerializer):
    CODE, SIZE, JAVA, ELEMENT = "h", 2, "short", ShortSerializer
    VALUE_TYPE = ArrayType(SmallIntType(nullable=False))

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ShortPrimitiveArraySerializerSnapshot()


class IntPrimitiveArraySerializer(_PackedArraySerializer):
    CODE, SIZE, JAVA, ELEMENT = "i", 4, "int", IntSerializer
    VALUE_TYPE = ArrayType(IntType(nullable=False))

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return IntPrimitiveArraySerializerSnapshot()


class LongPrimitiveArraySerializer(_PackedArraySerializer):
    CODE, SIZE, JAVA, ELEMENT = "q", 8, "long", LongSerializer
    VALUE_TYPE = ArrayType(BigIntType(nullable=False))

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return LongPrimitiveArraySerializerSnapshot()


class FloatPrimitiveArraySerializer(_PackedArraySerializer):
    CODE, SIZE, JAVA, ELEMENT, FLOATING = "f", 4, "float", FloatSerializer, True
    VALUE_TYPE = ArrayType(FloatType(nullable=False))

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return FloatPrimitiveArraySerializerSnapshot()


class DoublePrimitiveArraySerializer(_PackedArraySerializer):
    CODE, SIZE, JAVA, ELEMENT, FLOATING = "d", 8, "double", DoubleSerializer, True
    VALUE_TYPE = ArrayType(DoubleType(nullable=False))

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return DoublePrimitiveArraySerializerSnapshot()


class BooleanPrimitiveArraySerializer(TypeSerializer[list[bool]]):
    """``boolean[]``: one byte per element; any non-zero byte reads as true."""

    VALUE_TYPE = ArrayType(BooleanType(nullable=False))

    def serialize(self, value: list[bool], out: DataOutputSerializer) -> None:
        header = _header(self, value)
        body = bytearray(len(value))
        for i, v in enumerate(value):
            if v is True:
                body[i] = 1
            elif v is not False:
                if not is_bool_like(v):
                    raise _element_error(self, BooleanSerializer(), value)
                body[i] = 1 if v else 0
        out.write(header)
        out.write(body)

    def deserialize(self, src: DataInputDeserializer) -> list[bool]:
        n = src.check_length(src.read_int(), "boolean[] length")
        return [b != 0 for b in src.read_fully(n, "boolean[] elements")]

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return BooleanPrimitiveArraySerializerSnapshot()


class CharPrimitiveArraySerializer(TypeSerializer[list[str]]):
    """``char[]``: one UTF-16 code unit per element, values are 1-character strings."""

    VALUE_TYPE = ArrayType(CharType(1, nullable=False))

    def serialize(self, value: list[str], out: DataOutputSerializer) -> None:
        header = _header(self, value)
        try:
            units = [check_char(self, v) for v in value]
        except SerializationError:
            raise _element_error(self, CharSerializer(), value) from None
        out.write(header)
        out.write(struct.pack(f">{len(units)}H", *units))

    def deserialize(self, src: DataInputDeserializer) -> list[str]:
        n = src.check_length(src.read_int(), "char[] length", unit=2)
        raw = src.read_fully(2 * n, "char[] elements")
        return [chr(u) for u in struct.unpack(f">{n}H", raw)]

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return CharPrimitiveArraySerializerSnapshot()


class StringArraySerializer(TypeSerializer[list[Any]]):
    """``String[]``: ``i32 length`` then one ``StringValue`` string per element (null allowed)."""

    VALUE_TYPE = ArrayType(STRING())

    def serialize(self, value: list[str | None], out: DataOutputSerializer) -> None:
        header = _header(self, value)
        parts = [header]
        for i, v in enumerate(value):
            try:
                parts.append(encode_string(v))
            except SerializationError as e:
                raise SerializationError(f"StringArraySerializer: element [{i}]: {e}") from None
        out.write(b"".join(parts))

    def deserialize(self, src: DataInputDeserializer) -> list[str | None]:
        n = src.check_length(src.read_int(), "String[] length")
        return [read_string(src) for _ in range(n)]

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return StringArraySerializerSnapshot()


BytesSerializer = BytePrimitiveArraySerializer
IntArraySerializer = IntPrimitiveArraySerializer
LongArraySerializer = LongPrimitiveArraySerializer
DoubleArraySerializer = DoublePrimitiveArraySerializer


# Flink's XxxSerializer$XxxSerializerSnapshot classes, one each (the names are the classes')
(BooleanPrimitiveArraySerializerSnapshot, BytePrimitiveArraySerializerSnapshot, ShortPrimitiveArraySerializerSnapshot,
 CharPrimitiveArraySerializerSnapshot, IntPrimitiveArraySerializerSnapshot, LongPrimitiveArraySerializerSnapshot,
 FloatPrimitiveArraySerializerSnapshot, DoublePrimitiveArraySerializerSnapshot, StringArraySerializerSnapshot) = (
    nested_simple_snapshot(s, _BASE) for s in (BooleanPrimitiveArraySerializer, BytePrimitiveArraySerializer,
        ShortPrimitiveArraySerializer, CharPrimitiveArraySerializer, IntPrimitiveArraySerializer,
        LongPrimitiveArraySerializer, FloatPrimitiveArraySerializer, DoublePrimitiveArraySerializer,
        StringArraySerializer))


__all__ = [
    "BooleanPrimitiveArraySerializer",
    "BooleanPrimitiveArraySerializerSnapshot",
    "BytePrimitiveArraySerializer",
    "BytePrimitiveArraySerializerSnapshot",
    "BytesSerializer",
    "CharPrimitiveArraySerializer",
    "CharPrimitiveArraySerializerSnapshot",
    "DoubleArraySerializer",
    "DoublePrimitiveArraySerializer",
    "DoublePrimitiveArraySerializerSnapshot",
    "FloatPrimitiveArraySerializer",
    "FloatPrimitiveArraySerializerSnapshot",
    "IntArraySerializer",
    "IntPrimitiveArraySerializer",
    "IntPrimitiveArraySerializerSnapshot",
    "LongArraySerializer",
    "LongPrimitiveArraySerializer",
    "LongPrimitiveArraySerializerSnapshot",
    "ShortPrimitiveArraySerializer",
    "ShortPrimitiveArraySerializerSnapshot",
    "StringArraySerializer",
    "StringArraySerializerSnapshot",
]
