"""Bulk encode: an Arrow array of values → a binary array of the bytes Flink writes.

Why here: the path per serializer comes from the capability table (fixed-width primitives,
strings and byte arrays in two passes; BinaryRowData and flink-core Row rows in one pass, with
machine code for large RowData chunks when ``llvmlite`` is installed); everything else, and any
entry the kernels hand back, goes through the reference serializer value by value.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import SerializationError, StateFormatError, check_on_error
from . import capabilities, inputs, tiers
from .binary_output import binary_array, binary_from_values, two_pass_output
from .capabilities import core_row_program, fixed_kind, row_program
from .chunks import MAX32, Widen, grow_buffer, per_chunk, pooled, resume, run_ranges, thread_ranges
from .inputs import binary_input, cast_to, core_row_columns, pack_validity, row_columns, validity_bits
from .row_errors import BulkResult, RowErrors, Settle, kernel_error, locate
from .tiers import KernelTier, abi, jit, plans, primitives_py, rowdata_py
from .types import arrow_type, from_arrow_value, large_variant, logical_from_arrow


def encode(array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> BulkResult:
    """Serialize every value of an Arrow array with ``serializer``: a BinaryArray of the bytes
    Flink writes (null in → null out), in a :class:`BulkResult`. A value the serializer refuses
    raises :class:`SerializationError` naming the row and field path (``on_error="raise"``), or
    becomes a null (``"null"``) or is left out (``"skip"``), its error in the result."""
    check_on_error(on_error)
    k = tiers.current()
    return per_chunk(array, lambda a, base: _encode_chunk(k, a, serializer, threads, on_error, base), on_error)


def _encode_chunk(k: KernelTier, arr: pa.Array, serializer: Any, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    ranges = thread_ranges(n, threads)
    fixed = fixed_kind(serializer)
    family = codec.family if (codec := capabilities.codec(serializer)) is not None else None
    prog = row_program(serializer, encode=True)
    errors = RowErrors(on_error, f"encode with {type(serializer).__name__}", prog)
    large = False
    if fixed is not None:
        kind, at = fixed
        arr = cast_to(arr, at, "encode")
        w = primitives_py.kind_width(kind)
        valid = validity_bits(arr)
        validity, values = arr.buffers()[:2]
        validity = validity if arr.null_count else None

        def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
            out_off[s + 1:e + 1] = w if valid is None else valid[s:e].astype(np.int64) * w

        def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
            k.fixed_encode(kind, values, validity, arr.offset, s, e, out_off, out)

    elif family in ("varlen", "bytes"):
        assert codec is not None and codec.arrow is not None
        if arr.type not in (codec.arrow, large_variant(codec.arrow)):
            arr = cast_to(arr, codec.arrow, "encode")
        offsets, data, validity, offset, wide = binary_input(arr)
        valid = validity_bits(arr)
        large = wide
        fill_kernel = getattr(k, f"{codec.kernel}_encode_fill")

        if family == "varlen":
            sizes_kernel = getattr(k, f"{codec.kernel}_encode_sizes")

            def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
                sizes_kernel(offsets, data, validity, offset, wide, s, e, out_off, stop)
        else:
            raw = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32)[offset:offset + n + 1]

            def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
                lens = np.diff(raw[s:e + 1]).astype(np.int64) + 4
                out_off[s + 1:e + 1] = lens if valid is None else lens * valid[s:e]

        def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
            fill_kernel(offsets, data, validity, offset, wide, s, e, out_off, out)

    elif prog is not None:
        arr = cast_to(arr, arrow_type(serializer.row_type), "encode")
        cols = row_columns(arr, serializer.row_type, prog)
        return errors.result(_encode_rows(k, prog, cols, n, ranges, errors, base, arr, serializer))
    elif (core := core_row_program(serializer)) is not None \
            and (core_cols := core_row_columns(arr, core)) is not None:
        return errors.result(_encode_core_rows(k, arr, core, core_cols, ranges, errors, base))
    else:
        return encode_per_value(arr, serializer, errors, base)
    out = two_pass_output(n, ranges, valid, errors, base, sizes, fill, large)
    return errors.result(out)


def _encode_bound(prog: plans.RowProgram, cols: list[Any]) -> Callable[[int, int], int]:
    """Output bytes of entries ``s..e``, an upper bound for rows of primitives and strings: the
    length word and every row's fixed part per entry, plus each string's bytes rounded up to 8
    (at most its Arrow bytes + 7). With ARRAY fields it is a guess (the buffer grows)."""
    fixed = 4
    spans = []
    for row, (_, values, offs, off, wide, _) in zip(prog.matrix.tolist(), cols, strict=True):
        if row[abi.COL_KIND] == abi.SLOT_ROW:
            fixed += rowdata_py._null_bits_size(row[abi.COL_ARITY]) + 8 * row[abi.COL_ARITY]
        elif row[abi.COL_KIND] in (abi.SLOT_STR, abi.SLOT_BIN):
            fixed += 7
            spans.append(inputs.input_spans(offs, off, wide, len(memoryview(values).cast("B")), 0))
        elif row[abi.COL_KIND] in (abi.SLOT_ARRAY, abi.SLOT_MAP):
            fixed += 16  # a guess only (elements are not rows): the buffer grows if it is short
    return lambda s, e: fixed * (e - s) + sum(span(s, e) for span in spans)


def _encode_rows(k: KernelTier, prog: plans.RowProgram, cols: list[Any], n: int, ranges: list[tuple[int, int]],
                 errors: RowErrors, base: int, arr: pa.Array, serializer: Any) -> pa.Array:
    """RowData encode in one pass (``encode_run``): every range packs its entries into its own
    buffer, sized from :func:`_encode_bound` (so it never grows for rows of primitives and
    strings); ranges are then appended to the first one and their offsets shifted. The kernel
    writes the int32 offsets and the validity bitmap itself."""
    bound = _encode_bound(prog, cols)
    total_bound = bound(0, n)
    settle = Settle(arr, serializer, encode_per_value, errors, base)
    try:
        out = _encode_rows_with(k, prog, cols, n, ranges, errors, settle, bound, total_bound > MAX32)
    except Widen:
        out = _encode_rows_with(k, prog, cols, n, ranges, errors, settle, bound, True)
    return settle.splice(out)


def _encode_rows_with(k: KernelTier, prog: plans.RowProgram, cols: list[Any], n: int, ranges: list[tuple[int, int]],
                      errors: RowErrors, settle: Settle, bound: Callable[[int, int], int], wide: bool) -> pa.Array:
    matrix = prog.matrix
    out_off: np.ndarray = np.empty(n + 1, dtype=np.int64 if wide else np.int32)
    out_off[0] = 0
    out_valid = np.zeros((n + 7) // 8, dtype=np.uint8)
    stop_at_error = errors.on_error == "raise"
    code, extra = tiers.machine_code(jit.encode_code, matrix, k, n)  # hold ``code`` while the kernels run

    # every range writes into its own region of one buffer (sized by the bound; pages never
    # touched cost nothing); the regions are then moved together in place
    sizes = [bound(s, e) + 64 for s, e in ranges]
    region = {s: (a, a + z) for (s, _), a, z in zip(ranges, np.cumsum([0] + sizes[:-1]).tolist(), sizes,
                                                   strict=True)}
    shared = pooled(sum(sizes))

    def encode_range(s: int, e: int) -> tuple[np.ndarray, int, int, list[tuple[int, int]]]:
        out: list[Any] = [shared[region[s][0]:region[s][1]], 0, 0]

        def run(i: int) -> tuple[int, int]:
            i, out[1], status, written = k.encode_run(matrix, cols, i, e, out_off, out[0], out[1], out_valid,
                                                      *extra)
            out[2] += written
            return i, status

        def grow() -> None:
            out[0] = grow_buffer(out[0], out[1], wide)

        bad = resume(run, s, e, stop_at_error, grow)
        return out[0], out[1], out[2], bad

    parts = run_ranges(ranges, encode_range)
    settle([b for p in parts for b in p[3]])
    in_place = all(p[0].base is shared for p in parts)  # no range grew past its bound
    data = shared if in_place else np.empty(sum(p[1] for p in parts), dtype=np.uint8)
    total = 0
    for (s, e), (buf, pos, _, _) in zip(ranges, parts, strict=True):
        if not in_place:
            data[total:total + pos] = buf[:pos]
        elif s:
            ctypes.memmove(data.ctypes.data + total, buf.ctypes.data, pos)  # down, overlap-safe
        if s:
            if not wide and total + pos > MAX32:
                out_off, wide = out_off.astype(np.int64), True
            out_off[s + 1:e + 1] += total
        total += pos
    nulls = n - sum(p[2] for p in parts)
    validity = pa.py_buffer(out_valid) if nulls else None
    return binary_array(n, validity, nulls, out_off, data[:total])


def encode_per_value(arr: pa.Array, serializer: Any, errors: RowErrors, base: int) -> tuple[pa.Array, list[Exception]]:
    """Encode through the reference serializer, one value at a time (serializers without a kernel,
    and entries the kernels hand back)."""
    row_type = getattr(serializer, "row_type", None)
    from_arrow: Callable[[Any], Any] = (lambda v: logical_from_arrow(v, row_type)) if row_type is not None \
        else from_arrow_value(serializer)
    out = errors.per_value(arr.to_pylist(), lambda v: serializer.to_bytes(from_arrow(v)), base,
                           (SerializationError, StateFormatError, TypeError, ValueError), _encode_error)
    return errors.result(binary_from_values(out))


def _encode_error(e: Exception, row: int) -> SerializationError:
    err = locate(SerializationError(f"encode: row {row}: {e}"), row, "")
    err.__cause__ = e
    return err


def _core_encode_estimate(prog: plans.RowProgram, cols: list[Any]) -> Callable[[int, int], int]:
    """Output bytes of rows ``s..e``, to size the buffer: exact for masks and fixed-width fields
    (as if none were null), the Arrow bytes plus a one-byte header for strings (exact for ASCII
    below 128 characters; wider text grows the buffer) and plus four for byte arrays."""
    per_row = 0
    spans: list[tuple[np.ndarray, int]] = []
    for node, row in enumerate(prog.matrix):
        kind = int(row[abi.COL_KIND])
        if kind == abi.LEAF_ROW:
            per_row += (int(row[abi.COL_ARITY]) + (2 if row[abi.COL_FLAGS] & abi.FLAG_ROW_KIND else 0) + 7) >> 3
        elif kind in (abi.LEAF_STR, abi.LEAF_BYTES):
            per_row += 1 if kind == abi.LEAF_STR else 4
            _, _, offs, off, wide, _ = cols[node]
            spans.append((np.frombuffer(offs, dtype=np.int64 if wide else np.int32), off))
        else:
            per_row += int(row[abi.COL_WIDTH])

    def est(s: int, e: int) -> int:
        text = sum(max(0, int(o[off + e]) - int(o[off + s])) for o, off in spans)
        return per_row * (e - s) + text + 64

    return est


def _encode_core_rows(k: KernelTier, arr: pa.Array, prog: plans.RowProgram, cols: list[Any],
                      ranges: list[tuple[int, int]], errors: RowErrors, base: int) -> pa.Array:
    """One pass per range: the kernel packs rows into a buffer sized from the input (grown when
    short) and writes int32 offsets itself (int64 only past 2 GiB); it stops at a bad row, which
    is recorded here, and resumes after it."""
    n = len(arr)
    matrix = prog.matrix
    est = _core_encode_estimate(prog, cols)
    bad: list[tuple[int, int]] = []

    def encode_core_range(s: int, e: int, out_off: np.ndarray) -> tuple[np.ndarray, int] | None:
        buf = np.empty(est(s, e), dtype=np.uint8)
        i, pos = s, 0
        while True:
            i, pos, status = k.corerow_encode(matrix, cols, i, e, out_off, buf, pos)
            if status == 0:
                return buf, pos
            if status < 0:
                bad.append((i, status))
                if errors.on_error == "raise":
                    return buf, pos
                i += 1
            elif out_off.itemsize == 4 and status > MAX32:
                return None  # int32 offsets would overflow
            else:
                bigger = np.empty(max(status, 2 * len(buf)), dtype=np.uint8)
                bigger[:pos] = buf[:pos]
                buf = bigger

    def attempt(dtype: type) -> tuple[np.ndarray, list[tuple[np.ndarray, int] | None]]:
        out_off: np.ndarray = np.empty(n + 1, dtype=dtype)
        out_off[0] = 0
        bad.clear()
        return out_off, run_ranges(ranges, lambda s, e: encode_core_range(s, e, out_off))

    out_off, parts = attempt(np.int32)
    if any(p is None for p in parts):  # past 2 GiB: the whole chunk again with int64 offsets
        out_off, parts = attempt(np.int64)
    for i, status in sorted(bad):
        errors.add(kernel_error(status, base + i, prog, errors.what))
    done = [p for p in parts if p is not None]
    total = sum(pos for _, pos in done)
    if out_off.itemsize == 4 and total > MAX32:
        out_off = out_off.astype(np.int64)
    if len(done) == 1:
        out_data = done[0][0][:done[0][1]]
    else:
        out_data = np.empty(total, dtype=np.uint8)
        at = 0
        for (s, e), (buf, pos) in zip(ranges, done, strict=True):
            out_data[at:at + pos] = buf[:pos]
            np.add(out_off[s + 1:e + 1], at, out=out_off[s + 1:e + 1])
            at += pos
    valid = validity_bits(arr)
    if bad:
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[[i for i, _ in bad]] = 0
    vbuf, nulls = pack_validity(valid, n)
    return binary_array(n, vbuf, nulls, out_off, out_data, large=out_off.itemsize == 8)


__all__ = ["encode", "encode_per_value"]
