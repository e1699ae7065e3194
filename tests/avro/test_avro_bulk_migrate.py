"""Bulk migration of Avro state through the byte-program kernel, on both tiers: what the per-value
reference writes (one block per array / map, canonical booleans and NaNs, promotions, enum and
union re-mapping, defaults), hostile entries (counts, indexes, lengths, logical ranges), the
entries the kernel leaves to the reference, buffer growth, threads, input shapes, and the schema
pairs that keep the per-value path."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tiers import TIERS, on_tiers

from statemorph import arrow, bulk, kernels
from statemorph.errors import MalformedDataError, StateFormatError, StateMigrationError, TruncatedDataError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.kernels import abi, plans
from statemorph.serializers import AvroSerializer
from statemorph.serializers._avro_codec import ZERO_WIDTH_ITEM_BUDGET

OLD = AvroSerializer({"type": "record", "name": "Ev", "fields": [
    {"name": "id", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "tags", "type": {"type": "array", "items": "int"}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "C"]}},
    {"name": "loc", "type": ["null", {"type": "record", "name": "Loc", "fields": [
        {"name": "lat", "type": "float"}, {"name": "lon", "type": "double"}]}]},
    {"name": "raw", "type": "bytes"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
]})
NEW = AvroSerializer({"type": "record", "name": "Ev", "fields": [
    {"name": "loc", "type": ["null", {"type": "record", "name": "Loc", "fields": [
        {"name": "lon", "type": "double"}, {"name": "lat", "type": "double"},
        {"name": "alt", "type": "long", "default": 7}]}]},
    {"name": "id", "type": "long"},
    {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["C", "A"], "default": "A"}},
    {"name": "tags", "type": {"type": "array", "items": "double"}},
    {"name": "note", "type": ["string", "null"], "default": "n/a"},
    {"name": "attrs", "type": {"type": "map", "values": "bytes"}},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
]})
SNAP = OLD.snapshot_configuration()


def value(i: int) -> dict[str, Any]:
    import datetime

    return {"id": i - 5, "ok": i % 2 == 0, "tags": list(range(i % 4)),
            "attrs": {f"k{j}": "é" * j for j in range(i % 3)}, "kind": "ABC"[i % 3],
            "loc": None if i % 5 == 0 else {"lat": i / 3, "lon": -i / 7}, "raw": bytes([i % 256]),
            "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i)}


def reference(blob: bytes | None, new: AvroSerializer = NEW, snap: Any = SNAP) -> bytes | None:
    if blob is None:
        return None
    prior = snap.restore_serializer()
    src, out = DataInputDeserializer(blob), DataOutputSerializer()
    try:
        snap.migrate_state(prior, new, src, out)
        src.expect_end("the value")
    except StateFormatError:
        return None
    return out.get_copy_of_buffer()


def migrate_all(blobs: list[bytes | None], new: AvroSerializer = NEW, snap: Any = SNAP, **kw: Any) -> dict[str, Any]:
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.migrate(arr, snap, new, on_error="null", **kw)
        return out.to_pylist(), [(e.row, e.field_path, e.code) for e in errs]

    return on_tiers(run)


def status_of(blob: bytes, new: AvroSerializer = NEW, snap: Any = SNAP) -> dict[str, tuple[int, str]]:
    """Each tier's kernel verdict on one entry: (error code, field path), (0, "") when it is good."""
    prog = plans.compile_avro_program(snap, new)
    arr = pa.array([blob], type=pa.binary())
    validity, offs, data = arr.buffers()
    got = {}
    for tier in TIERS:
        out = np.zeros(4096, dtype=np.uint8)
        _, _, status = kernels.tier(tier).avro_migrate_run(prog.matrix, offs, data, validity, 0, False, 0, 1,
                                                          np.zeros(2, np.int32), out, 0)
        code, node = abi.decode_err(status) if status else (0, -1)
        got[tier] = (code, prog.path(node))
    return got


def test_migrates_like_the_reference_on_both_tiers() -> None:
    blobs: list[bytes | None] = [OLD.to_bytes(value(i)) for i in range(40)] + [None]
    want = [reference(b) for b in blobs]
    assert all(w is not None for w in want[:-1])
    for tier, (got, errs) in migrate_all(blobs).items():
        assert got == want, tier
        assert errs == []


def test_canonical_booleans_and_nans_and_one_block() -> None:
    old = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "a", "type": {"type": "array", "items": "float"}},
        {"name": "m", "type": {"type": "map", "values": "int"}}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "x", "type": "int", "default": 1}, {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"},
        {"name": "d", "type": "double"}, {"name": "a", "type": {"type": "array", "items": "double"}},
        {"name": "m", "type": {"type": "map", "values": "long"}}]})
    snap = old.snapshot_configuration()
    key = b"\x00\x00\x00\x01k"
    blob = (b"\x07" + b"\x7f\x80\x00\x01" + b"\xff\xf0\x00\x00\x00\x00\x00\x01"  # boolean 7, signalling NaNs
            + b"\x01\x7f\x80\x00\x02" + b"\x02\x00\x00\x00\x00\x3f\x80\x00\x00" + b"\x00"  # array in two blocks
            + b"\x01" + key + b"\x00\x00\x00\x05" + b"\x00")  # map of one
    want = reference(blob, new, snap)
    assert want is not None and want[4:5] == b"\x01"
    assert b"\x03" in want  # three items, one block
    for tier, (got, errs) in migrate_all([blob], new, snap).items():
        assert got == [want] and errs == [], tier


@pytest.mark.parametrize("case, code", [
    ("bad_union", abi.ERR_AVRO_INDEX), ("bad_enum", abi.ERR_AVRO_INDEX), ("neg_len", abi.ERR_BAD_LENGTH),
    ("long_count", abi.ERR_BAD_LENGTH), ("huge_count", abi.ERR_TRUNCATED), ("cut", abi.ERR_TRUNCATED),
    ("trailing", abi.ERR_TRAILING), ("bad_utf8_key", abi.ERR_BAD_UTF8), ("day_range", abi.ERR_AVRO_RANGE),
])
def test_hostile_entries_are_bad_rows_like_the_reference(case: str, code: int) -> None:
    good = OLD.to_bytes({**value(3), "attrs": {"k": "v"}, "tags": [1]})
    # layout: id 4 | ok 1 | tags: 01 i32 00 | attrs: 01 len k len v 00 | kind 4 | loc union 4 + 4 + 8 | raw | day
    at_tags, at_attrs = 5, 11
    at_kind = at_attrs + 1 + 5 + 5 + 1
    at_loc = at_kind + 4
    blob = {
        "bad_union": good[:at_loc] + b"\x00\x00\x00\x05" + good[at_loc + 4:],
        "bad_enum": good[:at_kind] + b"\xff\xff\xff\xff" + good[at_kind + 4:],
        "neg_len": good[:at_attrs + 1] + b"\x80\x00\x00\x01" + good[at_attrs + 5:],
        "long_count": good[:at_tags] + b"\xff" * 10 + good[at_tags + 1:],
        "huge_count": good[:at_tags] + b"\xff" * 9 + b"\x01" + good[at_tags + 1:],
        "cut": good[:-2],
        "trailing": good + b"\x00",
        "bad_utf8_key": good[:at_attrs + 5] + b"\xc0" + good[at_attrs + 6:],
        "day_range": good[:-4] + struct.pack(">i", 3_000_000),
    }[case]
    assert reference(blob) is None
    statuses = status_of(blob)
    assert {c for c, _ in statuses.values()} == {code}, statuses
    for tier, (got, errs) in migrate_all([good, blob]).items():
        assert got == [reference(good), None], tier
        assert [row for row, _, _ in errs] == [1], tier


def test_zero_width_items_share_the_reference_budget() -> None:
    old = AvroSerializer({"type": "record", "name": "R", "fields": [{"name": "n", "type": {"type": "array",
                                                                                          "items": "null"}}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "n", "type": {"type": "array", "items": "null"}}, {"name": "x", "type": "int", "default": 0}]})
    snap = old.snapshot_configuration()

    def count(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        return bytes(out) + bytes([n])

    ok = count(ZERO_WIDTH_ITEM_BUDGET) + b"\x00"
    over = count(ZERO_WIDTH_ITEM_BUDGET // 2) + count(ZERO_WIDTH_ITEM_BUDGET // 2 + 1) + b"\x00"
    assert reference(ok, new, snap) is not None and reference(over, new, snap) is None
    assert {c for c, _ in status_of(over, new, snap).values()} == {abi.ERR_TOO_LARGE}
    for tier, (got, _) in migrate_all([ok, over], new, snap).items():
        assert got == [reference(ok, new, snap), None], tier


def test_duplicate_map_keys_take_the_reference_path() -> None:
    good = OLD.to_bytes({**value(1), "attrs": {"a": "1", "b": "2"}})
    dup = good.replace(b"\x00\x00\x00\x01b", b"\x00\x00\x00\x01a")
    assert dup != good
    assert {c for c, _ in status_of(dup).values()} == {abi.HAND_BACK}
    want = reference(dup)
    assert want is not None and want.count(b"\x00\x00\x00\x01a") == 1  # the dict kept one key
    for threads in (1, 2):
        for tier, (got, errs) in migrate_all([dup, good, dup, good] * 3, threads=threads).items():
            assert got == [want, reference(good), want, reference(good)] * 3 and errs == [], (tier, threads)
    # an entry left to the reference that the reference finds bad is its bad row
    old = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": "int"}}, {"name": "x", "type": "int"}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": "long"}}, {"name": "x", "type": "int"},
        {"name": "y", "type": "int", "default": 3}]})
    snap = old.snapshot_configuration()
    good = old.to_bytes({"m": {"a": 1, "b": 2}, "x": 5})
    cut = good.replace(b"\x00\x00\x00\x01b", b"\x00\x00\x00\x01a")[:-1]
    assert {c for c, _ in status_of(cut, new, snap).values()} == {abi.HAND_BACK}
    for tier, (got, errs) in migrate_all([good, cut], new, snap).items():
        assert got == [reference(good, new, snap), None] and [(e[0], e[2]) for e in errs] == [(1, -1)], tier


def test_bytes_to_string_of_invalid_utf8_raises_like_the_reference() -> None:
    old = AvroSerializer({"type": "record", "name": "R", "fields": [{"name": "s", "type": "bytes"}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]})
    snap = old.snapshot_configuration()
    good, bad = old.to_bytes({"s": "é".encode()}), old.to_bytes({"s": b"\xff"})
    assert {c for c, _ in status_of(bad, new, snap).values()} == {abi.HAND_BACK}
    assert on_tiers(lambda: arrow.migrate(pa.array([good]), snap, new).to_pylist())["python"] == [good]
    for tier in TIERS:
        saved = kernels.KERNELS
        kernels.KERNELS = kernels.tier(tier)
        try:
            with pytest.raises(StateMigrationError):
                arrow.migrate(pa.array([good, bad]), snap, new, on_error="null")
        finally:
            kernels.KERNELS = saved
    with pytest.raises(StateMigrationError):
        reference(bad, new, snap)


def test_raise_mode_names_row_and_field() -> None:
    blobs = [OLD.to_bytes(value(i)) for i in range(5)]
    blobs[3] = blobs[3][:6]
    for tier in TIERS:
        saved = kernels.KERNELS
        kernels.KERNELS = kernels.tier(tier)
        try:
            with pytest.raises(TruncatedDataError) as e:
                arrow.migrate(pa.array(blobs), SNAP, NEW)
            assert (e.value.row, e.value.field_path) == (3, "Ev.tags")  # type: ignore[attr-defined]
            blobs2 = list(blobs)
            blobs2[3] = OLD.to_bytes(value(3)) + b"\x01"
            with pytest.raises(MalformedDataError):
                arrow.migrate(pa.array(blobs2), SNAP, NEW)
        finally:
            kernels.KERNELS = saved


@pytest.mark.parametrize("tier", TIERS)
def test_kernel_stops_when_short_and_resumes(tier: str) -> None:
    k = kernels.tier(tier)
    raw = [OLD.to_bytes(value(i)) for i in range(12)]
    arr = pa.array(raw)
    prog = plans.compile_avro_program(SNAP, NEW)
    validity, offs, data = arr.buffers()
    out_off = np.zeros(len(arr) + 1, dtype=np.int64)
    out = np.zeros(100, dtype=np.uint8)
    i, pos, status = k.avro_migrate_run(prog.matrix, offs, data, validity, 0, False, 0, len(arr),
                                        out_off, out, 0)
    assert status == 0 and i < len(arr)
    bigger = np.zeros(8192, dtype=np.uint8)
    bigger[:pos] = out[:pos]
    i, pos, status = k.avro_migrate_run(prog.matrix, offs, data, validity, 0, False, i, len(arr), out_off, bigger, pos)
    assert (i, status) == (len(arr), 0)
    assert [bytes(bigger[out_off[j]:out_off[j + 1]]) for j in range(len(raw))] == [reference(b) for b in raw]


def test_protocol_errors_same_on_both_tiers() -> None:
    prog = plans.compile_avro_program(SNAP, NEW)
    arr = pa.array([OLD.to_bytes(value(1))] * 3)
    validity, offs, data = arr.buffers()
    for tier in TIERS:
        k = kernels.tier(tier)
        with pytest.raises(ValueError):
            k.avro_migrate_run(prog.matrix, offs, data, validity, 0, False, 0, 3, np.zeros(2, np.int32),
                               np.zeros(10, np.uint8), 0)
        with pytest.raises(ValueError):
            k.avro_migrate_run(prog.matrix[1:].copy(), offs, data, validity, 0, False, 0, 3, np.zeros(4, np.int32),
                               np.zeros(10, np.uint8), 0)


def test_threads_slices_chunks_and_large_binary() -> None:
    raw: list[bytes | None] = [OLD.to_bytes(value(i)) for i in range(300)]
    raw[7] = None
    raw[250] = raw[250][:3]  # type: ignore[index]
    want = [reference(b) for b in raw]
    for tier, (got, errs) in migrate_all(raw, threads=3).items():
        assert got == want and [e[0] for e in errs] == [250], tier
    big = pa.array(raw, type=pa.large_binary())
    for tier, got in on_tiers(lambda: arrow.migrate(big.slice(5, 100), SNAP, NEW, on_error="null")).items():
        assert got.type == pa.large_binary() and got.to_pylist() == want[5:105], tier
    chunked = pa.chunked_array([pa.array(raw[:100]), pa.array(raw[100:])])
    for tier, got in on_tiers(lambda: arrow.migrate(chunked, SNAP, NEW, on_error="null")).items():
        assert got.to_pylist() == want, tier


def test_alias_reads_one_writer_field_twice_in_a_new_order() -> None:
    old = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "y", "type": "string"}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "y", "type": "string"}, {"name": "x", "type": "bytes", "aliases": ["y"]},
        {"name": "a", "type": "double"}]})
    snap = old.snapshot_configuration()
    prog = plans.compile_avro_program(snap, new)
    assert prog.matrix[1, abi.COL_E] >= 0  # the two-pass record
    blobs = [old.to_bytes({"a": i, "y": "v" * i}) for i in range(5)]
    for tier, (got, _) in migrate_all(blobs, new, snap).items():
        assert got == [reference(b, new, snap) for b in blobs], tier


def _refused(old: Any, new: Any) -> str:
    with pytest.raises(plans.NotByteRemappable) as e:
        plans.compile_avro_program(AvroSerializer(old).snapshot_configuration(), AvroSerializer(new))
    return str(e.value)


def test_schema_pairs_the_program_refuses_keep_the_per_value_path() -> None:
    rec = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                         {"name": "next", "type": ["null", "Node"]}]}
    rec2 = {**rec, "fields": rec["fields"] + [{"name": "w", "type": "int", "default": 0}]}
    assert "recursive" in _refused(rec, rec2)
    num = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "long"]}]}
    assert "one value may fit" in _refused(num, {**num, "fields": num["fields"] + [{"name": "z", "type": "int",
                                                                                    "default": 0}]})
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}
    d1 = {"type": "record", "name": "R", "fields": [{"name": "d", "type": dec}]}
    assert "decimal" in _refused(d1, {**d1, "fields": d1["fields"] + [{"name": "z", "type": "int", "default": 0}]})
    plain = {"type": "record", "name": "R", "fields": [{"name": "t", "type": "long"}]}
    stamped = {"type": "record", "name": "R", "fields": [{"name": "t", "type": {"type": "long",
                                                                               "logicalType": "timestamp-millis"}},
                                                        {"name": "z", "type": "int", "default": 0}]}
    assert "logical" in _refused(plain, stamped)
    # the per-value path still answers
    old, new = AvroSerializer(num), AvroSerializer({**num, "fields": num["fields"] + [{"name": "z", "type": "int",
                                                                                      "default": 0}]})
    snap = old.snapshot_configuration()
    blobs = [old.to_bytes({"u": ("long", 5)}), old.to_bytes({"u": 6})]
    assert arrow.migrate(pa.array(blobs), snap, new).to_pylist() == [reference(b, new, snap) for b in blobs]


def test_growth_counts_defaults_union_indexes_and_widening() -> None:
    prog = plans.compile_avro_program(SNAP, NEW)
    # loc (its union index replaced): lat float->double +4, alt default 8; id int->long +4; tags items
    # int->double +4 (once, not per item); note default 4 + 4 + 3; day into a union +4
    assert plans.avro_growth(prog.matrix) == 4 + 8 + 4 + 4 + 11 + 4


def test_unions_whose_branches_tell_values_apart_compile() -> None:
    e1 = {"type": "enum", "name": "E1", "symbols": ["A", "B"]}
    e2 = {"type": "enum", "name": "E2", "symbols": ["C", "D"]}
    f2 = {"type": "fixed", "name": "F2", "size": 2}
    f3 = {"type": "fixed", "name": "F3", "size": 3}
    old = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "n", "type": ["null", "long", "double"]}, {"name": "e", "type": [e1, e2]},
        {"name": "f", "type": [f2, f3]}]})
    new = AvroSerializer({"type": "record", "name": "R", "fields": [
        {"name": "f", "type": [f2, f3]}, {"name": "e", "type": [e1, e2, "string"]},
        {"name": "n", "type": ["null", "long", "double"]}, {"name": "z", "type": "int", "default": 1}]})
    snap = old.snapshot_configuration()
    plans.compile_avro_program(snap, new)
    blobs = [old.to_bytes(v) for v in (
        {"n": None, "e": "A", "f": b"ab"}, {"n": 3, "e": "D", "f": b"abc"}, {"n": 2.5, "e": ("E2", "C"), "f": b"xy"},
        {"n": ("long", 7), "e": "B", "f": b"xyz"})]
    for tier, (got, errs) in migrate_all(blobs, new, snap).items():
        assert got == [reference(b, new, snap) for b in blobs] and errs == [], tier
    for union in (["double", "long"], ["int", "long"], [e1, {**e2, "symbols": ["B", "C"]}], [f2, {**f3, "size": 2}]):
        one = {"type": "record", "name": "R", "fields": [{"name": "u", "type": union}]}
        assert "one value may fit" in _refused(one, {**one, "fields": one["fields"] + [
            {"name": "z", "type": "int", "default": 0}]})
