"""Round trips of the byte views over arbitrary values."""

import math
import struct

from hypothesis import given
from hypothesis import strategies as st

from statemorph.io import DataInputDeserializer, DataOutputSerializer

java_strings = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200)


@given(java_strings)
def test_utf_round_trip(text):
    out = DataOutputSerializer()
    out.write_utf(text)
    assert DataInputDeserializer(out.get_copy_of_buffer()).read_utf() == text


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**15), 2**15 - 1))
def test_integers_round_trip(long_, int_, short_):
    out = DataOutputSerializer()
    out.write_long(long_)
    out.write_int(int_)
    out.write_short(short_)
    src = DataInputDeserializer(out.get_copy_of_buffer())
    assert (src.read_long(), src.read_int(), src.read_short()) == (long_, int_, short_)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_double_round_trip_bits(x):
    out = DataOutputSerializer()
    out.write_double(x)
    back = DataInputDeserializer(out.get_copy_of_buffer()).read_double()
    if math.isnan(x):
        assert math.isnan(back) and out.get_copy_of_buffer() == bytes.fromhex("7ff8000000000000")
    else:
        assert struct.pack(">d", back) == struct.pack(">d", x)
