"""Large key groups are scanned and migrated in slices (``savepoint.flink.key_group_scan``), so the
rewriter's memory does not follow the key group's size. Slicing must change nothing but memory:

- the slices of a key group are its bytes, cut after whole entries, with the same entries as one
  scan of the whole group (any slice size, compressed or not, entries larger than a slice);
- a damaged key group is refused in slices exactly when it is refused whole (one definition of
  valid), always with :class:`FlinkSavepointError`;
- the rewrite of every committed real-Flink savepoint with tiny slices gives the same key groups
  as without slicing (a compressed group's pieces are one valid Snappy stream), and real Flink
  restores a savepoint migrated that way.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import cramjam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, case_spec, reshape
from savepoint.flink.format_helpers import (
    N_STATES,
    cases,
    expected,
    grown_bulk_streams,
    hashable,
    key_group_bytes,
    key_group_runs,
    scanned_entries,
    state_operator,
)

from statemorph.bulk.chunks import ordered_map
from statemorph.errors import FlinkSavepointError
from statemorph.kernels.abi import BLOCK_CAPACITY
from statemorph.savepoint.flink import FlinkSavepoint, key_group_scan
from statemorph.savepoint.flink.bulk_blocks import migrated_blocks
from statemorph.savepoint.flink.files import InlineStream
from statemorph.savepoint.flink.key_group_scan import (
    KeyGroupCut,
    ScanArrays,
    ScannedGroup,
    scan_key_group,
    scan_slices,
)
from statemorph.savepoint.flink.keyed_blocks import KeyGroupExtent, parse_key_group
from statemorph.savepoint.flink.layout import StateLayout
from statemorph.savepoint.flink.snappy import STREAM_IDENTIFIER, compress_key_group, framed_raw_size, unframe_into


def _slices(data: bytes, compressed: bool, slice_bytes: int, parallel: bool = False) -> list[ScannedGroup]:
    """The slices of ``data`` stored as one key group: cut on this thread, or (``parallel``) each
    piece on one of three workers, as the rewriter hands them out."""
    stored = compress_key_group(data) if compressed else data
    return _cut_stored(stored, compressed, slice_bytes, parallel)


def _cut_stored(stored: bytes, compressed: bool, slice_bytes: int, parallel: bool) -> list[ScannedGroup]:
    source, ext = InlineStream(stored, "sp"), KeyGroupExtent(7, 0, len(stored))
    if not parallel:
        return list(scan_slices(source, ext, compressed, N_STATES, "sp", slice_bytes))
    cut = KeyGroupCut(source, ext, compressed, N_STATES, "sp", slice_bytes)
    local = threading.local()

    def piece(i: int) -> list[ScannedGroup]:
        if not hasattr(local, "scratch"):
            local.scratch = ScanArrays()
        return cut.slices_of(i, local.scratch)

    return [g for slices in ordered_map(piece, range(cut.pieces), 3) for g in slices]


def _cuts(slices: list[ScannedGroup] | FlinkSavepointError) -> Any:
    """What two ways of cutting must agree on: every slice's bytes and place, or the error."""
    if isinstance(slices, FlinkSavepointError):
        return str(slices)
    return [(bytes(memoryview(g.buf)[:g.end]), g.skip, g.first, g.val_pos.tolist()) for g in slices]




@settings(max_examples=150, deadline=None)
@given(key_group_runs, st.integers(1, 2000), st.booleans())
def test_slices_are_the_key_group_cut_after_wholescanned_entries(spec: Any, slice_bytes: int, compressed: bool) -> None:
    data = key_group_bytes(spec)
    whole = scan_key_group(7, data, N_STATES, "sp")
    slices = _slices(data, compressed, slice_bytes)
    assert b"".join(bytes(memoryview(g.buf)[g.skip:]) for g in slices) == data
    assert scanned_entries(slices) == scanned_entries([whole])
    assert [g.first for g in slices] == [True] + [False] * (len(slices) - 1)
    if len(data) > 4 * slice_bytes + 2000 and not compressed:  # the cut really happens
        assert len(slices) > 1
    if not compressed:  # a slice holds the carry (< one entry) + the bytes wanted (doubled for an
        # entry larger than a slice) + one read piece: bounded by the slice and the largest entry,
        # never by the key group (a compressed piece adds whole Snappy chunks instead)
        largest = max(10 + len(k) + len(v) for _, entries in spec for k, v in entries)
        assert max(memoryview(g.buf).nbytes for g in slices) <= 2 + 2 * (largest + slice_bytes) + slice_bytes


@settings(max_examples=150, deadline=None)
@given(key_group_runs, st.integers(1, 2000), st.booleans())
def test_the_readers_per_entry_view_of_slices_is_the_entry_readers(spec: Any, slice_bytes: int,
                                                                  compressed: bool) -> None:
    """What ``inspect`` counts (``run_totals``) and what ``convert`` turns into rows (``runs``) of a
    key group's slices are the entries ``parse_key_group`` reads from it whole: keys with the
    end-of-run flag cleared, values, state by state, whatever the cut."""
    data = key_group_bytes(spec)
    want, _ = parse_key_group(data, N_STATES, "sp", exact_end=True)
    slices = _slices(data, compressed, slice_bytes)
    got = [(run.state_id, k, v) for g in slices for run in g.runs() for k, v in zip(run.keys, run.values, strict=True)]
    assert got == [(run.state_id, k, v) for run in want for k, v in zip(run.keys, run.values, strict=True)]
    totals: dict[int, list[int]] = {}
    for g in slices:
        for sid, n, size in g.run_totals():
            totals.setdefault(sid, [0, 0])
            totals[sid][0] += n
            totals[sid][1] += size
    assert totals == {sid: [sum(len(r.keys) for r in want if r.state_id == sid),
                            sum(len(k) + len(v) for r in want if r.state_id == sid for k, v in zip(r.keys, r.values,
                                                                                                    strict=True))]
                      for sid in {r.state_id for r in want}}


def _window_bytes(g: ScannedGroup) -> int:
    """The bytes of the window a slice was cut from (its buffer is a view of it)."""
    return int(memoryview(g.buf).obj.nbytes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("compressed", [False, True])
def test_a_grown_window_holds_the_entry_and_a_slice_more(compressed: bool) -> None:
    """An entry larger than the slice grows the window to what its declared lengths need (the
    key's, then the value's) and a slice more, not to twice the window before: doubling made a
    window of 385 MiB for an entry of 224 MiB in the ``sparse-and-bomb`` fuzz run."""
    slice_bytes = 1 << 10
    noise = random.Random(7).randbytes(1_800_000)  # incompressible: a Snappy piece is about its stored size
    key, value = b"\x01" + noise[:500_000], noise[500_000:800_000]
    entry = 2 + 4 + len(key) + 4 + len(value)
    behind = [(b"\x02", noise[i:i + 40]) for i in range(800_000, 1_800_000, 40)]  # 1 MB of small entries
    data = key_group_bytes([(0, [(key, value)] + behind)])
    slices = _slices(data, compressed, slice_bytes)
    assert scanned_entries(slices) == scanned_entries([scan_key_group(7, data, N_STATES, "sp")])
    piece = 1 << 17 if compressed else slice_bytes  # what the window is filled with at a time
    assert max(_window_bytes(g) for g in slices) <= entry + slice_bytes + piece


def test_a_grown_window_is_cut_where_the_scan_arrays_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan's arrays hold a slice's worth of entries (``slice // MIN_ENTRY_BYTES + 1``),
    never a grown window's (48 bytes an entry, 5 times its bytes): when the entries behind a large
    one in a grown window outnumber them (here: a bound of 20 bytes an entry, so a 40-byte slice
    holds 3), the scan stops there (``BLOCK_CAPACITY``) and the slice is cut after the entries
    found."""
    statuses: list[int] = []

    def spied(*args: Any, **kwargs: Any) -> Any:
        result = scan(*args, **kwargs)
        statuses.append(result[0])
        return result

    data = key_group_bytes([(0, [(b"\x01" * 100, b"v" * 10)] + [(b"\x02", b"")] * 10)])
    want = scanned_entries([scan_key_group(7, data, N_STATES, "sp")])
    scan = key_group_scan._scan
    monkeypatch.setattr(key_group_scan, "_scan", spied)
    monkeypatch.setattr(key_group_scan, "MIN_ENTRY_BYTES", 20)
    slices = _slices(data, False, 40)
    assert BLOCK_CAPACITY in statuses
    assert max(len(g.val_pos) for g in slices) <= 40 // 20 + 1
    assert scanned_entries(slices) == want


def test_a_piece_larger_than_a_slice_is_cut_where_the_scan_arrays_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed piece is read a whole Snappy chunk at least (up to 64 KiB once decompressed),
    and an entry larger than the slice makes a window of it and the piece behind it: the small
    entries there outnumber a slice's worth of scan arrays (``slice // 9 + 1``, never sized for the
    window: 48 bytes an entry, 5 times its bytes), so the scan stops there (``BLOCK_CAPACITY``)
    and the piece is cut into several slices after the entries found."""
    statuses: list[int] = []

    def spied(*args: Any, **kwargs: Any) -> Any:
        result = scan(*args, **kwargs)
        statuses.append(result[0])
        return result

    scan = key_group_scan._scan
    monkeypatch.setattr(key_group_scan, "_scan", spied)
    data = key_group_bytes([(0, [(b"\x01" * 20, b"v" * 10)] + [(b"\x02", b"")] * 10)])
    for compressed in (False, True):
        statuses.clear()
        slices = _slices(data, compressed, 16)
        assert BLOCK_CAPACITY in statuses or not compressed
        assert max(len(g.val_pos) for g in slices) <= 16 // key_group_scan.MIN_ENTRY_BYTES + 1
        assert scanned_entries(slices) == scanned_entries([scan_key_group(7, data, N_STATES, "sp")])
    data = key_group_bytes([(0, [(b"\x02", b"")] * 40)])
    slices = _slices(data, True, 16)
    assert BLOCK_CAPACITY in statuses
    assert max(len(g.val_pos) for g in slices) <= 16 // key_group_scan.MIN_ENTRY_BYTES + 1
    assert scanned_entries(slices) == scanned_entries([scan_key_group(7, data, N_STATES, "sp")])


def test_a_chunk_cut_by_a_piece_is_read_at_once() -> None:
    """A Snappy chunk declares up to 16 MiB (its 3-byte length). Read a piece (64 KiB) at a time,
    the part read so far was copied again with every piece, quadratic in the chunk: seconds for
    one hostile key group in the ``sparse-and-bomb`` fuzz run. The rest of a cut chunk is read
    in one go."""
    reads: list[int] = []

    class Counted(InlineStream):
        def _read(self, offset: int, n: int) -> bytes:
            reads.append(n)
            return super()._read(offset, n)

    data = STREAM_IDENTIFIER + b"\x00" + (4 << 20).to_bytes(3, "little") + bytes(4 << 20)
    with pytest.raises(FlinkSavepointError):
        list(scan_slices(Counted(data, "sp"), KeyGroupExtent(7, 0, len(data)), True, N_STATES, "sp", 1 << 10))
    assert len(reads) <= 3, reads


def test_a_large_entry_is_handed_out_as_one_copy() -> None:
    """``runs`` (what ``convert`` builds its rows from) copies each key and value once: a key
    with the end-of-run flag was copied three times over (whole, without its first byte, then
    joined), which with the window took a fuzz worker to 1.4 GB for one 192 MiB key."""
    import tracemalloc

    key, value = b"\x01" + bytes(8 << 20), bytes(1 << 20)
    g = scan_key_group(7, key_group_bytes([(0, [(key, value)])]), N_STATES, "sp")
    tracemalloc.start()
    try:
        (run,) = g.runs()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.keys == [key] and run.values == [value]
    assert peak < len(key) + len(value) + (1 << 20), peak


@settings(max_examples=300, deadline=None)
@given(key_group_runs, st.integers(1, 600), st.booleans(), st.data())
def test_a_damaged_key_group_is_refused_in_slices_exactly_when_whole(spec: Any, slice_bytes: int, compressed: bool,
                                                                     data: st.DataObject) -> None:
    good = bytearray(key_group_bytes(spec))
    how = data.draw(st.sampled_from(["flip", "cut", "append"]))
    at = data.draw(st.integers(0, len(good) - 1))
    if how == "flip":
        good[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del good[at:]
    else:
        good += data.draw(st.binary(min_size=1, max_size=8))
    bad = bytes(good)
    try:
        whole: list[ScannedGroup] | FlinkSavepointError = [scan_key_group(7, bad, N_STATES, "sp")]
    except FlinkSavepointError as e:
        whole = e
    if not bad:
        return
    try:
        sliced: list[ScannedGroup] | FlinkSavepointError = _slices(bad, compressed, slice_bytes)
    except FlinkSavepointError as e:
        sliced = e
    assert isinstance(sliced, FlinkSavepointError) == isinstance(whole, FlinkSavepointError), (whole, sliced)
    if not isinstance(whole, FlinkSavepointError):
        assert isinstance(sliced, list) and scanned_entries(sliced) == scanned_entries(whole)
    try:
        parallel: list[ScannedGroup] | FlinkSavepointError = _slices(bad, compressed, slice_bytes, parallel=True)
    except FlinkSavepointError as e:
        parallel = e
    assert _cuts(parallel) == _cuts(sliced)  # pieces on three workers at once: the same slices, the same error


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=300), st.integers(1, 600)), min_size=1, max_size=6))
def test_a_framed_stream_decompresses_into_a_buffer_of_its_declared_size(pieces: list[tuple[bytes, int]]) -> None:
    """How a slice is filled: its size from the pieces' chunks (compressed and stored ones),
    then each piece decompressed into its place in the middle of the window, nothing around it
    touched."""
    data = b"".join(b * k for b, k in pieces)
    framed = compress_key_group(data)
    n = framed_raw_size(framed, "t")
    assert n == len(data)
    out = np.zeros(n + 8, np.uint8)
    unframe_into(framed, out[4 : 4 + n], "t")
    assert bytes(out[4 : 4 + n]) == data
    assert not out[:4].any() and not out[4 + n :].any()


def test_a_damaged_snappy_chunk_in_a_later_piece_is_refused() -> None:
    data = key_group_bytes([(0, [(bytes([1, i % 100]), bytes(range(256)) * 3) for i in range(400)])])
    stored = bytearray(compress_key_group(data))
    stored[-20] ^= 0xFF  # inside the last chunk: its CRC no longer matches
    for parallel in (False, True):
        with pytest.raises(FlinkSavepointError, match="Snappy"):
            _cut_stored(bytes(stored), True, 100, parallel)
        with pytest.raises(FlinkSavepointError, match="runs past"):
            _cut_stored(bytes(stored[:-3]), True, 100, parallel)


def test_the_pieces_of_a_compressed_key_group_are_cut_on_several_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed key group of seven pieces (incompressible values: a piece is at least one
    64 KiB chunk), its pieces taken by three workers: more than one cuts, and the slices are the
    ones one thread cuts."""
    rng = np.random.default_rng(0)
    data = key_group_bytes([(1, [(bytes([1, i % 100, i // 100]), rng.bytes(300)) for i in range(1500)])])
    slices_of = KeyGroupCut.slices_of
    cutters: set[int] = set()

    def traced(self: KeyGroupCut, i: int, scratch: ScanArrays) -> list[ScannedGroup]:
        cutters.add(threading.get_ident())
        time.sleep(0.001)  # the other workers take the next pieces meanwhile
        return slices_of(self, i, scratch)

    monkeypatch.setattr(KeyGroupCut, "slices_of", traced)
    alone = _slices(data, True, 1 << 17)
    assert len(alone) > 4
    cutters.clear()
    assert _cuts(_slices(data, True, 1 << 17, parallel=True)) == _cuts(alone)
    assert len(cutters) > 1


def _rewritten(stream: Any, states: dict[int, tuple[StateLayout, Any]], slice_bytes: int,
               workers: int) -> dict[int, bytes]:
    """Every key group's new uncompressed bytes, its pieces joined (and decompressed as one
    Snappy stream when the stream is compressed)."""
    joined: dict[int, bytearray] = {}
    order: list[int] = []
    for kg, data in migrated_blocks(stream, states, batch_values=50, workers=workers, slice_bytes=slice_bytes):
        if kg not in joined:
            order.append(kg)
            joined[kg] = bytearray()
        assert order[-1] == kg, "the pieces of a key group come one after the other"
        joined[kg] += bytes(data)
    if stream.header.compressed:
        return {kg: bytes(cramjam.snappy.decompress(bytes(b))) for kg, b in joined.items()}
    return {kg: bytes(b) for kg, b in joined.items()}


@pytest.mark.parametrize("case", cases(), ids=[c.name for c in cases()])
def test_a_sliced_rewrite_writes_the_same_key_groups(case: Path) -> None:
    for stream, states in grown_bulk_streams(case):
        whole = _rewritten(stream, states, 1 << 30, 1)
        assert whole
        for slice_bytes, workers in ((24, 1), (100, 2), (700, 2)):
            assert _rewritten(stream, states, slice_bytes, workers) == whole, (case.name, slice_bytes)


@pytest.mark.java
def test_real_flink_restores_a_savepoint_migrated_in_slices(real_flink: ModuleType, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key group of these savepoints is larger than 64 bytes, so all are migrated in
    slices (by the CLI's own code, in this process), the other states' entries (lists, maps,
    timers) carried through them: compressed and uncompressed streams, heap and RocksDB layouts,
    TTL state."""
    from statemorph.cli.main import main

    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 64)
    sliced: list[int] = []

    slices_of = key_group_scan.KeyGroupCut.slices_of

    def counted(self: key_group_scan.KeyGroupCut, i: int, scratch: Any) -> Any:
        found = slices_of(self, i, scratch)
        sliced.extend(g.key_group for g in found)
        return found

    monkeypatch.setattr(key_group_scan.KeyGroupCut, "slices_of", counted)
    picked = [c for c in cases() if "events" in case_spec(c)["states"]
              and case_spec(c).get("flink", "2.3.0") == "2.3.0"]
    assert {case_spec(c)["compression"] for c in picked} == {True, False}
    items = []
    evolved = ("events", "ttl_events")
    for case in picked:
        op = state_operator(FlinkSavepoint(case / "savepoint"))
        schema = tmp_path / f"{case.name}.toml"
        schema.write_text("".join(f'[operators."{op}".states.{s}]\ntype = "{EVOLVED_EVENTS.replace(chr(34), "")}"\n'
                                  for s in evolved if s in case_spec(case)["states"]), encoding="utf-8")
        dst = tmp_path / case.name
        sliced.clear()
        assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst), "-q",
                     "--threads", "2"]) == 0
        assert len(sliced) > len(set(sliced)) > 1, case.name  # several key groups, each in several slices
        items.append((dst, case / "spec.json"))
    results = real_flink.restore(items, events_type=EVOLVED_EVENTS)
    for case, result in zip(picked, results, strict=True):
        assert result.ok, f"{case.name}: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in evolved else v
                for (k, s), v in expected(case).items()}
        assert got == want, case.name
