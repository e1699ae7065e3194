"""Key and value bytes per state kind (``SerializedCompositeKeyBuilder``,
``CompositeKeySerializationUtils``, ``ListDelimitedSerializer``, the RocksDB map state and
``TtlStateFactory.TtlSerializer``), split into the columns of statemorph's Parquet form and put
back together.

Composite key: key-group prefix (1 byte when max parallelism <= 128, else 2), the key, the
namespace, and for map state the user key (no length). When both the key and the namespace
serializer are variable-length, each is followed by its byte length in base-256 digits, low digit
first. Values: the value; list = elements joined by one ``,`` byte (found by reading each
element); map = a null flag byte, then the value; with TTL an 8-byte timestamp precedes every
value, element or map value. Timers: prefix, the timestamp with its sign bit flipped, key,
namespace, and an empty value.

A list state whose element serializer statemorph cannot delimit (Kryo, a user serializer: the
elements are joined by a ``,`` that only reading each element finds) is kept *whole*: one row per
entry, its Flink value byte for byte in a ``value_bytes`` column (TTL stamps and delimiters
included). Every other kind splits without its value serializer (the stream length-prefixes each
key and value), so only list state needs this.

A map state under a key statemorph cannot delimit (a Kryo or user key serializer) is kept whole
too, unless its namespace and user key both have a fixed length (then the key is what precedes
them): the user key follows the key and namespace with no length, so nothing says where the key
ends. Each entry is one row, ``key_bytes`` (everything after the key-group prefix: key,
namespace, user key) and ``value_bytes`` (the Flink value: null flag, TTL stamp, value).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import FlinkSavepointError, StateFormatError, UnsupportedStateError
from ...io import DataInputDeserializer
from ...keyed.keygroups import key_group_prefix_bytes
from .envelope import VOID_NAMESPACE_SNAPSHOT, Snapshot
from .keyed_header import NAMESPACE_SERIALIZER, StateMetaInfo

LIST_DELIMITER = 0x2C
TTL_BYTES = 8
LENGTH_PREFIXED = frozenset({
    # BinaryRowData: i32 size ‖ bytes (BinaryRowDataSerializer.serialize)
    "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot",
    "org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot",
})
FIXED_LENGTH = {VOID_NAMESPACE_SNAPSHOT: 1}
COL_VALUE_BYTES = "value_bytes"
"""The column of a whole state's Flink values (see the module docstring)."""
COL_KEY_BYTES = "key_bytes"
"""The column of a whole-key state's composite keys after the key-group prefix (see the module docstring)."""
_I32 = struct.Struct(">i")
_Q = struct.Struct(">Q")


class FieldCodec:
    """Finds where one serialized field ends: a fixed length, an ``i32`` length prefix, or by
    reading it with the serializer the snapshot restores."""

    def __init__(self, snap: Snapshot | None, what: str) -> None:
        self.what = what
        self.class_name = snap.class_name if snap is not None else "(none)"
        self.fixed = -1
        self.prefixed = False
        self._serializer: Any = None
        if snap is None:
            return
        if snap.class_name in FIXED_LENGTH:
            self.fixed = FIXED_LENGTH[snap.class_name]
        elif snap.class_name in LENGTH_PREFIXED:
            self.prefixed = True
        elif snap.parsed is not None:
            try:
                self._serializer = snap.parsed.restore_serializer()
                self.fixed = self._serializer.get_length()
            except (StateFormatError, ValueError, NotImplementedError):
                self._serializer = None

    @property
    def known(self) -> bool:
        return self.fixed >= 0 or self.prefixed or self._serializer is not None

    @property
    def variable(self) -> bool:
        """Flink's ``getLength() < 0`` (what decides the length suffixes of composite keys)."""
        return self.fixed < 0

    def end(self, buf: bytes, pos: int, limit: int) -> int:
        if self.fixed >= 0:
            e = pos + self.fixed
        elif self.prefixed:
            if pos + 4 > limit:
                raise FlinkSavepointError(f"{self.what}: truncated length prefix at offset {pos}")
            n = _I32.unpack_from(buf, pos)[0]
            if n < 0:
                raise FlinkSavepointError(f"{self.what}: negative length {n} at offset {pos}")
            e = pos + 4 + n
        elif self._serializer is not None:
            src = DataInputDeserializer(buf, pos, limit - pos)
            try:
                self._serializer.deserialize(src)
            except (StateFormatError, ValueError) as err:
                raise FlinkSavepointError(f"{self.what}: cannot read a value at offset {pos}: {err}") from err
            e = src.position
        else:
            raise UnsupportedStateError(
                f"{self.what}: unsupported state: the serializer snapshot {self.class_name} is not registered, so "
                f"its values cannot be delimited"
            )
        if e > limit:
            raise FlinkSavepointError(f"{self.what}: a value at offset {pos} runs past its end ({e} > {limit})")
        return e


def whole_values(meta: StateMetaInfo) -> bool:
    """Whether ``meta``'s entries are kept whole (``value_bytes``): list state whose elements
    cannot be delimited without a serializer statemorph lacks."""
    if meta.kind != "list" or meta.is_timers:
        return False
    return not FieldCodec(meta.value_snapshot_unwrapped()[0], "list element").known


def _suffix_len(n: int) -> int:
    """Byte count of ``writeVariableIntBytes(n)``: base-256 digits, at least one."""
    k = 1
    n >>= 8
    while n:
        k += 1
        n >>= 8
    return k


def variable_int_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0xFF)
        n >>= 8
        if not n:
            return bytes(out)


def whole_keys(meta: StateMetaInfo, key_snapshot: Snapshot | None) -> bool:
    """Whether ``meta``'s entries are kept whole with their keys (``key_bytes``, ``value_bytes``):
    map state whose key ``key_snapshot`` cannot be delimited and whose namespace or user key has
    no fixed length, so the key's end is found neither by reading nor by counting from the end."""
    if meta.kind != "map" or meta.is_timers or FieldCodec(key_snapshot, "key").known:
        return False
    tail = (FieldCodec(meta.serializer(NAMESPACE_SERIALIZER), "namespace"),
            FieldCodec(meta.user_key_snapshot(), "map user key"))
    return any(c.fixed < 0 for c in tail)


@dataclass
class SplitKey:
    key_group: int
    key: bytes
    namespace: bytes
    rest: bytes  # the user key of map state, the empty string otherwise


class StateLayout:
    """Everything needed to split one state's entries into columns and to rebuild its values."""

    def __init__(self, meta: StateMetaInfo, key_snapshot: Snapshot, max_parallelism: int, where: str) -> None:
        self.meta = meta
        self.where = where
        self.prefix = key_group_prefix_bytes(max_parallelism)
        self.kind = meta.kind
        value_snap, self.ttl = meta.value_snapshot_unwrapped()
        self.value_snapshot = value_snap
        if meta.is_timers:
            timer_parts = meta.timer_snapshots()
            if timer_parts is None:
                raise FlinkSavepointError(
                    f"{where}: timer state {meta.name!r} has no TimerSerializerSnapshot(key, namespace)"
                )
            self.key_codec = FieldCodec(timer_parts[0], f"{where} timer key")
            self.ns_codec = FieldCodec(timer_parts[1], f"{where} timer namespace")
            self.ambiguous = False
        else:
            self.key_codec = FieldCodec(key_snapshot, f"{where} key")
            self.ns_codec = FieldCodec(meta.serializer(NAMESPACE_SERIALIZER), f"{where} namespace")
            self.ambiguous = self.key_codec.variable and self.ns_codec.variable
        self.element_codec = FieldCodec(value_snap, f"{where} list element") if self.kind == "list" else None
        self.whole = self.element_codec is not None and not self.element_codec.known
        """Entries kept whole: ``value_bytes`` holds each Flink value as it is."""
        self.whole_keys = whole_keys(meta, key_snapshot)
        """Entries kept whole with their keys: ``key_bytes`` and ``value_bytes`` (:func:`whole_keys`)."""
        self.user_key_fixed = FieldCodec(meta.user_key_snapshot(), "map user key").fixed if self.kind == "map" else 0

    # -- keys ---------------------------------------------------------------------------------
    def split_key(self, k: bytes) -> SplitKey:
        n = len(k)
        p = self.prefix
        if n < p:
            raise FlinkSavepointError(f"{self.where}: key of {n} bytes is shorter than the key-group prefix")
        kg = k[0] if p == 1 else (k[0] << 8) | k[1]
        if self.meta.is_timers:
            p += 8
        has_rest = self.kind == "map"
        if not self.key_codec.known and self.ambiguous:
            return self._split_opaque_ambiguous(k, kg, p, has_rest)
        if not self.key_codec.known and self.ns_codec.fixed >= 0 and self.user_key_fixed >= 0 and not self.ambiguous:
            ke = n - self.ns_codec.fixed - self.user_key_fixed  # an opaque key: what precedes the fixed tail
        else:
            ke = self.key_codec.end(k, p, n)
        key = k[p:ke]
        ns_start = ke + (_suffix_len(len(key)) if self.ambiguous else 0)
        if self.ns_codec.fixed >= 0:
            ne = ns_start + self.ns_codec.fixed
        elif not has_rest and not self.ambiguous and not self.ns_codec.known:
            ne = n
        else:
            ne = self.ns_codec.end(k, ns_start, n)
        ns = k[ns_start:ne]
        pos = ne + (_suffix_len(len(ns)) if self.ambiguous else 0)
        if pos > n or (not has_rest and pos != n):
            raise FlinkSavepointError(
                f"{self.where}: state {self.meta.name!r}: the key of {n} bytes does not split into key and namespace "
                f"({pos} bytes used)"
            )
        return SplitKey(kg, key, ns, k[pos:])

    def _split_opaque_ambiguous(self, k: bytes, kg: int, p: int, has_rest: bool) -> SplitKey:
        """An opaque key (a serializer statemorph cannot read, e.g. Kryo) before a namespace of
        variable length: Flink writes ``key ‖ len(key) ‖ namespace ‖ len(namespace)`` (each length
        as ``writeVariableIntBytes``), and finds the key's end by reading the key. Here each place
        the key could end is tried: the length bytes there must say the key's length, the namespace
        must read (its serializer known) and its length bytes follow it, up to the end (or, for map
        state, the user key of its fixed length, or any user key). One place must fit; none or two
        (bytes that read both ways) is refused, naming the state."""
        n = len(k)
        tail = self.user_key_fixed if has_rest and self.user_key_fixed >= 0 else 0
        fits: list[SplitKey] = []
        for ke in range(p, n):
            mark = variable_int_bytes(ke - p)
            if k[ke : ke + len(mark)] != mark:
                continue
            ns_start = ke + len(mark)
            try:
                ne = self.ns_codec.end(k, ns_start, n)
            except FlinkSavepointError:
                continue
            mark = variable_int_bytes(ne - ns_start)
            pos = ne + len(mark)
            if k[ne:pos] != mark or (pos > n if has_rest and not tail else pos != n - tail):
                continue
            fits.append(SplitKey(kg, k[p:ke], k[ns_start:ne], k[pos:]))
            if len(fits) > 1:
                break
        if len(fits) != 1:
            raise UnsupportedStateError(
                f"{self.where}: state {self.meta.name!r}: unsupported state: a key of {n} bytes whose key serializer "
                f"({self.key_codec.class_name}) statemorph cannot read splits from its namespace "
                f"{'in more than one way' if fits else 'in no way'}"
            )
        return fits[0]

    def timer_timestamp(self, k: bytes) -> int:
        raw: int = _Q.unpack_from(k, self.prefix)[0]
        v = raw ^ (1 << 63)
        return v - (1 << 64) if v >= 1 << 63 else v

    def timer_key(self, key_group: int, timestamp: int, key: bytes, namespace: bytes) -> bytes:
        """Inverse of :meth:`split_key` + :meth:`timer_timestamp` for timers."""
        head = bytes((key_group,)) if self.prefix == 1 else key_group.to_bytes(2, "big")
        return head + _Q.pack((timestamp & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63)) + key + namespace

    def fixed_split(self) -> tuple[int, int] | None:
        """``(key length or -1, namespace length)`` when keys split by slicing alone: not map or
        timer state, no length suffixes, a fixed-length namespace (the key is what precedes it)."""
        if self.kind in ("map", "timers") or self.ambiguous or self.ns_codec.fixed < 0:
            return None
        return self.key_codec.fixed, self.ns_codec.fixed

    def columns(self, keys: list[bytes], values: list[bytes]) -> dict[str, list[Any]]:
        """One state run as columns of the reader's batch shape (fast slicing paths for the common
        layouts, the per-entry path otherwise; both give the same columns)."""
        fixed = self.fixed_split()
        if fixed is not None and self.kind != "list":
            p = self.prefix
            kf, nf = fixed
            if all(len(k) == p + kf + nf for k in keys) if kf >= 0 else all(len(k) >= p + nf for k in keys):
                kgs = [k[0] for k in keys] if p == 1 else [(k[0] << 8) | k[1] for k in keys]
                cols: dict[str, list[Any]] = {
                    "key_group": kgs,
                    "key": [k[p : len(k) - nf] for k in keys],
                    "namespace": [k[len(k) - nf :] for k in keys],
                }
                if not self.ttl:
                    cols["value"] = list(values)
                    return cols
                if all(len(v) >= TTL_BYTES for v in values):
                    cols["value"] = [v[TTL_BYTES:] for v in values]
                    cols["ttl_timestamp"] = [int.from_bytes(v[:TTL_BYTES], "big", signed=True) for v in values]
                    return cols
        return self._columns_per_entry(keys, values)

    def _columns_per_entry(self, keys: list[bytes], values: list[bytes]) -> dict[str, list[Any]]:
        if self.whole_keys:
            return self._whole_key_columns(keys, values)
        names = ["key_group", "key", "namespace"]
        if self.whole:
            c: dict[str, list[Any]] = {n: [] for n in names + [COL_VALUE_BYTES]}
            for k, v in zip(keys, values, strict=True):
                sk = self.split_key(k)
                c["key_group"].append(sk.key_group)
                c["key"].append(sk.key)
                c["namespace"].append(sk.namespace)
                c[COL_VALUE_BYTES].append(v)
            return c
        if self.kind == "timers":
            names.append("timestamp")
        else:
            names += (["user_key"] if self.kind == "map" else ["index"] if self.kind == "list" else []) + ["value"]
            if self.ttl:
                names.append("ttl_timestamp")
        c = {n: [] for n in names}
        for k, v in zip(keys, values, strict=True):
            sk = self.split_key(k)
            if self.kind == "timers":
                c["key_group"].append(sk.key_group)
                c["timestamp"].append(self.timer_timestamp(k))
                c["key"].append(sk.key)
                c["namespace"].append(sk.namespace)
                continue
            for i, (value, ts) in enumerate(self.split_value(v)):
                c["key_group"].append(sk.key_group)
                c["key"].append(sk.key)
                c["namespace"].append(sk.namespace)
                if self.kind == "map":
                    c["user_key"].append(sk.rest)
                elif self.kind == "list":
                    c["index"].append(i)
                c["value"].append(value)
                if self.ttl:
                    c["ttl_timestamp"].append(ts)
        return c

    def _whole_key_columns(self, keys: list[bytes], values: list[bytes]) -> dict[str, list[Any]]:
        p = self.prefix
        if any(len(k) <= p for k in keys):
            raise FlinkSavepointError(f"{self.where}: state {self.meta.name!r}: a key of no more than the "
                                      f"key-group prefix ({p} bytes)")
        return {"key_group": [k[0] for k in keys] if p == 1 else [(k[0] << 8) | k[1] for k in keys],
                COL_KEY_BYTES: [k[p:] for k in keys], COL_VALUE_BYTES: list(values)}

    def whole_key(self, key_group: int, key_bytes: bytes) -> bytes:
        """Inverse of :meth:`_whole_key_columns`: the composite key of a whole-key row."""
        return (bytes((key_group,)) if self.prefix == 1 else key_group.to_bytes(2, "big")) + key_bytes

    # -- values -------------------------------------------------------------------------------
    def split_value(self, v: bytes) -> list[tuple[bytes | None, int | None]]:
        """The per-value parts of one Flink value: ``[(user value bytes or None, ttl timestamp or
        None)]`` (one item except for list state)."""
        if self.kind == "map":
            if not v:
                raise FlinkSavepointError(f"{self.where}: empty map value (no null flag)")
            if v[0]:
                return [(None, None)]
            return [self._ttl(v[1:])]
        if self.kind == "list":
            return [self._ttl(e) for e in self.split_list(v)]
        return [self._ttl(v)]

    def _ttl(self, v: bytes) -> tuple[bytes, int | None]:
        if not self.ttl:
            return v, None
        if len(v) < TTL_BYTES:
            raise FlinkSavepointError(f"{self.where}: TTL value of {len(v)} bytes has no 8-byte timestamp")
        return v[TTL_BYTES:], int.from_bytes(v[:TTL_BYTES], "big", signed=True)

    def split_list(self, v: bytes) -> list[bytes]:
        codec = self.element_codec
        assert codec is not None
        out = []
        pos, n = 0, len(v)
        while pos < n:
            start = pos
            body = pos + TTL_BYTES if self.ttl else pos
            if body > n:
                raise FlinkSavepointError(f"{self.where}: list element at offset {start} runs past the value")
            pos = codec.end(v, body, n)
            out.append(v[start:pos])
            if pos < n:
                if v[pos] != LIST_DELIMITER:
                    raise FlinkSavepointError(
                        f"{self.where}: expected the list delimiter ',' at offset {pos}, found 0x{v[pos]:02x}"
                    )
                pos += 1
                if pos == n:
                    raise FlinkSavepointError(f"{self.where}: list value ends with a delimiter")
        return out

    def value_parts(self, values: list[bytes]) -> tuple[list[bytes], Callable[[list[bytes]], list[bytes]]]:
        """The per-value bytes of a run's values (what a migration sees: no TTL timestamp, no map
        null flag, one list element each; null map values left out) and a function that puts new
        per-value bytes back into Flink values, every other byte kept as it was."""
        t = TTL_BYTES if self.ttl else 0
        where = self.where
        if self.kind in ("value", "reducing", "aggregating"):
            if not t:
                return list(values), list
            if any(len(v) < t for v in values):
                raise FlinkSavepointError(f"{where}: a TTL value has no 8-byte timestamp")
            heads = [v[:t] for v in values]
            return [v[t:] for v in values], lambda new: [h + n for h, n in zip(heads, new, strict=True)]
        if self.kind == "map":
            if any(not v or (not v[0] and len(v) < 1 + t) for v in values):
                raise FlinkSavepointError(f"{where}: a map value is shorter than its null flag and TTL timestamp")
            present = [v for v in values if not v[0]]

            def rebuild_map(new: list[bytes]) -> list[bytes]:
                it = iter(new)
                return [v if v[0] else v[: 1 + t] + next(it) for v in values]

            return [v[1 + t :] for v in present], rebuild_map
        parts = [self.split_value(v) for v in values]
        users = [b for ps in parts for b, _ in ps if b is not None]

        def rebuild_list(new: list[bytes]) -> list[bytes]:
            it = iter(new)
            return [self.join_value([(next(it), ts) for _, ts in ps]) for ps in parts]

        return users, rebuild_list

    def join_value(self, parts: list[tuple[bytes | None, int | None]]) -> bytes:
        """Inverse of :meth:`split_value`."""
        def with_ttl(b: bytes | None, ts: int | None) -> bytes:
            assert b is not None
            return (ts.to_bytes(TTL_BYTES, "big", signed=True) + b) if self.ttl and ts is not None else b

        if self.kind == "map":
            b, ts = parts[0]
            return b"\x01" if b is None else b"\x00" + with_ttl(b, ts)
        if self.kind == "list":
            return b",".join(with_ttl(b, ts) for b, ts in parts)
        return with_ttl(*parts[0])


def build_composite_key(key_group: int, key: bytes, namespace: bytes, user_key: bytes, prefix: int,
                        ambiguous: bool) -> bytes:
    """A composite key as Flink's ``SerializedCompositeKeyBuilder`` writes it (for converting
    rows of the Parquet form back into a keyed-state file)."""
    head = bytes((key_group,)) if prefix == 1 else key_group.to_bytes(2, "big")
    if ambiguous:
        return head + key + variable_int_bytes(len(key)) + namespace + variable_int_bytes(len(namespace)) + user_key
    return head + key + namespace + user_key

