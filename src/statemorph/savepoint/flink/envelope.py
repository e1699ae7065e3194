"""Serializer-snapshot envelopes inside Flink's keyed-state header, kept as exact bytes.

Flink writes ``i32 2 ‖ UTF(snapshot class) ‖ i32 version ‖ payload`` with no length, so a
snapshot's end is only known by reading it. :func:`read_envelope` reads it through the snapshot
registry when the class is registered; otherwise (or when the registered class cannot read it)
it reads any ``CompositeTypeSerializerSnapshot`` structurally (magic 911108, empty outer part,
nested snapshots recursively) and, failing that, reports the snapshot as *open*: the caller
(:mod:`.keyed_header`) then finds its end from what must follow it. Either way the snapshot's
bytes are kept verbatim, so a header is written back byte for byte and a snapshot no class reads
is carried over untouched. Nothing is ever imported by name.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ...errors import FlinkSavepointError, StateFormatError
from ...io import DataInputDeserializer, DataOutputSerializer
from ...typeutils import (
    CompositeTypeSerializerSnapshot,
    SnapshotRegistry,
    TypeSerializerSnapshot,
    read_versioned_snapshot_from,
)

ENVELOPE_VERSION = 2
COMPOSITE_MAGIC = CompositeTypeSerializerSnapshot.MAGIC
DELEGATE_MAGIC = CompositeTypeSerializerSnapshot.DELEGATE_MAGIC
MAX_STRUCTURAL_DEPTH = 32

TTL_SNAPSHOT = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
LIST_SNAPSHOT = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"
MAP_SNAPSHOT = "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot"
VOID_NAMESPACE_SNAPSHOT = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
TIMER_SNAPSHOT = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"


@dataclass
class Snapshot:
    """One versioned snapshot: its Flink class name, version, exact bytes (``UTF class ‖ i32
    version ‖ payload``), the registry's object when it could read it, and, for composite
    snapshots read structurally or through the registry, the nested snapshots."""

    class_name: str
    version: int
    raw: bytes
    parsed: TypeSerializerSnapshot | None = None
    nested: list[Snapshot] | None = None

    def envelope_bytes(self) -> bytes:
        """The top-level form (``i32 2`` first) that state meta infos hold."""
        out = DataOutputSerializer()
        out.write_int(ENVELOPE_VERSION)
        out.write(self.raw)
        return out.get_copy_of_buffer()


class OpenSnapshot(Exception):
    """Internal signal: the snapshot at ``start`` (class ``class_name``) cannot be delimited by
    reading it; the caller must find its end from the structure that follows."""

    def __init__(self, class_name: str, start: int, body: int) -> None:
        super().__init__(class_name)
        self.class_name = class_name
        self.start = start
        self.body = body


def snapshot_from_envelope(data: bytes, registry: SnapshotRegistry | None = None) -> Snapshot:
    """A :class:`Snapshot` from top-level envelope bytes (``i32 2 ‖ ...``), e.g. new snapshot
    bytes handed to the rewriter; the bytes must hold exactly one snapshot."""
    src = DataInputDeserializer(data)
    try:
        version = src.read_int()
        if version != ENVELOPE_VERSION:
            raise FlinkSavepointError(
                f"serializer snapshot envelope version {version} is not supported (only {ENVELOPE_VERSION})"
            )
        snap = read_versioned(src, registry)
        src.expect_end(f"snapshot {snap.class_name}")
    except OpenSnapshot as e:
        # nothing follows a standalone envelope: the rest of the bytes is the snapshot
        snap = _opaque(data, e.start, len(data), e.class_name, src_version_at=e.body)
    except StateFormatError as e:
        raise FlinkSavepointError(f"serializer snapshot envelope: {e}") from e
    return snap


def _opaque(data: bytes, start: int, end: int, class_name: str, src_version_at: int) -> Snapshot:
    version = int.from_bytes(data[src_version_at : src_version_at + 4], "big", signed=True)
    return Snapshot(class_name, version, bytes(data[start:end]))


def read_versioned(
    src: DataInputDeserializer, registry: SnapshotRegistry | None = None, depth: int = 0
) -> Snapshot:
    """Read one versioned snapshot. Raises :class:`OpenSnapshot` when its end cannot be known."""
    if depth > MAX_STRUCTURAL_DEPTH:
        raise FlinkSavepointError(f"serializer snapshot at offset {src.position} nests more than "
                                  f"{MAX_STRUCTURAL_DEPTH} levels")
    data, start, end = src.window()
    class_name = src.read_utf()
    body = src.position
    version = src.read_int()
    after_version = src.position
    # 1. the registry, on a scratch cursor so a failure leaves ``src`` where it was
    scratch = DataInputDeserializer(data, start, end - start)
    parsed: TypeSerializerSnapshot | None
    try:
        parsed = read_versioned_snapshot_from(scratch, registry)
    except (StateFormatError, ValueError, IndexError):
        # not registered, or the registered class reads other bytes than these
        parsed = None
    # 2. the composite structure, which also gives the nested snapshots' exact bytes
    structural = _read_composite(data, after_version, end, registry, depth)
    if parsed is not None:
        nested = structural[0] if structural is not None and structural[1] == scratch.position else None
        src.advance_to(scratch.position)
        return Snapshot(class_name, version, bytes(data[start : src.position]), parsed, nested)
    if structural is not None:
        src.advance_to(structural[1])
        return Snapshot(class_name, version, bytes(data[start : src.position]), None, structural[0])
    raise OpenSnapshot(class_name, start, body)


def _read_composite(
    data: bytes, pos: int, end: int, registry: SnapshotRegistry | None, depth: int
) -> tuple[list[Snapshot], int] | None:
    """The nested snapshots and end offset of a composite snapshot whose outer part is empty
    (TTL, List, Map, Timer, Nullable ...), or None when the bytes at ``pos`` are not one."""
    scratch = DataInputDeserializer(data, pos, end - pos)
    try:
        if scratch.available() < 20 or scratch.read_int() != COMPOSITE_MAGIC:
            return None
        scratch.read_int()  # outer version
        if scratch.read_int() != DELEGATE_MAGIC or scratch.read_int() != 1:
            return None
        n = scratch.check_length(scratch.read_int(), "nested snapshots", unit=6)
        nested = [read_versioned(scratch, registry, depth + 1) for _ in range(n)]
    except (StateFormatError, OpenSnapshot):
        return None
    return nested, scratch.position


def split_open_composite(snap: Snapshot, registry: SnapshotRegistry | None = None) -> list[Snapshot] | None:
    """For a composite snapshot that could not be read (an unreadable nested snapshot), its nested
    snapshots, each with its exact bytes: a nested snapshot no class reads ends where the next one
    starts (a Java class name and a version), the last one at the end of ``raw``. This is what
    makes ``TTL(Long, RowData)``, ``Map(String, RowData)`` or ``Timer(RowData key, Void)`` usable
    without a class for RowData. None when the bytes do not split that way."""
    data = snap.raw
    src = DataInputDeserializer(data)
    try:
        src.read_utf()
        src.read_int()
        if src.available() < 20 or src.read_int() != COMPOSITE_MAGIC:
            return None
        src.read_int()
        if src.read_int() != DELEGATE_MAGIC or src.read_int() != 1:
            return None
        n = src.check_length(src.read_int(), "nested snapshots", unit=6)
    except StateFormatError:
        return None
    if n == 0 or n > MAX_STRUCTURAL_DEPTH:
        return None
    return _split_nested(data, src.position, n, registry, [MAX_SPLIT_ATTEMPTS], _class_name_starts(data))


MAX_SPLIT_ATTEMPTS = 4096
"""Candidate ends tried while splitting one opaque composite: hostile bytes full of class-name
look-alikes cannot make the search explode."""


def _split_nested(
    data: bytes, pos: int, left: int, registry: SnapshotRegistry | None, budget: list[int], starts: list[int]
) -> list[Snapshot] | None:
    if left == 0:
        return [] if pos == len(data) else None
    cur = DataInputDeserializer(data, pos, len(data) - pos)
    try:
        one = read_versioned(cur, registry, 1)
    except OpenSnapshot as o:
        version = int.from_bytes(data[o.body : o.body + 4], "big", signed=True)
        if left == 1:
            return [Snapshot(o.class_name, version, bytes(data[pos:]))]
        for e in starts[bisect.bisect_left(starts, o.body + 4) :]:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            rest = _split_nested(data, e, left - 1, registry, budget, starts)
            if rest is not None:
                return [Snapshot(o.class_name, version, bytes(data[pos:e])), *rest]
        return None
    except StateFormatError:
        return None
    rest = _split_nested(data, cur.position, left - 1, registry, budget, starts)
    return None if rest is None else [one, *rest]


_CLASS_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.")
_CLASS_RUN = re.compile(rb"[A-Za-z0-9_$.]{3,}")
_MIN_CLASS_PAIR = 0x2424
"""The smallest length two class-name characters make read as an unsigned short (``$$``)."""


def _class_name_starts(data: bytes) -> list[int]:
    """Every ``e`` where :func:`_class_name_at` holds, in order, found once per snapshot. A name
    is followed by a version below 1000 (first byte 0, not a name character), so it ends where a
    run of name characters ends; its length field sits just before it. Inside a run both length
    bytes would be name characters, a length of at least 0x2424, so only the run's first two
    positions can start a shorter name: the runs are scanned in C and at most two positions
    each (more only for runs that long) checked."""
    out = []
    for m in _CLASS_RUN.finditer(data):
        a, b = m.span()
        for s in (a, a + 1, *range(a + 2, b - _MIN_CLASS_PAIR + 1)):
            if s - 2 >= 0 and _class_name_at(data, s - 2):
                out.append(s - 2)
    return out


def _class_name_at(data: bytes, e: int) -> bool:
    """Does a versioned snapshot (``UTF java.class.Name ‖ i32 small version``) start at ``e``?"""
    if e + 2 > len(data):
        return False
    n = int.from_bytes(data[e : e + 2], "big")
    name = data[e + 2 : e + 2 + n]
    if n < 3 or len(name) != n or b"." not in name or not _CLASS_CHARS.issuperset(name):
        return False
    v = data[e + 2 + n : e + 6 + n]
    return len(v) == 4 and 0 <= int.from_bytes(v, "big", signed=True) < 1000
