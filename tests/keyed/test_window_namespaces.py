"""The window namespaces (statemorph.serializers.windows): bytes and snapshot bytes spelled out by
hand, round trips over the whole long range, typed errors for what Flink could not hold, the
compatibility rule, and the Arrow forms (the decoded column and the window columns of a table).
What real Flink writes for each of them is checked in
tests/savepoint/flink/test_window_restore_real_flink.py (``WindowJobs vectors``)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemorph import arrow
from statemorph.errors import MalformedDataError, SerializationError, StateFormatError
from statemorph.keyed.windows import window_column_names, window_columns, window_namespaces, with_window_columns
from statemorph.serializers import (
    CountWindow,
    CountWindowSerializer,
    GlobalWindow,
    GlobalWindowSerializer,
    LongSerializer,
    TableTimeWindowSerializer,
    TimeWindow,
    TimeWindowSerializer,
    TupleSerializer,
)
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
STREAMING = "org.apache.flink.streaming.api.windowing.windows."
TABLE = "org.apache.flink.table.runtime.operators.window."


def utf(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


@pytest.mark.parametrize(("serializer", "identifier", "length"), [
    (TimeWindowSerializer(), STREAMING + "TimeWindow$Serializer$TimeWindowSerializerSnapshot", 16),
    (GlobalWindowSerializer(), STREAMING + "GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", 1),
    (TableTimeWindowSerializer(), TABLE + "TimeWindow$Serializer$TimeWindowSerializerSnapshot", 16),
    (CountWindowSerializer(), TABLE + "CountWindow$Serializer$CountWindowSerializerSnapshot", 8),
])
def test_snapshot_is_flinks_simple_snapshot_and_restores_the_serializer(serializer, identifier, length) -> None:
    data = write_versioned_snapshot(serializer.snapshot_configuration())
    assert data == utf(identifier) + struct.pack(">i", 3)  # SimpleTypeSerializerSnapshot v3: no content
    snap = read_versioned_snapshot(data)
    assert type(snap.restore_serializer()) is type(serializer)
    assert serializer.get_length() == length  # Flink's getLength(): what splits composite keys
    assert snap.resolve_schema_compatibility(serializer).is_compatible_as_is()


def test_the_sql_and_datastream_time_windows_are_different_serializers() -> None:
    """Same bytes, different classes: Flink does not restore one as the other, nor does statemorph."""
    old = TimeWindowSerializer().snapshot_configuration()
    assert old.resolve_schema_compatibility(TableTimeWindowSerializer()).is_incompatible()
    assert TableTimeWindowSerializer().snapshot_configuration().resolve_schema_compatibility(
        TimeWindowSerializer()).is_incompatible()


def test_window_bytes_spelled_out() -> None:
    assert TimeWindowSerializer().to_bytes(TimeWindow(1_700_000_040_000, 1_700_000_100_000)) == \
        bytes.fromhex("0000018bcfe604400000018bcfe6eea0")
    assert TimeWindowSerializer().to_bytes((-5, -1)) == bytes.fromhex("fffffffffffffffbffffffffffffffff")
    assert TimeWindowSerializer().to_bytes({"start": 0, "end": 1}) == bytes(15) + b"\x01"
    assert TableTimeWindowSerializer().from_bytes(bytes(15) + b"\x01") == TimeWindow(0, 1)
    assert CountWindowSerializer().to_bytes(CountWindow(5)) == CountWindowSerializer().to_bytes(5) == bytes(7) + b"\x05"
    assert GlobalWindowSerializer().to_bytes(GlobalWindow) == b"\x00"
    # Flink reads the byte and ignores it
    assert GlobalWindowSerializer().from_bytes(b"\x07") is GlobalWindow


@given(LONGS, LONGS)
def test_time_window_round_trips_every_long(start: int, end: int) -> None:
    for ser in (TimeWindowSerializer(), TableTimeWindowSerializer()):
        data = ser.to_bytes(TimeWindow(start, end))
        assert data == LongSerializer().to_bytes(start) + LongSerializer().to_bytes(end)
        assert ser.from_bytes(data) == (start, end)


@given(LONGS)
def test_count_window_round_trips_every_long(n: int) -> None:
    assert CountWindowSerializer().from_bytes(CountWindowSerializer().to_bytes(n)) == CountWindow(n)


@pytest.mark.parametrize(("serializer", "value"), [
    (TimeWindowSerializer(), (0, 1 << 63)),
    (TimeWindowSerializer(), ("0", 1)),
    (TimeWindowSerializer(), 5),
    (TimeWindowSerializer(), (1, 2, 3)),
    (CountWindowSerializer(), -(1 << 63) - 1),
    (GlobalWindowSerializer(), TimeWindow(0, 1)),
])
def test_what_java_cannot_hold_is_refused(serializer, value) -> None:
    with pytest.raises(SerializationError):
        serializer.to_bytes(value)


@pytest.mark.parametrize(("serializer", "data"), [
    (TimeWindowSerializer(), bytes(15)),
    (CountWindowSerializer(), bytes(7)),
    (GlobalWindowSerializer(), b""),
    (TimeWindowSerializer(), bytes(17)),
])
def test_short_or_long_bytes_are_format_errors(serializer, data) -> None:
    with pytest.raises(StateFormatError):
        serializer.from_bytes(data)


def test_arrow_decode_and_encode_of_windows_and_merging_window_sets() -> None:
    """A time window decodes to a struct (start, end); the merging-window set of session windows
    (``Tuple2<TimeWindow, TimeWindow>``) to a struct of two; encoding gives the bytes back."""
    tw = TimeWindowSerializer()
    tup = TupleSerializer([tw, tw])
    raw = pa.array([tup.to_bytes((TimeWindow(1, 9), TimeWindow(1, 5))), tup.to_bytes(((-3, 4), (-3, 4)))])
    decoded = arrow.decode(raw, tup)
    assert decoded.to_pylist() == [{"f0": {"start": 1, "end": 9}, "f1": {"start": 1, "end": 5}},
                                   {"f0": {"start": -3, "end": 4}, "f1": {"start": -3, "end": 4}}]
    assert arrow.encode(decoded, tup).to_pylist() == raw.to_pylist()
    counts = pa.array([CountWindowSerializer().to_bytes(7)])
    assert arrow.decode(counts, CountWindowSerializer()).to_pylist() == [7]
    assert arrow.encode(pa.array([7]), CountWindowSerializer()).to_pylist() == counts.to_pylist()


def test_window_columns_are_cut_from_the_namespace_bytes() -> None:
    tw = TimeWindowSerializer()
    windows = [TimeWindow(-(1 << 63), (1 << 63) - 1), TimeWindow(0, 60_000), TimeWindow(-5, -1)]
    ns = pa.array([tw.to_bytes(w) for w in windows]).slice(1)  # a sliced array: its offsets do not start at 0
    cols = dict(window_columns(tw, ns))
    assert cols["window_start"].to_pylist() == [0, -5] and cols["window_end"].to_pylist() == [60_000, -1]
    batch = pa.RecordBatch.from_pydict({"key": [1, 2], "namespace": ns, "value": [3, 4]})
    assert with_window_columns(batch, TableTimeWindowSerializer()).schema.names == \
        ["key", "namespace", "window_start", "window_end", "value"]
    assert dict(window_columns(CountWindowSerializer(), pa.array([bytes(7) + b"\x09"])))["window_id"].to_pylist() == [9]
    assert window_column_names(GlobalWindowSerializer()) == [] and with_window_columns(batch, None) is batch
    assert window_columns(tw, pa.array([], pa.binary()))[0][1].to_pylist() == []


def test_a_namespace_of_the_wrong_length_is_named() -> None:
    ns = pa.array([bytes(16), bytes(15)])
    with pytest.raises(MalformedDataError, match="row 1 has 15 bytes, expected 16"):
        window_columns(TimeWindowSerializer(), ns)
    with pytest.raises(MalformedDataError, match="null"):
        window_columns(TimeWindowSerializer(), pa.array([bytes(16), None]))


@given(st.lists(st.tuples(LONGS, LONGS), max_size=50), st.integers(0, 3))
def test_window_columns_and_namespaces_are_inverse_and_equal_the_serializer(windows, cut) -> None:
    """Namespaces built from window_start / window_end (the bootstrap) are the serializer's bytes,
    and cutting the columns from them (the readers) gives the windows back."""
    tw = TimeWindowSerializer()
    cols = [pa.array([w[0] for w in windows], pa.int64()), pa.array([w[1] for w in windows], pa.int64())]
    built = window_namespaces(tw, cols)
    assert built.to_pylist() == [tw.to_bytes(w) for w in windows]
    sliced = built.slice(min(cut, len(windows)))
    back = dict(window_columns(tw, sliced))
    assert list(zip(back["window_start"].to_pylist(), back["window_end"].to_pylist(), strict=True)) == \
        windows[min(cut, len(windows)):]
    ids = window_namespaces(CountWindowSerializer(), [cols[0]])
    assert ids.to_pylist() == [CountWindowSerializer().to_bytes(w[0]) for w in windows]
