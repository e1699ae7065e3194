"""Read the golden-vector files: SPEC text → statemorph serializer, tagged JSON VALUE → Python value.

The grammar and the tags are documented in ``tests/data/golden/README.md``; the Java generator
(``ci/golden/src/golden/Spec.java``) parses the same grammar, so every vector line produced by
real Flink can be checked here without any per-case code. Only the public names of
``statemorph.serializers`` are used.

A :class:`World` is one set of generated user classes (the Python enum classes and dataclasses
that stand in for the Java enums and POJOs a SPEC names). The old and new side of a
compatibility case are built in separate worlds, like two versions of a job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import struct
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statemorph import serializers as S
from statemorph.io import units_to_str
from statemorph.row import Row, RowKind, row_kind_of
from statemorph.types import (
    ArrayType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RowType,
    Timestamp,
    TimestampType,
    parse_type,
)

ATOMS = {
    "Boolean": "BooleanSerializer",
    "Byte": "ByteSerializer",
    "Short": "ShortSerializer",
    "Int": "IntSerializer",
    "Long": "LongSerializer",
    "Float": "FloatSerializer",
    "Double": "DoubleSerializer",
    "Char": "CharSerializer",
    "String": "StringSerializer",
    "Bytes": "BytePrimitiveArraySerializer",
    "BooleanArray": "BooleanPrimitiveArraySerializer",
    "ShortArray": "ShortPrimitiveArraySerializer",
    "CharArray": "CharPrimitiveArraySerializer",
    "IntArray": "IntPrimitiveArraySerializer",
    "LongArray": "LongPrimitiveArraySerializer",
    "FloatArray": "FloatPrimitiveArraySerializer",
    "DoubleArray": "DoublePrimitiveArraySerializer",
    "StringArray": "StringArraySerializer",
}
KINDS = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER, "-D": RowKind.DELETE}


class SpecError(ValueError):
    """A SPEC or VALUE that does not follow tests/data/golden/README.md."""


# ------------------------------------------------------------------------------------ SPEC tree


@dataclass
class Spec:
    kind: str
    args: list[Spec] = field(default_factory=list)
    cls: str = ""  # Enum / Pojo: Java class name
    consts: list[str] = field(default_factory=list)  # Enum constants, declaration order
    field_names: list[str] = field(default_factory=list)  # Pojo fields (parallel to args)
    padded: bool = False  # Nullable<X,padded>
    legacy: bool = False  # Row[legacy]<...>
    raw: str = ""  # RowData: Flink SQL type; Avro: schema JSON

    def __str__(self) -> str:
        """The canonical SPEC text (no spaces except inside RowData/Avro payloads)."""
        if self.kind in ATOMS:
            return self.kind
        if self.kind in ("RowData", "Avro"):
            return f"{self.kind}<{self.raw}>"
        if self.kind == "Enum":
            return f"Enum<{self.cls}:{','.join(self.consts)}>"
        if self.kind == "Pojo":
            return f"Pojo<{self.cls}:{','.join(f'{n}={a}' for n, a in zip(self.field_names, self.args, strict=True))}>"
        inner = ",".join(str(a) for a in self.args)
        if self.kind == "Nullable" and self.padded:
            inner += ",padded"
        flags = "[legacy]" if self.legacy else ""
        return f"{self.kind}{flags}<{inner}>"

    def has_user_classes(self) -> bool:
        return self.kind in ("Enum", "Pojo") or any(a.has_user_classes() for a in self.args)


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def err(self, what: str) -> SpecError:
        return SpecError(f"SPEC {self.s!r}: {what} at offset {self.i}")

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self, c: str) -> bool:
        self.ws()
        return self.s.startswith(c, self.i)

    def expect(self, c: str) -> None:
        if not self.peek(c):
            raise self.err(f"expected {c!r}")
        self.i += 1

    def ident(self, dotted: bool = False) -> str:
        self.ws()
        st = self.i
        while self.i < len(self.s) and (
            self.s[self.i].isalnum() or self.s[self.i] in "_$" or (dotted and self.s[self.i] == ".")
        ):
            self.i += 1
        if st == self.i:
            raise self.err("expected a name")
        return self.s[st : self.i]

    def spec(self) -> Spec:
        sp = Spec(self.ident())
        if self.peek("["):
            self.i += 1
            flag = self.ident()
            if sp.kind != "Row" or flag != "legacy":
                raise self.err(f"unknown flag {flag!r}")
            sp.legacy = True
            self.expect("]")
        if sp.kind in ATOMS:
            return sp
        self.expect("<")
        k = sp.kind
        if k == "List":
            sp.args.append(self.spec())
        elif k == "Map":
            sp.args += [self.spec()]
            self.expect(",")
            sp.args.append(self.spec())
        elif k == "Nullable":
            sp.args.append(self.spec())
            if self.peek(","):
                self.i += 1
                if self.ident() != "padded":
                    raise self.err("the only Nullable flag is 'padded'")
                sp.padded = True
        elif k in ("Tuple", "Row"):
            if not self.peek(">"):
                sp.args.append(self.spec())
                while self.peek(","):
                    self.i += 1
                    sp.args.append(self.spec())
            if k == "Tuple" and not 1 <= len(sp.args) <= 25:
                raise self.err("Tuple takes 1 to 25 fields (Tuple0 has its own serializer)")
        elif k == "Enum":
            sp.cls = self.ident(dotted=True)
            self.expect(":")
            sp.consts.append(self.ident())
            while self.peek(","):
                self.i += 1
                sp.consts.append(self.ident())
        elif k == "Pojo":
            sp.cls = self.ident(dotted=True)
            self.expect(":")
            first = True
            while not self.peek(">"):
                if not first:
                    self.expect(",")
                first = False
                sp.field_names.append(self.ident())
                self.expect("=")
                sp.args.append(self.spec())
        elif k == "RowData":
            sp.raw = self.balanced_type()
            return sp
        elif k == "Avro":
            self.ws()
            sp.raw = self.balanced_json()
        else:
            raise self.err(f"unknown serializer {k!r}")
        self.expect(">")
        return sp

    def balanced_type(self) -> str:
        """The SQL type text up to the '>' closing ``RowData<``; quotes/backticks are skipped."""
        depth, st = 0, self.i
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in "`'":
                e = self.i + 1
                while True:
                    e = self.s.find(c, e)
                    if e < 0:
                        raise self.err("unterminated quote")
                    if self.s.startswith(c, e + 1):
                        e += 2
                        continue
                    break
                self.i = e + 1
                continue
            if c == "<":
                depth += 1
            elif c == ">":
                if depth == 0:
                    t = self.s[st : self.i].strip()
                    self.i += 1
                    return t
                depth -= 1
            self.i += 1
        raise self.err("unterminated RowData<")

    def balanced_json(self) -> str:
        try:
            _, end = json.JSONDecoder().raw_decode(self.s, self.i)
        except json.JSONDecodeError as e:
            raise self.err(f"bad Avro schema JSON: {e}") from None
        text = self.s[self.i : end]
        self.i = end
        return text


def parse_spec(text: str) -> Spec:
    p = _Parser(text)
    sp = p.spec()
    p.ws()
    if p.i != len(text):
        raise p.err("trailing text")
    return sp


# ------------------------------------------------------------------------------------ serializers


class World:
    """Builds serializers and values for SPECs, generating each named enum / POJO class once."""

    def __init__(self) -> None:
        self.enums: dict[str, type[enum.Enum]] = {}
        self.pojos: dict[str, type] = {}
        self._defs: dict[str, str] = {}

    def _define(self, sp: Spec) -> None:
        text = str(sp)
        prior = self._defs.setdefault(sp.cls, text)
        if prior != text:
            raise SpecError(f"class {sp.cls} defined twice differently: {prior} vs {text}")

    def enum_class(self, sp: Spec) -> type[enum.Enum]:
        self._define(sp)
        if sp.cls not in self.enums:
            self.enums[sp.cls] = enum.Enum(sp.cls.rsplit(".", 1)[-1], sp.consts)  # type: ignore[misc,assignment]
        return self.enums[sp.cls]

    def pojo_class(self, sp: Spec) -> type | None:
        """The dataclass of a POJO SPEC, or None (dict mode) when a field name cannot be a Python
        attribute: Python NFKC-normalises identifiers, so ``ｱ`` would become ``ア``."""
        self._define(sp)
        if any(unicodedata.normalize("NFKC", n) != n or not n.isidentifier() for n in sp.field_names):
            return None
        if sp.cls not in self.pojos:
            fields = [(n, Any, dataclasses.field(default=None)) for n in sp.field_names]
            self.pojos[sp.cls] = dataclasses.make_dataclass(sp.cls.rsplit(".", 1)[-1], fields)
        return self.pojos[sp.cls]

    def serializer(self, spec: Spec | str) -> Any:
        sp = parse_spec(spec) if isinstance(spec, str) else spec
        k = sp.kind
        if k in ATOMS:
            return getattr(S, ATOMS[k])()
        if k == "List":
            return S.ListSerializer(self.serializer(sp.args[0]))
        if k == "Map":
            return S.MapSerializer(self.serializer(sp.args[0]), self.serializer(sp.args[1]))
        if k == "Nullable":
            return S.NullableSerializer(self.serializer(sp.args[0]), pad_null_if_fixed_length=sp.padded)
        if k == "Tuple":
            return S.TupleSerializer([self.serializer(a) for a in sp.args])
        if k == "Row":
            return S.RowSerializer([self.serializer(a) for a in sp.args], supports_row_kind=not sp.legacy)
        if k == "Enum":
            return S.EnumSerializer(self.enum_class(sp), java_class_name=sp.cls)
        if k == "Pojo":
            fields = {n: self.serializer(a) for n, a in zip(sp.field_names, sp.args, strict=True)}
            return S.PojoSerializer(self.pojo_class(sp), fields, java_class_name=sp.cls)
        if k == "RowData":
            return S.RowDataSerializer(sp.raw)
        if k == "Avro":
            return S.AvroSerializer(json.loads(sp.raw))
        raise SpecError(f"unknown serializer kind {k!r}")

    # -------------------------------------------------------------------------------- values

    def value(self, spec: Spec | str, j: Any) -> Any:
        """The Python value a tagged JSON VALUE stands for under ``spec``."""
        sp = parse_spec(spec) if isinstance(spec, str) else spec
        k = sp.kind
        if k == "RowData":
            return decode_logical(parse_type(sp.raw), j)
        if k == "Avro":
            schema = json.loads(sp.raw)
            names: dict[str, Any] = {}
            _avro_collect(schema, names, "")
            return decode_avro(schema, j, names)
        if j is None:
            return None
        if k == "Boolean":
            return _typed(j, bool)
        if k in ("Byte", "Short", "Int", "Long"):
            return _int(j)
        if k in ("Float", "Double"):
            return decode_float(j)
        if k in ("Char", "String"):
            return decode_str(j)
        if k == "Bytes":
            return decode_bytes(j)
        if k == "BooleanArray":
            return [_typed(x, bool) for x in _typed(j, list)]
        if k in ("ShortArray", "IntArray", "LongArray"):
            return [_int(x) for x in _typed(j, list)]
        if k in ("FloatArray", "DoubleArray"):
            return [decode_float(x) for x in _typed(j, list)]
        if k in ("CharArray", "StringArray"):
            return [decode_str(x) for x in _typed(j, list)]
        if k == "List":
            return [self.value(sp.args[0], x) for x in _typed(j, list)]
        if k == "Map":
            return {self.value(sp.args[0], kk): self.value(sp.args[1], v) for kk, v in map_entries(j)}
        if k == "Nullable":
            return self.value(sp.args[0], j)
        if k == "Enum":
            return self.enum_class(sp)[_typed(j, str)]
        if k == "Tuple":
            items = _typed(j, list)
            if len(items) != len(sp.args):
                raise SpecError(f"tuple of {len(sp.args)} fields got {j!r}")
            return tuple(self.value(a, x) for a, x in zip(sp.args, items, strict=True))
        if k == "Row":
            fields, kind = row_parts(j)
            if len(fields) != len(sp.args):
                raise SpecError(f"row of {len(sp.args)} fields got {j!r}")
            return Row([self.value(a, x) for a, x in zip(sp.args, fields, strict=True)], kind)
        if k == "Pojo":
            obj = _typed(j, dict)
            unknown = set(obj) - set(sp.field_names)
            if unknown:
                raise SpecError(f"POJO {sp.cls} has no fields {sorted(unknown)}")
            cls = self.pojo_class(sp)
            values = {n: self.value(a, obj.get(n)) for n, a in zip(sp.field_names, sp.args, strict=True)}
            if cls is None:  # a dict in byte order: Flink's PojoSerializer sorts the fields by Java (UTF-16) order
                return {n: values[n] for n in sorted(values, key=lambda n: n.encode("utf-16-be"))}
            return cls(**values)
        raise SpecError(f"unknown serializer kind {k!r}")


# ------------------------------------------------------------------------------------ tags


def _typed(j: Any, t: type) -> Any:
    ok = isinstance(j, bool) if t is bool else isinstance(j, t) and not isinstance(j, bool)
    if not ok:
        raise SpecError(f"expected a JSON {t.__name__}, got {j!r}")
    return j


def _int(j: Any) -> int:
    if isinstance(j, bool) or not isinstance(j, int):
        raise SpecError(f"expected an integer, got {j!r}")
    return j


def _tag(j: Any, tag: str) -> Any:
    if not isinstance(j, dict) or tag not in j:
        raise SpecError(f"expected {{{tag!r}: ...}}, got {j!r}")
    return j[tag]


def decode_float(j: Any) -> float:
    """A JSON number, or ``{"$f": "NaN" | "Infinity" | "-Infinity" | "-0.0" | decimal text}``, or
    the raw bits of a NaN with a payload or sign: ``{"$fbits": 8 hex}`` (a float32, widened as C
    does, which keeps the payload) or ``{"$dbits": 16 hex}``."""
    if isinstance(j, dict) and "$fbits" in j:
        return float(struct.unpack(">f", bytes.fromhex(j["$fbits"]))[0])
    if isinstance(j, dict) and "$dbits" in j:
        return float(struct.unpack(">d", bytes.fromhex(j["$dbits"]))[0])
    if isinstance(j, dict):
        return float(_tag(j, "$f"))
    if isinstance(j, bool) or not isinstance(j, (int, float)):
        raise SpecError(f"expected a float, got {j!r}")
    return float(j)


def decode_str(j: Any) -> str | None:
    """A JSON string (or null), or ``{"$s": [UTF-16 code units]}`` for lone surrogates."""
    if j is None or isinstance(j, str):
        return j
    units = _tag(j, "$s")
    return units_to_str([_int(u) for u in units])


def decode_bytes(j: Any) -> bytes:
    return bytes.fromhex(_tag(j, "$b"))


def map_entries(j: Any) -> list[tuple[Any, Any]]:
    """``{"$map": [[k, v], ...]}``: ordered entries (order = byte order)."""
    return [(e[0], e[1]) for e in _tag(j, "$map")]


def row_parts(j: Any) -> tuple[list[Any], RowKind]:
    fields = _tag(j, "$row")
    kind = j.get("kind", "+I")
    if kind not in KINDS:
        raise SpecError(f"unknown row kind {kind!r}")
    return list(fields), KINDS[kind]


_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def decode_timestamp(t: LogicalType, j: Any) -> Any:
    """``{"$ts": [epoch millis, nano of millisecond]}``: a naive datetime for TIMESTAMP(p<=6), an
    aware UTC datetime for TIMESTAMP_LTZ(p<=6), :class:`statemorph.types.Timestamp` above 6 (or
    whenever the nanoseconds do not fit a datetime)."""
    millis, nanos = (_int(x) for x in _tag(j, "$ts"))
    precision = getattr(t, "precision", 6)
    if precision > 6 or nanos % 1000:
        return Timestamp(millis, nanos)
    epoch = _EPOCH_UTC if isinstance(t, LocalZonedTimestampType) else _EPOCH
    return epoch + dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)


def decode_logical(t: LogicalType, j: Any) -> Any:
    """A RowData field value under its logical type (the value mapping in docs/api.md)."""
    if j is None:
        return None
    root = t.type_root
    if root == "BOOLEAN":
        return _typed(j, bool)
    if root in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT"):
        return _int(j)
    if root in ("FLOAT", "DOUBLE"):
        return decode_float(j)
    if root == "DECIMAL":
        return decimal.Decimal(_tag(j, "$dec"))
    if root in ("CHAR", "VARCHAR"):
        return decode_str(j)
    if root in ("BINARY", "VARBINARY"):
        return decode_bytes(j)
    if root == "DATE":
        return dt.date.fromisoformat(_tag(j, "$date"))
    if root == "TIME_WITHOUT_TIME_ZONE":
        return dt.time.fromisoformat(_tag(j, "$time"))
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        return decode_timestamp(t, j)
    if isinstance(t, ArrayType):
        return [decode_logical(t.element_type, x) for x in _typed(j, list)]
    if isinstance(t, MapType):
        return {decode_logical(t.key_type, k): decode_logical(t.value_type, v) for k, v in map_entries(j)}
    if isinstance(t, MultisetType):
        return {decode_logical(t.element_type, k): _int(v) for k, v in map_entries(j)}
    if isinstance(t, RowType):
        fields, kind = row_parts(j)
        if len(fields) != len(t.fields):
            raise SpecError(f"{t} has {len(t.fields)} fields, got {j!r}")
        return Row([decode_logical(f.type, x) for f, x in zip(t.fields, fields, strict=True)], kind)
    raise SpecError(f"no value decoding for logical type {t}")


# ------------------------------------------------------------------------------------ Avro values

_AVRO_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _avro_resolve(schema: Any, names: dict[str, Any], ns: str = "") -> Any:
    if isinstance(schema, str) and schema not in _AVRO_PRIMITIVES:
        full = schema if "." in schema or not ns else f"{ns}.{schema}"
        if full in names:
            return names[full]
        if schema in names:
            return names[schema]
        raise SpecError(f"unknown Avro type name {schema!r}")
    return schema


_AVRO_COMPLEX = {"record", "enum", "array", "map", "fixed"}


def _avro_type(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    t = schema["type"]
    if isinstance(t, str) and (t in _AVRO_PRIMITIVES or t in _AVRO_COMPLEX):
        return t
    return _avro_type(t)


def _avro_register(schema: Any, names: dict[str, Any], ns: str) -> str:
    if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed"):
        nm = schema["name"]
        ns = schema.get("namespace", ns) if "." not in nm else nm.rsplit(".", 1)[0]
        full = nm if "." in nm else (f"{ns}.{nm}" if ns else nm)
        names[full] = schema
    return ns


def _avro_collect(schema: Any, names: dict[str, Any], ns: str) -> None:
    """Register every named type up front, so a reference may precede the value that defines it."""
    if isinstance(schema, list):
        for b in schema:
            _avro_collect(b, names, ns)
    elif isinstance(schema, dict):
        ns = _avro_register(schema, names, ns)
        t = schema.get("type")
        if t == "record":
            for f in schema["fields"]:
                _avro_collect(f["type"], names, ns)
        elif t == "array":
            _avro_collect(schema["items"], names, ns)
        elif t == "map":
            _avro_collect(schema["values"], names, ns)
        elif not isinstance(t, str):
            _avro_collect(t, names, ns)


def _avro_branch(union: list[Any], j: Any, names: dict[str, Any], ns: str) -> Any:
    """The first branch that accepts the JSON shape (the generator's rule, AvroCodec.branch)."""
    for b in union:
        rb = _avro_resolve(b, names, ns)
        t = _avro_type(rb)
        if j is None:
            ok = t == "null"
        elif isinstance(j, bool):
            ok = t == "boolean"
        elif isinstance(j, int):
            ok = (t == "int" and -(2**31) <= j < 2**31) or t in ("long", "float", "double")
        elif isinstance(j, float):
            ok = t in ("float", "double")
        elif isinstance(j, str):
            ok = t == "string" or (t == "enum" and j in rb["symbols"])
        elif isinstance(j, list):
            ok = t == "array"
        elif "$f" in j:
            ok = t in ("float", "double")
        elif "$s" in j:
            ok = t == "string"
        elif "$b" in j:
            ok = t in ("bytes", "fixed")
        elif "$map" in j:
            ok = t == "map"
        else:
            ok = t == "record"
        if ok:
            return b
    raise SpecError(f"no branch of Avro union {union} for {j!r}")


def decode_avro(schema: Any, j: Any, names: dict[str, Any], ns: str = "") -> Any:
    """A fastavro-style value (records and maps as dicts) under an Avro schema."""
    ns = _avro_register(schema, names, ns)
    schema = _avro_resolve(schema, names, ns)
    t = _avro_type(schema)
    if t == "union":
        return decode_avro(_avro_branch(schema, j, names, ns), j, names, ns)
    if isinstance(schema, dict) and not (
        isinstance(schema["type"], str) and schema["type"] in _AVRO_PRIMITIVES | _AVRO_COMPLEX
    ):
        return decode_avro(schema["type"], j, names, ns)  # {"type": <another schema or a name>}
    if t == "null":
        if j is not None:
            raise SpecError(f"Avro null got {j!r}")
        return None
    if t == "boolean":
        return _typed(j, bool)
    if t in ("int", "long"):
        return _int(j)
    if t in ("float", "double"):
        return decode_float(j)
    if t == "string":
        return decode_str(j)
    if t in ("bytes", "fixed"):
        return decode_bytes(j)
    if t == "enum":
        return _typed(j, str)
    if t == "array":
        return [decode_avro(schema["items"], x, names, ns) for x in _typed(j, list)]
    if t == "map":
        return {_typed(k, str): decode_avro(schema["values"], v, names, ns) for k, v in map_entries(j)}
    if t == "record":
        obj = _typed(j, dict)
        return {f["name"]: decode_avro(f["type"], obj.get(f["name"]), names, ns) for f in schema["fields"]}
    raise SpecError(f"unsupported Avro schema {schema!r}")


# ------------------------------------------------------------------------------------ comparison


class RecordDict(dict):  # type: ignore[type-arg]
    """A POJO as a serializer restored from a snapshot sees it: a dict by field name, compared
    without regard to key order (a record, not a byte-ordered map)."""


def without_classes(v: Any, world: World) -> Any:
    """The value as a serializer restored from a snapshot (no Python classes) reads it: the
    world's enum members become constant names, its POJO instances :class:`RecordDict`."""
    if isinstance(v, enum.Enum) and type(v) in world.enums.values():
        return v.name
    if type(v) in world.pojos.values():
        return RecordDict({f.name: without_classes(getattr(v, f.name), world) for f in dataclasses.fields(v)})
    if isinstance(v, Row):
        return Row([without_classes(x, world) for x in v], v.kind)
    if isinstance(v, list):
        return [without_classes(x, world) for x in v]
    if isinstance(v, tuple):
        return tuple(without_classes(x, world) for x in v)
    if isinstance(v, dict):
        return {without_classes(k, world): without_classes(x, world) for k, x in v.items()}
    return v


def _as_timestamp(v: Any) -> Timestamp | None:
    if isinstance(v, Timestamp):
        return v
    if isinstance(v, dt.datetime):
        return Timestamp.from_datetime(v)
    return None


_CANONICAL_NAN = struct.pack(">d", float("nan"))


def mismatch(expected: Any, got: Any, path: str = "value") -> str | None:
    """Where ``got`` differs from ``expected`` (None if equal): NaN equals NaN (a NaN with a payload
    only the same payload), -0.0 differs from
    0.0, rows compare their RowKind, dicts compare in order, bool is not int."""
    if isinstance(expected, float):
        if not isinstance(got, float):
            return f"{path}: expected float {expected!r}, got {got!r}"
        if math.isnan(expected):
            bits_e, bits_g = struct.pack(">d", expected), struct.pack(">d", got)
            if not math.isnan(got) or (bits_e != _CANONICAL_NAN and bits_e != bits_g):
                return f"{path}: expected NaN with bits {bits_e.hex()}, got {got!r} (bits {bits_g.hex()})"
            return None
        if expected != got or math.copysign(1.0, expected) != math.copysign(1.0, got):
            return f"{path}: expected {expected!r}, got {got!r}"
        return None
    if isinstance(expected, bool) or isinstance(got, bool):
        return (
            None if type(expected) is type(got) and expected == got else f"{path}: expected {expected!r}, got {got!r}"
        )
    ts_e, ts_g = _as_timestamp(expected), _as_timestamp(got)
    if ts_e is not None:
        if ts_g is None or ts_e != ts_g:
            return f"{path}: expected timestamp {expected!r}, got {got!r}"
        if (
            isinstance(expected, dt.datetime)
            and isinstance(got, dt.datetime)
            and ((expected.tzinfo is None) != (got.tzinfo is None))
        ):
            return f"{path}: expected {expected!r}, got {got!r} (naive vs aware)"
        return None
    if isinstance(expected, Row):
        if not isinstance(got, tuple):
            return f"{path}: expected a row {expected!r}, got {got!r}"
        if row_kind_of(got) != expected.kind:
            return f"{path}: expected RowKind {expected.kind.name}, got {row_kind_of(got).name}"
        return _seq(expected, got, path)
    if isinstance(expected, (list, tuple)):
        want = list if isinstance(expected, list) else tuple
        if not isinstance(got, want):
            return f"{path}: expected a {want.__name__} {expected!r}, got {type(got).__name__} {got!r}"
        return _seq(expected, got, path)
    if isinstance(expected, RecordDict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return f"{path}: expected a record with fields {sorted(expected)}, got {got!r}"
        for k, ve in expected.items():
            bad = mismatch(ve, got[k], f"{path}.{k}")
            if bad:
                return bad
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{path}: expected a dict {expected!r}, got {got!r}"
        if len(expected) != len(got):
            return f"{path}: expected {len(expected)} entries, got {len(got)}: {got!r}"
        for i, ((ke, ve), (kg, vg)) in enumerate(zip(expected.items(), got.items(), strict=True)):
            bad = mismatch(ke, kg, f"{path}<key {i}>") or mismatch(ve, vg, f"{path}[{ke!r}]")
            if bad:
                return bad
        return None
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        if type(got) is not type(expected):
            return f"{path}: expected a {type(expected).__name__} {expected!r}, got {got!r}"
        for f in dataclasses.fields(expected):
            bad = mismatch(getattr(expected, f.name), getattr(got, f.name), f"{path}.{f.name}")
            if bad:
                return bad
        return None
    if isinstance(expected, bytes):
        return (
            None
            if isinstance(got, (bytes, bytearray)) and bytes(got) == expected
            else (f"{path}: expected {expected!r}, got {got!r}")
        )
    if expected is None or got is None:
        return None if expected is got else f"{path}: expected {expected!r}, got {got!r}"
    if isinstance(expected, (int, str, decimal.Decimal, dt.date, dt.time, enum.Enum)):
        if type(got) is not type(expected) or expected != got:
            return f"{path}: expected {type(expected).__name__} {expected!r}, got {type(got).__name__} {got!r}"
        return None
    return None if expected == got else f"{path}: expected {expected!r}, got {got!r}"


def _seq(expected: Any, got: Any, path: str) -> str | None:
    if len(expected) != len(got):
        return f"{path}: expected {len(expected)} items, got {len(got)}: {got!r}"
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        bad = mismatch(e, g, f"{path}[{i}]")
        if bad:
            return bad
    return None


def golden_lines(stem: str) -> dict[str, dict[str, Any]]:
    """The lines of tests/data/golden/<stem>.jsonl (vectors real Flink wrote through ci/golden) by case name."""
    path = Path(__file__).resolve().parents[1] / "data" / "golden" / f"{stem}.jsonl"
    lines = (json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip())
    return {d["case"]: d for d in lines}
