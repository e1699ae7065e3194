"""The header of a canonical keyed-state stream: Flink's ``KeyedBackendSerializationProxy`` v6
and its ``StateMetaInfoSnapshot`` list, read into plain data and written back byte for byte.

Layout: ``i32 6 ‖ bool compression ‖ envelope(key serializer) ‖ i16 n ‖ n × (UTF name ‖ i32
backend-state-type ordinal ‖ i32 k ‖ k × (UTF option, UTF value) ‖ i32 m ‖ m × (UTF serializer
key, envelope))``. The key-group blocks start right after it, so the header's end is known from
the first non-empty key group's offset (or the stream's end): that is what lets a snapshot no
class can read be delimited anyway (:func:`parse_keyed_header` tries the ends the structure
allows and keeps the one after which the rest of the header reads to exactly that point).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ...errors import FlinkSavepointError, StateFormatError
from ...io import DataInputDeserializer, DataOutputSerializer, decode_modified_utf8, is_modified_utf8
from ...typeutils import SnapshotRegistry
from .envelope import (
    ENVELOPE_VERSION,
    LIST_SNAPSHOT,
    MAP_SNAPSHOT,
    TIMER_SNAPSHOT,
    TTL_SNAPSHOT,
    OpenSnapshot,
    Snapshot,
    read_versioned,
    split_open_composite,
)

PROXY_VERSION = 6
KEY_VALUE, OPERATOR, BROADCAST, PRIORITY_QUEUE, KEY_VALUE_V2 = 0, 1, 2, 3, 4
"""``StateMetaInfoSnapshot.BackendStateType`` ordinals."""
KEYED_STATE_TYPES = (KEY_VALUE, PRIORITY_QUEUE, KEY_VALUE_V2)
_TYPE_NAMES = {KEY_VALUE: "KEY_VALUE", OPERATOR: "OPERATOR", BROADCAST: "BROADCAST", PRIORITY_QUEUE: "PRIORITY_QUEUE",
               KEY_VALUE_V2: "KEY_VALUE_V2"}
KEYED_STATE_TYPE = "KEYED_STATE_TYPE"
VALUE_SERIALIZER = "VALUE_SERIALIZER"
NAMESPACE_SERIALIZER = "NAMESPACE_SERIALIZER"
USER_KEY_SERIALIZER = "USER_KEY_SERIALIZER"
SERIALIZER_KEYS = frozenset({VALUE_SERIALIZER, NAMESPACE_SERIALIZER, USER_KEY_SERIALIZER, "KEY_SERIALIZER"})
MAX_OPTIONS = 64
MAX_SERIALIZERS = 16


@dataclass
class StateMetaInfo:
    """One state of the keyed-state stream; its position in the header is its state id."""

    name: str
    backend_type: int
    options: list[tuple[str, str]] = field(default_factory=list)
    serializers: list[tuple[str, Snapshot]] = field(default_factory=list)

    def option(self, key: str) -> str | None:
        return next((v for k, v in self.options if k == key), None)

    def serializer(self, key: str) -> Snapshot | None:
        return next((s for k, s in self.serializers if k == key), None)

    def set_serializer(self, key: str, snap: Snapshot) -> None:
        for i, (k, _) in enumerate(self.serializers):
            if k == key:
                self.serializers[i] = (k, snap)
                return
        raise FlinkSavepointError(f"state {self.name!r} has no {key}")

    @property
    def is_timers(self) -> bool:
        return self.backend_type == PRIORITY_QUEUE

    def timer_snapshots(self) -> tuple[Snapshot, Snapshot] | None:
        """A timer state's key and namespace snapshots: the two nested in its value serializer's
        ``TimerSerializerSnapshot`` (a priority queue has no NAMESPACE_SERIALIZER of its own);
        None when this is no timer state or the snapshot does not split into those two."""
        timer = self.serializer(VALUE_SERIALIZER)
        if not self.is_timers or timer is None or timer.class_name != TIMER_SNAPSHOT:
            return None
        nested = timer.nested if timer.nested is not None else split_open_composite(timer)
        return (nested[0], nested[1]) if nested and len(nested) == 2 else None

    @property
    def state_type(self) -> str:
        """Flink's ``StateDescriptor.Type`` name (VALUE, LIST, MAP, REDUCING, AGGREGATING ...),
        or TIMERS for a priority queue."""
        if self.is_timers:
            return "TIMERS"
        return (self.option(KEYED_STATE_TYPE) or "UNKNOWN").upper()

    @property
    def kind(self) -> str:
        """value / list / map / reducing / aggregating / timers (what inspect shows)."""
        return self.state_type.lower()

    @property
    def ttl(self) -> bool:
        """True when the values (list elements, map values) carry Flink's TTL timestamp."""
        return self.value_snapshot_unwrapped()[1]

    def value_snapshot_unwrapped(self) -> tuple[Snapshot | None, bool]:
        """The per-value serializer snapshot (list element, map value, plain value) with a TTL
        wrapper removed, and whether there was one."""
        snap = self.serializer(VALUE_SERIALIZER)
        if snap is None or self.is_timers:
            return snap, False
        st = self.state_type
        if st == "LIST" and self.backend_type != KEY_VALUE_V2:
            snap = _nested(snap, LIST_SNAPSHOT, 0)
        elif st == "MAP" and self.backend_type != KEY_VALUE_V2:
            snap = _nested(snap, MAP_SNAPSHOT, 1)
        if snap is not None and snap.class_name == TTL_SNAPSHOT:
            return _nested(snap, TTL_SNAPSHOT, 1), True
        return snap, False

    def namespace_snapshot(self) -> Snapshot | None:
        """The namespace serializer's snapshot: the state's own, or for a timer queue the
        namespace inside its ``TimerSerializerSnapshot(key, namespace)`` (a window operator's
        timers live in the window's namespace)."""
        if self.is_timers:
            parts = self.timer_snapshots()
            return parts[1] if parts is not None else None
        return self.serializer(NAMESPACE_SERIALIZER)

    def with_value_snapshot(self, new: Snapshot) -> Snapshot:
        """The top-level VALUE_SERIALIZER snapshot with the per-value snapshot (list element, map
        value, user value under TTL) replaced by ``new``. The per-value snapshot is always the
        last nested snapshot of its wrappers (List, Map, TTL), so it is the tail of their bytes:
        the wrappers' own bytes are kept exactly."""
        top = self.serializer(VALUE_SERIALIZER)
        if top is None or self.is_timers:
            raise FlinkSavepointError(f"state {self.name!r} has no value serializer to replace")
        path: list[Snapshot] = []
        snap: Snapshot | None = top
        st = self.state_type
        if st == "LIST" and self.backend_type != KEY_VALUE_V2:
            path.append(top)
            snap = _nested(top, LIST_SNAPSHOT, 0)
        elif st == "MAP" and self.backend_type != KEY_VALUE_V2:
            path.append(top)
            snap = _nested(top, MAP_SNAPSHOT, 1)
        if snap is not None and snap.class_name == TTL_SNAPSHOT:
            path.append(snap)
            snap = _nested(snap, TTL_SNAPSHOT, 1)
        if snap is None:
            raise FlinkSavepointError(
                f"state {self.name!r}: the value serializer snapshot {top.class_name} cannot be taken apart"
            )
        raw = new.raw
        inner = snap
        for wrapper in reversed(path):
            if not wrapper.raw.endswith(inner.raw):
                raise FlinkSavepointError(
                    f"state {self.name!r}: {wrapper.class_name} does not end with its nested value snapshot"
                )
            raw = wrapper.raw[: len(wrapper.raw) - len(inner.raw)] + raw
            inner = wrapper
        if not path:
            return new
        outer = path[0]
        return Snapshot(outer.class_name, outer.version, raw)

    def user_key_snapshot(self) -> Snapshot | None:
        if self.state_type != "MAP":
            return None
        if self.backend_type == KEY_VALUE_V2:
            return self.serializer(USER_KEY_SERIALIZER)
        snap = self.serializer(VALUE_SERIALIZER)
        return _nested(snap, MAP_SNAPSHOT, 0) if snap is not None else None


def _nested(snap: Snapshot | None, class_name: str, index: int) -> Snapshot | None:
    if snap is None or snap.class_name != class_name:
        return None
    nested = snap.nested if snap.nested is not None else split_open_composite(snap)
    if nested is None or index >= len(nested):
        return None
    return nested[index]


@dataclass
class KeyedHeader:
    version: int
    compressed: bool
    key_serializer: Snapshot
    states: list[StateMetaInfo]
    size: int = 0

    def state(self, name: str) -> tuple[int, StateMetaInfo]:
        for i, s in enumerate(self.states):
            if s.name == name:
                return i, s
        raise FlinkSavepointError(f"no state {name!r} (states: {', '.join(s.name for s in self.states)})")


def write_keyed_header(h: KeyedHeader) -> bytes:
    out = DataOutputSerializer()
    out.write_int(h.version)
    out.write_boolean(h.compressed)
    out.write_int(ENVELOPE_VERSION)
    out.write(h.key_serializer.raw)
    write_meta_infos(out, h.states)
    return out.get_copy_of_buffer()


def write_meta_infos(out: DataOutputSerializer, states: list[StateMetaInfo]) -> None:
    """``i16 n ‖ n × StateMetaInfoSnapshot``, as :meth:`_Parser.meta_infos` reads them (keyed and
    operator state alike)."""
    out.write_short(len(states))
    for s in states:
        out.write_utf(s.name)
        out.write_int(s.backend_type)
        out.write_int(len(s.options))
        for k, v in s.options:
            out.write_utf(k)
            out.write_utf(v)
        out.write_int(len(s.serializers))
        for k, snap in s.serializers:
            out.write_utf(k)
            out.write_int(ENVELOPE_VERSION)
            out.write(snap.raw)


def parse_keyed_header(
    data: bytes, header_end: int, where: str, registry: SnapshotRegistry | None = None
) -> KeyedHeader:
    """Parse ``data[0:header_end]`` as the header; it must end exactly at ``header_end``."""
    try:
        return _Parser(data, header_end, where, registry).header()
    except FlinkSavepointError:
        raise
    except StateFormatError as e:
        raise FlinkSavepointError(f"{where}: keyed-state header: {e}") from e


class _Parser:
    """Reads the header front to back. A snapshot no class can delimit ends where the next item
    the grammar expects starts: the next serializer key (``UTF key ‖ i32 2``), the next state
    meta info (name, a keyed backend type, options, a serializer key and ``i32 2``), or the end
    of the header. The first position showing that signature is taken.

    The positions are not probed one by one: each signature has a fixed part that a regular
    expression or a vectorised comparison finds in C (:class:`_Ends`), and only those candidates
    are checked in full, each string's validity included, without decoding it. At most
    :data:`MAX_END_CANDIDATES` are checked per header, so hostile bytes full of look-alikes cost a
    bounded amount of work and end in a typed error."""

    def __init__(self, data: bytes, end: int, where: str, registry: SnapshotRegistry | None,
                 state_types: tuple[int, ...] = KEYED_STATE_TYPES, what: str = "keyed-state header") -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.end, self.where, self.registry, self.what = end, where, registry, what
        self.ends = _Ends(self.data, end, where, state_types, what)

    def cur(self, pos: int) -> DataInputDeserializer:
        return DataInputDeserializer(self.data, pos, self.end - pos)

    def header(self) -> KeyedHeader:
        src = self.cur(0)
        version = src.read_int()
        if version != PROXY_VERSION:
            raise FlinkSavepointError(
                f"{self.where}: keyed-state header version {version} is not supported (Flink 1.17+ writes and reads "
                f"only {PROXY_VERSION})"
            )
        compressed = src.read_boolean()
        key, pos = self.envelope(src.position, "key serializer", self.ends.count_then_state)
        states, src = self.meta_infos(pos, self.ends.header_end)
        if src.position != self.end:
            raise FlinkSavepointError(
                f"{self.where}: the keyed-state header ends at offset {src.position} but the first key group "
                f"starts at {self.end}"
            )
        return KeyedHeader(version, compressed, key, states, self.end)

    def meta_infos(
        self, pos: int, last: Callable[[int], Iterator[int]]
    ) -> tuple[list[StateMetaInfo], DataInputDeserializer]:
        """``i16 n ‖ n × StateMetaInfoSnapshot`` at ``pos`` (Flink's
        ``StateMetaInfoSnapshotReadersWriters``, the one reader for keyed and operator state);
        ``last`` finds where a snapshot of the last state no class reads can end (what follows the
        list). Returns the states and a cursor after them."""
        src = self.cur(pos)
        n = src.read_short()
        if n < 0:
            raise FlinkSavepointError(f"{self.where}: negative state count {n} at offset {pos}")
        states: list[StateMetaInfo] = []
        for i in range(n):
            last_state = i == n - 1
            name = src.read_utf()
            if any(m.name == name for m in states):
                raise FlinkSavepointError(f"{self.where}: state {name!r} appears twice in the keyed-state header "
                                          f"(at offset {src.position}); a state is listed once")
            backend_type = src.read_int()
            if backend_type not in self.ends.state_types:
                raise FlinkSavepointError(
                    f"{self.where}: state {name!r} has backend state type {backend_type} at offset "
                    f"{src.position - 4} ({self.what} holds {_type_names(self.ends.state_types)})"
                )
            n_opt = src.read_int()
            if not 0 <= n_opt <= MAX_OPTIONS:
                raise FlinkSavepointError(f"{self.where}: state {name!r} declares {n_opt} options")
            options = [(src.read_utf(), src.read_utf()) for _ in range(n_opt)]
            n_ser = src.read_int()
            if not 0 <= n_ser <= MAX_SERIALIZERS:
                raise FlinkSavepointError(f"{self.where}: state {name!r} declares {n_ser} serializers")
            meta = StateMetaInfo(name, backend_type, options, [])
            for j in range(n_ser):
                key_name = src.read_utf()
                follows: Callable[[int], Iterator[int]]
                if j < n_ser - 1:
                    follows = self.ends.serializer_key
                elif last_state:
                    follows = last
                else:
                    follows = self.ends.state
                snap, p = self.envelope(src.position, f"state {name!r} {key_name}", follows)
                meta.serializers.append((key_name, snap))
                src = self.cur(p)
            states.append(meta)
        return states, src

    def envelope(self, pos: int, what: str, follows: Callable[[int], Iterator[int]]) -> tuple[Snapshot, int]:
        c = self.cur(pos)
        v = c.read_int()
        if v != ENVELOPE_VERSION:
            raise FlinkSavepointError(
                f"{self.where}: {what}: serializer snapshot envelope version {v} at offset {pos} "
                f"(only {ENVELOPE_VERSION}; 1 is the pre-1.7 format Flink no longer reads)"
            )
        try:
            snap = read_versioned(c, self.registry)
            return snap, c.position
        except OpenSnapshot as o:
            version = int.from_bytes(self.data[o.body : o.body + 4], "big", signed=True)
            for e in follows(o.body + 4):
                snap = Snapshot(o.class_name, version, bytes(self.data[o.start : e]))
                snap.nested = split_open_composite(snap, self.registry)
                return snap, e
            raise FlinkSavepointError(
                f"{self.where}: {what}: the serializer snapshot {o.class_name} at offset {o.start} is not "
                f"registered and its end cannot be found from the header structure"
            ) from None


_I16, _I32 = struct.Struct(">H"), struct.Struct(">i")
_ENVELOPE = ENVELOPE_VERSION.to_bytes(4, "big")
_KEY_BYTES = range(min(map(len, SERIALIZER_KEYS)), 3 * max(map(len, SERIALIZER_KEYS)) + 1)
"""Byte lengths a serializer key can have: modified UTF-8 takes 1 to 3 bytes a character (the
decoder accepts the longer forms of ASCII too, so they are candidates as well)."""
_SERIALIZER_KEY = re.compile(
    b"(?=\\x00(?:"
    + b"|".join(re.escape(bytes([n])) + b".{%d}" % n for n in _KEY_BYTES)
    + b")"
    + re.escape(_ENVELOPE)
    + b")",
    re.DOTALL,
)
"""The fixed part of ``UTF key ‖ i32 2``: a length in :data:`_KEY_BYTES`, that many bytes, 2."""
MAX_END_CANDIDATES = 4096
"""Candidate ends checked in full per header. Real headers need a handful (none at all unless a
snapshot's class is unknown); beyond this the header is refused rather than searched on."""
_WINDOW = 1 << 16
"""Positions compared at once when looking for state meta infos (bounds the scratch arrays)."""


def _type_names(types: tuple[int, ...]) -> str:
    return " or ".join(f"{t} {_TYPE_NAMES[t]}" for t in types)


class _Ends:
    """The positions where a snapshot no class reads can end, by what follows it. Each method
    yields, in increasing order from ``start``, the positions showing that signature, exactly
    the ones a byte-by-byte probe would accept; every candidate checked in full counts against
    :data:`MAX_END_CANDIDATES`."""

    def __init__(self, data: bytes, end: int, where: str, state_types: tuple[int, ...] = KEYED_STATE_TYPES,
                 what: str = "keyed-state header") -> None:
        self.data, self.end, self.where, self.what = data, end, where, what
        self.state_types = state_types
        self.tried = 0

    def _try(self, e: int) -> None:
        self.tried += 1
        if self.tried > MAX_END_CANDIDATES:
            raise FlinkSavepointError(
                f"{self.where}: {self.what}: more than {MAX_END_CANDIDATES} candidate ends tried for "
                f"serializer snapshots no class reads (at offset {e}); a header this ambiguous is refused"
            )

    def header_end(self, start: int) -> Iterator[int]:
        """The end of the header (after the last snapshot of the last state)."""
        if start <= self.end:
            self._try(self.end)
            yield self.end

    def serializer_key(self, start: int) -> Iterator[int]:
        """The next serializer key of the same state."""
        for m in _SERIALIZER_KEY.finditer(self.data, start, self.end):
            self._try(m.start())
            if self._key_at(m.start()):
                yield m.start()

    def state(self, start: int) -> Iterator[int]:
        """The next state meta info."""
        for e in self._state_candidates(start):
            self._try(e)
            if self._state_at(e):
                yield e

    def count_then_state(self, start: int) -> Iterator[int]:
        """After the key serializer: the state count, then the first state meta info, or a count
        of 0 ending the header."""
        for e in self._state_candidates(start + 2):
            self._try(e - 2)
            # a count of at least one state (a count of 0 is the header's end, below): else the
            # snapshot's own last bytes 00 00 before a look-alike (the real count 8, then the first
            # state's name "visits", read as a name of 8 bytes) would end the key serializer early
            if self.data[e - 2] < 0x80 and self.data[e - 2: e] != b"\x00\x00" and self._state_at(e):
                yield e - 2
        if start <= self.end - 2:
            self._try(self.end - 2)
            if self.data[self.end - 2 : self.end] == b"\x00\x00":
                yield self.end - 2

    # -- full checks -------------------------------------------------------------------------
    def _key_at(self, e: int) -> bool:
        """``UTF key ‖ i32 2`` at ``e``, the key one of :data:`SERIALIZER_KEYS`."""
        if e + 2 > self.end:
            return False
        n = _I16.unpack_from(self.data, e)[0]
        p = e + 2 + n
        if n not in _KEY_BYTES or p + 4 > self.end or self.data[p : p + 4] != _ENVELOPE:
            return False
        try:
            return decode_modified_utf8(self.data[e + 2 : p]) in SERIALIZER_KEYS
        except StateFormatError:
            return False

    def _state_at(self, e: int) -> bool:
        """``UTF name ‖ i32 type ‖ i32 k ‖ k × (UTF, UTF) ‖ i32 m ≥ 1 ‖ UTF key ‖ i32 2`` at ``e``:
        the lengths first, the strings' encoding last, none of them decoded."""
        data, end = self.data, self.end
        if e + 2 > end:
            return False
        p = e + 2 + _I16.unpack_from(data, e)[0]
        strings = [(e + 2, p)]
        if p + 8 > end or _I32.unpack_from(data, p)[0] not in self.state_types:
            return False
        n_opt = _I32.unpack_from(data, p + 4)[0]
        if not 0 <= n_opt <= MAX_OPTIONS:
            return False
        p += 8
        for _ in range(2 * n_opt):
            if p + 2 > end:
                return False
            q = p + 2 + _I16.unpack_from(data, p)[0]
            if q > end:
                return False
            strings.append((p + 2, q))
            p = q
        if p + 4 > end or not 1 <= _I32.unpack_from(data, p)[0] <= MAX_SERIALIZERS:
            return False
        return self._key_at(p + 4) and all(is_modified_utf8(data, a, q) for a, q in strings)

    def _state_candidates(self, start: int) -> Iterator[int]:
        """Positions ``e >= start`` where the string whose length is at ``e`` is followed by a
        keyed backend type and an option count in range: compared a window at a time with numpy
        (every ``e`` of :meth:`_state_at` is one; most others are not)."""
        a = np.frombuffer(self.data, dtype=np.uint8, count=self.end)
        last = self.end - 10  # a name (possibly empty), the type and the option count fit
        w0 = max(start, 0)
        while w0 <= last:
            w1 = min(w0 + _WINDOW, last + 1)
            e = np.arange(w0, w1)
            q = e + 2 + ((a[w0:w1].astype(np.int64) << 8) | a[w0 + 1 : w1 + 1])
            fits = q + 8 <= self.end
            e, q = e[fits], q[fits]
            t = a[q + 3]
            ok = (a[q] == 0) & (a[q + 1] == 0) & (a[q + 2] == 0) & np.isin(t, self.state_types)
            ok &= (a[q + 4] == 0) & (a[q + 5] == 0) & (a[q + 6] == 0) & (a[q + 7] <= MAX_OPTIONS)
            yield from e[ok].tolist()
            w0 = w1
