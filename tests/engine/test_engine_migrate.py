"""The local engine end to end: bootstrap in bulk, migrate through the kernels, read back decoded."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.cli.demo import NEW_TYPE, OLD_TYPE, events_table
from statemorph.engine import (
    check_savepoint,
    migrate_savepoint,
    plan_rewrite,
    read_state,
    read_state_table,
    write_state,
)
from statemorph.migration import migrate_bytes
from statemorph.savepoint import read_metadata, verify_savepoint
from statemorph.savepoint import read_state_table as raw_state_table
from statemorph.state import HashMapStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

N = 3000


@pytest.fixture(scope="module")
def events_sp(tmp_path_factory):
    path = tmp_path_factory.mktemp("events") / "v1"
    write_state(path, events_table(N), name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD_TYPE), max_parallelism=128)
    return str(path)


def test_bootstrap_matches_the_reference_backend(events_sp, tmp_path):
    """Bulk-built savepoint bytes equal what the heap backend writes entry by entry."""
    table = events_table(200)
    write_state(tmp_path / "bulk", table, name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD_TYPE), max_parallelism=128)
    b = HashMapStateBackend(key_serializer=S.LongSerializer(), max_parallelism=128)
    st = b.get_state(ValueStateDescriptor("events", S.RowDataSerializer(OLD_TYPE)))
    for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
        b.set_current_key(k)
        st.update((v["eventId"], tuple(v["metadata"].values())))
    b.savepoint(tmp_path / "heap")

    def rows(p):
        t = raw_state_table(p, "events")
        return sorted(zip(*(t.column(c).to_pylist() for c in ("key_group", "key", "namespace", "value")),
                          strict=True))

    assert rows(tmp_path / "bulk") == rows(tmp_path / "heap")


def test_migrate_events_bytes_equal_the_reference(events_sp, tmp_path):
    new = S.RowDataSerializer(NEW_TYPE)
    report = migrate_savepoint(events_sp, tmp_path / "v2", [ValueStateDescriptor("events", new)], batch_size=1000)
    assert report.rows == {"events": N}
    assert f"{N:,} entries migrated" in report.summary()
    verify_savepoint(tmp_path / "v2")
    old_t, new_t = raw_state_table(events_sp, "events"), raw_state_table(tmp_path / "v2", "events")
    assert old_t.column("key").equals(new_t.column("key"))
    assert old_t.column("key_group").equals(new_t.column("key_group"))
    snap = read_metadata(events_sp).states["events"].snapshot("value_serializer")
    expected = [migrate_bytes(snap, new, v) for v in old_t.column("value").to_pylist()]
    assert new_t.column("value").to_pylist() == expected
    meta = read_metadata(tmp_path / "v2").states["events"]
    assert meta.snapshot("value_serializer").restore_serializer() == new


def test_plan_agrees_with_check_savepoint(events_sp):
    for t, status in ((OLD_TYPE, 0), (NEW_TYPE, 1), (OLD_TYPE.replace("userId INT", "userId STRING"), 3)):
        descs = [ValueStateDescriptor("events", S.RowDataSerializer(t))]
        plan = plan_rewrite(events_sp, read_metadata(events_sp), descs)
        assert plan.exit_status == check_savepoint(events_sp, descs).exit_status == status


def test_read_state_decodes_and_flattens(events_sp):
    table = read_state_table(events_sp, "events")
    assert table.column_names == ["key", "eventId", "metadata"]
    src = events_table(N)
    got = sorted(zip(table.column("key").to_pylist(), table.column("metadata").to_pylist(), strict=True))
    want = sorted(zip(src.column("key").to_pylist(), [v["metadata"] for v in src.column("value").to_pylist()],
                      strict=True))
    assert got == want
    whole = next(read_state(events_sp, "events", flatten=False))
    assert whole.schema.names == ["key", "value"] and pa.types.is_struct(whole.schema.field("value").type)


ROW_V1 = "ROW<name STRING, score INT>"
ROW_V2 = "ROW<score INT, name STRING, tag STRING>"


def test_migrate_list_and_map_state(tmp_path):
    keys = pa.array([1, 1, 2, 3], pa.int64())
    rows = pa.array([{"name": "a", "score": 1}, {"name": "b", "score": 2}, {"name": None, "score": 3},
                     {"name": "d", "score": None}], pa.struct([("name", pa.string()), ("score", pa.int32())]))
    write_state(tmp_path / "l1", pa.table({"key": keys, "index": pa.array([0, 1, 0, 0], pa.int32()), "value": rows}),
                name="items", kind="list", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(ROW_V1))
    write_state(tmp_path / "m1", pa.table({"key": keys, "user_key": pa.array(["x", "y", "x", "z"]),
                                           "value": pa.array(rows.to_pylist()[:3] + [None], rows.type)}),
                name="by_tag", kind="map", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(ROW_V1), user_key_serializer=S.StringSerializer())
    new = S.RowDataSerializer(ROW_V2)
    migrate_savepoint(tmp_path / "l1", tmp_path / "l2", [ListStateDescriptor("items", new)])
    migrate_savepoint(tmp_path / "m1", tmp_path / "m2", [MapStateDescriptor("by_tag", S.StringSerializer(), new)])
    lst = read_state_table(tmp_path / "l2", "items")
    assert lst.column_names == ["key", "index", "score", "name", "tag"]
    assert sorted(zip(*(lst.column(c).to_pylist() for c in lst.column_names), strict=True)) == [
        (1, 0, 1, "a", None), (1, 1, 2, "b", None), (2, 0, 3, None, None), (3, 0, None, "d", None)]
    mp = read_state_table(tmp_path / "m2", "by_tag", flatten=False)
    got = sorted(zip(mp.column("key").to_pylist(), mp.column("user_key").to_pylist(), mp.column("value").to_pylist(),
                     strict=True), key=lambda r: (r[0], r[1]))
    assert got == [(1, "x", {"score": 1, "name": "a", "tag": None}), (1, "y", {"score": 2, "name": "b", "tag": None}),
                   (2, "x", {"score": 3, "name": None, "tag": None}), (3, "z", None)]
    # the restored backend reads the migrated list in order
    b = HashMapStateBackend.restore(tmp_path / "l2")
    items = b.get_state(ListStateDescriptor("items", new))
    b.set_current_key(1)
    assert [tuple(r) for r in items.get()] == [(1, "a", None), (2, "b", None)]


def _with_corrupt_value(src: str, dst, bad_row: int) -> str:
    """A copy of ``src`` (a valid savepoint) whose value at ``bad_row`` is truncated garbage."""
    from statemorph.savepoint import SavepointWriter

    md = read_metadata(src)
    st = md.states["events"]
    t = raw_state_table(src, "events")
    values = t.column("value").to_pylist()
    values[bad_row] = values[bad_row][:9]
    t = t.set_column(t.schema.get_field_index("value"), "value", pa.array(values, pa.binary()))
    with SavepointWriter(dst, max_parallelism=md.max_parallelism, key_serializer=md.key_serializer) as w:
        w.write_state("events", "value", t, value_serializer=st.value_serializer)
    return str(dst)


def test_unreadable_value_stops_or_is_skipped(events_sp, tmp_path):
    from statemorph.errors import StateFormatError

    bad = _with_corrupt_value(events_sp, tmp_path / "bad", 17)
    descs = [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))]
    with pytest.raises(StateFormatError, match="row 17"):
        migrate_savepoint(bad, tmp_path / "out", descs)
    assert not (tmp_path / "out").exists()
    report = migrate_savepoint(bad, tmp_path / "out2", descs, on_error="skip")
    assert report.skipped == {"events": 1} and report.rows == {"events": N - 1}
    assert "1 unreadable entries dropped" in report.summary()
    good_keys = raw_state_table(events_sp, "events").column("key").to_pylist()
    assert raw_state_table(tmp_path / "out2", "events").column("key").to_pylist() == \
        good_keys[:17] + good_keys[18:]


def test_summary_states_a_rate_only_for_a_run_that_measures_one(events_sp, tmp_path):
    """A run of a few thousand entries in a fraction of a second is all fixed costs: its summary
    gives the count and the time, not a rate ("77 migrated entries/s"); a run of at least a second
    and 10,000 entries states its rate. ``to_dict`` always carries the number."""
    from dataclasses import replace

    from statemorph.engine.local import RATE_MIN_ENTRIES, RATE_MIN_SECONDS

    new = [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))]
    report = migrate_savepoint(events_sp, tmp_path / "v2", new)
    assert N < RATE_MIN_ENTRIES
    for seconds in (0.04, RATE_MIN_SECONDS * 5):
        text = replace(report, seconds=seconds).summary()
        assert f"{N:,} entries migrated" in text and f"in {seconds:.1f}s" in text
        assert "entries/s" not in text
    assert replace(report, seconds=0.04).to_dict()["migrated_entries_per_second"] == round(N / 0.04, 1)
    big = replace(report, seconds=2.0)
    big.plan = replace(report.plan, states=[replace(s, rows=RATE_MIN_ENTRIES * 4) for s in report.plan.states])
    assert big.migrated == RATE_MIN_ENTRIES * 4
    assert f", {RATE_MIN_ENTRIES * 2:,} migrated entries/s" in big.summary()


def test_machine_code_is_compiled_before_the_worker_starts(events_sp, tmp_path, monkeypatch):
    """The plan's machine code is built on the caller's thread before the pipeline starts, not
    inside the worker's first batch."""
    import threading

    from statemorph.bulk import tiers
    from statemorph.kernels import jit

    if not jit.enabled():
        pytest.skip("no llvmlite")
    where = []
    real = jit._compile.__wrapped__

    def compile_(*args):
        where.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(jit, "_compile", compile_)  # no cache: every lookup is seen
    monkeypatch.setattr(tiers, "MACHINE_CODE_MIN", 0)
    new = S.RowDataSerializer(NEW_TYPE)
    migrate_savepoint(events_sp, tmp_path / "v2", [ValueStateDescriptor("events", new)], batch_size=1000)
    assert where and where[0] is threading.current_thread()
