"""The lowered-ops migrate walk (``run_ops``) against the general walk and the per-value reference:
deep nesting (past the op walk's stack, which falls back to the general walk), null rows at every
level, RowKinds in nested headers, unpadded strings ending at the very end of the data buffer (the
word copy must not read past it) and the same typed error, row and field path on both tiers."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph import arrow, bulk, kernels, serializers
from statemorph.errors import MalformedDataError, StateFormatError
from statemorph.migration import migrate_bytes
from statemorph.row import Row, RowKind

# "native-interp": the compiled kernels with the plans' machine code switched off
TIERS = ["python"] + (["native", "native-interp"] if kernels.native_available() else [])


@pytest.fixture(params=TIERS)
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier(request.param.split("-")[0]))
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)  # machine code for small arrays too
    if request.param == "native-interp":
        monkeypatch.setenv("STATEMORPH_JIT", "0")
    return str(request.param)


def nested(depth: int, new: bool) -> str:
    """ROW<a INT, r ROW<... r ROW<s STRING>>> ``depth`` levels deep; the new type adds a field and
    swaps the order at every level."""
    t = "ROW<s STRING, z BIGINT>" if new else "ROW<s STRING>"
    for _ in range(depth):
        t = f"ROW<r {t}, x STRING, a INT>" if new else f"ROW<a INT, r {t}>"
    return t


def nested_value(depth: int, draw: Any) -> Any:
    v: Any = Row((draw(st.one_of(st.none(), st.text(max_size=12))),), kind=RowKind(draw(st.integers(0, 3))))
    for _ in range(depth):
        inner = None if draw(st.integers(0, 5)) == 0 else v
        v = Row((draw(st.one_of(st.none(), st.integers(-5, 5))), inner), kind=RowKind(draw(st.integers(0, 3))))
    return v


@pytest.mark.parametrize("depth", [1, 3, 15, 16, 20])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_nesting_depths_match_reference(impl: str, depth: int, data: st.DataObject) -> None:
    so = serializers.RowDataSerializer(nested(depth, False))
    sn = serializers.RowDataSerializer(nested(depth, True))
    snap = so.snapshot_configuration()
    values = data.draw(st.lists(st.builds(lambda: nested_value(depth, data.draw)), min_size=1, max_size=8))
    blobs = [so.to_bytes(v) for v in values]
    out = arrow.migrate(pa.array(blobs, pa.binary()), snap, sn)
    assert out.to_pylist() == [migrate_bytes(snap, sn, b) for b in blobs]


def _unpadded_string_entry(text: bytes) -> bytes:
    """ROW<a INT, s STRING> with ``s`` (> 7 bytes) stored unpadded as the row's last bytes: valid
    for the reader (the slot's offset + length lie inside the row), unusual for a writer."""
    assert len(text) > 7
    header = (0).to_bytes(8, "little")
    a = (7).to_bytes(8, "little")
    slot = ((24 << 32) | len(text)).to_bytes(8, "little")
    row = header + a + slot + text
    return len(row).to_bytes(4, "big") + row


@pytest.mark.parametrize("length", [8, 9, 15, 16, 23])
def test_unpadded_string_at_the_end_of_the_data_buffer(impl: str, length: int) -> None:
    so = serializers.RowDataSerializer("ROW<a INT, s STRING>")
    sn = serializers.RowDataSerializer("ROW<s STRING, b BIGINT, a INT>")
    snap = so.snapshot_configuration()
    blob = _unpadded_string_entry("é".encode() + b"y" * (length - 2))  # non-ASCII: the full UTF-8 check
    # the entry's bytes are the whole data buffer: nothing readable after the string
    arr = pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(bytes(4) + len(blob).to_bytes(4, "little")),
                                                pa.py_buffer(blob)])
    assert arrow.migrate(arr, snap, sn).to_pylist() == [migrate_bytes(snap, sn, blob)]


def test_bad_nested_header_names_the_nested_row_on_both_tiers() -> None:
    so = serializers.RowDataSerializer(nested(3, False))
    sn = serializers.RowDataSerializer(nested(3, True))
    snap = so.snapshot_configuration()
    good = so.to_bytes(Row((1, Row((2, Row((3, Row(("deep string value",)))))))))
    # the innermost row starts after three outer rows' fixed parts (24 bytes each), + 4 length bytes
    bad = bytearray(good)
    bad[4 + 3 * 24] = 9  # RowKind byte 9
    messages = []
    for tier in TIERS:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kernels, "KERNELS", kernels.tier(tier.split("-")[0]))
            mp.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
            if tier == "native-interp":
                mp.setenv("STATEMORPH_JIT", "0")
            with pytest.raises(MalformedDataError) as info:
                arrow.migrate(pa.array([good, bytes(bad)], pa.binary()), snap, sn)
        assert info.value.row == 1  # type: ignore[attr-defined]
        assert info.value.field_path == "r.r.r"  # type: ignore[attr-defined]
        messages.append(str(info.value))
    assert len(set(messages)) == 1


@pytest.mark.parametrize("starve", [False, True])
@pytest.mark.parametrize("threads", [2, 3, 5])
def test_threads_join_ranges_like_one_thread(impl: str, threads: int, starve: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges pack into windows of one buffer and slide down to close the gaps (or, when a range
    outgrew its window, everything moves to a fresh buffer): same array, same errors as one thread."""
    so = serializers.RowDataSerializer(nested(2, False))
    sn = serializers.RowDataSerializer(nested(2, True))
    snap = so.snapshot_configuration()
    good = [so.to_bytes(Row((i, Row((i, Row(("s" * (i % 23),))))))) for i in range(50)]
    bad = good[3][:-8]
    blobs = [None if i % 17 == 0 else bad if i % 401 == 7 else good[i % 50] for i in range(3000)]
    arr = pa.array(blobs, pa.binary())
    expected, expected_errs = bulk.migrate(arr, snap, sn, on_error="null")
    if starve:
        monkeypatch.setattr(bulk.inputs, "input_spans", lambda *a: (lambda s, e: 0))
        monkeypatch.setattr(bulk.migrator, "row_growth", lambda m: 0)
    out, errs = bulk.migrate(arr, snap, sn, on_error="null", threads=threads)
    assert out.equals(expected)
    assert [str(e) for e in errs] == [str(e) for e in expected_errs]
    assert len(errs) == sum(1 for b in blobs if b is bad)
    assert out.to_pylist()[1] == migrate_bytes(snap, sn, good[1])
    with pytest.raises(StateFormatError, match="row 7"):
        arrow.migrate(arr, snap, sn, threads=threads)
