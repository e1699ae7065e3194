"""Fuzzing every serializer and every snapshot with hostile bytes.

Why: a state file is untrusted input. Whatever the bytes, ``from_bytes`` and
``read_versioned_snapshot`` must either return a value or raise a
:class:`~statemorph.errors.StateFormatError` subclass: never another exception (that would be a
crash in a caller that handles format errors), never a hang, never a large allocation driven by a
length read from the data. Three input families per serializer:

(a) random bytes; (b) mutations of a valid encoding (byte flips, truncation at every offset,
hostile 32-bit lengths spliced in at every position); (c) the same for the serializer's
versioned snapshot bytes (and, when a mutated snapshot still reads, restoring its serializer and
resolving compatibility against the original must also fail only with typed format errors).

Memory is checked with ``tracemalloc`` (peak < 50 MB for inputs under 1 KB), hangs with a
``SIGALRM`` guard that turns a stuck decode into a test failure.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import signal
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph import serializers as S
from statemorph.errors import StateFormatError, StatemorphError
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

PEAK_LIMIT = 50 * 1024 * 1024
HANG_SECONDS = 20
HOSTILE_I32 = (0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x40000000)

FUZZ = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


@dataclasses.dataclass
class Person:
    name: str | None = None
    age: int | None = None
    tags: list[str] | None = None


AVRO_SCHEMA = {
    "type": "record", "name": "Event", "namespace": "fuzz",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"}, {"name": "s", "type": "string"}]}},
        {"name": "arr", "type": {"type": "array", "items": "double"}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "u", "type": ["null", "string", "long"]},
        {"name": "e", "type": {"type": "enum", "name": "Suit", "symbols": ["A", "B", "C"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F4", "size": 4}},
    ],
}
AVRO_VALUE = {"id": 5, "inner": {"x": 1, "s": "hé"}, "arr": [1.5, 2.0], "m": {"k": "v"}, "u": "x", "e": "B",
              "f": b"abcd"}

ROW_TYPE = (
    "ROW<a INT NOT NULL, b STRING, c ROW<x BIGINT, y ARRAY<STRING>>, d MAP<STRING, INT>, "
    "e DECIMAL(10, 2), f DECIMAL(30, 5), g TIMESTAMP(3), h TIMESTAMP(9), i DATE, "
    "j ARRAY<ROW<p INT, q STRING>>, k BYTES, l DOUBLE, m BOOLEAN, n MULTISET<STRING>, o TIME>"
)
ROW_VALUE = (
    1, "hi", (2, ["a", None]), {"k": 3}, decimal.Decimal("12.34"), decimal.Decimal("123456789012345678901.12345"),
    datetime.datetime(2024, 1, 2, 3, 4, 5, 123000), datetime.datetime(2024, 1, 2, 3, 4, 5, 123456),
    datetime.date(2020, 2, 29), [(1, "x"), None], b"\x00\x01", 2.5, True, {"z": 2}, datetime.time(1, 2, 3),
)


def _catalog() -> list[tuple[str, Any, Any]]:
    """(id, serializer, a valid value) for every serializer family and both Row kind modes."""
    string, ints, longs = S.StringSerializer(), S.IntSerializer(), S.LongSerializer()
    return [
        ("Boolean", S.BooleanSerializer(), True),
        ("Byte", S.ByteSerializer(), -5),
        ("Short", S.ShortSerializer(), 300),
        ("Int", ints, 123456),
        ("Long", longs, 1 << 40),
        ("Float", S.FloatSerializer(), 1.5),
        ("Double", S.DoubleSerializer(), -2.25),
        ("Char", S.CharSerializer(), "é"),
        ("String", string, "héllo€😀" + "x" * 40),
        ("Bytes", S.BytePrimitiveArraySerializer(), b"abc"),
        ("BooleanArray", S.BooleanPrimitiveArraySerializer(), [True, False]),
        ("ShortArray", S.ShortPrimitiveArraySerializer(), [1, -2]),
        ("CharArray", S.CharPrimitiveArraySerializer(), ["a", "é"]),
        ("IntArray", S.IntPrimitiveArraySerializer(), [1, 2, 3]),
        ("LongArray", S.LongPrimitiveArraySerializer(), [1, 2]),
        ("FloatArray", S.FloatPrimitiveArraySerializer(), [1.5]),
        ("DoubleArray", S.DoublePrimitiveArraySerializer(), [1.5, 2.5]),
        ("StringArray", S.StringArraySerializer(), ["a", None, "é"]),
        ("ListInt", S.ListSerializer(ints), [1, 2]),
        ("ListString", S.ListSerializer(string), ["a", "bé"]),
        ("ListListLong", S.ListSerializer(S.ListSerializer(longs)), [[1], [2, 3]]),
        ("ListNullableString", S.ListSerializer(S.NullableSerializer(string)), ["a", None]),
        ("MapStringInt", S.MapSerializer(string, ints), {"a": 1, "b": 2}),
        ("MapIntListString", S.MapSerializer(ints, S.ListSerializer(string)), {1: ["x"], 2: []}),
        ("MapStringNullableLong", S.MapSerializer(string, S.NullableSerializer(longs)), {"a": None, "b": 3}),
        ("NullableInt", S.NullableSerializer(ints), 5),
        ("NullableIntPadded", S.NullableSerializer(ints, True), 5),
        ("NullableString", S.NullableSerializer(string), "x"),
        ("NullableListDouble", S.NullableSerializer(S.ListSerializer(S.DoubleSerializer())), [1.0]),
        ("EnumClass", S.EnumSerializer(Color), Color.GREEN),
        ("EnumNames", S.EnumSerializer(["A", "B"], "p.E"), "B"),
        ("Tuple", S.TupleSerializer([ints, string, S.ListSerializer(longs)]), (1, "a", [2])),
        ("RowWithKind", S.RowSerializer([ints, string, S.DoubleSerializer()]), (1, "a", 2.0)),
        ("RowWithoutKind", S.RowSerializer([ints, string, S.ListSerializer(ints)], supports_row_kind=False),
         (1, None, [3])),
        ("Pojo", S.PojoSerializer(Person, {"name": string, "age": ints, "tags": S.ListSerializer(string)}),
         Person("bob", 3, ["t"])),
        ("Avro", S.AvroSerializer(AVRO_SCHEMA), AVRO_VALUE),
        ("RowData", S.RowDataSerializer(ROW_TYPE), ROW_VALUE),
    ]


CATALOG = _catalog()
IDS = [c[0] for c in CATALOG]
BY_ID = {c[0]: c for c in CATALOG}
VALID_BYTES = {name: ser.to_bytes(value) for name, ser, value in CATALOG}
SNAPSHOT_BYTES = {name: write_versioned_snapshot(ser.snapshot_configuration()) for name, ser, _ in CATALOG}


# ------------------------------------------------------------------------------------------------
# the property


@contextmanager
def _alarm(seconds: int, what: str) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what} did not finish within {seconds} s (hang)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def only_format_errors(fn: Callable[[bytes], Any], data: bytes, what: str) -> Any:
    """Run ``fn(data)``: a value or a StateFormatError subclass is fine, anything else fails the
    test with the input in the message. Returns the value, or None after a format error."""
    tracing = not tracemalloc.is_tracing()
    if tracing:
        tracemalloc.start()  # only around the call: hypothesis' own work stays untraced (and fast)
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = None
    try:
        with _alarm(HANG_SECONDS, what):
            result = fn(data)
    except StateFormatError as e:
        assert str(e), f"{what}: {type(e).__name__} without a message for input {data.hex()}"
    except Exception as e:  # noqa: BLE001 - the point of the test is to catch every other kind
        pytest.fail(f"{what}: {type(e).__name__}: {e} for input {data.hex()}", pytrace=False)
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if tracing:
            tracemalloc.stop()
    if len(data) < 1024:
        assert peak < PEAK_LIMIT, f"{what}: {peak} bytes allocated for a {len(data)}-byte input {data.hex()}"
    return result


# ------------------------------------------------------------------------------------------------
# mutations


def truncations(data: bytes) -> Iterator[bytes]:
    for n in range(len(data)):
        yield data[:n]


def hostile_lengths(data: bytes, thorough: bool = True) -> Iterator[bytes]:
    """Overwrite (and, when ``thorough``, also insert) a hostile 32-bit value at every byte
    position: 0x7fffffff everywhere, the negative ones only where ``thorough``."""
    for value in HOSTILE_I32 if thorough else HOSTILE_I32[:1]:
        word = struct.pack(">I", value)
        for pos in range(len(data)):
            yield data[:pos] + word + data[pos + 4:]
            if thorough and value == HOSTILE_I32[0]:
                yield data[:pos] + word + data[pos:]


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """Flip, overwrite, delete, insert, or duplicate a few spans of ``base``."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "byte", "delete", "insert", "dup", "word"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "dup":
            data[pos:pos] = data[pos:pos + draw(st.integers(1, 16))]
        else:
            data[pos:pos + 4] = struct.pack(">I", draw(st.sampled_from(HOSTILE_I32)))
    return bytes(data)


def decode_snapshot(ser: Any) -> Callable[[bytes], Any]:
    """Read a versioned snapshot; if it reads, restore its serializer and judge the original.

    A snapshot that parses but cannot restore a serializer is still a format problem of the data,
    so it must surface as a StateFormatError too."""

    def run(data: bytes) -> Any:
        snap = read_versioned_snapshot(data)
        try:
            restored = snap.restore_serializer()
            snap.resolve_schema_compatibility(ser)
        except StateFormatError:
            raise
        except StatemorphError:
            return snap  # a typed judgement (e.g. incompatible schema) is a legitimate answer
        assert restored is not None
        return snap

    return run


# ------------------------------------------------------------------------------------------------
# (a) random bytes


@FUZZ
@given(name=st.sampled_from(IDS), data=st.binary(max_size=96))
def test_random_bytes_decode_to_a_value_or_a_format_error(name: str, data: bytes) -> None:
    _, ser, _ = BY_ID[name]
    only_format_errors(ser.from_bytes, data, f"{name}.from_bytes")


@FUZZ
@given(name=st.sampled_from(IDS), tail=st.binary(max_size=32))
def test_valid_prefix_with_random_tail(name: str, tail: bytes) -> None:
    """Random bytes after a valid prefix reach the deeper branches a fully random input rarely does."""
    _, ser, _ = BY_ID[name]
    valid = VALID_BYTES[name]
    cut = len(tail) % (len(valid) + 1)
    only_format_errors(ser.from_bytes, valid[:cut] + tail, f"{name}.from_bytes")


# ------------------------------------------------------------------------------------------------
# (b) mutations of valid encodings


@pytest.mark.parametrize("name", IDS)
def test_valid_encoding_round_trips(name: str) -> None:
    """The baseline the mutations start from really is valid."""
    _, ser, value = BY_ID[name]
    assert ser.to_bytes(ser.from_bytes(VALID_BYTES[name])) == VALID_BYTES[name]


@pytest.mark.parametrize("name", IDS)
def test_every_truncation_is_a_format_error(name: str) -> None:
    _, ser, _ = BY_ID[name]
    for data in truncations(VALID_BYTES[name]):
        with pytest.raises(StateFormatError):
            only_format_errors_raising(ser.from_bytes, data, f"{name}.from_bytes")


def only_format_errors_raising(fn: Callable[[bytes], Any], data: bytes, what: str) -> None:
    """Like :func:`only_format_errors`, but a truncated value must not decode at all."""
    marker: list[StateFormatError] = []

    def run(d: bytes) -> Any:
        try:
            return fn(d)
        except StateFormatError as e:
            marker.append(e)
            raise

    value = only_format_errors(run, data, what)
    if marker:
        raise marker[0]
    pytest.fail(f"{what}: a truncated input decoded to {value!r}: {data.hex()}", pytrace=False)


@pytest.mark.parametrize("name", IDS)
def test_hostile_lengths_at_every_position(name: str) -> None:
    _, ser, _ = BY_ID[name]
    for data in hostile_lengths(VALID_BYTES[name]):
        only_format_errors(ser.from_bytes, data, f"{name}.from_bytes")


@FUZZ
@given(name=st.sampled_from(IDS), data=st.data())
def test_mutated_encodings(name: str, data: st.DataObject) -> None:
    _, ser, _ = BY_ID[name]
    raw = data.draw(mutated(VALID_BYTES[name]), label="mutated")
    only_format_errors(ser.from_bytes, raw, f"{name}.from_bytes")


# ------------------------------------------------------------------------------------------------
# (c) snapshots


@pytest.mark.parametrize("name", IDS)
def test_snapshot_round_trips(name: str) -> None:
    _, ser, _ = BY_ID[name]
    snap = read_versioned_snapshot(SNAPSHOT_BYTES[name])
    assert snap.resolve_schema_compatibility(ser).is_compatible_as_is()


@pytest.mark.parametrize("name", IDS)
def test_snapshot_truncations(name: str) -> None:
    _, ser, _ = BY_ID[name]
    run = decode_snapshot(ser)
    for data in truncations(SNAPSHOT_BYTES[name]):
        with pytest.raises(StateFormatError):
            only_format_errors_raising(run, data, f"{name} snapshot")


@pytest.mark.parametrize("name", IDS)
def test_snapshot_hostile_lengths(name: str) -> None:
    _, ser, _ = BY_ID[name]
    run = decode_snapshot(ser)
    for data in hostile_lengths(SNAPSHOT_BYTES[name], thorough=False):
        only_format_errors(run, data, f"{name} snapshot")


@FUZZ
@given(name=st.sampled_from(IDS), data=st.data())
def test_mutated_snapshots(name: str, data: st.DataObject) -> None:
    _, ser, _ = BY_ID[name]
    raw = data.draw(mutated(SNAPSHOT_BYTES[name]), label="mutated")
    only_format_errors(decode_snapshot(ser), raw, f"{name} snapshot")


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_snapshot_bytes(data: bytes) -> None:
    only_format_errors(read_versioned_snapshot, data, "read_versioned_snapshot")


@FUZZ
@given(name=st.sampled_from(IDS), data=st.data())
def test_mutated_top_level_snapshot_envelopes(name: str, data: st.DataObject) -> None:
    """Flink's state meta info form ``i32 2 ‖ VERSIONED`` (read_serializer_snapshot), mutated
    anywhere including the envelope version."""
    _, ser, _ = BY_ID[name]
    raw = data.draw(mutated(write_serializer_snapshot(ser.snapshot_configuration())), label="mutated")
    only_format_errors(read_serializer_snapshot, raw, f"{name} envelope")


# ------------------------------------------------------------------------------------------------
# nesting depth


def _one_level(outer: Callable[[Any], Any]) -> tuple[bytes, bytes, bytes]:
    """(prefix, inner, suffix) with ``snapshot(outer(inner)) == prefix + snapshot(inner) + suffix``,
    so ``prefix * n + inner + suffix * n`` nests the composite n levels deep without building it."""
    inner = write_versioned_snapshot(S.IntSerializer().snapshot_configuration())
    blob = write_versioned_snapshot(outer(S.IntSerializer()).snapshot_configuration())
    at = blob.index(inner)
    return blob[:at], inner, blob[at + len(inner):]


NESTERS: dict[str, Callable[[Any], Any]] = {
    "List": S.ListSerializer,
    "Nullable": S.NullableSerializer,
    "MapValue": lambda s: S.MapSerializer(S.StringSerializer(), s),
    "Tuple": lambda s: S.TupleSerializer([s]),
    "Row": lambda s: S.RowSerializer([s]),
}


@pytest.mark.parametrize("name", list(NESTERS))
def test_hostile_snapshot_nesting_is_a_format_error_not_a_recursion_error(name: str) -> None:
    """A few kilobytes can nest a composite snapshot thousands of levels deep; reading it used to
    end in RecursionError. Now a MalformedDataError saying how deep and where."""
    from statemorph.errors import MalformedDataError
    from statemorph.typeutils import MAX_NESTING_DEPTH

    prefix, inner, suffix = _one_level(NESTERS[name])
    for depth in (MAX_NESTING_DEPTH, 300, 3000):
        blob = prefix * depth + inner + suffix * depth
        with pytest.raises(MalformedDataError, match=rf"nested more than {MAX_NESTING_DEPTH} levels deep") as info:
            only_format_errors_raising(read_versioned_snapshot, blob, f"{name} x{depth}")
        assert "offset" in str(info.value)
    # one level less than the limit is a legitimate (if odd) schema: it reads, restores and resolves
    blob = prefix * (MAX_NESTING_DEPTH - 1) + inner + suffix * (MAX_NESTING_DEPTH - 1)
    snap = read_versioned_snapshot(blob)
    restored = snap.restore_serializer()
    assert snap.resolve_schema_compatibility(restored).is_compatible_as_is()
    assert write_versioned_snapshot(snap) == blob


# ------------------------------------------------------------------------------------------------
# bad values to write


@pytest.mark.parametrize("value", [
    (decimal.Decimal("sNaN"),), [decimal.Decimal("-sNaN")], [1.0], [decimal.Decimal("1")], ["a"], [300], [-129],
])
def test_byte_array_refuses_non_byte_elements_with_a_serialization_error(value: Any) -> None:
    """Found by fuzzing: a signalling-NaN Decimal raised decimal.InvalidOperation from the range
    comparison instead of the SerializationError every bad value to write gets."""
    from statemorph.errors import SerializationError

    with pytest.raises(SerializationError, match="BytePrimitiveArraySerializer cannot write"):
        S.BytePrimitiveArraySerializer().to_bytes(value)


# ------------------------------------------------------------------------------------------------
# composite snapshots with the wrong number of nested snapshots

_DELEGATE = struct.pack(">ii", 1333245, 1)  # NestedSerializersSnapshotDelegate magic and version
_INT_SNAPSHOT = write_versioned_snapshot(S.IntSerializer().snapshot_configuration())
COMPOSITES = [name for name in IDS if _DELEGATE in SNAPSHOT_BYTES[name]]


@pytest.mark.parametrize("name", COMPOSITES)
@pytest.mark.parametrize("count", [0, 1, 2, 3, 5])
def test_composite_snapshot_with_another_nested_count(name: str, count: int) -> None:
    """Found by fuzzing: a List / Map / Nullable snapshot whose nested count is not the format's
    (0 for a List, 1 for a Map) read fine and then restore_serializer raised IndexError. Now the
    read fails with a MalformedDataError; formats with any number of fields read and restore."""
    _, ser, _ = BY_ID[name]
    blob = SNAPSHOT_BYTES[name]
    head = blob[:blob.index(_DELEGATE) + len(_DELEGATE)]
    data = head + struct.pack(">i", count) + _INT_SNAPSHOT * count
    only_format_errors(decode_snapshot(ser), data, f"{name} snapshot with {count} nested")
