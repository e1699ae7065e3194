# cython: language_level=3
"""Fixed-width DataStream primitives (Flink's big-endian ``IntSerializer``, ``LongSerializer`` ...)
between Arrow columns and binary columns of serialized values.

Contract (mirrored line by line by ``statemorph.kernels.primitives_py``):

- ``fixed_encode(kind, values, validity, offset, start, stop, out_off, out_data)``: rows
  ``start..stop`` of an Arrow fixed-width column (``values`` buffer, bit-packed for BOOLEAN) are
  written big-endian at ``out_off[i]`` in ``out_data``; null rows are skipped (their output entry
  is empty and the caller marks it null). Float/double NaNs are canonicalised as Java does.
- ``fixed_decode(kind, offsets, data, validity, offset, wide, start, stop, out_values, status,
  stop_at_error)``: each valid entry must be exactly the value width; values land little-endian in
  ``out_values``. ``status[i]`` is 0 or an encoded error (see ``kernels.abi.decode_err``). Returns
  the first bad row, or -1.
"""

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from cursor cimport *

__statemorph_native__ = True

def fixed_encode(int kind, values, validity, int64_t offset, int64_t start, int64_t stop,
                 int64_t[::1] out_off, uint8_t[::1] out_data):
    cdef const uint8_t[::1] vmv = u8(values)
    cdef const uint8_t[::1] bmv
    cdef const uint8_t* vp = &vmv[0] if vmv.shape[0] else NULL
    cdef const uint8_t* bp = NULL
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    cdef int w = kind_width(kind)
    cdef int64_t i, j, n_out = out_data.shape[0]
    cdef uint32_t u32
    if validity is not None:
        bmv = u8(validity)
        if (offset + stop + 7) // 8 > bmv.shape[0]:
            raise ValueError("validity buffer shorter than the array")
        bp = &bmv[0]
    if kind == LEAF_BOOL:
        if (offset + stop + 7) // 8 > vmv.shape[0]:
            raise ValueError("values buffer shorter than the array")
    elif (offset + stop) * w > vmv.shape[0]:
        raise ValueError("values buffer shorter than the array")
    with nogil:
        for i in range(start, stop):
            j = offset + i
            if bp != NULL and not bit_get(bp, j):
                continue
            if out_off[i] + w > n_out:
                break
            if kind == LEAF_BOOL:
                op[out_off[i]] = bit_get(vp, j)
            elif kind == LEAF_I8:
                op[out_off[i]] = vp[j]
            elif kind == LEAF_I16 or kind == LEAF_CHAR:
                memcpy(&u32, vp + 2 * j, 2)
                store_u16_be(op + out_off[i], <uint16_t>u32)
            elif kind == LEAF_I32:
                store_u32_be(op + out_off[i], load_u32_le(vp + 4 * j))
            elif kind == LEAF_F32:
                store_u32_be(op + out_off[i], java_f32_bits(load_u32_le(vp + 4 * j)))
            elif kind == LEAF_I64:
                store_u64_be(op + out_off[i], load_u64_le(vp + 8 * j))
            else:
                store_u64_be(op + out_off[i], java_f64_bits(load_u64_le(vp + 8 * j)))


def fixed_decode(int kind, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                 uint8_t[::1] out_values, int64_t[::1] status, bint stop_at_error):
    cdef const uint8_t[::1] omv = u8(offsets)
    cdef const uint8_t[::1] dmv = u8(data)
    cdef const uint8_t[::1] bmv
    cdef BinView v
    cdef Cursor c
    cdef int w = kind_width(kind)
    cdef int code
    cdef int64_t i, first = -1
    cdef uint8_t* op = &out_values[0] if out_values.shape[0] else NULL
    cdef uint16_t u16
    v.offsets = &omv[0]
    v.data = &dmv[0] if dmv.shape[0] else NULL
    v.validity = NULL
    v.offset = offset
    v.data_len = dmv.shape[0]
    v.wide = wide
    if validity is not None:
        bmv = u8(validity)
        if (offset + stop + 7) // 8 > bmv.shape[0]:
            raise ValueError("validity buffer shorter than the array")
        v.validity = &bmv[0]
    if (offset + stop + 1) * (8 if wide else 4) > omv.shape[0]:
        raise ValueError("offsets buffer shorter than the array")
    if kind == LEAF_BOOL:
        if stop > out_values.shape[0]:
            raise ValueError("output buffer too small")
    elif stop * w > out_values.shape[0]:
        raise ValueError("output buffer too small")
    with nogil:
        for i in range(start, stop):
            status[i] = 0
            if not bv_valid(&v, i):
                continue
            code = bv_entry(&v, i, &c)
            if code == ERR_OK and c.end - c.pos != w:
                code = ERR_TRUNCATED if c.end - c.pos < w else ERR_TRAILING
            if code != ERR_OK:
                if row_failed(&status[i], encode_err(code, -1), i, &first, stop_at_error):
                    break
                continue
            if kind == LEAF_BOOL:
                # bytes of BOOL decode to a 0/1 byte per row; the caller packs them
                op[i] = 1 if c.base[c.pos] != 0 else 0
            elif kind == LEAF_I8:
                op[i] = c.base[c.pos]
            elif kind == LEAF_I16 or kind == LEAF_CHAR:
                u16 = load_u16_be(c.base + c.pos)
                memcpy(op + 2 * i, &u16, 2)
            elif kind == LEAF_I32 or kind == LEAF_F32:
                store_u32_le(op + 4 * i, load_u32_be(c.base + c.pos))
            else:
                store_u64_le(op + 8 * i, load_u64_be(c.base + c.pos))
    return first
