"""The rewriter on real Flink savepoints: an identity rewrite reproduces the files, a value
migration changes exactly the migrated values (TTL timestamps, map null flags, list framing,
keys, key groups and every other state kept), and the write is atomic."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa
import pytest
from savepoint.flink.format_helpers import case_ids, cases, expected, read_back, spec, state_operator, tree_bytes

from statemorph import serializers
from statemorph.errors import DestinationError, FlinkSavepointError
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FlinkSavepoint,
    RelativeFileHandle,
    parse_metadata,
    rewrite,
    write_keyed_header,
)
from statemorph.savepoint.flink.keyed_blocks import key_group_extents, read_key_group_bytes
from statemorph.savepoint.flink.keyed_header import VALUE_SERIALIZER
from statemorph.typeutils import write_serializer_snapshot

CASES = cases()
pytestmark = pytest.mark.skipif(not CASES, reason="no committed real-Flink savepoints")


def _digest(root: Path) -> dict[str, str]:
    return {k: hashlib.sha256(v).hexdigest() for k, v in tree_bytes(root).items()}


def _identity_changes(sp: FlinkSavepoint) -> dict[tuple[str, str], tuple[bytes, object]]:
    op_id = state_operator(sp)
    op = sp.operator(op_id)
    _, stream = next(iter(sp.keyed_streams(op)))
    changes = {}
    for m in stream.header.states:
        if m.kind in ("value", "list", "map"):
            value, _ = m.value_snapshot_unwrapped()
            assert value is not None
            changes[(op_id, m.name)] = (value.envelope_bytes(), lambda a: a)
    return changes


def _key_groups(sp: FlinkSavepoint) -> list[tuple[bytes, list[tuple[int, bytes]]]]:
    """Per keyed stream: the header bytes and each key group's uncompressed bytes."""
    out = []
    op = sp.operator(state_operator(sp))
    for _, stream in sp.keyed_streams(op):
        _, extents = key_group_extents(stream.handle, stream.source.size, "t")
        groups = [(e.key_group, read_key_group_bytes(stream.source, e, stream.header.compressed, "t"))
                  for e in extents]
        out.append((write_keyed_header(stream.header), groups))
    return out


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_identity_rewrite_reproduces_the_savepoint(case: Path, tmp_path: Path) -> None:
    src = case / "savepoint"
    before = _digest(src)
    sp = FlinkSavepoint(src)
    dst = tmp_path / "out"
    report = rewrite(src, dst, _identity_changes(sp))
    assert _digest(src) == before  # the source is only read
    assert report.rewritten_streams == spec(case)["parallelism"]
    if not spec(case)["compression"]:
        assert tree_bytes(dst) == tree_bytes(src)
    else:
        # recompressed key groups differ in bytes, not in content
        assert _key_groups(FlinkSavepoint(dst)) == _key_groups(sp)
    assert read_back(case, FlinkSavepoint(dst)) == expected(case)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary directory left


def test_no_changes_carries_every_file_by_hard_link(tmp_path: Path) -> None:
    case = next(c for c in CASES if any(p.name != "_metadata" for p in (c / "savepoint").iterdir()))
    src = case / "savepoint"
    report = rewrite(src, tmp_path / "out", {})
    assert report.rewritten_streams == 0
    assert tree_bytes(tmp_path / "out") == tree_bytes(src)
    for f in src.iterdir():
        if f.name != "_metadata":
            assert report.carried_files > 0
            assert os.stat(f).st_ino == os.stat(tmp_path / "out" / f.name).st_ino


def _plus_one(arr: pa.Array) -> pa.Array:
    """Long values + 1, in bulk: big-endian int64 bytes in, bytes out."""
    data = np.frombuffer(b"".join(arr.to_pylist()), dtype=">i8") + 1
    raw = data.astype(">i8").tobytes()
    return pa.array([raw[i : i + 8] for i in range(0, len(raw), 8)], pa.binary())


@pytest.mark.parametrize("case", [c for c in CASES if c.name.startswith(("kinds", "flink120-kinds"))],
                         ids=lambda c: c.name)
def test_migrating_long_values_lists_maps_and_ttl(case: Path, tmp_path: Path) -> None:
    src = case / "savepoint"
    sp = FlinkSavepoint(src)
    op = state_operator(sp)
    long_env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())
    targets = [s for s in ("count", "recent", "totals", "ttl_count", "ttl_recent", "ttl_totals")
               if any(name == s for (_, name) in expected(case))]
    dst = tmp_path / "out"
    report = rewrite(src, dst, {(op, s): (long_env, _plus_one) for s in targets}, batch_values=7)
    exp = expected(case)
    got = read_back(case, FlinkSavepoint(dst))
    assert set(got) == set(exp)
    for (key, state), value in exp.items():
        if state not in targets:
            assert got[(key, state)] == value, state
        elif isinstance(value, list):
            assert got[(key, state)] == [v + 1 for v in value]
        elif isinstance(value, dict):
            assert got[(key, state)] == {k: None if v is None else v + 1 for k, v in value.items()}
        else:
            assert got[(key, state)] == value + 1
    assert sum(report.migrated.values()) > 0
    # keys, key groups, namespaces and TTL timestamps are kept exactly
    new = FlinkSavepoint(dst)
    for state in targets:
        old_rows = pa.Table.from_batches(list(sp.iter_state_batches(op, state))).drop_columns(["value"])
        new_rows = pa.Table.from_batches(list(new.iter_state_batches(op, state))).drop_columns(["value"])
        assert old_rows.equals(new_rows)


def test_new_snapshot_replaces_the_value_inside_its_wrappers(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name.startswith("kinds"))
    src = case / "savepoint"
    sp = FlinkSavepoint(src)
    op = state_operator(sp)
    # a different per-value snapshot (Long -> Long with a marker version of the same class would not
    # be Flink's); use the String snapshot for `count` with values rewritten as strings
    string = serializers.StringSerializer()
    env = write_serializer_snapshot(string.snapshot_configuration())

    def to_text(arr: pa.Array) -> pa.Array:
        return pa.array([string.to_bytes(str(int.from_bytes(b, "big", signed=True))) for b in arr.to_pylist()],
                        pa.binary())

    rewrite(src, tmp_path / "out", {(op, "totals"): (env, to_text), (op, "ttl_count"): (env, to_text)})
    new = FlinkSavepoint(tmp_path / "out")
    _, stream = next(iter(new.keyed_streams(new.operator(op))))
    for name, wrapper in (("totals", "MapSerializerSnapshot"), ("ttl_count", "TtlSerializerSnapshot")):
        _, meta = stream.header.state(name)
        top = meta.serializer(VALUE_SERIALIZER)
        assert top is not None and top.class_name.endswith(wrapper)
        value, ttl = meta.value_snapshot_unwrapped()
        assert value is not None and value.class_name.endswith("StringSerializerSnapshot")
        assert ttl == (name == "ttl_count")
    if not spec(case)["compression"]:
        _, old_meta = next(iter(sp.keyed_streams(sp.operator(op))))[1].header.state("totals")
        old_user_key = old_meta.user_key_snapshot()
        assert old_user_key is not None
        _, new_meta = stream.header.state("totals")
        new_user_key = new_meta.user_key_snapshot()
        assert new_user_key is not None and new_user_key.raw == old_user_key.raw
    exp = expected(case)
    for b in new.iter_state_batches(op, "totals"):
        for r in b.to_pylist():
            v = string.from_bytes(r["value"])
            assert int(v) in {x for (_, s), m in exp.items() if s == "totals" for x in m.values()}


def test_inline_grows_into_a_file_and_a_file_shrinks_inline(tmp_path: Path) -> None:
    inline_case = next(c for c in CASES if c.name == "kinds-hashmap-p1")
    file_case = next(c for c in CASES if c.name == "kinds-rocksdb-p1-files-mp256")
    string = serializers.StringSerializer()
    env = write_serializer_snapshot(string.snapshot_configuration())

    def grow(arr: pa.Array) -> pa.Array:
        return pa.array([string.to_bytes("x" * 4000) for _ in range(len(arr))], pa.binary())

    def shrink(arr: pa.Array) -> pa.Array:
        return pa.array([string.to_bytes("") for _ in range(len(arr))], pa.binary())

    sp = FlinkSavepoint(inline_case / "savepoint")
    op = state_operator(sp)
    rewrite(inline_case / "savepoint", tmp_path / "grown", {(op, "last"): (env, grow)})
    meta = parse_metadata((tmp_path / "grown" / "_metadata").read_bytes())
    handle = meta.operators[1].subtasks[0].managed_keyed  # type: ignore[index]
    assert handle is not None and isinstance(handle.delegate, RelativeFileHandle)
    assert (tmp_path / "grown" / handle.delegate.relative_path).stat().st_size == handle.delegate.size

    sp = FlinkSavepoint(file_case / "savepoint")
    op = state_operator(sp)
    rewrite(file_case / "savepoint", tmp_path / "shrunk", {(op, "events"): (env, shrink)}, inline_threshold=1 << 20)
    meta = parse_metadata((tmp_path / "shrunk" / "_metadata").read_bytes())
    handle = meta.operators[1].subtasks[0].managed_keyed  # type: ignore[index]
    assert handle is not None and isinstance(handle.delegate, ByteStreamHandle)
    assert [p.name for p in (tmp_path / "shrunk").iterdir()] == ["_metadata"]
    rows = [r for b in FlinkSavepoint(tmp_path / "shrunk").iter_state_batches(op, "events") for r in b.to_pylist()]
    assert rows and all(r["value"] == string.to_bytes("") for r in rows)


def test_failed_migration_leaves_nothing(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name.startswith("kinds"))
    sp = FlinkSavepoint(case / "savepoint")
    op = state_operator(sp)
    env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())

    def boom(arr: pa.Array) -> pa.Array:
        raise RuntimeError("user code failed")

    with pytest.raises(FlinkSavepointError, match="value migration failed: user code failed"):
        rewrite(case / "savepoint", tmp_path / "out", {(op, "count"): (env, boom)})
    with pytest.raises(FlinkSavepointError, match="returned 1 values for"):
        rewrite(case / "savepoint", tmp_path / "out", {(op, "count"): (env, lambda a: a.slice(0, 1))})
    assert list(tmp_path.iterdir()) == []


def test_refusals_name_operator_state_and_class(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name.startswith("kinds"))
    sp = FlinkSavepoint(case / "savepoint")
    op = state_operator(sp)
    env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())
    with pytest.raises(FlinkSavepointError, match="timers state"):
        rewrite(case / "savepoint", tmp_path / "a", {(op, "_timer_state/event_user-timers"): (env, lambda a: a)})
    with pytest.raises(FlinkSavepointError, match="no keyed state named 'nope'"):
        rewrite(case / "savepoint", tmp_path / "b", {(op, "nope"): (env, lambda a: a)})
    with pytest.raises(FlinkSavepointError, match="no operator with uid or uid hash 'nope'"):
        rewrite(case / "savepoint", tmp_path / "c", {("nope", "count"): (env, lambda a: a)})
    (tmp_path / "exists").mkdir()
    with pytest.raises(DestinationError, match="already exists"):
        rewrite(case / "savepoint", tmp_path / "exists", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists"]


def test_rewrite_of_a_copy_in_another_place_reads_the_same(tmp_path: Path) -> None:
    """Relative paths: a savepoint moved elsewhere still reads, and so does its rewrite."""
    case = next(c for c in CASES if any(p.name != "_metadata" for p in (c / "savepoint").iterdir()))
    moved = tmp_path / "moved"
    shutil.copytree(case / "savepoint", moved)
    rewrite(moved, tmp_path / "out", _identity_changes(FlinkSavepoint(moved)))
    assert read_back(case, FlinkSavepoint(tmp_path / "out")) == expected(case)


@pytest.mark.java
def test_real_flink_restores_the_migrated_savepoints(real_flink: ModuleType, tmp_path: Path) -> None:
    """Real Flink 2.3 restores rewritten savepoints (Snappy key groups, 2-byte key-group prefix,
    string keys, null map values, TTL, a Flink 1.20 metadata-V4 source) and reads every value."""
    from format_helpers import hashable

    driver = real_flink
    env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())
    wanted = ("kinds-hashmap-p2-files-snappy", "kinds-rocksdb-p2-mp256-string", "flink120-kinds-rocksdb-p1",
              "kinds-rocksdb-p2-rowkey")
    chosen = [c for c in CASES if c.name in wanted]
    items = []
    for case in chosen:
        sp = FlinkSavepoint(case / "savepoint")
        op = state_operator(sp)
        names = {s for (_, s) in expected(case)} & {"count", "recent", "totals", "ttl_count", "ttl_recent",
                                                     "ttl_totals"}
        dst = tmp_path / case.name
        rewrite(case / "savepoint", dst, {(op, s): (env, _plus_one) for s in names})
        items.append((dst, case / "spec.json"))
    results = driver.restore(items)
    for case, result in zip(chosen, results, strict=True):
        assert result.ok, f"{case.name}: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        for (key, state), value in expected(case).items():
            if state in ("count", "ttl_count"):
                value = value + 1
            elif state in ("recent", "ttl_recent"):
                value = [v + 1 for v in value]
            elif state in ("totals", "ttl_totals"):
                value = {k: None if v is None else v + 1 for k, v in value.items()}
            assert got[(key, state)] == value, (case.name, key, state)


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_streams_rebuilt_from_batches_hold_the_same_entries(case: Path, tmp_path: Path) -> None:
    """Reader batches -> entries_from_batch -> KeyedStreamWriter gives back every entry; for an
    uncompressed RocksDB savepoint (runs in state-id order, keys in byte order) the very same bytes."""
    from statemorph.savepoint.flink import KeyedStreamWriter, StateLayout, StateRun, entries_from_batch, parse_key_group

    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    for st, stream in sp.keyed_streams(op):
        h = stream.header
        first, last = stream.handle.start_key_group, stream.handle.start_key_group + len(stream.handle.offsets)
        groups: dict[int, dict[int, list[tuple[bytes, bytes]]]] = {}
        for sid, meta in enumerate(h.states):
            layout = StateLayout(meta, h.key_serializer, op.max_parallelism, "t")
            for batch in sp.iter_state_batches(op.uid or op.uid_hash, meta.name):
                for kg, key, value in entries_from_batch(layout, batch):
                    if first <= kg < last:
                        groups.setdefault(kg, {}).setdefault(sid, []).append((key, value))
        with KeyedStreamWriter(tmp_path, f"s{st.index}", h, first, last - first) as w:
            for kg in sorted(groups):
                runs = [StateRun(sid, [k for k, _ in sorted(e)], [v for _, v in sorted(e)])
                        for sid, e in sorted(groups[kg].items())]
                w.add_key_group(kg, runs)
            rebuilt = w.finish(inline=False)
        assert rebuilt.offsets.count(0) == stream.handle.offsets.count(0)
        source = _key_groups(sp)[[s.index for s, _ in sp.keyed_streams(op)].index(st.index)]
        data = (tmp_path / f"s{st.index}").read_bytes()
        from statemorph.savepoint.flink import decompress_key_group

        def entries(buf: bytes, n_states: int = len(h.states)) -> set[tuple[int, bytes, bytes]]:
            runs, _ = parse_key_group(buf, n_states, "t", exact_end=True)
            return {(r.state_id, k, v) for r in runs for k, v in zip(r.keys, r.values, strict=True)}

        bounds = [o for o in rebuilt.offsets if o] + [len(data)]
        mine = {}
        for i, (kg, _) in enumerate(source[1]):
            raw = data[bounds[i] : bounds[i + 1]]
            mine[kg] = decompress_key_group(raw, "t") if h.compressed else raw
        assert {kg: entries(b) for kg, b in mine.items()} == {kg: entries(b) for kg, b in source[1]}
        if spec(case)["backend"] == "rocksdb" and not h.compressed:
            assert mine == dict(source[1])


def test_key_group_ranges_migrated_in_parts_assemble_into_the_same_stream(tmp_path: Path) -> None:
    """What a parallel runner does: each task migrates one key-group range and encodes its groups;
    the blocks appended in order give the same stream as the one-pass rewrite."""
    from statemorph.savepoint.flink import KeyedStreamWriter, encode_key_group, migrated_header, migrated_key_groups

    case = next(c for c in CASES if c.name == "kinds-hashmap-p2-files-snappy")
    src = case / "savepoint"
    sp = FlinkSavepoint(src)
    op_id = state_operator(sp)
    op = sp.operator(op_id)
    env = write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration())
    states = ("count", "recent", "totals", "ttl_count")
    rewrite(src, tmp_path / "whole", {(op_id, s): (env, _plus_one) for s in states})
    whole = FlinkSavepoint(tmp_path / "whole")
    for (st, stream), (_, done) in zip(sp.keyed_streams(op), whole.keyed_streams(whole.operator(op_id)), strict=True):
        header = migrated_header(stream.header, dict.fromkeys(states, env))
        first, n = stream.handle.start_key_group, len(stream.handle.offsets)
        counts: dict[str, int] = {}
        with KeyedStreamWriter(tmp_path, f"parts-{st.index}", header, first, n) as w:
            for lo in range(first, first + n, 10):
                migrated = migrated_key_groups(stream, dict.fromkeys(states, _plus_one), op.max_parallelism,
                                               key_groups=range(lo, min(lo + 10, first + n)), batch_values=5,
                                               counts=counts)
                task = [(kg, encode_key_group(runs, header.compressed)) for kg, runs in migrated]
                for kg, data in task:
                    w.add_encoded_key_group(kg, data)
            handle = w.finish(inline=False)
        assert handle.offsets == done.handle.offsets
        assert (tmp_path / f"parts-{st.index}").read_bytes() == done.source.read_at(0, done.source.size, "all")
        assert sum(counts.values()) > 0


def test_missing_carried_file_and_missing_parent_are_typed(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "kinds-hashmap-p2-files-snappy")
    moved = tmp_path / "sp"
    shutil.copytree(case / "savepoint", moved)
    victim = next(p for p in moved.iterdir() if p.name != "_metadata")
    victim.unlink()
    with pytest.raises(FlinkSavepointError, match="is missing"):
        rewrite(moved, tmp_path / "out", {})
    with pytest.raises(DestinationError, match="parent directory does not exist"):
        rewrite(case / "savepoint", tmp_path / "no" / "such" / "out", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp"]
