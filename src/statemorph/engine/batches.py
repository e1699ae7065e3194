"""Per-batch column transforms shared by the local engine, the Spark engine and user pipelines.

Why a class and not a closure: Spark ships the function to executor processes. A
:class:`ColumnMigrator` / :class:`ColumnDecoder` pickles as *snapshot bytes* (Flink's
``writeVersionedSnapshot`` form) and rebuilds its serializers on the executor through the snapshot
registry, so executors need no user classes and no Python objects from the driver beyond bytes.
Rebuilt serializers are cached per process, so a task pays for planning once, not per batch.

Every transform accepts what Spark and pyarrow hand over: ``binary`` or ``large_binary`` columns,
sliced batches, read-only buffers, batches of any size (including empty ones), and keeps the
column's original Arrow type in its output so the output schema is stable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import bulk
from ..bulk.types import arrow_type_for
from ..errors import DECODE_COLUMN_ON_ERROR, MIGRATE_ON_ERROR, StatemorphError, UsageError, check_on_error
from ..keyed.namespace import VoidNamespaceSerializer
from ..keyed.windows import window_column_names, window_namespaces
from ..savepoint.parquet.format import state_schema
from ..typeutils import TypeSerializerSnapshot, read_versioned_snapshot, write_versioned_snapshot
from .keys import key_groups

BatchFn = Callable[[pa.RecordBatch], pa.RecordBatch]


def snapshot_bytes(obj: Any) -> bytes:
    """Versioned snapshot bytes of a snapshot, a serializer (its configuration) or bytes as they are."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, TypeSerializerSnapshot):
        return write_versioned_snapshot(obj)
    snap = getattr(obj, "snapshot_configuration", None)
    if snap is None:
        raise TypeError(f"expected a TypeSerializer, a TypeSerializerSnapshot or snapshot bytes, "
                        f"got {type(obj).__name__}")
    return write_versioned_snapshot(snap())


@functools.lru_cache(maxsize=64)
def _snapshot(data: bytes) -> TypeSerializerSnapshot:
    return read_versioned_snapshot(data)


@functools.lru_cache(maxsize=64)
def _serializer(data: bytes) -> Any:
    return _snapshot(data).restore_serializer()


def _column_index(schema: pa.Schema, column: str) -> int:
    i: int = schema.get_field_index(column)
    if i < 0:
        raise StatemorphError(f"batch has no column {column!r} (columns: {', '.join(schema.names)})")
    return i


def _as_binary(arr: pa.Array, column: str) -> pa.Array:
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        return arr
    if pa.types.is_fixed_size_binary(arr.type) or pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
    raise StatemorphError(f"column {column!r} must be binary or large_binary, got {arr.type}")


def decode_column(arr: pa.Array, ser: Any, arrow_type: pa.DataType, *, threads: int = 1,
                  on_error: str = "raise") -> pa.Array:
    """Binary column → typed column (:func:`statemorph.bulk.decode`: the kernels where the
    capability table has one, else value by value through the reference serializer)."""
    out = bulk.decode(arr, ser, threads=threads, on_error=on_error).values
    return out if out.type == arrow_type else out.cast(arrow_type)


def encode_column(arr: pa.Array, ser: Any, *, threads: int = 1) -> pa.Array:
    """Typed column → binary column of serialized values (the inverse of :func:`decode_column`)."""
    return bulk.encode(arr, ser, threads=threads).values


class _ColumnTransform:
    """Replace one column of each batch with ``self.transform(column_array)``."""

    column: str

    def transform(self, arr: pa.Array) -> pa.Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def output_type(self, input_type: pa.DataType) -> pa.DataType:
        return input_type

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist(
                [], schema=batch.schema)
        i = _column_index(batch.schema, self.column)
        arr = _as_binary(batch.column(i), self.column)
        out = self.transform(arr)
        field = batch.schema.field(i)
        want = self.output_type(field.type)
        if out.type != want:
            out = out.cast(want)
        return batch.set_column(i, field.with_type(want), out)

    def map_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The ``mapInArrow`` form: an iterator of record batches in, one out per batch."""
        for b in batches:
            yield self(b)

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        i = _column_index(schema, self.column)
        f = schema.field(i)
        return schema.set(i, f.with_type(self.output_type(f.type)))

    def _set_options(self, column: str, threads: int, on_error: str, choices: tuple[str, ...]) -> None:
        """The options every kernel-backed transform keeps, ``on_error`` checked against the
        policies its operation offers: plain attributes, so the object pickles for Spark."""
        check_on_error(on_error, choices)
        self.column = column
        self.threads = threads
        self.on_error = on_error


def _live_serializer(serializer: Any) -> Any:
    """``serializer`` when it is a live serializer object (kept to spare a rebuild on the driver),
    None when it was given as snapshot bytes or a snapshot."""
    return serializer if not isinstance(serializer, (bytes, TypeSerializerSnapshot)) else None


class ColumnMigrator(_ColumnTransform):
    """Rewrites a binary column from the prior schema (old snapshot) to a new serializer's schema,
    through the bulk kernels (:func:`statemorph.bulk.migrate`). Nulls stay null.

    ``on_error="raise"`` stops at the first value that cannot be read (the error names the row and
    the field path); ``"skip"`` drops the entries whose value cannot be read (the engines report
    how many were dropped) and keeps everything else."""

    def __init__(self, prior_snapshot: Any, new_serializer: Any, column: str = "value", *,
                 threads: int = 1, on_error: str = "raise") -> None:
        self._set_options(column, threads, on_error, MIGRATE_ON_ERROR)
        self.prior = snapshot_bytes(prior_snapshot)
        self.new = snapshot_bytes(new_serializer)
        self._new_serializer = _live_serializer(new_serializer)
        self._prepared: bulk.PreparedMigration | None = None

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_new_serializer"] = None  # executors rebuild it from the snapshot bytes
        d["_prepared"] = None  # and resolve the migration once each
        return d

    def new_serializer(self) -> Any:
        return self._new_serializer if self._new_serializer is not None else _serializer(self.new)

    def prepared(self) -> ColumnMigrator:
        """This migrator with its migration resolved and its machine code compiled now: a local
        run calls it before its worker starts, so the first batches do not wait on LLVM (a Spark
        executor, which gets it pickled without, resolves it on its first batch)."""
        if self._prepared is None:
            self._prepared = bulk.PreparedMigration(_snapshot(self.prior), self.new_serializer())
            self._prepared.compile_machine_code()
        return self

    def transform(self, arr: pa.Array) -> pa.Array:
        if len(arr) == 0:
            return arr
        if self._prepared is None:  # resolved on the first batch, kept for the rest
            self.prepared()
        assert self._prepared is not None
        return self._prepared(arr, threads=self.threads, on_error="null" if self.on_error == "skip" else "raise").values

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.on_error != "skip":
            return super().__call__(batch)
        i = _column_index(batch.schema, self.column)
        before = batch.column(i).is_valid()
        out = super().__call__(batch)
        unreadable = pc.and_(before, out.column(i).is_null())
        return out.filter(pc.invert(unreadable)) if pc.any(unreadable).as_py() else out


class IdentityTransform(_ColumnTransform):
    """The same pipeline with the migration replaced by a copy of the column (benchmark baseline)."""

    def __init__(self, column: str = "value") -> None:
        self.column = column

    def transform(self, arr: pa.Array) -> pa.Array:
        return pa.concat_arrays([arr]) if len(arr) else arr


class ColumnDecoder(_ColumnTransform):
    """Replaces a binary column with its decoded values as a typed Arrow column
    (:func:`statemorph.bulk.decode`): a struct for rows, numbers, strings, lists, maps."""

    def __init__(self, serializer: Any, column: str = "value", *, threads: int = 1, on_error: str = "raise") -> None:
        self._set_options(column, threads, on_error, DECODE_COLUMN_ON_ERROR)
        self.ser = snapshot_bytes(serializer)
        self._serializer = _live_serializer(serializer)
        self._type: pa.DataType | None = None

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_serializer"] = None
        return d

    def serializer(self) -> Any:
        return self._serializer if self._serializer is not None else _serializer(self.ser)

    def value_type(self) -> pa.DataType:
        """The Arrow type of decoded values (what the serializer's values map to)."""
        if self._type is None:
            self._type = arrow_type_for(self.serializer())
        return self._type

    def output_type(self, input_type: pa.DataType) -> pa.DataType:
        return self.value_type()

    def transform(self, arr: pa.Array) -> pa.Array:
        return decode_column(arr, self.serializer(), self.value_type(), threads=self.threads, on_error=self.on_error)


__all__ = ["BatchFn", "ColumnDecoder", "ColumnMigrator", "IdentityTransform", "decode_column", "encode_column",
           "snapshot_bytes"]


# -- whole-state encoders and decoders (the State Processor read / bootstrap paths) -----------------

def _namespace_columns(snapshot_data: bytes | None) -> tuple[Any, list[str]]:
    """A state's namespace serializer and the window columns it gains; the serializer is None
    when the namespace is no column of the typed batch (the void namespace of non-windowed state,
    the one global window)."""
    if snapshot_data is None:
        return None, []
    ser = _serializer(snapshot_data)
    if type(ser).declared("VALUELESS", False):  # the void namespace, the one global window
        return None, []
    return ser, window_column_names(ser)


class StateDecoder:
    """Savepoint state batch (binary columns) → typed batch: ``key``, ``namespace`` (omitted for
    non-windowed state and global windows; for time and count windows the raw bytes followed by
    ``window_start`` / ``window_end`` or ``window_id``), ``user_key`` (map state), ``index``
    (list state) and the value: one ``value`` column, or, for row values with ``flatten=True``,
    one column per row field. A timer queue (``timers``: converted from a Flink savepoint) has
    ``timestamp`` in place of a value."""

    def __init__(self, key_serializer: Any, value_serializer: Any, *, namespace_serializer: Any = None,
                 user_key_serializer: Any = None, flatten: bool = True, threads: int = 1,
                 on_error: str = "raise", timers: bool = False) -> None:
        self.timers = timers
        self.key = ColumnDecoder(key_serializer, "key", threads=threads, on_error=on_error)
        self.value = ColumnDecoder(value_serializer, "value", threads=threads, on_error=on_error)
        ns = snapshot_bytes(namespace_serializer) if namespace_serializer is not None else None
        self.namespace_serializer, self.window_columns = _namespace_columns(ns)
        self.namespace = ColumnDecoder(ns, "namespace", threads=threads, on_error=on_error) \
            if self.namespace_serializer is not None and not self.window_columns else None
        self.user_key = ColumnDecoder(user_key_serializer, "user_key", threads=threads, on_error=on_error) \
            if user_key_serializer is not None else None
        self.flatten = flatten

    @classmethod
    def for_state(cls, meta: Any, **kw: Any) -> StateDecoder:
        """From a state's metadata (its recorded snapshots). A state statemorph only carries (a
        snapshot it does not know: Kryo, a user snapshot class) is an unsupported state
        (exit 7) naming the state and its class, as when read from the Flink savepoint itself."""
        timers = getattr(meta, "flink_kind", None) == "timers"
        for role in getattr(meta, "opaque_roles", dict)():  # (a timer's value is no serializer of its own)
            if not (timers and role == "value_serializer"):
                meta.snapshot(role)  # raises UnsupportedStateError for the state's opaque serializer
        return cls(meta.snapshot_bytes("key_serializer"), meta.snapshot_bytes("value_serializer"),
                   namespace_serializer=meta.snapshot_bytes("namespace_serializer") or None,
                   user_key_serializer=meta.user_key_serializer, timers=timers, **kw)

    def _parts(self) -> list[tuple[str, ColumnDecoder]]:
        parts = [("key", self.key)]
        if self.namespace is not None:
            parts.append(("namespace", self.namespace))
        if self.user_key is not None:
            parts.append(("user_key", self.user_key))
        return parts

    def _window_fields(self) -> list[pa.Field]:
        if not self.window_columns:
            return []
        return [pa.field("namespace", pa.binary()), *(pa.field(n, pa.int64()) for n in self.window_columns)]

    def output_schema(self, has_index: bool = False) -> pa.Schema:
        fields = [pa.field(name, dec.value_type()) for name, dec in self._parts()]
        fields[1:1] = self._window_fields()
        if has_index:
            fields.append(pa.field("index", pa.int32()))
        if self.timers:
            return pa.schema([*fields, pa.field("timestamp", pa.int64())])
        vt = self.value.value_type()
        if self.flatten and pa.types.is_struct(vt):
            taken = {f.name for f in fields}
            for i in range(vt.num_fields):
                f = vt.field(i)
                name = f.name if f.name not in taken else f"value_{f.name}"
                fields.append(pa.field(name, f.type))
        else:
            fields.append(pa.field("value", vt))
        return pa.schema(fields)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        has_index = batch.schema.get_field_index("index") >= 0
        schema = self.output_schema(has_index)
        cols: list[pa.Array] = []
        for name, dec in self._parts():
            cols.append(dec.transform(_as_binary(batch.column(name), name)))
        if self.window_columns:
            from ..keyed.windows import window_columns

            raw = _as_binary(batch.column("namespace"), "namespace")
            cols[1:1] = [raw, *(c for _, c in window_columns(self.namespace_serializer, raw))]
        if has_index:
            cols.append(batch.column("index").cast(pa.int32()))
        if self.timers:
            cols.append(batch.column("timestamp"))
            cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols]
            return pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(cols, schema, strict=True)],
                                              schema=schema)
        value = self.value.transform(_as_binary(batch.column("value"), "value"))
        if self.flatten and pa.types.is_struct(value.type):
            if isinstance(value, pa.ChunkedArray):
                value = value.combine_chunks()
            struct: pa.StructArray = value
            for i in range(struct.type.num_fields):
                child = struct.field(i)
                if struct.null_count:
                    child = pc.if_else(struct.is_null(), pa.scalar(None, child.type), child)
                cols.append(child)
        else:
            cols.append(value)
        cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols]
        cols = [c if c.type == f.type else c.cast(f.type) for c, f in zip(cols, schema, strict=True)]
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    def map_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield self(b)


class StateEncoder:
    """Typed batch → savepoint state batch (the bootstrap path): encodes the key column (and its
    key group, computed as Flink does), the namespace, the user key (map state), and the value
    from one column or, for row serializers, from several columns gathered into a row.

    The namespace is VoidNamespace unless ``namespace_serializer`` says otherwise: window state
    takes its windows from ``window_start`` / ``window_end`` (``window_id`` for Flink SQL count
    windows), any other namespace from the ``namespace`` column (typed values of the serializer,
    or the serialized bytes as a table read from a savepoint has them); the one global window
    needs no column. Reducing and aggregating state store one value per key
    and namespace, like value state. A timer queue (``kind="timers"``, Flink savepoints only)
    has no value: each row is one timer, its time from the ``timestamp`` column.
    """

    def __init__(self, key_serializer: Any, value_serializer: Any, *, max_parallelism: int,
                 kind: str = "value", key: str = "key", value: str | list[str] = "value",
                 user_key_serializer: Any = None, user_key: str = "user_key", index: str = "index",
                 threads: int = 1, namespace_serializer: Any = None, namespace: str = "namespace",
                 timestamp: str = "timestamp") -> None:
        if kind not in (*ENCODED_KINDS, TIMERS):
            raise ValueError(f"kind must be one of {', '.join((*ENCODED_KINDS, TIMERS))}, got {kind!r}")
        if (kind == "map") != (user_key_serializer is not None):
            raise ValueError("a user key serializer is required for map state and only for it")
        if (kind == TIMERS) != (value_serializer is None):
            raise ValueError("a value serializer is required for every state but a timer queue, which has none")
        self.key_ser = snapshot_bytes(key_serializer)
        self.value_ser = snapshot_bytes(value_serializer) if value_serializer is not None else None
        self.timestamp_col = timestamp
        self.user_key_ser = snapshot_bytes(user_key_serializer) if user_key_serializer is not None else None
        self.namespace_ser = snapshot_bytes(namespace_serializer) if namespace_serializer is not None else None
        self.namespace_col = namespace
        self._local = {"key": key_serializer, "value": value_serializer, "user_key": user_key_serializer,
                       "namespace": namespace_serializer}
        self.max_parallelism = max_parallelism
        self.kind = kind
        self.key_col, self.value_cols, self.user_key_col, self.index_col = key, value, user_key, index
        self.threads = threads

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_local"] = {}
        return d

    def _ser(self, role: str, data: bytes) -> Any:
        local = self._local.get(role)
        return local if local is not None else _serializer(data)

    def output_schema(self) -> pa.Schema:
        if self.kind == TIMERS:
            return TIMERS_SCHEMA
        return state_schema("value" if self.kind in ("reducing", "aggregating") else self.kind)

    def _value_array(self, batch: pa.RecordBatch) -> pa.Array:
        if isinstance(self.value_cols, str):
            return batch.column(self.value_cols)
        arrays = [batch.column(c) for c in self.value_cols]
        return pa.StructArray.from_arrays(arrays, names=list(self.value_cols))

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if isinstance(batch, pa.Table):
            batch = pa.RecordBatch.from_pydict({n: batch.column(n).combine_chunks() for n in batch.column_names})
        key_ser = self._ser("key", self.key_ser)
        keys = batch.column(self.key_col)
        cols: dict[str, pa.Array] = {
            "key_group": key_groups(keys, key_ser, self.max_parallelism),
            "key": encode_column(keys, key_ser, threads=self.threads),
            "namespace": self._namespaces(batch),
        }
        if self.kind == "map":
            assert self.user_key_ser is not None
            cols["user_key"] = encode_column(batch.column(self.user_key_col),
                                             self._ser("user_key", self.user_key_ser), threads=self.threads)
        if self.kind == "list":
            cols["index"] = batch.column(self.index_col).cast(pa.int32())
        if self.value_ser is None:  # a timer queue
            cols["timestamp"] = self._timestamps(batch)
        else:
            cols["value"] = encode_column(self._value_array(batch), self._ser("value", self.value_ser),
                                          threads=self.threads)
        schema = self.output_schema()
        arrays = [cols[f.name] if cols[f.name].type == f.type else cols[f.name].cast(f.type) for f in schema]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _timestamps(self, batch: pa.RecordBatch) -> pa.Array:
        if self.timestamp_col not in batch.schema.names:
            raise UsageError(f"a timer queue's rows need their time, the column {self.timestamp_col!r}")
        col = batch.column(self.timestamp_col)
        if col.null_count:
            raise UsageError(f"column {self.timestamp_col!r} has nulls: every timer needs its time")
        return col.cast(pa.int64())

    def _namespaces(self, batch: pa.RecordBatch) -> pa.Array:
        ser = VoidNamespaceSerializer() if self.namespace_ser is None else self._ser("namespace", self.namespace_ser)
        names = window_column_names(ser)
        have = batch.schema.names
        if names and all(n in have for n in names):
            return window_namespaces(ser, [batch.column(n) for n in names])
        if self.namespace_col in have and self.namespace_ser is not None:
            col = batch.column(self.namespace_col)
            if pa.types.is_binary(col.type) and not pa.types.is_binary(arrow_type_for(ser)):
                return _raw_namespaces(col, ser.get_length(), self.namespace_col)
            return encode_column(col, ser, threads=self.threads)
        if type(ser).declared("VALUELESS", False):  # one namespace only (void, the global window)
            return pa.array([ser.to_bytes(None)] * batch.num_rows, pa.binary())
        raise UsageError(f"{type(ser).__name__} namespaces come from the column(s) "
                         f"{', '.join(repr(n) for n in names or [self.namespace_col])}, which the data lacks")

    def map_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield self(b)


def _raw_namespaces(col: pa.Array | pa.ChunkedArray, length: int, name: str) -> pa.Array:
    """A binary namespace column taken as the serialized namespaces (what a table read from a
    savepoint holds), each of the serializer's fixed length."""
    if col.null_count:
        raise UsageError(f"column {name!r} has null namespaces")
    lengths = pc.binary_length(col)
    if len(col) and (pc.min(lengths).as_py() != length or pc.max(lengths).as_py() != length):
        raise UsageError(f"column {name!r} holds serialized namespaces of {length} bytes; some have another length")
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


ENCODED_KINDS = ("value", "list", "map", "reducing", "aggregating")
TIMERS = "timers"
"""The kind of a timer queue: written only into Flink savepoints (bootstrap), never a state of
the Parquet form's own writers."""
TIMERS_SCHEMA = pa.schema([pa.field("key_group", pa.int32(), nullable=False),
                           pa.field("key", pa.binary(), nullable=False),
                           pa.field("namespace", pa.binary(), nullable=False),
                           pa.field("timestamp", pa.int64(), nullable=False)])
"""The state kinds :class:`StateEncoder` writes (Flink's descriptor types)."""

__all__ += ["ENCODED_KINDS", "TIMERS", "TIMERS_SCHEMA", "StateDecoder", "StateEncoder"]
