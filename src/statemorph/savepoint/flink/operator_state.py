"""Operator (non-keyed) state of one subtask: Flink's ``OperatorBackendSerializationProxy`` header
and the partitions its :class:`~.handles.OperatorStreamHandle` points at.

Stream layout: ``i32 6 ‖ bool compression ‖ i16 n ‖ n × StateMetaInfoSnapshot (backend type 1,
OPERATOR) ‖ i16 m ‖ m × StateMetaInfoSnapshot (2, BROADCAST) ‖ data``; the snapshots are read by
the keyed header's one meta-info reader (:meth:`.keyed_header._Parser.meta_infos`). The data of a
list state (distribution mode SPLIT_DISTRIBUTE or UNION) is its elements one after another, each
written by its ``VALUE_SERIALIZER``; the handle records each element's start offset, so the count
of offsets is the count of elements. A broadcast state is one partition, ``i32 count ‖ count ×
(key ‖ value)`` by ``KEY_SERIALIZER`` and ``VALUE_SERIALIZER``, its start recorded once. Every
partition ends where the next one of the stream starts (or at the stream's end), so list elements
are cut out as exact bytes whatever their serializer; broadcast entries need both serializers to
be delimited.

With snapshot compression (the header's flag) a Snappy-framed stream follows the header: its
stream identifier, then each partition (a list element, a broadcast state's whole map) as chunks
of its own, its offset at its first chunk (Flink flushes the compressor where it records an
offset), so each partition is unframed alone and framed alone again when written.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import FlinkSavepointError, StateFormatError
from ...io import DataOutputSerializer
from ...typeutils import SnapshotRegistry
from .handles import DISTRIBUTION_MODES, OperatorStateInfo, OperatorStreamHandle
from .keyed_header import BROADCAST, OPERATOR, PROXY_VERSION, VALUE_SERIALIZER, StateMetaInfo, _Parser, write_meta_infos
from .layout import FieldCodec
from .metadata import OperatorState, SubtaskState
from .reader import FlinkSavepoint
from .snappy import STREAM_IDENTIFIER, compress_key_group, decompress_key_group, framed_raw_size

KEY_SERIALIZER = "KEY_SERIALIZER"
BROADCAST_MODE = DISTRIBUTION_MODES.index("BROADCAST")
MAX_OPERATOR_STREAM_BYTES = 256 << 20
"""An operator-state stream is read whole (sources keep splits and offsets there, not bulk data);
a larger one is refused rather than read into memory."""
_I32 = struct.Struct(">i")


@dataclass
class OperatorHeader:
    """The header of one subtask's operator-state stream: list states, then broadcast states."""

    version: int
    compressed: bool
    states: list[StateMetaInfo]
    broadcast: list[StateMetaInfo]
    size: int = 0

    def meta(self, name: str) -> StateMetaInfo | None:
        return next((m for m in (*self.states, *self.broadcast) if m.name == name), None)


def parse_operator_header(data: bytes, header_end: int, where: str,
                          registry: SnapshotRegistry | None = None) -> OperatorHeader:
    """Parse ``data[0:header_end]`` as the header; it must end exactly at ``header_end``."""
    try:
        p = _Parser(data, header_end, where, registry, (OPERATOR, BROADCAST), "operator-state header")
        src = p.cur(0)
        version = src.read_int()
        if version != PROXY_VERSION:
            raise FlinkSavepointError(
                f"{where}: operator-state header version {version} is not supported (Flink 1.17+ writes "
                f"{PROXY_VERSION})")
        compressed = src.read_boolean()
        states, src = p.meta_infos(src.position, p.ends.count_then_state)
        broadcast, src = p.meta_infos(src.position, p.ends.header_end)
    except FlinkSavepointError:
        raise
    except StateFormatError as e:
        raise FlinkSavepointError(f"{where}: operator-state header: {e}") from e
    if src.position != header_end:
        raise FlinkSavepointError(f"{where}: the operator-state header ends at offset {src.position} but the first "
                                  f"state's data starts at {header_end}")
    for m, want in [(m, OPERATOR) for m in states] + [(m, BROADCAST) for m in broadcast]:
        if m.backend_type != want:
            raise FlinkSavepointError(f"{where}: operator-state header: state {m.name!r} has backend state type "
                                      f"{m.backend_type} in the {'list' if want == OPERATOR else 'broadcast'} states")
    return OperatorHeader(version, compressed, states, broadcast, header_end)


def write_operator_header(h: OperatorHeader) -> bytes:
    """The header's bytes, as Flink writes them (identical to the parsed bytes when unchanged)."""
    out = DataOutputSerializer()
    out.write_int(h.version)
    out.write_boolean(h.compressed)
    write_meta_infos(out, h.states)
    write_meta_infos(out, h.broadcast)
    return out.get_copy_of_buffer()


@dataclass
class OperatorStatePart:
    """One state of one subtask: its list elements, or its broadcast map's entries, as exact
    (uncompressed) bytes.

    ``entries`` is None for a broadcast state whose key or value serializer statemorph cannot
    delimit (the stream is then carried whole, never written from parts); ``count`` is the list's
    element count (one offset per element) or the broadcast map's entry count."""

    name: str
    mode: str
    meta: StateMetaInfo
    elements: list[bytes] = field(default_factory=list)
    entries: list[tuple[bytes, bytes]] | None = None
    count: int = 0

    @property
    def broadcast(self) -> bool:
        return self.mode == "BROADCAST"


class OperatorStream:
    """One subtask's operator-state stream (read whole: see :data:`MAX_OPERATOR_STREAM_BYTES`)."""

    def __init__(self, data: bytes, handle: OperatorStreamHandle, where: str,
                 registry: SnapshotRegistry | None = None) -> None:
        self.data, self.handle, self.where = data, handle, where
        size = len(data)
        starts = sorted({o for s in handle.states for o in s.offsets})
        if starts and (starts[0] < 0 or starts[-1] >= size):
            raise FlinkSavepointError(f"{where}: operator-state offsets {starts[0]}..{starts[-1]} are outside the "
                                      f"stream of {size} bytes")
        data_start = starts[0] if starts else size
        header_end = data_start
        if size > 4 and data[4] != 0:  # the compression flag: the framed stream's identifier comes first
            header_end = data_start - len(STREAM_IDENTIFIER)
            if header_end < 5 or data[header_end:data_start] != STREAM_IDENTIFIER:
                raise FlinkSavepointError(f"{where}: a compressed operator-state stream has no Snappy stream "
                                          f"identifier before its first state at offset {data_start}")
        self.header = parse_operator_header(data[:header_end], header_end, where, registry)
        self._next = dict(zip(starts, [*starts[1:], size][: len(starts)], strict=True))
        for info in handle.states:
            if self.header.meta(info.name) is None:
                raise FlinkSavepointError(f"{where}: the handle names operator state {info.name!r}, which the "
                                          f"stream's header does not register")

    def parts(self) -> list[OperatorStatePart]:
        """Every state the handle names, in the handle's order (Flink's map order)."""
        return [self._part(info) for info in self.handle.states]

    def part(self, name: str) -> OperatorStatePart | None:
        info = next((s for s in self.handle.states if s.name == name), None)
        return self._part(info) if info is not None else None

    def _bytes(self, a: int, what: str) -> bytes:
        """The partition starting at ``a`` (unframed when the stream is compressed)."""
        raw = self.data[a:self._next[a]]
        if not self.header.compressed:
            return raw
        framed = STREAM_IDENTIFIER + raw
        n = framed_raw_size(framed, what)
        if n > MAX_OPERATOR_STREAM_BYTES:
            raise FlinkSavepointError(f"{what}: a partition of {n} bytes uncompressed exceeds "
                                      f"{MAX_OPERATOR_STREAM_BYTES}")
        return decompress_key_group(framed, what)

    def _part(self, info: OperatorStateInfo) -> OperatorStatePart:
        meta = self.header.meta(info.name)
        assert meta is not None  # checked in __init__
        mode = DISTRIBUTION_MODES[info.mode]
        what = f"{self.where} operator state {info.name!r}"
        if (meta.backend_type == BROADCAST) != (info.mode == BROADCAST_MODE):
            raise FlinkSavepointError(f"{what}: the handle's mode {mode} does not match the header's "
                                      f"{'broadcast' if meta.backend_type == BROADCAST else 'list'} state")
        if any(a >= b for a, b in zip(info.offsets, info.offsets[1:], strict=False)):
            raise FlinkSavepointError(f"{what}: offsets are not strictly increasing")
        if not info.offsets:
            return OperatorStatePart(info.name, mode, meta)
        if meta.backend_type != BROADCAST:
            elements = [self._bytes(o, what) for o in info.offsets]
            return OperatorStatePart(info.name, mode, meta, elements, count=len(elements))
        if len(info.offsets) != 1:
            raise FlinkSavepointError(f"{what}: a broadcast state has one partition, found {len(info.offsets)} "
                                      f"offsets")
        buf = self._bytes(info.offsets[0], what)
        if len(buf) < 4:
            raise FlinkSavepointError(f"{what}: partition of {len(buf)} bytes at offset {info.offsets[0]} has no "
                                      f"entry count")
        n = _I32.unpack_from(buf, 0)[0]
        if not 0 <= n <= len(buf) - 4:
            raise FlinkSavepointError(f"{what}: entry count {n} at offset {info.offsets[0]} does not fit its "
                                      f"{len(buf)} bytes")
        return OperatorStatePart(info.name, mode, meta, [], _entries(meta, buf, n, what), n)


def _entries(meta: StateMetaInfo, buf: bytes, n: int, what: str) -> list[tuple[bytes, bytes]] | None:
    """A broadcast partition's ``n`` entries (after its count), or None when a serializer is unknown."""
    keys = FieldCodec(meta.serializer(KEY_SERIALIZER), f"{what} key")
    values = FieldCodec(meta.serializer(VALUE_SERIALIZER), f"{what} value")
    if not (keys.known and values.known):
        return None
    out = []
    pos, end = 4, len(buf)
    for _ in range(n):
        k = keys.end(buf, pos, end)
        v = values.end(buf, k, end)
        out.append((buf[pos:k], buf[k:v]))
        pos = v
    if pos != end:
        raise FlinkSavepointError(f"{what}: {n} entries end at byte {pos} of the partition, which has {end}")
    return out


def write_operator_stream(header: OperatorHeader,
                          parts: list[OperatorStatePart]) -> tuple[bytes, list[OperatorStateInfo]]:
    """A stream holding ``parts`` (list states first, then broadcast states, as Flink writes them)
    under ``header``; returns its bytes and the handle's state infos with the new offsets."""
    out = DataOutputSerializer()
    out.write(write_operator_header(header))
    if header.compressed:
        out.write(STREAM_IDENTIFIER)

    def partition(b: bytes) -> None:
        out.write(compress_key_group(b)[len(STREAM_IDENTIFIER):] if header.compressed else b)

    infos = []
    order = [p for p in parts if not p.broadcast] + [p for p in parts if p.broadcast]
    for p in order:
        offsets = []
        if p.broadcast:
            if p.entries is None:
                raise FlinkSavepointError(f"operator state {p.name!r}: its entries cannot be delimited, so it "
                                          f"cannot be rewritten")
            offsets.append(len(out))
            body = DataOutputSerializer()
            body.write_int(len(p.entries))
            for k, v in p.entries:
                body.write(k)
                body.write(v)
            partition(body.get_copy_of_buffer())
        else:
            for e in p.elements:
                offsets.append(len(out))
                partition(e)
        infos.append(OperatorStateInfo(p.name, DISTRIBUTION_MODES.index(p.mode), offsets))
    by_name = {i.name: i for i in infos}
    return out.get_copy_of_buffer(), [by_name[p.name] for p in parts]


__all__ = ["MAX_OPERATOR_STREAM_BYTES", "OperatorHeader", "OperatorStatePart", "OperatorStream",
           "operator_streams", "parse_operator_header", "write_operator_header",
           "write_operator_stream"]


def operator_streams(savepoint: FlinkSavepoint, op: OperatorState) -> Iterator[tuple[SubtaskState, OperatorStream]]:
    """Each subtask's managed operator-state stream of ``op``, read one after the other through the
    savepoint directory's checks (every path inside the directory, sizes before reads)."""
    for st in op.subtasks or []:
        handle = st.managed_operator
        if handle is None:
            continue
        where = f"{savepoint.path}: {op.label()} subtask {st.index} operator state"
        with savepoint.directory.open_stream(handle.delegate, where) as source:
            if source.size > MAX_OPERATOR_STREAM_BYTES:
                raise FlinkSavepointError(f"{where}: stream of {source.size} bytes exceeds "
                                          f"{MAX_OPERATOR_STREAM_BYTES}")
            data = source.read_at(0, source.size, "operator-state stream")
        yield st, OperatorStream(data, handle, where, savepoint.registry)
