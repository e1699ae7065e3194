"""The incremental RocksDB handle of native savepoints and checkpoints, read from bytes laid out as
Flink's ``MetadataV2V3SerializerBase`` writes them, written back byte for byte; what it does not
read (changelog, file-merging segments) refused with the setting that made it; hostile counts
refused before anything is allocated. Real Flink's handles: test_native_real_flink.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemorph.errors import MalformedDataError, NotCanonicalSavepointError, StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.savepoint.flink.handles import ByteStreamHandle, FileHandle, RelativeFileHandle
from statemorph.savepoint.flink.native_handles import (
    IncrementalHandle,
    RocksFile,
    read_native_keyed_handle,
    write_incremental_handle,
)

streams = st.one_of(
    st.builds(ByteStreamHandle, st.text(max_size=8), st.binary(max_size=16)),
    st.builds(FileHandle, st.text(min_size=1, max_size=20), st.integers(0, 2**40)),
    st.builds(RelativeFileHandle, st.text(min_size=1, max_size=20), st.integers(0, 2**40)),
)
files = st.lists(st.builds(RocksFile, st.text(min_size=1, max_size=12), streams), max_size=4)


@st.composite
def handles(draw: st.DrawFn) -> IncrementalHandle:
    code = draw(st.sampled_from([5, 11]))
    start = draw(st.integers(0, 32767))
    n = draw(st.integers(0, 32768 - start))
    return IncrementalHandle(code, draw(st.integers(0, 2**62)), draw(st.text(max_size=36)), start, n,
                             draw(st.integers(0, 2**62)) if code == 11 else None, draw(streams),
                             draw(files), draw(files), draw(st.text(max_size=36)) if code == 11 else None)


def _bytes(h: IncrementalHandle) -> bytes:
    out = DataOutputSerializer()
    write_incremental_handle(out, h)
    return out.get_copy_of_buffer()


@given(handles())
def test_handles_round_trip(h: IncrementalHandle) -> None:
    data = _bytes(h)
    src = DataInputDeserializer(data)
    assert read_native_keyed_handle(src, "h") == h
    assert src.available() == 0


@given(handles(), st.data())
def test_truncated_handles_are_typed_errors(h: IncrementalHandle, data: st.DataObject) -> None:
    raw = _bytes(h)
    cut = data.draw(st.integers(1, len(raw) - 1))
    with pytest.raises(StateFormatError):
        read_native_keyed_handle(DataInputDeserializer(raw[:cut]), "h")


def _head(code: int = 11) -> DataOutputSerializer:
    out = DataOutputSerializer()
    out.write_byte(code)
    out.write_long(1)
    out.write_utf("backend")
    out.write_int(0)
    out.write_int(128)
    out.write_long(0)
    return out


@pytest.mark.parametrize("code", [8, 9, 10, 13, 14])
def test_changelog_handles_name_their_setting(code: int) -> None:
    with pytest.raises(NotCanonicalSavepointError, match="state.changelog.enabled"):
        read_native_keyed_handle(DataInputDeserializer(bytes([code]) + bytes(40)), "h")


@pytest.mark.parametrize("code", [15, 16])
def test_file_merging_segments_name_their_setting(code: int) -> None:
    out = _head()
    out.write_byte(code)  # the meta data stream is a segment of a merged file
    with pytest.raises(NotCanonicalSavepointError, match="execution.checkpointing.file-merging.enabled"):
        read_native_keyed_handle(DataInputDeserializer(out.get_copy_of_buffer() + bytes(40)), "h")


def test_hostile_file_count_is_refused_before_allocation() -> None:
    out = _head()
    out.write_byte(0)  # no meta data stream
    out.write_int(2**31 - 1)
    with pytest.raises(StateFormatError):
        read_native_keyed_handle(DataInputDeserializer(out.get_copy_of_buffer()), "h")


@pytest.mark.parametrize(("start", "n"), [(-1, 2), (32767, 2), (0, -1)])
def test_key_group_ranges_outside_flink_limits_are_refused(start: int, n: int) -> None:
    out = DataOutputSerializer()
    out.write_byte(11)
    out.write_long(1)
    out.write_utf("b")
    out.write_int(start)
    out.write_int(n)
    with pytest.raises(MalformedDataError, match="key-group range"):
        read_native_keyed_handle(DataInputDeserializer(out.get_copy_of_buffer() + bytes(64)), "h")


def test_unknown_codes_are_malformed() -> None:
    with pytest.raises(MalformedDataError, match="unknown keyed state handle type code 99"):
        read_native_keyed_handle(DataInputDeserializer(bytes([99])), "h")
