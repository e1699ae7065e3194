"""Avro schemas as a small typed tree, and their JSON exactly as Avro Java prints it.

Why a tree of our own: fastavro's ``parse_schema`` validates the schema and resolves names (we
never hand-parse), but its output is a dict with names as strings. The codec, the resolver and the
compatibility messages all want real nodes with parent links resolved, including recursion, so the
parsed dict is turned into :class:`AvroNode` objects once.

Why a JSON renderer: Flink stores ``schema.toString(false)`` in the snapshot, and our snapshot bytes
must equal Flink's. Avro Java's compact JSON has a fixed key order (type, name, namespace, doc,
fields/symbols/size/items/values, then custom properties, then aliases), only prints a namespace
where it differs from the enclosing record's, writes references to already-printed named types as
names, and formats numbers and escapes strings the way Jackson does. :func:`java_schema_json`
reproduces that from the *original* JSON, whose property order fastavro does not keep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from decimal import Decimal
from typing import Any, TypeVar, cast

from ..errors import TypeParseError
from ..extras import require

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# Avro Java's reserved keys: everything else on a schema / field is a custom property.
_SCHEMA_RESERVED = frozenset({"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type",
                              "aliases"})
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})


class AvroNode:
    """One schema node. ``kind`` is the Avro type name (``record`` also for ``error``)."""

    __slots__ = ("kind", "logical", "props")

    def __init__(self, kind: str, props: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.props = props or {}
        lt = self.props.get("logicalType")
        self.logical: str | None = lt if isinstance(lt, str) else None

    @property
    def label(self) -> str:
        """How the node is named in messages and in union tuple notation."""
        return self.kind

    def __repr__(self) -> str:
        return f"<avro {self.label}>"


class NamedNode(AvroNode):
    __slots__ = ("fullname", "name", "namespace", "aliases", "doc")

    def __init__(self, kind: str, fullname: str, props: dict[str, Any], aliases: list[str], doc: str | None) -> None:
        super().__init__(kind, props)
        self.fullname = fullname
        self.namespace, _, self.name = fullname.rpartition(".")
        self.aliases = aliases
        self.doc = doc

    @property
    def label(self) -> str:
        return self.fullname


class FieldNode:
    __slots__ = ("name", "type", "has_default", "default", "aliases", "order", "position")

    def __init__(self, name: str, type: AvroNode, has_default: bool, default: Any, aliases: list[str],
                 order: str, position: int) -> None:
        self.name = name
        self.type = type
        self.has_default = has_default
        self.default = default
        self.aliases = aliases
        self.order = order
        self.position = position


class RecordNode(NamedNode):
    __slots__ = ("fields", "fields_by_name", "is_error")

    def __init__(self, fullname: str, props: dict[str, Any], aliases: list[str], doc: str | None,
                 is_error: bool) -> None:
        super().__init__("record", fullname, props, aliases, doc)
        self.fields: list[FieldNode] = []
        self.fields_by_name: dict[str, FieldNode] = {}
        self.is_error = is_error


class EnumNode(NamedNode):
    __slots__ = ("symbols", "index", "default")

    def __init__(self, fullname: str, props: dict[str, Any], aliases: list[str], doc: str | None,
                 symbols: list[str], default: str | None) -> None:
        super().__init__("enum", fullname, props, aliases, doc)
        self.symbols = symbols
        self.index = {s: i for i, s in enumerate(symbols)}
        self.default = default


class FixedNode(NamedNode):
    __slots__ = ("size",)

    def __init__(self, fullname: str, props: dict[str, Any], aliases: list[str], doc: str | None, size: int) -> None:
        super().__init__("fixed", fullname, props, aliases, doc)
        self.size = size


class ArrayNode(AvroNode):
    __slots__ = ("items",)

    def __init__(self, items: AvroNode, props: dict[str, Any]) -> None:
        super().__init__("array", props)
        self.items = items


class MapNode(AvroNode):
    __slots__ = ("values",)

    def __init__(self, values: AvroNode, props: dict[str, Any]) -> None:
        super().__init__("map", props)
        self.values = values


class UnionNode(AvroNode):
    __slots__ = ("branches",)

    def __init__(self, branches: list[AvroNode]) -> None:
        super().__init__("union")
        self.branches = branches

    @property
    def label(self) -> str:
        return "[" + ", ".join(b.label for b in self.branches) + "]"


F = TypeVar("F", bound=Callable[..., Any])


def memoized(cache: dict[Hashable, F], key: Hashable, build: Callable[[], F]) -> F:
    """Compile once per (named) node. A recursive reference met while ``build`` runs gets a
    trampoline through a one-element cell, filled when the compilation finishes."""
    if key in cache:
        return cache[key]
    cell: list[F] = []
    cache[key] = cast(F, lambda *args: cell[0](*args))
    try:
        compiled = build()
    except BaseException:
        del cache[key]
        raise
    cell.append(compiled)
    cache[key] = compiled
    return compiled


# -- parsing -----------------------------------------------------------------------------------

def load_schema(schema: str | Mapping[str, Any] | list[Any]) -> tuple[Any, Any]:
    """The user's schema as JSON data (order kept) plus fastavro's parsed, validated form."""
    fastavro = require("fastavro", "the Avro serializer")  # an optional dependency: only Avro users need it

    if isinstance(schema, str):
        text = schema.strip()
        if text.startswith(("{", "[", '"')):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as e:
                raise TypeParseError(f"Avro schema is not valid JSON: {e.msg}", text[:200], e.pos) from None
            except RecursionError:
                raise TypeParseError("Avro schema JSON is nested too deeply") from None
        else:
            raw = text  # a bare primitive name such as  int
    else:
        raw = schema
    try:
        parsed = fastavro.parse_schema(_plain(raw), _force=True)
    except Exception as e:  # fastavro raises SchemaParseException, ValueError, KeyError, TypeError ...
        raise TypeParseError(f"invalid Avro schema: {e}") from None
    return raw, parsed


def _plain(raw: Any) -> Any:
    """A deep copy as plain dicts/lists, so fastavro never mutates or keeps the caller's object."""
    if isinstance(raw, Mapping):
        return {k: _plain(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return [_plain(v) for v in raw]
    return raw


def build_tree(parsed: Any) -> AvroNode:
    """Turn fastavro's parsed schema into nodes; named references become the same node object."""
    named: dict[str, NamedNode] = {}

    def build(s: Any) -> AvroNode:
        if isinstance(s, str):
            if s in PRIMITIVES:
                return AvroNode(s)
            ref = named.get(s)
            if ref is None:
                raise TypeParseError(f"invalid Avro schema: unknown named type {s!r}")
            return ref
        if isinstance(s, list):
            return UnionNode([build(b) for b in s])
        if not isinstance(s, Mapping):
            raise TypeParseError(f"invalid Avro schema: unexpected {type(s).__name__} {s!r}")
        t = s.get("type")
        if isinstance(t, (Mapping, list)):
            return build(t)
        props = {k: v for k, v in s.items()
                 if not k.startswith("__") and k not in (_ENUM_RESERVED if t == "enum" else _SCHEMA_RESERVED)}
        if t in PRIMITIVES:
            return AvroNode(t, props)
        if t in ("record", "error"):
            rec = RecordNode(s["name"], props, list(s.get("aliases") or ()), s.get("doc"), t == "error")
            rec.aliases = [_qualify(a, rec.namespace) for a in rec.aliases]
            named[rec.fullname] = rec
            for i, f in enumerate(s.get("fields") or ()):
                fnode = FieldNode(f["name"], build(f["type"]), "default" in f, f.get("default"),
                                  list(f.get("aliases") or ()), f.get("order", "ascending"), i)
                rec.fields.append(fnode)
                rec.fields_by_name[fnode.name] = fnode
            return rec
        if t == "enum":
            node: NamedNode = EnumNode(s["name"], props, list(s.get("aliases") or ()), s.get("doc"),
                                       list(s["symbols"]), s.get("default"))
        elif t == "fixed":
            node = FixedNode(s["name"], props, list(s.get("aliases") or ()), s.get("doc"), int(s["size"]))
        elif t == "array":
            return ArrayNode(build(s["items"]), props)
        elif t == "map":
            return MapNode(build(s["values"]), props)
        else:
            node_name = s.get("name")
            if isinstance(t, str) and t in named and node_name is None:
                return named[t]
            raise TypeParseError(f"invalid Avro schema: unknown type {t!r}")
        node.aliases = [_qualify(a, node.namespace) for a in node.aliases]
        named[node.fullname] = node
        return node

    return build(parsed)


def _qualify(name: str, space: str) -> str:
    return name if "." in name or not space else f"{space}.{name}"


# -- Avro Java's Schema.toString(false) ------------------------------------------------------------------

def java_schema_json(raw: Any) -> str:
    """Avro Java's compact JSON for the schema given as JSON data ``raw`` (already validated)."""
    out: list[str] = []
    _JavaWriter(out).schema(raw, None, None)
    return "".join(out)


class _JavaWriter:
    def __init__(self, out: list[str]) -> None:
        self.out = out
        self.known: set[str] = set()

    def schema(self, s: Any, space: str | None, out_space: str | None) -> None:
        """``space``: namespace for resolving names; ``out_space``: Java's ``names.space`` for printing."""
        w = self.out.append
        if isinstance(s, str):
            if s in PRIMITIVES:
                w(jstr(s))
            else:
                self.ref(_full(s, space), out_space)
            return
        if isinstance(s, (list, tuple)):
            w("[")
            for i, b in enumerate(s):
                if i:
                    w(",")
                self.schema(b, space, out_space)
            w("]")
            return
        t = s.get("type")
        if isinstance(t, (Mapping, list, tuple)):
            self.schema(t, space, out_space)
            return
        if t in PRIMITIVES:
            props = [(k, v) for k, v in s.items() if k not in _SCHEMA_RESERVED]
            if not props:
                w(jstr(t))
                return
            w('{"type":' + jstr(t))
            self.props(props)
            w("}")
            return
        if t == "array" or t == "map":
            key = "items" if t == "array" else "values"
            w('{"type":' + jstr(t) + "," + jstr(key) + ":")
            self.schema(s[key], space, out_space)
            self.props([(k, v) for k, v in s.items() if k not in _SCHEMA_RESERVED])
            w("}")
            return
        if t not in NAMED:
            # a reference written in object form, e.g. {"type": "com.x.Address"}
            self.ref(_full(t, space), out_space)
            return
        ns = s.get("namespace")
        full = _full(s["name"], ns if ns is not None else space)
        own_space = full.rpartition(".")[0] or None
        if full in self.known:
            self.ref(full, out_space)
            return
        self.known.add(full)
        w('{"type":' + jstr(t) + ',"name":' + jstr(full.rpartition(".")[2]))
        if own_space is not None:
            if own_space != out_space:
                w(',"namespace":' + jstr(own_space))
        elif out_space is not None:
            w(',"namespace":""')
        if s.get("doc") is not None:
            w(',"doc":' + jstr(s["doc"]))
        reserved = _SCHEMA_RESERVED
        if t in ("record", "error"):
            w(',"fields":[')
            for i, f in enumerate(s.get("fields") or ()):
                if i:
                    w(",")
                self.field(f, own_space)
            w("]")
        elif t == "enum":
            w(',"symbols":[' + ",".join(jstr(x) for x in s["symbols"]) + "]")
            if s.get("default") is not None:
                w(',"default":' + jstr(s["default"]))
            reserved = _ENUM_RESERVED
        else:
            w(',"size":' + str(int(s["size"])))
        self.props([(k, v) for k, v in s.items() if k not in reserved])
        aliases = s.get("aliases")
        if aliases:
            names = []
            for a in aliases:
                a_space, _, a_name = _full(a, own_space).rpartition(".")
                names.append(a_name if not a_space or a_space == own_space else f"{a_space}.{a_name}")
            w(',"aliases":[' + ",".join(jstr(x) for x in dict.fromkeys(names)) + "]")
        w("}")

    def field(self, f: Mapping[str, Any], space: str | None) -> None:
        w = self.out.append
        w('{"name":' + jstr(f["name"]) + ',"type":')
        self.schema(f["type"], space, space)
        if f.get("doc") is not None:
            w(',"doc":' + jstr(f["doc"]))
        if "default" in f:
            w(',"default":' + java_json_value(f["default"]))
        order = f.get("order", "ascending")
        if order != "ascending":
            w(',"order":' + jstr(str(order).lower()))
        if f.get("aliases"):
            w(',"aliases":[' + ",".join(jstr(x) for x in dict.fromkeys(f["aliases"])) + "]")
        self.props([(k, v) for k, v in f.items() if k not in _FIELD_RESERVED])
        w("}")

    def ref(self, full: str, out_space: str | None) -> None:
        space, _, name = full.rpartition(".")
        self.out.append(jstr(name if not space or space == out_space else full))

    def props(self, items: list[tuple[str, Any]]) -> None:
        for k, v in items:
            if not k.startswith("__"):
                self.out.append("," + jstr(k) + ":" + java_json_value(v))


def _full(name: str, space: str | None) -> str:
    if "." in name or not space:
        return name
    return f"{space}.{name}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def jstr(s: str) -> str:
    """A JSON string literal as Jackson writes it (non-ASCII raw, control chars as \\u00XX uppercase)."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    parts = ['"']
    for ch in s:
        e = _ESCAPES.get(ch)
        if e is not None:
            parts.append(e)
        elif ch < " ":
            parts.append(f"\\u{ord(ch):04X}")
        else:
            parts.append(ch)
    parts.append('"')
    return "".join(parts)


def java_json_value(v: Any) -> str:
    """A JSON value as Jackson's ``writeTree`` prints it (Java number formatting, no spaces)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double(v)
    if isinstance(v, Decimal):
        return java_double(float(v))
    if isinstance(v, str):
        return jstr(v)
    if isinstance(v, Mapping):
        return "{" + ",".join(jstr(str(k)) + ":" + java_json_value(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(java_json_value(x) for x in v) + "]"
    if isinstance(v, (bytes, bytearray)):
        return jstr(bytes(v).decode("latin-1"))
    raise TypeParseError(f"invalid Avro schema: {type(v).__name__} value {v!r} is not JSON")


def java_double(x: float) -> str:
    """Java's ``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE±n``; shortest digits."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign, digits_t, exp = Decimal(repr(x)).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    exp += len("".join(map(str, digits_t))) - len(digits)
    sci = len(digits) - 1 + exp  # x = d.ddd * 10**sci
    neg = "-" if sign else ""
    if -3 <= sci < 7:
        if sci >= 0:
            whole = digits[: sci + 1].ljust(sci + 1, "0")
            frac = digits[sci + 1:] or "0"
        else:
            whole = "0"
            frac = "0" * (-sci - 1) + digits
        return f"{neg}{whole}.{frac}"
    return f"{neg}{digits[0]}.{digits[1:] or '0'}E{sci}"


__all__ = [
    "AvroNode",
    "ArrayNode",
    "EnumNode",
    "FieldNode",
    "FixedNode",
    "MapNode",
    "NamedNode",
    "RecordNode",
    "UnionNode",
    "build_tree",
    "java_schema_json",
    "load_schema",
    "memoized",
]
