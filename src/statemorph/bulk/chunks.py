"""How a bulk call is cut into pieces: Arrow chunks, thread ranges, and the buffers that grow (or
switch to 64-bit offsets) when a range's output would not fit.

Why: chunked arrays keep their chunking, threads never share a validity byte, and an output past
2 GiB must use 64-bit offsets (``large_binary``) instead of overflowing 32-bit ones.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import pyarrow as pa

from .inputs import as_arrow
from .row_errors import BulkResult, finish, rerouted

MAX32 = (1 << 31) - 1


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one (a container or
    ``taskset`` limits it), else every core of the machine. Why: a thread count that defaults to a
    fixed number leaves most of a large machine idle, and one past the affinity only adds
    switching."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


DEFAULT_THREADS = usable_cores()
"""Every worker-thread count that defaults (the local engine, the readers, ``--threads``)."""


def pooled(count: int, dtype: Any = np.uint8) -> np.ndarray:
    """An uninitialised numpy array over a buffer from Arrow's memory pool, for the one-pass
    migrate outputs (``pa.py_buffer`` of it, or of a slice, hands it to Arrow without a copy).

    Why the pool: a fresh numpy array this large comes straight from mmap, and the kernel then pays
    a page fault (and the OS's zeroing) on every page it writes: ~10 ms per 100 MB, as much as a
    migration itself. The pool (mimalloc / jemalloc) reuses the pages of a batch freed shortly
    before, as in a streaming rewrite. (Not used for decode: its many zero-initialised columns
    gain nothing, ``np.zeros`` gets them zeroed lazily by the OS.)"""
    return np.frombuffer(pa.allocate_buffer(count * np.dtype(dtype).itemsize), dtype=dtype)


SPLIT_MIN_ROWS = 1024
"""Rows below which an array is not split across threads (handing a range over costs more)."""


def thread_ranges(n: int, threads: int) -> list[tuple[int, int]]:
    """Row ranges, one per thread, on whole bitmap bytes; one range for small chunks. The last
    range may be shorter than the others (or a thread may get none: rounding to bitmap bytes)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads == 1 or n < SPLIT_MIN_ROWS:
        return [(0, n)]
    step = -(-n // threads)
    step = (step + 63) & ~63  # chunk bounds on whole bitmap bytes: threads never share a byte
    return [(s, min(n, s + step)) for s in range(0, n, step)]


class _RangePool:
    """The threads :func:`run_ranges` hands ranges to, started once per process and kept.

    Why kept: a pool started per call costs a thread start per range and call, a cost that grows
    with the thread count and is paid again for every Arrow chunk (and every small batch of an
    engine). It only grows (to the most ranges asked for at once, less the caller's own); a
    forked child (a Spark Python worker) starts its own, since the parent's threads do not exist
    there. ``fn`` never calls :func:`run_ranges` itself (the kernels do not), so a range never
    waits for a range queued behind it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._size = 0

    def get(self, workers: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._size < workers:
                # the smaller pool is dropped, not shut down (a caller may still be handing it
                # ranges): its threads end once it is collected
                self._pool, self._size = ThreadPoolExecutor(workers, "statemorph-range"), workers
            return self._pool

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._pool, self._size = None, 0


_RANGES = _RangePool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RANGES.forget)


def run_ranges(ranges: list[tuple[int, int]], fn: Callable[[int, int], Any]) -> list[Any]:
    """``fn(start, end)`` of every range, the first on the calling thread and each other on a
    thread of a pool kept for the process (the compiled kernels release the GIL for their whole
    loop); results in range order."""
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    pool = _RANGES.get(len(ranges) - 1)
    futures = [pool.submit(fn, *r) for r in ranges[1:]]
    try:
        first = fn(*ranges[0])
    finally:
        rest = [f.exception() for f in futures]  # every range done before anything is returned or raised
    for err in rest:
        if err is not None:
            raise err
    return [first, *(f.result() for f in futures)]


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """The byte arrays ``parts`` end to end in one new buffer, each copied by a thread of its own
    (:func:`run_ranges`; ``memmove`` releases the GIL): the join of per-range outputs that no
    thread could write in place, at the cost of its largest part instead of the sum."""
    if len(parts) == 1:
        return parts[0]
    starts = [0, *itertools.accumulate(len(p) for p in parts)]
    out = pooled(starts[-1])

    def copy(j: int, _: int) -> None:
        if len(parts[j]):
            ctypes.memmove(out.ctypes.data + starts[j], parts[j].ctypes.data, len(parts[j]))

    run_ranges([(j, 0) for j in range(len(parts))], copy)
    return out


def ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int, depth: int = 0,
                pool: Executor | None = None) -> Iterator[Any]:
    """``fn(item)`` of every item, in order, computed by ``workers`` threads with at most
    ``depth`` (default ``2 * workers``) items in flight: a streaming pipeline whose consumer (the
    caller, e.g. a writer) overlaps with the work on the next items. The work must release the
    GIL to gain (the kernels, the codecs and file IO do). The first error is raised in order;
    closing the iterator early cancels what has not started and waits for the rest.

    ``pool``: the threads to run on, shared with other ``ordered_map`` consumers (several files
    rewritten at once take their work from one set of workers); it is left running at the end.
    Its queue must run items in the order they were handed in (a ``ThreadPoolExecutor`` does):
    an item may wait for one handed in before it, never after."""
    if workers <= 1 and pool is None:
        for item in items:
            yield fn(item)
        return
    depth = depth or 2 * workers
    pending: deque[Future[Any]] = deque()
    own = pool is None
    pool = ThreadPoolExecutor(max_workers=workers) if pool is None else pool
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        if own:
            pool.shutdown(wait=True)
        else:
            wait(pending)


class PlacedInOrder:
    """Finished pieces of one file written at their place by the worker threads that made them,
    so the thread that keeps the file's order writes nothing itself.

    Piece ``seq`` (numbered from 0 in file order) is handed over with :meth:`put` by its worker;
    each piece's place is where the one before it ends (from ``start``), so pieces wait here
    until every earlier one has come, and the worker that completes the in-order run writes that
    run (``write_at(offset, buffer)``, outside the lock: several workers write at once). Only
    the ``put`` of the first missing piece writes, so piece ``j`` is written by the worker of a
    piece ``i <= j`` before that worker's ``put`` returns: the consumer of an :func:`ordered_map`
    whose work ends with ``put`` holds piece ``j`` 's result only when every byte of the pieces
    up to ``j`` is in the file. A ``write_at`` error is raised by the worker that wrote (so, in
    order, at or before the piece it concerns)."""

    def __init__(self, write_at: Callable[[int, Any], None], start: int) -> None:
        self._write_at = write_at
        self._lock = threading.Lock()
        self._waiting: dict[int, list[Any]] = {}
        self._next = 0
        self._pos = start

    def put(self, seq: int, buffers: list[Any]) -> None:
        writes = []
        with self._lock:
            self._waiting[seq] = buffers
            while self._next in self._waiting:
                for buf in self._waiting.pop(self._next):
                    n = memoryview(buf).nbytes
                    if n:
                        writes.append((self._pos, buf))
                    self._pos += n
                self._next += 1
        for offset, buf in writes:
            self._write_at(offset, buf)


def per_chunk(obj: Any, fn: Callable[[pa.Array, int], tuple[Any, list[Exception]]], on_error: str) -> BulkResult:
    """Apply ``fn(chunk, first_row)`` (→ output, errors) to each chunk of a (chunked) array and
    reassemble the outputs, one chunk out per chunk in; then apply the ``on_error`` policy."""
    arr = as_arrow(obj)
    if not isinstance(arr, pa.ChunkedArray):
        return finish(*fn(arr, 0), on_error)
    outs: list[pa.Array] = []
    errors: list[Exception] = []
    base = 0
    for chunk in arr.chunks:
        out, errs = fn(chunk, base)
        outs.append(out)
        errors.extend(errs)
        base += len(chunk)
    out_type = outs[0].type if outs else None
    if any(o.type != out_type for o in outs):  # binary vs large_binary across chunks
        out_type = pa.large_binary()
        outs = [o.cast(out_type) for o in outs]
    result = pa.chunked_array(outs, type=out_type) if outs else pa.chunked_array([], type=pa.binary())
    return finish(result, errors, on_error)


class Widen(Exception):
    """int32 offsets would pass 2**31 - 1: redo the chunk with int64 offsets (rare: > 2 GiB)."""


def grow_buffer(buf: np.ndarray, keep: int, wide: bool) -> np.ndarray:
    """A buffer twice as large holding ``buf[:keep]``; int32 offsets cannot address past 2**31 - 1."""
    if not wide and len(buf) >= MAX32:
        raise Widen
    bigger = np.empty(2 * len(buf) + 64, dtype=np.uint8)
    bigger[:keep] = buf[:keep]
    return bigger


def resume(run: Callable[[int], tuple[int, int]], s: int, e: int, stop_at_error: bool,
           grow: Callable[[], None]) -> list[tuple[int, int]]:
    """Drive a one-pass kernel over rows ``s..e`` (``run(i)`` → ``(next_row, status)``): record a
    bad entry and resume after it (or stop there, with ``stop_at_error``); grow the output buffers
    and resume when they are full. Returns the (row, encoded error) pairs."""
    i, bad = s, []
    while i < e:
        i, status = run(i)
        if i >= e:
            break
        if status < 0:
            bad.append((i, status))
            if stop_at_error and not rerouted(status):
                break
            i += 1
        else:
            grow()
    return bad


__all__ = ["MAX32", "PlacedInOrder", "Widen", "grow_buffer", "joined", "ordered_map", "per_chunk", "pooled", "resume",
           "run_ranges", "thread_ranges"]
