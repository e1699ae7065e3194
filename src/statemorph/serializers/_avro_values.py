"""How Avro values look in Python (fastavro's mapping) and which value fits which schema.

Shared by the codec (union branch choice, missing fields), the resolver (defaults of added fields)
and the serializer. Logical types follow fastavro: ``date`` ↔ ``datetime.date``, ``time-millis`` /
``time-micros`` ↔ ``datetime.time``, ``timestamp-*`` ↔ UTC-aware ``datetime``, ``local-timestamp-*`` ↔
naive ``datetime``, ``decimal`` ↔ ``decimal.Decimal``, ``uuid`` ↔ ``uuid.UUID``. Every logical type is a
pair of functions between the value and the *raw* underlying value (the int, long, bytes or str
actually encoded); unknown logical types are ignored, as Avro requires.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import uuid
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from ..errors import SerializationError
from ._avro_schema import ArrayNode, AvroNode, EnumNode, FixedNode, MapNode, RecordNode, UnionNode, memoized

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)

ToRaw = Callable[[Any], Any]
FromRaw = Callable[[Any], Any]


class LogicalType:
    """Conversion between a logical value and its raw Avro value. ``accepts`` says whether a value
    is (already) of the logical form; raw values are always accepted too, as in fastavro."""

    __slots__ = ("name", "to_raw", "from_raw", "accepts")

    def __init__(self, name: str, to_raw: ToRaw, from_raw: FromRaw, accepts: Callable[[Any], bool]) -> None:
        self.name = name
        self.to_raw = to_raw
        self.from_raw = from_raw
        self.accepts = accepts


def _micros(delta: _dt.timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _ts_to_raw(unit: int, local: bool) -> ToRaw:
    def to_raw(v: Any) -> Any:
        if isinstance(v, _dt.datetime):
            if local:
                base = v.replace(tzinfo=None)
                us = _micros(base - _EPOCH_NAIVE)
            else:
                us = _micros(v - _EPOCH_UTC) if v.tzinfo is not None else _micros(v - _EPOCH_NAIVE)
            return us // unit
        return v

    return to_raw


def _ts_from_raw(unit: int, local: bool) -> FromRaw:
    epoch = _EPOCH_NAIVE if local else _EPOCH_UTC

    def from_raw(v: int) -> _dt.datetime:
        return epoch + _dt.timedelta(microseconds=v * unit)

    return from_raw


def _time_to_raw(unit: int) -> ToRaw:
    def to_raw(v: Any) -> Any:
        if isinstance(v, _dt.time):
            return (((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond) // unit
        return v

    return to_raw


def _time_from_raw(unit: int) -> FromRaw:
    def from_raw(v: int) -> _dt.time:
        if not 0 <= v * unit < 86_400_000_000:
            raise ValueError(f"time of day {v} is outside 0..24h")
        us = v * unit
        return _dt.time(us // 3_600_000_000, us // 60_000_000 % 60, us // 1_000_000 % 60, us % 1_000_000)

    return from_raw


def _date_to_raw(v: Any) -> Any:
    if isinstance(v, _dt.datetime):
        raise SerializationError(f"a date field needs datetime.date, got datetime {v!r}")
    if isinstance(v, _dt.date):
        return (v - _EPOCH_DATE).days
    return v


def _date_from_raw(v: int) -> _dt.date:
    return _EPOCH_DATE + _dt.timedelta(days=v)


def unscaled_bytes(n: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: minimal big-endian two's complement."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _decimal_to_raw(precision: int, scale: int, size: int | None) -> ToRaw:
    def to_raw(v: Any) -> Any:
        if not isinstance(v, decimal.Decimal):
            return v
        if not v.is_finite():
            raise SerializationError(f"decimal({precision},{scale}) cannot hold {v}")
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)
        delta = exp + scale
        if delta < 0:
            raise SerializationError(f"decimal {v} has more than {scale} fractional digits (scale of the schema)")
        unscaled = int("".join(map(str, digits)) or "0") * 10 ** delta
        if sign:
            unscaled = -unscaled
        if precision and len(str(abs(unscaled))) > precision and unscaled:
            raise SerializationError(f"decimal {v} needs more than {precision} digits (precision of the schema)")
        if size is None:
            return unscaled_bytes(unscaled)
        try:
            return unscaled.to_bytes(size, "big", signed=True)
        except OverflowError:
            raise SerializationError(f"decimal {v} does not fit in fixed({size})") from None

    return to_raw


def _decimal_from_raw(scale: int) -> FromRaw:
    ctx = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)

    def from_raw(v: bytes) -> decimal.Decimal:
        return ctx.create_decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale, ctx)

    return from_raw


def _uuid_to_raw(v: Any) -> Any:
    return str(v) if isinstance(v, uuid.UUID) else v


def logical_type(node: AvroNode) -> LogicalType | None:
    """The conversion for ``node``'s logical type, or None (no logical type, or one Avro ignores)."""
    lt, kind = node.logical, node.kind
    if lt is None:
        return None
    if lt == "date" and kind == "int":
        return LogicalType(lt, _date_to_raw, _date_from_raw,
                           lambda v: isinstance(v, _dt.date) and not isinstance(v, _dt.datetime))
    if lt in ("time-millis", "time-micros") and kind == ("int" if lt == "time-millis" else "long"):
        unit = 1000 if lt == "time-millis" else 1
        return LogicalType(lt, _time_to_raw(unit), _time_from_raw(unit), lambda v: isinstance(v, _dt.time))
    if kind == "long" and lt in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                                 "local-timestamp-micros"):
        unit = 1000 if lt.endswith("millis") else 1
        local = lt.startswith("local")
        return LogicalType(lt, _ts_to_raw(unit, local), _ts_from_raw(unit, local),
                           lambda v: isinstance(v, _dt.datetime))
    if lt == "decimal" and kind in ("bytes", "fixed"):
        try:
            precision = int(node.props.get("precision", 0))
            scale = int(node.props.get("scale", 0))
        except (TypeError, ValueError):
            return None
        if precision <= 0 or scale < 0 or scale > precision:
            return None  # an invalid decimal is ignored, like Avro Java does
        size = node.size if isinstance(node, FixedNode) else None
        return LogicalType(lt, _decimal_to_raw(precision, scale, size), _decimal_from_raw(scale),
                           lambda v: isinstance(v, decimal.Decimal))
    if lt == "uuid" and kind == "string":
        return LogicalType(lt, _uuid_to_raw, uuid.UUID, lambda v: isinstance(v, uuid.UUID))
    return None


# -- which value fits which schema (fastavro's validate, without raising) ---------------------------

Matcher = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def compile_matcher(node: AvroNode, memo: dict[Hashable, Matcher] | None = None) -> Matcher:
    """A predicate: does ``value`` fit ``node``? Used to pick a union branch like fastavro does."""
    cache: dict[Hashable, Matcher] = {} if memo is None else memo
    return memoized(cache, id(node), lambda: _matcher(node, cache))


def _matcher(node: AvroNode, memo: dict[Hashable, Matcher]) -> Matcher:
    kind = node.kind
    lt = logical_type(node)
    base: Matcher
    if kind == "null":
        return lambda v: v is None
    if kind == "boolean":
        return lambda v: isinstance(v, bool)
    if kind == "int":
        base = lambda v: _is_int(v) and INT_MIN <= v <= INT_MAX  # noqa: E731
    elif kind == "long":
        base = lambda v: _is_int(v) and LONG_MIN <= v <= LONG_MAX  # noqa: E731
    elif kind in ("float", "double"):
        base = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    elif kind == "string":
        base = lambda v: isinstance(v, str)  # noqa: E731
    elif kind == "bytes":
        base = lambda v: isinstance(v, (bytes, bytearray, memoryview))  # noqa: E731
    elif isinstance(node, FixedNode):
        size = node.size
        base = lambda v: isinstance(v, (bytes, bytearray, memoryview)) and len(v) == size  # noqa: E731
    elif isinstance(node, EnumNode):
        symbols = node.index
        return lambda v: isinstance(v, str) and v in symbols
    elif isinstance(node, ArrayNode):
        items = compile_matcher(node.items, memo)
        return lambda v: isinstance(v, (list, tuple)) and all(items(x) for x in v)
    elif isinstance(node, MapNode):
        values = compile_matcher(node.values, memo)
        return lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and values(x) for k, x in v.items())
    elif isinstance(node, RecordNode):
        fields = [(f.name, compile_matcher(f.type, memo), f.has_default) for f in node.fields]

        def record(v: Any) -> bool:
            if not isinstance(v, Mapping):
                return False
            for name, m, has_default in fields:
                if name in v:
                    if not m(v[name]):
                        return False
                elif not has_default and not m(None):
                    return False
            return True

        return record
    elif isinstance(node, UnionNode):
        branches = [compile_matcher(b, memo) for b in node.branches]
        return lambda v: any(b(v) for b in branches)
    else:  # pragma: no cover - build_tree only makes the kinds above
        raise AssertionError(kind)
    if lt is None:
        return base
    accepts = lt.accepts
    return lambda v: accepts(v) or base(v)


# -- JSON default values --------------------------------------------------------------------------------

class DefaultError(ValueError):
    """A field's JSON default does not fit its type."""


def default_value(node: AvroNode, raw: Any) -> Any:
    """The Python value of a JSON default for ``node`` (Avro: bytes/fixed defaults are strings of
    code points 0-255; a union's default belongs to its first branch)."""
    kind = node.kind
    if isinstance(node, UnionNode):
        errors = []
        for b in node.branches:  # Avro says the first branch; later ones are a lenient fallback
            try:
                return default_value(b, raw)
            except DefaultError as e:
                errors.append(str(e))
        raise DefaultError(f"default {raw!r} fits no branch of {node.label}")
    lt = logical_type(node)
    if kind == "null":
        if raw is not None:
            raise DefaultError(f"default {raw!r} is not null")
        return None
    if kind == "boolean":
        if not isinstance(raw, bool):
            raise DefaultError(f"default {raw!r} is not a boolean")
        value: Any = raw
    elif kind in ("int", "long"):
        if not _is_int(raw) and not (isinstance(raw, float) and raw.is_integer()):
            raise DefaultError(f"default {raw!r} is not an {kind}")
        value = int(raw)
    elif kind in ("float", "double"):
        if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
            value = float(raw.replace("Infinity", "inf"))
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value = float(raw)
        else:
            raise DefaultError(f"default {raw!r} is not a {kind}")
    elif kind == "string":
        if not isinstance(raw, str):
            raise DefaultError(f"default {raw!r} is not a string")
        value = raw
    elif kind in ("bytes", "fixed"):
        if not isinstance(raw, str):
            raise DefaultError(f"default {raw!r} is not a {kind} string")
        try:
            value = raw.encode("latin-1")
        except UnicodeEncodeError:
            raise DefaultError(f"default {raw!r} has characters above U+00FF") from None
        if isinstance(node, FixedNode) and len(value) != node.size:
            raise DefaultError(f"default {raw!r} is not {node.size} bytes long")
    elif isinstance(node, EnumNode):
        if raw not in node.index:
            raise DefaultError(f"default {raw!r} is not a symbol of {node.fullname}")
        return raw
    elif isinstance(node, ArrayNode):
        if not isinstance(raw, list):
            raise DefaultError(f"default {raw!r} is not an array")
        return [default_value(node.items, x) for x in raw]
    elif isinstance(node, MapNode):
        if not isinstance(raw, Mapping):
            raise DefaultError(f"default {raw!r} is not a map")
        return {k: default_value(node.values, x) for k, x in raw.items()}
    elif isinstance(node, RecordNode):
        if not isinstance(raw, Mapping):
            raise DefaultError(f"default {raw!r} is not a record")
        out = {}
        for f in node.fields:
            if f.name in raw:
                out[f.name] = default_value(f.type, raw[f.name])
            elif f.has_default:
                out[f.name] = default_value(f.type, f.default)
            else:
                raise DefaultError(f"default of record {node.fullname} has no value for field {f.name}")
        return out
    else:  # pragma: no cover
        raise AssertionError(kind)
    if lt is not None:
        try:
            return lt.from_raw(value)
        except (ValueError, OverflowError, ArithmeticError) as e:
            raise DefaultError(f"default {raw!r} is not a valid {lt.name}: {e}") from None
    return value


__all__ = [
    "DefaultError",
    "LogicalType",
    "compile_matcher",
    "default_value",
    "logical_type",
    "unscaled_bytes",
]
