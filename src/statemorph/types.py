"""Flink's SQL logical types, a parser for Flink's type syntax and a printer back to it.

Why this exists: Table/SQL state (RowData) has no self-describing bytes; its layout follows
entirely from the row's logical type. Snapshots store the type as a Flink SQL type string, and
users write types the same way (``ROW<eventId BIGINT, metadata ROW<...>>``), so the string form
must round-trip exactly: ``parse_type(t.as_serializable_string()) == t`` and
``parse_type(str(t)) == t`` for every type.

Types are immutable, hashable dataclasses. Equality follows Flink's ``LogicalType.equals``:
nullability, every parameter and, for rows, field names and descriptions. (Compatibility
checks in :mod:`statemorph.migration` are deliberately looser; see there.)

Two printed forms, as in Flink:

- ``str(t)`` / :meth:`LogicalType.as_summary_string`: ``STRING``, ``BYTES``, ``TIMESTAMP_LTZ(3)``;
- :meth:`LogicalType.as_serializable_string`: ``VARCHAR(2147483647)``, ``VARBINARY(2147483647)``,
  ``TIMESTAMP(3) WITH LOCAL TIME ZONE``.

Also here: :class:`Timestamp`, the value type for timestamps that need nanoseconds (precision
above 6), which :class:`datetime.datetime` cannot hold.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from .errors import TypeParseError

R = TypeVar("R")

MAX_LENGTH = 2147483647
MAX_DECIMAL_PRECISION = 38
MAX_TIME_PRECISION = 9


# --------------------------------------------------------------------------------------------
# type classes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogicalType:
    """Base of every logical type. ``nullable`` is part of the type, as in Flink."""

    nullable: bool = field(default=True, kw_only=True)

    ROOT: ClassVar[str] = ""
    VISIT: ClassVar[str] = "visit_other"
    """The :class:`LogicalTypeVisitor` method that takes this type."""
    ROW_SLOT: ClassVar[str] = ""
    """How a field of this type lives in a BinaryRowData slot (Flink's ``BinaryRowData`` layout):
    ``BOOL``, ``I8`` .. ``F64`` (the value in the slot), ``STR`` / ``BIN`` (inline up to 7 bytes, else
    a reference), ``DEC_COMPACT`` / ``DEC_BIG``, ``TS_BIG``, ``ROW``, ``ARRAY``, ``MAP``, ``BLOB``
    (references; a BLOB is a RAW value's bytes, never inline); "" for a type RowData cannot hold.
    See :meth:`row_slot`."""

    def accept(self, visitor: LogicalTypeVisitor[R]) -> R:
        """``visitor``'s method for this type (Flink's ``LogicalType.accept``): the one dispatch on
        the type classes, so a module that needs a case per type writes a visitor, not an
        ``isinstance`` chain."""
        method = getattr(visitor, self.VISIT)
        return method(self)  # type: ignore[no-any-return]

    def row_slot(self) -> str:
        """:attr:`ROW_SLOT`, refined by the parameters that change the layout (a DECIMAL's or a
        timestamp's precision decides between compact and big)."""
        return self.ROW_SLOT

    @property
    def type_root(self) -> str:
        """Flink's ``LogicalTypeRoot`` name (``INTEGER``, ``VARCHAR``, ``ROW`` ...)."""
        return self.ROOT

    @property
    def stores_null(self) -> bool:
        """Whether Flink's bytes of a value of this type may be null: :attr:`nullable`, except for
        a processing-time attribute (see :class:`_TimestampKindType`). Writers check this, not
        ``nullable``, so that what Flink wrote is written again."""
        return self.nullable

    def copy(self, nullable: bool | None = None) -> LogicalType:
        """This type, optionally with another nullability (Flink's ``copy(boolean)``)."""
        return self if nullable is None else dataclasses.replace(self, nullable=nullable)

    def children(self) -> tuple[LogicalType, ...]:
        return ()

    TEXT: ClassVar[str] = ""
    """How a type without parameters prints (``INT``); a type with parameters overrides :meth:`_body`."""

    def _body(self, serializable: bool) -> str:
        if not self.TEXT:
            raise NotImplementedError(f"{type(self).__name__} has no text")
        return self.TEXT

    def _with_nullability(self, body: str) -> str:
        return body if self.nullable else body + " NOT NULL"

    def as_serializable_string(self) -> str:
        """The string Flink's ``asSerializableString`` gives; parses back to an equal type."""
        return self._with_nullability(self._body(True))

    def as_summary_string(self) -> str:
        """The string Flink's ``asSummaryString`` / ``toString`` gives (``STRING``, ``BYTES``)."""
        return self._with_nullability(self._body(False)) + self._summary_suffix()

    def _summary_suffix(self) -> str:
        return ""

    def __str__(self) -> str:
        return self.as_summary_string()


@dataclass(frozen=True)
class BooleanType(LogicalType):
    """``BOOLEAN``."""

    ROOT: ClassVar[str] = "BOOLEAN"
    VISIT: ClassVar[str] = "visit_boolean"
    ROW_SLOT: ClassVar[str] = "BOOL"
    TEXT: ClassVar[str] = "BOOLEAN"


@dataclass(frozen=True)
class TinyIntType(LogicalType):
    """``TINYINT``: 1-byte signed integer."""

    ROOT: ClassVar[str] = "TINYINT"
    VISIT: ClassVar[str] = "visit_tinyint"
    ROW_SLOT: ClassVar[str] = "I8"
    TEXT: ClassVar[str] = "TINYINT"


@dataclass(frozen=True)
class SmallIntType(LogicalType):
    """``SMALLINT``: 2-byte signed integer."""

    ROOT: ClassVar[str] = "SMALLINT"
    VISIT: ClassVar[str] = "visit_smallint"
    ROW_SLOT: ClassVar[str] = "I16"
    TEXT: ClassVar[str] = "SMALLINT"


@dataclass(frozen=True)
class IntType(LogicalType):
    """``INT`` (``INTEGER``): 4-byte signed integer."""

    ROOT: ClassVar[str] = "INTEGER"
    VISIT: ClassVar[str] = "visit_int"
    ROW_SLOT: ClassVar[str] = "I32"
    TEXT: ClassVar[str] = "INT"


@dataclass(frozen=True)
class BigIntType(LogicalType):
    """``BIGINT``: 8-byte signed integer."""

    ROOT: ClassVar[str] = "BIGINT"
    VISIT: ClassVar[str] = "visit_bigint"
    ROW_SLOT: ClassVar[str] = "I64"
    TEXT: ClassVar[str] = "BIGINT"


@dataclass(frozen=True)
class FloatType(LogicalType):
    """``FLOAT``: 4-byte IEEE float."""

    ROOT: ClassVar[str] = "FLOAT"
    VISIT: ClassVar[str] = "visit_float"
    ROW_SLOT: ClassVar[str] = "F32"
    TEXT: ClassVar[str] = "FLOAT"


@dataclass(frozen=True)
class DoubleType(LogicalType):
    """``DOUBLE``: 8-byte IEEE float."""

    ROOT: ClassVar[str] = "DOUBLE"
    VISIT: ClassVar[str] = "visit_double"
    ROW_SLOT: ClassVar[str] = "F64"
    TEXT: ClassVar[str] = "DOUBLE"


@dataclass(frozen=True)
class DateType(LogicalType):
    """``DATE``: days since 1970-01-01."""

    ROOT: ClassVar[str] = "DATE"
    VISIT: ClassVar[str] = "visit_date"
    ROW_SLOT: ClassVar[str] = "I32"
    TEXT: ClassVar[str] = "DATE"


@dataclass(frozen=True)
class DecimalType(LogicalType):
    """``DECIMAL(p, s)``; precision ≤ 18 is stored "compact" (unscaled i64)."""

    precision: int = 10
    scale: int = 0
    ROOT: ClassVar[str] = "DECIMAL"
    VISIT: ClassVar[str] = "visit_decimal"

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= MAX_DECIMAL_PRECISION:
            raise ValueError(f"DECIMAL precision must be between 1 and 38, got {self.precision}")
        if not 0 <= self.scale <= self.precision:
            raise ValueError(f"DECIMAL scale must be between 0 and the precision {self.precision}, got {self.scale}")

    @property
    def is_compact(self) -> bool:
        return self.precision <= 18

    def row_slot(self) -> str:
        return "DEC_COMPACT" if self.is_compact else "DEC_BIG"

    def _body(self, serializable: bool) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


@dataclass(frozen=True)
class _LengthType(LogicalType):
    length: int = 1
    KEYWORD: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not 1 <= self.length <= MAX_LENGTH:
            raise ValueError(f"{self.KEYWORD} length must be between 1 and {MAX_LENGTH}, got {self.length}")

    def _body(self, serializable: bool) -> str:
        return f"{self.KEYWORD}({self.length})"


@dataclass(frozen=True)
class CharType(_LengthType):
    """``CHAR(n)``: a string (stored as UTF-8 StringData, not padded by the serializer)."""

    ROOT: ClassVar[str] = "CHAR"
    VISIT: ClassVar[str] = "visit_char"
    ROW_SLOT: ClassVar[str] = "STR"
    KEYWORD: ClassVar[str] = "CHAR"


@dataclass(frozen=True)
class VarCharType(_LengthType):
    """``VARCHAR(n)``; ``STRING`` is ``VARCHAR(2147483647)``."""

    ROOT: ClassVar[str] = "VARCHAR"
    VISIT: ClassVar[str] = "visit_varchar"
    ROW_SLOT: ClassVar[str] = "STR"
    KEYWORD: ClassVar[str] = "VARCHAR"

    def _body(self, serializable: bool) -> str:
        if not serializable and self.length == MAX_LENGTH:
            return "STRING"
        return super()._body(serializable)


@dataclass(frozen=True)
class BinaryType(_LengthType):
    """``BINARY(n)``: bytes."""

    ROOT: ClassVar[str] = "BINARY"
    VISIT: ClassVar[str] = "visit_binary"
    ROW_SLOT: ClassVar[str] = "BIN"
    KEYWORD: ClassVar[str] = "BINARY"


@dataclass(frozen=True)
class VarBinaryType(_LengthType):
    """``VARBINARY(n)``; ``BYTES`` is ``VARBINARY(2147483647)``."""

    ROOT: ClassVar[str] = "VARBINARY"
    VISIT: ClassVar[str] = "visit_varbinary"
    ROW_SLOT: ClassVar[str] = "BIN"
    KEYWORD: ClassVar[str] = "VARBINARY"

    def _body(self, serializable: bool) -> str:
        if not serializable and self.length == MAX_LENGTH:
            return "BYTES"
        return super()._body(serializable)


@dataclass(frozen=True)
class _PrecisionType(LogicalType):
    precision: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.precision <= MAX_TIME_PRECISION:
            raise ValueError(f"{self.ROOT} precision must be between 0 and 9, got {self.precision}")


@dataclass(frozen=True)
class TimeType(_PrecisionType):
    """``TIME(p)``: milliseconds of the day (Flink stores only millis whatever ``p`` is)."""

    ROOT: ClassVar[str] = "TIME_WITHOUT_TIME_ZONE"
    VISIT: ClassVar[str] = "visit_time"
    ROW_SLOT: ClassVar[str] = "I32"

    def _body(self, serializable: bool) -> str:
        return f"TIME({self.precision})"


TIMESTAMP_KINDS = ("REGULAR", "ROWTIME", "PROCTIME")
"""Flink's ``TimestampKind``: a plain timestamp, or a query's event-time / processing-time attribute."""


@dataclass(frozen=True)
class _TimestampKindType(_PrecisionType):
    """A timestamp type that may be a time attribute. As in Flink, ``kind`` is metadata: it does
    not take part in equality (nor in the serializable string), only in the summary string
    (``TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*``) and in the Java-serialized type. SQL state keeps it:
    a deduplication on processing time stores its input row with the ``*PROCTIME*`` column."""

    kind: str = field(default="REGULAR", compare=False, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in TIMESTAMP_KINDS:
            raise ValueError(f"timestamp kind must be one of {', '.join(TIMESTAMP_KINDS)}, got {self.kind!r}")

    def _summary_suffix(self) -> str:
        return "" if self.kind == "REGULAR" else f" *{self.kind}*"

    @property
    def stores_null(self) -> bool:
        """A ``*PROCTIME*`` column is ``NOT NULL`` but not materialised in every operator's state:
        a processing-time interval join buffers its rows with that column null (Flink's
        BinaryRowWriter checks no nullability), so a rewrite carries the null."""
        return self.nullable or self.kind == "PROCTIME"


@dataclass(frozen=True)
class TimestampType(_TimestampKindType):
    """``TIMESTAMP(p)`` (without time zone); precision ≤ 3 is stored compact (millis)."""

    precision: int = 6
    ROOT: ClassVar[str] = "TIMESTAMP_WITHOUT_TIME_ZONE"
    VISIT: ClassVar[str] = "visit_timestamp"

    @property
    def is_compact(self) -> bool:
        return self.precision <= 3

    def row_slot(self) -> str:
        return "I64" if self.is_compact else "TS_BIG"

    def _body(self, serializable: bool) -> str:
        return f"TIMESTAMP({self.precision})"


@dataclass(frozen=True)
class LocalZonedTimestampType(_TimestampKindType):
    """``TIMESTAMP_LTZ(p)`` = ``TIMESTAMP(p) WITH LOCAL TIME ZONE``: an instant."""

    precision: int = 6
    ROOT: ClassVar[str] = "TIMESTAMP_WITH_LOCAL_TIME_ZONE"
    VISIT: ClassVar[str] = "visit_local_zoned_timestamp"

    @property
    def is_compact(self) -> bool:
        return self.precision <= 3

    def row_slot(self) -> str:
        return "I64" if self.is_compact else "TS_BIG"

    def _body(self, serializable: bool) -> str:
        if serializable:
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        return f"TIMESTAMP_LTZ({self.precision})"


@dataclass(frozen=True)
class ArrayType(LogicalType):
    """``ARRAY<T>``."""

    element_type: LogicalType = field(default_factory=lambda: IntType())
    ROOT: ClassVar[str] = "ARRAY"
    VISIT: ClassVar[str] = "visit_array"
    ROW_SLOT: ClassVar[str] = "ARRAY"

    def children(self) -> tuple[LogicalType, ...]:
        return (self.element_type,)

    def _body(self, serializable: bool) -> str:
        return f"ARRAY<{_fmt(self.element_type, serializable)}>"


@dataclass(frozen=True)
class RawType(LogicalType):
    """``RAW('<class>')``: a value of a Java class that only its own serializer reads (Kryo, a user
    serializer). statemorph names such a state's type with it and carries its bytes unread."""

    class_name: str = ""
    ROOT: ClassVar[str] = "RAW"
    VISIT: ClassVar[str] = "visit_raw"
    ROW_SLOT: ClassVar[str] = "BLOB"
    """In a row, a SQL data view's placeholder (``RAW(MapView / ListView, NullSerializer)``): var-part
    bytes no kernel handles (Flink's ``BinaryWriter.writeRawValue``), so a row holding one is
    encoded, decoded and migrated per value."""

    def _body(self, serializable: bool) -> str:
        return f"RAW('{escape_single_quotes(self.class_name)}')"


@dataclass(frozen=True)
class MultisetType(LogicalType):
    """``MULTISET<T>``: stored as a map element → INT count."""

    element_type: LogicalType = field(default_factory=lambda: IntType())
    ROOT: ClassVar[str] = "MULTISET"
    VISIT: ClassVar[str] = "visit_multiset"
    ROW_SLOT: ClassVar[str] = "MAP"

    def children(self) -> tuple[LogicalType, ...]:
        return (self.element_type,)

    def map_parts(self) -> tuple[LogicalType, LogicalType]:
        """As a map: element → ``INT NOT NULL`` count."""
        return self.element_type, IntType(nullable=False)

    def _body(self, serializable: bool) -> str:
        return f"MULTISET<{_fmt(self.element_type, serializable)}>"


@dataclass(frozen=True)
class MapType(LogicalType):
    """``MAP<K, V>``."""

    key_type: LogicalType = field(default_factory=lambda: IntType())
    value_type: LogicalType = field(default_factory=lambda: IntType())
    ROOT: ClassVar[str] = "MAP"
    VISIT: ClassVar[str] = "visit_map"
    ROW_SLOT: ClassVar[str] = "MAP"

    def children(self) -> tuple[LogicalType, ...]:
        return (self.key_type, self.value_type)

    def map_parts(self) -> tuple[LogicalType, LogicalType]:
        """Key and value types (as :meth:`MultisetType.map_parts`)."""
        return self.key_type, self.value_type

    def _body(self, serializable: bool) -> str:
        return f"MAP<{_fmt(self.key_type, serializable)}, {_fmt(self.value_type, serializable)}>"


@dataclass(frozen=True)
class RowField:
    """One named field of a row; ``description`` is the optional comment."""

    name: str
    type: LogicalType
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"row field names must be non-empty strings, got {self.name!r}")
        if not isinstance(self.type, LogicalType):
            raise ValueError(f"row field {self.name!r}: type must be a LogicalType, got {self.type!r}")

    def _fmt(self, serializable: bool) -> str:
        text = f"{escape_identifier(self.name)} {_fmt(self.type, serializable)}"
        if self.description is not None:
            text += f" '{escape_single_quotes(self.description)}'"
        return text


@dataclass(frozen=True)
class RowType(LogicalType):
    """``ROW<name T 'comment', ...>``. Field names are unique (case-sensitive)."""

    fields: tuple[RowField, ...] = ()
    ROOT: ClassVar[str] = "ROW"
    VISIT: ClassVar[str] = "visit_row"
    ROW_SLOT: ClassVar[str] = "ROW"

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))
        seen: set[str] = set()
        for f in self.fields:
            if not isinstance(f, RowField):
                raise ValueError(f"RowType fields must be RowField instances, got {f!r}")
            if f.name in seen:
                raise ValueError(f"duplicate row field name {f.name!r}")
            seen.add(f.name)

    @classmethod
    def of(cls, *fields: tuple[str, LogicalType] | tuple[str, LogicalType, str | None] | RowField,
           nullable: bool = True) -> RowType:
        """``RowType.of(("a", IntType()), ("b", VarCharType(MAX_LENGTH), "comment"))``."""
        built = [f if isinstance(f, RowField) else RowField(*f) for f in fields]
        return cls(tuple(built), nullable=nullable)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def field_types(self) -> list[LogicalType]:
        return [f.type for f in self.fields]

    @property
    def arity(self) -> int:
        return len(self.fields)

    def field_index(self, name: str) -> int:
        """Position of the field called ``name``; -1 when there is none (as in Flink)."""
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        return -1

    def children(self) -> tuple[LogicalType, ...]:
        return tuple(f.type for f in self.fields)

    def __iter__(self) -> Iterator[RowField]:
        return iter(self.fields)

    def _body(self, serializable: bool) -> str:
        return "ROW<" + ", ".join(f._fmt(serializable) for f in self.fields) + ">"


@dataclass(frozen=True)
class StructuredType(RowType):
    """``STRUCTURED<'<class>', name T, ...>``: Flink SQL's inline structured type (an aggregate
    function's accumulator class, e.g. the retracting FIRST_VALUE / LAST_VALUE / LISTAGG ones),
    identified by its class name. Its attributes are the fields: in RowData it is stored as a
    ROW (``InternalSerializers``: a ``RowDataSerializer`` of the attribute types, a nested
    ``BinaryRowData``), so it is a :class:`RowType` to every codec; only its Java-serialized
    LogicalType and its printed form differ. ``final`` / ``instantiable`` are Flink's flags, and
    ``has_implementation_class`` whether the class was resolved (written as a class literal).
    ``flink1_shape``: read from a Flink 1.x savepoint, whose Java-serialized StructuredType has no
    ``className`` field (the class is its literal's); metadata like a timestamp's kind, so that the
    type is written back in the shape it came in; ``comparison`` likewise (Flink's
    ``StructuredComparison``: 2.x derives ``EQUALS`` for an accumulator, 1.20 ``NONE``)."""

    class_name: str = ""
    final: bool = True
    instantiable: bool = True
    has_implementation_class: bool = True
    flink1_shape: bool = field(default=False, compare=False)
    comparison: str = field(default="EQUALS", compare=False)
    ROOT: ClassVar[str] = "STRUCTURED_TYPE"
    VISIT: ClassVar[str] = "visit_structured"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.class_name:
            raise ValueError("a STRUCTURED type needs its class name")

    def _body(self, serializable: bool) -> str:
        attributes = ", ".join(f._fmt(serializable) for f in self.fields)
        return f"STRUCTURED<'{escape_single_quotes(self.class_name)}', {attributes}>"


class LogicalTypeVisitor(Generic[R]):
    """One method per logical type class, as Flink's ``LogicalTypeVisitor`` (``t.accept(visitor)``
    calls the one for ``t``). Each method falls back to the method of its family (the string,
    binary-string, integer and timestamp types) and then to :meth:`visit_other`, so a visitor
    names only the cases it distinguishes, and a new type class needs a method here and in the
    visitors that handle it, nowhere else. :meth:`visit_other` raises ``NotImplementedError``;
    visitors override it with their own error or default."""

    def visit_other(self, t: LogicalType) -> R:
        raise NotImplementedError(f"{type(self).__name__}: no case for {t}")

    def visit_boolean(self, t: BooleanType) -> R:
        return self.visit_other(t)

    def visit_integer(self, t: TinyIntType | SmallIntType | IntType | BigIntType) -> R:
        """TINYINT, SMALLINT, INT and BIGINT."""
        return self.visit_other(t)

    def visit_tinyint(self, t: TinyIntType) -> R:
        return self.visit_integer(t)

    def visit_smallint(self, t: SmallIntType) -> R:
        return self.visit_integer(t)

    def visit_int(self, t: IntType) -> R:
        return self.visit_integer(t)

    def visit_bigint(self, t: BigIntType) -> R:
        return self.visit_integer(t)

    def visit_float(self, t: FloatType) -> R:
        return self.visit_other(t)

    def visit_double(self, t: DoubleType) -> R:
        return self.visit_other(t)

    def visit_date(self, t: DateType) -> R:
        return self.visit_other(t)

    def visit_decimal(self, t: DecimalType) -> R:
        return self.visit_other(t)

    def visit_character_string(self, t: CharType | VarCharType) -> R:
        """CHAR and VARCHAR."""
        return self.visit_other(t)

    def visit_char(self, t: CharType) -> R:
        return self.visit_character_string(t)

    def visit_varchar(self, t: VarCharType) -> R:
        return self.visit_character_string(t)

    def visit_binary_string(self, t: BinaryType | VarBinaryType) -> R:
        """BINARY and VARBINARY."""
        return self.visit_other(t)

    def visit_binary(self, t: BinaryType) -> R:
        return self.visit_binary_string(t)

    def visit_varbinary(self, t: VarBinaryType) -> R:
        return self.visit_binary_string(t)

    def visit_time(self, t: TimeType) -> R:
        return self.visit_other(t)

    def visit_any_timestamp(self, t: TimestampType | LocalZonedTimestampType) -> R:
        """TIMESTAMP and TIMESTAMP_LTZ."""
        return self.visit_other(t)

    def visit_timestamp(self, t: TimestampType) -> R:
        return self.visit_any_timestamp(t)

    def visit_local_zoned_timestamp(self, t: LocalZonedTimestampType) -> R:
        return self.visit_any_timestamp(t)

    def visit_array(self, t: ArrayType) -> R:
        return self.visit_other(t)

    def visit_multiset(self, t: MultisetType) -> R:
        return self.visit_other(t)

    def visit_map(self, t: MapType) -> R:
        return self.visit_other(t)

    def visit_row(self, t: RowType) -> R:
        return self.visit_other(t)

    def visit_structured(self, t: StructuredType) -> R:
        """A structured type is stored as the ROW of its attributes: by default, as a row."""
        return self.visit_row(t)

    def visit_raw(self, t: RawType) -> R:
        return self.visit_other(t)


def _fmt(t: LogicalType, serializable: bool) -> str:
    return t.as_serializable_string() if serializable else t.as_summary_string()


def escape_identifier(name: str) -> str:
    """Backquote a name, doubling backquotes inside (Flink's ``EncodingUtils.escapeIdentifier``)."""
    return "`" + name.replace("`", "``") + "`"


def escape_single_quotes(text: str) -> str:
    """Double single quotes (Flink's ``EncodingUtils.escapeSingleQuotes``)."""
    return text.replace("'", "''")


# convenient constructors, Flink's DataTypes style
def STRING(nullable: bool = True) -> VarCharType:  # noqa: N802
    return VarCharType(MAX_LENGTH, nullable=nullable)


def BYTES(nullable: bool = True) -> VarBinaryType:  # noqa: N802
    return VarBinaryType(MAX_LENGTH, nullable=nullable)


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------

_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_IDENT_PART = _IDENT_START | frozenset("0123456789")
_MAX_DEPTH = 200


class _Parser:
    """Recursive-descent parser over the raw text; every error carries the text position."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.params: list[tuple[int, int]] = []  # (value, position) of the last (p, s) parameter list

    # -- lexing helpers -----------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> TypeParseError:
        return TypeParseError(message, self.text, self.pos if pos is None else pos)

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos].isspace():
            pos += 1
        self.pos = pos

    def peek_word(self) -> str:
        """The next bare word (upper-cased) without consuming it; "" if none."""
        self.skip_ws()
        end = self.pos
        while end < len(self.text) and self.text[end] in _IDENT_PART:
            end += 1
        return self.text[self.pos:end].upper()

    def word(self) -> str:
        w = self.peek_word()
        self.pos += len(w)
        return w

    def accept_word(self, expected: str) -> bool:
        if self.peek_word() == expected:
            self.pos += len(expected)
            return True
        return False

    def expect_word(self, expected: str) -> None:
        if not self.accept_word(expected):
            found = self.peek_word() or self._describe_next()
            raise self.error(f"expected {expected}, found {found}")

    def peek_char(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept_char(self, c: str) -> bool:
        if self.peek_char() == c:
            self.pos += 1
            return True
        return False

    def expect_char(self, c: str) -> None:
        if not self.accept_char(c):
            raise self.error(f"expected '{c}', found {self._describe_next()}")

    def _describe_next(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.text):
            return "end of input"
        return repr(self.text[self.pos])

    def integer(self, what: str) -> int:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit() and self.text[self.pos].isascii():
            self.pos += 1
        if start == self.pos:
            raise self.error(f"expected {what} (an integer), found {self._describe_next()}")
        digits = self.text[start:self.pos]
        if len(digits) > 10 or int(digits) > MAX_LENGTH:
            raise self.error(f"{what} {digits} is too large", start)
        return int(digits)

    # -- grammar --------------------------------------------------------------------------
    def parse_all(self) -> LogicalType:
        t = self.parse_type()
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.error(f"unexpected {self._describe_next()} after the type")
        return t

    def parse_type(self) -> LogicalType:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"type nested deeper than {_MAX_DEPTH} levels")
        try:
            start = self.pos
            t = self.parse_base(start)
            if self.accept_word("NOT"):
                self.expect_word("NULL")
                t = t.copy(nullable=False)
            elif self.accept_word("NULL"):
                t = t.copy(nullable=True)
            if self.peek_char() == "*":
                t = self.time_attribute(t)
            return t
        finally:
            self.depth -= 1

    def time_attribute(self, t: LogicalType) -> LogicalType:
        """``*ROWTIME*`` / ``*PROCTIME*`` after a timestamp: the summary string's time attribute
        (so a type ``inspect`` prints parses back with its kind)."""
        pos = self.pos
        self.expect_char("*")
        kind = self.word()
        self.expect_char("*")
        if kind not in TIMESTAMP_KINDS[1:]:
            raise self.error(f"unknown time attribute *{kind}* (expected *ROWTIME* or *PROCTIME*)", pos)
        if not isinstance(t, _TimestampKindType):
            raise self.error(f"*{kind}* marks a time attribute, which only a TIMESTAMP or TIMESTAMP_LTZ can be",
                             pos)
        return dataclasses.replace(t, kind=kind)

    def optional_params(self, count: int, what: tuple[str, ...]) -> list[int] | None:
        """``(a)`` or ``(a, b)`` up to ``count`` integers, or None when there is no ``(``."""
        if not self.accept_char("("):
            return None
        positions = []
        values: list[int] = []
        while not values or (len(values) < count and self.accept_char(",")):
            self.skip_ws()
            positions.append(self.pos)
            values.append(self.integer(what[len(values)]))
        self.expect_char(")")
        self.params = list(zip(values, positions, strict=True))
        return values

    def build(self, pos: int, factory: Any, *args: Any) -> LogicalType:
        """``factory(*args)``; a ValueError (a length, precision or scale out of range) points at
        the parameter it names (its messages end in ``got <value>``), else at the type."""
        try:
            return factory(*args)  # type: ignore[no-any-return]
        except ValueError as e:
            at = next((p for v, p in self.params if p > pos and str(e).endswith(f"got {v}")), pos)
            raise self.error(str(e), at) from None

    def parse_base(self, start: int) -> LogicalType:
        self.skip_ws()
        start = self.pos
        kw = self.word()
        if not kw:
            raise self.error(f"expected a type, found {self._describe_next()}")
        simple = _SIMPLE_KEYWORDS.get(kw)
        if simple is not None:
            if kw == "DOUBLE":
                self.accept_word("PRECISION")
            return simple()
        if kw in ("DECIMAL", "DEC", "NUMERIC"):
            dec = self.optional_params(2, ("precision", "scale")) or [10]
            return self.build(start, DecimalType, dec[0], dec[1] if len(dec) > 1 else 0)
        if kw in ("CHAR", "CHARACTER", "VARCHAR", "BINARY", "VARBINARY"):
            cls: type[_LengthType] = {"CHAR": CharType, "CHARACTER": CharType, "VARCHAR": VarCharType,
                                      "BINARY": BinaryType, "VARBINARY": VarBinaryType}[kw]
            if cls in (CharType, BinaryType) and self.accept_word("VARYING"):
                cls = VarCharType if cls is CharType else VarBinaryType
            params = self.optional_params(1, ("length",))
            return self.build(start, cls, params[0] if params else 1)
        if kw == "STRING":
            return VarCharType(MAX_LENGTH)
        if kw == "BYTES":
            return VarBinaryType(MAX_LENGTH)
        if kw == "TIME":
            params = self.optional_params(1, ("precision",))
            self._without_time_zone()
            return self.build(start, TimeType, params[0] if params else 0)
        if kw in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            params = self.optional_params(1, ("precision",))
            precision = params[0] if params else 6
            if kw == "TIMESTAMP_LTZ":
                return self.build(start, LocalZonedTimestampType, precision)
            if self.peek_word() == "WITH":
                wpos = self.pos
                self.word()
                if self.accept_word("LOCAL"):
                    self.expect_word("TIME")
                    self.expect_word("ZONE")
                    return self.build(start, LocalZonedTimestampType, precision)
                raise self.error("TIMESTAMP WITH TIME ZONE is not supported by Flink's runtime", wpos)
            self._without_time_zone()
            return self.build(start, TimestampType, precision)
        if kw in ("ARRAY", "MULTISET"):
            self.expect_char("<")
            element = self.parse_type()
            self.expect_char(">")
            return ArrayType(element) if kw == "ARRAY" else MultisetType(element)
        if kw == "MAP":
            self.expect_char("<")
            key = self.parse_type()
            self.expect_char(",")
            value = self.parse_type()
            self.expect_char(">")
            return MapType(key, value)
        if kw == "ROW":
            return self.parse_row(start)
        if kw == "STRUCTURED":
            self.expect_char("<")
            if self.peek_char() != "'":
                raise self.error(f"expected the accumulator class as a 'string', found {self._describe_next()}")
            name = self.string_literal()
            if not name:
                raise self.error("STRUCTURED needs its class name, STRUCTURED<'com.acme.Acc', a INT>", start)
            self.expect_char(",")
            return StructuredType(self.parse_fields(">"), class_name=name)
        if kw == "RAW":
            self.expect_char("(")
            if self.peek_char() != "'":
                raise self.error(f"expected the Java class as a 'string', found {self._describe_next()}")
            name = self.string_literal()
            self.expect_char(")")
            if not name:
                raise self.error("RAW needs its Java class name, RAW('com.acme.Session')", start)
            return RawType(name)
        raise self.error(f"unknown type {self.text[start:self.pos]!r}", start)

    def _without_time_zone(self) -> None:
        if self.peek_word() == "WITHOUT":
            self.word()
            self.expect_word("TIME")
            self.expect_word("ZONE")

    def parse_row(self, start: int) -> RowType:
        if self.accept_char("<"):
            close = ">"
        elif self.accept_char("("):
            close = ")"
        else:
            raise self.error(f"expected '<' or '(' after ROW, found {self._describe_next()}")
        if self.accept_char(close):
            return RowType()
        return RowType(self.parse_fields(close))

    def parse_fields(self, close: str) -> tuple[RowField, ...]:
        """``name T 'comment', ...`` up to ``close`` (a ROW's fields, a STRUCTURED type's attributes)."""
        fields: list[RowField] = []
        names: set[str] = set()
        while True:
            self.skip_ws()
            npos = self.pos
            name = self.identifier()
            if name in names:
                raise self.error(f"duplicate row field name {name!r}", npos)
            names.add(name)
            ftype = self.parse_type()
            description = self.string_literal() if self.peek_char() == "'" else None
            fields.append(RowField(name, ftype, description))
            if self.accept_char(close):
                return tuple(fields)
            self.expect_char(",")

    def identifier(self) -> str:
        self.skip_ws()
        text, start = self.text, self.pos
        if start < len(text) and text[start] == "`":
            out: list[str] = []
            pos = start + 1
            while True:
                end = text.find("`", pos)
                if end < 0:
                    raise self.error("unterminated `quoted` identifier", start)
                out.append(text[pos:end])
                if end + 1 < len(text) and text[end + 1] == "`":
                    out.append("`")
                    pos = end + 2
                    continue
                self.pos = end + 1
                name = "".join(out)
                if not name:
                    raise self.error("empty field name", start)
                return name
        if start >= len(text) or text[start] not in _IDENT_START:
            raise self.error(f"expected a field name, found {self._describe_next()}")
        end = start
        while end < len(text) and text[end] in _IDENT_PART:
            end += 1
        self.pos = end
        return text[start:end]

    def string_literal(self) -> str:
        self.skip_ws()
        text, start = self.text, self.pos
        out: list[str] = []
        pos = start + 1
        while True:
            end = text.find("'", pos)
            if end < 0:
                raise self.error("unterminated 'string' literal", start)
            out.append(text[pos:end])
            if end + 1 < len(text) and text[end + 1] == "'":
                out.append("'")
                pos = end + 2
                continue
            self.pos = end + 1
            return "".join(out)


_SIMPLE_KEYWORDS: dict[str, type[LogicalType]] = {
    "BOOLEAN": BooleanType,
    "TINYINT": TinyIntType,
    "SMALLINT": SmallIntType,
    "INT": IntType,
    "INTEGER": IntType,
    "BIGINT": BigIntType,
    "FLOAT": FloatType,
    "DOUBLE": DoubleType,
    "DATE": DateType,
}


def parse_type(text: str | LogicalType) -> LogicalType:
    """Parse Flink's SQL type syntax (keywords case-insensitive). A LogicalType passes through.

    Raises :class:`TypeParseError` pointing at the offending position.
    """
    if isinstance(text, LogicalType):
        return text
    if not isinstance(text, str):
        raise TypeParseError(f"a type must be a string or LogicalType, got {type(text).__name__}")
    return _Parser(text).parse_all()


def parse_row_type(text: str | LogicalType) -> RowType:
    """Like :func:`parse_type` but the result must be a ROW."""
    t = parse_type(text)
    if not isinstance(t, RowType):
        raise TypeParseError(f"expected a ROW type, got {t}")
    return t


# --------------------------------------------------------------------------------------------
# timestamp values with nanoseconds
# --------------------------------------------------------------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True, order=True)
class Timestamp:
    """Flink's ``TimestampData``: epoch milliseconds plus nanoseconds within the millisecond
    (0..999999). Needed because :class:`datetime.datetime` stops at microseconds while
    TIMESTAMP(7..9) keeps nanoseconds. For TIMESTAMP the epoch is a local date-time at UTC
    offset zero; for TIMESTAMP_LTZ it is an instant."""

    millis: int
    nano_of_millisecond: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.millis, int) or not isinstance(self.nano_of_millisecond, int):
            raise TypeError("Timestamp fields are integers")
        if not -(1 << 63) <= self.millis < (1 << 63):
            raise ValueError(f"Timestamp millis {self.millis} does not fit in 64 bits")
        if not 0 <= self.nano_of_millisecond <= 999_999:
            raise ValueError(f"nano_of_millisecond must be 0..999999, got {self.nano_of_millisecond}")

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> Timestamp:
        """Naive datetimes count from the naive epoch, aware ones as instants."""
        delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        millis, micro_rest = divmod(micros, 1000)
        return cls(millis, micro_rest * 1000)

    @classmethod
    def from_epoch_nanos(cls, nanos: int) -> Timestamp:
        millis, rest = divmod(nanos, 1_000_000)
        return cls(millis, rest)

    @property
    def epoch_nanos(self) -> int:
        return self.millis * 1_000_000 + self.nano_of_millisecond

    def to_datetime(self, tz: _dt.tzinfo | None = None) -> _dt.datetime:
        """Naive (``tz=None``) or aware datetime; sub-microsecond nanoseconds are dropped."""
        delta = _dt.timedelta(milliseconds=self.millis, microseconds=self.nano_of_millisecond // 1000)
        if tz is None:
            return _EPOCH + delta
        return (_EPOCH_UTC + delta).astimezone(tz)


__all__ = [
    "ArrayType",
    "RawType",
    "BigIntType",
    "BinaryType",
    "BooleanType",
    "BYTES",
    "CharType",
    "DateType",
    "DecimalType",
    "DoubleType",
    "FloatType",
    "IntType",
    "LocalZonedTimestampType",
    "LogicalType",
    "LogicalTypeVisitor",
    "MapType",
    "MAX_LENGTH",
    "MultisetType",
    "RowField",
    "RowType",
    "StructuredType",
    "SmallIntType",
    "STRING",
    "TIMESTAMP_KINDS",
    "TimeType",
    "Timestamp",
    "TimestampType",
    "TinyIntType",
    "VarBinaryType",
    "VarCharType",
    "escape_identifier",
    "escape_single_quotes",
    "parse_row_type",
    "parse_type",
]
