"""Write a :mod:`.nodes` tree as one Java object serialization stream, as ``ObjectOutputStream``
would: the same handles, the same back references, the same descriptor layout.

Why it matters: Flink compares nothing by these bytes, but statemorph promises Flink's bytes
wherever Flink has a format, and golden vectors from real Flink prove it. The rules followed:

- a class descriptor is written once per stream (then ``TC_REFERENCE``), keyed by class name;
- the type signature strings inside descriptors are interned in the JVM, so they are shared by
  value across descriptors;
- objects, enum constants, arrays, class literals and :class:`JString` nodes are shared by
  identity: the same node written twice is one object and a back reference;
- a plain Python ``str`` in a field is a new string object each time; a :class:`JInterned`
  string is shared by value with the descriptor signatures (one JVM intern pool).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..io import DataOutputSerializer, encode_modified_utf8
from . import nodes
from .nodes import BlockData, ClassDesc, FieldDesc, JArray, JClass, JEnum, JInterned, JObject, JString

#: how a primitive field (by its type code) is written; any other code is an object or an array
_PRIMITIVE_WRITES: dict[str, Callable[[DataOutputSerializer, Any], None]] = {
    "Z": lambda out, v: out.write_boolean(bool(v)), "B": lambda out, v: out.write_byte(v),
    "C": lambda out, v: out.write_char(v), "S": lambda out, v: out.write_short(v),
    "I": lambda out, v: out.write_int(v), "J": lambda out, v: out.write_long(v),
    "F": lambda out, v: out.write(struct.pack(">f", v)), "D": lambda out, v: out.write(struct.pack(">d", v)),
}


class _StreamWriter:
    def __init__(self, out: DataOutputSerializer) -> None:
        self.out = out
        self.next_handle = 0
        self.by_identity: dict[int, int] = {}
        self.descs: dict[str, int] = {}
        self.signatures: dict[str, int] = {}
        self.keep: list[Any] = []  # keeps identity-keyed nodes alive while the stream is written

    def assign(self) -> int:
        h = self.next_handle
        self.next_handle += 1
        return h

    def reference(self, handle: int) -> None:
        self.out.write_byte(nodes.TC_REFERENCE)
        self.out.write_int(nodes.BASE_WIRE_HANDLE + handle)

    def write_string(self, text: str) -> None:
        raw = encode_modified_utf8(text)
        if len(raw) <= 0xFFFF:
            self.out.write_byte(nodes.TC_STRING)
            self.out.write_short(len(raw))
        else:
            self.out.write_byte(nodes.TC_LONGSTRING)
            self.out.write_long(len(raw))
        self.out.write(raw)

    def write_signature(self, sig: str) -> None:
        known = self.signatures.get(sig)
        if known is not None:
            self.reference(known)
            return
        self.signatures[sig] = self.assign()
        self.write_string(sig)

    def write_class_desc(self, desc: ClassDesc | None) -> None:
        if desc is None:
            self.out.write_byte(nodes.TC_NULL)
            return
        known = self.descs.get(desc.name)
        if known is not None:
            self.reference(known)
            return
        out = self.out
        out.write_byte(nodes.TC_CLASSDESC)
        out.write_utf(desc.name)
        out.write_long(desc.suid)
        self.descs[desc.name] = self.assign()
        out.write_byte(desc.flags)
        out.write_short(len(desc.fields))
        for f in desc.fields:
            out.write_byte(ord(f.code))
            out.write_utf(f.name)
            if f.signature is not None:
                self.write_signature(f.signature)
        out.write_byte(nodes.TC_ENDBLOCKDATA)  # no class annotation
        self.write_class_desc(desc.super_desc)

    def shared(self, node: Any) -> bool:
        """Write a back reference if ``node`` was written already; else give it the next handle."""
        known = self.by_identity.get(id(node))
        if known is not None:
            self.reference(known)
            return True
        return False

    def register(self, node: Any) -> None:
        self.by_identity[id(node)] = self.assign()
        self.keep.append(node)

    def write_content(self, node: Any) -> None:
        out = self.out
        if node is None:
            out.write_byte(nodes.TC_NULL)
        elif isinstance(node, str):
            self.assign()
            self.write_string(node)
        elif isinstance(node, JInterned):
            self.write_signature(node.value)
        elif isinstance(node, JString):
            if not self.shared(node):
                self.register(node)
                self.write_string(node.value)
        elif isinstance(node, JEnum):
            if not self.shared(node):
                out.write_byte(nodes.TC_ENUM)
                self.write_class_desc(node.desc)
                self.register(node)
                self.write_content(node.constant)
        elif isinstance(node, JObject):
            if not self.shared(node):
                out.write_byte(nodes.TC_OBJECT)
                self.write_class_desc(node.desc)
                self.register(node)
                for d in node.desc.hierarchy():
                    for f in d.fields:
                        self.write_value(f, node.values[f.name])
                    if d.flags & nodes.SC_WRITE_METHOD:
                        for item in node.annotations.get(d.name, []):
                            self.write_annotation_item(item)
                        out.write_byte(nodes.TC_ENDBLOCKDATA)
        elif isinstance(node, JArray):
            if not self.shared(node):
                out.write_byte(nodes.TC_ARRAY)
                self.write_class_desc(node.desc)
                self.register(node)
                out.write_int(len(node.items))
                code = node.desc.name[1]
                f = FieldDesc(code, "[]", node.desc.name[1:] if code in "L[" else None)
                for item in node.items:
                    self.write_value(f, item)
        elif isinstance(node, JClass):
            if not self.shared(node):
                out.write_byte(nodes.TC_CLASS)
                self.write_class_desc(node.desc)
                self.register(node)
        else:
            raise TypeError(f"cannot write {type(node).__name__} into a Java serialization stream")

    def write_annotation_item(self, item: Any) -> None:
        if isinstance(item, BlockData):
            if len(item.data) <= 0xFF:
                self.out.write_byte(nodes.TC_BLOCKDATA)
                self.out.write_byte(len(item.data))
            else:
                self.out.write_byte(nodes.TC_BLOCKDATALONG)
                self.out.write_int(len(item.data))
            self.out.write(item.data)
        else:
            self.write_content(item)

    def write_value(self, f: FieldDesc, value: Any) -> None:
        write = _PRIMITIVE_WRITES.get(f.code)
        if write is None:
            self.write_content(value)
        else:
            write(self.out, value)


def write_stream_to(out: DataOutputSerializer, node: Any) -> None:
    """Append one complete stream (header and ``node``) to ``out``."""
    out.write_short(nodes.STREAM_MAGIC)
    out.write_short(nodes.STREAM_VERSION)
    _StreamWriter(out).write_content(node)


def write_stream(node: Any) -> bytes:
    """The bytes of ``InstantiationUtil.serializeObject`` for the object ``node`` describes."""
    out = DataOutputSerializer()
    write_stream_to(out, node)
    return out.get_copy_of_buffer()


__all__ = ["write_stream", "write_stream_to"]
