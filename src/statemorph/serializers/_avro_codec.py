"""Flink's state encoding of Avro data, compiled once per schema into writer/reader closures.

Flink does not store standard Avro binary: its ``DataOutputEncoder`` under Avro's
``GenericDatumWriter`` writes ints, enum indexes and union indexes as i32 BE, longs as i64 BE,
floats/doubles with ``writeFloat``/``writeDouble``, strings and bytes as i32 BE length + bytes, fixed
raw, and arrays/maps as ``VARLEN(count)`` (only when count > 0; unsigned 7-bit LE varint, no zig-zag)
then the items, then a single ``00`` (docs/formats.md §2.11). Readers accept any number of blocks,
as ``DataInputDecoder`` under Avro's reader does.

Why closures: a schema is walked once at construction; serializing a record then costs one Python
call per value, with no per-record type dispatch. Recursive named types go through a one-element
trampoline cell. Error messages carry the field path (``Event.location.lat``), set by the innermost
record that sees the error, and the byte offset from the bounds-checked input view.
"""

from __future__ import annotations

import copy
import struct
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from ..errors import MalformedDataError, SerializationError, StateFormatError, TruncatedDataError
from ..io import DataInputDeserializer, DataOutputSerializer
from ._avro_schema import ArrayNode, AvroNode, EnumNode, FixedNode, MapNode, NamedNode, RecordNode, UnionNode, memoized
from ._avro_values import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, compile_matcher, default_value, logical_type
from .strings import varlen

Writer = Callable[[Any, DataOutputSerializer], None]
Reader = Callable[[DataInputDeserializer], Any]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_F32_NAN = b"\x7f\xc0\x00\x00"
_F64_NAN = b"\x7f\xf8\x00\x00\x00\x00\x00\x00"
_MISSING = object()

# Items that take no bytes (null, empty records) cannot be bounded by the input length; this caps
# how many one deserialize call may produce, so a hostile count cannot allocate without limit.
ZERO_WIDTH_ITEM_BUDGET = 1 << 20
_budget = threading.local()
_MAX_COUNT_BYTES = 10  # a u64 in 7-bit groups


def _tag(e: Exception, path: str) -> Exception:
    """Add the field path to an error once (the innermost record that sees it names the field)."""
    if getattr(e, "avro_path", None) is not None:
        return e
    tagged = copy.copy(e)
    tagged.args = (f"{e.args[0] if e.args else e} [avro field {path}]",) + tuple(e.args[1:])
    tagged.avro_path = path  # type: ignore[attr-defined]
    return tagged


def _read_index(src: DataInputDeserializer, count: int, kind: str, of: str) -> int:
    """An enum symbol's or a union branch's index (``kind``), which must be below ``count``; ``of``
    names the enum or union and the field for the message."""
    start = src.position
    i = src.read_int()
    if not 0 <= i < count:
        raise MalformedDataError(f"{kind} index {i} at offset {start} is out of range for {of}")
    return i


def _describe(v: Any) -> str:
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(v).__name__} {text}"


def _f32(v: float) -> bytes:
    if v != v:
        return _F32_NAN
    try:
        return _F32.pack(v)
    except OverflowError:  # Java's (float) cast of a huge double gives an infinity
        return _F32.pack(float("inf") if v > 0 else float("-inf"))


def _f64(v: float) -> bytes:
    return _F64_NAN if v != v else _F64.pack(v)


def read_count(src: DataInputDeserializer, path: str) -> int:
    """``DataInputDecoder.readVarLongCount``: an unsigned 7-bit little-endian varint."""
    start = src.position
    value = shift = 0
    for _ in range(_MAX_COUNT_BYTES):
        b = src.read_unsigned_byte()
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    raise MalformedDataError(f"array/map block count at offset {start} runs over {_MAX_COUNT_BYTES} bytes "
                             f"[avro field {path}]")


def min_size(node: AvroNode, seen: frozenset[int] = frozenset()) -> int:
    """The fewest bytes one value of ``node`` takes; bounds counts read from hostile data."""
    if id(node) in seen:
        return 0
    kind = node.kind
    if kind in ("null",):
        return 0
    if kind == "boolean":
        return 1
    if kind in ("int", "float", "string", "bytes", "enum", "union"):
        if isinstance(node, UnionNode):
            inner = seen | {id(node)}
            return 4 + min(min_size(b, inner) for b in node.branches) if node.branches else 4
        return 4
    if kind in ("long", "double"):
        return 8
    if isinstance(node, FixedNode):
        return node.size
    if kind in ("array", "map"):
        return 1
    if isinstance(node, RecordNode):
        inner = seen | {id(node)}
        return sum(min_size(f.type, inner) for f in node.fields)
    return 0


class AvroCodec:
    """The compiled writer and reader of one schema tree (``root``)."""

    def __init__(self, root: AvroNode, root_path: str) -> None:
        self.root = root
        self._writers: dict[Hashable, Writer] = {}
        self._readers: dict[Hashable, Reader] = {}
        self._matchers: dict[Hashable, Any] = {}
        self.write: Writer = self._writer(root, root_path)
        self.read: Reader = self._reader(root, root_path)
        self.root_path = root_path

    # -- public entry points -----------------------------------------------------------------
    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        try:
            self.write(value, out)
        except SerializationError as e:
            raise _tag(e, self.root_path) from None
        except RecursionError:
            raise SerializationError(f"avro value of {self.root_path} is nested too deeply to write "
                                     f"(Python recursion limit)") from None

    def deserialize(self, src: DataInputDeserializer) -> Any:
        _budget.left = ZERO_WIDTH_ITEM_BUDGET
        start = src.position
        try:
            return self.read(src)
        except StateFormatError as e:
            raise _tag(e, self.root_path) from None
        except RecursionError:
            raise MalformedDataError(f"avro value of {self.root_path} at offset {start} is nested too deeply "
                                     f"to read (Python recursion limit); the data is likely corrupt") from None

    def choose_branch(self, union: UnionNode, value: Any) -> tuple[int, Any]:
        """The branch a value is written in (exposed for the resolver)."""
        return self._chooser(union, self.root_path)(value)

    # -- compilation with memo for named (possibly recursive) types ---------------------------
    def _writer(self, node: AvroNode, path: str) -> Writer:
        if isinstance(node, NamedNode):
            return memoized(self._writers, id(node), lambda: self._make_writer(node, path))
        return self._make_writer(node, path)

    def _reader(self, node: AvroNode, path: str) -> Reader:
        if isinstance(node, NamedNode):
            return memoized(self._readers, id(node), lambda: self._make_reader(node, path))
        return self._make_reader(node, path)

    # -- writers ---------------------------------------------------------------------------------
    def _make_writer(self, node: AvroNode, path: str) -> Writer:  # noqa: C901 - one branch per Avro type
        kind = node.kind
        lt = logical_type(node)
        to_raw = lt.to_raw if lt is not None else None

        def bad(v: Any, expected: str) -> SerializationError:
            return SerializationError(f"avro field {path}: expected {expected}, got {_describe(v)}")

        if kind == "null":
            def w_null(v: Any, out: DataOutputSerializer) -> None:
                if v is not None:
                    raise bad(v, "None (null)")
            return w_null
        if kind == "boolean":
            def w_bool(v: Any, out: DataOutputSerializer) -> None:
                if not isinstance(v, bool):
                    raise bad(v, "bool")
                out.write(b"\x01" if v else b"\x00")
            return w_bool
        if kind in ("int", "long"):
            lo, hi, st = (INT_MIN, INT_MAX, _I32) if kind == "int" else (LONG_MIN, LONG_MAX, _I64)
            label = kind if lt is None else f"{kind} ({lt.name})"

            def w_integer(v: Any, out: DataOutputSerializer) -> None:
                if to_raw is not None:
                    try:
                        v = to_raw(v)
                    except (TypeError, ValueError, OverflowError, ArithmeticError) as e:
                        raise bad(v, f"{label}: {e}") from None
                if not isinstance(v, int) or isinstance(v, bool):
                    raise bad(v, label)
                if not lo <= v <= hi:
                    raise SerializationError(f"avro field {path}: {v} is out of range for {kind}")
                out.write(st.pack(v))
            return w_integer
        if kind in ("float", "double"):
            pack = _f32 if kind == "float" else _f64

            def w_real(v: Any, out: DataOutputSerializer) -> None:
                if not isinstance(v, (float, int)) or isinstance(v, bool):
                    raise bad(v, f"float or int ({kind})")
                out.write(pack(float(v)))
            return w_real
        if kind == "string":
            def w_string(v: Any, out: DataOutputSerializer) -> None:
                if to_raw is not None:
                    v = to_raw(v)
                if not isinstance(v, str):
                    raise bad(v, "str")
                try:
                    data = v.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise SerializationError(f"avro field {path}: string is not encodable as UTF-8 ({e.reason} "
                                             f"at index {e.start})") from None
                out.write(_I32.pack(len(data)))
                out.write(data)
            return w_string
        if kind == "bytes":
            def w_bytes(v: Any, out: DataOutputSerializer) -> None:
                if to_raw is not None:
                    v = to_raw(v)
                if not isinstance(v, (bytes, bytearray, memoryview)):
                    raise bad(v, "bytes")
                out.write(_I32.pack(len(v)))
                out.write(v)
            return w_bytes
        if isinstance(node, FixedNode):
            size = node.size

            def w_fixed(v: Any, out: DataOutputSerializer) -> None:
                if to_raw is not None:
                    v = to_raw(v)
                if not isinstance(v, (bytes, bytearray, memoryview)):
                    raise bad(v, f"bytes of length {size} (fixed {node.fullname})")
                if len(v) != size:
                    raise SerializationError(f"avro field {path}: fixed {node.fullname} needs {size} bytes, "
                                             f"got {len(v)}")
                out.write(v)
            return w_fixed
        if isinstance(node, EnumNode):
            index = node.index

            def w_enum(v: Any, out: DataOutputSerializer) -> None:
                i = index.get(v if isinstance(v, str) else str(getattr(v, "name", "")))
                if i is None:
                    raise SerializationError(f"avro field {path}: {v!r} is not a symbol of enum {node.fullname} "
                                             f"{node.symbols}")
                out.write(_I32.pack(i))
            return w_enum
        if isinstance(node, ArrayNode):
            item = self._writer(node.items, path + "[]")

            def w_array(v: Any, out: DataOutputSerializer) -> None:
                if not isinstance(v, (list, tuple)):
                    raise bad(v, "list (array)")
                if v:
                    out.write(varlen(len(v)))
                    for x in v:
                        item(x, out)
                out.write(b"\x00")
            return w_array
        if isinstance(node, MapNode):
            value_w = self._writer(node.values, path + "{}")

            def w_map(v: Any, out: DataOutputSerializer) -> None:
                if not isinstance(v, Mapping):
                    raise bad(v, "dict (map)")
                if v:
                    out.write(varlen(len(v)))
                    for k, x in v.items():
                        if not isinstance(k, str):
                            raise SerializationError(f"avro field {path}: map keys must be str, got {_describe(k)}")
                        data = k.encode("utf-8", "strict")
                        out.write(_I32.pack(len(data)))
                        out.write(data)
                        value_w(x, out)
                out.write(b"\x00")
            return w_map
        if isinstance(node, RecordNode):
            return self._record_writer(node, path)
        if isinstance(node, UnionNode):
            choose = self._chooser(node, path)
            branch_writers = [self._writer(b, path) for b in node.branches]
            packed = [_I32.pack(i) for i in range(len(node.branches))]

            def w_union(v: Any, out: DataOutputSerializer) -> None:
                i, v = choose(v)
                out.write(packed[i])
                branch_writers[i](v, out)
            return w_union
        raise AssertionError(kind)  # pragma: no cover

    def _record_writer(self, node: RecordNode, path: str) -> Writer:
        fields: list[tuple[str, Writer, Any, str]] = []
        for f in node.fields:
            fpath = f"{path}.{f.name}"
            if f.has_default:
                try:
                    fallback: Any = default_value(f.type, f.default)
                except ValueError:
                    fallback = _MISSING
            else:
                fallback = None if compile_matcher(f.type, self._matchers)(None) else _MISSING
            fields.append((f.name, self._writer(f.type, fpath), fallback, fpath))

        def w_record(v: Any, out: DataOutputSerializer) -> None:
            if not isinstance(v, Mapping):
                raise SerializationError(f"avro field {path}: expected dict (record {node.fullname}), "
                                         f"got {_describe(v)}")
            for name, w, fallback, fpath in fields:
                x = v.get(name, _MISSING)
                if x is _MISSING:
                    if fallback is _MISSING:
                        raise SerializationError(f"avro field {fpath}: no value and no default "
                                                 f"(record {node.fullname})")
                    x = fallback
                try:
                    w(x, out)
                except SerializationError as e:
                    raise _tag(e, fpath) from None
        return w_record

    def _chooser(self, node: UnionNode, path: str) -> Callable[[Any], tuple[int, Any]]:
        """fastavro's branch choice: ``(name, value)`` tuple notation, else the first branch whose
        type fits (records: the one matching most fields; float only if no double follows)."""
        matchers = [compile_matcher(b, self._matchers) for b in node.branches]
        names: dict[str, int] = {}
        for i, b in enumerate(node.branches):
            names.setdefault(b.label, i)
            if isinstance(b, NamedNode):
                names.setdefault(b.name, i)
            if b.logical:
                names.setdefault(b.logical, i)
            names.setdefault(b.kind, i)
        kinds = [b.kind for b in node.branches]
        records = [set(f.name for f in b.fields) if isinstance(b, RecordNode) else None for b in node.branches]
        label = node.label

        def choose(v: Any) -> tuple[int, Any]:
            if type(v) is tuple and len(v) == 2 and isinstance(v[0], str) and v[0] in names:
                i = names[v[0]]
                return i, v[1]
            best, most = -1, -1
            for i, m in enumerate(matchers):
                if not m(v):
                    continue
                fields = records[i]
                if fields is not None:
                    n = len(fields.intersection(v))
                    if n > most:
                        best, most = i, n
                    continue
                if kinds[i] == "float":
                    j = next((j for j in range(i + 1, len(kinds)) if kinds[j] == "double"), -1)
                    return (j if j >= 0 else i), v
                if best < 0:
                    return i, v
            if best >= 0:
                return best, v
            raise SerializationError(f"avro field {path}: {_describe(v)} matches no branch of union {label}")
        return choose

    # -- readers ---------------------------------------------------------------------------------
    def _make_reader(self, node: AvroNode, path: str) -> Reader:  # noqa: C901
        kind = node.kind
        lt = logical_type(node)
        from_raw = lt.from_raw if lt is not None else None

        def convert(raw: Any, start: int) -> Any:
            assert from_raw is not None and lt is not None
            try:
                return from_raw(raw)
            except (ValueError, OverflowError, ArithmeticError) as e:
                raise MalformedDataError(f"value {raw!r} at offset {start} is not a valid {lt.name}: {e} "
                                         f"[avro field {path}]") from None

        if kind == "null":
            return lambda src: None
        if kind == "boolean":
            return lambda src: src.read_boolean()
        if kind in ("int", "long", "float", "double"):
            raw_read = {"int": DataInputDeserializer.read_int, "long": DataInputDeserializer.read_long,
                        "float": DataInputDeserializer.read_float,
                        "double": DataInputDeserializer.read_double}[kind]
            if from_raw is None:
                return raw_read

            def r_logical(src: DataInputDeserializer) -> Any:
                start = src.position
                return convert(raw_read(src), start)
            return r_logical
        if kind in ("string", "bytes"):
            is_string = kind == "string"

            def r_blob(src: DataInputDeserializer) -> Any:
                start = src.position
                n = src.read_int()
                if n < 0:
                    raise MalformedDataError(f"negative {kind} length {n} at offset {start} [avro field {path}]")
                data = src.read_fully(n, f"{kind} of {n} bytes")
                if is_string:
                    try:
                        value: Any = data.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise MalformedDataError(f"invalid UTF-8 in string at offset {start + 4 + e.start} "
                                                 f"({e.reason}) [avro field {path}]") from None
                else:
                    value = data
                return value if from_raw is None else convert(value, start)
            return r_blob
        if isinstance(node, FixedNode):
            size = node.size

            def r_fixed(src: DataInputDeserializer) -> Any:
                start = src.position
                data = src.read_fully(size, f"fixed {node.fullname} of {size} bytes")
                return data if from_raw is None else convert(data, start)
            return r_fixed
        if isinstance(node, EnumNode):
            symbols = node.symbols
            n_symbols = len(symbols)

            enum_of = f"enum {node.fullname} with {n_symbols} symbols [avro field {path}]"

            def r_enum(src: DataInputDeserializer) -> str:
                return symbols[_read_index(src, n_symbols, "enum", enum_of)]
            return r_enum
        if isinstance(node, (ArrayNode, MapNode)):
            return self._collection_reader(node, path)
        if isinstance(node, RecordNode):
            fields = [(f.name, self._reader(f.type, f"{path}.{f.name}")) for f in node.fields]

            def r_record(src: DataInputDeserializer) -> dict[str, Any]:
                d: dict[str, Any] = {}
                name = ""
                try:
                    for name, r in fields:
                        d[name] = r(src)
                except StateFormatError as e:
                    raise _tag(e, f"{path}.{name}") from None
                return d
            return r_record
        if isinstance(node, UnionNode):
            branches = [self._reader(b, path) for b in node.branches]
            n_branches = len(branches)
            union_of = f"union {node.label} [avro field {path}]"

            def r_union(src: DataInputDeserializer) -> Any:
                return branches[_read_index(src, n_branches, "union branch", union_of)](src)
            return r_union
        raise AssertionError(kind)  # pragma: no cover

    def _collection_reader(self, node: ArrayNode | MapNode, path: str) -> Reader:
        is_map = isinstance(node, MapNode)
        inner = node.values if isinstance(node, MapNode) else node.items
        item_path = path + ("{}" if is_map else "[]")
        item = self._reader(inner, item_path)
        unit = min_size(inner) + (4 if is_map else 0)
        what = "map entries" if is_map else "array items"

        def check(src: DataInputDeserializer, count: int, start: int) -> None:
            if unit:
                if count * unit > src.available():
                    raise TruncatedDataError(
                        f"truncated data: block of {count} {what} at offset {start} needs at least {count * unit} "
                        f"bytes, only {src.available()} available [avro field {path}]",
                        offset=start, needed=count * unit, available=src.available())
                return
            left = getattr(_budget, "left", ZERO_WIDTH_ITEM_BUDGET)
            if count > left:
                raise MalformedDataError(
                    f"block of {count} zero-width {what} at offset {start} exceeds the limit of "
                    f"{ZERO_WIDTH_ITEM_BUDGET} per value [avro field {path}]")
            _budget.left = left - count

        if is_map:
            def r_map(src: DataInputDeserializer) -> dict[str, Any]:
                d: dict[str, Any] = {}
                start = src.position
                count = read_count(src, path)
                while count:
                    check(src, count, start)
                    for _ in range(count):
                        kstart = src.position
                        n = src.read_int()
                        if n < 0:
                            raise MalformedDataError(f"negative map key length {n} at offset {kstart} "
                                                     f"[avro field {path}]")
                        data = src.read_fully(n, f"map key of {n} bytes")
                        try:
                            key = data.decode("utf-8")
                        except UnicodeDecodeError as e:
                            raise MalformedDataError(f"invalid UTF-8 in map key at offset {kstart + 4 + e.start} "
                                                     f"({e.reason}) [avro field {path}]") from None
                        d[key] = item(src)
                    start = src.position
                    count = read_count(src, path)
                return d
            return r_map

        def r_array(src: DataInputDeserializer) -> list[Any]:
            items: list[Any] = []
            start = src.position
            count = read_count(src, path)
            while count:
                check(src, count, start)
                items.extend([item(src) for _ in range(count)])
                start = src.position
                count = read_count(src, path)
            return items
        return r_array


__all__ = ["AvroCodec", "ZERO_WIDTH_ITEM_BUDGET", "min_size", "read_count"]
