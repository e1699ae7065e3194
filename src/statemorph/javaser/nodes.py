"""The neutral tree one Java serialization stream is parsed into (and written from).

Why a tree of plain records: statemorph never instantiates anything named in a stream. The
reader turns the grammar into these records (class descriptors, objects as field maps, enum
constants, arrays, class literals); :mod:`.logical` and :mod:`.tableser` then interpret the few
whitelisted shapes. The writer takes the same records, so a tree built from a statemorph type
is written with Java's own handle and back-reference rules.

Identity matters: Java writes an object it has already written as a back reference. The writer
keys objects, enum constants, arrays, class literals and :class:`JString` nodes by Python
identity (``id``), class descriptors by class name, and the type signature strings inside
descriptors by value (Java interns those).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# stream grammar constants (java.io.ObjectStreamConstants)
STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_STRING = 0x74
TC_ARRAY = 0x75
TC_CLASS = 0x76
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
TC_RESET = 0x79
TC_BLOCKDATALONG = 0x7A
TC_EXCEPTION = 0x7B
TC_LONGSTRING = 0x7C
TC_PROXYCLASSDESC = 0x7D
TC_ENUM = 0x7E
BASE_WIRE_HANDLE = 0x7E0000

SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02
SC_EXTERNALIZABLE = 0x04
SC_BLOCK_DATA = 0x08
SC_ENUM = 0x10

PRIMITIVE_CODES = "BCDFIJSZ"


@dataclass(frozen=True)
class FieldDesc:
    """One serialized field: type code (``I``, ``Z``, ``L``, ``[`` ...), name, and for object
    fields the JVM type signature (``Ljava/lang/String;``)."""

    code: str
    name: str
    signature: str | None = None


@dataclass(frozen=True)
class ClassDesc:
    """A class descriptor: what ``ObjectStreamClass`` writes (never a class we load)."""

    name: str
    suid: int
    flags: int
    fields: tuple[FieldDesc, ...] = ()
    super_desc: ClassDesc | None = None

    def hierarchy(self) -> list[ClassDesc]:
        """Superclass first, as class data is laid out in the stream."""
        chain: list[ClassDesc] = []
        d: ClassDesc | None = self
        while d is not None:
            chain.append(d)
            d = d.super_desc
        return chain[::-1]


@dataclass(eq=False)
class JString:
    """A string *object*: two fields holding one JString are one Java object (a back reference)."""

    value: str


@dataclass(frozen=True)
class JInterned:
    """An interned string (a class-file constant such as a serialized lambda's method name): the
    JVM holds one object per value, so the writer shares it by value with every other interned
    string of the stream, descriptor type signatures included."""

    value: str


@dataclass(eq=False)
class JObject:
    """An ordinary object: its descriptor and the values of every serialized field of every
    class in its hierarchy (names are unique within the whitelisted classes). ``annotations``
    holds, per class with a ``writeObject`` method, the extra contents (block data as bytes,
    objects as nodes) written after its fields."""

    desc: ClassDesc
    values: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(eq=False)
class JEnum:
    """An enum constant: its descriptor and the constant's name."""

    desc: ClassDesc
    constant: str


@dataclass(eq=False)
class JArray:
    """An array: descriptor (name ``[L...;`` or ``[I`` ...) and the elements."""

    desc: ClassDesc
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class JClass:
    """A class literal (``TC_CLASS``): only its descriptor is in the stream."""

    desc: ClassDesc


@dataclass(frozen=True)
class BlockData:
    """Raw bytes a ``writeObject`` method wrote (e.g. ArrayList's capacity)."""

    data: bytes


__all__ = [
    "BASE_WIRE_HANDLE",
    "BlockData",
    "ClassDesc",
    "FieldDesc",
    "JArray",
    "JClass",
    "JEnum",
    "JInterned",
    "JObject",
    "JString",
    "PRIMITIVE_CODES",
    "SC_BLOCK_DATA",
    "SC_ENUM",
    "SC_EXTERNALIZABLE",
    "SC_SERIALIZABLE",
    "SC_WRITE_METHOD",
    "STREAM_MAGIC",
    "STREAM_VERSION",
]
