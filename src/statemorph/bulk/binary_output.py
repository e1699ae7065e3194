"""The binary outputs of encode and migrate: one builder of the final Arrow array, and the two
ways of filling its buffers (two passes: sizes then fill; one pass: into estimated buffers).

Why one builder: every path (kernels, one-pass kernels, the per-value reference) ends in the same
choice, ``binary`` with 32-bit offsets unless the caller's column is ``large_binary`` or the bytes
pass 2 GiB, and the same null handling; making it once keeps the output types identical.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from .chunks import MAX32, pooled, run_ranges
from .inputs import pack_validity
from .row_errors import RowErrors, kernel_error
from .tiers import abi


def binary_array(n: int, validity: pa.Buffer | None, nulls: int, offsets: np.ndarray, data: Any,
                 large: bool = False) -> pa.Array:
    """The Arrow array of ``n`` serialized entries: ``large_binary`` (int64 offsets) when ``large``
    or the data passes 2 GiB, else ``binary`` (int32 offsets)."""
    buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    if large or int(offsets[n]) > MAX32:
        return pa.Array.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets.astype(np.int64,
                                                                                                  copy=False)), buf],
                                     null_count=nulls)
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32, copy=False)), buf],
                                 null_count=nulls)


def binary_from_values(values: list[bytes | None]) -> pa.Array:
    """The Arrow array of entries serialized one by one (the per-value paths; None is null)."""
    n = len(values)
    offsets = np.zeros(n + 1, dtype=np.int64)
    valid = np.ones(n, dtype=np.uint8)
    for i, v in enumerate(values):
        if v is None:
            valid[i] = 0
            offsets[i + 1] = offsets[i]
        else:
            offsets[i + 1] = offsets[i] + len(v)
    validity, nulls = pack_validity(valid, n)
    return binary_array(n, validity, nulls, offsets, b"".join(v for v in values if v is not None))


def two_pass_output(n: int, ranges: list[tuple[int, int]], valid: np.ndarray | None, errors: RowErrors,
                    base: int, sizes: Callable[..., Any], fill: Callable[..., Any], large: bool) -> pa.Array:
    """Binary output in two passes: ``sizes`` per entry (a negative size is a bad entry), prefix
    sums, then ``fill`` into the exact-size buffer."""
    out_off = np.zeros(n + 1, dtype=np.int64)
    stop_at_error = errors.on_error == "raise"
    run_ranges(ranges, lambda s, e: sizes(s, e, out_off, stop_at_error))
    bad = errors.from_status(out_off[1:], base)
    if len(bad):
        out_off[bad + 1] = 0
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[bad] = 0
    np.cumsum(out_off[1:], out=out_off[1:])
    total = int(out_off[-1])
    out_data = np.empty(total, dtype=np.uint8)
    run_ranges(ranges, lambda s, e: fill(s, e, out_off, out_data))
    validity, nulls = pack_validity(valid, n)
    return binary_array(n, validity, nulls, out_off, out_data, large)


class _Part:
    """One range's one-pass output: its offsets (a window of the shared offsets array, positions
    relative to the range's own bytes) and its bytes packed into ``out`` (a window of the shared
    byte buffer, or a buffer of its own once it outgrew the window)."""

    def __init__(self, offs: np.ndarray, out: np.ndarray) -> None:
        self.offs = offs
        self.out = out
        self.own = False
        self.pos = 0
        self.shifted = 0  # what its offsets were shifted by on its thread (its window's start)
        self.bad: list[tuple[int, int | Exception]] = []

    def grow(self) -> None:
        """Double the byte buffer (an entry did not fit), keeping what is written; widen the
        offsets (to an array of its own) if the buffer passes what int32 offsets address."""
        size = 2 * len(self.out) + 64
        if self.offs.dtype == np.int32 and size > MAX32:
            self.offs = self.offs.astype(np.int64)
        bigger = pooled(size)
        bigger[:self.pos] = self.out[:self.pos]
        self.out, self.own = bigger, True


def one_pass_output(n: int, ranges: list[tuple[int, int]], valid: np.ndarray | None, errors: RowErrors, base: int,
                    run: Callable[..., tuple[int, int, int]], large: bool, estimate: Callable[[int, int], int],
                    fallback: Callable[[int], bytes | Exception] | None = None) -> pa.Array:
    """One-pass binary output. Each range (one per thread) packs its entries into its window of
    one shared buffer, sized from the input bytes plus the fixed-part growth of the plan, and the
    kernel writes the Arrow offsets itself into the range's window of the offsets array (int32
    unless the output may pass 2 GiB). Bad entries take no bytes and become nulls (or the first
    raises), each reported; the kernel stops at each one, so there is no per-entry status array.

    The windows follow each other with no slack between them (only the last has some), so where
    the estimate is exact (a plan that adds or reorders fields over entries without migrated
    arrays: every range fills its window to the byte) each range's bytes are at their final
    place when the threads end, its offsets shifted by its own thread: no copy of the output and
    no serial pass over it. Where a range falls short of its estimate (bad entries, migrated
    arrays), later ranges slide down to close the gaps, in place: peak memory stays input +
    output + a constant. A range that outgrew its window moves to a buffer of its own. An entry
    the kernel hands back to the per-value reference (``abi.HAND_BACK``) is written by ``fallback``, in
    place, or is a bad entry with the reference's error."""
    stop_at_error = errors.on_error == "raise"
    sizes = [estimate(s, e) for s, e in ranges]
    sizes[-1] += 64
    starts = [0, *itertools.accumulate(sizes[:-1])]
    shared = pooled(sum(sizes))
    out_off = pooled(n + 1, np.int64 if large or sum(sizes) > MAX32 else np.int32)
    out_off[0] = 0

    def fill_range(j: int, _: int) -> _Part:
        s, e = ranges[j]
        part = _Part(out_off[s:e + 1], shared[starts[j]:starts[j] + sizes[j]])
        i = 0
        while i < e - s:
            i, part.pos, status = run(s, i, e - s, part.offs, part.out, part.pos)
            got = fallback(s + i) if fallback is not None and status < 0 and \
                abi.decode_err(status)[0] == abi.HAND_BACK else None
            if isinstance(got, bytes):
                while len(part.out) - part.pos < len(got):
                    part.grow()
                part.out[part.pos:part.pos + len(got)] = np.frombuffer(got, dtype=np.uint8)
                part.pos += len(got)
                part.offs[i + 1] = part.pos
                i += 1
            elif status < 0:
                part.bad.append((s + i, status if got is None else got))
                i += 1
                if stop_at_error:
                    break
            elif i < e - s:
                part.grow()
        if starts[j] and not part.own:  # its final place if the ranges before it filled their windows
            part.offs[1:] += starts[j]
            part.shifted = starts[j]
        return part

    parts = run_ranges([(j, 0) for j in range(len(ranges))], fill_range)
    bad = sorted((b for p in parts for b in p.bad), key=lambda b: b[0])
    for row, status in bad:  # raises the first in 'raise'
        errors.add(status if isinstance(status, Exception) else kernel_error(status, base + row, errors.prog,
                                                                             errors.what))
    if bad:
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[[row for row, _ in bad]] = 0
    total = sum(p.pos for p in parts)
    if out_off.dtype == np.int32 and total > MAX32:
        out_off = pooled(n + 1, np.int64)  # a range outgrew int32 offsets: parts copy in below
        out_off[0] = 0
    own = len(parts) > 1 and any(p.own for p in parts)
    if len(parts) == 1:
        shared = parts[0].out
    elif own:
        shared = pooled(total)  # rare: a range outgrew its window
    at = 0
    for (s, e), p in zip(ranges, parts, strict=True):
        window = out_off[s + 1:e + 1]
        if not np.shares_memory(p.offs, out_off):
            np.copyto(window, p.offs[1:], casting="unsafe")
        if at != p.shifted:  # a range before it fell short of its window (or this one outgrew its own)
            window += at - p.shifted
        if p.out.ctypes.data != shared.ctypes.data + at:  # down (or across) to its final place
            ctypes.memmove(shared.ctypes.data + at, p.out.ctypes.data, p.pos)
        at += p.pos
    validity, nulls = pack_validity(valid, n)
    return binary_array(n, validity, nulls, out_off, shared[:total], large)


__all__ = ["binary_array", "binary_from_values", "one_pass_output", "two_pass_output"]
