"""Key groups exactly as Flink assigns them.

Flink partitions keyed state into ``max_parallelism`` key groups:
``KeyGroupRangeAssignment.assignToKeyGroup(key) = MathUtils.murmurHash(key.hashCode()) % maxParallelism``.
A savepoint is only portable between Flink and statemorph if both put every key into the same
group, so the Java ``hashCode`` of the key object and Flink's murmur finaliser are reproduced here
with 32-bit wrap-around arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SerializationError
from ..io import double_to_long_bits, float_to_int_bits, utf16_units

_M32 = 0xFFFFFFFF
UPPER_BOUND_MAX_PARALLELISM = 1 << 15
"""Flink's ``Transformation.UPPER_BOUND_MAX_PARALLELISM`` (inclusive)."""


def _i32(v: int) -> int:
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


def _rotl(v: int, n: int) -> int:
    v &= _M32
    return ((v << n) | (v >> (32 - n))) & _M32


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative int."""
    c = (code * 0xCC9E2D51) & _M32
    c = _rotl(c, 15)
    c = (c * 0x1B873593) & _M32
    c = _rotl(c, 13)
    c = (c * 5 + 0xE6546B64) & _M32
    c ^= 4
    c ^= c >> 16
    c = (c * 0x85EBCA6B) & _M32
    c ^= c >> 13
    c = (c * 0xC2B2AE35) & _M32
    c ^= c >> 16
    s = _i32(c)
    if s >= 0:
        return s
    if s != -(1 << 31):
        return -s
    return 0


# -- Java hashCode of the boxed key types -------------------------------------------------------

def java_int_hash(v: int) -> int:
    """``Integer.hashCode`` (also Short and Byte: the value itself)."""
    return _i32(v)


def java_long_hash(v: int) -> int:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))``."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return _i32(u ^ (u >> 32))


def java_string_hash(s: str) -> int:
    """``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32 overflow."""
    h = 0
    for unit in utf16_units(s):
        h = (31 * h + unit) & _M32
    return _i32(h)


def java_boolean_hash(v: bool) -> int:
    return 1231 if v else 1237


def java_char_hash(v: str | int) -> int:
    if isinstance(v, str):
        units = utf16_units(v)
        if len(units) != 1:
            raise SerializationError(f"a char key must be one UTF-16 code unit, got {v!r}")
        return units[0]
    return v & 0xFFFF


def java_float_hash(v: float) -> int:
    return _i32(float_to_int_bits(v))


def java_double_hash(v: float) -> int:
    return java_long_hash(double_to_long_bits(v))


def binary_row_hash(row: bytes) -> int:
    """``BinaryRowData.hashCode()``: ``MurmurHashUtil.hashBytesByWords`` (seed 42) over the row's
    bytes read as little-endian ints (MemorySegment's native order on every platform Flink runs
    on), the bytes without the serializer's length prefix. SQL jobs key their state by such rows."""
    n = len(row)
    if n % 4:
        raise SerializationError(f"a BinaryRowData of {n} bytes is not word-aligned")
    h = 42
    for i in range(0, n, 4):
        k = int.from_bytes(row[i : i + 4], "little")
        k = (_rotl((k * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32
        h ^= k
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _M32
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return _i32(h)


KeyHasher = Callable[[Any], int]

_HASHERS: dict[str, KeyHasher] = {
    "int": java_int_hash,
    "long": java_long_hash,
    "string": java_string_hash,
    "boolean": java_boolean_hash,
    "char": java_char_hash,
    "float": java_float_hash,
    "double": java_double_hash,
}
"""Each Java ``hashCode`` a serializer class may declare for its keys (``TypeSerializer.KEY_HASH``)."""


def key_hash_of(key_serializer: Any) -> str:
    """The Java ``hashCode`` its class declares for its keys (``TypeSerializer.KEY_HASH``), "" if none."""
    return str(getattr(type(key_serializer), "KEY_HASH", ""))


def hasher_for_serializer(key_serializer: Any) -> KeyHasher:
    """The Java ``hashCode`` of the key type that ``key_serializer`` writes.

    Chosen by the serializer, not by the Python value: the int 7 hashes as an ``Integer`` under
    IntSerializer and as a ``Long`` under LongSerializer, as it does in Flink. Key types whose Java
    hash is not reproducible here (arrays and enums hash by identity in Java; composite keys) need
    an explicit ``key_hasher``.
    """
    h = _HASHERS.get(key_hash_of(key_serializer))
    if h is not None:
        return h
    if is_row_data_serializer(key_serializer):
        def row_hash(key: Any) -> int:
            return binary_row_hash(key_serializer.to_bytes(key)[4:])

        return row_hash
    name = type(key_serializer).__name__

    def unsupported(_key: Any) -> int:
        raise SerializationError(
            f"no Java hashCode is known for keys written by {name}; pass key_hasher=<function "
            f"returning the key's Java hashCode> to the backend"
        )

    return unsupported


def is_row_data_serializer(key_serializer: Any) -> bool:
    """RowData keys (Flink SQL): their bytes are length-prefixed BinaryRowData."""
    return key_hash_of(key_serializer) == "binary_row"


def has_java_hash(key_serializer: Any) -> bool:
    """Whether :func:`hasher_for_serializer` knows the Java ``hashCode`` of ``key_serializer``'s
    keys (what re-assigning them to key groups needs), so callers can refuse before any work."""
    return is_row_data_serializer(key_serializer) or key_hash_of(key_serializer) in _HASHERS


def assign_to_key_group(key_hash: int, max_parallelism: int) -> int:
    """``KeyGroupRangeAssignment.computeKeyGroupForKeyHash``."""
    return murmur_hash(key_hash) % max_parallelism


def check_max_parallelism(max_parallelism: int) -> int:
    if not isinstance(max_parallelism, int) or isinstance(max_parallelism, bool):
        raise ValueError(f"max_parallelism must be an int, got {max_parallelism!r}")
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max_parallelism must be in 1..{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}")
    return max_parallelism


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """``CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix``: 1 or 2."""
    return 2 if max_parallelism > 128 else 1


@dataclass(frozen=True)
class KeyGroupRange:
    """An inclusive range of key groups, one parallel instance's share (Flink's ``KeyGroupRange``)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid key group range [{self.start}, {self.end}]")

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __len__(self) -> int:
        return self.end - self.start + 1

    @classmethod
    def of(cls, value: KeyGroupRange | tuple[int, int] | None, max_parallelism: int) -> KeyGroupRange:
        """Normalise a user-given range (None = all groups) and check it fits ``max_parallelism``."""
        if value is None:
            return cls(0, max_parallelism - 1)
        r = value if isinstance(value, KeyGroupRange) else cls(int(value[0]), int(value[1]))
        if r.end >= max_parallelism:
            raise ValueError(
                f"key group range [{r.start}, {r.end}] exceeds max_parallelism {max_parallelism} "
                f"(groups 0..{max_parallelism - 1})"
            )
        return r


def key_group_range_for_operator(max_parallelism: int, parallelism: int, operator_index: int) -> KeyGroupRange:
    """``KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex``."""
    check_max_parallelism(max_parallelism)
    if not 0 < parallelism <= max_parallelism:
        raise ValueError(f"parallelism must be in 1..{max_parallelism}, got {parallelism}")
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator index must be in 0..{parallelism - 1}, got {operator_index}")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


__all__ = [
    "KeyGroupRange",
    "KeyHasher",
    "UPPER_BOUND_MAX_PARALLELISM",
    "assign_to_key_group",
    "binary_row_hash",
    "has_java_hash",
    "is_row_data_serializer",
    "key_hash_of",
    "check_max_parallelism",
    "hasher_for_serializer",
    "java_boolean_hash",
    "java_char_hash",
    "java_double_hash",
    "java_float_hash",
    "java_int_hash",
    "java_long_hash",
    "java_string_hash",
    "key_group_prefix_bytes",
    "key_group_range_for_operator",
    "murmur_hash",
]
