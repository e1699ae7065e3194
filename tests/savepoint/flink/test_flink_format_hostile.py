"""Hostile and damaged savepoints: every failure is one typed line (FlinkSavepointError and its
subclasses), found before anything large is allocated, and nothing outside the savepoint
directory is ever opened."""

from __future__ import annotations

import copy
import os
import random
import shutil
import stat
import struct
from pathlib import Path

import numpy as np
import pytest
from savepoint.flink.flink_cases import SAVEPOINTS
from savepoint.flink.format_helpers import cases

from statemorph.errors import FlinkSavepointError, NotCanonicalSavepointError, SavepointPathError, UnsupportedStateError
from statemorph.savepoint.files import SafeFile, open_regular
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    CheckpointMetadata,
    FileHandle,
    FlinkSavepoint,
    RelativeFileHandle,
    parse_metadata,
    serialize_metadata,
)
from statemorph.savepoint.flink.keyed_blocks import key_group_extents
from statemorph.savepoint.flink.snappy import STREAM_IDENTIFIER, framed_raw_size, unframe_into

pytestmark = pytest.mark.skipif(not cases(), reason="no committed real-Flink savepoints")
INLINE = SAVEPOINTS / "kinds-hashmap-p1" / "savepoint"  # keyed state inline in _metadata
COMPRESSED_INLINE = SAVEPOINTS / "kinds-rocksdb-p2-mp256-string" / "savepoint"
FILES = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256" / "savepoint"


def _read_everything(path: Path) -> None:
    sp = FlinkSavepoint(path)
    info = sp.inspect()
    for op in info.operators:
        for st in op.states:
            for _ in sp.iter_state_batches(op.uid or op.uid_hash, st.name):
                pass


def _expect(path: Path, cls: type[Exception] = FlinkSavepointError, match: str | None = None) -> str:
    with pytest.raises(cls, match=match) as info:
        _read_everything(path)
    message = str(info.value)
    assert "\n" not in message and message
    return message


def _with_metadata(tmp: Path, source: Path, data: bytes, name: str = "sp") -> Path:
    d = tmp / name
    shutil.copytree(source, d)
    (d / "_metadata").write_bytes(data)
    return d


def _meta(source: Path) -> CheckpointMetadata:
    return parse_metadata((source / "_metadata").read_bytes())


def _keyed(meta: CheckpointMetadata, op: int = 1, subtask: int = 0):  # type: ignore[no-untyped-def]
    st = meta.operators[op].subtasks[subtask]  # type: ignore[index]
    assert st.managed_keyed is not None
    return st.managed_keyed


def test_truncated_metadata_at_every_length_before_the_trailer(tmp_path: Path) -> None:
    data = (INLINE / "_metadata").read_bytes()
    body_end = len(data) - len(_meta(INLINE).trailer)
    cuts = sorted({*range(0, 64), *range(64, body_end, max(1, body_end // 300)), body_end - 1})
    d = _with_metadata(tmp_path, INLINE, b"")
    for cut in cuts:
        (d / "_metadata").write_bytes(data[:cut])
        _expect(d)


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        (lambda b: b"\x00\x00\x00\x00" + b[4:], "magic number 0x00000000 is not Flink's"),
        (lambda b: b[:4] + struct.pack(">i", 2) + b[8:], "metadata version 2 is not supported"),
        (lambda b: b[:4] + struct.pack(">i", 7) + b[8:], "metadata version 7 is not supported"),
        (lambda b: b[:4] + struct.pack(">i", 99) + b[8:], "metadata version 99"),
        (lambda b: b[:8] + struct.pack(">q", -5) + b[16:], "negative checkpoint id"),
        (lambda b: b[:16] + struct.pack(">i", 0x7FFFFFFF) + b[20:], "master states"),
        (lambda b: b[:20] + struct.pack(">i", 0x7FFFFFFF) + b[24:], "operator states"),
    ],
)
def test_bad_headers(tmp_path: Path, patch, match: str) -> None:  # type: ignore[no-untyped-def]
    data = (INLINE / "_metadata").read_bytes()
    _expect(_with_metadata(tmp_path, INLINE, patch(data)), match=match)


def test_hostile_key_group_count_and_inline_length(tmp_path: Path) -> None:
    data = (INLINE / "_metadata").read_bytes()
    handle = b"\x07\x00\x00\x00\x00\x00\x00\x00\x80"  # KeyGroupsSavepointStateHandle 0..127
    assert data.count(handle) == 1
    hostile = data.replace(handle, b"\x07\x00\x00\x00\x00\x7f\xff\xff\xff")
    _expect(_with_metadata(tmp_path, INLINE, hostile, "a"), match="key-group offsets")
    meta = _meta(INLINE)
    delegate = _keyed(meta).delegate
    assert isinstance(delegate, ByteStreamHandle)
    name = delegate.name.encode()
    at = data.index(len(name).to_bytes(2, "big") + name) + 2 + len(name)
    hostile = data[:at] + struct.pack(">i", 0x7FFFFFF0) + data[at + 4 :]
    _expect(_with_metadata(tmp_path, INLINE, hostile, "b"), match="inline state bytes")
    hostile = data[:at] + struct.pack(">i", -1) + data[at + 4 :]
    _expect(_with_metadata(tmp_path, INLINE, hostile, "c"), match="negative length")


@pytest.mark.parametrize(("code", "what"), [(5, "incremental RocksDB"), (11, "incremental RocksDB"),
                                            (8, "changelog"), (14, "changelog"), (15, "file-merging")])
def test_native_savepoints_and_checkpoints_are_refused(tmp_path: Path, code: int, what: str) -> None:
    data = (INLINE / "_metadata").read_bytes()
    handle = b"\x07\x00\x00\x00\x00\x00\x00\x00\x80"
    hostile = data.replace(handle, bytes((code,)) + handle[1:])
    msg = _expect(_with_metadata(tmp_path, INLINE, hostile), NotCanonicalSavepointError, match=what)
    assert "canonical" in msg


def test_channel_state_is_refused(tmp_path: Path) -> None:
    data = (INLINE / "_metadata").read_bytes()
    end = len(data) - len(_meta(INLINE).trailer)
    assert data[end - 8 : end] == bytes(8)  # the last subtask's input / output channel counts
    hostile = data[: end - 8] + struct.pack(">i", 1) + data[end - 4 :]
    _expect(_with_metadata(tmp_path, INLINE, hostile), NotCanonicalSavepointError, match="channel state")


def _with_delegate(tmp: Path, delegate: object, name: str = "sp") -> Path:
    meta = _meta(FILES)
    _keyed(meta).delegate = delegate
    return _with_metadata(tmp, FILES, serialize_metadata(meta), name)


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../escape", "", ".", "a//b", "..\\x"])
def test_relative_paths_leaving_the_directory(tmp_path: Path, path: str) -> None:
    (tmp_path / "escape").write_bytes(b"x" * 100)
    d = _with_delegate(tmp_path, RelativeFileHandle(path, 10))
    _expect(d, SavepointPathError)


def test_absolute_paths_are_taken_by_name_inside_the_directory(tmp_path: Path) -> None:
    meta = _meta(FILES)
    rel = _keyed(meta).delegate
    assert isinstance(rel, RelativeFileHandle)
    # the original absolute location no longer exists; the file next to _metadata is read
    d = _with_delegate(tmp_path, FileHandle(f"file:/nowhere/savepoint-x/{rel.relative_path}", rel.size), "moved")
    _read_everything(d)
    outside = tmp_path / "passwd"
    outside.write_bytes(b"secret")
    d = _with_delegate(tmp_path, FileHandle(str(outside), 6), "abs")
    _expect(d, match="passwd: file listed in _metadata is missing")


def test_symlink_fifo_and_directory_are_not_opened(tmp_path: Path) -> None:
    meta = _meta(FILES)
    rel = _keyed(meta).delegate
    assert isinstance(rel, RelativeFileHandle)
    outside = tmp_path / "outside"
    shutil.copy(FILES / rel.relative_path, outside)
    d = _with_delegate(tmp_path, rel, "link")
    (d / rel.relative_path).unlink()
    os.symlink(outside, d / rel.relative_path)
    _expect(d, SavepointPathError, match="leads out of the savepoint directory through a symlink")
    d = _with_delegate(tmp_path, rel, "fifo")
    (d / rel.relative_path).unlink()
    os.mkfifo(d / rel.relative_path)
    _expect(d, SavepointPathError, match="not a regular file")
    d = _with_delegate(tmp_path, rel, "dir")
    (d / rel.relative_path).unlink()
    (d / rel.relative_path).mkdir()
    _expect(d, SavepointPathError)
    d = _with_delegate(tmp_path, rel, "gone")
    (d / rel.relative_path).unlink()
    _expect(d, match="is missing")
    (tmp_path / "fifo-meta").mkdir()
    os.mkfifo(tmp_path / "fifo-meta" / "_metadata")
    with pytest.raises(SavepointPathError, match="not a regular file"):
        FlinkSavepoint(tmp_path / "fifo-meta")


def test_truncated_state_file(tmp_path: Path) -> None:
    meta = _meta(FILES)
    rel = _keyed(meta).delegate
    assert isinstance(rel, RelativeFileHandle)
    d = _with_delegate(tmp_path, rel)
    f = d / rel.relative_path
    f.write_bytes(f.read_bytes()[:-10])
    _expect(d, match=r"size \d+ != \d+ recorded in _metadata \(truncated")


def test_a_state_file_that_shrinks_while_slices_are_read_into_place(tmp_path: Path) -> None:
    """A key group read straight into its slice (``SafeFile.read_range_into``) gets the same
    checks as a read into bytes: a range past the file is refused before reading, a file that
    shrank under the reader is a typed error, never a half-filled buffer taken for data."""
    path = tmp_path / "state"
    path.write_bytes(bytes(range(256)) * 4)
    f = open_regular(path, "state", size=1024, damaged=FlinkSavepointError)
    out = np.zeros(100, np.uint8)
    f.read_range_into(10, out.data)
    assert out.tobytes() == (bytes(range(256)) * 4)[10:110]
    with pytest.raises(FlinkSavepointError, match=r"needs bytes 1000\.\.1100 but the file has 1024"):
        f.read_range_into(1000, out.data)
    os.truncate(path, 500)
    with pytest.raises(FlinkSavepointError, match="shrank while being read"):
        f.read_range_into(450, out.data)
    f.close()


def test_state_file_longer_than_metadata_says_is_refused_before_reading(tmp_path: Path) -> None:
    """Flink writes one file per handle, of exactly the recorded size: bytes beyond it mean the
    file was replaced or appended to."""
    meta = _meta(FILES)
    rel = _keyed(meta).delegate
    assert isinstance(rel, RelativeFileHandle)
    d = _with_delegate(tmp_path, rel)
    with open(d / rel.relative_path, "ab") as f:
        f.write(b"\0" * 10)
    message = _expect(d, match=rf"size {rel.size + 10} != {rel.size} recorded in _metadata")
    assert str(d / rel.relative_path) in message


def test_devices_and_symlinks_to_devices_are_not_opened(tmp_path: Path) -> None:
    """A character device where a state file should be (a copy of /dev/zero's node), and a
    symlink to /dev/zero: refused by what they are, before anything is opened."""
    meta = _meta(FILES)
    rel = _keyed(meta).delegate
    assert isinstance(rel, RelativeFileHandle)
    d = _with_delegate(tmp_path, rel, "link")
    (d / rel.relative_path).unlink()
    os.symlink("/dev/zero", d / rel.relative_path)
    _expect(d, SavepointPathError, match="leads out of the savepoint directory")
    d = _with_delegate(tmp_path, rel, "device")
    (d / rel.relative_path).unlink()
    try:
        os.mknod(d / rel.relative_path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    _expect(d, SavepointPathError, match="is a device, not a regular file")
    os.symlink("/dev/zero", tmp_path / "zero-meta")
    (tmp_path / "meta-link").mkdir()
    os.symlink(tmp_path / "zero-meta", tmp_path / "meta-link" / "_metadata")
    with pytest.raises(SavepointPathError, match="_metadata: leads out of the savepoint directory"):
        FlinkSavepoint(tmp_path / "meta-link")


def _inline_variant(tmp: Path, source: Path, mutate, name: str = "sp") -> Path:  # type: ignore[no-untyped-def]
    meta = copy.deepcopy(_meta(source))
    handle = _keyed(meta)
    assert isinstance(handle.delegate, ByteStreamHandle)
    mutate(handle)
    return _with_metadata(tmp, source, serialize_metadata(meta), name)


def _first(handle) -> int:  # type: ignore[no-untyped-def]
    return next(i for i, o in enumerate(handle.offsets) if o)


def test_hostile_offsets_and_blocks(tmp_path: Path) -> None:
    def beyond(h) -> None:  # type: ignore[no-untyped-def]
        h.offsets[-1] = len(h.delegate.data) + 100

    def decreasing(h) -> None:  # type: ignore[no-untyped-def]
        present = [i for i, o in enumerate(h.offsets) if o]
        a, b = present[1], present[2]
        h.offsets[a], h.offsets[b] = h.offsets[b], h.offsets[a]

    def patch_at(delta: int, value: bytes):  # type: ignore[no-untyped-def]
        def mutate(h) -> None:  # type: ignore[no-untyped-def]
            at = h.offsets[_first(h)] + delta
            data = h.delegate.data
            h.delegate.data = data[:at] + value + data[at + len(value) :]
        return mutate

    def header_version(h) -> None:  # type: ignore[no-untyped-def]
        h.delegate.data = struct.pack(">i", 5) + h.delegate.data[4:]

    def truncated(h) -> None:  # type: ignore[no-untyped-def]
        h.delegate.data = h.delegate.data[:-3]

    def header_only(h) -> None:  # type: ignore[no-untyped-def]
        h.delegate.data = h.delegate.data[:100]
        h.offsets = [0] * len(h.offsets)

    checks = [
        (beyond, "outside the stream"),
        (decreasing, "not after"),
        (patch_at(0, b"\x70\x00"), "state id 28672"),
        (patch_at(2, b"\x7f\xff\xff\xff"), "key length 2147483647"),
        (patch_at(2, b"\x00\x00\x00\x00"), "key length 0"),
        (header_version, "keyed-state header version 5"),
        (truncated, "FFFF|end mark|does not fit|truncated|runs past"),
        (header_only, "truncated|keyed-state header"),
    ]
    for i, (mutate, match) in enumerate(checks):
        _expect(_inline_variant(tmp_path, INLINE, mutate, f"v{i}"), match=match)


def test_corrupt_snappy_key_group(tmp_path: Path) -> None:
    def corrupt(h) -> None:  # type: ignore[no-untyped-def]
        at = h.offsets[_first(h)]
        data = bytearray(h.delegate.data)
        data[at + 20] ^= 0xFF
        h.delegate.data = bytes(data)

    def no_identifier(h) -> None:  # type: ignore[no-untyped-def]
        at = h.offsets[_first(h)]
        data = bytearray(h.delegate.data)
        data[at] = 0x00
        h.delegate.data = bytes(data)

    _expect(_inline_variant(tmp_path, COMPRESSED_INLINE, corrupt, "a"), match="Snappy|key group")
    _expect(_inline_variant(tmp_path, COMPRESSED_INLINE, no_identifier, "b"), match="stream identifier")


def _chunk(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + (len(payload) + 4).to_bytes(3, "little") + bytes(4) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_declared_snappy_sizes_never_size_an_allocation() -> None:
    """The output of a compressed key group is allocated from the sizes its chunks declare, so a
    size the format cannot hold is refused before anything is allocated: more than 64 KiB in a
    chunk, more than Snappy's largest expansion (64 bytes per 3) of the chunk's bytes, a chunk
    header cut off or a chunk running past the end. A size that fits but lies is caught by the
    codec when it decompresses."""
    refused = [
        _chunk(0x00, _varint(1 << 30) + b"\x00" * 64),  # a gigabyte from one chunk
        _chunk(0x00, _varint(65_537) + b"\x00" * 4000),  # past a chunk's 64 KiB
        _chunk(0x00, _varint(1000) + b"\x00" * 40),  # 1000 bytes from 41: more than Snappy expands
        _chunk(0x01, bytes(65_537)),  # a stored chunk past 64 KiB
        _chunk(0x00, b""),  # no length at all
        _chunk(0x00, b"\xff" * 6),  # a length that is no varint
        _chunk(0x00, _varint(10) + b"\x00" * 9)[:-3],  # runs past the end
        b"\x00\x00",  # a header cut off
    ]
    for body in refused:
        with pytest.raises(FlinkSavepointError, match="corrupt Snappy-framed key group"):
            framed_raw_size(STREAM_IDENTIFIER + body, "t")
    lying = STREAM_IDENTIFIER + _chunk(0x00, _varint(30) + b"\x00" * 9)  # fits the bounds, wrong bytes and CRC
    n = framed_raw_size(lying, "t")
    assert n == 30
    with pytest.raises(FlinkSavepointError, match="corrupt Snappy-framed key group"):
        unframe_into(lying, np.zeros(n, np.uint8), "t")
    with pytest.raises(FlinkSavepointError, match="stream identifier"):
        framed_raw_size(_chunk(0x01, b"abc"), "t")


def test_unregistered_snapshot_classes_are_carried_as_bytes(tmp_path: Path) -> None:
    """A snapshot class statemorph has never heard of (same length, so the rest stays valid) is
    delimited from the header's structure and kept verbatim; the entries still read."""
    from statemorph.savepoint.flink import parse_keyed_header, write_keyed_header

    old = b"org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
    new = b"com.example.unknown.UserSerializer$UserSerializerSnapshotXXXXXXXXXXXXXXXXXXXXXXX"
    assert len(old) == len(new)

    def rename(h) -> None:  # type: ignore[no-untyped-def]
        h.delegate.data = h.delegate.data.replace(old, new)

    d = _inline_variant(tmp_path, INLINE, rename)
    sp = FlinkSavepoint(d)
    op = sp.operator("kinds")
    _, stream = next(iter(sp.keyed_streams(op)))
    head = stream.source.read_at(0, stream.header_end, "h")
    assert write_keyed_header(parse_keyed_header(head, stream.header_end, "t")) == head
    _, count = stream.header.state("count")
    value, _ = count.value_snapshot_unwrapped()
    assert value is not None and value.parsed is None and value.class_name == new.decode()
    rows = [r for b in sp.iter_state_batches("kinds", "count") for r in b.to_pylist()]
    assert len(rows) == 12 and all(len(r["value"]) == 8 for r in rows)
    # a list of an unregistered element type cannot be split into elements: each entry is read whole
    whole = [r for b in sp.iter_state_batches("kinds", "recent") for r in b.to_pylist()]
    assert len(whole) == 12 and set(whole[0]) == {"key_group", "key", "namespace", "value_bytes"}
    assert all(len(r["value_bytes"]) == 3 * 8 + 2 for r in whole)  # 3 longs joined by 2 commas
    from statemorph import serializers
    from statemorph.savepoint.flink import rewrite
    from statemorph.typeutils import write_serializer_snapshot

    env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())
    with pytest.raises(UnsupportedStateError, match="operator 'kinds' state 'recent'.*UserSerializer.*not registered"):
        rewrite(d, tmp_path / "out", {("kinds", "recent"): (env, lambda a: a)})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", [INLINE, COMPRESSED_INLINE], ids=["plain", "snappy"])
def test_random_corruption_is_a_typed_error_or_reads(tmp_path: Path, source: Path) -> None:
    data = (source / "_metadata").read_bytes()
    rng = random.Random(20261125)
    d = _with_metadata(tmp_path, source, data)
    body_end = len(data) - len(_meta(source).trailer)
    for _ in range(40):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(0, body_end)] = rng.randrange(256)
        (d / "_metadata").write_bytes(bytes(buf))
        try:
            _read_everything(d)
        except (FlinkSavepointError, UnsupportedStateError) as e:  # a flipped class name is an unknown class
            assert "\n" not in str(e)


def test_state_files_are_read_by_key_group_never_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of a keyed-state file is one bounded range (the header, or one key group's
    extent), checked against the file before it is made; no read takes the whole file."""
    reads: list[tuple[str, int, int]] = []
    real = SafeFile.read_range

    def spy(self: SafeFile, offset: int, n: int, what: str = "bytes") -> bytes:
        reads.append((self.label, n, self.size))
        return real(self, offset, n, what)

    monkeypatch.setattr(SafeFile, "read_range", spy)
    _read_everything(FILES)
    assert reads
    sp = FlinkSavepoint(FILES)
    for _, stream in sp.keyed_streams(sp.operators[1]):
        header_end, extents = key_group_extents(stream.handle, stream.source.size, "t")
        assert len(extents) > 1
        largest = max([header_end, *(e.end - e.offset for e in extents)])
        mine = [n for label, n, _ in reads if label.endswith(stream.handle.delegate.relative_path)]
        assert mine and max(mine) <= largest < stream.source.size
