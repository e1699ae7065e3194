"""The serializer contract, as Flink's ``typeutils`` states it: a :class:`TypeSerializer` turns
values into bytes, its :class:`TypeSerializerSnapshot` records the write schema next to the state,
and the snapshot judges a new serializer with a :class:`SchemaCompatibility` (Flink's
``TypeSerializerSchemaCompatibility``).

The three refer to one another (a serializer writes its snapshot, a snapshot restores a serializer
and judges a new one, a result may carry a reconfigured serializer), so they share this module;
everything else in :mod:`statemorph.typeutils` builds on it and nothing here imports upward.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import MalformedDataError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import LogicalType


class CompatibilityType(enum.Enum):
    COMPATIBLE_AS_IS = "compatible as is"
    COMPATIBLE_AFTER_MIGRATION = "compatible after migration"
    COMPATIBLE_WITH_RECONFIGURED_SERIALIZER = "compatible with a reconfigured serializer"
    INCOMPATIBLE = "incompatible"


class SchemaCompatibility:
    """Result of ``new_snapshot.resolve_schema_compatibility(old_snapshot)`` (Flink 2.x) or of
    ``old_snapshot.resolve_schema_compatibility(new_serializer)`` (the older direction).

    ``reason`` explains an incompatible (and, where useful, an after-migration) result with
    field paths; ``plan`` may carry a precomputed migration plan so that it is built once.
    """

    __slots__ = ("type", "reason", "reconfigured_serializer", "plan")

    def __init__(
        self,
        type: CompatibilityType,
        reason: str = "",
        reconfigured_serializer: TypeSerializer[Any] | None = None,
        plan: Any = None,
    ) -> None:
        self.type = type
        self.reason = reason
        self.reconfigured_serializer = reconfigured_serializer
        self.plan = plan

    @classmethod
    def compatible_as_is(cls) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_AS_IS)

    @classmethod
    def compatible_after_migration(cls, reason: str = "", plan: Any = None) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_AFTER_MIGRATION, reason, plan=plan)

    @classmethod
    def compatible_with_reconfigured_serializer(
        cls, serializer: TypeSerializer[Any], reason: str = ""
    ) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER, reason, serializer)

    @classmethod
    def incompatible(cls, reason: str) -> SchemaCompatibility:
        return cls(CompatibilityType.INCOMPATIBLE, reason)

    def is_compatible_as_is(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AS_IS

    def is_compatible_after_migration(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AFTER_MIGRATION

    def is_compatible_with_reconfigured_serializer(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER

    def is_incompatible(self) -> bool:
        return self.type is CompatibilityType.INCOMPATIBLE

    def get_reconfigured_serializer(self) -> TypeSerializer[Any]:
        if self.reconfigured_serializer is None:
            raise ValueError("only a reconfigured result carries a serializer")
        return self.reconfigured_serializer

    def __repr__(self) -> str:
        extra = f", reason={self.reason!r}" if self.reason else ""
        return f"SchemaCompatibility({self.type.name}{extra})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaCompatibility) and (self.type, self.reason) == (other.type, other.reason)

    def __hash__(self) -> int:
        return hash((self.type, self.reason))


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
    SCHEMA_IN_COLLECTIONS: ClassVar[bool] = False
    """A schema file may give this class's family an ARRAY / MAP holding its ``SCHEMA_TYPE_ROOT``
    types: the collections are the DataStream ones, each such type inside this class (Flink SQL
    operators keep RowData rows in lists and maps, e.g. Top-N's ``ARRAY<ROW<...>>``)."""
    JAVA_ZERO: ClassVar[Any] = None
    """What a field of this Java primitive holds when no constructor sets it (0, 0.0, false)."""
    BULK: ClassVar[BulkKernel | None] = None
    """The bulk kernel of its values; None: encoded, decoded and migrated per value."""
    KEY_HASH: ClassVar[str] = ""
    """The Java ``hashCode`` of its values as keyed-state keys (which key group a key is in): ``int``,
    ``long``, ``boolean``, ``char``, ``float``, ``double``, ``string`` or ``binary_row``
    (``keyed/keygroups.py``); "" when Java's is not reproducible (identity hashes, composites).
    Unlike the declarations above it holds for subclasses too: a subclass writes the same Java type."""
    LENGTH: ClassVar[int] = -1
    """The byte length of every value (Flink's ``getLength``), -1 when values vary in length. Holds
    for subclasses too."""
    IMMUTABLE_VALUES: ClassVar[bool] = False
    """Its values are immutable Python objects (an int, a float, a str, a window tuple, a
    singleton): :meth:`copy` returns the value itself and :meth:`is_immutable_type` is true (Flink's
    ``isImmutableType``). Holds for subclasses too."""

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
        file's ``datastream`` family), or one of its ``SCHEMA_TYPE_ROOT`` where the file names this
        class's family or the savepoint records this class at that place. ``nested(type, where,
        like)`` builds a serializer it nests; ``like`` is the serializer a savepoint recorded at this
        place (or None), whose nested serializers the new one follows where the types agree."""
        return cls()

    def successor_for(self, t: LogicalType) -> TypeSerializer[Any] | None:
        """The serializer a schema file's ``datastream`` type ``t`` builds at a place where a
        savepoint recorded this serializer, where this class decides it rather than the DataStream
        defaults (``DATASTREAM_OF``): a SQL data view keeps itself, a SQL row nested in DataStream
        state stays RowData. None (here): the defaults decide. Raises ``ValueError`` with the reason
        where ``t`` cannot take this serializer's place."""
        return None

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
        """Fixed byte length of every value, or -1 when values vary in length (:attr:`LENGTH`)."""
        return self.LENGTH

    def copy(self, value: T) -> T:
        """A deep copy of ``value``: the value itself when it is immutable (:attr:`IMMUTABLE_VALUES`),
        else through the bytes, so it is exact for every format."""
        if self.IMMUTABLE_VALUES:
            return value
        return self.from_bytes(self.to_bytes(value))

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        """Copy one serialized value from ``src`` to ``out`` (Flink's ``copy(in, out)``)."""
        self.serialize(self.deserialize(src), out)

    def duplicate(self) -> TypeSerializer[T]:
        return self

    def is_immutable_type(self) -> bool:
        return self.IMMUTABLE_VALUES

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


class TypeSerializerSnapshot(ABC):
    """A versioned record of a serializer's write schema, persisted next to the state.

    Subclasses set ``IDENTIFIER``, ``VERSION`` (current) and ``MIN_READ_VERSION``; they
    implement ``write_snapshot`` and the ``read_snapshot`` constructor, ``restore_serializer``
    and ``resolve_new_serializer`` (the rule, from the old snapshot's side), which
    ``resolve_schema_compatibility`` applies in either of Flink's directions.
    """

    IDENTIFIER: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    MIN_READ_VERSION: ClassVar[int] = 1

    def get_current_version(self) -> int:
        return self.VERSION

    @abstractmethod
    def write_snapshot(self, out: DataOutputSerializer) -> None: ...

    @classmethod
    @abstractmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot: ...

    @abstractmethod
    def restore_serializer(self) -> TypeSerializer[Any]: ...

    def resolve_schema_compatibility(
        self, other: TypeSerializerSnapshot | TypeSerializer[Any]
    ) -> SchemaCompatibility:
        """Can state written under one schema be read under another? Both of Flink's directions:

        - Flink 2.x: ``new_snapshot.resolve_schema_compatibility(old_snapshot)``, called on the
          snapshot of the NEW serializer with the OLD snapshot read from the savepoint;
        - Flink 1.x (kept): ``old_snapshot.resolve_schema_compatibility(new_serializer)``.

        One rule answers both: the 2.x direction restores this (new) snapshot's serializer and asks
        the old snapshot, so every snapshot class implements the rule once, in
        :meth:`resolve_new_serializer`, and the two directions cannot disagree.
        """
        if isinstance(other, TypeSerializerSnapshot):
            return other.resolve_schema_compatibility(self.restore_serializer())
        return self.resolve_new_serializer(other)

    @abstractmethod
    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """The compatibility rule of this snapshot class: this (old) snapshot judges the new
        serializer. Callers use :meth:`resolve_schema_compatibility` (either direction)."""

    # -- migration -------------------------------------------------------------------------
    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        """Turn a value read with ``restore_serializer()`` into the value the new serializer
        writes. Identity unless the value's shape changes (rows, POJOs, Avro records)."""
        return value

    def migrate_element(
        self, prior: TypeSerializer[Any], new: TypeSerializer[Any], element: Any, out: DataOutputSerializer
    ) -> None:
        """Write one already-deserialized old ``element`` in the new schema."""
        new.serialize(self.migrate_value(element, new), out)

    def migrate_state(
        self,
        prior: TypeSerializer[Any],
        new: TypeSerializer[Any],
        src: DataInputDeserializer,
        out: DataOutputSerializer,
    ) -> None:
        """Read one value in the old schema from ``src`` and write it in the new one to ``out``."""
        self.migrate_element(prior, new, prior.deserialize(src), out)

    def _written(self) -> tuple[int, bytes]:
        """What equality compares: the version and the content this snapshot writes (the
        identifier is the class's; the type is compared first)."""
        out = DataOutputSerializer()
        self.write_snapshot(out)
        return self.get_current_version(), out.get_copy_of_buffer()

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return False
        assert isinstance(other, TypeSerializerSnapshot)
        return self._written() == other._written()

    def __hash__(self) -> int:
        return hash(self._written())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(v{self.VERSION})"


def describe_serializer(ser: Any) -> str:
    """A serializer as its Flink SQL type where one exists (``ROW<...>``, ``BIGINT``, ``ARRAY<INT>``;
    a POJO as ``POJO <class> ROW<fields>``), otherwise its class name with the SQL types of what it
    nests (each class's ``describe_type``); used by ``statemorph inspect``."""
    describe = getattr(ser, "describe_type", None)
    return str(describe()) if describe is not None else type(ser).__name__


__all__ = ["SERIALIZER_CLASSES", "BulkKernel", "CompatibilityType", "SchemaCompatibility", "TypeSerializer",
           "TypeSerializerSnapshot", "describe_serializer"]
