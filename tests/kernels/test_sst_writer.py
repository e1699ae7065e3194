"""The SST writing kernels (``kernels/_native/sstwrite.pyx`` and its Python twin
``kernels/sstwrite_py.py``) and the files :mod:`statemorph.savepoint.flink.sst_writer` builds with
them: both tiers write the same bytes; without compression the file is RocksDB's own
``SstFileWriter`` file byte for byte (but for its fresh session identity), with Snappy its
entries and properties are; RocksDB ingests every file and reads back exactly the entries, and so
do the SST reading kernels; table formats the writer does not write are refused with the reason."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import cramjam
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph.kernels import abi, tier
from statemorph.savepoint.flink import sst_writer
from statemorph.savepoint.flink.sst import FOOTER, latest_options, table_tail
from statemorph.savepoint.flink.sst_writer import SstFileBuilder, SstWriteUnsupported, sst_format

rd = pytest.importorskip("rocksdict")
PY = tier("python")
NATIVE = tier("native")
SESSION = "STATEMORPHTESTSESSIO"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"ab", b"abcd", b"\x00\x01\x02\x03", b"x", b"flink-"]), max_size=400).map(b"".join)
       | st.binary(max_size=3000))
def test_snappy_tiers_agree_and_decompress(data: bytes) -> None:
    outs = []
    for k in (PY, NATIVE):
        out = np.empty(sst_writer.snappy_bound(len(data)), np.uint8)
        n = k.snappy_compress(np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8), len(data), out)
        outs.append(bytes(out[:n]))
    assert outs[0] == outs[1]
    assert bytes(cramjam.snappy.decompress_raw(outs[0])) == data


def test_snappy_refuses_a_short_output() -> None:
    for k in (PY, NATIVE):
        assert k.snappy_compress(np.zeros(100, np.uint8), 100, np.empty(50, np.uint8)) == -1


def _db(path: Path, version: int = 5, checksum: str = "xxh3", compression: str = "snappy", block_size: int = 4096,
        restart: int = 16, bloom: bool = False) -> Any:
    shutil.rmtree(path, ignore_errors=True)
    o = rd.Options(raw_mode=True)
    o.create_if_missing(True)
    o.set_disable_auto_compactions(True)
    t = rd.BlockBasedOptions()
    t.set_format_version(version)
    t.set_block_size(block_size)
    t.set_block_restart_interval(restart)
    t.set_checksum_type(getattr(rd.ChecksumType, checksum)())
    if bloom:
        t.set_bloom_filter(10, False)
    o.set_block_based_table_factory(t)
    o.set_compression_type(getattr(rd.DBCompressionType, compression)())
    return rd.Rdict(str(path), o), o


def _rocksdb_file(o: Any, path: Path, entries: list[tuple[bytes, bytes]]) -> bytes:
    w = rd.SstFileWriter(o)
    w.open(str(path))
    for k, v in entries:
        w[k] = v
    w.finish()
    return path.read_bytes()


def _flat(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(items) + 1, np.int64)
    off[1:] = np.cumsum([len(x) for x in items])
    return off, np.frombuffer(b"".join(items) or b"\0", np.uint8)


def _build(k: Any, fmt: sst_writer.SstFormat, directory: Path, entries: list[tuple[bytes, bytes]], batch: int,
           target: int = 1 << 30) -> list[Path]:
    directory.mkdir()
    ko, kd = _flat([e[0] for e in entries])
    vo, vd = _flat([e[1] for e in entries])
    b = SstFileBuilder(fmt, directory, "t", target, k)
    for s in range(0, len(entries), batch):
        e = min(len(entries), s + batch)
        b.add(ko[s:e + 1], kd, vo[s:e + 1], vd, e - s)
    return b.finish()


def _props(data: bytes) -> dict[bytes, bytes]:
    return table_tail(memoryview(data), len(data), "test")[3]


def _decoded(data: bytes, k: Any) -> list[tuple[bytes, bytes]]:
    """The entries of a file, read by the SST reading kernels (index block, then every data block)."""
    size = len(data)
    checksum, (ipos, ilen), _, _ = table_tail(memoryview(data), size, "test")
    out = np.empty(1 << 20, np.uint8)
    status, n = k.sst_block(data, ipos, ilen, checksum, out)
    assert status == abi.SST_OK
    pos, lens = np.zeros(n, np.int64), np.zeros(n, np.int64)
    koff, kdata = np.zeros(n + 1, np.int64), np.empty(2 * n + 64, np.uint8)
    status, nb = k.sst_index(out, n, True, pos, lens, koff, kdata)
    assert status == abi.SST_OK
    m = 1 << 16
    ko, vo = np.zeros(m + 1, np.int64), np.zeros(m + 1, np.int64)
    kd, vd = np.empty(1 << 22, np.uint8), np.empty(1 << 22, np.uint8)
    status, _, got = k.sst_decode(data, pos[:nb].copy(), lens[:nb].copy(), 0, nb, checksum, np.empty(1 << 20, np.uint8),
                                  ko, kd, vo, vd, 0)
    assert status == abi.SST_OK
    keys, values = k.sst_lists(ko, kd, vo, vd, got)
    assert all(key[-8:] == (1).to_bytes(8, "little") for key in keys)  # Put, sequence number 0
    return [(key[:-8], v) for key, v in zip(keys, values, strict=True)]


entries_st = st.dictionaries(st.binary(min_size=1, max_size=24), st.binary(max_size=300), max_size=300).map(
    lambda d: sorted(d.items()))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(entries_st, st.sampled_from(["crc32c", "xxh3"]), st.sampled_from(["snappy", "none"]),
       st.sampled_from([64, 256, 4096]), st.sampled_from([1, 2, 16]), st.integers(1, 64), st.sampled_from([4, 5]))
def test_the_tiers_write_rocksdbs_file_and_rocksdb_reads_it_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: list[tuple[bytes, bytes]], checksum: str,
        compression: str, block_size: int, restart: int, batch: int, version: int) -> None:
    monkeypatch.setattr(sst_writer, "session_identity", lambda: SESSION)
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one directory an example
    db, o = _db(tmp_path / "db", version, checksum, compression, block_size, restart)
    try:
        template = _rocksdb_file(o, tmp_path / "template.sst", [(b"k", b"v")])
        fmt = sst_format(latest_options(tmp_path / "db"), "default", tmp_path / "template.sst")
        assert template
        files = {t.name: _build(t, fmt, tmp_path / t.name, entries, batch) for t in (PY, NATIVE)}
        assert [p.read_bytes() for p in files["python"]] == [p.read_bytes() for p in files["native"]]
        if not entries:
            assert files["native"] == []
            return
        (path,) = files["native"]
        ours = path.read_bytes()
        theirs = _rocksdb_file(o, tmp_path / "rocksdb.sst", entries)
        mine, ref = _props(ours), _props(theirs)
        assert ref.pop(b"rocksdb.creating.session.identity") != SESSION.encode()
        assert mine.pop(b"rocksdb.creating.session.identity") == SESSION.encode()
        if compression == "none":  # no Snappy in the way: every byte is RocksDB's but the properties' session
            assert mine == ref
            props_at = table_tail(memoryview(ours), len(ours), "test")[2][b"rocksdb.properties"][0]
            assert len(ours) == len(theirs) and ours[:props_at] == theirs[:props_at]
        for same in (b"rocksdb.num.entries", b"rocksdb.raw.key.size", b"rocksdb.raw.value.size",
                     b"rocksdb.num.data.blocks", b"rocksdb.external_sst_file.version", b"rocksdb.format.version"):
            assert mine[same] == ref[same], same
        for k in (PY, NATIVE):
            assert _decoded(ours, k) == entries
        ingest = rd.IngestExternalFileOptions()
        db.ingest_external_file([str(path)], ingest)
        assert list(db.items()) == entries
    finally:
        db.close()


def test_several_files_at_the_target_size_ingest_together(tmp_path: Path) -> None:
    db, o = _db(tmp_path / "db")
    try:
        _rocksdb_file(o, tmp_path / "template.sst", [(b"k", b"v")])
        fmt = sst_format(latest_options(tmp_path / "db"), "default", tmp_path / "template.sst")
        entries = [(i.to_bytes(4, "big"), b"value %d " % i * (i % 7)) for i in range(20000)]
        paths = _build(NATIVE, fmt, tmp_path / "out", entries, 3000, target=100_000)
        assert len(paths) == 3 and all(p.stat().st_size > FOOTER for p in paths)
        db.ingest_external_file([str(p) for p in paths], rd.IngestExternalFileOptions())
        assert list(db.items()) == entries
    finally:
        db.close()


@pytest.mark.parametrize(("kw", "words"), [
    ({"version": 6}, "format_version 6"),
    ({"compression": "lz4"}, "compression LZ4"),
    ({"bloom": True}, "filter_policy"),
])
def test_formats_it_does_not_write_are_refused_with_the_reason(tmp_path: Path, kw: dict[str, Any],
                                                               words: str) -> None:
    db, o = _db(tmp_path / "db", **kw)
    try:
        _rocksdb_file(o, tmp_path / "template.sst", [(b"k", b"v")])
        with pytest.raises(SstWriteUnsupported, match=words):
            sst_format(latest_options(tmp_path / "db"), "default", tmp_path / "template.sst")
    finally:
        db.close()


def test_sst_data_checks_offsets() -> None:
    state = np.zeros(abi.STATE_SIZE, np.int64)
    for koff in ([0, 5], [2, 1]):  # past the 2 key bytes; backwards
        for k in (PY, NATIVE):
            status, nxt, _ = k.sst_data(np.array(koff, np.int64), np.zeros(2, np.uint8), np.array([0, 0], np.int64),
                                        np.zeros(1, np.uint8), 0, 1, True, 1, 4096, 16, 10, 1, 896, 4, state,
                                        np.empty(8192, np.uint8), np.empty(1 << 16, np.uint8),
                                        np.empty(1 << 12, np.uint8), np.zeros(16, np.int64))
            assert (status, nxt) == (abi.SST_TRUNCATED, 0)


def test_reframed_blocks_are_the_same_blocks_in_both_tiers(tmp_path: Path) -> None:
    """``sst_reframe`` (the benchmarks' floor: read, check, decompress, compress, write every
    block) gives the same bytes in both tiers, and each block read back is the block read."""
    db, o = _db(tmp_path / "db", block_size=256)
    try:
        entries = [(i.to_bytes(4, "big"), b"value %d " % i * (i % 9)) for i in range(3000)]
        data = _rocksdb_file(o, tmp_path / "f.sst", entries)
    finally:
        db.close()
    checksum, (ipos, ilen), _, _ = table_tail(memoryview(data), len(data), "test")
    idx = np.empty(1 << 20, np.uint8)
    status, n = NATIVE.sst_block(data, ipos, ilen, checksum, idx)
    pos, lens = np.zeros(n, np.int64), np.zeros(n, np.int64)
    status, nb = NATIVE.sst_index(idx, n, True, pos, lens, np.zeros(n + 1, np.int64), np.empty(2 * n + 64, np.uint8))
    assert status == abi.SST_OK and nb > 20
    outs = {}
    for k in (PY, NATIVE):
        out, got, i = np.empty(4096, np.uint8), bytearray(), 0
        scratch = np.empty(64, np.uint8)
        while i < nb:
            status, i2, length, need = k.sst_reframe(data, pos[:nb], lens[:nb], i, nb, checksum, 1, 896, scratch, out)
            got += out[:length].tobytes()
            if status == abi.SST_CAPACITY:
                scratch = np.empty(max(need, len(scratch)), np.uint8)
                out = np.empty(max(len(out), 2 * need), np.uint8)
            else:
                assert status == abi.SST_OK
            i = i2
        outs[k.name] = bytes(got)
    assert outs["python"] == outs["native"]
    new, at = outs["native"], 0
    for b in range(nb):
        want, mine = np.empty(1 << 16, np.uint8), np.empty(1 << 16, np.uint8)
        _, wn = NATIVE.sst_block(data, int(pos[b]), int(lens[b]), checksum, want)
        size = next(s for s in range(len(new) - at) if NATIVE.sst_block(new, at, s, checksum, mine)[0] == abi.SST_OK)
        _, mn = NATIVE.sst_block(new, at, size, checksum, mine)
        assert mine[:mn].tobytes() == want[:wn].tobytes()
        at += size + 5
    assert at == len(new)


def test_batches_hold_the_entries_of_the_runs(tmp_path: Path) -> None:
    """``FamilyReader.batches`` (the native writer's input) gives exactly the entries of ``runs``,
    whatever the batch size, from overlapping files of puts and deletes."""
    from statemorph.savepoint.flink.sst import FamilyReader, family_tables

    db, _ = _db(tmp_path / "db", block_size=128)
    try:
        for r in range(3):
            for i in range(r, 2000, 3 + r):
                db[bytes([i % 4]) + i.to_bytes(2, "big")] = b"v%d-%d" % (r, i)
            for i in range(0, 2000, 17 + r):
                db.delete(bytes([i % 4]) + i.to_bytes(2, "big"))
            db.flush()
        want = list(db.items())
        live = [str(f["name"]).lstrip("/") for f in db.live_files()]
    finally:
        db.close()
    for k in (PY, NATIVE):
        tables = family_tables(tmp_path / "db", live, k)
        try:
            reader = FamilyReader(tables["default"], -1, k)
            assert [e for keys, values in ((r.keys, r.values) for r in reader.runs(0, b"", b"", 1, 1 << 20))
                    for e in zip(keys, values, strict=True)] == want
            for entries, size in ((100_000, 1 << 24), (37, 1 << 24), (1000, 4096)):
                got = []
                for b in reader.batches(b"", b"", entries, size):
                    assert b.n <= entries
                    got += [(b.kdata[b.koff[i]:b.koff[i + 1]].tobytes(), b.vdata[b.voff[i]:b.voff[i + 1]].tobytes())
                            for i in range(b.n)]
                assert got == want
        finally:
            for ts in tables.values():
                for t in ts:
                    t.close()


def test_sst_data_checks_its_state_and_buffers() -> None:
    """A ``state`` naming positions past its buffers, or empty buffers, is refused, never written past."""
    koff, kd = np.array([0, 1], np.int64), np.zeros(1, np.uint8)
    for bad_state, scratch in (([1 << 20, 0, 0, 0, 0, 0, 0], 8192), ([-1, 0, 0, 0, 0, 0, 0], 8192),
                               ([0, 0, 0, 99, 0, 0, 0], 8192), ([0] * 7, 0)):
        for k in (PY, NATIVE):
            status, _, _ = k.sst_data(koff, kd, koff, kd, 0, 1, True, 1, 4096, 16, 10, 1, 896, 4,
                                      np.array(bad_state, np.int64), np.empty(scratch, np.uint8),
                                      np.empty(1 << 16, np.uint8), np.empty(1 << 12, np.uint8), np.zeros(16, np.int64))
            assert status == abi.SST_TRUNCATED


def test_sst_seal_and_sst_reframe_check_their_arguments() -> None:
    for k in (PY, NATIVE):
        assert k.sst_seal(np.zeros(4, np.uint8), 10, np.zeros(1, np.int64), 1, 0, 896, 4,
                          np.empty(256, np.uint8))[0] == abi.SST_TRUNCATED
        assert k.sst_seal(np.zeros(4, np.uint8), 4, np.zeros(1, np.int64), 2, 0, 896, 4,
                          np.empty(256, np.uint8))[0] == abi.SST_TRUNCATED
        assert k.sst_seal(np.zeros(4, np.uint8), 4, np.zeros(1, np.int64), 1, 0, 896, 4,
                          np.empty(8, np.uint8))[0] == abi.SST_CAPACITY
        pos = np.zeros(1, np.int64)
        assert k.sst_reframe(b"x" * 64, pos, pos, 0, 1, 4, 1, 896, np.empty(0, np.uint8),
                             np.empty(64, np.uint8))[0] == abi.SST_TRUNCATED
        assert k.sst_reframe(b"x" * 64, pos, pos, 0, 2, 4, 1, 896, np.empty(64, np.uint8),
                             np.empty(64, np.uint8))[0] == abi.SST_TRUNCATED
        assert k.sst_reframe(b"x" * 64, pos, pos, 0, 1, 4, 1, 896, np.empty(64, np.uint8),
                             np.empty(64, np.uint8))[0] == abi.SST_COMPRESSION  # type byte "x"
