"""The SST kernels (``kernels/_native/sst.pyx`` and its Python twin ``kernels/sst_py.py``): both tiers give
the same statuses and bytes for well-formed and damaged blocks, agree with RocksDB itself (files
written by rocksdict: its checksums, Snappy blocks, overlapping L0 files, deletes and overwrites),
and resolve Put / Delete / SingleDelete / Merge as RocksDB's iterator does."""

from __future__ import annotations

import shutil
from itertools import accumulate
from pathlib import Path
from typing import Any

import cramjam
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph.errors import FlinkSavepointError
from statemorph.kernels import abi, tier
from statemorph.kernels.sst_py import block_checksum, crc32c, xxh3_64
from statemorph.savepoint.flink import sst
from statemorph.savepoint.flink.sst import FamilyReader, SstUnsupported, family_tables, latest_options, merge_delimiters

PY = tier("python")
NATIVE = tier("native")
TIERS = [PY, NATIVE]


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _shared(k: bytes, prev: bytes) -> int:
    n = 0
    while n < min(len(k), len(prev)) and k[n] == prev[n]:
        n += 1
    return n


def _restart_array(restarts: list[int]) -> bytes:
    return b"".join(r.to_bytes(4, "little") for r in restarts or [0]) + len(restarts or [0]).to_bytes(4, "little")


def data_block(entries: list[tuple[bytes, bytes]], interval: int) -> bytes:
    """A data block as RocksDB's BlockBuilder writes it (shared prefixes, a restart every ``interval``)."""
    out, restarts, prev = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        if i % interval == 0:
            restarts.append(len(out))
        shared = 0 if i % interval == 0 else _shared(k, prev)
        out += _varint(shared) + _varint(len(k) - shared) + _varint(len(v)) + k[shared:] + v
        prev = k
    return bytes(out) + _restart_array(restarts)


def framed(blocks: list[bytes], snappy: bool, checksum: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Blocks with their trailers, as laid out in a file; their positions and sizes."""
    out, pos, size = bytearray(), [], []
    for b in blocks:
        kind = 1 if snappy else 0
        body = bytes(cramjam.snappy.compress_raw(b)) if snappy else b
        pos.append(len(out))
        size.append(len(body))
        out += body + bytes((kind,)) + block_checksum(checksum, body, kind).to_bytes(4, "little")
    return bytes(out), np.array(pos, np.int64), np.array(size, np.int64)


def internal(user: bytes, seq: int, kind: int) -> bytes:
    return user + ((seq << 8) | kind).to_bytes(8, "little")


def test_checksums_are_rocksdbs() -> None:
    # CRC32c's check value, and XXH3 reference values (xxhash 0.8's XXH3_64bits of these bytes)
    assert crc32c(b"123456789") == 0xE3069283
    data = bytes((i * 131 + 7) & 0xFF for i in range(5000))
    assert xxh3_64(b"") == 0x2D06800538D394C2
    assert [xxh3_64(data[:n]) for n in (241, 1023, 4096)] == [10767172507156293534, 12200247895068469476,
                                                              11375361214179760895]


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=3000), st.sampled_from([1, 4]), st.booleans())
def test_sst_block_tiers_agree(data: bytes, checksum: int, snappy: bool) -> None:
    f, pos, size = framed([data], snappy, checksum)
    results = []
    for k in TIERS:
        out = bytearray(len(data) + 16)
        status, n = k.sst_block(f, int(pos[0]), int(size[0]), checksum, out)
        results.append((status, n, bytes(out[:n])))
    assert results == [(abi.SST_OK, len(data), data)] * 2
    bad = bytearray(f)
    bad[-1] ^= 1
    assert [k.sst_block(bytes(bad), int(pos[0]), int(size[0]), checksum, bytearray(len(data) + 16))[0]
            for k in TIERS] == [abi.SST_CHECKSUM] * 2


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.integers(0, 600))
def test_damaged_snappy_and_trailers_agree(body: bytes, cap: int) -> None:
    """Arbitrary bytes as a Snappy (or stored) block with a valid checksum: both tiers say the same."""
    for kind in (0, 1, 7):
        f = body + bytes((kind,)) + block_checksum(4, body, kind).to_bytes(4, "little")
        got = []
        for k in TIERS:
            out = bytearray(cap)
            status, n = k.sst_block(f, 0, len(body), 4, out)
            got.append((status, n, bytes(out[:n]) if status == abi.SST_OK else b""))
        assert got[0] == got[1]


keys = st.lists(st.binary(min_size=0, max_size=12), max_size=60, unique=True).map(sorted)


@settings(max_examples=80, deadline=None)
@given(keys, st.integers(1, 16), st.booleans(), st.integers(1, 5), st.data())
def test_sst_decode_tiers_agree_with_the_entries(users: list[bytes], interval: int, snappy: bool, nblocks: int,
                                                 data: Any) -> None:
    entries = [(internal(u, 100 - i % 50, 1), bytes(data.draw(st.binary(max_size=20)))) for i, u in enumerate(users)]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(entries)), min_size=nblocks - 1, max_size=nblocks - 1)))
    parts = [entries[a:b] for a, b in zip([0, *cuts], [*cuts, len(entries)], strict=True)]
    f, pos, size = framed([data_block(p, interval) for p in parts], snappy, 4)
    cap = data.draw(st.integers(0, len(entries) + 2))
    results = []
    for k in TIERS:
        koff, voff = np.zeros(cap + 1, np.int64), np.zeros(cap + 1, np.int64)
        kd, vd = np.zeros(16 * cap + 8, np.uint8), np.zeros(20 * cap + 8, np.uint8)
        status, block, n = k.sst_decode(f, pos, size, 0, len(parts), 4, np.zeros(1 << 14, np.uint8), koff, kd, voff,
                                        vd, 0)
        got = [(bytes(kd[koff[i]:koff[i + 1]]), bytes(vd[voff[i]:voff[i + 1]])) for i in range(max(n, 0))]
        results.append((status, block, n, got))
    assert results[0] == results[1]
    status, block, n, got = results[0]
    if status == abi.SST_OK:
        assert got == entries and block == len(parts)
    else:
        assert status == abi.SST_CAPACITY and got == entries[:n] and n == sum(len(p) for p in parts[:block])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(0, 20))
def test_sst_decode_of_damaged_blocks_agrees(body: bytes, cap: int) -> None:
    f, pos, size = framed([body], False, 1)
    results = []
    for k in TIERS:
        koff, voff = np.zeros(cap + 1, np.int64), np.zeros(cap + 1, np.int64)
        kd, vd = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
        status, block, n = k.sst_decode(f, pos, size, 0, 1, 1, np.zeros(64, np.uint8), koff, kd, voff, vd, 0)
        results.append((status, block, n, koff.tolist(), voff.tolist(), bytes(kd) if status == 0 else b""))
    assert results[0][:3] == results[1][:3]
    if results[0][0] == abi.SST_OK:
        assert results[0] == results[1]


# ---- the merge ---------------------------------------------------------------------------------

version = st.tuples(st.integers(0, 7), st.sampled_from([0, 1, 1, 2, 2, 7]), st.binary(max_size=6))


def _inputs(files: list[list[tuple[bytes, int, int, bytes]]]) -> list[tuple[np.ndarray, ...]]:
    out = []
    for entries in files:
        ks = [internal(u, s, t) for u, s, t, _ in entries]
        vs = [v for *_, v in entries]
        koff = np.array([0, *accumulate(len(k) for k in ks)], np.int64)
        voff = np.array([0, *accumulate(len(v) for v in vs)], np.int64)
        out.append((koff, np.frombuffer(b"".join(ks) or b"\0", np.uint8).copy(), voff,
                    np.frombuffer(b"".join(vs) or b"\0", np.uint8).copy()))
    return out


def _model(files: list[list[tuple[bytes, int, int, bytes]]], delimiter: int) -> list[tuple[bytes, bytes]]:
    """What RocksDB's iterator shows: per user key the newest version decides; merge operands are
    joined oldest first after a Put's value (StringAppendTESTOperator)."""
    by_key: dict[bytes, list[tuple[int, int, bytes]]] = {}
    for entries in files:
        for u, s, t, v in entries:
            by_key.setdefault(u, []).append((s, t, v))
    out = []
    for u in sorted(by_key):
        ops: list[bytes] = []
        value: bytes | None = None
        for _, t, v in sorted(by_key[u], reverse=True):
            if t == 2:
                ops.append(v)
                continue
            if t == 1:
                value = bytes((delimiter,)).join([v, *reversed(ops)])
            elif ops:
                value = bytes((delimiter,)).join(reversed(ops))
            break
        else:
            value = bytes((delimiter,)).join(reversed(ops)) if ops else None
        if value is not None:
            out.append((u, value))
    return out


@st.composite
def column_families(draw: Any) -> list[list[tuple[bytes, int, int, bytes]]]:
    """Files of one column family: unique sequence numbers, each file sorted by internal key."""
    users = draw(st.lists(st.binary(min_size=1, max_size=3)  # short keys, and keys past 8 bytes sharing a prefix
                          | st.binary(max_size=6).map(lambda b: b"\x00\x01\x02\x03\x04\x05\x06" + b),
                          min_size=1, max_size=8, unique=True))
    nfiles = draw(st.integers(1, 4))
    seqs = iter(draw(st.permutations(range(1, 200)))[:200])
    files: list[list[tuple[bytes, int, int, bytes]]] = [[] for _ in range(nfiles)]
    for u in users:
        for _ in range(draw(st.integers(1, 4))):
            f = draw(st.integers(0, nfiles - 1))
            files[f].append((u, next(seqs), draw(st.sampled_from([0, 1, 1, 2, 2, 2, 7])), draw(st.binary(max_size=6))))
    return [sorted(f, key=lambda e: (e[0], -e[1])) for f in files]


def _merge_all(k: Any, files: list[list[tuple[bytes, int, int, bytes]]], delimiter: int, group_len: int,
               slice_bytes: int, cap: int) -> tuple[int, list[list[tuple[bytes, bytes]]]]:
    inputs = _inputs(files)
    pos = np.zeros(len(files), np.int64)
    end = np.array([len(f) for f in files], np.int64)
    eof = np.ones(len(files), np.uint8)
    runs = []
    for _ in range(1000):
        koff, voff = np.zeros(cap + 1, np.int64), np.zeros(cap + 1, np.int64)
        kd, vd = np.zeros(16 * cap, np.uint8), np.zeros(40 * cap, np.uint8)
        status, n, _ = k.sst_merge(inputs, pos, end, eof, delimiter, group_len, b"", b"", b"", slice_bytes, koff, kd,
                                   voff, vd)
        keys, values = k.sst_lists(koff, kd, voff, vd, n)
        if n:
            runs.append(list(zip(keys, values, strict=True)))
        if status not in (abi.SST_GROUP, abi.SST_SLICE):
            return status, runs
        if status == abi.SST_SLICE and not n:
            return status, runs
    raise AssertionError("no progress")


@settings(max_examples=120, deadline=None)
@given(column_families(), st.integers(1, 2), st.integers(1, 30), st.integers(1, 6))
def test_sst_merge_tiers_agree_with_rocksdbs_resolution(files: list[list[tuple[bytes, int, int, bytes]]],
                                                        group_len: int, slice_bytes: int, cap: int) -> None:
    got = [_merge_all(k, files, ord(","), group_len, slice_bytes, cap) for k in TIERS]
    assert got[0] == got[1]
    status, runs = got[0]
    assert status == abi.SST_END
    assert [e for r in runs for e in r] == _model(files, ord(","))
    for r in runs:
        assert len({k[:group_len] for k, _ in r}) == 1  # a run is one key group
    # without a merge operator, merge operands are handed to RocksDB
    if any(e[2] == 2 for f in files for e in f):
        statuses = {_merge_all(k, files, -1, group_len, 1 << 20, 64)[0] for k in TIERS}
        assert statuses <= {abi.SST_NO_MERGE, abi.SST_END}


@settings(max_examples=100, deadline=None)
@given(column_families(), st.data())
def test_sst_merge_stops_for_a_refill_and_resumes_exactly(files: list[list[tuple[bytes, int, int, bytes]]],
                                                          data: Any) -> None:
    """An input whose decoded entries run out before its file does stops the merge before the key
    being resolved (``SST_REFILL``); both tiers stop at the same key, with the same positions."""
    inputs = _inputs(files)
    end = np.array([data.draw(st.integers(0, len(f))) for f in files], np.int64)
    eof = np.array([e == len(f) for e, f in zip(end, files, strict=True)], np.uint8)
    got = []
    for k in TIERS:
        pos = np.zeros(len(files), np.int64)
        koff, voff = np.zeros(100, np.int64), np.zeros(100, np.int64)
        kd, vd = np.zeros(1000, np.uint8), np.zeros(4000, np.uint8)
        status, n, refill = k.sst_merge(inputs, pos, end, eof, ord(","), 8, b"", b"", b"", 1 << 20, koff, kd, voff, vd)
        got.append((status, n, refill, pos.tolist(), k.sst_lists(koff, kd, voff, vd, n)))
    assert got[0] == got[1]
    if got[0][0] == abi.SST_REFILL:
        assert not eof[got[0][2]]


def test_sst_merge_refuses_out_of_order_and_unknown_types() -> None:
    out = (np.zeros(9, np.int64), np.zeros(64, np.uint8), np.zeros(9, np.int64), np.zeros(64, np.uint8))
    for files, want in (([[(b"b", 5, 1, b""), (b"a", 4, 1, b"")]], abi.SST_ORDER),
                        ([[(b"a", 5, 1, b""), (b"a", 6, 1, b"")]], abi.SST_ORDER),
                        ([[(b"a", 5, 0x11, b"")]], abi.SST_ENTRY_TYPE)):
        for k in TIERS:
            pos = np.zeros(1, np.int64)
            assert k.sst_merge(_inputs(files), pos, np.array([2 if len(files[0]) > 1 else 1]), np.ones(1, np.uint8),
                               44, 1, b"", b"", b"", 1 << 20, *out)[0] == want


def test_sst_merge_checks_offsets() -> None:
    koff, kd, voff, vd = _inputs([[(b"a", 5, 1, b"x")]])[0]
    koff[1] = 1000
    for k in TIERS:
        assert k.sst_merge([(koff, kd, voff, vd)], np.zeros(1, np.int64), np.array([1]), np.ones(1, np.uint8), 44, 1,
                           b"", b"", b"", 1 << 20, np.zeros(9, np.int64), np.zeros(64, np.uint8), np.zeros(9, np.int64),
                           np.zeros(64, np.uint8))[0] == abi.SST_TRUNCATED


# ---- files written by RocksDB ------------------------------------------------------------------

rd = pytest.importorskip("rocksdict")

ops = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "delete", "flush"]), st.integers(0, 300),
                         st.binary(max_size=80)), min_size=1, max_size=400)


def _write(path: Path, ops_: list[tuple[str, int, bytes]], version: int, checksum: str, compression: str,
           block_size: int) -> list[tuple[bytes, bytes]]:
    shutil.rmtree(path, ignore_errors=True)
    o = rd.Options(raw_mode=True)
    o.create_if_missing(True)
    o.set_disable_auto_compactions(True)  # the files flushed stay overlapping L0 files
    t = rd.BlockBasedOptions()
    t.set_format_version(version)
    t.set_block_size(block_size)
    t.set_checksum_type(getattr(rd.ChecksumType, checksum)())
    o.set_block_based_table_factory(t)
    o.set_compression_type(getattr(rd.DBCompressionType, compression)())
    db = rd.Rdict(str(path), o)
    try:
        for op, i, v in ops_:
            key = bytes([i % 4]) + i.to_bytes(2, "big")
            if op == "put":
                db[key] = v
            elif op == "delete":
                db.delete(key)
            else:
                db.flush()
        db.flush()
        want = list(db.items())
        live = [str(f["name"]).lstrip("/") for f in db.live_files()]
    finally:
        db.close()
    (path / "live").write_text("\n".join(live))
    return want


def _rocksdb_runs(entries: list[tuple[bytes, bytes]], slice_bytes: int) -> list[Any]:
    """Runs as ``RocksInstance.rocks_state_runs`` cuts them: one key group (first byte here) each,
    cut after the entry that brings a run to ``slice_bytes`` (key + value + 8 an entry)."""
    runs: list[Any] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    size = 0
    for k, v in entries:
        if keys and k[:1] != keys[-1][:1]:
            runs.append((keys, values))
            keys, values, size = [], [], 0
        keys.append(k)
        values.append(v)
        size += len(k) + len(v) + 8
        if size >= slice_bytes:
            runs.append((keys, values))
            keys, values, size = [], [], 0
    if keys:
        runs.append((keys, values))
    return runs


def _read(path: Path, k: Any, start: bytes = b"", stop: bytes = b"", slice_bytes: int = 1 << 20) -> list[Any]:
    tables = family_tables(path, (path / "live").read_text().split(), k)
    try:
        delim = merge_delimiters(latest_options(path)).get("default", -1)
        reader = FamilyReader(tables.get("default", []), delim, k)
        return [(r.keys, r.values) for r in reader.runs(0, start, stop, 1, slice_bytes)]
    finally:
        for ts in tables.values():
            for t in ts:
                t.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops, st.sampled_from(["crc32c", "xxh3"]), st.sampled_from(["snappy", "none"]), st.sampled_from([64, 256, 4096]),
       st.integers(0, 4), st.integers(0, 4), st.sampled_from([2, 3, 4, 5]))
def test_files_rocksdb_wrote_read_as_rocksdb_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        ops_: list[tuple[str, int, bytes]], checksum: str,
                                                        compression: str, block_size: int, lo: int, hi: int,
                                                        version: int) -> None:
    """Format versions 2 and 3 index by internal keys with value lengths, 4 and 5 (Flink's) by
    user keys with delta-encoded handles."""
    monkeypatch.setattr(sst, "CHUNK_BLOCKS", 1 if block_size == 64 else 64)  # refills mid-key too
    monkeypatch.setattr(sst, "RUN_ENTRIES", 3 if block_size == 64 else 8192)  # runs continued over calls
    monkeypatch.setattr(sst, "RUN_BYTES", 100 if block_size == 64 else 1 << 20)
    want = _write(tmp_path / "db", ops_, version, checksum, compression, block_size)
    for k in TIERS:
        runs = _read(tmp_path / "db", k)
        assert runs == _rocksdb_runs(want, 1 << 20)
        assert all(len({key[:1] for key in keys}) == 1 for keys, _ in runs)
        start, stop = bytes([min(lo, hi)]), bytes([max(lo, hi)]) if max(lo, hi) < 4 else b""
        ranged = _read(tmp_path / "db", k, start, stop, 100)
        assert ranged == _rocksdb_runs([e for e in want if e[0] >= start and (not stop or e[0] < stop)], 100)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 40), min_size=2, max_size=8), st.booleans(), st.sampled_from([64, 4096]))
def test_files_that_follow_one_another_are_one_merge_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             sizes: list[int], overlap: bool, block_size: int) -> None:
    """Files whose key ranges follow one another (a level's, after compaction) are read one after
    the other as one input of the merge, a file overlapping them as another: a savepoint of many
    compacted files is merged over a few inputs, not one per file. Read as RocksDB reads them."""
    monkeypatch.setattr(sst, "CHUNK_BLOCKS", 1 if block_size == 64 else 64)  # refills across files too
    ops_: list[tuple[str, int, bytes]] = []
    i = 0
    for n in sizes:  # keys ascending over the files: each file's range after the one before
        ops_ += [("put", 4 * (i + j), bytes([j % 251]) * (j % 7)) for j in range(n)] + [("flush", 0, b"")]
        i += n
    if overlap:  # one more file whose keys fall among all the others'
        ops_ += [("put", 4 * j + 2 * (j % 2), b"new") for j in range(0, i, 3)]
    want = _write(tmp_path / "db", ops_, 5, "crc32c", "snappy", block_size)
    path = tmp_path / "db"
    tables = family_tables(path, (path / "live").read_text().split(), NATIVE)
    try:
        chains = sst._chained(tables["default"], b"", b"", NATIVE)
        assert len(tables["default"]) == len(sizes) + overlap
        assert sorted(len(c) for c in chains) == sorted([len(sizes)] + [1] * overlap)
    finally:
        for t in tables["default"]:
            t.close()
    for k in TIERS:
        assert _read(path, k) == _rocksdb_runs(want, 1 << 20)
        assert _read(path, k, b"\x01", b"\x03", 100) == _rocksdb_runs(
            [e for e in want if b"\x01" <= e[0] < b"\x03"], 100)


def test_format_version_6_is_left_to_rocksdb(tmp_path: Path) -> None:
    _write(tmp_path / "db", [("put", 1, b"x")], 6, "xxh3", "snappy", 4096)
    with pytest.raises(SstUnsupported, match="format_version 6"):
        _read(tmp_path / "db", NATIVE)


def test_other_compressions_are_left_to_rocksdb(tmp_path: Path) -> None:
    _write(tmp_path / "db", [("put", i, b"x" * 50) for i in range(50)], 5, "xxh3", "lz4", 4096)
    with pytest.raises(SstUnsupported, match="compression LZ4"):
        _read(tmp_path / "db", NATIVE)


def test_other_checksums_are_left_to_rocksdb(tmp_path: Path) -> None:
    _write(tmp_path / "db", [("put", i, b"x" * 50) for i in range(50)], 5, "xxhash64", "snappy", 4096)
    with pytest.raises(SstUnsupported, match="checksum type"):
        _read(tmp_path / "db", NATIVE)


@pytest.mark.parametrize("where", ["footer", "block", "truncated"])
def test_damaged_files_are_typed_errors(tmp_path: Path, where: str) -> None:
    _write(tmp_path / "db", [("put", i, bytes([i % 251]) * 40) for i in range(300)], 5, "xxh3", "snappy", 256)
    name = (tmp_path / "db" / "live").read_text().split()[0]
    f = tmp_path / "db" / name
    data = bytearray(f.read_bytes())
    if where == "footer":
        data[-51] ^= 0x7F  # the meta index handle
    elif where == "block":
        data[10] ^= 0x01
    else:
        del data[len(data) // 2:]
    f.write_bytes(bytes(data))
    for k in TIERS:
        with pytest.raises((FlinkSavepointError, SstUnsupported)) as e:
            _read(tmp_path / "db", k)
        assert "SST file" in str(e.value)


def test_merge_delimiters_from_options() -> None:
    text = ('[CFOptions "default"]\n  merge_operator=nullptr\n[CFOptions "list"]\n'
            '  merge_operator={id=StringAppendTESTOperator;delimiter=,;}\n[CFOptions "old"]\n'
            '  merge_operator=StringAppendTESTOperator\n[CFOptions "wide"]\n'
            '  merge_operator={id=StringAppendTESTOperator;delimiter=::;}\n[TableOptions/BlockBasedTable "x"]\n')
    assert merge_delimiters(text) == {"default": -1, "list": 44, "old": 44, "wide": -1}


def test_sst_lists_checks_offsets() -> None:
    for k in TIERS:
        with pytest.raises(ValueError):
            k.sst_lists(np.array([0, 5], np.int64), np.zeros(2, np.uint8), np.array([0, 0], np.int64),
                        np.zeros(2, np.uint8), 1)


def test_a_block_of_expanding_shared_prefixes_is_left_to_rocksdb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries a few bytes each that repeat a long key (a decompression bomb of shared prefixes)
    grow the decode buffers only to MAX_DECODED; then the family is RocksDB's to read."""
    monkeypatch.setattr(sst, "MAX_DECODED", 1 << 20)
    entries = [(internal(b"k" * 4000 + i.to_bytes(2, "big"), 1, 1), b"") for i in range(1000)]
    f, pos, size = framed([data_block(entries, 1 << 20)], True, 4)
    assert len(f) < 40_000
    table = sst.SstTable(Path("bomb.sst"), "bomb.sst", "default", 4, f, pos, size, [entries[-1][0][:-8]])
    for k in TIERS:
        with pytest.raises(SstUnsupported, match="MiB at once"):
            list(FamilyReader([table], -1, k).runs(0, b"", b"", 1, 1 << 20))


def index_block(handles: list[tuple[bytes, int, int]], interval: int, delta: bool) -> bytes:
    """An index block as RocksDB writes it: with ``delta`` (format version 4+) no value lengths,
    a full handle at each restart and a zigzag size delta after it."""
    out, restarts, prev = bytearray(), [], b""
    for i, (k, pos, size) in enumerate(handles):
        if i % interval == 0:
            restarts.append(len(out))
        shared = 0 if i % interval == 0 else _shared(k, prev)
        if delta and shared:
            d = size - handles[i - 1][2]
            value = _varint((d << 1) ^ (d >> 63) if d < 0 else d << 1)
        else:
            value = _varint(pos) + _varint(size)
        out += _varint(shared) + _varint(len(k) - shared) + (b"" if delta else _varint(len(value)))
        out += k[shared:] + value
        prev = k
    return bytes(out) + _restart_array(restarts)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=10), st.integers(0, 5000)), max_size=40,
                unique_by=lambda t: t[0]), st.integers(1, 8), st.booleans(), st.integers(0, 45))
def test_sst_index_tiers_agree_with_the_handles(entries: list[tuple[bytes, int]], interval: int, delta: bool,
                                                cap: int) -> None:
    entries.sort()
    handles, pos = [], 0
    for k, size in entries:
        handles.append((k, pos, size))
        pos += size + 5
    blk = index_block(handles, interval, delta)
    got = []
    for k in TIERS:
        p, s, koff = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap + 1, np.int64)
        kd = np.zeros(400, np.uint8)
        status, n = k.sst_index(blk, len(blk), delta, p, s, koff, kd)
        got.append((status, n, p[:n].tolist(), s[:n].tolist(), k.sst_lists(koff, kd, koff, kd, n)[0]))
    assert got[0] == got[1]
    status, n, p_, s_, keys_ = got[0]
    want = handles[:n]
    assert (p_, s_, keys_) == ([h[1] for h in want], [h[2] for h in want], [h[0] for h in want])
    assert status == (abi.SST_OK if cap >= len(handles) else abi.SST_CAPACITY)


@settings(max_examples=120, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_sst_index_of_damaged_blocks_agrees(blk: bytes, delta: bool) -> None:
    got = []
    for k in TIERS:
        p, s, koff, kd = np.zeros(80, np.int64), np.zeros(80, np.int64), np.zeros(81, np.int64), np.zeros(300, np.uint8)
        status, n = k.sst_index(blk, len(blk), delta, p, s, koff, kd)
        got.append((status, n, p[:n].tolist(), s[:n].tolist(), k.sst_lists(koff, kd, koff, kd, n)[0]))
    assert got[0] == got[1]


def test_a_continued_run_stops_before_another_key_group() -> None:
    """``group``: the key group of the run a call continues; a first key outside it ends the run
    at once (the next call starts a new one)."""
    inputs = _inputs([[(b"\x01a", 5, 1, b"x"), (b"\x02b", 4, 1, b"y")]])
    for k in TIERS:
        for group, want in ((b"\x00", (abi.SST_GROUP, 0)), (b"\x01", (abi.SST_GROUP, 1)), (b"", (abi.SST_GROUP, 1))):
            out = (np.zeros(9, np.int64), np.zeros(64, np.uint8), np.zeros(9, np.int64), np.zeros(64, np.uint8))
            got = k.sst_merge(inputs, np.zeros(1, np.int64), np.array([2]), np.ones(1, np.uint8), 44, 1, group, b"",
                              b"", 1 << 20, *out)
            assert got[:2] == want, (k.name, group)


def test_a_table_closes_while_a_view_of_it_is_held(tmp_path: Path) -> None:
    """Closing an instance closes its tables; a view of a file still held elsewhere leaves that
    mapping to the collector instead of failing the cleanup."""
    _write(tmp_path / "db", [("put", 1, b"x")], 5, "xxh3", "snappy", 4096)
    name = (tmp_path / "db" / "live").read_text().split()[0]
    t = sst.open_table(tmp_path / "db" / name, NATIVE)
    held = np.frombuffer(t.data, np.uint8)[:4]
    t.close()
    assert t.data is None and len(held.tobytes()) == 4


def test_an_instance_with_a_write_ahead_log_is_left_to_rocksdb(tmp_path: Path) -> None:
    """Entries still in a write-ahead log are in no SST file: such an instance is RocksDB's to read."""
    o = rd.Options(raw_mode=True)
    t = rd.BlockBasedOptions()
    t.set_format_version(5)  # one the SST reader reads: only the log sends the instance to RocksDB
    o.set_block_based_table_factory(t)
    db = rd.Rdict(str(tmp_path / "db"), o)
    try:
        db[b"flushed"] = b"1"
        db.flush()
        db[b"only in the log"] = b"2"
        live = [str(f["name"]).lstrip("/") for f in db.live_files()]
        shutil.copytree(tmp_path / "db", tmp_path / "copy")  # as it is open: closing flushes the log
    finally:
        db.close()
    assert any(f.suffix == ".log" and f.stat().st_size for f in (tmp_path / "copy").iterdir())
    with pytest.raises(SstUnsupported, match="write-ahead log"):
        family_tables(tmp_path / "copy", live, NATIVE)
