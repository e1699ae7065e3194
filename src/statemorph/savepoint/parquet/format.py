"""The savepoint format: a directory with ``_metadata.json`` and one Parquet dataset per state.

Layout::

    <savepoint>/
      _metadata.json                      format, max_parallelism, per-state serializer snapshots,
                                          file list with row counts, sizes and sha256 checksums
      state-00000/part-00000.parquet      one directory per state (named by position, not by the
      state-00001/part-00000.parquet      state name, so any name is a safe path)
      flink/...                           format version 2, converted from Flink only (below)

Every state's Parquet files share one Arrow schema (all bytes are Flink's serialized form, so
the files are backend-neutral and a Spark job can rewrite them partition by partition):
the entry columns of :mod:`statemorph.keyed.entries` (key_group, key, namespace, [user_key |
index], value), which every savepoint form shares.

List state is stored one element per row (not in Flink's RocksDB ``,``-delimited form) so that
the ``value`` column always holds exactly one value of one serializer: a bulk migration is then the
same column kernel for all three kinds. The serializer snapshots are stored as base64 of
``write_versioned_snapshot`` (Flink's ``writeVersionedSnapshot`` bytes); for list and map state
``value_serializer`` is the element / map value serializer (not a List/Map serializer).

Format version 2 (written only by ``statemorph convert`` from a Flink savepoint; version 1
savepoints read as before) adds, all optional: per state ``operator`` (the Flink operator's uid or
uid hash; state names are then ``<operator>/<state>``), ``flink_kind`` (``reducing``,
``aggregating`` or ``timers``) and ``ttl`` (the rows carry an int64 ``ttl_timestamp`` column; timers
have the columns ``key_group``, ``timestamp``, ``key``, ``namespace``), ``value_bytes`` (list state
whose elements statemorph cannot delimit: one row per key, columns ``key_group``, ``key``,
``namespace``, ``value_bytes``, the Flink value as it is), ``key_bytes`` (map state under a key
statemorph cannot delimit: one row per entry, columns ``key_group``, ``key_bytes``, the composite
key after its key-group prefix, and ``value_bytes``), and a top-level ``flink``
object listing the files Flink needs back that are not tables: the original ``_metadata`` without
its keyed-state bytes, the keyed-state headers and the operator-state files, each with size and
sha256 (:class:`FlinkExtras`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...errors import SavepointError, StateFormatError, UnknownSnapshotError, UnsupportedStateError
from ...keyed.entries import COL_INDEX, COL_KEY, COL_KEY_GROUP, COL_NAMESPACE, COL_USER_KEY, COL_VALUE, state_schema
from ...keyed.kinds import StateKind
from ...typeutils import SnapshotRegistry, TypeSerializerSnapshot, read_versioned_snapshot, write_versioned_snapshot
from ..description import SNAPSHOT_ROLES, opaque_type
from ..files import UsedOnce, check_relative_path, fsync_path, sha256_file
from ..flink.reader import flink_state_schema

FORMAT_NAME = "statemorph-savepoint"
FORMAT_VERSION = 2
PLAIN_FORMAT_VERSION = 1
"""What a savepoint without Flink extras is written as, so older readers still read it."""
FLINK_KINDS = ("reducing", "aggregating", "timers")
METADATA_FILE = "_metadata.json"
MAX_METADATA_BYTES = 64 << 20
"""A metadata file larger than this is rejected before it is parsed (hostile input)."""
MAX_COUNT = (1 << 63) - 1
"""Row counts and file sizes in metadata are int64 (as in Parquet); larger values are refused."""

@dataclass(frozen=True)
class FileEntry:
    """One Parquet file of a state, relative to the savepoint directory (POSIX separators)."""

    path: str
    rows: int
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "size": self.size, "sha256": self.sha256}


@dataclass
class StateMetadata:
    """Everything the metadata file says about one state. Snapshots are kept as raw bytes and
    parsed on demand, so reading metadata never fails on a snapshot class this process lacks."""

    name: str
    kind: StateKind
    directory: str
    key_serializer: bytes
    namespace_serializer: bytes
    value_serializer: bytes
    user_key_serializer: bytes | None = None
    files: list[FileEntry] = field(default_factory=list)
    operator: str | None = None
    """The Flink operator (uid or uid hash) the state belongs to: converted savepoints only."""
    flink_kind: str | None = None
    """``reducing`` / ``aggregating`` (stored like value state) or ``timers``: converted only."""
    ttl: bool = False
    """Rows carry Flink's TTL timestamp in a ``ttl_timestamp`` column (converted savepoints only)."""
    whole_values: bool = False
    """Rows are whole Flink entries: key group, key, namespace and ``value_bytes``, the Flink value
    as it is (a list state whose elements statemorph cannot delimit; converted savepoints only)."""
    whole_keys: bool = False
    """Rows are whole Flink entries with their keys: key group, ``key_bytes`` (the composite key
    after its key-group prefix) and ``value_bytes`` (a map state under a key statemorph cannot
    delimit; converted savepoints only)."""

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def carries_unread_snapshots(self) -> bool:
        """Timers converted from Flink keep Flink's timer snapshot as exact bytes, and so do
        states whose serializers statemorph cannot decode (Kryo, user snapshots): the planner
        carries them over (their files are copied) instead of reading the snapshots."""
        return self.flink_kind == "timers" or bool(self.opaque_roles())

    def snapshot_bytes(self, role: str) -> bytes:
        if role not in SNAPSHOT_ROLES:
            raise ValueError(f"unknown serializer role {role!r}; one of {SNAPSHOT_ROLES}")
        data = getattr(self, role)
        if data is None:
            raise SavepointError(f"state {self.name!r} ({self.kind.value} state) has no {role.replace('_', ' ')}")
        return bytes(data)

    def snapshot(self, role: str, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot:
        """The parsed snapshot for ``role``; a snapshot that cannot be read is a SavepointError
        naming the state and the role (the underlying error is chained)."""
        data = self.snapshot_bytes(role)
        try:
            return read_versioned_snapshot(data, registry)
        except UnknownSnapshotError as e:
            raise UnsupportedStateError(
                f"state {self.name!r}: unsupported state: its {role.replace('_', ' ')} is {opaque_type(data)}, which "
                f"statemorph cannot decode; the state is carried over byte for byte but cannot be read decoded or "
                f"migrated") from e
        except StateFormatError as e:
            raise SavepointError(
                f"state {self.name!r}: the {role.replace('_', ' ')} snapshot in {METADATA_FILE} cannot be read: {e}"
            ) from e

    def opaque_roles(self) -> dict[str, str]:
        """Role → ``RAW('<class>')`` of each snapshot whose class statemorph does not know."""
        out = {}
        for role in SNAPSHOT_ROLES:
            data = getattr(self, role, None)
            if data is None:
                continue
            try:
                read_versioned_snapshot(bytes(data))
            except UnknownSnapshotError:
                out[role] = opaque_type(bytes(data))
            except StateFormatError:
                continue
        return out

    def schema(self) -> pa.Schema:
        if self.flink_kind is None and not self.ttl and not self.whole_values and not self.whole_keys:
            return state_schema(self.kind)
        return flink_state_schema(self.flink_kind or self.kind.value, self.ttl, self.whole_values, self.whole_keys)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind.value,
            "directory": self.directory,
            "rows": self.rows,
        }
        if self.operator is not None:
            d["operator"] = self.operator
        if self.flink_kind is not None:
            d["flink_kind"] = self.flink_kind
        if self.ttl:
            d["ttl"] = True
        if self.whole_values:
            d["value_bytes"] = True
        if self.whole_keys:
            d["key_bytes"] = True
        for role in SNAPSHOT_ROLES:
            data = getattr(self, role)
            if data is not None:
                d[role] = base64.b64encode(data).decode("ascii")
        d["files"] = [f.to_json() for f in self.files]
        return d


@dataclass(frozen=True)
class ExtraFile:
    """A file of a converted savepoint that is not a table (see :class:`FlinkExtras`)."""

    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass
class FlinkExtras:
    """What a Flink savepoint holds besides table rows, kept so converting back is lossless:
    ``metadata`` is Flink's ``_metadata`` with every keyed-state stream emptied (handles, names,
    key-group ranges kept), ``headers`` maps ``"<operator index>/<subtask index>"`` to the file
    holding that stream's keyed-state header, ``files`` are the carried files (operator state),
    stored under ``flink/files/`` with their names relative to the Flink savepoint."""

    metadata: ExtraFile
    headers: dict[str, ExtraFile] = field(default_factory=dict)
    files: list[ExtraFile] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"metadata": self.metadata.to_json(),
                "headers": {k: v.to_json() for k, v in self.headers.items()},
                "files": [f.to_json() for f in self.files]}


@dataclass
class SavepointMetadata:
    """The parsed ``_metadata.json``. ``states`` keeps the file's order."""

    max_parallelism: int
    key_serializer: bytes
    states: dict[str, StateMetadata] = field(default_factory=dict)
    format_version: int = PLAIN_FORMAT_VERSION
    properties: dict[str, str] = field(default_factory=dict)
    flink: FlinkExtras | None = None

    def key_snapshot(self, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot:
        """The key serializer's snapshot. In a savepoint converted from Flink a snapshot of a class
        statemorph does not know (Kryo, a user class) is Flink's opaque key, an
        :class:`UnsupportedStateError`; any other that cannot be read is a :class:`SavepointError`."""
        try:
            return read_versioned_snapshot(self.key_serializer, registry)
        except UnknownSnapshotError as e:
            if self.flink is None:
                raise SavepointError(f"the key serializer snapshot in {METADATA_FILE} cannot be read: {e}") from e
            raise UnsupportedStateError(
                f"unsupported state: the key serializer is {opaque_type(self.key_serializer)}, which statemorph "
                f"cannot decode; the keys are carried over byte for byte but cannot be read decoded or changed") from e
        except StateFormatError as e:
            raise SavepointError(f"the key serializer snapshot in {METADATA_FILE} cannot be read: {e}") from e

    def new_snapshot_bytes(self, serializer: Any) -> bytes:
        """The versioned snapshot a new serializer is recorded with: Flink's own class for a
        savepoint converted from Flink (so converting back gives Flink a snapshot it restores),
        else the serializer's ``snapshot_configuration()``."""
        flink_form = getattr(serializer, "flink_snapshot_configuration", None) if self.flink is not None else None
        snap = flink_form() if flink_form is not None else serializer.snapshot_configuration()
        return write_versioned_snapshot(snap)

    def state(self, name: str) -> StateMetadata:
        try:
            return self.states[name]
        except KeyError:
            known = ", ".join(repr(n) for n in self.states) or "none"
            raise SavepointError(f"the savepoint has no state named {name!r} (states: {known})") from None

    def to_json(self) -> dict[str, Any]:
        d = {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "max_parallelism": self.max_parallelism,
            "key_serializer": base64.b64encode(self.key_serializer).decode("ascii"),
            "properties": dict(self.properties),
            "states": [s.to_json() for s in self.states.values()],
        }
        if self.flink is not None:
            d["flink"] = self.flink.to_json()
        return d

    def dumps(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n").encode("utf-8")


# -- parsing (strict: every field checked, every problem named) ---------------------------------

class _Fields:
    """Typed access to one JSON object with messages that say where the problem is."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise SavepointError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        self.obj = obj
        self.where = where

    def get(self, key: str, typ: type | tuple[type, ...], required: bool = True) -> Any:
        if key not in self.obj:
            if required:
                raise SavepointError(f"{self.where}: missing field {key!r}")
            return None
        v = self.obj[key]
        if isinstance(v, bool) and typ is int or not isinstance(v, typ):
            raise SavepointError(f"{self.where}: field {key!r} has the wrong type ({type(v).__name__})")
        return v

    def b64(self, key: str, required: bool = True) -> bytes | None:
        v = self.get(key, str, required)
        if v is None:
            return None
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as e:
            raise SavepointError(f"{self.where}: field {key!r} is not valid base64: {e}") from e


def parse_metadata(data: bytes, source: str = METADATA_FILE) -> SavepointMetadata:
    """Parse and validate metadata bytes; any defect is a SavepointError naming ``source``."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise SavepointError(f"{source}: not valid JSON ({e}); the savepoint is damaged or partial") from e
    top = _Fields(obj, source)
    fmt = top.get("format", str)
    if fmt != FORMAT_NAME:
        raise SavepointError(f"{source}: format {fmt!r} is not {FORMAT_NAME!r}")
    version = top.get("format_version", int)
    if version > FORMAT_VERSION or version < 1:
        raise SavepointError(
            f"{source}: format version {version} is not supported (this library reads 1..{FORMAT_VERSION})"
        )
    max_par = top.get("max_parallelism", int)
    if not 0 < max_par <= 1 << 15:
        raise SavepointError(f"{source}: max_parallelism {max_par} is out of range 1..32768")
    key_ser = top.b64("key_serializer")
    assert key_ser is not None
    props = top.get("properties", dict, required=False) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise SavepointError(f"{source}: properties must map strings to strings")
    states: dict[str, StateMetadata] = {}
    dirs: set[str] = set()
    listed = UsedOnce()
    for i, raw in enumerate(top.get("states", list)):
        st = _Fields(raw, f"{source}: states[{i}]")
        name = st.get("name", str)
        where = f"{source}: state {name!r}"
        st.where = where
        if name in states:
            raise SavepointError(f"{where}: the state name appears twice")
        try:
            kind = StateKind(st.get("kind", str))
        except ValueError:
            raise SavepointError(f"{where}: unknown state kind {st.obj['kind']!r}") from None
        directory = check_relative_path(st.get("directory", str), where)
        if directory in dirs:
            raise SavepointError(f"{where}: directory {directory!r} is used by another state")
        dirs.add(directory)
        user_key = st.b64("user_key_serializer", required=kind is StateKind.MAP)
        if kind is not StateKind.MAP and user_key is not None:
            raise SavepointError(f"{where}: only map state has a user key serializer")
        files = []
        for j, rf in enumerate(st.get("files", list)):
            ff = _Fields(rf, f"{where}: files[{j}]")
            path = check_relative_path(ff.get("path", str), ff.where)
            if not path.startswith(directory + "/"):
                raise SavepointError(f"{ff.where}: file {path!r} is outside the state directory {directory!r}")
            listed.add(path, ff.where)
            rows, size, digest = ff.get("rows", int), ff.get("size", int), ff.get("sha256", str)
            if rows < 0 or size < 0:
                raise SavepointError(f"{ff.where}: negative rows or size")
            if rows > MAX_COUNT or size > MAX_COUNT:
                raise SavepointError(f"{ff.where}: rows or size out of range (more than 2**63 - 1)")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise SavepointError(f"{ff.where}: sha256 {digest!r} is not 64 lowercase hex digits")
            files.append(FileEntry(path, rows, size, digest))
        operator = st.get("operator", str, required=False)
        flink_kind = st.get("flink_kind", str, required=False)
        if flink_kind is not None and flink_kind not in FLINK_KINDS:
            raise SavepointError(f"{where}: unknown flink_kind {flink_kind!r} (one of {', '.join(FLINK_KINDS)})")
        ttl = st.get("ttl", bool, required=False) or False
        whole = st.get("value_bytes", bool, required=False) or False
        whole_keys = st.get("key_bytes", bool, required=False) or False
        if (operator is not None or flink_kind is not None or ttl or whole or whole_keys) and version < 2:
            raise SavepointError(f"{where}: operator / flink_kind / ttl / value_bytes / key_bytes need format "
                                 f"version 2")
        if whole and (kind is not StateKind.LIST or flink_kind is not None):
            raise SavepointError(f"{where}: value_bytes (whole Flink values) is only for list state")
        if whole_keys and (kind is not StateKind.MAP or flink_kind is not None):
            raise SavepointError(f"{where}: key_bytes (whole Flink keys) is only for map state")
        meta = StateMetadata(
            name=name,
            kind=kind,
            directory=directory,
            key_serializer=st.b64("key_serializer") or b"",
            namespace_serializer=st.b64("namespace_serializer") or b"",
            value_serializer=st.b64("value_serializer") or b"",
            user_key_serializer=user_key,
            files=files,
            operator=operator,
            flink_kind=flink_kind,
            ttl=ttl,
            whole_values=whole,
            whole_keys=whole_keys,
        )
        declared = st.get("rows", int, required=False)
        if declared is not None and (declared < 0 or declared != meta.rows):
            raise SavepointError(f"{where}: rows {declared} != sum of file rows {meta.rows}")
        states[name] = meta
    flink = None
    raw_flink = top.get("flink", dict, required=False)
    if raw_flink is not None:
        if version < 2:
            raise SavepointError(f"{source}: a 'flink' section needs format version 2")
        flink = _parse_flink(_Fields(raw_flink, f"{source}: flink"), listed)
    return SavepointMetadata(max_parallelism=max_par, key_serializer=key_ser, states=states,
                             format_version=version, properties=dict(props), flink=flink)


def _extra_file(raw: Any, where: str, listed: UsedOnce) -> ExtraFile:
    ff = _Fields(raw, where)
    path = check_relative_path(ff.get("path", str), where)
    if not path.startswith("flink/"):
        raise SavepointError(f"{where}: file {path!r} is outside the flink/ directory")
    listed.add(path, where)
    size, digest = ff.get("size", int), ff.get("sha256", str)
    if not 0 <= size <= MAX_COUNT:
        raise SavepointError(f"{where}: size {size} out of range")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise SavepointError(f"{where}: sha256 {digest!r} is not 64 lowercase hex digits")
    return ExtraFile(path, size, digest)


def _parse_flink(fl: _Fields, listed: UsedOnce) -> FlinkExtras:
    meta = _extra_file(fl.get("metadata", dict), f"{fl.where}.metadata", listed)
    headers = {}
    for k, raw in fl.get("headers", dict).items():
        parts = k.split("/")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise SavepointError(f"{fl.where}.headers: key {k!r} is not '<operator index>/<subtask index>'")
        headers[k] = _extra_file(raw, f"{fl.where}.headers[{k!r}]", listed)
    files = [_extra_file(raw, f"{fl.where}.files[{i}]", listed) for i, raw in enumerate(fl.get("files", list))]
    return FlinkExtras(meta, headers, files)


__all__ = [
    "COL_INDEX",
    "COL_KEY",
    "COL_KEY_GROUP",
    "COL_NAMESPACE",
    "COL_USER_KEY",
    "COL_VALUE",
    "FORMAT_NAME",
    "FLINK_KINDS",
    "FORMAT_VERSION",
    "ExtraFile",
    "FileEntry",
    "FlinkExtras",
    "PLAIN_FORMAT_VERSION",
    "METADATA_FILE",
    "SNAPSHOT_ROLES",
    "SavepointMetadata",
    "StateMetadata",
    "check_relative_path",
    "fsync_path",
    "parse_metadata",
    "sha256_file",
    "state_schema",
]
