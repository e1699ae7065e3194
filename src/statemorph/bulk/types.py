"""Arrow types and values of state: the Arrow type a Flink logical type or a serializer's values
map to, and the conversion between the reference serializers' values and Arrow's.

Why: the bulk kernels write Arrow columns of these types, the per-value path converts each value
this way, and the State Processor read path needs a *typed* table before any task runs (a Spark
DataFrame needs its schema first; an empty state still has columns). For serializers without a
byte-level kernel (Tuple, POJO, Avro, Enum, List, Map, Nullable, primitive arrays) the Arrow type
follows from the serializer configuration here.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from .. import serializers, types
from ..errors import StatemorphError, UnrepresentableValueError
from ..row import RowKind, row_kind_of
from ..types import ArrayType, LocalZonedTimestampType, MapType, MultisetType, RowType, Timestamp, TimestampType


def simple_arrow_type(cls: type) -> pa.DataType | None:
    """The Arrow type of the values of a serializer class without configuration, from what the
    class itself declares (``VALUE_TYPE``, or ``VALUELESS``: a null column); None for others."""
    declared = getattr(cls, "declared", None)
    if declared is None:
        return None
    if declared("VALUELESS", False):
        return pa.null()
    value_type = declared("VALUE_TYPE")
    return None if value_type is None else arrow_type(value_type)


def large_variant(t: pa.DataType) -> pa.DataType:
    """The 64-bit-offsets form of a string or binary Arrow type (``large_string`` ...)."""
    return pa.large_string() if pa.types.is_string(t) else pa.large_binary() if pa.types.is_binary(t) else t


def arrow_type_for(ser: Any) -> pa.DataType:
    """The Arrow type that values of ``ser`` decode to."""
    cls = type(ser)
    simple = simple_arrow_type(cls)
    if simple is not None:
        return simple
    if cls is serializers.RowDataSerializer:
        return arrow_type(ser.row_type)
    if cls is serializers.ListSerializer:
        return pa.list_(arrow_type_for(ser.element_serializer))
    if cls in (serializers.MapSerializer, serializers.SortedMapSerializer):
        return pa.map_(arrow_type_for(ser.key_serializer), arrow_type_for(ser.value_serializer))
    if cls in (serializers.NullableSerializer, serializers.ExternalSerializer):
        return arrow_type_for(ser.inner)
    if cls is serializers.ArrayDataSerializer:
        return arrow_type(ser.array_type)
    if cls is serializers.TupleSerializer:
        return pa.struct([(f"f{i}", arrow_type_for(s)) for i, s in enumerate(ser.field_serializers)])
    if cls is serializers.RowSerializer:
        names = ser.field_names or [f"f{i}" for i in range(len(ser.field_serializers))]
        return pa.struct([(n, arrow_type_for(s)) for n, s in zip(names, ser.field_serializers, strict=True)])
    if cls is serializers.PojoSerializer:
        return pa.struct([(n, arrow_type_for(s)) for n, s in ser.field_serializers.items()])
    if cls is serializers.AvroSerializer:
        return _avro_type(ser.parsed_schema)
    raise StatemorphError(f"no Arrow type is known for values of {cls.__name__}")


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


def to_arrow_value(ser: Any, path: str | None = None) -> Callable[[Any], Any]:
    """A function turning one value of ``ser`` (tuple, Row, dataclass, enum member ...) into what
    ``pa.array(..., type=arrow_type_for(ser))`` accepts. A nested flink-core Row whose RowKind is
    not INSERT is refused with :class:`UnrepresentableValueError` naming its path, as
    :func:`logical_to_arrow` refuses one in RowData (``path`` is None for the value itself, whose
    kind is left out)."""
    cls = type(ser)
    if cls is serializers.EnumSerializer:
        return lambda v: v.name if isinstance(v, enum.Enum) else v
    if cls in serializers.TIME_WINDOW_SERIALIZERS:
        return lambda v: None if v is None else {"start": v.start, "end": v.end}
    if cls is serializers.CountWindowSerializer:
        return lambda v: None if v is None else v.id
    if cls is serializers.GlobalWindowSerializer:
        return lambda v: None
    if cls is serializers.ListSerializer:
        el = to_arrow_value(ser.element_serializer, f"{path or ''}[]")
        return lambda v: None if v is None else [el(x) for x in v]
    if cls in (serializers.MapSerializer, serializers.SortedMapSerializer):
        k = to_arrow_value(ser.key_serializer, f"{path or ''}.key[]")
        val = to_arrow_value(ser.value_serializer, f"{path or ''}.value[]")
        return lambda v: None if v is None else [(k(a), val(b)) for a, b in v.items()]
    if cls in (serializers.NullableSerializer, serializers.ExternalSerializer):
        return to_arrow_value(ser.inner, path)
    if cls in (serializers.TupleSerializer, serializers.RowSerializer):
        t = arrow_type_for(ser)
        names = [t.field(i).name for i in range(t.num_fields)]
        convs = [to_arrow_value(s, _sub(path, n)) for n, s in zip(names, ser.field_serializers, strict=True)]

        def row(v: Any) -> Any:
            if v is None:
                return None
            if path is not None:
                _insert_only(v, path)
            return {n: c(x) for n, c, x in zip(names, convs, v, strict=True)}

        return row
    if cls is serializers.PojoSerializer:
        items = [(n, to_arrow_value(s, _sub(path, n))) for n, s in ser.field_serializers.items()]

        def pojo(v: Any) -> Any:
            if v is None:
                return None
            get: Callable[[str], Any] = v.get if isinstance(v, dict) else (lambda n: getattr(v, n, None))
            return {n: c(get(n)) for n, c in items}

        return pojo
    return lambda v: v


def from_arrow_value(ser: Any) -> Callable[[Any], Any]:
    """The inverse of :func:`to_arrow_value`: an Arrow Python value (``to_pylist``) → a value
    ``ser.serialize`` accepts."""
    cls = type(ser)
    if cls is serializers.RowDataSerializer:  # a tuple: hashable, so it can be a map key (a sort key)
        return lambda v: logical_from_arrow(v, ser.row_type)
    if cls is serializers.ListSerializer:
        el = from_arrow_value(ser.element_serializer)
        return lambda v: None if v is None else [el(x) for x in v]
    if cls in (serializers.MapSerializer, serializers.SortedMapSerializer):
        k, val = from_arrow_value(ser.key_serializer), from_arrow_value(ser.value_serializer)
        return lambda v: None if v is None else {k(a): val(b) for a, b in v}
    if cls in (serializers.NullableSerializer, serializers.ExternalSerializer):
        return from_arrow_value(ser.inner)
    if cls in (serializers.TupleSerializer, serializers.RowSerializer):
        convs = [from_arrow_value(s) for s in ser.field_serializers]
        return lambda v: None if v is None else tuple(c(x) for c, x in zip(convs, v.values(), strict=True))
    if cls is serializers.PojoSerializer:
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


class _ArrowOf(types.LogicalTypeVisitor[pa.DataType]):
    """The Arrow type of each logical type."""

    def visit_other(self, t: types.LogicalType) -> pa.DataType:
        raise NotImplementedError(f"no Arrow mapping for {t}")

    def visit_boolean(self, t: Any) -> pa.DataType:
        return pa.bool_()

    def visit_tinyint(self, t: Any) -> pa.DataType:
        return pa.int8()

    def visit_smallint(self, t: Any) -> pa.DataType:
        return pa.int16()

    def visit_int(self, t: Any) -> pa.DataType:
        return pa.int32()

    def visit_bigint(self, t: Any) -> pa.DataType:
        return pa.int64()

    def visit_float(self, t: Any) -> pa.DataType:
        return pa.float32()

    def visit_double(self, t: Any) -> pa.DataType:
        return pa.float64()

    def visit_character_string(self, t: Any) -> pa.DataType:
        return pa.string()

    def visit_binary_string(self, t: Any) -> pa.DataType:
        return pa.binary()

    def visit_raw(self, t: types.RawType) -> pa.DataType:  # a SQL data view's placeholder bytes
        return pa.binary()

    def visit_decimal(self, t: types.DecimalType) -> pa.DataType:
        return pa.decimal128(t.precision, t.scale)

    def visit_date(self, t: Any) -> pa.DataType:
        return pa.date32()

    def visit_time(self, t: Any) -> pa.DataType:
        return pa.time32("ms")  # Flink keeps milliseconds of the day whatever the precision

    def visit_timestamp(self, t: TimestampType) -> pa.DataType:
        return pa.timestamp(_unit(t.precision))

    def visit_local_zoned_timestamp(self, t: LocalZonedTimestampType) -> pa.DataType:
        return pa.timestamp(_unit(t.precision), tz="UTC")

    def visit_row(self, t: RowType) -> pa.DataType:
        # always nullable in Arrow: NOT NULL is enforced by the kernels, with the field path in the error
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in t.fields])

    def visit_array(self, t: ArrayType) -> pa.DataType:
        return pa.list_(arrow_type(t.element_type))

    def visit_multiset(self, t: MultisetType) -> pa.DataType:
        return pa.map_(arrow_type(t.element_type), pa.int32())

    def visit_map(self, t: MapType) -> pa.DataType:
        return pa.map_(arrow_type(t.key_type), arrow_type(t.value_type))


def _unit(precision: int) -> str:
    return "ms" if precision <= 3 else "us" if precision <= 6 else "ns"


_ARROW_OF = _ArrowOf()


def arrow_type(t: types.LogicalType) -> pa.DataType:
    """The Arrow type a Flink logical type decodes to (and encodes from)."""
    return t.accept(_ARROW_OF)


def map_parts(t: MapType | MultisetType) -> tuple[types.LogicalType, types.LogicalType]:
    """Key and value types of a MAP, or of a MULTISET (element → INT NOT NULL count)."""
    return t.map_parts()


def logical_from_arrow(v: Any, t: types.LogicalType) -> Any:
    """Arrow ``to_pylist`` value → the reference serializers' value."""
    if v is None:
        return None
    if isinstance(t, RowType):
        return tuple(logical_from_arrow(v.get(f.name), f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return [logical_from_arrow(x, t.element_type) for x in v]
    if isinstance(t, MultisetType):
        return {logical_from_arrow(a, t.element_type): c for a, c in v}
    if isinstance(t, MapType):
        return {logical_from_arrow(a, t.key_type): logical_from_arrow(b, t.value_type) for a, b in v}
    if isinstance(t, (TimestampType, LocalZonedTimestampType)) and hasattr(v, "value") \
            and (hasattr(v, "nanosecond") or not isinstance(v, _dt.datetime)):
        # Arrow's timestamp[ns] comes back as a pandas Timestamp (a datetime subclass that also
        # holds the nanoseconds in ``value``): read as a datetime it would lose the last three digits
        return Timestamp.from_epoch_nanos(int(v.value))
    return v


def logical_to_arrow(v: Any, t: types.LogicalType, path: str | None = None) -> Any:
    """Reference serializer value → something ``pa.array(..., type=arrow_type(t))`` accepts.

    What Arrow cannot hold is refused with :class:`UnrepresentableValueError` naming the field
    path (in the kernels' notation: ``m.key[]``, ``rows[].inner``), never dropped: a null MAP /
    MULTISET key, and a nested ROW whose RowKind is not INSERT. ``path`` is None for the value
    itself, whose RowKind (a top-level row's) is left out: it is the record's changelog flag, not
    part of its fields, and Flink SQL state holds UPDATE_AFTER rows routinely (docs/bulk.md)."""
    if v is None:
        return None
    if isinstance(t, RowType):
        if path is not None:
            _insert_only(v, path)
        return {f.name: logical_to_arrow(x, f.type, _sub(path, f.name)) for f, x in zip(t.fields, v, strict=False)}
    if isinstance(t, ArrayType):
        return [logical_to_arrow(x, t.element_type, f"{path or ''}[]") for x in v]
    if isinstance(t, (MapType, MultisetType)):
        key_t, value_t = map_parts(t)
        at = path or ""
        if None in v:
            raise UnrepresentableValueError(f"field {at}.key[]: a null map key: an Arrow map key cannot be null",
                                            field_path=f"{at}.key[]")
        if isinstance(t, MultisetType):
            return [(logical_to_arrow(a, key_t, f"{at}.key[]"), c) for a, c in v.items()]
        return [(logical_to_arrow(a, key_t, f"{at}.key[]"), logical_to_arrow(b, value_t, f"{at}.value[]"))
                for a, b in v.items()]
    if isinstance(v, Timestamp):
        return v.epoch_nanos // {"ms": 1_000_000, "us": 1000, "ns": 1}[arrow_type(t).unit]
    return v  # numbers, strings, bytes, Decimal, date and time: Arrow takes them as they are


def _sub(path: str | None, name: str) -> str:
    return f"{path}.{name}" if path else name


def _insert_only(row: Any, path: str) -> None:
    """A nested row must be INSERT: an Arrow struct has no row kind (only a top-level row's kind
    is left out, see :func:`logical_to_arrow`)."""
    if row_kind_of(row) is not RowKind.INSERT:
        raise UnrepresentableValueError(
            f"field {path or '(element)'}: a nested row of kind {row_kind_of(row).name}: an Arrow struct has no "
            "row kind", field_path=path)


__all__ = ["arrow_type", "arrow_type_for", "from_arrow_value", "logical_from_arrow", "logical_to_arrow", "map_parts",
           "to_arrow_value"]
