"""TOML schema files: the new types of a job's states, written the way a Flink SQL user writes types.

Why a file: ``statemorph check`` / ``migrate`` answer "can the savepoint taken by the OLD job be
restored by the NEW job?". The new job is described by the serializer of each state, and people
already know how to write those types: Flink SQL type syntax. A schema file looks like::

    # schema of the Events job after the change
    format = 1                      # schema file format version (optional)

    [states.events]
    type = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT>>"
    # kind = "value"                # value | list | map; default: the kind recorded in the savepoint
    # serializer = "auto"           # auto | rowdata | row | datastream | avro | pojo
    # user_key_type = "STRING"      # map state only: the map's key type (default: unchanged)
    # avro_schema = '''{...}'''     # serializer = "avro": the new Avro schema (JSON)
    # pojo_class = "com.acme.Profile"   # serializer = "pojo": the Java class (default: the savepoint's)
    # defaults = { score = 1.5 }    # serializer = "pojo": values of added fields the constructor sets

A Flink savepoint holds states per operator, so its states are addressed by the operator's uid (or,
for an operator that has none, such as a SQL operator, its 32-hex-digit uid hash)::

    [operators.events-state.states.events]
    type = "ROW<...>"

``type`` is the value type of value state, the element type of list state and the value type of
map state. ``serializer`` chooses how the type becomes bytes:

- ``rowdata``: Flink's SQL/Table ``RowDataSerializer`` (BinaryRowData); a ROW, or an ARRAY / MAP of
  ROWs (each ROW RowData inside the list / map a SQL operator keeps them in, e.g. Top-N's
  ``ARRAY<ROW<...>>``);
- ``row``: flink-core ``RowSerializer`` (DataStream ``Row``) with the ROW's field names;
- ``datastream``: the DataStream serializers (INT → IntSerializer, STRING → StringSerializer, BYTES →
  byte[], ARRAY → ListSerializer, MAP → MapSerializer, ROW → RowSerializer, ...);
- ``avro``: ``AvroSerializer`` over ``avro_schema``;
- ``pojo``: Flink's ``PojoSerializer`` of a Java POJO class: ``type`` is a ROW of the class's fields
  (any order: Flink orders them by name), each through the DataStream serializers above. The class
  is ``pojo_class``, by default the one the savepoint's snapshot names (Flink knows a POJO by its
  class name, so an evolved class keeps it). ``NOT NULL`` marks a Java primitive field (``BIGINT NOT
  NULL`` is ``long``, ``DOUBLE NOT NULL`` is ``double``): a field the old values lack then gets the
  value Flink's no-arg constructor leaves in it, 0, 0.0, false or ``'\\0'``, where a nullable (boxed
  or object) field gets null. ``defaults`` gives other values for added fields (a field initializer
  such as ``double score = 1.5``); a non-primitive ``NOT NULL`` field needs one;
- ``auto`` (default): the same family the savepoint already uses for that state, so a file only has to
  say what changed; inside an ARRAY, MAP or tuple too (a ROW the savepoint keeps as RowData, such as
  a Flink SQL operator's rows in a list, stays RowData). Without a savepoint to look at, ROW means
  ``rowdata``, anything else ``datastream``.

States the file does not name are carried over unchanged (their serializers are restored from the
savepoint's snapshots); a file that names no state at all is a plain rewrite of the savepoint. A
state statemorph cannot decode (Kryo, a user serializer) is written as ``type = "RAW('<class>')"``
with ``serializer = "opaque"``, exactly as ``statemorph inspect`` / ``statemorph schema`` print it:
it is carried over byte for byte, and any other type for it is refused (exit 7, unsupported state).
``serializer = "tuple"`` is Flink's ``TupleSerializer`` (Tuple1..Tuple25), its fields a ROW
``f0, f1, ...``. Key and namespace serializers cannot change (Flink requires them AS_IS).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib

from .errors import StatemorphError, TypeParseError
from .types import (
    BooleanType,
    DoubleType,
    FloatType,
    LogicalType,
    RawType,
    RowType,
    escape_identifier,
    parse_type,
)
from .typeutils import describe_serializer

FORMAT_VERSION = 1
KINDS = ("value", "list", "map")
FAMILIES = ("auto", "rowdata", "row", "datastream", "tuple", "avro", "pojo", "opaque")
_STATE_KEYS = {"type", "kind", "serializer", "user_key_type", "avro_schema", "pojo_class", "defaults"}


class SchemaFileError(StatemorphError, ValueError):
    """A schema file is missing, not TOML, or describes a state it cannot build a serializer for."""


@dataclass(frozen=True)
class StateSchema:
    """The new schema of one state as written in the file (types parsed, nothing resolved yet)."""

    name: str
    type: LogicalType | None = None
    kind: str | None = None
    serializer: str = "auto"
    user_key_type: LogicalType | None = None
    avro_schema: str | None = None
    pojo_class: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SchemaFile:
    """A parsed schema file: state name → :class:`StateSchema` (``[states.<name>]``), and for
    savepoints whose states belong to operators, operator uid (or uid hash) → state name →
    :class:`StateSchema` (``[operators.<uid>.states.<name>]``)."""

    states: Mapping[str, StateSchema]
    source: str = "<string>"
    operators: Mapping[str, Mapping[str, StateSchema]] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.states


def parse_schema(text: str, source: str = "<string>") -> SchemaFile:
    """Parse schema-file TOML text. Errors name the file, the state and the key at fault."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SchemaFileError(f"{source}: not valid TOML: {e}") from None
    unknown = set(doc) - {"format", "states", "operators"}
    if unknown:
        raise SchemaFileError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))} "
                              f"(expected 'format', [states.<name>] and [operators.<uid>.states.<name>] tables)")
    version = doc.get("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise SchemaFileError(f"{source}: schema file format {version!r} is not supported (only {FORMAT_VERSION})")
    states = _parse_states(source, "states", doc.get("states", {}))
    ops_doc = doc.get("operators", {})
    if not isinstance(ops_doc, dict):
        raise SchemaFileError(f"{source}: operators must be a table of [operators.<uid>.states.<name>] tables")
    operators: dict[str, Mapping[str, StateSchema]] = {}
    for uid, body in ops_doc.items():
        where = f"operators.{uid}"
        if not isinstance(body, dict) or set(body) != {"states"}:
            raise SchemaFileError(f"{source}: [{where}] must hold only [{where}.states.<name>] tables")
        operators[uid] = _parse_states(source, f"{where}.states", body["states"])
        if not operators[uid]:
            raise SchemaFileError(f"{source}: [{where}] names no state")
    return SchemaFile(states, source, operators)


def _parse_states(source: str, prefix: str, doc: Any) -> dict[str, StateSchema]:
    if not isinstance(doc, dict):
        raise SchemaFileError(f"{source}: {prefix} must be a table of [{prefix}.<name>] tables")
    return {name: _parse_state(source, name, body, prefix) for name, body in doc.items()}


def load_schema(path: str | os.PathLike[str]) -> SchemaFile:
    """Read and parse a schema file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SchemaFileError(f"cannot read schema file {os.fspath(path)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SchemaFileError(f"schema file {os.fspath(path)!r} is not UTF-8: {e}") from None
    return parse_schema(text, os.fspath(path))


def _parse_state(source: str, name: str, body: Any, prefix: str = "states") -> StateSchema:
    where = f"{source}: [{prefix}.{name}]"
    if not isinstance(body, dict):
        raise SchemaFileError(f"{where} must be a table")
    unknown = set(body) - _STATE_KEYS
    if unknown:
        raise SchemaFileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(sorted(_STATE_KEYS))})")
    kind = body.get("kind")
    if kind is not None and kind not in KINDS:
        raise SchemaFileError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    family = body.get("serializer", "auto")
    if family not in FAMILIES:
        raise SchemaFileError(f"{where}: serializer must be one of {', '.join(FAMILIES)}, got {family!r}")
    avro_schema = body.get("avro_schema")
    if family == "avro":
        if not isinstance(avro_schema, str):
            raise SchemaFileError(f"{where}: serializer = \"avro\" needs avro_schema (the Avro schema as JSON)")
        try:
            json.loads(avro_schema)
        except ValueError as e:
            raise SchemaFileError(f"{where}: avro_schema is not JSON: {e}") from None
    elif avro_schema is not None:
        raise SchemaFileError(f"{where}: avro_schema is only allowed with serializer = \"avro\"")
    type_text = body.get("type")
    if type_text is None and family != "avro":
        raise SchemaFileError(f"{where}: missing 'type' (the new type in Flink SQL syntax, e.g. \"ROW<id BIGINT>\")")
    logical = _parse_type_at(where, "type", type_text) if type_text is not None else None
    if logical is not None and not _family_takes(family, logical):
        raise SchemaFileError(f"{where}: serializer = \"{family}\" needs a {_family_types(family)}, got {logical}")
    if (family == "opaque") != isinstance(logical, RawType):
        raise SchemaFileError(f"{where}: serializer = \"opaque\" goes with a RAW('<class>') type, as inspect prints "
                              f"it, and a RAW type with serializer = \"opaque\" (got {family!r} and {logical})")
    ukt = body.get("user_key_type")
    if ukt is not None and kind not in (None, "map"):
        raise SchemaFileError(f"{where}: user_key_type is only meaningful for map state")
    user_key = _parse_type_at(where, "user_key_type", ukt) if ukt is not None else None
    pojo_class, defaults = _parse_pojo(where, family, logical, body)
    return StateSchema(name, logical, kind, family, user_key, avro_schema, pojo_class, defaults)


def _parse_pojo(where: str, family: str, logical: LogicalType | None,
                body: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``pojo_class`` and ``defaults`` of a ``serializer = "pojo"`` state, checked: a ROW type,
    defaults only for its fields and of their types, a value for every non-primitive NOT NULL field."""
    pojo_class, defaults = body.get("pojo_class"), body.get("defaults", {})
    if family != "pojo":
        extra = [k for k in ("pojo_class", "defaults") if k in body]
        if extra:
            raise SchemaFileError(f"{where}: {' and '.join(extra)} only go with serializer = \"pojo\"")
        return None, {}
    if not isinstance(logical, RowType):
        raise SchemaFileError(f"{where}: serializer = \"pojo\" needs a ROW type of the class's fields, got {logical}")
    if pojo_class is not None and (not isinstance(pojo_class, str) or not pojo_class):
        raise SchemaFileError(f"{where}: pojo_class must be a Java class name, got {pojo_class!r}")
    if not isinstance(defaults, dict):
        raise SchemaFileError(f"{where}: defaults must be a table of field = value, got {defaults!r}")
    types = {f.name: f.type for f in logical.fields}
    unknown = sorted(set(defaults) - set(types))
    if unknown:
        raise SchemaFileError(f"{where}: defaults names field(s) {', '.join(unknown)} the type does not have "
                              f"(fields: {', '.join(types)})")
    for name, t in types.items():
        if name in defaults:
            _check_default(where, name, t, defaults[name])
        elif not t.nullable and _java_zero(t) is None:
            raise SchemaFileError(f"{where}: field {name} is {t}, which no Java primitive holds: a value added by "
                                  f"a migration would be null; give it in defaults (or drop NOT NULL)")
    return pojo_class, dict(defaults)


def _java_zero(t: LogicalType) -> Any:
    """The Java primitive default of a NOT NULL field of type ``t`` (the ``JAVA_ZERO`` its
    DataStream serializer declares); None when ``t`` is no primitive."""
    cls = _datastream_class(t)
    return None if cls is None else cls.declared("JAVA_ZERO")


def _check_default(where: str, name: str, t: LogicalType, value: Any) -> None:
    """A default must be a value the field's serializer writes (the right kind of TOML value, in range)."""
    from .io import DataOutputSerializer

    if isinstance(value, (dict, list)) or (isinstance(value, bool) and not isinstance(t, BooleanType)):
        raise SchemaFileError(f"{where}: defaults.{name} = {value!r} is not a value of type {t}")
    try:
        datastream_serializer(t, f"{where} field {name}").serialize(_as_field_value(t, value), DataOutputSerializer())
    except (StatemorphError, TypeError, ValueError, OverflowError) as e:
        raise SchemaFileError(f"{where}: defaults.{name} = {value!r} is not a value of type {t}: {e}") from None


def _as_field_value(t: LogicalType, value: Any) -> Any:
    """TOML writes ``1`` for a DOUBLE's 1.0: the float the field holds."""
    return float(value) if isinstance(t, (FloatType, DoubleType)) and isinstance(value, int) else value


def _parse_type_at(where: str, key: str, text: Any) -> LogicalType:
    if not isinstance(text, str):
        raise SchemaFileError(f"{where}: {key} must be a string in Flink SQL type syntax, got {text!r}")
    try:
        return parse_type(text)
    except TypeParseError as e:
        raise SchemaFileError(f"{where}: {key} does not parse: {e}") from None


# -- types → serializers ----------------------------------------------------------------------

def family_of(serializer: Any) -> str:
    """The schema-file family of an existing serializer (what ``serializer = "auto"`` keeps): the
    ``SCHEMA_FAMILY`` its class declares."""
    cls = type(serializer)
    declared = getattr(cls, "declared", None)
    return "datastream" if declared is None else str(declared("SCHEMA_FAMILY", "datastream"))


def serializer_for(schema: StateSchema, prior: Any = None, *, user_key: bool = False) -> Any:
    """Build the new serializer of one state from its schema.

    ``prior`` is the serializer restored from the savepoint's snapshot (or None); it decides the
    family when the file says ``auto``. With ``user_key=True`` builds the map key serializer
    (datastream family, rows that ``prior``, the recorded key serializer, keeps as RowData stay
    RowData; None when the file leaves the key type unchanged).
    """

    where = f"state {schema.name!r}"
    if user_key:
        if schema.user_key_type is None:
            return None
        return datastream_serializer(schema.user_key_type, f"{where} user key", prior)
    family = schema.serializer
    if family == "auto":
        if prior is not None:
            family = family_of(prior)
        elif isinstance(schema.type, RowType):
            family = "rowdata"
        else:
            family = "datastream"
        if family == "avro" and schema.avro_schema is None:
            raise SchemaFileError(f"{where} is Avro state in the savepoint: give the new schema as avro_schema "
                                  f"and serializer = \"avro\"")
    if family == "avro":
        return _family_class("avro")(schema.avro_schema)
    assert schema.type is not None
    if family == "pojo":
        return pojo_serializer(schema, prior)
    if family == "rowdata":
        if not _family_takes("rowdata", schema.type):
            raise SchemaFileError(f"{where} is RowData state: its type must be a {_family_types('rowdata')}, "
                                  f"got {schema.type}")
        return _rowdata_serializer(schema.type, where)
    if family == "opaque":
        raise SchemaFileError(f"{where}: an opaque state ({schema.type}) has no serializer statemorph builds: it is "
                              f"carried over as it is")
    if family in ("row", "tuple") and not isinstance(schema.type, RowType):
        raise SchemaFileError(f"{where} is {family.capitalize()} state: its type must be a ROW, got {schema.type}")
    if family == "tuple":
        assert isinstance(schema.type, RowType)
        return _family_class("tuple").for_sql_type(schema.type, datastream_serializer, prior, where)
    return datastream_serializer(schema.type, where, prior)


def _rowdata_serializer(t: LogicalType, where: str, like: Any = None) -> Any:
    """``serializer = "rowdata"``: every ROW a ``RowDataSerializer``, the ARRAYs and MAPs around them
    the DataStream ``ListSerializer`` / ``MapSerializer`` Flink SQL's operators keep them in (Top-N's
    sort key → list of rows); other types inside them their DataStream serializers. (``like`` is
    not followed: the family is what the file says.)"""
    rowdata = _family_class("rowdata")
    if t.type_root == rowdata.declared("SCHEMA_TYPE_ROOT"):
        return rowdata.for_sql_type(t, datastream_serializer, None, where)
    collection = _collection_class(t)
    if collection is not None:
        return collection.for_sql_type(t, _rowdata_serializer, None, where)
    return datastream_serializer(t, where)


def pojo_serializer(schema: StateSchema, prior: Any = None) -> Any:
    """The ``PojoSerializer`` of a ``serializer = "pojo"`` state (or an ``auto`` one whose savepoint
    holds a POJO): the ROW's fields through the DataStream serializers, the class ``pojo_class`` or
    else ``prior``'s. Fields ``prior`` has keep the class that declares them (a superclass's field
    is keyed by the superclass in Flink's snapshot); added fields are declared by the class itself.
    Added fields default as the module docstring says."""
    from .serializers import PojoField, PojoSerializer
    from .serializers.pojo import java_string_order

    where = f"state {schema.name!r}"
    if not isinstance(schema.type, RowType):
        raise SchemaFileError(f"{where} is POJO state: its type must be a ROW of the class's fields, got {schema.type}")
    prior_pojo = prior if isinstance(prior, PojoSerializer) else None
    class_name = schema.pojo_class or (prior_pojo.java_class_name if prior_pojo is not None else None)
    if class_name is None:
        raise SchemaFileError(f"{where}: a POJO needs its Java class: set pojo_class (the savepoint does not "
                              f"name one for this state)")
    declared = {f.name: f.declaring_class for f in prior_pojo.fields if f.present} \
        if prior_pojo is not None and prior_pojo.java_class_name == class_name else {}
    fields = [PojoField(f.name, datastream_serializer(f.type, f"{where}.{f.name}"), declared.get(f.name, class_name))
              for f in schema.type.fields]
    types = {f.name: f.type for f in schema.type.fields}
    defaults = {n: _java_zero(t) for n, t in types.items() if not t.nullable}
    defaults.update({n: _as_field_value(types[n], v) for n, v in schema.defaults.items()})
    ordered = sorted(fields, key=lambda f: java_string_order(f.name))
    return PojoSerializer.from_fields(None, class_name, ordered, {n: v for n, v in defaults.items() if v is not None})


def datastream_serializer(t: LogicalType, where: str = "type", like: Any = None) -> Any:
    """The DataStream serializer for a logical type (Flink's TypeInformation defaults).

    ``like`` is the serializer the savepoint recorded for the same place, when there is one: where
    it wraps a value in a ``NullableSerializer`` (Flink 2's own ``List`` / ``Map`` type information
    does, around the collection and each element) and the type is nullable, the new serializer keeps
    that wrapper, so the type ``inspect`` prints for such a state builds that state's serializer.
    Where the recorded serializer's class decides its successor (``TypeSerializer.successor_for``:
    a SQL data view keeps its own type), that serializer is it. A ROW where ``like`` is a
    ``RowDataSerializer`` or a ``TupleSerializer`` (a class whose ``SCHEMA_TYPE_ROOT`` the type has)
    stays in that family: a place keeps the family the savepoint records there (see
    :func:`_kept_class`; a SQL operator's rows in a list or map stay RowData)."""
    from .serializers import NullableSerializer, TypeSerializer

    if isinstance(like, TypeSerializer):  # a recorded serializer whose class decides its successor
        try:
            successor = like.successor_for(t)
        except ValueError as e:
            raise SchemaFileError(f"{where}: {e}") from None
        if successor is not None:
            return successor
    if isinstance(like, NullableSerializer):
        inner = datastream_serializer(t, where, like.inner)
        if not t.nullable:
            return inner
        return NullableSerializer.with_padding(inner, like.padding_length)
    return _datastream_serializer(t, where, like)


def _datastream_serializer(t: LogicalType, where: str, like: Any) -> Any:
    cls = _kept_class(t, like) or _datastream_class(t)
    if cls is not None:
        return cls.for_sql_type(t, datastream_serializer, like, where)
    raise SchemaFileError(f"{where}: type {t} has no DataStream serializer; use serializer = \"rowdata\" "
                          f"inside a ROW for SQL types such as DECIMAL, DATE, TIME and TIMESTAMP")


def _datastream_class(t: LogicalType) -> Any:
    """The serializer class whose ``DATASTREAM_OF`` claims ``t``: by the type's exact text
    (``CHAR(1)``) first, then by its root (``CHAR``); None for a type no class claims."""
    table = _datastream_table()
    return table.get(str(t.copy(nullable=True))) or table.get(t.type_root)


def _family_class(family: str) -> Any:
    """The serializer class of a family of its own (``SCHEMA_FAMILY``: ``rowdata``, ``avro`` ...);
    None for ``datastream`` (many classes), ``auto`` and ``opaque``."""
    from .serializers import SERIALIZER_CLASSES

    if family == "datastream":
        return None
    return next((cls for cls in SERIALIZER_CLASSES if cls.declared("SCHEMA_FAMILY") == family), None)


def _family_type_root(family: str) -> str | None:
    """The type root a family's class requires of a schema file's type (``SCHEMA_TYPE_ROOT``)."""
    cls = _family_class(family)
    return None if cls is None else cls.declared("SCHEMA_TYPE_ROOT")


def _family_takes(family: str, t: LogicalType) -> bool:
    """Whether ``t`` suits ``family``: of the root its class requires (any type where it requires
    none) or, where the class declares ``SCHEMA_IN_COLLECTIONS``, an ARRAY / MAP with such a type
    inside (``rowdata``: a SQL operator's rows in a list or map)."""
    root = _family_type_root(family)
    if root is None or t.type_root == root:
        return True
    return (bool(_family_class(family).declared("SCHEMA_IN_COLLECTIONS")) and _collection_class(t) is not None
            and any(_family_takes(family, inner) for inner in t.children()))


def _family_types(family: str) -> str:
    """The types ``family`` takes, as an error message names them (``ROW type (or an ARRAY / MAP
    of ROWs)``)."""
    root = _family_type_root(family)
    nests = _family_class(family).declared("SCHEMA_IN_COLLECTIONS")
    return f"{root} type (or an ARRAY / MAP of {root}s)" if nests else f"{root} type"


def _collection_class(t: LogicalType) -> Any:
    """The DataStream collection class (``ListSerializer``, ``MapSerializer``: a ``datastream``
    family class whose types nest others) that builds ``t``; None for any other type."""
    cls = _datastream_class(t)
    if cls is None or not t.children() or cls.declared("SCHEMA_FAMILY", "datastream") != "datastream":
        return None
    return cls


def _kept_class(t: LogicalType, like: Any) -> Any:
    """The class of ``like``, the serializer the savepoint records at this place inside a list, map
    or tuple, when its family builds ``t``'s root (its ``SCHEMA_TYPE_ROOT``): a nested ROW the
    savepoint keeps as RowData (a SQL operator's rows) or as a Flink tuple stays so, as ``auto``
    keeps a state's own family. None otherwise: the DataStream default."""
    declared = getattr(type(like), "declared", None)
    if declared is None or declared("SCHEMA_TYPE_ROOT") != t.type_root:
        return None
    return type(like)


def _datastream_table() -> dict[str, Any]:
    from .serializers import SERIALIZER_CLASSES

    return {sql: cls for cls in SERIALIZER_CLASSES for sql in cls.declared("DATASTREAM_OF", ())}


__all__ = [
    "FAMILIES",
    "FORMAT_VERSION",
    "KINDS",
    "SchemaFile",
    "SchemaFileError",
    "StateSchema",
    "datastream_serializer",
    "family_of",
    "load_schema",
    "parse_schema",
    "pojo_serializer",
    "serializer_for",
]


def descriptors_for_savepoint(schema: SchemaFile, metadata: Any) -> list[Any]:
    """The new state descriptors a schema file's ``[states.<name>]`` tables describe, resolved
    against a savepoint's metadata (see :func:`descriptors_for_states`)."""
    return descriptors_for_states(schema.states, metadata, f"{schema.source}: [states.")


def descriptors_for_operators(schema: SchemaFile, operators: Any) -> dict[str, list[Any]]:
    """Per operator, the new state descriptors of the file's ``[operators.<uid>.states.<name>]``
    tables; ``operators`` are the savepoint's keyed operators (:func:`describe_operators`), found
    by uid, uid hash or a uid's derived ID. An operator the savepoint lacks is an error naming those
    it has."""
    from .savepoint.flink.description import find_keyed_operator

    if schema.states and not schema.operators:
        raise SchemaFileError(f"{schema.source}: this savepoint keeps its states per operator: name them as "
                              f"[operators.<uid>.states.<name>] (uids: "
                              f"{', '.join(repr(op.ident) for op in operators) or 'none with keyed state'})")
    out: dict[str, list[Any]] = {}
    for ident, states in schema.operators.items():
        op = find_keyed_operator(operators, ident)
        if op is None:
            known = ", ".join(repr(o.ident) for o in operators) or "none"
            raise SchemaFileError(f"{schema.source}: [operators.{ident}] names an operator the savepoint does not have "
                                  f"(operators with keyed state: {known})")
        out[ident] = descriptors_for_states(states, op, f"{schema.source}: [operators.{ident}.states.")
    return out


def descriptors_for_states(states: Mapping[str, StateSchema], metadata: Any, where: str) -> list[Any]:
    """The new state descriptors of ``states`` resolved against ``metadata`` (a savepoint
    description): the kind defaults to the recorded kind, ``auto`` picks the recorded serializer
    family, map keys default to the recorded user key serializer, TTL stays as recorded. A state
    the savepoint lacks is an error naming the states it has (usually a typo)."""
    from .errors import SavepointError, UnsupportedStateError
    from .state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

    out: list[Any] = []
    for name, st in states.items():
        if name not in metadata.states:
            known = ", ".join(repr(n) for n in metadata.states) or "none"
            raise SchemaFileError(f"{where}{name}] names a state the savepoint does not have (states: {known})")
        meta = metadata.states[name]
        if _carried_opaque(st, meta, f"{where}{name}]"):
            continue
        recorded = str(getattr(meta.kind, "value", meta.kind))
        kind = st.kind or recorded
        ttl = bool(getattr(meta, "ttl", False))
        prior = None
        try:  # the family under auto, the POJO class, and the recorded nullable wrappers
            prior = meta.snapshot("value_serializer").restore_serializer()
        except UnsupportedStateError:
            if st.serializer != "opaque":  # a new type for a state statemorph cannot decode: unsupported
                raise  # (exit 7) whatever the serializer line says
        except SavepointError:  # damaged: the plan reports it, as for an explicit family
            prior = None  # (the state is incompatible, exit 3, the reason names the snapshot)
        value = serializer_for(st, prior)
        if kind == "value":
            out.append(ValueStateDescriptor(name, value, ttl=ttl))
        elif kind == "list":
            out.append(ListStateDescriptor(name, value, ttl=ttl))
        else:
            recorded_key = _recorded_user_key(meta, st) if recorded == "map" else None
            user_key = serializer_for(st, recorded_key, user_key=True)
            if user_key is None:
                if recorded != "map":
                    raise SchemaFileError(f"state {name!r} is not map state in the savepoint: give user_key_type")
                user_key = recorded_key
            out.append(MapStateDescriptor(name, user_key, value, ttl=ttl))
    return out


def _recorded_user_key(meta: Any, st: StateSchema) -> Any:
    """The map key serializer the savepoint records: what a new ``user_key_type`` follows (its rows
    stay RowData where the recorded key's are) and what an unchanged key keeps. When the file gives
    a new key type, a recorded key statemorph cannot restore is left for the plan to report."""
    from .errors import SavepointError, UnsupportedStateError

    try:
        return meta.snapshot("user_key_serializer").restore_serializer()
    except (SavepointError, UnsupportedStateError):
        if st.user_key_type is None:
            raise
        return None


def _opaque_roles(meta: Any) -> dict[str, str]:
    """Role → ``RAW('<class>')`` of the serializers of a state statemorph cannot decode (none for
    a format that does not say)."""
    roles = getattr(meta, "opaque_roles", None)
    return dict(roles()) if roles is not None else {}


def _carried_opaque(st: StateSchema, meta: Any, where: str) -> bool:
    """Whether the file's table for an opaque state (``serializer = "opaque"``) says what the
    savepoint holds, so the state is carried over as it is (no descriptor: nothing to resolve). A
    different RAW class, or an opaque entry for a state statemorph reads, is refused: an opaque
    state cannot be migrated."""
    from .errors import UnsupportedStateError

    if st.serializer != "opaque":
        return False
    opaque = _opaque_roles(meta).get("value_serializer")
    if opaque is None:
        raise SchemaFileError(f"{where}: serializer = \"opaque\", but statemorph reads this state's serializer: "
                              f"give its type (statemorph inspect prints it)")
    recorded_kind = str(getattr(meta.kind, "value", meta.kind))
    if str(st.type) != opaque or (st.kind is not None and st.kind != recorded_kind):
        raise UnsupportedStateError(f"{where}: unsupported state: the savepoint holds {recorded_kind} state of "
                                    f"{opaque}, which statemorph carries but cannot migrate to "
                                    f"{st.kind or recorded_kind} state of {st.type}")
    return True


__all__ += ["descriptors_for_operators", "descriptors_for_savepoint", "descriptors_for_states"]


# -- savepoint → schema file ------------------------------------------------------------------

def state_schema_table(name: str, meta: Any) -> dict[str, str]:
    """What a schema file says about one state of a savepoint as it is (kind, serializer family,
    type; ``pojo_class`` or ``avro_schema`` where the family needs it): the table ``statemorph
    schema`` writes, which :func:`descriptors_for_states` turns back into that state's own
    serializer. Raises :class:`SchemaFileError` when the state's serializer has no schema-file
    spelling (a serializer outside the families above)."""
    kind = str(getattr(meta.kind, "value", meta.kind))
    opaque = _opaque_roles(meta).get("value_serializer")
    if opaque is not None:
        return {"kind": kind, "serializer": "opaque", "type": opaque}
    ser = meta.snapshot("value_serializer").restore_serializer()
    family = family_of(ser)
    table = {"kind": kind, "serializer": family}
    if family == "avro":
        table["avro_schema"] = ser.schema_json
    elif family == "pojo":
        fields = ", ".join(f"{escape_identifier(n)} {describe_serializer(s)}" for n, s in ser.field_serializers.items())
        table.update(type=f"ROW<{fields}>", pojo_class=ser.java_class_name)
    else:
        table["type"] = describe_serializer(ser)
    try:
        parsed = _parse_state("<schema>", name, table)
        same = serializer_for(parsed, ser) == ser
    except StatemorphError as e:
        raise SchemaFileError(f"state {name!r}: its serializer ({describe_serializer(ser)}) has no schema-file "
                              f"spelling: {e}") from None
    if not same:
        raise SchemaFileError(f"state {name!r}: its serializer ({describe_serializer(ser)}) has no schema-file "
                              f"spelling that builds it again")
    return table


def render_schema(sections: Sequence[tuple[str, Mapping[str, Any]]], source: str) -> str:
    """A schema file holding every state of a savepoint as it is: ``sections`` are (table prefix,
    states by name), the prefix ``states`` for the Parquet form or ``operators."<uid>".states`` per
    Flink operator. Checked against the savepoint it is a no-op; a state whose serializer has no
    schema-file spelling is written as a comment (it is carried over as it is either way)."""
    lines = [f"# The schema of {source}, every state as it is (statemorph schema).",
             "# Edit the states that change; a state left out is carried over unchanged.",
             f"format = {FORMAT_VERSION}"]
    for prefix, states in sections:
        for name, meta in states.items():
            header = f"[{prefix}.{toml_key(name)}]"
            try:
                table = state_schema_table(name, meta)
            except SchemaFileError as e:
                lines += ["", f"# {header}", *(f"# {line}".rstrip() for line in f"not written: {e}".splitlines())]
                continue
            lines += ["", header] + [f"{k} = {_toml_string(v)}" for k, v in table.items()]
            if getattr(meta, "ttl", False):
                lines.append("# with TTL (kept as recorded)")
    return "\n".join(lines) + "\n"


def toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_-" for c in key) and key.isascii() else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, less ``\\/``, which ``json.dumps`` never writes)."""
    return json.dumps(text, ensure_ascii=False)


__all__ += ["render_schema", "state_schema_table", "toml_key"]
