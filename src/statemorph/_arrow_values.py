"""Typed Arrow columns for every serializer: the schema a decoded state has, and the conversion
between serializer values and Arrow values. Part of the bulk layer (:mod:`statemorph.arrow`),
used by its per-value fallback and by the engines above it.

Why: the State Processor read path must give a *typed* table (a Spark DataFrame needs its schema
before any task runs, and an empty state still has columns). :mod:`statemorph.arrow` has compiled
kernels for RowData, flink-core Row, primitives and strings; for the other serializers (Tuple,
POJO, Avro, Enum, List, Map, Nullable, primitive arrays) the Arrow type follows from the serializer
configuration here, and values go through the reference serializers one by one (correct, not
fast: those formats have no byte-level kernel).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from .errors import StatemorphError

_SIMPLE: dict[str, pa.DataType] = {
    "BooleanSerializer": pa.bool_(), "ByteSerializer": pa.int8(), "ShortSerializer": pa.int16(),
    "IntSerializer": pa.int32(), "LongSerializer": pa.int64(), "FloatSerializer": pa.float32(),
    "DoubleSerializer": pa.float64(), "CharSerializer": pa.string(), "StringSerializer": pa.string(),
    "BytePrimitiveArraySerializer": pa.binary(), "BooleanPrimitiveArraySerializer": pa.list_(pa.bool_()),
    "ShortPrimitiveArraySerializer": pa.list_(pa.int16()), "IntPrimitiveArraySerializer": pa.list_(pa.int32()),
    "LongPrimitiveArraySerializer": pa.list_(pa.int64()), "FloatPrimitiveArraySerializer": pa.list_(pa.float32()),
    "DoublePrimitiveArraySerializer": pa.list_(pa.float64()), "CharPrimitiveArraySerializer": pa.list_(pa.string()),
    "StringArraySerializer": pa.list_(pa.string()), "VoidNamespaceSerializer": pa.null(),
}
KERNEL_SERIALIZERS = frozenset(
    ["RowDataSerializer", "BooleanSerializer", "ByteSerializer", "ShortSerializer", "IntSerializer",
     "LongSerializer", "FloatSerializer", "DoubleSerializer", "StringSerializer", "BytePrimitiveArraySerializer",
     "RowSerializer"])
"""Serializers whose columns :mod:`statemorph.arrow` encodes and decodes with compiled kernels (a
flink-core Row when its fields are primitives, Char, String, byte[] or such rows; :mod:`statemorph.arrow`
takes the per-value path itself for the others)."""


def _name(ser: Any) -> str:
    return type(ser).__name__


def arrow_type_for(ser: Any) -> pa.DataType:
    """The Arrow type that values of ``ser`` decode to."""
    name = _name(ser)
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name == "RowDataSerializer":
        from .arrow import arrow_type

        return arrow_type(ser.row_type)
    if name == "ListSerializer":
        return pa.list_(arrow_type_for(ser.element_serializer))
    if name == "MapSerializer":
        return pa.map_(arrow_type_for(ser.key_serializer), arrow_type_for(ser.value_serializer))
    if name == "NullableSerializer":
        return arrow_type_for(ser.inner)
    if name == "EnumSerializer":
        return pa.string()
    if name == "TupleSerializer":
        return pa.struct([(f"f{i}", arrow_type_for(s)) for i, s in enumerate(ser.field_serializers)])
    if name == "RowSerializer":
        names = ser.field_names or [f"f{i}" for i in range(len(ser.field_serializers))]
        return pa.struct([(n, arrow_type_for(s)) for n, s in zip(names, ser.field_serializers, strict=True)])
    if name == "PojoSerializer":
        return pa.struct([(n, arrow_type_for(s)) for n, s in ser.field_serializers.items()])
    if name == "AvroSerializer":
        return _avro_type(ser.parsed_schema)
    raise StatemorphError(f"no Arrow type is known for values of {name}")


_AVRO_PRIMITIVES = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}


def _avro_type(schema: Any) -> pa.DataType:
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        raise StatemorphError(f"Avro named type {schema!r} has no Arrow mapping here")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _avro_type(branches[0])
        raise StatemorphError("Avro unions of several non-null types have no Arrow mapping here")
    t = schema.get("type")
    if isinstance(t, (dict, list)) or t in _AVRO_PRIMITIVES:
        logical = schema.get("logicalType")
        if logical is None or not isinstance(t, str):
            return _avro_type(t)
        return _AVRO_PRIMITIVES[t]
    if t == "record":
        return pa.struct([(f["name"], _avro_type(f["type"])) for f in schema["fields"]])
    if t == "array":
        return pa.list_(_avro_type(schema["items"]))
    if t == "map":
        return pa.map_(pa.string(), _avro_type(schema["values"]))
    if t == "enum":
        return pa.string()
    if t == "fixed":
        return pa.binary()
    raise StatemorphError(f"Avro type {t!r} has no Arrow mapping here")


def to_arrow_value(ser: Any) -> Callable[[Any], Any]:
    """A function turning one value of ``ser`` (tuple, Row, dataclass, enum member ...) into what
    ``pa.array(..., type=arrow_type_for(ser))`` accepts."""
    name = _name(ser)
    if name == "EnumSerializer":
        return lambda v: v.name if isinstance(v, enum.Enum) else v
    if name == "ListSerializer":
        el = to_arrow_value(ser.element_serializer)
        return lambda v: None if v is None else [el(x) for x in v]
    if name == "MapSerializer":
        k, val = to_arrow_value(ser.key_serializer), to_arrow_value(ser.value_serializer)
        return lambda v: None if v is None else [(k(a), val(b)) for a, b in v.items()]
    if name == "NullableSerializer":
        return to_arrow_value(ser.inner)
    if name in ("TupleSerializer", "RowSerializer"):
        t = arrow_type_for(ser)
        names = [t.field(i).name for i in range(t.num_fields)]
        convs = [to_arrow_value(s) for s in ser.field_serializers]
        return lambda v: None if v is None else {n: c(x) for n, c, x in zip(names, convs, v, strict=True)}
    if name == "PojoSerializer":
        items = [(n, to_arrow_value(s)) for n, s in ser.field_serializers.items()]

        def pojo(v: Any) -> Any:
            if v is None:
                return None
            get = v.get if isinstance(v, dict) else (lambda n: getattr(v, n, None))
            return {n: c(get(n)) for n, c in items}

        return pojo
    return lambda v: v


def from_arrow_value(ser: Any) -> Callable[[Any], Any]:
    """The inverse of :func:`to_arrow_value`: an Arrow Python value (``to_pylist``) → a value
    ``ser.serialize`` accepts."""
    name = _name(ser)
    if name == "ListSerializer":
        el = from_arrow_value(ser.element_serializer)
        return lambda v: None if v is None else [el(x) for x in v]
    if name == "MapSerializer":
        k, val = from_arrow_value(ser.key_serializer), from_arrow_value(ser.value_serializer)
        return lambda v: None if v is None else {k(a): val(b) for a, b in v}
    if name == "NullableSerializer":
        return from_arrow_value(ser.inner)
    if name in ("TupleSerializer", "RowSerializer"):
        convs = [from_arrow_value(s) for s in ser.field_serializers]
        return lambda v: None if v is None else tuple(c(x) for c, x in zip(convs, v.values(), strict=True))
    if name == "PojoSerializer":
        items = [(n, from_arrow_value(s)) for n, s in ser.field_serializers.items()]
        cls = ser.pojo_class

        def pojo(v: Any) -> Any:
            if v is None:
                return None
            d = {n: c(v.get(n)) for n, c in items}
            if cls is None:
                return d
            init = {f.name for f in dataclasses.fields(cls) if f.init}
            obj = cls(**{k: x for k, x in d.items() if k in init})
            for k, x in d.items():
                if k not in init:
                    setattr(obj, k, x)
            return obj

        return pojo
    return lambda v: v


__all__ = ["KERNEL_SERIALIZERS", "arrow_type_for", "from_arrow_value", "to_arrow_value"]
