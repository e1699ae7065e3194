"""Key group assignment against values printed by real Flink 2.3
(``KeyGroupRangeAssignment.assignToKeyGroup`` and ``MathUtils.murmurHash``)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemorph.errors import SerializationError
from statemorph.keyed.keygroups import (
    KeyGroupRange,
    assign_to_key_group,
    hasher_for_serializer,
    java_boolean_hash,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    key_group_prefix_bytes,
    key_group_range_for_operator,
    murmur_hash,
)
from statemorph.serializers import (
    BytePrimitiveArraySerializer,
    IntSerializer,
    LongSerializer,
    ShortSerializer,
    StringSerializer,
)

# MathUtils.murmurHash(code), from Flink 2.3
MURMUR = {0: 593689054, 1: 68075478, -1: 1982413648, 7: 1343918321, -2147483648: 1718298732,
          2147483647: 1653689534, -2147483647: 1646524924, 99999: 1322589785}

# assignToKeyGroup(Integer / Long / String key, maxParallelism), from Flink 2.3
INT_GROUPS = {
    128: {0: 94, 1: 86, -1: 80, 7: 113, 42: 29, 123456789: 81, -2147483648: 108, 2147483647: 62},
    1000: {0: 54, 1: 478, -1: 648, 7: 321, 42: 565, 123456789: 449, -2147483648: 732, 2147483647: 534},
    32768: {0: 31198, 1: 16342, -1: 15184, 7: 4337, 42: 28189, 123456789: 22865, -2147483648: 10348,
            2147483647: 19646},
}
LONG_GROUPS = {
    128: {0: 94, 1: 86, -1: 94, 1700000000000: 64, -(2**63): 108, 2**63 - 1: 108},
    1000: {0: 54, 1: 478, -1: 54, 1700000000000: 720, -(2**63): 732, 2**63 - 1: 732},
    32768: {0: 31198, 1: 16342, -1: 31198, 1700000000000: 12736, -(2**63): 10348, 2**63 - 1: 10348},
}
FOX = "the quick brown fox jumps over the lazy dog"
STRING_GROUPS = {
    128: {"": 94, "a": 81, "user-1": 121, "héllo": 18, "\U0001F600x": 60, FOX: 56},
    1000: {"": 54, "a": 201, "user-1": 673, "héllo": 42, "\U0001F600x": 508, FOX: 320},
    32768: {"": 31198, "a": 19409, "user-1": 13945, "héllo": 3602, "\U0001F600x": 30652, FOX: 2104},
}


@pytest.mark.parametrize("code,expected", sorted(MURMUR.items()))
def test_murmur_hash_matches_flink(code, expected):
    assert murmur_hash(code) == expected


@pytest.mark.parametrize("max_par", sorted(INT_GROUPS))
def test_int_key_groups_match_flink(max_par):
    h = hasher_for_serializer(IntSerializer())
    assert {k: assign_to_key_group(h(k), max_par) for k in INT_GROUPS[max_par]} == INT_GROUPS[max_par]


@pytest.mark.parametrize("max_par", sorted(LONG_GROUPS))
def test_long_key_groups_match_flink(max_par):
    h = hasher_for_serializer(LongSerializer())
    assert {k: assign_to_key_group(h(k), max_par) for k in LONG_GROUPS[max_par]} == LONG_GROUPS[max_par]


@pytest.mark.parametrize("max_par", sorted(STRING_GROUPS))
def test_string_key_groups_match_flink(max_par):
    h = hasher_for_serializer(StringSerializer())
    assert {k: assign_to_key_group(h(k), max_par) for k in STRING_GROUPS[max_par]} == STRING_GROUPS[max_par]


def test_java_hash_codes():
    assert java_string_hash("hello") == 99162322  # "hello".hashCode()
    assert java_string_hash("polygenelubricants") == -2147483648  # famous MIN_VALUE hash
    assert java_long_hash(-1) == 0
    assert java_long_hash(1 << 32) == 1
    assert java_int_hash(2**31) == -(2**31)
    assert java_boolean_hash(True) == 1231 and java_boolean_hash(False) == 1237


def test_hasher_depends_on_the_serializer_not_the_python_value():
    # 2**32 as a Long hashes to 1; the same Python int under IntSerializer is out of range anyway,
    # but -1 shows the difference: Integer -1 hashes to -1, Long -1 to 0
    assert hasher_for_serializer(IntSerializer())(-1) == -1
    assert hasher_for_serializer(LongSerializer())(-1) == 0
    assert hasher_for_serializer(ShortSerializer())(-5) == -5


def test_unsupported_key_type_has_a_clear_error():
    h = hasher_for_serializer(BytePrimitiveArraySerializer())
    with pytest.raises(SerializationError, match="key_hasher"):
        h(b"abc")


def test_prefix_bytes_and_operator_ranges():
    assert key_group_prefix_bytes(128) == 1
    assert key_group_prefix_bytes(129) == 2
    # Flink: computeKeyGroupRangeForOperatorIndex(128, 3, i)
    assert [key_group_range_for_operator(128, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 42), KeyGroupRange(43, 85), KeyGroupRange(86, 127)]
    with pytest.raises(ValueError):
        KeyGroupRange.of((0, 128), 128)
    with pytest.raises(ValueError):
        KeyGroupRange(5, 4)


@given(st.integers(-(2**31), 2**31 - 1))
def test_murmur_is_non_negative_int32(code):
    assert 0 <= murmur_hash(code) <= 2**31 - 1


@given(st.text(max_size=30))
def test_string_hash_is_horner_over_utf16_units(s):
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % 2**32
    assert java_string_hash(s) == (h - 2**32 if h >= 2**31 else h)


@given(st.integers(1, 300), st.data())
def test_operator_ranges_partition_all_groups(max_par, data):
    par = data.draw(st.integers(1, max_par))
    ranges = [key_group_range_for_operator(max_par, par, i) for i in range(par)]
    assert ranges[0].start == 0 and ranges[-1].end == max_par - 1
    assert all(a.end + 1 == b.start for a, b in zip(ranges, ranges[1:], strict=False))
