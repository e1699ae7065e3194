"""Key groups for whole Arrow columns of keys, vectorised with numpy.

Why: building or bootstrapping a savepoint in bulk needs ``murmurHash(key.hashCode()) %
maxParallelism`` for millions of keys; a Python loop over :mod:`statemorph.keyed.keygroups` would
dominate the run time. These functions compute the same numbers with uint32 wrap-around arithmetic
over numpy arrays, and fall back to the per-key reference for key types without a vector form.
Tests compare both on random keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SerializationError
from ..keyed.keygroups import binary_row_hash, hasher_for_serializer, is_row_data_serializer, key_hash_of


def _rotl(v: np.ndarray, n: int) -> np.ndarray:
    return (v << np.uint32(n)) | (v >> np.uint32(32 - n))


def murmur_hash(codes: np.ndarray) -> np.ndarray:
    """Flink's ``MathUtils.murmurHash(int)`` over an int32/uint32 array → non-negative int64."""
    c = codes.astype(np.uint32, copy=True)
    with np.errstate(over="ignore"):
        c *= np.uint32(0xCC9E2D51)
        c = _rotl(c, 15)
        c *= np.uint32(0x1B873593)
        c = _rotl(c, 13)
        c = c * np.uint32(5) + np.uint32(0xE6546B64)
        c ^= np.uint32(4)
        c ^= c >> np.uint32(16)
        c *= np.uint32(0x85EBCA6B)
        c ^= c >> np.uint32(13)
        c *= np.uint32(0xC2B2AE35)
        c ^= c >> np.uint32(16)
    s = c.view(np.int32).astype(np.int64)
    s = np.where(s >= 0, s, np.where(s == -(1 << 31), 0, -s))
    return s


def _long_hash(v: np.ndarray) -> np.ndarray:
    u = v.astype(np.int64).view(np.uint64)
    return (u ^ (u >> np.uint64(32))).astype(np.uint32)


def _string_hash(arr: pa.Array) -> np.ndarray:
    """Java ``String.hashCode`` of every string: Horner over UTF-16 units, one vector step per
    character position (strings shorter than the position are left alone)."""
    n = len(arr)
    h = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return h
    # UTF-16 units of all strings, concatenated, with per-string offsets
    encoded = [s.encode("utf-16-le") if s is not None else b"" for s in arr.to_pylist()]
    lengths = np.fromiter((len(b) // 2 for b in encoded), dtype=np.int64, count=n)
    units = np.frombuffer(b"".join(encoded), dtype="<u2").astype(np.uint32)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    maxlen = int(lengths.max()) if n else 0
    with np.errstate(over="ignore"):
        for j in range(maxlen):
            live = lengths > j
            idx = np.nonzero(live)[0]
            h[idx] = h[idx] * np.uint32(31) + units[starts[idx] + j]
    return h


def java_hash_codes(keys: pa.Array, key_serializer: Any) -> np.ndarray:
    """Java ``hashCode`` of every key (uint32 bit pattern), chosen by the key serializer as Flink
    does (7 under IntSerializer hashes as Integer, under LongSerializer as Long). RowData keys
    (``BinaryRowData.hashCode``) may be given typed (structs) or as their serialized bytes."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if keys.null_count:
        raise SerializationError(f"keys must not be null ({keys.null_count} null keys)")
    kind = key_hash_of(key_serializer)  # the Java hashCode the serializer's class declares
    if kind == "int":
        ints: np.ndarray = keys.to_numpy(zero_copy_only=False).astype(np.int64).astype(np.uint32)
        return ints
    if kind == "long":
        return _long_hash(keys.to_numpy(zero_copy_only=False))
    if kind == "boolean":
        return np.where(keys.to_numpy(zero_copy_only=False), 1231, 1237).astype(np.uint32)
    if kind == "string":
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            keys = pc.cast(keys, pa.string())
        return _string_hash(keys)
    if is_row_data_serializer(key_serializer):
        # BinaryRowData hashes its bytes: typed rows (structs) are encoded in bulk first
        if not (pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type)):
            from .. import bulk

            keys = bulk.encode(keys, key_serializer).values
        return np.fromiter((binary_row_hash(b[4:]) & 0xFFFFFFFF for b in keys.to_pylist()), dtype=np.int64,
                           count=len(keys)).astype(np.uint32)
    hasher = hasher_for_serializer(key_serializer)
    return np.fromiter((hasher(k) & 0xFFFFFFFF for k in keys.to_pylist()), dtype=np.int64,
                       count=len(keys)).astype(np.uint32)


def key_groups(keys: pa.Array, key_serializer: Any, max_parallelism: int) -> pa.Array:
    """``KeyGroupRangeAssignment.assignToKeyGroup`` for every key, as an int32 Arrow array."""
    groups = murmur_hash(java_hash_codes(keys, key_serializer)) % max_parallelism
    return pa.array(groups.astype(np.int32), type=pa.int32())


__all__ = ["java_hash_codes", "key_groups", "murmur_hash"]
