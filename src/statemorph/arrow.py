"""Bulk API: encode, decode and migrate whole Arrow arrays of state values.

Why: a savepoint holds billions of entries; one Python object per entry is far too slow. This
module is the only pyarrow-aware one. It normalises inputs (pyarrow arrays, chunked arrays, slices
with offsets, binary and large_binary, read-only buffers, anything with ``__arrow_c_array__``),
runs the kernels from :mod:`statemorph.kernels` (compiled, or the Python reference tier), either
in two passes (sizes, then fill into exact-size buffers) or, for RowData encode / decode and
migrate, in one pass into buffers sized from an upper bound, optionally on several threads (the
compiled kernels release the GIL), and turns kernel error codes into typed errors naming the row
and the field path.

Which path a serializer takes:

- flink-core ``Row`` → ``Row`` (``RowSerializer``): the remap kernel rewrites the null mask (RowKind
  bits added or dropped, at any depth) and copies validated field bytes, for rows of primitives,
  strings, byte arrays and nested rows; other field types take the per-value path. Encode /
  decode of those rows (Arrow struct ↔ bytes) run one-pass kernels (``_native/corerow.pyx``);
- ``RowDataSerializer``: BinaryRowData kernels (encode / decode for rows of BOOLEAN, TINYINT ..
  BIGINT, FLOAT, DOUBLE, DATE, TIME, DECIMAL, TIMESTAMP / TIMESTAMP_LTZ, strings, binaries and
  nested ROWs, and ARRAYs, MAPs and MULTISETs whose elements, keys and values are those but
  DECIMAL(p > 18) / TIMESTAMP(p > 3), or rows, arrays and maps, at any depth; encode but not
  decode takes the per-value path for MAP keys holding an ARRAY or MAP, which the reference
  cannot use as dict keys). A map whose keys may repeat (equal key hashes), or has a null or a
  ROW key, is handed back by the kernels and that entry alone goes through the reference (which
  collapses duplicate keys on encode, last value winning, and rejects them on decode); migrate
  for every field type, remapping slots and copying var-part data; rows inside ARRAY / MAP that
  change shape take the per-row reference remap). With ``llvmlite`` installed, chunks of 8,192
  entries or more also run machine code compiled once per migrate plan / row type
  (:mod:`statemorph.kernels.jit`: migrate of every plan with lowered ops; encode / decode of rows
  of primitives, strings and nested rows), which hands any entry it does not take to these kernels;
- the DataStream primitives, ``StringSerializer`` and ``BytePrimitiveArraySerializer``:
  primitive / string kernels;
- flink-core ``RowSerializer`` of primitives, strings, byte[] and nested rows: the corerow kernels
  (encode / decode) and the Row remap (migrate); POJO migrations that only add, remove or reorder
  fields: the POJO remap;
- ``AvroSerializer`` migrate (a new schema that reads the old one): the Avro kernel
  (``_native/avro.pyx``) runs the schema resolution as a byte program compiled once per schema
  pair (fields added, removed, reordered, renamed; promotions; enum and union re-mapping; nested
  records, arrays, maps, fixed; date / time / timestamp logical types). Recursive schemas,
  unions whose branch the reference re-picks from the value, and decimal / uuid values keep the
  per-value path; an entry the program leaves to the reference (a map with a duplicate key,
  bytes → string) is migrated per value in place;
- everything else (Avro encode / decode, Tuple, collections, POJO encode / decode, RowData with
  DECIMAL(p > 18) / TIMESTAMP(p > 3) inside arrays or maps): per-value through the reference
  serializers, in bulk (``to_pylist`` → serializer → ``pa.array``). Correct, but no faster than
  the reference.

Nulls in the input stay nulls in the output. Bad entries raise a :class:`StateFormatError`
subclass with ``row`` and ``field_path`` attributes (``on_error="raise"``), or become nulls
(``"null"``), or nulls plus the list of those errors (``"collect"`` returns ``(array, errors)``).
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import decimal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from . import kernels
from ._arrow_values import arrow_type_for, from_arrow_value, to_arrow_value
from .errors import (
    IncompatibleSchemaError,
    LocatedError,
    MalformedDataError,
    SerializationError,
    StateFormatError,
    StatemorphError,
    TruncatedDataError,
)
from .io import DataInputDeserializer, DataOutputSerializer
from .kernels import abi, jit, plans, primitives_py, rowdata_py
from .types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    Timestamp,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

_ON_ERROR = ("raise", "null", "collect")
_MAX32 = (1 << 31) - 1


# ------------------------------------------------------------------------------------------------
# type mapping
# ------------------------------------------------------------------------------------------------


def arrow_type(t: LogicalType) -> pa.DataType:
    """The Arrow type a Flink logical type decodes to (and encodes from)."""
    if isinstance(t, BooleanType):
        return pa.bool_()
    if isinstance(t, TinyIntType):
        return pa.int8()
    if isinstance(t, SmallIntType):
        return pa.int16()
    if isinstance(t, IntType):
        return pa.int32()
    if isinstance(t, BigIntType):
        return pa.int64()
    if isinstance(t, FloatType):
        return pa.float32()
    if isinstance(t, DoubleType):
        return pa.float64()
    if isinstance(t, (CharType, VarCharType)):
        return pa.string()
    if isinstance(t, (BinaryType, VarBinaryType)):
        return pa.binary()
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, DateType):
        return pa.date32()
    if isinstance(t, TimeType):
        return pa.time32("ms")  # Flink keeps milliseconds of the day whatever the precision
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        unit = "ms" if t.precision <= 3 else "us" if t.precision <= 6 else "ns"
        return pa.timestamp(unit, tz="UTC" if isinstance(t, LocalZonedTimestampType) else None)
    if isinstance(t, RowType):
        # always nullable in Arrow: NOT NULL is enforced by the kernels, with the field path in the error
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in t.fields])
    if isinstance(t, ArrayType):
        return pa.list_(arrow_type(t.element_type))
    if isinstance(t, MultisetType):
        return pa.map_(arrow_type(t.element_type), pa.int32())
    if isinstance(t, MapType):
        return pa.map_(arrow_type(t.key_type), arrow_type(t.value_type))
    raise NotImplementedError(f"no Arrow mapping for {t}")


# ------------------------------------------------------------------------------------------------
# input normalisation
# ------------------------------------------------------------------------------------------------


def _as_arrow(obj: Any) -> pa.Array | pa.ChunkedArray:
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return obj
    if hasattr(obj, "__arrow_c_array__"):
        return pa.array(obj)
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.chunked_array(obj)
    raise TypeError(f"expected a pyarrow array, chunked array or an object with __arrow_c_array__, "
                    f"got {type(obj).__name__}")


def _binary_input(arr: pa.Array) -> tuple[Any, Any, Any, int, bool]:
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


def _validity_bits(arr: pa.Array) -> np.ndarray | None:
    """One byte per row (1 = valid), or None when there are no nulls."""
    if arr.null_count == 0:
        return None
    buf = arr.buffers()[0]
    if buf is None:  # null type
        return np.zeros(len(arr), dtype=np.uint8)
    bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].copy()


def _pack_validity(valid: np.ndarray | None, n: int) -> tuple[pa.Buffer | None, int]:
    if valid is None:
        return None, 0
    nulls = int(n - np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


# ------------------------------------------------------------------------------------------------
# threads and errors
# ------------------------------------------------------------------------------------------------


def _pooled(count: int, dtype: Any = np.uint8) -> np.ndarray:
    """An uninitialised numpy array over a buffer from Arrow's memory pool, for the one-pass
    migrate outputs (``pa.py_buffer`` of it, or of a slice, hands it to Arrow without a copy).

    Why the pool: a fresh numpy array this large comes straight from mmap, and the kernel then pays
    a page fault (and the OS's zeroing) on every page it writes: ~10 ms per 100 MB, as much as a
    migration itself. The pool (mimalloc / jemalloc) reuses the pages of a batch freed shortly
    before, as in a streaming rewrite. (Not used for decode: its many zero-initialised columns
    gain nothing, ``np.zeros`` gets them zeroed lazily by the OS.)"""
    return np.frombuffer(pa.allocate_buffer(count * np.dtype(dtype).itemsize), dtype=dtype)


def _ranges(n: int, threads: int) -> list[tuple[int, int]]:
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads == 1 or n < 1024:
        return [(0, n)]
    step = -(-n // threads)
    step = (step + 63) & ~63  # chunk bounds on whole bitmap bytes: threads never share a byte
    return [(s, min(n, s + step)) for s in range(0, n, step)]


def _run(ranges: list[tuple[int, int]], fn: Callable[[int, int], Any]) -> list[Any]:
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    with ThreadPoolExecutor(max_workers=len(ranges)) as pool:
        return list(pool.map(lambda r: fn(*r), ranges))


def _make_error(status: int, row: int, paths: plans.RowProgram | None, what: str) -> Any:
    """A typed error for a kernel status: bad input bytes are a :class:`StateFormatError`; a value
    that cannot be written (encode) is a :class:`SerializationError`."""
    code, node = abi.decode_err(status)
    path = paths.path(node) if paths is not None and node >= 0 else ""
    where = f"row {row}" + (f", field {path}" if path else "")
    message = f"{what}: {where}: {abi.ERROR_MESSAGES.get(code, f'error code {code}')}"
    err: Exception
    if what.startswith("encode"):
        err = SerializationError(message)
    elif code == abi.E_TRUNCATED:
        err = TruncatedDataError(message)
    else:
        err = MalformedDataError(message)
    return _tag(err, row, path, code)


_E = TypeVar("_E", bound=LocatedError)


def _tag(err: _E, row: int, path: str, code: int = -1) -> _E:
    """Record ``row`` / ``field_path`` / ``code`` so callers can act on the error programmatically."""
    err.at(row, path, code)
    return err


def _check_on_error(on_error: str) -> None:
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")


def _per_row_error(e: Exception, row: int, what: str) -> StateFormatError:
    message = f"{what}: row {row}: {e}"
    err: StateFormatError = TruncatedDataError(message) if isinstance(e, TruncatedDataError) \
        else MalformedDataError(message)
    err.__cause__ = e
    return _tag(err, row, "")


class _Errors:
    """Bad rows of one call: raise the first, or null them and (collect) report them."""

    def __init__(self, on_error: str, what: str, prog: plans.RowProgram | None) -> None:
        self.on_error = on_error
        self.what = what
        self.prog = prog
        self.items: list[Exception] = []

    def from_status(self, status: np.ndarray, base: int) -> np.ndarray:
        """Row indices with a negative status; raises in 'raise' mode."""
        bad = np.flatnonzero(status < 0)
        if len(bad):
            if self.on_error == "raise":
                i = int(bad[0])
                raise _make_error(int(status[i]), base + i, self.prog, self.what)
            if self.on_error == "collect":
                self.items.extend(_make_error(int(status[i]), base + int(i), self.prog, self.what) for i in bad)
        return bad

    def add(self, err: Exception) -> None:
        if self.on_error == "raise":
            raise err
        if self.on_error == "collect":
            self.items.append(err)

    def result(self, arr: Any) -> Any:
        """The output, with (collect) the bad rows in row order, whichever stage found them."""
        if self.on_error != "collect":
            return arr
        return arr, sorted(self.items, key=lambda e: getattr(e, "row", -1))


# ------------------------------------------------------------------------------------------------
# binary output (encode, migrate): sizes → prefix sums → fill
# ------------------------------------------------------------------------------------------------


def _binary_output(n: int, ranges: list[tuple[int, int]], valid: np.ndarray | None, errors: _Errors,
                   base: int, sizes: Callable[..., Any], fill: Callable[..., Any], large: bool) -> pa.Array:
    out_off = np.zeros(n + 1, dtype=np.int64)
    stop_at_error = errors.on_error == "raise"
    _run(ranges, lambda s, e: sizes(s, e, out_off, stop_at_error))
    bad = errors.from_status(out_off[1:], base)
    if len(bad):
        out_off[bad + 1] = 0
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[bad] = 0
    np.cumsum(out_off[1:], out=out_off[1:])
    total = int(out_off[-1])
    out_data = np.empty(total, dtype=np.uint8)
    _run(ranges, lambda s, e: fill(s, e, out_off, out_data))
    validity, nulls = _pack_validity(valid, n)
    if large or total > _MAX32:
        return pa.Array.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(out_off), pa.py_buffer(out_data)],
                                     null_count=nulls)
    return pa.Array.from_buffers(pa.binary(), n,
                                 [validity, pa.py_buffer(out_off.astype(np.int32)), pa.py_buffer(out_data)],
                                 null_count=nulls)


# ------------------------------------------------------------------------------------------------
# serializer dispatch
# ------------------------------------------------------------------------------------------------


def _fixed_kind(serializer: Any) -> tuple[int, pa.DataType] | None:
    from .serializers import (
        BooleanSerializer,
        ByteSerializer,
        DoubleSerializer,
        FloatSerializer,
        IntSerializer,
        LongSerializer,
        ShortSerializer,
    )

    table = (
        (BooleanSerializer, abi.K_BOOL, pa.bool_()), (ByteSerializer, abi.K_I8, pa.int8()),
        (ShortSerializer, abi.K_I16, pa.int16()), (IntSerializer, abi.K_I32, pa.int32()),
        (LongSerializer, abi.K_I64, pa.int64()), (FloatSerializer, abi.K_F32, pa.float32()),
        (DoubleSerializer, abi.K_F64, pa.float64()),
    )
    for cls, kind, at in table:
        if type(serializer) is cls:
            return kind, at
    return None


def _is(serializer: Any, name: str) -> bool:
    from . import serializers

    cls = getattr(serializers, name, None)
    return cls is not None and type(serializer) is cls


def _row_program(serializer: Any, encode: bool = False) -> plans.RowProgram | None:
    if not _is(serializer, "RowDataSerializer"):
        return None
    prog = plans.compile_row_program(serializer.row_type)
    return prog if (prog.encode_supported() if encode else prog.decode_supported()) else None


def _cast(arr: pa.Array, target: pa.DataType, what: str) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SerializationError(f"{what}: cannot convert Arrow {arr.type} to {target}: {e}") from e


def _per_chunk(obj: Any, fn: Callable[[pa.Array, int], Any], on_error: str) -> Any:
    """Apply ``fn(chunk, first_row)`` to each chunk; reassemble (array, errors) results."""
    arr = _as_arrow(obj)
    if isinstance(arr, pa.ChunkedArray):
        outs: list[pa.Array] = []
        errors: list[Exception] = []
        base = 0
        for chunk in arr.chunks:
            r = fn(chunk, base)
            if on_error == "collect":
                outs.append(r[0])
                errors.extend(r[1])
            else:
                outs.append(r)
            base += len(chunk)
        out_type = outs[0].type if outs else None
        if any(o.type != out_type for o in outs):  # binary vs large_binary across chunks
            out_type = pa.large_binary()
            outs = [o.cast(out_type) for o in outs]
        result = pa.chunked_array(outs, type=out_type) if outs else pa.chunked_array([], type=pa.binary())
        return (result, errors) if on_error == "collect" else result
    return fn(arr, 0)


# ------------------------------------------------------------------------------------------------
# encode
# ------------------------------------------------------------------------------------------------


def encode(array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> Any:
    """Serialize every value of an Arrow array with ``serializer``; a BinaryArray of the bytes
    Flink writes (null in → null out). Values the serializer refuses raise
    :class:`SerializationError` naming the row (or, with ``on_error``, become nulls)."""
    _check_on_error(on_error)
    k = kernels.KERNELS
    return _per_chunk(array, lambda a, base: _encode_chunk(k, a, serializer, threads, on_error, base), on_error)


def _encode_chunk(k: Any, arr: pa.Array, serializer: Any, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    ranges = _ranges(n, threads)
    fixed = _fixed_kind(serializer)
    prog = _row_program(serializer, encode=True)
    errors = _Errors(on_error, f"encode with {type(serializer).__name__}", prog)
    large = False
    if fixed is not None:
        kind, at = fixed
        arr = _cast(arr, at, "encode")
        w = primitives_py.kind_width(kind)
        valid = _validity_bits(arr)
        validity, values = arr.buffers()[:2]
        validity = validity if arr.null_count else None

        def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
            out_off[s + 1:e + 1] = w if valid is None else valid[s:e].astype(np.int64) * w

        def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
            k.fixed_encode(kind, values, validity, arr.offset, s, e, out_off, out)

    elif _is(serializer, "StringSerializer") or _is(serializer, "BytePrimitiveArraySerializer"):
        is_string = _is(serializer, "StringSerializer")
        if is_string and not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            arr = _cast(arr, pa.string(), "encode")
        if not is_string and not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            arr = _cast(arr, pa.binary(), "encode")
        offsets, data, validity, offset, wide = _binary_input(arr)
        valid = _validity_bits(arr)
        large = wide

        if is_string:
            def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
                k.string_encode_sizes(offsets, data, validity, offset, wide, s, e, out_off, stop)

            def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
                k.string_encode_fill(offsets, data, validity, offset, wide, s, e, out_off, out)
        else:
            raw = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32)[offset:offset + n + 1]

            def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
                lens = np.diff(raw[s:e + 1]).astype(np.int64) + 4
                out_off[s + 1:e + 1] = lens if valid is None else lens * valid[s:e]

            def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
                k.bytes_encode_fill(offsets, data, validity, offset, wide, s, e, out_off, out)

    elif prog is not None:
        arr = _cast(arr, arrow_type(serializer.row_type), "encode")
        cols = _row_columns(arr, serializer.row_type, prog)
        return errors.result(_encode_rows(k, prog, cols, n, ranges, errors, base, arr, serializer))
    elif (core := plans.compile_core_row_codec(serializer)) is not None \
            and (core_cols := _core_row_columns(arr, core)) is not None:
        return errors.result(_encode_core_rows(k, arr, core, core_cols, ranges, errors, base))
    else:
        return _encode_per_value(arr, serializer, errors, base)
    out = _binary_output(n, ranges, valid, errors, base, sizes, fill, large)
    return errors.result(out)


class _Widen(Exception):
    """int32 offsets would pass 2**31 - 1: redo the chunk with int64 offsets (rare: > 2 GiB)."""


def _grow(buf: np.ndarray, keep: int, wide: bool) -> np.ndarray:
    """A buffer twice as large holding ``buf[:keep]``; int32 offsets cannot address past 2**31 - 1."""
    if not wide and len(buf) >= _MAX32:
        raise _Widen
    bigger = np.empty(2 * len(buf) + 64, dtype=np.uint8)
    bigger[:keep] = buf[:keep]
    return bigger


def _encode_bound(prog: plans.RowProgram, cols: list[Any]) -> Callable[[int, int], int]:
    """Output bytes of entries ``s..e``, an upper bound for rows of primitives and strings: the
    length word and every row's fixed part per entry, plus each string's bytes rounded up to 8
    (at most its Arrow bytes + 7). With ARRAY fields it is a guess (the buffer grows)."""
    fixed = 4
    spans = []
    for row, (_, values, offs, off, wide, _) in zip(prog.matrix.tolist(), cols, strict=True):
        if row[abi.C_KIND] == abi.R_ROW:
            fixed += rowdata_py._null_bits_size(row[abi.C_ARITY]) + 8 * row[abi.C_ARITY]
        elif row[abi.C_KIND] in (abi.R_STR, abi.R_BIN):
            fixed += 7
            spans.append(_input_spans(offs, off, wide, len(memoryview(values).cast("B")), 0))
        elif row[abi.C_KIND] in (abi.R_ARRAY, abi.R_MAP):
            fixed += 16  # a guess only (elements are not rows): the buffer grows if it is short
    return lambda s, e: fixed * (e - s) + sum(span(s, e) for span in spans)


def _encode_rows(k: Any, prog: plans.RowProgram, cols: list[Any], n: int, ranges: list[tuple[int, int]],
                 errors: _Errors, base: int, arr: pa.Array, serializer: Any) -> pa.Array:
    """RowData encode in one pass (``encode_run``): every range packs its entries into its own
    buffer, sized from :func:`_encode_bound` (so it never grows for rows of primitives and
    strings); ranges are then appended to the first one and their offsets shifted. The kernel
    writes the int32 offsets and the validity bitmap itself."""
    bound = _encode_bound(prog, cols)
    total_bound = bound(0, n)
    settle = _Settle(arr, serializer, _encode_per_value, errors, base)
    try:
        out = _encode_rows_with(k, prog, cols, n, ranges, errors, settle, bound, total_bound > _MAX32)
    except _Widen:
        out = _encode_rows_with(k, prog, cols, n, ranges, errors, settle, bound, True)
    return settle.splice(out)


def _encode_rows_with(k: Any, prog: plans.RowProgram, cols: list[Any], n: int, ranges: list[tuple[int, int]],
                      errors: _Errors, settle: _Settle, bound: Callable[[int, int], int], wide: bool) -> pa.Array:
    matrix = prog.matrix
    out_off: np.ndarray = np.empty(n + 1, dtype=np.int64 if wide else np.int32)
    out_off[0] = 0
    out_valid = np.zeros((n + 7) // 8, dtype=np.uint8)
    stop_at_error = errors.on_error == "raise"
    code, extra = _machine_code(jit.encode_code, matrix, k, n)  # hold ``code`` while the kernels run

    # every range writes into its own region of one buffer (sized by the bound; pages never
    # touched cost nothing); the regions are then moved together in place
    sizes = [bound(s, e) + 64 for s, e in ranges]
    region = {s: (a, a + z) for (s, _), a, z in zip(ranges, np.cumsum([0] + sizes[:-1]).tolist(), sizes,
                                                   strict=True)}
    shared = _pooled(sum(sizes))

    def one(s: int, e: int) -> tuple[np.ndarray, int, int, list[tuple[int, int]]]:
        out: list[Any] = [shared[region[s][0]:region[s][1]], 0, 0]

        def run(i: int) -> tuple[int, int]:
            i, out[1], status, written = k.encode_run(matrix, cols, i, e, out_off, out[0], out[1], out_valid,
                                                      *extra)
            out[2] += written
            return i, status

        def grow() -> None:
            out[0] = _grow(out[0], out[1], wide)

        bad = _resume(run, s, e, stop_at_error, grow)
        return out[0], out[1], out[2], bad

    parts = _run(ranges, one)
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
            if not wide and total + pos > _MAX32:
                out_off, wide = out_off.astype(np.int64), True
            out_off[s + 1:e + 1] += total
        total += pos
    nulls = n - sum(p[2] for p in parts)
    validity = pa.py_buffer(out_valid) if nulls else None
    buf = pa.py_buffer(data[:total])
    if total > _MAX32:
        return pa.Array.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(out_off.astype(np.int64)), buf],
                                     null_count=nulls)
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(out_off.astype(np.int32, copy=False)), buf],
                                 null_count=nulls)


def _resume(run: Callable[[int], tuple[int, int]], s: int, e: int, stop_at_error: bool,
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
            if stop_at_error and not _rerouted(status):
                break
            i += 1
        else:
            grow()
    return bad


def _rerouted(status: int) -> bool:
    """An entry the kernels hand back to the reference serializer (``abi.HAND_BACK``), not an error."""
    return abi.decode_err(status)[0] == abi.HAND_BACK


def _report(errors: _Errors, bad: list[tuple[int, int]], base: int,
            extra: list[tuple[int, Exception]] | None = None) -> None:
    """Turn the kernels' (row, encoded error) pairs, and ``extra`` (row, error) pairs of rerouted
    entries, into typed errors, in row order (so "raise" raises the first)."""
    items = [(row, _make_error(status, base + row, errors.prog, errors.what)) for row, status in bad]
    for _, err in sorted(items + (extra or []), key=lambda p: p[0]):
        errors.add(err)


class _Settle:
    """Settles a one-pass kernel's (row, status) pairs: entries rerouted to the reference
    (``abi.HAND_BACK``: maps with suspect keys) run through the per-value path, then every error,
    the kernel's and the reference's, is reported in row order. Runs before the output is built
    (in "raise" mode a kernel stops at the first error, leaving later rows unwritten);
    :meth:`splice` then puts the rerouted entries' results in."""

    def __init__(self, arr: pa.Array, serializer: Any, per_value: Callable[..., Any], errors: _Errors,
                 base: int) -> None:
        self.arr, self.serializer, self.per_value, self.errors, self.base = arr, serializer, per_value, errors, base
        self.rows: list[int] = []
        self.pieces: list[pa.Array] = []

    def __call__(self, bad: list[tuple[int, int]]) -> None:
        found: list[tuple[int, Exception]] = []
        for row, status in sorted(bad):
            if _rerouted(status):
                out, errs = self.per_value(self.arr.slice(row, 1), self.serializer,
                                           _Errors("collect", self.errors.what, None), self.base + row)
                self.rows.append(row)
                self.pieces.append(out)
                found += [(row, e) for e in errs]
        _report(self.errors, [b for b in bad if not _rerouted(b[1])], self.base, found)

    def splice(self, out: pa.Array) -> pa.Array:
        """``out`` with each rerouted entry replaced by the reference's result."""
        if not self.rows:
            return out
        parts, at = [], 0
        for row, piece in zip(self.rows, self.pieces, strict=True):
            parts += [out.slice(at, row - at), piece.cast(out.type)]
            at = row + 1
        parts.append(out.slice(at))
        return pa.concat_arrays(parts)



def _row_columns(arr: pa.Array, row_type: RowType, prog: plans.RowProgram) -> list[Any]:
    """Per program node: (validity, values, offsets, element offset, wide, length) of its Arrow
    column. An ARRAY's column is its list offsets; its element column is the whole child array
    the offsets index (``ListArray.values``). A MAP's column is its validity; its key and value
    ARRAY nodes both have the map's list offsets, their element columns the entries' keys and
    items."""
    cols: list[Any] = []

    def add(a: pa.Array, t: LogicalType) -> None:
        bufs = a.buffers()
        validity = bufs[0] if a.null_count else None
        if isinstance(t, RowType):
            cols.append((validity, None, None, a.offset, False, len(a)))
            for j, f in enumerate(t.fields):
                add(a.field(j), f.type)
        elif isinstance(t, ArrayType):
            cols.append((validity, None, bufs[1], a.offset, pa.types.is_large_list(a.type), len(a)))
            add(a.values, t.element_type)
        elif isinstance(t, (MapType, MultisetType)):
            # the map's validity; then its key and value arrays, both reading the map's list offsets
            cols.append((validity, None, None, a.offset, False, len(a)))
            entries = a.values
            for j, part in enumerate(_map_parts(t)):
                cols.append((None, None, bufs[1], a.offset, False, len(a)))
                add(entries.field(j), part)
        elif isinstance(t, (CharType, VarCharType, BinaryType, VarBinaryType)):
            wide = pa.types.is_large_string(a.type) or pa.types.is_large_binary(a.type)
            cols.append((validity, bufs[2] if bufs[2] is not None else b"", bufs[1], a.offset, wide, len(a)))
        else:
            cols.append((validity, bufs[1], None, a.offset, False, len(a)))

    add(arr, row_type)
    if len(cols) != len(prog.matrix):
        raise AssertionError("row program and Arrow columns disagree")
    return cols


def _map_parts(t: MapType | MultisetType) -> tuple[LogicalType, LogicalType]:
    """Key and value types of a MAP, or of a MULTISET (element → INT NOT NULL count)."""
    if isinstance(t, MultisetType):
        return t.element_type, IntType(nullable=False)
    return t.key_type, t.value_type


def _to_value(v: Any, t: LogicalType) -> Any:
    """Arrow ``to_pylist`` value → the reference serializers' value."""
    if v is None:
        return None
    if isinstance(t, RowType):
        return tuple(_to_value(v.get(f.name), f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return [_to_value(x, t.element_type) for x in v]
    if isinstance(t, MultisetType):
        return {_to_value(a, t.element_type): c for a, c in v}
    if isinstance(t, MapType):
        return {_to_value(a, t.key_type): _to_value(b, t.value_type) for a, b in v}
    if isinstance(t, (TimestampType, LocalZonedTimestampType)) and hasattr(v, "value") \
            and not isinstance(v, _dt.datetime):
        return Timestamp.from_epoch_nanos(int(v.value))
    return v


def _from_value(v: Any, t: LogicalType) -> Any:
    """Reference serializer value → something ``pa.array(..., type=arrow_type(t))`` accepts."""
    if v is None:
        return None
    if isinstance(t, RowType):
        return {f.name: _from_value(x, f.type) for f, x in zip(t.fields, v, strict=False)}
    if isinstance(t, ArrayType):
        return [_from_value(x, t.element_type) for x in v]
    if isinstance(t, MultisetType):
        return [(_from_value(a, t.element_type), c) for a, c in v.items()]
    if isinstance(t, MapType):
        return [(_from_value(a, t.key_type), _from_value(b, t.value_type)) for a, b in v.items()]
    if isinstance(v, Timestamp):
        return v.epoch_nanos // {"ms": 1_000_000, "us": 1000, "ns": 1}[arrow_type(t).unit]
    if isinstance(t, TimeType) and isinstance(v, _dt.time):
        return v
    if isinstance(v, decimal.Decimal):
        return v
    return v


def _encode_per_value(arr: pa.Array, serializer: Any, errors: _Errors, base: int) -> Any:
    row_type = getattr(serializer, "row_type", None)
    from_arrow = (lambda v: _to_value(v, row_type)) if row_type is not None else from_arrow_value(serializer)
    values = arr.to_pylist()
    offs = np.zeros(len(values) + 1, dtype=np.int64)
    parts: list[bytes] = []
    valid = np.ones(len(values), dtype=np.uint8)
    for i, v in enumerate(values):
        if v is None:
            valid[i] = 0
        else:
            try:
                parts.append(serializer.to_bytes(from_arrow(v)))
            except (SerializationError, StateFormatError, TypeError, ValueError) as e:
                err = SerializationError(f"encode: row {base + i}: {e}")
                _tag(err, base + i, "")
                if errors.on_error == "raise":
                    raise err from e
                if errors.on_error == "collect":
                    errors.items.append(err)
                valid[i] = 0
                parts.append(b"")
                offs[i + 1] = offs[i]
                continue
            offs[i + 1] = offs[i] + len(parts[-1])
            continue
        offs[i + 1] = offs[i]
    data = b"".join(parts)
    validity, nulls = _pack_validity(valid, len(values))
    if len(data) > _MAX32:
        out = pa.Array.from_buffers(pa.large_binary(), len(values), [validity, pa.py_buffer(offs), pa.py_buffer(data)],
                                    null_count=nulls)
    else:
        out = pa.Array.from_buffers(pa.binary(), len(values),
                                    [validity, pa.py_buffer(offs.astype(np.int32)), pa.py_buffer(data)],
                                    null_count=nulls)
    return errors.result(out)


# ------------------------------------------------------------------------------------------------
# decode
# ------------------------------------------------------------------------------------------------


def decode(binary_array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> Any:
    """Deserialize every entry of a BinaryArray; an Arrow array of values (a StructArray for rows)."""
    _check_on_error(on_error)
    k = kernels.KERNELS
    return _per_chunk(binary_array, lambda a, base: _decode_chunk(k, a, serializer, threads, on_error, base),
                      on_error)


def _decode_chunk(k: Any, arr: pa.Array, serializer: Any, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    ranges = _ranges(n, threads)
    offsets, data, validity, offset, wide = _binary_input(arr)
    fixed = _fixed_kind(serializer)
    prog = _row_program(serializer)
    errors = _Errors(on_error, f"decode with {type(serializer).__name__}", prog)
    if prog is not None:
        return errors.result(_decode_rows(k, serializer, prog, n, ranges, errors, base,
                                          (offsets, data, validity, offset, wide), arr))
    stop_at_error = on_error == "raise"
    status = np.zeros(n, dtype=np.int64)
    valid = _validity_bits(arr)
    valid = np.ones(n, dtype=np.uint8) if valid is None else valid

    def finish_valid(bad: np.ndarray) -> tuple[pa.Buffer | None, int]:
        valid[bad] = 0
        valid[status == 1] = 0
        return _pack_validity(valid, n)

    if fixed is not None:
        kind, at = fixed
        w = primitives_py.kind_width(kind)
        out = np.zeros(n * w, dtype=np.uint8)
        _run(ranges, lambda s, e: k.fixed_decode(kind, offsets, data, validity, offset, wide, s, e, out, status,
                                                 stop_at_error))
        bad = errors.from_status(status, base)
        vbuf, nulls = finish_valid(bad)
        values = pa.py_buffer(np.packbits(out, bitorder="little")) if kind == abi.K_BOOL else pa.py_buffer(out)
        return errors.result(pa.Array.from_buffers(at, n, [vbuf, values], null_count=nulls))
    if _is(serializer, "StringSerializer") or _is(serializer, "BytePrimitiveArraySerializer"):
        is_string = _is(serializer, "StringSerializer")
        sizes_fn = k.string_decode_sizes if is_string else k.bytes_decode_sizes
        fill_fn = k.string_decode_fill if is_string else k.bytes_decode_fill
        out_off = np.zeros(n + 1, dtype=np.int64)
        _run(ranges, lambda s, e: sizes_fn(offsets, data, validity, offset, wide, s, e, out_off, status,
                                           stop_at_error))
        bad = errors.from_status(status, base)
        out_off[bad + 1] = 0
        np.cumsum(out_off[1:], out=out_off[1:])
        out_data = np.empty(int(out_off[-1]), dtype=np.uint8)
        _run(ranges, lambda s, e: fill_fn(offsets, data, validity, offset, wide, s, e, out_off, status, out_data))
        vbuf, nulls = finish_valid(bad)
        large = int(out_off[-1]) > _MAX32
        at = (pa.large_string() if large else pa.string()) if is_string else \
            (pa.large_binary() if large else pa.binary())
        obuf = pa.py_buffer(out_off if large else out_off.astype(np.int32))
        return errors.result(pa.Array.from_buffers(at, n, [vbuf, obuf, pa.py_buffer(out_data)], null_count=nulls))
    if (core := plans.compile_core_row_codec(serializer)) is not None:
        return errors.result(_decode_core_rows(k, arr, serializer, core, ranges, errors, valid, base))
    return _decode_per_value(arr, serializer, errors, base)


def _decode_rows(k: Any, serializer: Any, prog: plans.RowProgram, n: int, ranges: list[tuple[int, int]],
                 errors: _Errors, base: int, src: tuple[Any, ...], arr: pa.Array) -> pa.Array:
    """RowData decode in one pass (``decode_run``): the kernel validates each entry and scatters it
    into per-node Arrow buffers (validity bits, values, int32 string / list offsets) and counts the
    valid values itself. Each range appends string bytes to its own buffers, sized from the input
    bytes (an upper bound unless the input is hostile: then they grow); ranges are then joined.
    ARRAY element columns (map keys and values too) are indexed by element and grow as they fill,
    so with arrays or maps the chunk is one range."""
    offsets, data, validity, offset, wide = src
    span = _input_spans(offsets, offset, wide, len(data), n)
    row_type = serializer.row_type
    settle = _Settle(arr, serializer, _decode_per_value, errors, base)
    try:
        out = _decode_rows_with(k, row_type, prog, n, ranges, settle, src, span, span(0, n) > _MAX32)
    except _Widen:
        out = _decode_rows_with(k, row_type, prog, n, ranges, settle, src, span, True)
    return settle.splice(out)


def _decode_rows_with(k: Any, row_type: RowType, prog: plans.RowProgram, n: int, ranges: list[tuple[int, int]],
                      settle: _Settle, src: tuple[Any, ...], span: Callable[[int, int], int],
                      wide_str: bool) -> pa.Array:
    kinds = prog.kinds
    nnodes = len(kinds)
    nbytes = (n + 7) // 8
    elem = [a >= 0 for a in rowdata_py._arrays(prog.matrix.tolist())]
    if any(elem):
        ranges = [(0, n)]  # element columns grow as they fill: one range
    strs = [c for c in range(1, nnodes) if kinds[c] in (abi.R_STR, abi.R_BIN)]
    bits = [np.zeros(nbytes, dtype=np.uint8) for _ in kinds]
    vals: list[Any] = [None] * nnodes
    soffs: list[Any] = [None] * nnodes
    for c in range(1, nnodes):
        if elem[c]:
            continue
        if kinds[c] == abi.R_BOOL:
            vals[c] = np.zeros(nbytes, dtype=np.uint8)
        elif kinds[c] in (abi.R_STR, abi.R_BIN, abi.R_ARRAY):
            soffs[c] = np.empty(n + 1, dtype=np.int64 if wide_str else np.int32)
            soffs[c][0] = 0
        elif kinds[c] not in (abi.R_ROW, abi.R_MAP):
            vals[c] = np.zeros(n * plans.ARROW_WIDTH[kinds[c]], dtype=np.uint8)
    stop_at_error = settle.errors.on_error == "raise"
    code, extra = _machine_code(jit.decode_code, prog.matrix, k, n)  # hold ``code`` while the kernels run

    def elements(cap: int, old: list[Any] | None) -> list[Any]:
        """Outputs of the element columns for ``cap`` elements (keeping ``old``'s contents)."""
        new: list[Any] = [None] * nnodes
        for c in range(1, nnodes):
            if not elem[c]:
                continue
            kd = kinds[c]
            v = np.zeros((cap + 7) // 8 if kd == abi.R_BOOL else cap * plans.ARROW_WIDTH.get(kd, 0), dtype=np.uint8)
            o = np.empty(cap + 1, dtype=np.int64 if wide_str else np.int32) \
                if kd in (abi.R_STR, abi.R_BIN, abi.R_ARRAY) else None
            vbits = np.zeros((cap + 7) // 8, dtype=np.uint8)
            new[c] = [vbits, v if kd not in (abi.R_STR, abi.R_BIN, abi.R_ROW, abi.R_ARRAY, abi.R_MAP) else None, o]
            if o is not None:
                o[0] = 0
            if old is not None:
                for dst, prev in zip(new[c], old[c], strict=True):
                    if dst is not None:
                        dst[:len(prev)] = prev
        return new

    def one(s: int, e: int) -> tuple[list[Any], np.ndarray, np.ndarray, list[tuple[int, int]], list[Any]]:
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
                sdata[c] = _grow(sdata[c], int(spos[c]), wide_str)
            if any(elem):
                if not wide_str and 2 * ecap[0] >= _MAX32:
                    raise _Widen
                ecap[0] *= 2
                els[0] = elements(ecap[0], els[0])

        return sdata, spos, counts, _resume(run, s, e, stop_at_error, grow), els[0]

    parts = _run(ranges, one)
    bad = [b for p in parts for b in p[3]]
    counts = sum(p[2] for p in parts)
    outs = [parts[0][4][c] if elem[c] else (bits[c], vals[c], soffs[c]) for c in range(nnodes)]
    # rows the kernels walked ("raise" stops at the first error: later offsets are unwritten)
    done = min((r + 1 for r, status in bad if not _rerouted(status)), default=n) if stop_at_error else n
    for row, status in _decimals_past_precision(prog, outs, parts[0][1], done, {r for r, _ in bad}):
        bad.append((row, status))  # a bad row: null at the top, like the kernels' own bad rows
        bits[0][row >> 3] &= 0xFF ^ (1 << (row & 7))
        counts[0] -= 1
    settle(bad)  # the kernels' _Widen is behind: settling runs once
    columns: list[Any] = [None] * nnodes
    for c in strs:
        total = sum(int(p[1][c]) for p in parts)
        offs = parts[0][4][c][2] if elem[c] else soffs[c]
        if total > _MAX32 and offs.dtype != np.int64:
            offs = offs.astype(np.int64)
        at = 0
        for (s, e), p in zip(ranges, parts, strict=True):
            if at:
                offs[s + 1:e + 1] += at
            at += int(p[1][c])
        sdata = parts[0][0][c][:total] if len(parts) == 1 else \
            np.concatenate([p[0][c][:int(p[1][c])] for p in parts])
        columns[c] = (offs, sdata, total > _MAX32)

    counter = [0]

    def build(t: LogicalType, length: int) -> pa.Array:
        node = counter[0]
        counter[0] += 1
        at = arrow_type(t)
        nulls = length - int(counts[node])
        valid = parts[0][4][node][0] if elem[node] else bits[node]
        vbuf = pa.py_buffer(valid) if nulls else None
        if isinstance(t, RowType):
            children = [build(f.type, length) for f in t.fields]
            return pa.StructArray.from_buffers(at, length, [vbuf], null_count=nulls, children=children)
        if isinstance(t, ArrayType):
            child = build(t.element_type, int(parts[0][1][node]))
            obuf = pa.py_buffer(outs[node][2].astype(np.int32, copy=False))
            return pa.Array.from_buffers(at, length, [vbuf, obuf], null_count=nulls, children=[child])
        if isinstance(t, (MapType, MultisetType)):
            built = []
            for part in _map_parts(t):  # the key array, then the value array: list offsets alike
                counter[0] += 1
                built.append(build(part, int(parts[0][1][counter[0] - 1])))
            entries = pa.StructArray.from_arrays(built, fields=[at.key_field, at.item_field])
            obuf = pa.py_buffer(outs[node + 1][2].astype(np.int32, copy=False))
            return pa.Array.from_buffers(at, length, [vbuf, obuf], null_count=nulls, children=[entries])
        if columns[node] is not None:
            offs, sdata, large = columns[node]
            if large:
                at = pa.large_string() if kinds[node] == abi.R_STR else pa.large_binary()
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
        if kinds[c] != abi.R_DEC_COMPACT:
            continue
        m = n if arr[c] < 0 else int(spos[arr[c]])  # values in the column (elements of the array)
        limit = int(prog.matrix[c, abi.C_LIMIT])
        unscaled = outs[c][1].view(np.int64)[0::2][:m]
        present = np.unpackbits(outs[c][0], bitorder="little")[:m].astype(bool)
        at = np.flatnonzero(present & ((unscaled >= limit) | (unscaled <= -limit)))
        a = arr[c]
        while a >= 0 and len(at):  # element index -> index in the enclosing column, up to the rows
            at = np.searchsorted(outs[a][2][:(n if arr[a] < 0 else int(spos[arr[a]])) + 1], at, side="right") - 1
            a = arr[a]
        for row in at.tolist():
            if row not in bad:
                found.setdefault(row, abi.encode_err(abi.E_TOO_LARGE, c))
    return sorted(found.items())


def _decode_per_value(arr: pa.Array, serializer: Any, errors: _Errors, base: int) -> Any:
    row_type = getattr(serializer, "row_type", None)
    to_arrow = (lambda v: _from_value(v, row_type)) if row_type is not None else to_arrow_value(serializer)
    values: list[Any] = []
    for i, raw in enumerate(arr.to_pylist()):
        if raw is None:
            values.append(None)
            continue
        try:
            v = serializer.from_bytes(raw)
        except StateFormatError as e:
            errors.add(_per_row_error(e, base + i, "decode"))
            values.append(None)
            continue
        values.append(to_arrow(v))
    try:
        arrow_t = arrow_type(row_type) if row_type is not None else arrow_type_for(serializer)
    except StatemorphError:
        arrow_t = None  # e.g. an Avro union of several types: let Arrow infer
    return errors.result(_to_arrow_array(values, arrow_t, errors, base))


def _to_arrow_array(values: list[Any], arrow_t: pa.DataType | None, errors: _Errors, base: int) -> pa.Array:
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
            err = _tag(MalformedDataError(f"decode: row {base + i}: value does not fit Arrow {arrow_t}: {e}"),
                       base + i, "")
            errors.add(err)
            values[i] = None
    return pa.array(values, type=arrow_t)


# ------------------------------------------------------------------------------------------------
# flink-core Row (RowSerializer): one-pass kernels between Arrow structs and Row bytes
# ------------------------------------------------------------------------------------------------

_CORE_FIXED = {abi.K_BOOL: pa.bool_(), abi.K_I8: pa.int8(), abi.K_I16: pa.int16(), abi.K_I32: pa.int32(),
               abi.K_I64: pa.int64(), abi.K_F32: pa.float32(), abi.K_F64: pa.float64()}


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
    if kind in (abi.K_STR, abi.K_CHAR):
        return a if pa.types.is_string(t) or pa.types.is_large_string(t) else None
    if kind == abi.K_BYTES:
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


def _core_row_columns(arr: pa.Array, prog: plans.RowProgram) -> list[Any] | None:
    """Per program node (pre-order): (validity, values, offsets, element offset, wide, length) of its
    Arrow column (the shape of the RowData encode columns), struct fields matched by position as on
    the per-value path; None when a column's type does not fit its field."""
    m = prog.matrix
    cols: list[Any] = []

    def add(a: pa.Array, node: int) -> bool:
        kind = int(m[node, abi.C_KIND])
        if kind == abi.K_ROW:
            if not pa.types.is_struct(a.type) or a.type.num_fields != m[node, abi.C_ARITY]:
                return False
            cols.append((a.buffers()[0] if a.null_count else None, None, None, a.offset, False, len(a)))
            child = node + 1
            for j in range(a.type.num_fields):
                if not add(a.field(j), child):
                    return False
                child = int(m[child, abi.C_END])
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


def _core_encode_estimate(prog: plans.RowProgram, cols: list[Any]) -> Callable[[int, int], int]:
    """Output bytes of rows ``s..e``, to size the buffer: exact for masks and fixed-width fields
    (as if none were null), the Arrow bytes plus a one-byte header for strings (exact for ASCII
    below 128 characters; wider text grows the buffer) and plus four for byte arrays."""
    per_row = 0
    spans: list[tuple[np.ndarray, int]] = []
    for node, row in enumerate(prog.matrix):
        kind = int(row[abi.C_KIND])
        if kind == abi.K_ROW:
            per_row += (int(row[abi.C_ARITY]) + (2 if row[abi.C_FLAGS] & abi.F_ROW_KIND else 0) + 7) >> 3
        elif kind in (abi.K_STR, abi.K_BYTES):
            per_row += 1 if kind == abi.K_STR else 4
            _, _, offs, off, wide, _ = cols[node]
            spans.append((np.frombuffer(offs, dtype=np.int64 if wide else np.int32), off))
        else:
            per_row += int(row[abi.C_WIDTH])

    def est(s: int, e: int) -> int:
        text = sum(max(0, int(o[off + e]) - int(o[off + s])) for o, off in spans)
        return per_row * (e - s) + text + 64

    return est


def _encode_core_rows(k: Any, arr: pa.Array, prog: plans.RowProgram, cols: list[Any], ranges: list[tuple[int, int]],
                      errors: _Errors, base: int) -> pa.Array:
    """One pass per range: the kernel packs rows into a buffer sized from the input (grown when
    short) and writes int32 offsets itself (int64 only past 2 GiB); it stops at a bad row, which
    is recorded here, and resumes after it."""
    n = len(arr)
    matrix = prog.matrix
    est = _core_encode_estimate(prog, cols)
    bad: list[tuple[int, int]] = []

    def one(s: int, e: int, out_off: np.ndarray) -> tuple[np.ndarray, int] | None:
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
            elif out_off.itemsize == 4 and status > _MAX32:
                return None  # int32 offsets would overflow
            else:
                bigger = np.empty(max(status, 2 * len(buf)), dtype=np.uint8)
                bigger[:pos] = buf[:pos]
                buf = bigger

    def attempt(dtype: type) -> tuple[np.ndarray, list[tuple[np.ndarray, int] | None]]:
        out_off: np.ndarray = np.empty(n + 1, dtype=dtype)
        out_off[0] = 0
        bad.clear()
        return out_off, _run(ranges, lambda s, e: one(s, e, out_off))

    out_off, parts = attempt(np.int32)
    if any(p is None for p in parts):  # past 2 GiB: the whole chunk again with int64 offsets
        out_off, parts = attempt(np.int64)
    for i, status in sorted(bad):
        errors.add(_make_error(status, base + i, prog, errors.what))
    done = [p for p in parts if p is not None]
    total = sum(pos for _, pos in done)
    if out_off.itemsize == 4 and total > _MAX32:
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
    valid = _validity_bits(arr)
    if bad:
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[[i for i, _ in bad]] = 0
    vbuf, nulls = _pack_validity(valid, n)
    out_t = pa.large_binary() if out_off.itemsize == 8 else pa.binary()
    return pa.Array.from_buffers(out_t, n, [vbuf, pa.py_buffer(out_off), pa.py_buffer(out_data)], null_count=nulls)


def _large(t: pa.DataType) -> pa.DataType:
    """``t`` with every string / binary made large (to join ranges that widened differently)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(j).name, _large(t.field(j).type)) for j in range(t.num_fields)])
    if pa.types.is_string(t):
        return pa.large_string()
    return pa.large_binary() if pa.types.is_binary(t) else t


def _decode_core_rows(k: Any, arr: pa.Array, serializer: Any, prog: plans.RowProgram, ranges: list[tuple[int, int]],
                      errors: _Errors, valid: np.ndarray, base: int) -> pa.Array:
    """One pass per range: the kernel scatters each entry into per-field Arrow buffers (string
    data sized from the input, grown when short, int32 offsets unless past 2 GiB); it stops at a
    bad entry, which is recorded here, and resumes after it."""
    n = len(arr)
    offsets, data, validity, offset, wide = _binary_input(arr)
    matrix = prog.matrix
    kinds = prog.kinds
    span = _input_spans(offsets, offset, wide, len(data), n)
    share = max(1, sum(kd in plans.STRING_KINDS for kd in kinds))
    bad: list[tuple[int, int]] = []

    def one(s: int, e: int) -> tuple[list[Any], np.ndarray]:
        m = e - s
        outs: list[Any] = [None]
        for kd in kinds[1:]:
            vbits = np.zeros((m + 7) // 8, dtype=np.uint8)
            if kd in plans.STRING_KINDS:
                outs.append([vbits, None, np.zeros(m + 1, dtype=np.int32),
                             np.empty(span(s, e) // share + 64, dtype=np.uint8)])
            elif kd == abi.K_ROW:
                outs.append([vbits, None, None, None])
            else:
                size = (m + 7) // 8 if kd == abi.K_BOOL else m * primitives_py.kind_width(kd)
                outs.append([vbits, np.zeros(size, dtype=np.uint8), None, None])
        spos = np.zeros(len(kinds), dtype=np.int64)
        i = 0
        while True:
            i, status, node = k.corerow_decode(matrix, offsets, data, validity, offset + s, wide, i, m, outs, spos)
            if status == 0:
                return outs, spos
            if status < 0:
                bad.append((s + i, status))
                if errors.on_error == "raise":
                    return outs, spos
                i += 1
                continue
            o = outs[node]
            if o[2].itemsize == 4 and status > _MAX32:
                o[2] = o[2].astype(np.int64)
            if status > len(o[3]):
                bigger = np.empty(max(status, 2 * len(o[3])), dtype=np.uint8)
                bigger[:spos[node]] = o[3][:spos[node]]
                o[3] = bigger

    parts = _run(ranges, lambda s, e: one(s, e))
    for i, status in sorted(bad):
        errors.add(_make_error(status, base + i, prog, errors.what))
    valid[[i for i, _ in bad]] = 0

    def build(outs: list[Any], spos: np.ndarray, m: int, node: int, t: pa.DataType) -> pa.Array:
        vbits, vals, so, sdata = outs[node]
        nulls = m - int(np.bitwise_count(vbits).sum())
        vbuf = pa.py_buffer(vbits) if nulls else None
        kd = kinds[node]
        if kd == abi.K_ROW:
            return _core_struct(t, m, vbuf, nulls, children(outs, spos, m, node, t))
        if kd in plans.STRING_KINDS:
            large = so.itemsize == 8
            if kd == abi.K_BYTES:
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
            c = int(matrix[c, abi.C_END])
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
    vbuf, nulls = _pack_validity(valid, n)
    return _core_struct(at, n, vbuf, nulls, kids)


def _core_struct(t: pa.DataType, n: int, vbuf: pa.Buffer | None, nulls: int, kids: list[pa.Array]) -> pa.Array:
    """A struct of ``t``'s field names over ``kids`` (whose types may have widened to large)."""
    st = pa.struct([pa.field(t.field(j).name, kid.type) for j, kid in enumerate(kids)])
    return pa.StructArray.from_buffers(st, n, [vbuf], null_count=nulls, children=kids)


# ------------------------------------------------------------------------------------------------
# migrate
# ------------------------------------------------------------------------------------------------


def migrate(binary_array: Any, prior_snapshot: Any, new_serializer: Any, *, threads: int = 1,
            on_error: str = "raise") -> Any:
    """Rewrite every entry written under ``prior_snapshot`` into ``new_serializer``'s format.

    Compatibility is resolved once (incompatible → :class:`IncompatibleSchemaError` naming the
    fields). RowData → RowData, flink-core Row → Row, POJO → POJO (fields added, removed,
    reordered) and Avro → Avro run byte-remap kernels when the program compiler can express the
    plan; other serializers migrate per value through the reference implementation."""
    _check_on_error(on_error)
    compat = prior_snapshot.resolve_schema_compatibility(new_serializer)
    if compat.is_incompatible():
        raise IncompatibleSchemaError(f"cannot migrate: {compat.reason}", compat.reason)
    k = kernels.KERNELS
    prog, kernel = _remap_program(prior_snapshot, new_serializer, compat)
    return _per_chunk(binary_array, lambda a, base: _migrate_chunk(k, a, prior_snapshot, new_serializer, compat,
                                                                   prog, kernel, threads, on_error, base), on_error)


def _rowdata_program(prior_snapshot: Any, new_serializer: Any) -> plans.RowProgram:
    from .migration import plan_row_migration

    return plans.compile_migration_program(plan_row_migration(prior_snapshot.row_type, new_serializer.row_type))


# serializer class (its snapshot class is this + "Snapshot"), kernel, when its remap applies, program compiler
_REMAP_KERNELS: tuple[tuple[str, str, Callable[[Any], bool], Callable[[Any, Any], Any]], ...] = (
    ("RowDataSerializer", "rowdata", lambda compat: True, _rowdata_program),
    ("RowSerializer", "core", lambda compat: not compat.is_compatible_with_reconfigured_serializer(),
     plans.compile_core_row_program),
    ("PojoSerializer", "pojo", lambda compat: compat.is_compatible_after_migration(),
     plans.compile_pojo_program),
    ("AvroSerializer", "avro", lambda compat: compat.is_compatible_after_migration(), plans.compile_avro_program),
)


def _remap_program(prior_snapshot: Any, new_serializer: Any, compat: Any) -> tuple[Any, str]:
    """The byte-remap kernel for this pair of serializers and its program, or (None, kind) when
    the migration goes per value (no such kernel, or a plan its program compiler cannot express)."""
    for name, kernel, applies, compile_program in _REMAP_KERNELS:
        if _is(new_serializer, name) and type(prior_snapshot).__name__ == name + "Snapshot" and applies(compat):
            try:
                return compile_program(prior_snapshot, new_serializer), kernel
            except plans.NotByteRemappable:
                return None, kernel
    return None, "rowdata"


def _migrate_chunk(k: Any, arr: pa.Array, prior_snapshot: Any, new_serializer: Any, compat: Any,
                   prog: plans.RowProgram | None, kernel: str, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    errors = _Errors(on_error, "migrate", prog)
    if prog is None:
        return _migrate_per_value(arr, prior_snapshot, new_serializer, compat, errors, base)
    offsets, data, validity, offset, wide = _binary_input(arr)
    valid = _validity_bits(arr)
    matrix = prog.matrix

    ranges = _ranges(n, threads)
    if kernel in ("rowdata", "pojo", "avro"):
        # one-pass kernels; the output estimate is the input bytes plus the plan's per-entry growth
        run_kernel, growth = {"rowdata": (k.migrate_run, _row_growth(matrix)),
                              "pojo": (k.pojo_migrate_run, plans.pojo_growth(matrix)),
                              "avro": (k.avro_migrate_run, plans.avro_growth(matrix))}[kernel]
        span = _input_spans(offsets, offset, wide, len(data), n)
        code, extra = _machine_code(jit.plan_code, matrix, k, n) if kernel == "rowdata" else (None, ())

        def run(s: int, i: int, e: int, out_off: np.ndarray, out: np.ndarray, pos: int) -> tuple[int, int, int]:
            return run_kernel(matrix, offsets, data, validity, offset + s, wide, i, e, out_off, out, pos, *extra)

        def estimate(s: int, e: int) -> int:
            return span(s, e) + growth * (e - s)

        fallback = None
        if kernel == "avro":
            prior = prior_snapshot.restore_serializer()

            def fallback(row: int) -> bytes | Exception:
                """An entry the kernel leaves to the reference (``HAND_BACK``): its bytes, or
                the error of a bad entry."""
                try:
                    return _migrate_one(arr[row].as_py(), prior_snapshot, prior, new_serializer, False)
                except StateFormatError as e:
                    return _per_row_error(e, base + row, "migrate")

        return errors.result(_fused_output(n, ranges, valid, errors, base, run, wide, estimate, fallback))

    def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
        k.core_row_sizes(matrix, offsets, data, validity, offset, wide, s, e, out_off, stop)

    def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
        k.core_row_fill(matrix, offsets, data, validity, offset, wide, s, e, out_off, out)

    out = _binary_output(n, ranges, valid, errors, base, sizes, fill, wide)
    return errors.result(out)


_MACHINE_CODE_MIN = 8192  # entries in a chunk before a plan is compiled to machine code


def _machine_code(compile_plan: Callable[[np.ndarray], Any], matrix: np.ndarray, k: Any,
                  n: int) -> tuple[Any, tuple[int, ...]]:
    """The machine code of a RowData program (``compile_plan`` from :mod:`statemorph.kernels.jit`)
    and the kernel's extra argument for it (its address): none on the Python tier, or for chunks
    under ``_MACHINE_CODE_MIN`` entries (compiling costs ~0.1 s, once per plan and process). The
    caller holds the code object for as long as the kernels run (it owns the code's memory)."""
    code = compile_plan(matrix) if k.name == "native" and n >= _MACHINE_CODE_MIN else None
    return code, ((code.address,) if code is not None else ())


def _input_spans(offsets: Any, offset: int, wide: bool, data_len: int, n: int) -> Callable[[int, int], int]:
    """Bytes of input entries ``s..e`` (an output-size estimate only: clamped, never trusted)."""
    offs = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32)

    def span(s: int, e: int) -> int:
        if offset + e >= len(offs):
            return data_len
        return max(0, min(data_len, int(offs[offset + e]) - int(offs[offset + s])))

    return span


def _row_growth(matrix: np.ndarray) -> int:
    """Bytes a migration adds per entry to the fixed parts of its remapped rows (arity changes);
    with the input span it sizes the one-pass output buffer, which grows if the guess is short."""
    grow = 0
    for row in matrix:
        if row[abi.C_KIND] == abi.R_ROW and not row[abi.C_FLAGS] & abi.F_VERBATIM:
            new_arity, old_arity = int(row[abi.C_ARITY]), int(row[abi.C_OLD_ARITY])
            grow += 8 * (new_arity - old_arity) + 8 * ((new_arity + 63 + 8) // 64 - (old_arity + 63 + 8) // 64)
    return max(grow, 0)


class _Part:
    """One range's one-pass output: its offsets (a window of the shared offsets array, positions
    relative to the range's own bytes) and its bytes packed into ``out`` (a window of the shared
    byte buffer, or a buffer of its own once it outgrew the window)."""

    def __init__(self, offs: np.ndarray, out: np.ndarray) -> None:
        self.offs = offs
        self.out = out
        self.own = False
        self.pos = 0
        self.bad: list[tuple[int, int | Exception]] = []

    def grow(self) -> None:
        """Double the byte buffer (an entry did not fit), keeping what is written; widen the
        offsets (to an array of its own) if the buffer passes what int32 offsets address."""
        size = 2 * len(self.out) + 64
        if self.offs.dtype == np.int32 and size > _MAX32:
            self.offs = self.offs.astype(np.int64)
        bigger = _pooled(size)
        bigger[:self.pos] = self.out[:self.pos]
        self.out, self.own = bigger, True


def _fused_output(n: int, ranges: list[tuple[int, int]], valid: np.ndarray | None, errors: _Errors, base: int,
                  run: Callable[..., tuple[int, int, int]], large: bool, estimate: Callable[[int, int], int],
                  fallback: Callable[[int], bytes | Exception] | None = None) -> pa.Array:
    """One-pass binary output. Each range (one per thread) packs its entries into its window of
    one shared buffer, sized from the input bytes plus the fixed-part growth of the plan, and the
    kernel writes the Arrow offsets itself into the range's window of the offsets array (int32
    unless the output may pass 2 GiB). Bad entries take no bytes and become nulls (or raise / are
    collected); the kernel stops at each one, so there is no per-entry status array. Later ranges
    then slide down to close the gaps and their offsets are shifted, in place: peak memory stays
    input + output + a constant. A range that outgrew its window (rare: the estimate is exact for
    well-formed rows without migrated arrays) moves to a buffer of its own. An entry the kernel
    leaves to the per-value reference (status ``HAND_BACK``) is written by ``fallback``, in
    place, or is a bad entry with the reference's error."""
    stop_at_error = errors.on_error == "raise"
    sizes = [estimate(s, e) + 64 for s, e in ranges]
    starts = [sum(sizes[:j]) for j in range(len(ranges))]
    shared = _pooled(sum(sizes))
    out_off = _pooled(n + 1, np.int64 if large or sum(sizes) > _MAX32 else np.int32)
    out_off[0] = 0

    def one(j: int, _: int) -> _Part:
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
        return part

    parts = _run([(j, 0) for j in range(len(ranges))], one)
    bad = sorted((b for p in parts for b in p.bad), key=lambda b: b[0])
    for row, status in bad:  # raises the first in 'raise'
        errors.add(status if isinstance(status, Exception) else _make_error(status, base + row, errors.prog,
                                                                             errors.what))
    if bad:
        valid = np.ones(n, dtype=np.uint8) if valid is None else valid
        valid[[row for row, _ in bad]] = 0
    total = sum(p.pos for p in parts)
    if out_off.dtype == np.int32 and total > _MAX32:
        out_off = _pooled(n + 1, np.int64)  # a range outgrew int32 offsets: parts copy in below
        out_off[0] = 0
    own = len(parts) > 1 and any(p.own for p in parts)
    if len(parts) == 1:
        shared = parts[0].out
    elif own:
        shared = _pooled(total)  # rare: a range outgrew its window
    at = 0
    for (s, e), p in zip(ranges, parts, strict=True):
        window = out_off[s + 1:e + 1]
        if not np.shares_memory(p.offs, out_off):
            np.copyto(window, p.offs[1:], casting="unsafe")
        if at:
            window += at
            if p.out.ctypes.data != shared.ctypes.data + at:  # down (or across) to its final place
                ctypes.memmove(shared.ctypes.data + at, p.out.ctypes.data, p.pos)
        elif own and p.out.ctypes.data != shared.ctypes.data:
            ctypes.memmove(shared.ctypes.data, p.out.ctypes.data, p.pos)
        at += p.pos
    if not large and out_off.dtype == np.int64 and total <= _MAX32:
        out_off = out_off.astype(np.int32)  # the estimate was pessimistic: keep binary's type
    validity, nulls = _pack_validity(valid, n)
    arrow_t = pa.binary() if out_off.dtype == np.int32 else pa.large_binary()
    return pa.Array.from_buffers(arrow_t, n, [validity, pa.py_buffer(out_off), pa.py_buffer(shared[:total])],
                                 null_count=nulls)


def _migrate_one(raw: bytes, prior_snapshot: Any, prior: Any, target: Any, as_is: bool) -> bytes:
    """One entry through the reference: validated and copied (as is), or read and rewritten."""
    src = DataInputDeserializer(raw)
    if as_is:
        prior.deserialize(src)
        src.expect_end("the value")
        return bytes(raw)
    out = DataOutputSerializer()
    prior_snapshot.migrate_state(prior, target, src, out)
    src.expect_end("the value")
    return out.get_copy_of_buffer()


def _migrate_per_value(arr: pa.Array, prior_snapshot: Any, new_serializer: Any, compat: Any, errors: _Errors,
                       base: int) -> Any:
    prior = prior_snapshot.restore_serializer()
    target = compat.get_reconfigured_serializer() if compat.is_compatible_with_reconfigured_serializer() \
        else new_serializer
    as_is = compat.is_compatible_as_is()
    outs: list[bytes | None] = []
    for i, raw in enumerate(arr.to_pylist()):
        if raw is None:
            outs.append(None)
            continue
        try:
            outs.append(_migrate_one(raw, prior_snapshot, prior, target, as_is))
        except StateFormatError as e:
            errors.add(_per_row_error(e, base + i, "migrate"))
            outs.append(None)
    total = sum(len(o) for o in outs if o is not None)
    result = pa.array(outs, type=pa.large_binary() if total > _MAX32 else pa.binary())
    return errors.result(result)


__all__ = ["arrow_type", "decode", "encode", "migrate"]
