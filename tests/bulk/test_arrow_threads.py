"""``arrow.migrate`` (and ``arrow.decode``) split across threads: every thread count (1..4) gives
the same array, byte for byte, on both kernel tiers and through the machine code, as the
per-value reference; arrays that split unevenly, none, one entry, nulls and bad entries included.
The split is forced on small arrays (``SPLIT_MIN_ROWS``) and the machine code on small chunks
(``MACHINE_CODE_MIN``), so hypothesis reaches every range boundary."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import TIERS

from statemorph import arrow, bulk, kernels, serializers
from statemorph.bulk import chunks
from statemorph.migration import migrate_bytes

# a plan whose output estimate is exact (fields added and reordered: ranges land in place) ...
EXACT_OLD = "ROW<id BIGINT, meta ROW<u INT, ts BIGINT, dev STRING>>"
EXACT_NEW = "ROW<id BIGINT, meta ROW<dev STRING, loc STRING, u INT, ts BIGINT, app STRING, sid BIGINT>>"
# ... and one whose estimate is not (array elements migrated: later ranges slide down)
SHORT_OLD = "ROW<a BIGINT, r ROW<u INT, s STRING, xs ARRAY<ROW<p INT, q STRING>>>>"
SHORT_NEW = "ROW<r ROW<s STRING, u INT, xs ARRAY<ROW<q STRING, z DOUBLE, p INT>>>, a BIGINT>"

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
exact_row = st.tuples(int64, st.one_of(st.none(), st.tuples(int32, int64, st.one_of(st.none(), text))))
inner = st.one_of(st.none(), st.tuples(st.one_of(st.none(), int32), st.one_of(st.none(), text)))
short_row = st.tuples(int64, st.one_of(st.none(), st.tuples(int32, st.one_of(st.none(), text),
                                                     st.one_of(st.none(), st.lists(inner, max_size=3)))))


@pytest.fixture
def forced_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "SPLIT_MIN_ROWS", 1)
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)


def _every_way(blobs: list[bytes | None], old: str, new: str) -> None:
    so, sn = serializers.RowDataSerializer(old), serializers.RowDataSerializer(new)
    snap = so.snapshot_configuration()
    arr = pa.array(blobs, pa.binary())
    expected = [None if b is None else migrate_bytes(snap, sn, b) for b in blobs]
    first = None
    with pytest.MonkeyPatch.context() as mp:
        for name in TIERS:
            mp.setattr(kernels, "KERNELS", kernels.tier(name))
            for threads in (1, 2, 3, 4):
                out = arrow.migrate(arr, snap, sn, threads=threads)
                assert out.to_pylist() == expected, (name, threads)
                first = out if first is None else first
                # the same buffers, not only the same values: offsets and bytes of every thread count
                assert out.buffers()[1].equals(first.buffers()[1]) and out.buffers()[2].equals(first.buffers()[2])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), exact_row), max_size=300))
def test_exact_estimate_every_thread_count(forced_split: None, rows: list[Any]) -> None:
    so = serializers.RowDataSerializer(EXACT_OLD)
    _every_way([None if r is None else so.to_bytes(r) for r in rows], EXACT_OLD, EXACT_NEW)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), short_row), max_size=300))
def test_short_estimate_every_thread_count(forced_split: None, rows: list[Any]) -> None:
    so = serializers.RowDataSerializer(SHORT_OLD)
    _every_way([None if r is None else so.to_bytes(r) for r in rows], SHORT_OLD, SHORT_NEW)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), short_row), max_size=300))
def test_decode_every_thread_count(forced_split: None, rows: list[Any]) -> None:
    """Decode's ranges join their string columns (``chunks.joined``): the same array at every
    thread count, on both tiers."""
    so = serializers.RowDataSerializer(SHORT_OLD)
    arr = pa.array([None if r is None else so.to_bytes(r) for r in rows], pa.binary())
    first = None
    with pytest.MonkeyPatch.context() as mp:
        for name in TIERS:
            mp.setattr(kernels, "KERNELS", kernels.tier(name))
            for threads in (1, 2, 3, 4):
                out = arrow.decode(arr, so, threads=threads)
                first = out if first is None else first
                assert out.equals(first), (name, threads)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 129, 1000])
def test_sizes_at_the_range_edges(forced_split: None, n: int) -> None:
    so = serializers.RowDataSerializer(EXACT_OLD)
    rows = [None if i % 7 == 3 else (i, (i, 10 * i, "d" * (i % 11))) for i in range(n)]
    _every_way([None if r is None else so.to_bytes(r) for r in rows], EXACT_OLD, EXACT_NEW)


def test_bad_entries_in_several_ranges(forced_split: None) -> None:
    so, sn = serializers.RowDataSerializer(EXACT_OLD), serializers.RowDataSerializer(EXACT_NEW)
    snap = so.snapshot_configuration()
    good = [so.to_bytes((i, (i, i, "device"))) for i in range(400)]
    blobs: list[bytes | None] = [b[:-3] if i % 97 == 5 else b for i, b in enumerate(good)]
    arr = pa.array(blobs, pa.binary())
    one = bulk.migrate(arr, snap, sn, on_error="null", threads=1)
    for threads in (2, 3, 4):
        out = bulk.migrate(arr, snap, sn, on_error="null", threads=threads)
        assert out.values.equals(one.values) and out.bad_rows == one.bad_rows
        assert [str(e) for e in out.errors] == [str(e) for e in one.errors]
    assert one.bad_rows == [i for i in range(400) if i % 97 == 5]
    with pytest.raises(Exception, match="row 5"):
        arrow.migrate(arr, snap, sn, threads=4)


def test_ranges_run_on_a_pool_kept_between_calls(forced_split: None) -> None:
    """Calls with threads > 1 start no thread each: the range pool is made once and kept."""
    so, sn = serializers.RowDataSerializer(EXACT_OLD), serializers.RowDataSerializer(EXACT_NEW)
    arr = pa.array([so.to_bytes((i, (i, i, "x"))) for i in range(500)], pa.binary())
    arrow.migrate(arr, so.snapshot_configuration(), sn, threads=4)
    before = {t.ident for t in threading.enumerate()}
    for _ in range(5):
        arrow.migrate(arr, so.snapshot_configuration(), sn, threads=4)
    assert {t.ident for t in threading.enumerate()} == before


def test_run_ranges_raises_the_first_error_in_range_order() -> None:
    def fn(s: int, e: int) -> int:
        if s >= 2:
            raise ValueError(f"range {s}")
        return s

    with pytest.raises(ValueError, match="range 2"):
        chunks.run_ranges([(0, 1), (1, 2), (2, 3), (3, 4)], fn)
    assert chunks.run_ranges([(0, 1), (1, 2), (2, 3)], lambda s, e: np.int64(s * 10)) == [0, 10, 20]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_starts_its_own_range_pool(forced_split: None) -> None:
    """A Spark Python worker is forked from a daemon that may have split arrays already: the
    parent's range threads do not exist in the child, which must not hand its ranges to them."""
    so, sn = serializers.RowDataSerializer(EXACT_OLD), serializers.RowDataSerializer(EXACT_NEW)
    snap = so.snapshot_configuration()
    arr = pa.array([so.to_bytes((i, (i, i, "x"))) for i in range(500)], pa.binary())
    want = arrow.migrate(arr, snap, sn, threads=1)
    arrow.migrate(arr, snap, sn, threads=4)  # the parent's pool: started, ...
    for _ in range(3):  # ... every one of its threads started and idle
        chunks.run_ranges([(i, i + 1) for i in range(4)], lambda s, e: time.sleep(0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: this is what it tests
        pid = os.fork()
    if pid == 0:  # the child: exit 0 only with the right array, within the parent's patience
        code = 1
        try:
            code = 0 if arrow.migrate(arr, snap, sn, threads=4).equals(want) else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung handing its ranges to its parent's threads")
