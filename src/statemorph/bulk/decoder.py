"""Bulk decode: a binary array of serialized values → an Arrow array of the values (a struct for
rows).

Why here: the path per serializer comes from the capability table (fixed-width primitives,
strings and byte arrays in two passes; BinaryRowData and flink-core Row rows in one pass, the
kernels scattering each entry into per-field Arrow buffers); everything else, and any entry the
kernels hand back, goes through the reference serializer value by value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import MalformedDataError, StateFormatError, StatemorphError, UnrepresentableValueError, check_on_error
from ..types import RowType
from . import capabilities, inputs, tiers
from .capabilities import core_row_program, fixed_kind, row_program
from .chunks import MAX32, Widen, grow_buffer, joined, per_chunk, resume, run_ranges, thread_ranges
from .inputs import binary_input, pack_validity, validity_bits
from .row_errors import BulkResult, RowErrors, Settle, locate, per_row_error, rerouted
from .tiers import KernelTier, abi, jit, plans, primitives_py, rowdata_py
from .types import arrow_type, arrow_type_for, large_variant, logical_to_arrow, to_arrow_value


def decode(binary_array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> BulkResult:
    """Deserialize every entry of a BinaryArray: an Arrow array of values (a StructArray for rows),
    in a :class:`BulkResult`. A bad entry raises a :class:`StateFormatError` naming the row and
    field path (``on_error="raise"``), or becomes a null (``"null"``) or is left out (``"skip"``),
    its error in the result."""
    check_on_error(on_error)
    k = tiers.current()
    return per_chunk(binary_array, lambda a, base: _decode_chunk(k, a, serializer, threads, on_error, base),
                     on_error)


def _decode_chunk(k: KernelTier, arr: pa.Array, serializer: Any, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    ranges = thread_ranges(n, threads)
    offsets, data, validity, offset, wide = binary_input(arr)
    fixed = fixed_kind(serializer)
    family = codec.family if (codec := capabilities.codec(serializer)) is not None else None
    prog = row_program(serializer)
    errors = RowErrors(on_error, f"decode with {type(serializer).__name__}", prog)
    if prog is not None:
        return errors.result(_decode_rows(k, serializer, prog, n, ranges, errors, base,
                                          (offsets, data, validity, offset, wide), arr))
    stop_at_error = on_error == "raise"
    status = np.zeros(n, dtype=np.int64)
    valid = validity_bits(arr)
    valid = np.ones(n, dtype=np.uint8) if valid is None else valid

    def finish_valid(bad: np.ndarray) -> tuple[pa.Buffer | None, int]:
        valid[bad] = 0
        valid[status == 1] = 0
        return pack_validity(valid, n)

    if fixed is not None:
        kind, at = fixed
        w = primitives_py.kind_width(kind)
        out = np.zeros(n * w, dtype=np.uint8)
        run_ranges(ranges, lambda s, e: k.fixed_decode(kind, offsets, data, validity, offset, wide, s, e, out, status,
                                                 stop_at_error))
        bad = errors.from_status(status, base)
        vbuf, nulls = finish_valid(bad)
        values = pa.py_buffer(np.packbits(out, bitorder="little")) if kind == abi.LEAF_BOOL else pa.py_buffer(out)
        return errors.result(pa.Array.from_buffers(at, n, [vbuf, values], null_count=nulls))
    if family in ("varlen", "bytes"):
        assert codec is not None and codec.arrow is not None
        sizes_fn = getattr(k, f"{codec.kernel}_decode_sizes")
        fill_fn = getattr(k, f"{codec.kernel}_decode_fill")
        out_off = np.zeros(n + 1, dtype=np.int64)
        run_ranges(ranges, lambda s, e: sizes_fn(offsets, data, validity, offset, wide, s, e, out_off, status,
                                           stop_at_error))
        bad = errors.from_status(status, base)
        out_off[bad + 1] = 0
        np.cumsum(out_off[1:], out=out_off[1:])
        out_data = np.empty(int(out_off[-1]), dtype=np.uint8)
        run_ranges(ranges, lambda s, e: fill_fn(offsets, data, validity, offset, wide, s, e, out_off, status, out_data))
        vbuf, nulls = finish_valid(bad)
        large = int(out_off[-1]) > MAX32
        at = large_variant(codec.arrow) if large else codec.arrow
        obuf = pa.py_buffer(out_off if large else out_off.astype(np.int32))
        return errors.result(pa.Array.from_buffers(at, n, [vbuf, obuf, pa.py_buffer(out_data)], null_count=nulls))
    if (core := core_row_program(serializer)) is not None:
        return errors.result(_decode_core_rows(k, arr, serializer, core, ranges, errors, valid, base))
    return decode_per_value(arr, serializer, errors, base)


def _decode_rows(k: KernelTier, serializer: Any, prog: plans.RowProgram, n: int, ranges: list[tuple[int, int]],
                 errors: RowErrors, base: int, src: inputs.BinaryInput, arr: pa.Array) -> pa.Array:
    """RowData decode in one pass (``decode_run``): the kernel validates each entry and scatters it
    into per-node Arrow buffers (validity bits, values, int32 string / list offsets) and counts the
    valid values itself. Each range appends string bytes to its own buffers, sized from the input
    bytes (an upper bound unless the input is hostile: then they grow); ranges are then joined.
    ARRAY element columns (map keys and values too) are indexed by element and grow as they fill,
    so with arrays or maps the chunk is one range."""
    offsets, data, validity, offset, wide = src
    span = inputs.input_spans(offsets, offset, wide, len(data), n)
    row_type = serializer.row_type
    settle = Settle(arr, serializer, decode_per_value, errors, base)
    try:
        out = _decode_rows_with(k, row_type, prog, n, ranges, settle, src, span, span(0, n) > MAX32)
    except Widen:
        out = _decode_rows_with(k, row_type, prog, n, ranges, settle, src, span, True)
    return settle.splice(out)


def _decode_rows_with(k: KernelTier, row_type: RowType, prog: plans.RowProgram, n: int, ranges: list[tuple[int, int]],
                      settle: Settle, src: inputs.BinaryInput, span: Callable[[int, int], int],
                      wide_str: bool) -> pa.Array:
    kinds = prog.kinds
    nnodes = len(kinds)
    nbytes = (n + 7) // 8
    elem = [a >= 0 for a in rowdata_py._arrays(prog.matrix.tolist())]
    if any(elem):
        ranges = [(0, n)]  # element columns grow as they fill: one range
    strs = [c for c in range(1, nnodes) if kinds[c] in (abi.SLOT_STR, abi.SLOT_BIN)]
    bits = [np.zeros(nbytes, dtype=np.uint8) for _ in kinds]
    vals: list[Any] = [None] * nnodes
    soffs: list[Any] = [None] * nnodes
    for c in range(1, nnodes):
        if elem[c]:
            continue
        if kinds[c] == abi.SLOT_BOOL:
            vals[c] = np.zeros(nbytes, dtype=np.uint8)
        elif kinds[c] in (abi.SLOT_STR, abi.SLOT_BIN, abi.SLOT_ARRAY):
            soffs[c] = np.empty(n + 1, dtype=np.int64 if wide_str else np.int32)
            soffs[c][0] = 0
        elif kinds[c] not in (abi.SLOT_ROW, abi.SLOT_MAP):
            vals[c] = np.zeros(n * plans.ARROW_WIDTH[kinds[c]], dtype=np.uint8)
    stop_at_error = settle.errors.on_error == "raise"
    code, extra = tiers.machine_code(jit.decode_code, prog.matrix, k, n)  # hold ``code`` while the kernels run

    def elements(cap: int, old: list[Any] | None) -> list[Any]:
        """Outputs of the element columns for ``cap`` elements (keeping ``old``'s contents)."""
        new: list[Any] = [None] * nnodes
        for c in range(1, nnodes):
            if not elem[c]:
                continue
            kd = kinds[c]
            v = np.zeros((cap + 7) // 8 if kd == abi.SLOT_BOOL else cap * plans.ARROW_WIDTH.get(kd, 0), dtype=np.uint8)
            o = np.empty(cap + 1, dtype=np.int64 if wide_str else np.int32) \
                if kd in (abi.SLOT_STR, abi.SLOT_BIN, abi.SLOT_ARRAY) else None
            vbits = np.zeros((cap + 7) // 8, dtype=np.uint8)
            variable = kd in (abi.SLOT_STR, abi.SLOT_BIN, abi.SLOT_ROW, abi.SLOT_ARRAY, abi.SLOT_MAP)
            new[c] = [vbits, None if variable else v, o]
            if o is not None:
                o[0] = 0
            if old is not None:
                for dst, prev in zip(new[c], old[c], strict=True):
                    if dst is not None:
                        dst[:len(prev)] = prev
        return new

    def decode_range(s: int, e: int) -> tuple[list[Any], np.ndarray, np.ndarray, list[tuple[int, int]], list[Any]]:
        sdata: list[Any] = [None] * nnodes
        for c in strs:
            sdata[c] = np.empty(span(s, e) + 64, dtype=np.uint8)
        ecap = [4 * (e - s) + 64]
        els: list[list[Any]] = [elements(ecap[0], None) if any(elem) else [None] * nnodes]
        counts = np.zeros(nnodes, dtype=np.int64)
        spos = np.zeros(nnodes, dtype=np.int64)

        def run(i: int) -> tuple[int, int]:
            outs = [(els[0][c][0], els[0][c][1], els[0][c][2], sdata[c]) if elem[c] else
                    (bits[c], vals[c], soffs[c], sdata[c]) for c in range(nnodes)]
            return k.decode_run(prog.matrix, *src, i, e, outs, counts, spos, *extra)

        def grow() -> None:
            for c in strs:
                sdata[c] = grow_buffer(sdata[c], int(spos[c]), wide_str)
            if any(elem):
                if not wide_str and 2 * ecap[0] >= MAX32:
                    raise Widen
                ecap[0] *= 2
                els[0] = elements(ecap[0], els[0])

        return sdata, spos, counts, resume(run, s, e, stop_at_error, grow), els[0]

    parts = run_ranges(ranges, decode_range)
    bad = [b for p in parts for b in p[3]]
    counts = sum(p[2] for p in parts)
    outs = [parts[0][4][c] if elem[c] else (bits[c], vals[c], soffs[c]) for c in range(nnodes)]
    # rows the kernels walked ("raise" stops at the first error: later offsets are unwritten)
    done = min((r + 1 for r, status in bad if not rerouted(status)), default=n) if stop_at_error else n
    for row, status in _decimals_past_precision(prog, outs, parts[0][1], done, {r for r, _ in bad}):
        bad.append((row, status))  # a bad row: null at the top, like the kernels' own bad rows
        bits[0][row >> 3] &= 0xFF ^ (1 << (row & 7))
        counts[0] -= 1
    settle(bad)  # the kernels' Widen is behind: settling runs once
    columns: list[Any] = [None] * nnodes
    for c in strs:
        total = sum(int(p[1][c]) for p in parts)
        offs = parts[0][4][c][2] if elem[c] else soffs[c]
        if total > MAX32 and offs.dtype != np.int64:
            offs = offs.astype(np.int64)
        at = 0
        for (s, e), p in zip(ranges, parts, strict=True):
            if at:
                offs[s + 1:e + 1] += at
            at += int(p[1][c])
        sdata = joined([p[0][c][:int(p[1][c])] for p in parts])
        columns[c] = (offs, sdata, total > MAX32)

    counter = [0]

    def build(t: Any, length: int) -> pa.Array:  # a LogicalType, read by its BinaryRowData slot
        node = counter[0]
        counter[0] += 1
        at = arrow_type(t)
        nulls = length - int(counts[node])
        valid = parts[0][4][node][0] if elem[node] else bits[node]
        vbuf = pa.py_buffer(valid) if nulls else None
        slot = t.row_slot()
        if slot == "ROW":
            children = [build(f.type, length) for f in t.fields]
            return pa.StructArray.from_buffers(at, length, [vbuf], null_count=nulls, children=children)
        if slot == "ARRAY":
            child = build(t.element_type, int(parts[0][1][node]))
            obuf = pa.py_buffer(outs[node][2].astype(np.int32, copy=False))
            return pa.Array.from_buffers(at, length, [vbuf, obuf], null_count=nulls, children=[child])
        if slot == "MAP":
            built = []
            for part in t.map_parts():  # the key array, then the value array: list offsets alike
                counter[0] += 1
                built.append(build(part, int(parts[0][1][counter[0] - 1])))
            entries = pa.StructArray.from_arrays(built, fields=[at.key_field, at.item_field])
            obuf = pa.py_buffer(outs[node + 1][2].astype(np.int32, copy=False))
            return pa.Array.from_buffers(at, length, [vbuf, obuf], null_count=nulls, children=[entries])
        if columns[node] is not None:
            offs, sdata, large = columns[node]
            if large:
                at = pa.large_string() if kinds[node] == abi.SLOT_STR else pa.large_binary()
            obuf = pa.py_buffer(offs if large else offs.astype(np.int32, copy=False))
            return pa.Array.from_buffers(at, length, [vbuf, obuf, pa.py_buffer(sdata)], null_count=nulls)
        values = parts[0][4][node][1] if elem[node] else vals[node]
        return pa.Array.from_buffers(at, length, [vbuf, pa.py_buffer(values)], null_count=nulls)

    return build(row_type, n)


def _decimals_past_precision(prog: plans.RowProgram, outs: list[Any], spos: np.ndarray, n: int,
                             bad: set[int]) -> list[tuple[int, int]]:
    """Rows whose compact DECIMAL(p, s) holds more than p digits (only a corrupted entry can: Flink
    reads the unscaled long as it is), as (row, encoded error) naming the first such field in
    program order. Arrow's decimal128(p, s) cannot hold such a value, so they are bad rows, as on
    the per-value path. One vectorised pass per DECIMAL column after the kernels (why not in
    them: the per-value path only fails at the Arrow conversion, after every other check of the
    entry). ``outs[node]`` = (validity, values, offsets) of each column: a column inside an array
    (or map) is indexed by element (``spos[array]`` of them; with arrays the chunk is one range),
    mapped back to the first ``n`` rows (those the kernels walked) through the enclosing list
    offsets."""
    found: dict[int, int] = {}
    kinds = prog.kinds
    arr = rowdata_py._arrays(prog.matrix.tolist())
    for c in range(1, len(kinds)):
        if kinds[c] != abi.SLOT_DEC_COMPACT:
            continue
        m = n if arr[c] < 0 else int(spos[arr[c]])  # values in the column (elements of the array)
        limit = int(prog.matrix[c, abi.COL_LIMIT])
        unscaled = outs[c][1].view(np.int64)[0::2][:m]
        present = np.unpackbits(outs[c][0], bitorder="little")[:m].astype(bool)
        at = np.flatnonzero(present & ((unscaled >= limit) | (unscaled <= -limit)))
        a = arr[c]
        while a >= 0 and len(at):  # element index -> index in the enclosing column, up to the rows
            at = np.searchsorted(outs[a][2][:(n if arr[a] < 0 else int(spos[arr[a]])) + 1], at, side="right") - 1
            a = arr[a]
        for row in at.tolist():
            if row not in bad:
                found.setdefault(row, abi.encode_err(abi.ERR_TOO_LARGE, c))
    return sorted(found.items())


def decode_per_value(arr: pa.Array, serializer: Any, errors: RowErrors, base: int) -> tuple[pa.Array, list[Exception]]:
    """Decode through the reference serializer, one entry at a time (serializers without a kernel,
    and entries the kernels hand back)."""
    row_type = getattr(serializer, "row_type", None)
    to_arrow: Callable[[Any], Any] = (lambda v: logical_to_arrow(v, row_type)) if row_type is not None \
        else to_arrow_value(serializer)
    values = errors.per_value(arr.to_pylist(), lambda raw: to_arrow(serializer.from_bytes(raw)), base,
                              (StateFormatError,), _decode_error)
    try:
        arrow_t = arrow_type(row_type) if row_type is not None else arrow_type_for(serializer)
    except StatemorphError:
        arrow_t = None  # e.g. an Avro union of several types: let Arrow infer
    return errors.result(_to_arrow_array(values, arrow_t, errors, base))


def _decode_error(e: Exception, row: int) -> StateFormatError:
    if isinstance(e, UnrepresentableValueError):  # read, but Arrow cannot hold it: refused, never changed
        return locate(UnrepresentableValueError(f"decode: row {row}: {e}"), row, e.field_path)
    return per_row_error(e, row, "decode")


def _to_arrow_array(values: list[Any], arrow_t: pa.DataType | None, errors: RowErrors, base: int) -> pa.Array:
    """``pa.array`` of decoded values; a value that fits its logical type but not Arrow's (a
    timestamp beyond int64 nanoseconds) is a bad row naming its index, not a failed column."""
    try:
        return pa.array(values, type=arrow_t)
    except (OverflowError, pa.ArrowException) as whole:
        if arrow_t is None:
            raise MalformedDataError(f"decode: values have no common Arrow type: {whole}") from whole
    for i, v in enumerate(values):
        try:
            pa.array([v], type=arrow_t)
        except (OverflowError, pa.ArrowException) as e:
            err = locate(MalformedDataError(f"decode: row {base + i}: value does not fit Arrow {arrow_t}: {e}"),
                       base + i, "")
            errors.add(err)
            values[i] = None
    return pa.array(values, type=arrow_t)


def _large(t: pa.DataType) -> pa.DataType:
    """``t`` with every string / binary made large (to join ranges that widened differently)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(j).name, _large(t.field(j).type)) for j in range(t.num_fields)])
    if pa.types.is_string(t):
        return pa.large_string()
    return pa.large_binary() if pa.types.is_binary(t) else t


def _decode_core_rows(k: KernelTier, arr: pa.Array, serializer: Any, prog: plans.RowProgram,
                      ranges: list[tuple[int, int]], errors: RowErrors, valid: np.ndarray, base: int) -> pa.Array:
    """One pass per range: the kernel scatters each entry into per-field Arrow buffers (string
    data sized from the input, grown when short, int32 offsets unless past 2 GiB); it stops at a
    bad entry, which is recorded here, and resumes after it. An entry it hands back (a nested row
    whose RowKind is not INSERT) is judged by the reference and spliced in (:class:`Settle`)."""
    n = len(arr)
    offsets, data, validity, offset, wide = binary_input(arr)
    matrix = prog.matrix
    kinds = prog.kinds
    span = inputs.input_spans(offsets, offset, wide, len(data), n)
    share = max(1, sum(kd in plans.STRING_KINDS for kd in kinds))
    bad: list[tuple[int, int]] = []

    def decode_core_range(s: int, e: int) -> tuple[list[Any], np.ndarray]:
        m = e - s
        outs: list[Any] = [None]
        for kd in kinds[1:]:
            vbits = np.zeros((m + 7) // 8, dtype=np.uint8)
            if kd in plans.STRING_KINDS:
                outs.append([vbits, None, np.zeros(m + 1, dtype=np.int32),
                             np.empty(span(s, e) // share + 64, dtype=np.uint8)])
            elif kd == abi.LEAF_ROW:
                outs.append([vbits, None, None, None])
            else:
                size = (m + 7) // 8 if kd == abi.LEAF_BOOL else m * primitives_py.kind_width(kd)
                outs.append([vbits, np.zeros(size, dtype=np.uint8), None, None])
        spos = np.zeros(len(kinds), dtype=np.int64)
        i = 0
        while True:
            i, status, node = k.corerow_decode(matrix, offsets, data, validity, offset + s, wide, i, m, outs, spos)
            if status == 0:
                return outs, spos
            if status < 0:
                bad.append((s + i, status))
                if errors.on_error == "raise" and not rerouted(status):
                    return outs, spos
                i += 1
                continue
            o = outs[node]
            if o[2].itemsize == 4 and status > MAX32:
                o[2] = o[2].astype(np.int64)
            if status > len(o[3]):
                bigger = np.empty(max(status, 2 * len(o[3])), dtype=np.uint8)
                bigger[:spos[node]] = o[3][:spos[node]]
                o[3] = bigger

    parts = run_ranges(ranges, decode_core_range)
    errors.prog = prog  # the kernel's errors name fields through this program
    settle = Settle(arr, serializer, decode_per_value, errors, base)
    settle(sorted(bad))
    valid[[i for i, _ in bad]] = 0

    def build(outs: list[Any], spos: np.ndarray, m: int, node: int, t: pa.DataType) -> pa.Array:
        vbits, vals, so, sdata = outs[node]
        nulls = m - int(np.bitwise_count(vbits).sum())
        vbuf = pa.py_buffer(vbits) if nulls else None
        kd = kinds[node]
        if kd == abi.LEAF_ROW:
            return _core_struct(t, m, vbuf, nulls, children(outs, spos, m, node, t))
        if kd in plans.STRING_KINDS:
            large = so.itemsize == 8
            if kd == abi.LEAF_BYTES:
                t = pa.large_binary() if large else pa.binary()
            else:
                t = pa.large_string() if large else pa.string()
            return pa.Array.from_buffers(t, m, [vbuf, pa.py_buffer(so), pa.py_buffer(sdata[:spos[node]])],
                                         null_count=nulls)
        return pa.Array.from_buffers(t, m, [vbuf, pa.py_buffer(vals)], null_count=nulls)

    def children(outs: list[Any], spos: np.ndarray, m: int, node: int, t: pa.DataType) -> list[pa.Array]:
        kids, c = [], node + 1
        for j in range(t.num_fields):
            kids.append(build(outs, spos, m, c, t.field(j).type))
            c = int(matrix[c, abi.COL_END])
        return kids

    at = arrow_type_for(serializer)
    per_range = [children(outs, spos, e - s, 0, at) for (s, e), (outs, spos) in zip(ranges, parts, strict=True)]
    kids = per_range[0]
    if len(per_range) > 1:
        kids = []
        for j in range(at.num_fields):
            col = [p[j] for p in per_range]
            if len({c.type for c in col}) > 1:
                col = [c.cast(_large(c.type)) for c in col]
            kids.append(pa.concat_arrays(col))
    vbuf, nulls = pack_validity(valid, n)
    return settle.splice(_core_struct(at, n, vbuf, nulls, kids))


def _core_struct(t: pa.DataType, n: int, vbuf: pa.Buffer | None, nulls: int, kids: list[pa.Array]) -> pa.Array:
    """A struct of ``t``'s field names over ``kids`` (whose types may have widened to large)."""
    st = pa.struct([pa.field(t.field(j).name, kid.type) for j, kid in enumerate(kids)])
    return pa.StructArray.from_buffers(st, n, [vbuf], null_count=nulls, children=kids)


__all__ = ["decode", "decode_per_value"]
