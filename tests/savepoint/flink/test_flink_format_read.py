"""Reading real Flink savepoints: _metadata and keyed-state streams round-trip byte for byte, and
every entry reads back to exactly what the generating job wrote (expected.json)."""

from __future__ import annotations

import json
from pathlib import Path

import cramjam
import pytest
from savepoint.flink.format_helpers import SOURCE_UID_HASH, case_ids, cases, expected, read_back, spec, state_operator

from statemorph.io import DataInputDeserializer
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FlinkSavepoint,
    build_composite_key,
    compress_key_group,
    decompress_key_group,
    parse_key_group,
    parse_metadata,
    serialize_metadata,
    write_key_group,
    write_keyed_header,
)
from statemorph.savepoint.flink.keyed_blocks import key_group_extents, read_key_group_bytes
from statemorph.savepoint.flink.layout import variable_int_bytes
from statemorph.savepoint.flink.metadata import OperatorState

CASES = cases()
pytestmark = pytest.mark.skipif(not CASES, reason="no committed real-Flink savepoints")


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_metadata_round_trips_byte_for_byte(case: Path) -> None:
    data = (case / "savepoint" / "_metadata").read_bytes()
    meta = parse_metadata(data)
    assert serialize_metadata(meta) == data
    assert meta.version == (4 if spec(case)["flink"].startswith("1.") else 6)
    assert len(meta.trailer) > 0  # the Java-serialized CheckpointProperties, kept opaque


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_operators_and_uid_hashes(case: Path) -> None:
    sp = FlinkSavepoint(case / "savepoint")
    s = spec(case)
    stateful = [op for op in sp.operators if op.uid_hash != SOURCE_UID_HASH]
    assert len(stateful) == 1
    op = stateful[0]
    assert op.parallelism == s["parallelism"]
    assert op.max_parallelism == s["max_parallelism"]
    if sp.version >= 5:
        assert op.uid == s["uid"]
        assert sp.operator(s["uid"]) is op
    else:
        assert op.uid is None and op.name is None
    assert sp.operator(op.uid_hash) is op
    assert sp.operator(op.uid_hash.upper()) is op


def test_uid_hash_is_flinks_operator_id() -> None:
    # uid "events-state" -> murmur3_128(seed 0), as the generator's job and Flink print it
    sp = FlinkSavepoint(Path(__file__).parents[2] / "data" / "flink_savepoints" / "events-hashmap-p1" / "savepoint")
    assert sp.operator("events-state").uid_hash == "1d688a8c0c78555ff37bf9598bbe711c"


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_keyed_streams_round_trip(case: Path) -> None:
    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    streams = 0
    for _, stream in sp.keyed_streams(op):
        streams += 1
        h = stream.header
        assert h.compressed == spec(case)["compression"]
        head = stream.source.read_at(0, stream.header_end, "header")
        assert write_keyed_header(h) == head
        _, extents = key_group_extents(stream.handle, stream.source.size, "t")
        for ext in extents:
            raw = stream.source.read_at(ext.offset, ext.end - ext.offset, "kg")
            buf = read_key_group_bytes(stream.source, ext, h.compressed, "t")
            runs, _ = parse_key_group(buf, len(h.states), "t", exact_end=True)
            assert write_key_group(runs) == buf
            if h.compressed:
                again = compress_key_group(buf)
                assert decompress_key_group(again, "t") == buf
                # Flink's framing: stream identifier, then chunks with the same masked CRC32C
                assert raw[:10] == again[:10] == b"\xff\x06\x00\x00sNaPpY"
                assert raw[14:18] == again[14:18]
            else:
                assert buf == raw
    assert streams == spec(case)["parallelism"]


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_entries_equal_what_the_job_wrote(case: Path) -> None:
    assert read_back(case) == expected(case)


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_inspect(case: Path) -> None:
    sp = FlinkSavepoint(case / "savepoint")
    info = sp.inspect()
    doc = json.loads(json.dumps(info.to_json()))
    assert doc["format"] == "flink" and doc["metadata_version"] == sp.version
    op = next(o for o in doc["operators"] if o["uid_hash"] != SOURCE_UID_HASH)
    states = {s["name"]: s for s in op["states"]}
    exp = expected(case)
    for name, st in states.items():
        if name.startswith("_timer_state/"):
            assert st["kind"] == "timers"
            continue
        base = name[4:] if name.startswith("ttl_") else name
        assert st["ttl"] == name.startswith("ttl_")
        assert st["kind"] == {"recent": "list", "totals": "map"}.get(base, "value")
        keys = [k for (k, s) in exp if s == name]
        if st["kind"] == "map":
            assert st["entries"] == sum(len(exp[(k, name)]) for k in keys)
            assert st["user_key_serializer"].endswith("StringSerializerSnapshot")
        else:
            assert st["entries"] == len(keys)
        assert st["bytes"] > 0
    timers = states["_timer_state/event_user-timers"]
    assert timers["entries"] == sum(len(v) for (k, s), v in exp.items() if s == "timers")
    assert states["events"]["value_serializer"].endswith("RowDataSerializer$RowDataSerializerSnapshot")


def test_batches_have_the_parquet_columns() -> None:
    case = next(c for c in CASES if c.name.startswith("kinds"))
    sp = FlinkSavepoint(case / "savepoint")
    op = state_operator(sp)
    names = {
        "count": ["key_group", "key", "namespace", "value"],
        "recent": ["key_group", "key", "namespace", "index", "value"],
        "totals": ["key_group", "key", "namespace", "user_key", "value"],
        "ttl_count": ["key_group", "key", "namespace", "value", "ttl_timestamp"],
        "_timer_state/event_user-timers": ["key_group", "timestamp", "key", "namespace"],
    }
    for state, cols in names.items():
        batches = list(sp.iter_state_batches(op, state, batch_rows=5))
        assert batches and all(b.schema.names == cols for b in batches)
        assert all(b.num_rows <= 5 for b in batches)
        for b in batches:
            kg = b.column("key_group").to_pylist()
            assert all(0 <= g < spec(case)["max_parallelism"] for g in kg)


def test_modified_utf8_both_ways() -> None:
    case = CASES[0]
    meta = parse_metadata((case / "savepoint" / "_metadata").read_bytes())
    if meta.version < 5:
        pytest.skip("names and uids are written from version 5 on")
    op: OperatorState = meta.operators[0]
    op.name = "nul\x00 é 😀"
    op.uid = "ü"
    data = serialize_metadata(meta)
    # Java writeUTF: NUL as C0 80, é as C3 A9, the emoji as two 3-byte surrogates
    body = b"nul" + b"\xc0\x80 \xc3\xa9 \xed\xa0\xbd\xed\xb8\x80"
    assert len(body).to_bytes(2, "big") + body in data
    assert b"\x00\x02\xc3\xbc" in data
    again = parse_metadata(data)
    assert again.operators[0].name == op.name and again.operators[0].uid == "ü"
    assert serialize_metadata(again) == data


def test_older_metadata_versions_write_and_read() -> None:
    """V3 has no trailer, V4 no names/uids, V5 no V6 channel encoding: a savepoint's content written
    in each version reads back the same (the canonical subset is the same across them)."""
    case = next(c for c in CASES if spec(c)["flink"].startswith("2."))
    meta = parse_metadata((case / "savepoint" / "_metadata").read_bytes())
    for version in (3, 4, 5, 6):
        meta.version = version
        if version == 3:
            trailer, meta.trailer = meta.trailer, b""
        data = serialize_metadata(meta)
        back = parse_metadata(data)
        assert back.version == version
        assert serialize_metadata(back) == data
        assert [o.operator_id for o in back.operators] == [o.operator_id for o in meta.operators]
        assert (back.operators[0].uid is None) == (version < 5)
        if version == 3:
            meta.trailer = trailer


def test_inline_and_file_handles_are_both_present_in_the_matrix() -> None:
    kinds = set()
    for case in CASES:
        sp = FlinkSavepoint(case / "savepoint")
        op = sp.operator(state_operator(sp))
        for st in op.subtasks or []:
            if st.managed_keyed is not None:
                kinds.add(type(st.managed_keyed.delegate).__name__)
                assert st.managed_keyed.code == 7  # KeyGroupsSavepointStateHandle
    assert kinds == {"ByteStreamHandle", "RelativeFileHandle"}
    assert ByteStreamHandle.__name__ in kinds


def test_variable_int_bytes_and_composite_keys() -> None:
    assert variable_int_bytes(0) == b"\x00"
    assert variable_int_bytes(5) == b"\x05"
    assert variable_int_bytes(300) == b"\x2c\x01"
    assert build_composite_key(3, b"K", b"\x00", b"", 1, False) == b"\x03K\x00"
    assert build_composite_key(300, b"KK", b"NNN", b"U", 2, True) == b"\x01\x2cKK\x02NNN\x03U"


def test_composite_keys_with_length_suffixes_split() -> None:
    """Both key and namespace variable-length (String, String): each is followed by its length."""
    from statemorph import serializers
    from statemorph.savepoint.flink.envelope import Snapshot
    from statemorph.savepoint.flink.keyed_header import StateMetaInfo
    from statemorph.savepoint.flink.layout import StateLayout
    from statemorph.typeutils import write_versioned_snapshot

    def snap(s: object) -> Snapshot:
        raw = write_versioned_snapshot(s.snapshot_configuration())  # type: ignore[attr-defined]
        from statemorph.savepoint.flink.envelope import read_versioned

        return read_versioned(DataInputDeserializer(raw))

    string = serializers.StringSerializer()
    long_ = serializers.LongSerializer()
    for kind, rest in (("VALUE", b""), ("MAP", string.to_bytes("uk"))):
        meta = StateMetaInfo(
            "s", 0, [("KEYED_STATE_TYPE", kind)],
            [("VALUE_SERIALIZER", snap(long_ if kind == "VALUE" else serializers.MapSerializer(string, long_))),
             ("NAMESPACE_SERIALIZER", snap(string))],
        )
        layout = StateLayout(meta, snap(string), 1024, "t")
        assert layout.ambiguous
        key, ns = string.to_bytes("user-1"), string.to_bytes("window-7")
        composite = build_composite_key(700, key, ns, rest, 2, True)
        sk = layout.split_key(composite)
        assert (sk.key_group, sk.key, sk.namespace, sk.rest) == (700, key, ns, rest)


def test_snappy_chunks_follow_xerial() -> None:
    import os

    random = os.urandom(70_000)  # incompressible: stored chunks
    text = b"flink state " * 20_000  # compressible, > 64 KiB: several compressed chunks
    for data, kind in ((random, 0x01), (text, 0x00)):
        framed = compress_key_group(data)
        assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
        pos, chunks = 10, []
        while pos < len(framed):
            n = int.from_bytes(framed[pos + 1 : pos + 4], "little")
            chunks.append(framed[pos])
            pos += 4 + n
        assert chunks and set(chunks) == {kind}
        assert len(chunks) == -(-len(data) // 65536)
        assert bytes(cramjam.snappy.decompress(framed)) == data  # CRCs checked by the codec
        assert decompress_key_group(framed, "t") == data


@pytest.mark.parametrize("case", [c for c in CASES if spec(c)["parallelism"] > 1], ids=lambda c: c.name)
def test_key_group_ranges_partition_the_entries(case: Path) -> None:
    """Reading by key-group ranges (one Spark task each) gives every row exactly once."""
    sp = FlinkSavepoint(case / "savepoint")
    op = state_operator(sp)
    whole = [r for b in sp.iter_state_batches(op, "events") for r in b.to_pylist()]
    mp = spec(case)["max_parallelism"]
    parts = []
    for start in range(0, mp, 37):
        rng = range(start, min(mp, start + 37))
        rows = [r for b in sp.iter_state_batches(op, "events", key_groups=rng) for r in b.to_pylist()]
        assert all(r["key_group"] in rng for r in rows)
        parts += rows
    assert sorted(parts, key=repr) == sorted(whole, key=repr) and whole


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_fast_column_paths_equal_the_per_entry_path(case: Path) -> None:
    """StateLayout.columns (slicing) and value_parts (bulk) give what the per-entry split gives."""
    from statemorph.savepoint.flink import StateLayout

    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    for _, stream in sp.keyed_streams(op):
        layouts = [StateLayout(m, stream.header.key_serializer, op.max_parallelism, "t") for m in stream.header.states]
        for _, runs in stream.key_groups():
            for run in runs:
                lay = layouts[run.state_id]
                assert lay.columns(run.keys, run.values) == lay._columns_per_entry(run.keys, run.values)
                if lay.kind == "timers":
                    continue
                users, rebuild = lay.value_parts(run.values)
                flat = [b for v in run.values for b, _ in lay.split_value(v) if b is not None]
                assert users == flat
                assert rebuild(users) == run.values
