"""Input normalisation: what the kernels read from the Arrow arrays a caller hands over.

Why: callers pass pyarrow arrays, chunked arrays, slices with offsets, binary and large_binary,
view types, read-only buffers (Spark) or any object with ``__arrow_c_array__``; the kernels take
flat buffers (validity, offsets, data) and an element offset, per column of a row program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import SerializationError
from ..types import (
    RowType,
)
from .tiers import abi, plans


def as_arrow(obj: Any) -> pa.Array | pa.ChunkedArray:
    """A pyarrow array or chunked array of ``obj`` (anything with ``__arrow_c_array__`` or
    ``__arrow_c_stream__`` too), else a :class:`TypeError`."""
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return obj
    if hasattr(obj, "__arrow_c_array__"):
        return pa.array(obj)
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.chunked_array(obj)
    raise TypeError(f"expected a pyarrow array, chunked array or an object with __arrow_c_array__, "
                    f"got {type(obj).__name__}")


#: (offsets, data, validity, offset, wide): a binary column as the kernels take it (Arrow buffers, or
#: ``b""`` for an absent data buffer)
BinaryInput = tuple[Any, Any, Any, int, bool]


def binary_input(arr: pa.Array) -> BinaryInput:
    """(offsets, data, validity, offset, wide) buffers of a binary / string column."""
    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        wide = True
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        wide = False
    elif pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        arr = arr.cast(pa.large_binary() if pa.types.is_binary_view(t) else pa.large_string())
        wide = True
    else:
        raise TypeError(f"expected a binary array of serialized values, got {t}")
    validity, offsets, data = arr.buffers()[:3]
    if validity is not None and arr.null_count == 0:
        validity = None
    return offsets, data if data is not None else b"", validity, arr.offset, wide


def validity_bits(arr: pa.Array) -> np.ndarray | None:
    """One byte per row (1 = valid), or None when there are no nulls."""
    if arr.null_count == 0:
        return None
    buf = arr.buffers()[0]
    if buf is None:  # null type
        return np.zeros(len(arr), dtype=np.uint8)
    bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].copy()


def pack_validity(valid: np.ndarray | None, n: int) -> tuple[pa.Buffer | None, int]:
    """A validity bitmap (None when every row is valid) and the null count, from one byte per row."""
    if valid is None:
        return None, 0
    nulls = int(n - np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def cast_to(arr: pa.Array, target: pa.DataType, what: str) -> pa.Array:
    """``arr`` as ``target``; a cast Arrow refuses is a :class:`SerializationError`."""
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SerializationError(f"{what}: cannot convert Arrow {arr.type} to {target}: {e}") from e


def input_spans(offsets: Any, offset: int, wide: bool, data_len: int, n: int) -> Callable[[int, int], int]:
    """Bytes of input entries ``s..e`` (an output-size estimate only: clamped, never trusted)."""
    offs = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32)

    def span(s: int, e: int) -> int:
        if offset + e >= len(offs):
            return data_len
        return max(0, min(data_len, int(offs[offset + e]) - int(offs[offset + s])))

    return span


def row_columns(arr: pa.Array, row_type: RowType, prog: plans.RowProgram) -> list[Any]:
    """Per program node: (validity, values, offsets, element offset, wide, length) of its Arrow
    column. An ARRAY's column is its list offsets; its element column is the whole child array
    the offsets index (``ListArray.values``). A MAP's column is its validity; its key and value
    ARRAY nodes both have the map's list offsets, their element columns the entries' keys and
    items."""
    cols: list[Any] = []

    def add(a: pa.Array, t: Any) -> None:  # a LogicalType, read by its BinaryRowData slot as the program is
        bufs = a.buffers()
        validity = bufs[0] if a.null_count else None
        slot = t.row_slot()
        if slot == "ROW":
            cols.append((validity, None, None, a.offset, False, len(a)))
            for j, f in enumerate(t.fields):
                add(a.field(j), f.type)
        elif slot == "ARRAY":
            cols.append((validity, None, bufs[1], a.offset, pa.types.is_large_list(a.type), len(a)))
            add(a.values, t.element_type)
        elif slot == "MAP":
            # the map's validity; then its key and value arrays, both reading the map's list offsets
            cols.append((validity, None, None, a.offset, False, len(a)))
            entries = a.values
            for j, part in enumerate(t.map_parts()):
                cols.append((None, None, bufs[1], a.offset, False, len(a)))
                add(entries.field(j), part)
        elif slot in ("STR", "BIN"):
            wide = pa.types.is_large_string(a.type) or pa.types.is_large_binary(a.type)
            cols.append((validity, bufs[2] if bufs[2] is not None else b"", bufs[1], a.offset, wide, len(a)))
        else:
            cols.append((validity, bufs[1], None, a.offset, False, len(a)))

    add(arr, row_type)
    if len(cols) != len(prog.matrix):
        raise AssertionError("row program and Arrow columns disagree")
    return cols


_CORE_FIXED = {abi.LEAF_BOOL: pa.bool_(), abi.LEAF_I8: pa.int8(), abi.LEAF_I16: pa.int16(),
               abi.LEAF_I32: pa.int32(), abi.LEAF_I64: pa.int64(), abi.LEAF_F32: pa.float32(),
               abi.LEAF_F64: pa.float64()}


def _core_leaf(a: pa.Array, kind: int) -> pa.Array | None:
    """``a`` as the Arrow type a field of ``kind`` encodes from, or None (the per-value path).

    Only conversions the per-value path agrees with are made: integers to another width (a safe
    cast fails on any out-of-range value; the per-value path then reports those rows) and float32
    to float64; dictionary and view columns are decoded to plain ones. Anything else (digit
    strings, booleans as numbers ...) keeps per-value semantics."""
    t = a.type
    if pa.types.is_dictionary(t):
        return _core_leaf(a.cast(t.value_type), kind)
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return _core_leaf(a.cast(pa.large_string() if pa.types.is_string_view(t) else pa.large_binary()), kind)
    if kind in (abi.LEAF_STR, abi.LEAF_CHAR):
        return a if pa.types.is_string(t) or pa.types.is_large_string(t) else None
    if kind == abi.LEAF_BYTES:
        return a if pa.types.is_binary(t) or pa.types.is_large_binary(t) else None
    target = _CORE_FIXED[kind]
    if t == target:
        return a
    if (pa.types.is_integer(t) and pa.types.is_integer(target)) or (t == pa.float32() and target == pa.float64()):
        try:
            return a.cast(target)
        except pa.ArrowInvalid:
            return None
    return None


def core_row_columns(arr: pa.Array, prog: plans.RowProgram) -> list[Any] | None:
    """Per program node (pre-order): (validity, values, offsets, element offset, wide, length) of its
    Arrow column (the shape of the RowData encode columns), struct fields matched by position as on
    the per-value path; None when a column's type does not fit its field."""
    m = prog.matrix
    cols: list[Any] = []

    def add(a: pa.Array, node: int) -> bool:
        kind = int(m[node, abi.COL_KIND])
        if kind == abi.LEAF_ROW:
            if not pa.types.is_struct(a.type) or a.type.num_fields != m[node, abi.COL_ARITY]:
                return False
            cols.append((a.buffers()[0] if a.null_count else None, None, None, a.offset, False, len(a)))
            child = node + 1
            for j in range(a.type.num_fields):
                if not add(a.field(j), child):
                    return False
                child = int(m[child, abi.COL_END])
            return True
        leaf = _core_leaf(a, kind)
        if leaf is None:
            return False
        bufs = leaf.buffers()
        validity = bufs[0] if leaf.null_count else None
        if kind in plans.STRING_KINDS:
            wide = pa.types.is_large_string(leaf.type) or pa.types.is_large_binary(leaf.type)
            cols.append((validity, bufs[2] if bufs[2] is not None else b"", bufs[1], leaf.offset, wide, len(leaf)))
        else:
            cols.append((validity, bufs[1], None, leaf.offset, False, len(leaf)))
        return True

    return cols if add(arr, 0) else None


__all__ = ["as_arrow", "binary_input", "cast_to", "core_row_columns", "input_spans", "pack_validity", "row_columns",
           "validity_bits"]
