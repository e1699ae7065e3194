"""The serializer contract every format implements (Flink's ``TypeSerializer``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from ..errors import MalformedDataError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import LogicalType

if TYPE_CHECKING:
    from ..snapshot import TypeSerializerSnapshot

T = TypeVar("T")


@dataclass(frozen=True)
class BulkKernel:
    """Which bulk kernel encodes and decodes a serializer's values: ``family`` is ``fixed`` (one
    fixed-width column; ``leaf`` names its ``kernels.abi.LEAF_*`` kind), ``varlen`` (values of
    varying length whose Arrow type, from the class's ``VALUE_TYPE``, is a string or binary
    column: two passes, sizes then fill, through the kernel functions ``<kernel>_encode_sizes``,
    ``<kernel>_encode_fill``, ``<kernel>_decode_sizes`` and ``<kernel>_decode_fill``), ``bytes``
    (the same, the encode sizes being the length word and the bytes: no ``_encode_sizes``),
    ``rowdata`` (BinaryRowData), ``corerow`` (flink-core Row) or "" (no column kernel of its own).
    ``leaf`` is also the kind the Row and POJO kernels give a field of this class (``LEAF_STR`` for a
    string); a class without one makes such a row go per value. Data, not code: the serializers sit
    below the kernels, so the capability table (``bulk/capabilities.py``) and the plan compilers
    (``kernels/plans``) turn it into the kernel."""

    family: str
    leaf: str = ""
    kernel: str = ""


class TypeSerializer(ABC, Generic[T]):
    """Turns values of one type into Flink's bytes and back.

    Serializers are immutable value objects here (no reused buffers), so ``duplicate`` returns
    ``self`` unless a subclass holds mutable state. Equality compares the configuration
    (``_config``), which is what Flink's ``equals`` compares.

    Each serializer class describes itself in its own module, by the class attributes below, and
    the modules that need to know read them instead of matching class names: schema files
    (``schema_file``: the family, the DataStream default for a SQL type, a Java primitive's
    default), ``statemorph inspect`` (:meth:`describe_type`), the Arrow type of its values
    (``bulk/types.py``) and the bulk capability table (``bulk/capabilities.py``). A declaration
    counts for the class that makes it (read with :meth:`declared`), not for its subclasses: a
    subclass may change the format. Every serializer class joins :data:`SERIALIZER_CLASSES` when it
    is defined.
    """

    SCHEMA_FAMILY: ClassVar[str] = "datastream"
    """The schema-file family (``serializer = "..."``) that builds this class; ``auto`` keeps it."""
    SQL_TYPE: ClassVar[str | None] = None
    """Its values' Flink SQL type as ``statemorph inspect`` prints it, for a class without
    configuration (``INT``, ``CHAR(1)``, ``GLOBAL WINDOW``)."""
    VALUE_TYPE: ClassVar[LogicalType | None] = None
    """The logical type of its values, for a class without configuration: their Arrow type."""
    VALUELESS: ClassVar[bool] = False
    """Its values carry no data (a global window, no namespace): an Arrow null column."""
    DATASTREAM_OF: ClassVar[tuple[str, ...]] = ()
    """The SQL types a schema file's ``datastream`` family builds this class for (Flink's
    TypeInformation defaults): type roots (``INTEGER``), or a type's exact text (``CHAR(1)``),
    which wins over a root."""
    SCHEMA_TYPE_ROOT: ClassVar[str | None] = None
    """The root of the type a schema file must give a state of this class's family (``ROW``)."""
    JAVA_ZERO: ClassVar[Any] = None
    """What a field of this Java primitive holds when no constructor sets it (0, 0.0, false)."""
    BULK: ClassVar[BulkKernel | None] = None
    """The bulk kernel of its values; None: encoded, decoded and migrated per value."""
    KEY_HASH: ClassVar[str] = ""
    """The Java ``hashCode`` of its values as keyed-state keys (which key group a key is in): ``int``,
    ``long``, ``boolean``, ``char``, ``float``, ``double``, ``string`` or ``binary_row``
    (``keyed/keygroups.py``); "" when Java's is not reproducible (identity hashes, composites).
    Unlike the declarations above it holds for subclasses too: a subclass writes the same Java type."""

    @classmethod
    def leaf_kind(cls) -> str:
        """The ``kernels.abi.LEAF_*`` name of this very class's values as a field of a kernel row ("" if none)."""
        bulk = cls.declared("BULK")
        return bulk.leaf if bulk is not None else ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        SERIALIZER_CLASSES.append(cls)

    @classmethod
    def declared(cls, name: str, default: Any = None) -> Any:
        """The class attribute ``name`` as this very class declares it (``default`` when only a
        base class does)."""
        return vars(cls).get(name, default)

    @classmethod
    def for_sql_type(cls, t: LogicalType, nested: Callable[[LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        """This class's serializer for ``t``, a SQL type its ``DATASTREAM_OF`` claims (a schema
        file's ``datastream`` family). ``nested(type, where, like)`` builds a serializer it nests;
        ``like`` is the serializer a savepoint recorded at this place (or None), whose nested
        serializers the new one follows where the types agree."""
        return cls()

    def describe_type(self) -> str:
        """This serializer as its Flink SQL type where one exists, else its class name: what
        ``statemorph inspect`` prints. Classes with configuration (nested serializers) override it."""
        sql = type(self).declared("SQL_TYPE")
        return sql if sql is not None else type(self).__name__

    @abstractmethod
    def serialize(self, value: T, out: DataOutputSerializer) -> None: ...

    @abstractmethod
    def deserialize(self, src: DataInputDeserializer) -> T: ...

    @abstractmethod
    def snapshot_configuration(self) -> TypeSerializerSnapshot: ...

    def get_length(self) -> int:
        """Fixed byte length of every value, or -1 when values vary in length."""
        return -1

    def copy(self, value: T) -> T:
        """A deep copy of ``value``; through the bytes, so it is exact for every format."""
        return self.from_bytes(self.to_bytes(value))

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        """Copy one serialized value from ``src`` to ``out`` (Flink's ``copy(in, out)``)."""
        self.serialize(self.deserialize(src), out)

    def duplicate(self) -> TypeSerializer[T]:
        return self

    def is_immutable_type(self) -> bool:
        return False

    def to_bytes(self, value: T) -> bytes:
        out = DataOutputSerializer()
        self.serialize(value, out)
        return out.get_copy_of_buffer()

    def from_bytes(self, data: bytes | bytearray | memoryview) -> T:
        """Read exactly one value; leftover bytes are an error, not silently ignored."""
        src = DataInputDeserializer(data)
        value = self.deserialize(src)
        if src.available():
            raise MalformedDataError(
                f"{type(self).__name__}: {src.available()} trailing bytes after the value "
                f"at offset {src.position}"
            )
        return value

    def _config(self) -> tuple[Any, ...]:
        """What makes two serializers of the same class equal."""
        return ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._config() == other._config()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._config()))

    def __repr__(self) -> str:
        cfg = self._config()
        inner = ", ".join(repr(c) for c in cfg)
        return f"{type(self).__name__}({inner})"


SERIALIZER_CLASSES: list[type[TypeSerializer[Any]]] = []
"""Every serializer class defined so far, in definition order: the one registry of them."""


__all__ = ["SERIALIZER_CLASSES", "BulkKernel", "TypeSerializer"]
