"""Bulk migration of POJO state through the byte-remap kernel, on both tiers: Flink's layout after
adding / removing / reordering fields, canonical copies (what the per-value reference writes),
input shapes (slices, chunks, large binary), error modes, buffer growth, threads, and the evolutions
that keep the per-value path."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import TIERS, on_tiers

from statemorph import arrow, bulk, kernels, serializers
from statemorph.errors import MalformedDataError, StateFormatError, TruncatedDataError
from statemorph.kernels import abi, plans
from statemorph.migration import migrate_bytes
from statemorph.serializers.pojo import PojoSerializer

S = serializers


@dataclasses.dataclass
class Inner:
    x: int | None
    y: str | None


@dataclasses.dataclass
class InnerV2:
    y: str | None
    w: int | None = 5


@dataclasses.dataclass
class Old:
    a: str | None
    b: int | None
    c: int | None
    flag: bool | None
    f: float | None
    g: float | None
    inner: Any


@dataclasses.dataclass
class New:
    b: int | None
    flag: bool | None
    f: float | None
    g: float | None
    inner: Any
    c: int | None
    added: int | None = 42
    note: str | None = None


def _inner(cls: type) -> PojoSerializer:
    fields = {"x": S.IntSerializer(), "y": S.StringSerializer()} if cls is Inner else \
        {"y": S.StringSerializer(), "w": S.IntSerializer()}
    return PojoSerializer(cls, fields, java_class_name="p.Inner")


OLD = PojoSerializer(Old, {"a": S.StringSerializer(), "b": S.IntSerializer(), "c": S.LongSerializer(),
                           "flag": S.BooleanSerializer(), "f": S.FloatSerializer(), "g": S.DoubleSerializer(),
                           "inner": _inner(Inner)}, java_class_name="p.P")
NEW = PojoSerializer(New, {"b": S.IntSerializer(), "flag": S.BooleanSerializer(), "f": S.FloatSerializer(),
                           "g": S.DoubleSerializer(), "inner": _inner(InnerV2), "c": S.LongSerializer(),
                           "added": S.IntSerializer(), "note": S.StringSerializer()}, java_class_name="p.P")
SNAP = OLD.snapshot_configuration()


@pytest.fixture
def impl(tier: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared ``tier`` fixture (tests/conftest.py), with the per-value fallback forbidden."""
    # the kernel path must be the one taken: the per-value fallback fails the test
    monkeypatch.setattr(bulk.migrator, "migrate_per_value", _no_fallback)
    return tier


def _no_fallback(*args: Any) -> Any:
    raise AssertionError("took the per-value path")


def values(n: int) -> list[Old | None]:
    out: list[Old | None] = []
    for i in range(n):
        if i % 11 == 4:
            out.append(None)
        else:
            inner = None if i % 5 == 2 else Inner(i, None if i % 3 else f"y{i}é")
            out.append(Old(f"a{i}" if i % 4 else None, i, -i * 1000, i % 2 == 0, i / 3, None if i % 7 else -i / 7,
                           inner))
    return out


def blobs(n: int) -> list[bytes | None]:
    return [None if i % 13 == 6 else OLD.to_bytes(v) if v is not None else b"\x01" for i, v in enumerate(values(n))]


def reference(raw: list[bytes | None]) -> list[bytes | None]:
    return [None if b is None else migrate_bytes(SNAP, NEW, b) for b in raw]


def test_layout_is_flink_format_and_equals_reference(impl: str) -> None:
    raw = blobs(60)
    got = arrow.migrate(pa.array(raw, type=pa.binary()), SNAP, NEW).to_pylist()
    assert got == reference(raw)
    # fields in Java order: added, b, c, f, flag, g, inner{w, y}, note; 'a' and 'inner.x' dropped
    one = Old("gone", 9, 10, True, 1.5, None, Inner(3, "hi"))
    expected = (b"\x02" + b"\x00" + struct.pack(">i", 42) + b"\x00" + struct.pack(">i", 9)
                + b"\x00" + struct.pack(">q", 10) + b"\x00" + struct.pack(">f", 1.5) + b"\x00\x01" + b"\x01"
                + b"\x00\x02" + b"\x00" + struct.pack(">i", 5) + b"\x00\x03hi" + b"\x01")
    assert arrow.migrate(pa.array([OLD.to_bytes(one)]), SNAP, NEW).to_pylist() == [expected]


def _entry(a: bytes, flag: bytes, f: bytes, g: bytes, inner: bytes) -> bytes:
    """An old entry with hand-made field bytes (fields in Java order: a, b, c, f, flag, g, inner)."""
    return b"\x02" + a + b"\x00" + struct.pack(">i", 1) + b"\x00" + struct.pack(">q", 2) + f + flag + g + inner


def test_copies_are_canonical_like_the_reference(impl: str) -> None:
    """Bytes the reference reads but would not write: a boolean byte 07, NaNs with payloads,
    overlong string varints, a null string or null POJO behind a 'not null' flag."""
    plain_f, plain_g = b"\x00" + struct.pack(">f", 1.0), b"\x00" + struct.pack(">d", 2.0)
    plain_inner = b"\x00\x02\x00" + struct.pack(">i", 1) + b"\x00\x02z"
    raw = [
        _entry(b"\x00\x02a", b"\x00\x07", plain_f, plain_g, plain_inner),
        _entry(b"\x00\x02a", b"\x00\x00", b"\x00\x7f\x80\x00\x01", b"\x00\xff\xf0\x00\x00\x00\x00\x00\x01",
               plain_inner),
        _entry(b"\x00\x00", b"\x00\x01", plain_f, plain_g, b"\x00\x01"),
        _entry(b"\x00\x02a", b"\x00\x01", plain_f, plain_g, b"\x00\x02\x00" + struct.pack(">i", 1) + b"\x00\x83\x80\x00"
               + b"\xe8\x00\xe9\x80\x00"),
    ]
    want = reference(raw)
    assert arrow.migrate(pa.array(raw), SNAP, NEW).to_pylist() == want
    assert want[0] != raw[0] and b"\x7f\xc0\x00\x00" in want[1] and b"\x7f\xf8" + b"\x00" * 6 in want[1]


def test_slices_chunks_and_large_binary_keep_row_numbers(impl: str) -> None:
    raw = blobs(40)
    want = reference(raw)
    arr = pa.array(raw, type=pa.binary())
    assert arrow.migrate(arr.slice(7, 20), SNAP, NEW).to_pylist() == want[7:27]
    chunked = pa.chunked_array([arr.slice(0, 15), arr.slice(15)])
    assert arrow.migrate(chunked, SNAP, NEW).to_pylist() == want
    assert arrow.migrate(arr.cast(pa.large_binary()), SNAP, NEW).to_pylist() == want
    bad = raw[:]
    bad[23] = b"\x04"
    with pytest.raises(MalformedDataError) as e:
        arrow.migrate(pa.chunked_array([pa.array(bad[:15]), pa.array(bad[15:])]), SNAP, NEW)
    assert e.value.row == 23  # type: ignore[attr-defined]


def test_hostile_entries_are_typed_errors_naming_row_and_field(impl: str) -> None:
    good = OLD.to_bytes(values(2)[1])
    cases = {
        b"\x04\x00\x01x": (MalformedDataError, "", abi.ERR_BAD_FLAG),  # an unregistered subclass
        b"\x02\x05": (MalformedDataError, "a", abi.ERR_BAD_FLAG),
        good[:-3]: (TruncatedDataError, "inner.x", abi.ERR_TRUNCATED),
        good + b"\x00": (MalformedDataError, "", abi.ERR_TRAILING),
        _entry(b"\x00\x02a", b"\x00\x01", b"\x00" + b"\x00" * 4, b"\x01", b"\x00\x07"):
            (MalformedDataError, "inner", abi.ERR_BAD_FLAG),
        _entry(b"\x00\x02a", b"\x00\x01", b"\x00" + b"\x00" * 4, b"\x01", b"\x00\x02\x01\x00\x02\x80\x80\x80\x80\x80"):
            (MalformedDataError, "inner.y", abi.ERR_BAD_CHAR),
        b"": (TruncatedDataError, "", abi.ERR_TRUNCATED),
    }
    for raw, (kind, path, code) in cases.items():
        with pytest.raises(kind) as e:
            arrow.migrate(pa.array([good, raw]), SNAP, NEW)
        assert (e.value.row, e.value.field_path, e.value.code) == (1, path, code), raw  # type: ignore[attr-defined]
        with pytest.raises(Exception):  # noqa: B017 - the reference refuses the same entry
            migrate_bytes(SNAP, NEW, raw)


def test_error_modes(impl: str) -> None:
    raw = blobs(30)
    raw[3], raw[17] = b"\x02\x09", (raw[17] or b"")[:-1]
    want = reference([None if i in (3, 17) else b for i, b in enumerate(raw)])
    arr = pa.array(raw)
    with pytest.raises(MalformedDataError) as e:
        arrow.migrate(arr, SNAP, NEW)
    assert e.value.row == 3  # type: ignore[attr-defined]
    assert arrow.migrate(arr, SNAP, NEW, on_error="null").to_pylist() == want
    out, errs = bulk.migrate(arr, SNAP, NEW, on_error="null")
    assert out.to_pylist() == want
    assert [(x.row, x.field_path) for x in errs] == [(3, "a"), (17, "inner")]


def test_threads_join_ranges(impl: str) -> None:
    raw = blobs(500)
    raw[250] = b"\x03"
    want = arrow.migrate(pa.array(raw), SNAP, NEW, on_error="null").to_pylist()
    for threads in (2, 3):
        out, errs = bulk.migrate(pa.array(raw), SNAP, NEW, threads=threads, on_error="null")
        assert out.to_pylist() == want
        assert [x.row for x in errs] == [250]


@pytest.mark.parametrize("tier", TIERS)
def test_kernel_stops_when_short_and_resumes(tier: str) -> None:
    k = kernels.tier(tier)
    raw = blobs(12)
    arr = pa.array(raw)
    prog = plans.compile_pojo_program(SNAP, NEW)
    validity, offs, data = arr.buffers()
    out_off = np.zeros(len(arr) + 1, dtype=np.int32)
    out = np.zeros(40, dtype=np.uint8)
    i, pos, status = k.pojo_migrate_run(prog.matrix, offs, data, validity, 0, False, 0, len(arr), out_off, out, 0)
    assert status == 0 and i < len(arr)
    bigger = np.zeros(4096, dtype=np.uint8)
    bigger[:pos] = out[:pos]
    i, pos, status = k.pojo_migrate_run(prog.matrix, offs, data, validity, 0, False, i, len(arr), out_off, bigger, pos)
    assert (i, status) == (len(arr), 0)
    got = [None if b is None else bytes(bigger[out_off[j]:out_off[j + 1]]) for j, b in enumerate(raw)]
    assert got == reference(raw)


def test_protocol_errors_same_on_both_tiers() -> None:
    prog = plans.compile_pojo_program(SNAP, NEW)
    arr = pa.array(blobs(3))
    validity, offs, data = arr.buffers()
    for tier in TIERS:
        k = kernels.tier(tier)
        with pytest.raises(ValueError):
            k.pojo_migrate_run(prog.matrix, offs, data, validity, 0, False, 0, 3, np.zeros(2, np.int32),
                               np.zeros(10, np.uint8), 0)
        with pytest.raises(ValueError):
            k.pojo_migrate_run(prog.matrix[1:].copy(), offs, data, validity, 0, False, 0, 3, np.zeros(4, np.int32),
                               np.zeros(10, np.uint8), 0)


def _refused(new: PojoSerializer, old: PojoSerializer = OLD) -> str:
    with pytest.raises(plans.NotByteRemappable) as e:
        plans.compile_pojo_program(old.snapshot_configuration(), new)
    return str(e.value)


def test_evolutions_the_kernel_refuses_keep_the_per_value_path() -> None:
    @dataclasses.dataclass
    class Factory:
        b: int | None
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class Checked:
        b: int | None

        def __post_init__(self) -> None:
            if self.b is not None and self.b < 0:
                raise ValueError("negative")

    small = PojoSerializer(None, {"b": S.IntSerializer()}, java_class_name="p.Q")
    with_list = PojoSerializer(Factory, {"b": S.IntSerializer(), "items": S.ListSerializer(S.IntSerializer())},
                               java_class_name="p.Q")
    assert "default factory" in _refused(with_list, small)
    checked = PojoSerializer(Checked, {"b": S.IntSerializer()}, java_class_name="p.Q")
    wider = PojoSerializer(None, {"b": S.IntSerializer(), "c": S.IntSerializer()}, java_class_name="p.Q")
    assert "constructor" in _refused(checked, wider)
    # the per-value path still gives the reference's answer
    raw = [wider.to_bytes({"b": 3, "c": 1})]
    got = arrow.migrate(pa.array(raw), wider.snapshot_configuration(), checked).to_pylist()
    assert got == [migrate_bytes(wider.snapshot_configuration(), checked, raw[0])]
    lists = PojoSerializer(None, {"b": S.ListSerializer(S.IntSerializer()), "c": S.IntSerializer()},
                           java_class_name="p.Q")
    assert "no in-place walker" in _refused(PojoSerializer(None, {"b": S.ListSerializer(S.IntSerializer())},
                                                           java_class_name="p.Q"), lists)


def test_growth_bounds_the_output() -> None:
    prog = plans.compile_pojo_program(SNAP, NEW)
    assert plans.pojo_growth(prog.matrix) == 5 + 1 + 5  # added=42, note=null, inner.w=5


def test_snapshot_from_bytes_with_a_missing_field(impl: str) -> None:
    """A snapshot read back from bytes (no Python class: dicts, added fields null) that already
    records a removed field as absent ('missing-field-at-i': read and dropped)."""
    from statemorph.serializers.pojo import PojoField
    from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

    old = PojoSerializer.from_fields(None, "p.P", [
        PojoField("a", S.StringSerializer(), "p.P"),
        PojoField("gone", S.LongSerializer(), "p.P", present=False),
        PojoField("c", S.LongSerializer(), "p.P"),
    ])
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    assert snap.fields[1].key is None
    new = PojoSerializer(None, {"c": S.LongSerializer(), "a": S.StringSerializer(), "b": S.IntSerializer()},
                         java_class_name="p.P")
    raw = [b"\x02\x00\x02x\x00" + struct.pack(">q", 7) + b"\x00" + struct.pack(">q", 8), b"\x02\x01\x01\x01", None]
    want = [None if b is None else migrate_bytes(snap, new, b) for b in raw]
    assert arrow.migrate(pa.array(raw), snap, new).to_pylist() == want
    assert want[0] == b"\x02\x00\x02x\x01\x00" + struct.pack(">q", 8)


def test_row_fields_take_the_row_remap(impl: str) -> None:
    """A flink-core Row field (legacy mask → mask with RowKind bits) inside an evolving POJO."""
    from statemorph.row import Row

    def row(kind: bool) -> Any:
        return S.RowSerializer([S.IntSerializer(), S.StringSerializer()], supports_row_kind=kind)

    old = PojoSerializer(None, {"r": row(False), "gone": S.IntSerializer()}, java_class_name="p.R")
    new = PojoSerializer(None, {"r": row(True), "n": S.IntSerializer()}, java_class_name="p.R")
    snap = old.snapshot_configuration()
    raw = [old.to_bytes({"r": Row((1, "x")), "gone": 2}), old.to_bytes({"r": Row((None, None)), "gone": None}),
           old.to_bytes({"r": None, "gone": 3})]
    want = [migrate_bytes(snap, new, b) for b in raw]
    assert arrow.migrate(pa.array(raw), snap, new).to_pylist() == want
    hostile = raw[0][:10]  # flags, gone, r: mask and half its int
    with pytest.raises(TruncatedDataError) as e:
        arrow.migrate(pa.array([hostile]), snap, new)
    assert e.value.field_path == "r.f0"  # type: ignore[attr-defined]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40),
                          st.builds(lambda b: b"\x02" + b, st.binary(max_size=40))), max_size=12))
def test_arbitrary_bytes_get_the_reference_verdict(blobs: list[bytes | None]) -> None:
    def reference_or_null(b: bytes | None) -> bytes | None:
        try:
            return None if b is None else migrate_bytes(SNAP, NEW, b)
        except StateFormatError:
            return None

    want = [reference_or_null(b) for b in blobs]
    for got in on_tiers(lambda: arrow.migrate(pa.array(blobs, type=pa.binary()), SNAP, NEW,
                                              on_error="null").to_pylist()).values():
        assert got == want
