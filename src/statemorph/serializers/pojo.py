"""Flink's ``PojoSerializer`` for Python dataclasses, and its ``PojoSerializerSnapshot``.

A POJO is written as a flags byte (``01`` null, ``02`` exactly the POJO class), then, field by
field in Java ``String.compareTo`` order of the names (UTF-16 code units, which is not Python's
code-point order for characters beyond the BMP), a null flag and the field's bytes
(docs/formats.md §2.10). Subclass values (flags ``04`` / ``08``) carry a Java class name or a
registration tag and a whole second serializer; statemorph has no Java classes to resolve them
with, so reading them is a :class:`MalformedDataError` that says so.

The snapshot (§4.5) is not a composite: it holds the class name and three ``LinkedOptionalMap``
blocks (fields, registered subclasses, non-registered subclasses) whose keys and values are
length-framed, so that a field whose key or serializer snapshot cannot be read becomes *absent*
instead of breaking the stream. That is how Flink notices removed fields; here a snapshot read
from bytes has no class to check against, so fields are matched to the new serializer by name
when compatibility is resolved.

A serializer restored from a snapshot has no Python class: it reads and writes dicts keyed by
field name. Fields whose key was absent in the snapshot (Flink's "missing-field-at-i") are
read and dropped, and written as null, as Flink does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..errors import (
    MalformedDataError,
    SerializationError,
    SnapshotError,
    StateFormatError,
    StateMigrationError,
    StatemorphError,
)
from ..io import DataInputDeserializer, DataOutputSerializer, utf16_units
from ..typeutils import (
    SchemaCompatibility,
    TypeSerializer,
    TypeSerializerSnapshot,
    read_versioned_snapshot_from,
    register_snapshot,
    write_versioned_snapshot_to,
)
from .tuples import add_field_context

IS_NULL = 0x01
NO_SUBCLASS = 0x02
IS_SUBCLASS = 0x04
IS_TAGGED_SUBCLASS = 0x08

OPTIONAL_MAP_HEADER = 0x000004F2C69A3D70
"""``LinkedOptionalMapSerializer.HEADER``: a sanity check in front of every optional map."""


def java_string_order(name: str) -> tuple[int, ...]:
    """Sort key equal to Java ``String.compareTo``: lexicographic over UTF-16 code units."""
    return tuple(utf16_units(name))


@dataclasses.dataclass(frozen=True)
class PojoField:
    """One field slot of a POJO serializer.

    ``present=False`` marks a field that no longer exists in the class (its key was absent in
    the snapshot the serializer was restored from): its values are read and dropped and it is
    always written as null, which keeps old bytes readable.
    """

    name: str
    serializer: TypeSerializer[Any]
    declaring_class: str
    present: bool = True


class PojoSerializer(TypeSerializer[Any]):
    """Flink's ``PojoSerializer`` over a Python dataclass.

    ``field_serializers`` maps every dataclass field to its serializer (the sets must be equal:
    a field without a serializer would be lost silently). ``java_class_name`` is the POJO class
    recorded in the snapshot; it defaults to ``module.QualName`` of the dataclass and is what
    compatibility compares. With ``pojo_class=None`` the serializer works on dicts (that is what
    :meth:`PojoSerializerSnapshot.restore_serializer` returns) and ``java_class_name`` is required.

    ``serialize`` accepts an instance of exactly ``pojo_class`` or a dict keyed by field name
    (missing keys are null); ``deserialize`` returns a ``pojo_class`` instance, or a dict.

    ``defaults`` (field name → value) are what a migration gives a field the old bytes lack, as
    the Java class's no-arg constructor leaves it (0 for a primitive ``int``, an initializer's
    value); without a Python class it is the only source of them, otherwise it overrides the
    dataclass defaults. Fields not named get the dataclass default, else null.
    """

    def __init__(
        self,
        pojo_class: type | None,
        field_serializers: Mapping[str, TypeSerializer[Any]],
        java_class_name: str | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        if pojo_class is not None:
            if not (isinstance(pojo_class, type) and dataclasses.is_dataclass(pojo_class)):
                raise TypeError(f"pojo_class must be a dataclass type, got {pojo_class!r}")
            declared = {f.name for f in dataclasses.fields(pojo_class)}
            given = set(field_serializers)
            if declared != given:
                missing = sorted(declared - given)
                extra = sorted(given - declared)
                raise ValueError(
                    f"field serializers of {pojo_class.__qualname__} do not match its fields: "
                    f"missing {missing}, unknown {extra}"
                )
            if java_class_name is None:
                java_class_name = f"{pojo_class.__module__}.{pojo_class.__qualname__}"
        elif java_class_name is None:
            raise ValueError("a PojoSerializer without a Python class needs java_class_name")
        for name, s in field_serializers.items():
            if not isinstance(s, TypeSerializer):
                raise TypeError(f"serializer of field {name!r} is not a TypeSerializer: {s!r}")
        fields = [
            PojoField(name, field_serializers[name], java_class_name)
            for name in sorted(field_serializers, key=java_string_order)
        ]
        self._init(pojo_class, java_class_name, fields, defaults)

    @classmethod
    def from_fields(
        cls,
        pojo_class: type | None,
        java_class_name: str,
        fields: list[PojoField],
        defaults: Mapping[str, Any] | None = None,
    ) -> PojoSerializer:
        """Build a serializer with an explicit field order (restored serializers keep the order
        and the declaring classes of the snapshot, which need not be today's sorted order)."""
        self = cls.__new__(cls)
        self._init(pojo_class, java_class_name, list(fields), defaults)
        return self

    def _init(
        self,
        pojo_class: type | None,
        java_class_name: str,
        fields: list[PojoField],
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.pojo_class = pojo_class
        self.java_class_name = java_class_name
        self.fields: tuple[PojoField, ...] = tuple(fields)
        self._names = frozenset(f.name for f in fields if f.present)
        self._init_names: frozenset[str] = frozenset()
        self._defaults: dict[str, Callable[[], Any]] = {}
        if pojo_class is not None:
            dc_fields = dataclasses.fields(pojo_class)
            self._init_names = frozenset(f.name for f in dc_fields if f.init)
            for f in dc_fields:
                if f.default is not dataclasses.MISSING:
                    self._defaults[f.name] = (lambda d: lambda: d)(f.default)
                elif f.default_factory is not dataclasses.MISSING:
                    self._defaults[f.name] = f.default_factory
        unknown = sorted(set(defaults or {}) - self._names)
        if unknown:
            raise ValueError(f"POJO {java_class_name}: defaults for unknown field(s) {unknown}")
        for name, value in (defaults or {}).items():
            self._defaults[name] = (lambda d: lambda: d)(value)
        self.defaults: dict[str, Any] = dict(defaults or {})

    # -- configuration -----------------------------------------------------------------------
    @property
    def field_serializers(self) -> dict[str, TypeSerializer[Any]]:
        """The serializers of the fields that exist, by name, in byte order."""
        return {f.name: f.serializer for f in self.fields if f.present}

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields if f.present]

    SCHEMA_FAMILY = "pojo"  # its ROW of the class's fields is checked with its other keys (schema_file)

    def describe_type(self) -> str:
        """The class and the ROW a schema file gives it."""
        inner = ", ".join(f"`{n}` {s.describe_type()}" for n, s in self.field_serializers.items())
        return f"POJO {self.java_class_name} ROW<{inner}>"

    def _config(self) -> tuple[Any, ...]:
        return (self.pojo_class, self.java_class_name, self.fields, tuple(sorted(self.defaults.items())))

    def __repr__(self) -> str:
        cls = self.pojo_class.__qualname__ if self.pojo_class is not None else None
        return f"PojoSerializer({cls}, {self.field_serializers!r}, java_class_name={self.java_class_name!r})"

    def duplicate(self) -> PojoSerializer:
        return self

    # -- values ----------------------------------------------------------------------------
    def default_value(self, name: str) -> Any:
        """The value an added field takes on migration: ``defaults``, the dataclass default, else
        None (Flink keeps what the no-arg constructor set, else null)."""
        factory = self._defaults.get(name)
        return factory() if factory is not None else None

    def make_value(self, values: Mapping[str, Any]) -> Any:
        """An instance of the POJO class (a dict without one) from field values by name."""
        if self.pojo_class is None:
            return {f.name: values.get(f.name) for f in self.fields if f.present}
        kwargs = {n: values.get(n) for n in self._names if n in self._init_names}
        obj = self.pojo_class(**kwargs)
        for n in self._names - self._init_names:
            object.__setattr__(obj, n, values.get(n))
        return obj

    def _field_getter(self, value: Any) -> Callable[[str], Any]:
        if self.pojo_class is not None and type(value) is self.pojo_class:
            return lambda n: getattr(value, n)
        if isinstance(value, Mapping):
            unknown = [k for k in value if k not in self._names]
            if unknown:
                raise SerializationError(
                    f"POJO {self.java_class_name}: unknown field(s) {unknown}; the fields are {self.field_names}"
                )
            return value.get
        if self.pojo_class is not None and isinstance(value, self.pojo_class):
            raise SerializationError(
                f"POJO {self.java_class_name}: the value is a subclass {type(value).__qualname__}; "
                f"subclass POJOs are not supported"
            )
        if self.pojo_class is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
            missing = [n for n in self._names if not hasattr(value, n)]
            if missing:
                raise SerializationError(
                    f"POJO {self.java_class_name}: {type(value).__qualname__} has no field(s) {missing}"
                )
            return lambda n: getattr(value, n)
        expected = self.pojo_class.__qualname__ if self.pojo_class is not None else "dict"
        raise SerializationError(
            f"POJO {self.java_class_name}: expected {expected} or a dict, got {type(value).__name__}"
        )

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if value is None:
            out.write_byte(IS_NULL)
            return
        get = self._field_getter(value)
        out.write_byte(NO_SUBCLASS)
        for f in self.fields:
            v = get(f.name) if f.present else None
            if v is None:
                out.write_boolean(True)
                continue
            out.write_boolean(False)
            try:
                f.serializer.serialize(v, out)
            except StatemorphError as e:
                raise add_field_context(e, f.name) from None

    def _read_flags(self, src: DataInputDeserializer) -> int:
        start = src.position
        flags = src.read_unsigned_byte()
        if flags in (IS_NULL, NO_SUBCLASS):
            return flags
        if flags in (IS_SUBCLASS, IS_TAGGED_SUBCLASS):
            kind = "an unregistered" if flags == IS_SUBCLASS else "a registered (tagged)"
            raise MalformedDataError(
                f"POJO {self.java_class_name}: flags byte 0x{flags:02X} at offset {start} marks {kind} "
                f"subclass value; subclass POJOs are not supported by statemorph"
            )
        raise MalformedDataError(
            f"POJO {self.java_class_name}: invalid flags byte 0x{flags:02X} at offset {start} "
            f"(expected 01 null or 02 a value)"
        )

    @staticmethod
    def _read_null_flag(src: DataInputDeserializer, f: PojoField) -> bool:
        start = src.position
        flag = src.read_unsigned_byte()
        if flag > 1:
            raise add_field_context(
                MalformedDataError(f"invalid null flag 0x{flag:02X} at offset {start} (expected 00 or 01)"), f.name
            )
        return flag == 1

    def deserialize(self, src: DataInputDeserializer) -> Any:
        if self._read_flags(src) == IS_NULL:
            return None
        values: dict[str, Any] = {}
        for f in self.fields:
            if self._read_null_flag(src, f):
                if f.present:
                    values[f.name] = None
                continue
            try:
                v = f.serializer.deserialize(src)
            except StatemorphError as e:
                raise add_field_context(e, f.name) from None
            if f.present:
                values[f.name] = v
        if self.pojo_class is None:
            return values
        try:
            return self.make_value(values)
        except Exception as e:  # the dataclass's own __init__ / __post_init__ rejected the data
            raise MalformedDataError(
                f"POJO {self.java_class_name}: {self.pojo_class.__qualname__} rejected the values read "
                f"before offset {src.position}: {e}"
            ) from e

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        flags = self._read_flags(src)
        out.write_byte(flags)
        if flags == IS_NULL:
            return
        for f in self.fields:
            is_null = self._read_null_flag(src, f)
            out.write_boolean(is_null)
            if not is_null:
                try:
                    f.serializer.copy_bytes(src, out)
                except StatemorphError as e:
                    raise add_field_context(e, f.name) from None

    def snapshot_configuration(self) -> PojoSerializerSnapshot:
        return PojoSerializerSnapshot.from_serializer(self)


# -- the snapshot ------------------------------------------------------------------------------

@dataclasses.dataclass
class OptionalEntry:
    """One entry of a ``LinkedOptionalMap``: the key name always, the key and value when they
    could be read. ``problem`` says why a key or value is absent (for messages)."""

    key_name: str
    key: Any
    value: TypeSerializerSnapshot | None
    problem: str = ""


def _read_frame(src: DataInputDeserializer, what: str) -> tuple[int, bytes]:
    length = src.read_int()
    src.check_length(length, what)
    start = src.position
    return start, src.read_fully(length, what)


def _write_optional_frame(
    out: DataOutputSerializer, item: Any, writer: Callable[[DataOutputSerializer, Any], None]
) -> None:
    """``bool present ‖ [i32 length ‖ frame]``: length-prefixed, so that a reader can skip what
    it cannot parse."""
    if item is None:
        out.write_boolean(False)
        return
    out.write_boolean(True)
    frame = DataOutputSerializer()
    writer(frame, item)
    out.write_int(len(frame))
    out.write(frame.buffer())


def read_optional_map(
    src: DataInputDeserializer,
    what: str,
    key_reader: Callable[[DataInputDeserializer, str], Any],
) -> list[OptionalEntry]:
    """Read a ``LinkedOptionalMap`` whose values are versioned snapshots. A key or value frame
    that does not parse becomes absent (Flink logs and continues the same way); the frames'
    lengths keep the stream in step, and are validated before anything is read."""
    start = src.position
    header = src.read_long()
    if header != OPTIONAL_MAP_HEADER:
        raise MalformedDataError(
            f"corrupt {what} at offset {start}: optional-map header 0x{header & 0xFFFFFFFFFFFFFFFF:016X} "
            f"!= 0x{OPTIONAL_MAP_HEADER:016X}"
        )
    # each entry takes at least 4 bytes: an empty key name and two 'absent' booleans
    count = src.check_length(src.read_int(), f"entries of {what}", unit=4)
    entries: list[OptionalEntry] = []
    seen: set[str] = set()
    for _ in range(count):
        at_entry = src.position
        key_name = src.read_utf()
        if key_name in seen:
            # a LinkedOptionalMap is a map: Flink would silently collapse the two entries and
            # then read field bytes with the wrong serializers, so refuse instead
            raise MalformedDataError(f"corrupt {what}: duplicate key {key_name!r} at offset {at_entry}")
        seen.add(key_name)
        key: Any = None
        value: TypeSerializerSnapshot | None = None
        problems: list[str] = []
        if src.read_boolean():
            at, frame = _read_frame(src, f"key frame of {what} entry {key_name!r}")
            try:
                key = key_reader(DataInputDeserializer(frame), key_name)
            except StateFormatError as e:
                problems.append(f"key frame at offset {at} unreadable: {e}")
        else:
            problems.append("key absent")
        if src.read_boolean():
            at, frame = _read_frame(src, f"value frame of {what} entry {key_name!r}")
            try:
                value = read_versioned_snapshot_from(DataInputDeserializer(frame))
            except StateFormatError as e:
                problems.append(f"serializer snapshot at offset {at} unreadable: {e}")
        else:
            problems.append("serializer snapshot absent")
        entries.append(OptionalEntry(key_name, key, value, "; ".join(problems)))
    return entries


def write_optional_map(
    out: DataOutputSerializer,
    entries: list[OptionalEntry],
    key_writer: Callable[[DataOutputSerializer, Any], None],
) -> None:
    out.write_long(OPTIONAL_MAP_HEADER)
    out.write_int(len(entries))
    for e in entries:
        out.write_utf(e.key_name)
        _write_optional_frame(out, e.key, key_writer)
        _write_optional_frame(out, e.value, write_versioned_snapshot_to)


def _read_field_key(src: DataInputDeserializer, key_name: str) -> tuple[str, str]:
    """A field key frame: ``UTF(declaring class) ‖ UTF(field name)``."""
    return (src.read_utf(), src.read_utf())


def _write_field_key(out: DataOutputSerializer, key: tuple[str, str]) -> None:
    out.write_utf(key[0])
    out.write_utf(key[1])


def _read_class_key(src: DataInputDeserializer, key_name: str) -> str:
    """A subclass key frame is written empty: the class is named by the key name."""
    return key_name


def _write_class_key(out: DataOutputSerializer, key: str) -> None:
    pass


def _describe(s: TypeSerializer[Any] | TypeSerializerSnapshot) -> str:
    return type(s).__name__


@register_snapshot()
class PojoSerializerSnapshot(TypeSerializerSnapshot):
    """``UTF(class) ‖ OPTMAP(fields) ‖ OPTMAP(registered subclasses) ‖ OPTMAP(other subclasses)``,
    version 2 (the only version Flink reads)."""

    BYTE_REMAP: ClassVar[tuple[str, type] | None] = ("pojo", PojoSerializer)

    IDENTIFIER = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
    VERSION = 2
    MIN_READ_VERSION = 2

    def __init__(
        self,
        class_name: str,
        fields: list[OptionalEntry],
        registered_subclasses: list[OptionalEntry] | None = None,
        nonregistered_subclasses: list[OptionalEntry] | None = None,
    ) -> None:
        self.class_name = class_name
        self.fields = fields
        self.registered_subclasses = registered_subclasses or []
        self.nonregistered_subclasses = nonregistered_subclasses or []
        # in-process only (never persisted): a snapshot taken from a live serializer restores
        # one that still builds dataclass instances; one read from bytes restores dicts
        self.pojo_class: type | None = None

    @classmethod
    def from_serializer(cls, serializer: PojoSerializer) -> PojoSerializerSnapshot:
        fields = []
        for i, f in enumerate(serializer.fields):
            snap = f.serializer.snapshot_configuration()
            if f.present:
                fields.append(OptionalEntry(f.name, (f.declaring_class, f.name), snap))
            else:
                fields.append(OptionalEntry(f"missing-field-at-{i}", None, snap))
        result = cls(serializer.java_class_name, fields)
        result.pojo_class = serializer.pojo_class
        return result

    # -- persistence -----------------------------------------------------------------------
    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_utf(self.class_name)
        write_optional_map(out, self.fields, _write_field_key)
        write_optional_map(out, self.registered_subclasses, _write_class_key)
        write_optional_map(out, self.nonregistered_subclasses, _write_class_key)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> PojoSerializerSnapshot:
        class_name = src.read_utf()
        fields = read_optional_map(src, f"field map of POJO {class_name}", _read_field_key)
        registered = read_optional_map(src, f"registered subclasses of POJO {class_name}", _read_class_key)
        others = read_optional_map(src, f"non-registered subclasses of POJO {class_name}", _read_class_key)
        names = [e.key[1] for e in fields if e.key is not None]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise MalformedDataError(
                f"corrupt field map of POJO {class_name}: field(s) {dupes} listed twice under different key names"
            )
        return cls(class_name, fields, registered, others)

    # -- restore ---------------------------------------------------------------------------
    def present_fields(self) -> dict[str, TypeSerializerSnapshot]:
        """Fields whose key and serializer snapshot were both readable, by field name."""
        return {e.key[1]: e.value for e in self.fields if e.key is not None and e.value is not None}

    def restore_serializer(self) -> PojoSerializer:
        fields = []
        for e in self.fields:
            if e.value is None:
                raise SnapshotError(
                    f"POJO {self.class_name}: field {e.key_name!r} has no readable serializer snapshot "
                    f"({e.problem}); values written with this snapshot cannot be read"
                )
            if e.key is None:
                fields.append(PojoField(e.key_name, e.value.restore_serializer(), "", present=False))
            else:
                fields.append(PojoField(e.key[1], e.value.restore_serializer(), e.key[0]))
        pojo_class = self.pojo_class
        if pojo_class is not None and {f.name for f in dataclasses.fields(pojo_class)} != {
            f.name for f in fields if f.present
        }:
            pojo_class = None
        return PojoSerializer.from_fields(pojo_class, self.class_name, fields)

    # -- compatibility ---------------------------------------------------------------------
    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """Flink's POJO rule (docs/formats.md §5), fields matched by name."""
        if not isinstance(new_serializer, PojoSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from PojoSerializer to {type(new_serializer).__name__}"
            )
        refusal = self._structural_incompatibility(new_serializer)
        if refusal:
            return SchemaCompatibility.incompatible(refusal)
        new_fields = new_serializer.field_serializers
        old_fields = self.present_fields()
        incompatible, migrating, reconfigured = _compare_common_fields(old_fields, new_fields)
        if incompatible:
            return SchemaCompatibility.incompatible("; ".join(incompatible))

        removed = [e.key_name for e in self.fields if e.key is None] + [n for n in old_fields if n not in new_fields]
        added = [n for n in new_fields if n not in old_fields]
        reasons = []
        if removed:
            reasons.append(f"fields removed: {', '.join(removed)}")
        if added:
            reasons.append(f"fields added: {', '.join(added)}")
        if not removed and not added and list(old_fields) != list(new_fields):
            reasons.append(f"field order changed from {list(old_fields)} to {list(new_fields)}")
        reasons += migrating
        if reasons:
            return SchemaCompatibility.compatible_after_migration("; ".join(reasons))
        if reconfigured:
            rebuilt = [
                dataclasses.replace(f, serializer=reconfigured[f.name]) if f.present and f.name in reconfigured else f
                for f in new_serializer.fields
            ]
            return SchemaCompatibility.compatible_with_reconfigured_serializer(
                PojoSerializer.from_fields(new_serializer.pojo_class, new_serializer.java_class_name, rebuilt),
                f"fields reconfigured: {', '.join(reconfigured)}",
            )
        return SchemaCompatibility.compatible_as_is()

    def _structural_incompatibility(self, new_serializer: PojoSerializer) -> str:
        """Why the new serializer cannot take over at all ('' when it can): another class,
        subclass entries (unsupported here), or a field whose old serializer is unreadable."""
        if new_serializer.java_class_name != self.class_name:
            return f"POJO class changed from {self.class_name} to {new_serializer.java_class_name}"
        subclasses = [e.key_name for e in self.registered_subclasses + self.nonregistered_subclasses]
        if subclasses:
            return (
                f"POJO {self.class_name}: the old snapshot records subclass serializers {subclasses}; "
                f"subclass POJOs are not supported by statemorph"
            )
        unreadable = [e for e in self.fields if e.key is not None and e.value is None]
        return "; ".join(f"{e.key_name}: serializer snapshot unreadable ({e.problem})" for e in unreadable)

    # -- migration -------------------------------------------------------------------------
    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        """Old POJO (dict or dataclass) → new-class value: common fields carried over (each
        through its field snapshot's own migration), removed fields dropped, added fields set to
        the dataclass default or None."""
        if value is None or not isinstance(new_serializer, PojoSerializer):
            return value
        if isinstance(value, Mapping):
            old_values: Mapping[str, Any] = value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            old_values = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        else:
            raise SerializationError(
                f"POJO {self.class_name}: cannot migrate a {type(value).__name__}; expected a dict or a dataclass"
            )
        old_snaps = self.present_fields()
        new_fields = new_serializer.field_serializers
        migrated: dict[str, Any] = {}
        for name, new_ser in new_fields.items():
            if name in old_snaps and name in old_values:
                v = old_values[name]
                try:
                    migrated[name] = None if v is None else old_snaps[name].migrate_value(v, new_ser)
                except StatemorphError as e:
                    raise add_field_context(e, name) from None
            else:
                migrated[name] = new_serializer.default_value(name)
        try:
            return new_serializer.make_value(migrated)
        except Exception as e:  # the new dataclass's own __init__ / __post_init__ refused the values
            raise StateMigrationError(
                f"POJO {self.class_name}: cannot build the new {new_serializer.java_class_name} value from "
                f"{sorted(migrated)}: {e}"
            ) from e


def _compare_common_fields(
    old_fields: Mapping[str, TypeSerializerSnapshot], new_fields: Mapping[str, TypeSerializer[Any]]
) -> tuple[list[str], list[str], dict[str, TypeSerializer[Any]]]:
    """Resolve every field present on both sides: (incompatible reasons, migration reasons,
    reconfigured serializers by field name)."""
    incompatible: list[str] = []
    migrating: list[str] = []
    reconfigured: dict[str, TypeSerializer[Any]] = {}
    for name, old_snap in old_fields.items():
        new_ser = new_fields.get(name)
        if new_ser is None:
            continue
        r = old_snap.resolve_schema_compatibility(new_ser)
        if r.is_incompatible():
            old_desc = _old_serializer_name(old_snap)
            detail = f" ({r.reason})" if r.reason and old_desc == _describe(new_ser) else ""
            incompatible.append(f"{name}: {old_desc} -> {_describe(new_ser)}{detail}")
        elif r.is_compatible_after_migration():
            migrating.append(f"{name}: {r.reason or 'needs migration'}")
        elif r.is_compatible_with_reconfigured_serializer():
            reconfigured[name] = r.get_reconfigured_serializer()
    return incompatible, migrating, reconfigured


def _old_serializer_name(snap: TypeSerializerSnapshot) -> str:
    try:
        return _describe(snap.restore_serializer())
    except StatemorphError:
        return _describe(snap)


__all__ = [
    "PojoField",
    "PojoSerializer",
    "PojoSerializerSnapshot",
]
