"""Every state a real Flink job keeps: a Kryo-serialized state never blocks the others.

The ``opaque-*`` cases were taken by real Flink (ci/flink/src/savepoints/OpaqueJobs.java): the
Events row state, ``session`` (a class with no no-arg constructor and a ``java.util.UUID``, so
Kryo), ``visits`` (a ``ListState`` of that class: its elements cannot be told apart without Kryo,
so each key's list is carried whole, ``value_bytes``), ``pair`` (``Tuple2<String, Long>``) and
``lists`` (``MapState<String, List<Long>>``, whose values Flink 2 wraps in ``NullableSerializer``s).
statemorph inspects every state (the Kryo ones as ``RAW('<class>')``); converts, rewrites,
rescales and migrates the savepoint carrying the Kryo states byte for byte; refuses only to decode
or migrate them (exit 7, unsupported state); and the schema file ``statemorph schema`` writes for
any committed savepoint is a no-op for ``check``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import (
    EVOLVED_EVENTS,
    EVOLVED_EVENTS_FIELDS,
    SAVEPOINTS,
    case_spec,
    every_committed_case,
    reshape,
)

from statemorph import serializers as S
from statemorph.cli.main import main
from statemorph.engine.flink import read_flink_state_table
from statemorph.engine.rescale import rescale_flink_savepoint
from statemorph.errors import ExitCode, UnsupportedStateError
from statemorph.schema_file import datastream_serializer, parse_schema, serializer_for
from statemorph.types import parse_type

CASES = [SAVEPOINTS / "opaque-hashmap-p1", SAVEPOINTS / "opaque-rocksdb-p2"]
IDS = [c.name for c in CASES]
#: The same job keyed by a Kryo key (ci/flink KryoKey: an int and a string, no no-arg constructor).
KEY_CASES = [SAVEPOINTS / "opaque-kryokey-hashmap-p2", SAVEPOINTS / "opaque-kryokey-rocksdb-p2"]
KEY_IDS = [c.name for c in KEY_CASES]
RESTORED = CASES + KEY_CASES
SESSION = "RAW('savepoints.OpaqueJobs$Session')"
ALL = every_committed_case()


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def _states(case: Path) -> dict[str, dict[str, Any]]:
    status, out, _ = _cli("inspect", "--json", str(case / "savepoint"))
    assert status == 0
    return {s["name"]: s for op in json.loads(out)["operators"] if op["uid"] == "opaque" for s in op["states"]}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_describes_every_state_the_kryo_one_by_its_class(case: Path) -> None:
    states = _states(case)
    assert states["session"]["value_type"] == SESSION  # before: "KryoSerializerSnapshot"
    assert states["pair"]["value_type"] == "ROW<`f0` STRING, `f1` BIGINT>"  # before: "TupleSerializer"
    assert states["lists"]["value_type"] == "ARRAY<BIGINT>" and states["lists"]["user_key_type"] == "STRING"
    assert states["visits"]["value_type"] == SESSION and states["visits"]["kind"] == "list"
    assert states["session"]["entries"] == 10


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reading_the_kryo_state_decoded_is_unsupported_and_its_bytes_still_read(case: Path) -> None:
    with pytest.raises(UnsupportedStateError, match=r"unsupported state: .*RAW\('savepoints.OpaqueJobs\$Session'\)"):
        read_flink_state_table(case / "savepoint", "opaque", "session")
    raw = read_flink_state_table(case / "savepoint", "opaque", "session", decode=False)
    assert raw.num_rows == 10 and raw.column("value").null_count == 0
    whole = read_flink_state_table(case / "savepoint", "opaque", "visits", decode=False)
    assert whole.schema.names == ["key_group", "key", "namespace", "value_bytes"] and whole.num_rows == 10
    assert all(v.count(b",") >= 2 for v in whole.column("value_bytes").to_pylist())  # 3 elements joined by ','
    with pytest.raises(UnsupportedStateError):
        read_flink_state_table(case / "savepoint", "opaque", "visits")
    pair = read_flink_state_table(case / "savepoint", "opaque", "pair").to_pylist()
    assert sorted(r["value"]["f1"] for r in pair) == list(range(20, 30))


def test_an_opaque_state_read_from_the_parquet_form_is_an_unsupported_state(tmp_path: Path) -> None:
    """The Kryo state, converted to the Parquet form: reading it decoded is an unsupported state
    (exit 7) naming its type, as from the Flink savepoint, not an unknown snapshot (before:
    UnknownSnapshotError, exit 5, from the first batch); its neighbours still read. (Moved here from
    the SQL join tests, whose sorted map is no longer opaque.)"""
    from statemorph.engine.local import read_state_table

    assert _cli("convert", str(CASES[0] / "savepoint"), "--out", str(tmp_path / "pq"), "-q")[0] == 0
    with pytest.raises(UnsupportedStateError, match=r"unsupported state: .*OpaqueJobs\$Session") as e:
        read_state_table(tmp_path / "pq", "opaque/session")
    assert e.value.exit_code == ExitCode.UNSUPPORTED
    assert read_state_table(tmp_path / "pq", "opaque/pair").num_rows == 10


@pytest.mark.parametrize("case", KEY_CASES, ids=KEY_IDS)
def test_a_kryo_key_keeps_its_map_entries_whole_and_splits_every_other_state(case: Path, tmp_path: Path) -> None:
    """Under a Kryo key a map state's user key follows key and namespace with no length, so its
    entries are kept whole (``key_bytes``: key, namespace and user key after the key-group prefix;
    ``value_bytes``); every other state still splits (the void namespace is one byte: the key is
    what precedes it). The layout holds: each ``key_bytes`` is the key the value states read, the
    void namespace, then the user key's bytes. Converted to the Parquet form and back, the entries
    are the same; decoding is refused as unsupported."""
    sp = case / "savepoint"
    assert _states(case)["lists"]["key_type"] == "RAW('savepoints.KryoKey')"
    keys = {r["key_group"]: r["key"] for r in read_flink_state_table(sp, "opaque", "session", decode=False).to_pylist()}
    lists = read_flink_state_table(sp, "opaque", "lists", decode=False)
    assert lists.schema.names == ["key_group", "key_bytes", "value_bytes"] and lists.num_rows == case_spec(case)["keys"]
    for row in lists.to_pylist():
        key = keys[row["key_group"]]
        assert row["key_bytes"][:len(key) + 1] == key + b"\x00", row
        assert S.StringSerializer().from_bytes(row["key_bytes"][len(key) + 1:]) in ("r0", "r1")
    with pytest.raises(UnsupportedStateError, match="unsupported state"):
        read_flink_state_table(sp, "opaque", "lists")
    for args in (("convert", "--out", str(tmp_path / "pq"), str(sp)),
                 ("convert", "--out", str(tmp_path / "back"), str(tmp_path / "pq"))):
        status, _, err = _cli(*args)
        assert status == 0, (args, err)
    meta = json.loads((tmp_path / "pq" / "_metadata.json").read_text(encoding="utf-8"))
    assert next(s for s in meta["states"] if s["name"] == "opaque/lists").get("key_bytes") is True
    for state in ("lists", "session", "visits", "events"):
        before, after = (read_flink_state_table(p, "opaque", state, decode=False).to_pylist()
                         for p in (sp, tmp_path / "back"))
        assert sorted(before, key=str) == sorted(after, key=str), state
    with pytest.raises(UnsupportedStateError, match="key groups cannot be computed"):
        rescale_flink_savepoint(str(sp), tmp_path / "rescaled", "opaque", max_parallelism=256)


@pytest.mark.parametrize("case", KEY_CASES, ids=KEY_IDS)
def test_a_kryo_key_before_a_variable_length_namespace_splits_and_converts_byte_for_byte(
        case: Path, tmp_path: Path) -> None:
    """``labels`` (a ``ValueState<Long>`` in ``String`` namespaces, under the Kryo key): Flink
    writes ``key ‖ len(key) ‖ namespace ‖ len(namespace)`` and finds the key's end by reading it
    with Kryo; statemorph finds the one place where the length bytes and the namespace read fit
    (before: "unsupported state", and ``convert`` refused the whole savepoint). Each row's key is
    the key the other states read, its namespace a label the job wrote there with its count;
    converted to the Parquet form and back, the rows are the same; decoding stays refused."""
    sp = case / "savepoint"
    keys = {r["key"] for r in read_flink_state_table(sp, "opaque", "session", decode=False).to_pylist()}
    rows = read_flink_state_table(sp, "opaque", "labels", decode=False).to_pylist()
    assert {r["key"] for r in rows} == keys
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    labels = [e["value"] for e in expected["entries"] if e["state"] == "labels"]
    assert len(labels) == len(keys)
    assert sorted((S.StringSerializer().from_bytes(r["namespace"]), S.LongSerializer().from_bytes(r["value"]))
                  for r in rows) == sorted((ns, n) for v in labels for ns, n in v.items())
    for args in (("convert", "--out", str(tmp_path / "pq"), str(sp)),
                 ("convert", "--out", str(tmp_path / "back"), str(tmp_path / "pq"))):
        status, _, err = _cli(*args)
        assert status == 0, (args, err)
    after = read_flink_state_table(tmp_path / "back", "opaque", "labels", decode=False).to_pylist()
    assert sorted(after, key=str) == sorted(rows, key=str)
    with pytest.raises(UnsupportedStateError, match="unsupported state"):
        read_flink_state_table(sp, "opaque", "labels")


def test_a_kryo_key_that_splits_two_ways_is_refused_naming_the_state() -> None:
    """Bytes where the key could end at two places (each followed by fitting length bytes and a
    namespace that reads) are not guessed at: unsupported state, naming it."""
    from statemorph.savepoint.flink import FlinkSavepoint
    from statemorph.savepoint.flink.layout import StateLayout

    sp = FlinkSavepoint(KEY_CASES[0] / "savepoint")
    op = sp.operator("opaque")
    _, stream = next(iter(sp.keyed_streams(op)))
    _, meta = stream.header.state("labels")
    layout = StateLayout(meta, stream.header.key_serializer, op.max_parallelism, "test")
    ns = S.StringSerializer().to_bytes("a")  # 02 61: a namespace of 2 bytes
    one = b"\x05" + b"\x03" + b"\x01" + ns + b"\x02"  # key 03, its length 01, the namespace, its length 02
    assert layout.split_key(one).key == b"\x03" and layout.split_key(one).namespace == ns
    # the namespace is last, so its length byte ends the key: two fits need two lengths ending in
    # the same byte. Here: key 07, a namespace of 513 bytes, its length 01 02; and also a key of
    # 512 bytes (its length 00 02 inside that namespace), a namespace of 2 bytes (02 01), length 02
    wide = S.StringSerializer().to_bytes("x" * 508 + "\x00\x02\x02")
    assert len(wide) == 513
    two = b"\x05" + b"\x07" + b"\x01" + wide + b"\x01\x02"
    with pytest.raises(UnsupportedStateError, match="state 'labels': unsupported state: .* splits from its namespace"):
        layout.split_key(two)


@pytest.mark.parametrize(("table", "fragment"), [
    ('type = "ROW<id STRING>"', "unsupported state"),
    ('type = "RAW(\'com.acme.Other\')"\nserializer = "opaque"', "cannot migrate"),
])
def test_migrating_the_kryo_state_is_refused_as_unsupported(tmp_path: Path, table: str, fragment: str) -> None:
    schema = tmp_path / "s.toml"
    schema.write_text(f"[operators.opaque.states.session]\n{table}\n", encoding="utf-8")
    status, _, err = _cli("check", "--schema", str(schema), str(CASES[0] / "savepoint"))
    assert status == ExitCode.UNSUPPORTED == 7, err
    assert fragment in err


def test_an_unknown_key_serializer_is_carried_its_map_entries_whole(tmp_path: Path) -> None:
    """A key serializer statemorph does not know (here an int key's snapshot renamed to a user
    class): every state converts and converts back to the same entries; the map states' user keys
    cannot be told apart from such a key, so their entries are whole (``key_bytes``); reading
    them decoded is unsupported (7), not a damaged savepoint (4), and so is a rescale."""
    import shutil

    sp = tmp_path / "sp"
    shutil.copytree(SAVEPOINTS / "kinds-hashmap-p1" / "savepoint", sp)  # keyed state inline in _metadata
    old = b"org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
    new = b"com.example.keys.OrderKeySerializer$OrderKeySerializerSnapshot".ljust(len(old), b"X")
    (sp / "_metadata").write_bytes((sp / "_metadata").read_bytes().replace(old, new))
    for args in (("convert", "--out", str(tmp_path / "pq"), str(sp)),
                 ("convert", "--out", str(tmp_path / "back"), str(tmp_path / "pq"))):
        status, _, err = _cli(*args)
        assert status == 0, (args, err)
    uid = case_spec(SAVEPOINTS / "kinds-hashmap-p1")["uid"]
    for state in ("totals", "ttl_totals", "events", "recent", "_timer_state/event_user-timers"):
        before, after = (read_flink_state_table(p, uid, state, decode=False) for p in (sp, tmp_path / "back"))
        assert ("key_bytes" in before.schema.names) == state.endswith("totals"), state
        assert sorted(before.to_pylist(), key=str) == sorted(after.to_pylist(), key=str), state
    with pytest.raises(UnsupportedStateError, match="OrderKeySerializer"):
        read_flink_state_table(sp, uid, "totals")
    with pytest.raises(UnsupportedStateError, match="OrderKeySerializer"):
        rescale_flink_savepoint(str(sp), tmp_path / "rescaled", uid, max_parallelism=256)


def test_an_unknown_key_before_a_fixed_namespace_and_user_key_still_splits(tmp_path: Path) -> None:
    """Under an opaque key a map state whose namespace and user key both have a fixed length (a
    ``Long`` user key in the void namespace) still splits: the key is what precedes them."""
    import pyarrow as pa

    from statemorph.engine.bootstrap import StateData, write_flink_savepoint

    sp = tmp_path / "sp"
    data = pa.table({"key": [1, 2, 2], "user_key": [10, 20, 30], "value": ["a", "b", None]})
    write_flink_savepoint(sp, operator="op", key_serializer=S.IntSerializer(), states={
        "m": StateData(data, S.StringSerializer(), kind="map", user_key_serializer=S.LongSerializer())})
    old = b"org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
    new = b"com.example.keys.OrderKeySerializer$OrderKeySerializerSnapshot".ljust(len(old), b"X")
    (sp / "_metadata").write_bytes((sp / "_metadata").read_bytes().replace(old, new))
    rows = read_flink_state_table(sp, "op", "m", decode=False)
    assert rows.schema.names == ["key_group", "key", "namespace", "user_key", "value"]
    want = [(S.IntSerializer().to_bytes(k), b"\x00", S.LongSerializer().to_bytes(u))
            for k, u in ((1, 10), (2, 20), (2, 30))]
    assert sorted((r["key"], r["namespace"], r["user_key"]) for r in rows.to_pylist()) == sorted(want)


@pytest.mark.parametrize("case", ALL, ids=[c.name for c in ALL])
def test_the_schema_file_of_a_savepoint_is_a_no_op(case: Path, tmp_path: Path) -> None:
    status, text, _ = _cli("schema", str(case / "savepoint"))
    assert status == 0
    schema = parse_schema(text, "current.toml")
    assert sum(len(states) for states in schema.operators.values()) >= 1
    # a session window's merging-window-set (Tuple2 of TimeWindow) is the one state whose type has
    # no schema-file spelling yet: it is listed as a comment and carried unchanged
    unwritten = [line for line in text.splitlines() if line.startswith("# [operators.")]
    assert unwritten == (["# [operators.session.states.merging-window-set]"]
                         if case_spec(case).get("window_job") else [])
    path = tmp_path / "current.toml"
    path.write_text(text, encoding="utf-8")
    status, out, err = _cli("check", "--json", "--schema", str(path), str(case / "savepoint"))
    assert status == 0, out + err
    assert json.loads(out)["result"] == "as_is"


def test_the_schema_file_names_kind_family_and_type_of_each_state() -> None:
    status, text, _ = _cli("schema", str(CASES[0] / "savepoint"))
    assert status == 0
    states = parse_schema(text).operators["opaque"]
    assert (states["session"].serializer, str(states["session"].type)) == ("opaque", SESSION)
    assert (states["pair"].serializer, states["lists"].kind, states["events"].serializer) == ("tuple", "map", "rowdata")


def test_nullable_wrappers_flink_records_are_kept_by_the_printed_type() -> None:
    """``TypeHint<List<Long>>``: Flink 2 records Nullable(List(Nullable(Long))); ``ARRAY<BIGINT>``
    (what inspect prints) builds exactly that against the recorded serializer, and without one
    (a new state) the plain DataStream ListSerializer as before."""
    recorded = S.NullableSerializer(S.ListSerializer(S.NullableSerializer(S.LongSerializer())))
    assert datastream_serializer(parse_type("ARRAY<BIGINT>"), like=recorded) == recorded
    assert datastream_serializer(parse_type("ARRAY<BIGINT>")) == S.ListSerializer(S.LongSerializer())
    assert datastream_serializer(parse_type("ARRAY<BIGINT NOT NULL> NOT NULL"), like=recorded) == \
        S.ListSerializer(S.LongSerializer())
    tuple_state = parse_schema('[states.p]\ntype = "ROW<f0 STRING, f1 BIGINT>"\nserializer = "tuple"\n').states["p"]
    assert serializer_for(tuple_state) == S.TupleSerializer([S.StringSerializer(), S.LongSerializer()])


# -- real Flink restores what statemorph wrote ---------------------------------------------------

def _write(case: Path, root: Path) -> dict[str, Path]:
    """The savepoints statemorph writes from ``case``: converted there and back, rewritten with a
    schema naming no state, migrated to the evolved Events type, and rescaled (max parallelism 256,
    parallelism 1: every key's entries re-assigned, the opaque ones carried; not under a Kryo key)."""
    src = str(case / "savepoint")
    out = {k: root / f"{case.name}-{k}" for k in ("parquet", "converted", "plain", "migrated", "rescaled",
                                                  "parquet-migrated", "migrated-via-parquet")}
    if case not in KEY_CASES:  # a Kryo key has no key group statemorph can compute
        rescale_flink_savepoint(src, out["rescaled"], "opaque", max_parallelism=256, parallelism=1)
    empty, evolved, in_parquet = root / "empty.toml", root / "evolved.toml", root / "evolved-parquet.toml"
    empty.write_text("", encoding="utf-8")
    evolved.write_text(f'[operators.opaque.states.events]\ntype = "{EVOLVED_EVENTS}"\n', encoding="utf-8")
    in_parquet.write_text(f'[states."opaque/events"]\ntype = "{EVOLVED_EVENTS}"\n', encoding="utf-8")
    for args in (("convert", "--out", str(out["parquet"]), src),
                 ("convert", "--out", str(out["converted"]), str(out["parquet"])),
                 ("migrate", "--schema", str(empty), "--out", str(out["plain"]), src),
                 ("migrate", "--schema", str(evolved), "--out", str(out["migrated"]), src),
                 ("migrate", "--schema", str(in_parquet), "--out", str(out["parquet-migrated"]), str(out["parquet"])),
                 ("convert", "--out", str(out["migrated-via-parquet"]), str(out["parquet-migrated"]))):
        status, _, err = _cli(*args)
        assert status == 0, (args, err)
    whole = read_flink_state_table(case / "savepoint", "opaque", "visits", decode=False)
    status, text, _ = _cli("inspect", "--json", str(out["parquet"]))
    assert status == 0
    parquet = {s["name"]: s for s in json.loads(text)["states"]}
    assert parquet["opaque/visits"]["value_type"] == SESSION and parquet["opaque/visits"]["entries"] == whole.num_rows
    return out


@pytest.fixture(scope="module")
def restored(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    root = tmp_path_factory.mktemp("opaque")
    items, keys, evolved_items, evolved_keys = [], [], [], []
    for case in RESTORED:
        written = _write(case, root)
        for kind in ("converted", "plain"):
            items.append((written[kind], case / "spec.json"))
            keys.append((case.name, kind))
        for kind in ("migrated", "migrated-via-parquet"):
            evolved_items.append((written[kind], case / "spec.json"))
            evolved_keys.append((case.name, kind))
        # the Kryo states (and, under a Kryo key, the whole map entries) are carried byte for byte by every writer
        rewritten = ("converted", "plain", "migrated", "migrated-via-parquet")
        for state in ("session", "visits", "lists") if case in KEY_CASES else ("session", "visits"):
            before = read_flink_state_table(case / "savepoint", "opaque", state, decode=False).drop(["key_group"])
            for kind in rewritten if case in KEY_CASES else (*rewritten, "rescaled"):
                after = read_flink_state_table(written[kind], "opaque", state, decode=False).drop(["key_group"])
                assert sorted(after.to_pylist(), key=str) == sorted(before.to_pylist(), key=str), (case.name, kind)
        if case in KEY_CASES:
            continue
        rescaled_spec = root / f"{case.name}-rescaled.json"
        rescaled_spec.write_text(json.dumps({**json.loads((case / "spec.json").read_text(encoding="utf-8")),
                                             "max_parallelism": 256, "parallelism": 1}), encoding="utf-8")
        items.append((written["rescaled"], rescaled_spec))
        keys.append((case.name, "rescaled"))
    results = real_flink.restore(items)
    results += real_flink.restore(evolved_items, EVOLVED_EVENTS)
    return dict(zip(keys + evolved_keys, results, strict=True))


WRITTEN = [(c, k) for c in RESTORED for k in ("converted", "plain", "rescaled") if k != "rescaled" or c in CASES]


@pytest.mark.java
@pytest.mark.parametrize(("case", "kind"), WRITTEN, ids=[f"{c.name}-{k}" for c, k in WRITTEN])
def test_flink_restores_the_converted_rewritten_and_rescaled_savepoint(
    case: Path, kind: str, restored: dict[tuple[str, str], Any], real_flink: ModuleType
) -> None:
    result = restored[(case.name, kind)]
    assert result.ok, f"{result.exception}: {result.message}"
    assert result.entries == real_flink.expected_entries(case)


@pytest.mark.java
@pytest.mark.parametrize("kind", ["migrated", "migrated-via-parquet"])
@pytest.mark.parametrize("case", RESTORED, ids=[c.name for c in RESTORED])
def test_flink_restores_the_events_migration_with_the_kryo_states_carried(
    case: Path, kind: str, restored: dict[tuple[str, str], Any], real_flink: ModuleType
) -> None:
    """Migrated in place, and in the Parquet form (converted, migrated there, converted back)."""
    result = restored[(case.name, kind)]
    assert result.ok, f"{result.exception}: {result.message}"
    want = [{**e, "value": reshape(e["value"], EVOLVED_EVENTS_FIELDS)} if e["state"] == "events" else e
            for e in real_flink.expected_entries(case)]
    assert result.entries == want
    assert {e["state"] for e in want} == {"events", "session", "visits", "pair", "lists"} | (
        {"labels"} if case in KEY_CASES else set())
