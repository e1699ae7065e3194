"""A safe reader for one Java object serialization stream (``AC ED 00 05`` ...).

Why it exists: Flink's ``RowDataSerializerSnapshot`` stores each LogicalType (and, for ARRAY and
MAP fields, serializer objects) with ``ObjectOutputStream``, one fresh stream per object,
concatenated without lengths. To read such a snapshot one must parse the stream grammar to find
where each stream ends. This reader does that and nothing more:

- every class descriptor must be on the whitelist given by the caller (``policy``) with the same
  serialVersionUID, flags and field list; anything else (``java.util.HashMap``, a gadget class,
  a changed class) is a :class:`JavaSerializationError` naming the class and the offset;
- nothing is instantiated: the result is a tree of :mod:`.nodes` records;
- depth, object count and string sizes are bounded, lengths are checked against the bytes that
  are actually there before anything is allocated, and a reference to an object that is still
  being read (a cycle) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import JavaSerializationError, StateFormatError
from ..io import DataInputDeserializer, decode_modified_utf8
from . import nodes
from .classes import OTHER_SHAPES, class_literal_desc
from .nodes import BlockData, ClassDesc, FieldDesc, JArray, JClass, JEnum, JObject, JString

# A policy maps a class name to the descriptor statemorph expects for it, or None (refused).
ClassPolicy = Callable[[str], "ClassDesc | None"]

MAX_DEPTH = 160
MAX_OBJECTS = 20_000
MAX_STRING = 1 << 20
MAX_ARRAY = 1 << 16

_TC_NAMES = {code: name for name, code in vars(nodes).items() if name.startswith("TC_")}

_IN_PROGRESS = object()


def _tc(code: int) -> str:
    return _TC_NAMES.get(code, f"0x{code:02X}")


#: how a primitive field (by its type code) is read; any other code is an object or an array
_PRIMITIVE_READS: dict[str, Callable[[DataInputDeserializer], Any]] = {
    "Z": lambda src: src.read_boolean(), "B": lambda src: src.read_byte(), "C": lambda src: src.read_char(),
    "S": lambda src: src.read_short(), "I": lambda src: src.read_int(), "J": lambda src: src.read_long(),
    "F": lambda src: src.read_float(), "D": lambda src: src.read_double(),
}


class _StreamReader:
    def __init__(self, src: DataInputDeserializer, policy: ClassPolicy, what: str) -> None:
        self.src = src
        self.policy = policy
        self.what = what
        self.handles: list[Any] = []
        self.depth = 0

    def error(self, message: str, offset: int | None = None) -> JavaSerializationError:
        at = self.src.position if offset is None else offset
        return JavaSerializationError(f"{self.what}: {message} at offset {at}", offset=at)

    # -- handles ------------------------------------------------------------------------------
    def new_handle(self, node: Any) -> int:
        if len(self.handles) >= MAX_OBJECTS:
            raise self.error(f"more than {MAX_OBJECTS} objects in one stream")
        self.handles.append(node)
        return len(self.handles) - 1

    def reference(self, start: int) -> Any:
        handle = self.src.read_int()
        index = handle - nodes.BASE_WIRE_HANDLE
        if not 0 <= index < len(self.handles):
            raise self.error(f"back reference to unknown handle 0x{handle & 0xFFFFFFFF:08X}", start)
        node = self.handles[index]
        if node is _IN_PROGRESS:
            raise self.error(f"cyclic back reference to handle 0x{handle:08X}, an object still being read", start)
        return node

    # -- grammar ------------------------------------------------------------------------------
    def read_content(self, expected: str, tc: int = -1) -> Any:
        """One ``content`` item that is an object (or null / a back reference); ``tc`` is its
        type code when the caller has read it already."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"objects nested more than {MAX_DEPTH} levels deep")
        try:
            if tc < 0:
                start = self.src.position
                tc = self.src.read_unsigned_byte()
            else:
                start = self.src.position - 1
            if tc == nodes.TC_NULL:
                return None
            if tc == nodes.TC_REFERENCE:
                return self.reference(start)
            if tc == nodes.TC_STRING:
                return self.read_string(self.src.read_unsigned_short(), start)
            if tc == nodes.TC_LONGSTRING:
                return self.read_string(self.src.read_long(), start)
            if tc == nodes.TC_OBJECT:
                return self.read_object(start)
            if tc == nodes.TC_ENUM:
                return self.read_enum(start)
            if tc == nodes.TC_ARRAY:
                return self.read_array(start)
            if tc == nodes.TC_CLASS:
                desc = self.read_class_desc(literal=True)
                if desc is None:
                    raise self.error("TC_CLASS without a class descriptor", start)
                node = JClass(desc)
                self.new_handle(node)
                return node
            if tc == nodes.TC_CLASSDESC:
                return self.read_new_class_desc(start)
            raise self.error(f"unexpected {_tc(tc)} where {expected} was expected", start)
        finally:
            self.depth -= 1

    def read_string(self, length: int, start: int) -> JString:
        if length > MAX_STRING:
            raise self.error(f"string of {length} bytes exceeds the limit of {MAX_STRING}", start)
        self.src.check_length(length, "Java string")
        raw = self.src.read_fully(length, "Java string")
        try:
            text = decode_modified_utf8(raw, self.src.position - length)
        except StateFormatError as e:
            raise self.error(f"invalid modified UTF-8 in string: {e}", start) from None
        node = JString(text)
        self.new_handle(node)
        return node

    def read_string_object(self, what: str) -> str:
        start = self.src.position
        node = self.read_content(what)
        if not isinstance(node, JString):
            raise self.error(f"expected a string for {what}, found {type(node).__name__}", start)
        return node.value

    def read_class_desc(self, literal: bool = False) -> ClassDesc | None:
        """A class descriptor; ``literal``: of a class literal (``TC_CLASS``), where a class off the
        whitelist is read in the shape of a class that is not Serializable (see
        :func:`.classes.class_literal_desc`): a name, nothing to instantiate."""
        start = self.src.position
        tc = self.src.read_unsigned_byte()
        if tc == nodes.TC_NULL:
            return None
        if tc == nodes.TC_REFERENCE:
            node = self.reference(start)
            if not isinstance(node, ClassDesc):
                raise self.error("back reference to a non-descriptor where a class descriptor was expected", start)
            return node
        if tc == nodes.TC_CLASSDESC:
            return self.read_new_class_desc(start, literal)
        if tc == nodes.TC_PROXYCLASSDESC:
            raise self.error("dynamic proxy class descriptors are not accepted", start)
        raise self.error(f"unexpected {_tc(tc)} where a class descriptor was expected", start)

    def read_new_class_desc(self, start: int, literal: bool = False) -> ClassDesc:
        name = self.src.read_utf()
        expected = self.policy(name)
        if expected is None and literal:
            expected = class_literal_desc(name)
        if expected is None:
            raise self.error(f"class {name!r} is not on the whitelist of classes statemorph reads", start)
        suid = self.src.read_long()
        if suid != expected.suid:
            raise self.error(f"class {name!r} has serialVersionUID {suid}, expected {expected.suid}", start)
        handle = self.new_handle(_IN_PROGRESS)
        flags = self.src.read_unsigned_byte()
        if flags & nodes.SC_EXTERNALIZABLE:
            raise self.error(f"externalizable class {name!r} is not accepted", start)
        count = self.src.read_unsigned_short()
        self.src.check_length(count, "class descriptor fields", unit=3)
        fields = []
        for _ in range(count):
            code = chr(self.src.read_unsigned_byte())
            fname = self.src.read_utf()
            if code in nodes.PRIMITIVE_CODES:
                fields.append(FieldDesc(code, fname))
            elif code in "L[":
                fields.append(FieldDesc(code, fname, self.read_string_object(f"the type of field {fname!r}")))
            else:
                raise self.error(f"invalid field type code {code!r} in class {name!r}")
        self.skip_annotation(f"class annotation of {name!r}", allow_data=False)
        super_desc = self.read_class_desc()
        desc = ClassDesc(name, suid, flags, tuple(fields), super_desc)
        if not any((desc.flags, desc.fields) == (shape.flags, shape.fields) and (
            (super_desc.name if super_desc else None) == (shape.super_desc.name if shape.super_desc else None)
        ) for shape in (expected, *OTHER_SHAPES.get(name, ()))):
            raise self.error(f"class {name!r} does not have the shape statemorph expects "
                             f"(flags, fields or superclass differ)", start)
        self.handles[handle] = desc
        return desc

    def skip_annotation(self, what: str, allow_data: bool) -> list[Any]:
        """Contents up to ``TC_ENDBLOCKDATA``: block data as :class:`BlockData`, objects as nodes."""
        items: list[Any] = []
        while True:
            start = self.src.position
            tc = self.src.read_unsigned_byte()
            if tc == nodes.TC_ENDBLOCKDATA:
                return items
            if not allow_data:
                raise self.error(f"unexpected {_tc(tc)} in {what} (expected TC_ENDBLOCKDATA)", start)
            if len(items) >= MAX_ARRAY:
                raise self.error(f"more than {MAX_ARRAY} items in {what}", start)
            if tc == nodes.TC_BLOCKDATA:
                items.append(BlockData(self.src.read_fully(self.src.read_unsigned_byte(), "block data")))
            elif tc == nodes.TC_BLOCKDATALONG:
                n = self.src.check_length(self.src.read_int(), "block data")
                items.append(BlockData(self.src.read_fully(n, "block data")))
            else:
                items.append(self.read_content(what, tc))

    def read_object(self, start: int) -> JObject:
        desc = self.read_class_desc()
        if desc is None:
            raise self.error("TC_OBJECT without a class descriptor", start)
        if desc.flags & nodes.SC_ENUM:
            raise self.error(f"enum class {desc.name!r} written as a plain object", start)
        handle = self.new_handle(_IN_PROGRESS)
        node = JObject(desc)
        for d in desc.hierarchy():
            if not d.flags & nodes.SC_SERIALIZABLE:
                raise self.error(f"class {d.name!r} is not serializable", start)
            for f in d.fields:
                node.values[f.name] = self.read_value(f, d.name)
            if d.flags & nodes.SC_WRITE_METHOD:
                node.annotations[d.name] = self.skip_annotation(f"writeObject data of {d.name!r}", allow_data=True)
        self.handles[handle] = node
        return node

    def read_value(self, f: FieldDesc, owner: str) -> Any:
        read = _PRIMITIVE_READS.get(f.code)
        if read is not None:
            return read(self.src)
        return self.read_content(f"field {owner}.{f.name}")

    def read_enum(self, start: int) -> JEnum:
        desc = self.read_class_desc()
        if desc is None or not desc.flags & nodes.SC_ENUM:
            raise self.error("TC_ENUM without an enum class descriptor", start)
        handle = self.new_handle(_IN_PROGRESS)
        node = JEnum(desc, self.read_string_object(f"a constant of {desc.name}"))
        self.handles[handle] = node
        return node

    def read_array(self, start: int) -> JArray:
        desc = self.read_class_desc()
        if desc is None or not desc.name.startswith("["):
            raise self.error("TC_ARRAY without an array class descriptor", start)
        handle = self.new_handle(_IN_PROGRESS)
        n = self.src.read_int()
        if n > MAX_ARRAY:
            raise self.error(f"array of {n} elements exceeds the limit of {MAX_ARRAY}", start)
        self.src.check_length(n, "array elements")
        code = desc.name[1]
        f = FieldDesc(code, "[]", desc.name[1:] if code in "L[" else None)
        node = JArray(desc, [self.read_value(f, desc.name) for _ in range(n)])
        self.handles[handle] = node
        return node


def read_stream(src: DataInputDeserializer, policy: ClassPolicy, what: str = "Java serialization stream") -> Any:
    """Read one complete stream (magic, version, one object) from ``src``; ``src`` is left at the
    first byte after it. The result is a :mod:`.nodes` tree (``None`` for a null object)."""
    start = src.position
    if src.available() < 4:
        raise JavaSerializationError(
            f"{what}: truncated stream header at offset {start} (4 bytes needed, {src.available()} left)",
            offset=start,
        )
    magic = src.read_unsigned_short()
    version = src.read_unsigned_short()
    if magic != nodes.STREAM_MAGIC or version != nodes.STREAM_VERSION:
        raise JavaSerializationError(
            f"{what}: expected the stream header AC ED 00 05 at offset {start}, found "
            f"{magic:04X} {version:04X}",
            offset=start,
        )
    reader = _StreamReader(src, policy, what)
    try:
        node = reader.read_content("an object")
    except RecursionError:
        raise reader.error("stream nested too deeply") from None
    except JavaSerializationError:
        raise
    except StateFormatError as e:  # truncation and bad UTF-8 from the cursor
        raise JavaSerializationError(f"{what} starting at offset {start}: {e}", offset=src.position) from None
    if isinstance(node, ClassDesc):
        raise reader.error("a bare class descriptor is not an object", start)
    return node


__all__ = ["ClassPolicy", "MAX_ARRAY", "MAX_DEPTH", "MAX_OBJECTS", "MAX_STRING", "read_stream"]
