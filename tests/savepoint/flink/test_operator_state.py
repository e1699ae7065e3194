"""Operator state (list, union list and broadcast state) of real Flink savepoints: listed by
``inspect``, read as tables, parsed and written back byte for byte, refused with a typed error when
hostile, and carried by every rewrite so that real Flink restores the same state.

The savepoints are ci/flink/src/savepoints/OperatorJobs.java's (tests/data/flink_operator_state):
``rules-op`` keeps the broadcast state ``rules`` (String -> events row), ``list-op`` the list state
``buffer`` (Long) and the union list state ``offsets`` (String), and has no keyed state at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from statemorph.engine import convert_savepoint, migrate_flink_savepoint, read_flink_operator_state
from statemorph.engine.flink import inspect_flink_savepoint
from statemorph.errors import FlinkSavepointError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.handles import OperatorStateInfo, OperatorStreamHandle
from statemorph.savepoint.flink.operator_state import (
    OperatorStream,
    operator_streams,
    parse_operator_header,
    write_operator_header,
    write_operator_stream,
)

ROOT = Path(__file__).resolve().parents[2] / "data" / "flink_operator_state"
CASES = sorted(p.parent for p in ROOT.glob("*/spec.json"))
CASE_IDS = [c.name for c in CASES]


def expected_entries(case: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((case / "expected.json").read_text(encoding="utf-8"))["entries"]
    return entries


def by_state(entries: list[dict[str, Any]], state: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["state"] == state]


def as_tuple(row: dict[str, Any] | None) -> Any:
    """A rendered or decoded row compared by position (the top-level field names of a RowData
    snapshot are not recorded, so the decoded row's are f0, f1)."""
    if row is None:
        return None
    return tuple(as_tuple(v) if isinstance(v, dict) else v for v in row.values())


def operator_doc(doc: dict[str, Any], uid: str) -> dict[str, Any]:
    return next(op for op in doc["operators"] if op["uid"] == uid)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_inspect_json_lists_every_operator_state(case: Path) -> None:
    doc = inspect_flink_savepoint(case / "savepoint")
    states = {s["name"]: s for s in operator_doc(doc, "list-op")["operator_states"]}
    assert operator_doc(doc, "list-op")["states"] == []  # nothing but operator state
    assert states["buffer"]["kind"] == "operator-list" and states["buffer"]["mode"] == "SPLIT_DISTRIBUTE"
    assert states["buffer"]["value_type"] == "BIGINT" and states["buffer"]["key_type"] is None
    assert states["buffer"]["entries"] == 24 and len(states["buffer"]["entries_per_subtask"]) == 2
    assert states["offsets"]["kind"] == "union-list" and states["offsets"]["mode"] == "UNION"
    assert states["offsets"]["value_type"] == "STRING" and states["offsets"]["entries_per_subtask"] == [1, 1]
    (rules,) = operator_doc(doc, "rules-op")["operator_states"]
    assert rules["name"] == "rules" and rules["kind"] == "broadcast-map" and rules["mode"] == "BROADCAST"
    assert rules["key_type"] == "STRING" and rules["value_type"].startswith("ROW<`f0` BIGINT, `f1` ROW<`userId` INT")
    assert rules["value_snapshot"].endswith("RowDataSerializer$RowDataSerializerSnapshot")
    assert rules["entries_per_subtask"] == [12, 12]
    (source,) = operator_doc(doc, "records")["operator_states"]
    assert (source["name"], source["kind"], source["entries_per_subtask"]) == \
        ("SourceReaderState", "operator-list", [0])


def test_inspect_cli_text_and_json() -> None:
    sp = str(CASES[0] / "savepoint")
    text = subprocess.run([sys.executable, "-m", "statemorph", "inspect", sp], capture_output=True, text=True,
                          check=True).stdout
    assert "operator state 'rules': broadcast-map state (BROADCAST), entries per subtask [12, 12]" in text
    assert "operator state 'buffer': operator-list state (SPLIT_DISTRIBUTE), entries per subtask [12, 12]" in text
    assert "operator state 'offsets': union-list state (UNION), entries per subtask [1, 1]" in text
    doc = json.loads(subprocess.run([sys.executable, "-m", "statemorph", "inspect", "--json", sp],
                                    capture_output=True, text=True, check=True).stdout)
    assert doc == json.loads(json.dumps(inspect_flink_savepoint(sp)))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_tables_hold_what_the_job_wrote(case: Path) -> None:
    want = expected_entries(case)
    rules = read_flink_operator_state(case / "savepoint", "rules-op", "rules").to_pylist()
    for entry in by_state(want, "rules"):
        got = {r["key"]: as_tuple(r["value"]) for r in rules if r["subtask"] == entry["subtask"]}
        assert got == {k: as_tuple(v) for k, v in entry["value"].items()}
    buffer = read_flink_operator_state(case / "savepoint", "list-op", "buffer")
    assert buffer.column_names == ["subtask", "index", "value_bytes", "value"]
    assert sorted(buffer.column("value").to_pylist()) == by_state(want, "buffer")[0]["value"]
    assert all(len(b) == 8 for b in buffer.column("value_bytes").to_pylist())
    offsets = read_flink_operator_state(case / "savepoint", "list-op", "offsets").to_pylist()
    assert sorted(r["value"] for r in offsets) == by_state(want, "offsets")[0]["value"]
    raw = read_flink_operator_state(case / "savepoint", "rules-op", "rules", decode=False)
    assert raw.column_names == ["subtask", "index", "key_bytes", "value_bytes"] and raw.num_rows == 24


def test_unknown_operator_state_is_a_typed_error() -> None:
    with pytest.raises(FlinkSavepointError, match=r"no operator state 'nope' \(operator states: 'buffer', 'offsets'\)"):
        read_flink_operator_state(CASES[0] / "savepoint", "list-op", "nope")


def streams(case: Path) -> list[OperatorStream]:
    sp = FlinkSavepoint(case / "savepoint")
    return [s for op in sp.operators for _, s in operator_streams(sp, op)]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_streams_written_back_byte_for_byte(case: Path) -> None:
    """The header and every partition written again give Flink's exact stream and offsets: the
    writer migration uses is Flink's layout."""
    seen = 0
    for s in streams(case):
        assert write_operator_header(s.header) == s.data[: s.header.size]
        data, infos = write_operator_stream(s.header, s.parts())
        if s.header.compressed:
            # each partition framed alone again (Snappy's compressed bytes are the codec's own)
            again = OperatorStream(data, OperatorStreamHandle(infos, None), "again")
            assert [(p.name, p.elements, p.entries) for p in again.parts()] == \
                [(p.name, p.elements, p.entries) for p in s.parts()]
            assert [len(i.offsets) for i in infos] == [len(h.offsets) for h in s.handle.states]
        else:
            assert data == s.data
            assert [(i.name, i.mode, i.offsets) for i in infos] == \
                [(h.name, h.mode, h.offsets) for h in s.handle.states]
        seen += 1
    assert seen == 6  # the two sources, list-op and rules-op at parallelism 2


def test_hostile_streams_are_typed_errors() -> None:
    s = next(s for s in streams(CASES[0]) if any(h.name == "rules" for h in s.handle.states))
    rules = s.handle.states[0]
    with pytest.raises(FlinkSavepointError, match="outside the stream"):
        OperatorStream(s.data, OperatorStreamHandle([OperatorStateInfo("rules", 2, [len(s.data) + 5])], None), "x")
    with pytest.raises(FlinkSavepointError, match="does not register"):
        OperatorStream(s.data, OperatorStreamHandle([rules, OperatorStateInfo("other", 0, [])], None), "x")
    with pytest.raises(FlinkSavepointError, match="does not match"):
        OperatorStream(s.data, OperatorStreamHandle([OperatorStateInfo("rules", 0, rules.offsets)], None), "x").parts()
    with pytest.raises(FlinkSavepointError, match="operator-state header"):
        OperatorStream(s.data[: rules.offsets[0] - 3], OperatorStreamHandle([], None), "x")
    bad_count = bytearray(s.data)
    bad_count[rules.offsets[0]: rules.offsets[0] + 4] = (1 << 30).to_bytes(4, "big")
    with pytest.raises(FlinkSavepointError, match="entry count"):
        OperatorStream(bytes(bad_count), s.handle, "x").parts()
    flagged = bytearray(s.data)
    flagged[4] = 1  # says compressed, but no framed stream follows the header
    with pytest.raises(FlinkSavepointError, match="no Snappy stream identifier"):
        OperatorStream(bytes(flagged), s.handle, "x")
    version = bytearray(s.data)
    version[3] = 5
    with pytest.raises(FlinkSavepointError, match="version 5"):
        parse_operator_header(bytes(version), rules.offsets[0], "x")


# -- real Flink ---------------------------------------------------------------------------------

def restored(real_flink: ModuleType, items: list[tuple[Path, Path]], **kw: Any) -> list[Any]:
    results = real_flink.restore(items, program=real_flink.OPERATOR_PROGRAM, **kw)
    for (sp, _), r in zip(items, results, strict=True):
        assert r.ok, f"{sp}: {r.exception}: {r.message}"
    return [r.entries for r in results]


def test_real_flink_restores_rewrites_with_identical_state(real_flink: ModuleType, tmp_path: Path) -> None:
    """The original, the convert round trip and a plain rewrite, each restored by real Flink: every
    subtask's broadcast map, list and union list state read back as the job left them."""
    items = []
    for case in CASES:
        items.append((case / "savepoint", case / "spec.json"))
        pq, back, plain = (tmp_path / f"{case.name}-{k}" for k in ("pq", "back", "plain"))
        convert_savepoint(case / "savepoint", pq)
        convert_savepoint(pq, back)
        migrate_flink_savepoint(case / "savepoint", plain, {})
        items += [(back, case / "spec.json"), (plain, case / "spec.json")]
    got = restored(real_flink, items)
    for k, case in enumerate(CASES):
        want = expected_entries(case)
        assert got[3 * k] == want
        assert got[3 * k + 1] == want
        assert got[3 * k + 2] == want


def test_real_flink_restores_rescaled_and_modified_savepoints(real_flink: ModuleType, tmp_path: Path) -> None:
    """The other rewrites carry operator state too: ``rules-op`` given max parallelism 256 (its
    keyed streams rewritten, its broadcast state carried) and the ``records`` source removed."""
    from statemorph.engine import modify_flink_savepoint, rescale_flink_savepoint

    case = CASES[0]
    rescaled, modified = tmp_path / "rescaled", tmp_path / "modified"
    rescale_flink_savepoint(case / "savepoint", rescaled, "rules-op", max_parallelism=256)
    modify_flink_savepoint(case / "savepoint", modified, remove=["records"])
    (got_rescaled,) = restored(real_flink, [(rescaled, case / "spec.json")], overrides={"max_parallelism": 256})
    (got_modified,) = restored(real_flink, [(modified, case / "spec.json")])
    assert got_rescaled == expected_entries(case)
    assert got_modified == expected_entries(case)


# -- migration ----------------------------------------------------------------------------------

NOTE_TYPE = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING, note STRING>>"
"""The rules' row type gaining a nullable field."""
NOTE_FIELDS: tuple[Any, ...] = ("eventId", ("metadata", ("userId", "timestamp", "deviceType", "note")))
SCHEMA = f'[operators."rules-op".states.rules]\ntype = "{NOTE_TYPE}"\n'


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True)


def reshaped(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The job's entries as real Flink reads them back with the rules row gaining ``note``."""
    from savepoint.flink.flink_cases import reshape

    return [{**e, "value": {k: reshape(v, NOTE_FIELDS) for k, v in e["value"].items()}} if e["state"] == "rules"
            else e for e in entries]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case migrated by ``statemorph migrate`` with a schema file naming the broadcast state."""
    root = tmp_path_factory.mktemp("operator-migrated")
    schema = root / "schema.toml"
    schema.write_text(SCHEMA, encoding="utf-8")
    out = {}
    for case in CASES:
        check = cli("check", str(case / "savepoint"), "--schema", str(schema))
        assert check.returncode == 1, check.stdout + check.stderr  # restorable after migration
        assert "rules (map): migrate (compatible after migration): map value: row: matched by position; " \
               "metadata: added note" in check.stdout
        dst = root / case.name
        run = cli("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
        assert run.returncode == 0, run.stdout + run.stderr
        assert "rules-op state 'rules': 24 values migrated" in run.stdout
        out[case.name] = dst
    return out


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_migrated_broadcast_values_read_back_in_the_new_type(case: Path, migrated: dict[str, Path]) -> None:
    dst = migrated[case.name]
    old = read_flink_operator_state(case / "savepoint", "rules-op", "rules").to_pylist()
    new = read_flink_operator_state(dst, "rules-op", "rules").to_pylist()
    assert [(r["subtask"], r["key"]) for r in new] == [(r["subtask"], r["key"]) for r in old]
    for o, n in zip(old, new, strict=True):
        meta = o["value"]["f1"]
        want = None if meta is None else {**meta, "note": None}
        assert n["value"] == {"f0": o["value"]["f0"], "f1": want}
    doc = operator_doc(inspect_flink_savepoint(dst), "rules-op")["operator_states"][0]
    assert doc["value_type"].endswith("`deviceType` STRING, `note` STRING>>") and doc["entries_per_subtask"] == [12, 12]
    # every other operator's state is carried as it was
    for uid, state in (("list-op", "buffer"), ("list-op", "offsets")):
        assert read_flink_operator_state(dst, uid, state, decode=False) == \
            read_flink_operator_state(case / "savepoint", uid, state, decode=False)


def test_list_elements_go_through_the_migration(tmp_path: Path) -> None:
    """List elements are cut by their offsets, migrated in one batch, and written with new offsets
    (here: a migration adding 1000 to each Long), the header keeping the snapshot it is given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from statemorph.savepoint.flink.rewrite import rewrite

    src = CASES[0] / "savepoint"
    sp = FlinkSavepoint(src)
    op = sp.operator("list-op")
    _, stream = next(operator_streams(sp, op))
    meta = stream.header.meta("buffer")
    assert meta is not None
    envelope = b"\x00\x00\x00\x02" + meta.serializer("VALUE_SERIALIZER").raw  # type: ignore[union-attr]

    def plus_1000(values: pa.BinaryArray) -> pa.Array:
        longs = pa.array([int.from_bytes(v, "big", signed=True) for v in values.to_pylist()], pa.int64())
        return pa.array([int(x).to_bytes(8, "big", signed=True) for x in pc.add(longs, 1000).to_pylist()], pa.binary())

    report = rewrite(src, tmp_path / "out", {}, operator_changes={("list-op", "buffer"): (envelope, plus_1000)})
    assert report.migrated == {("list-op", "buffer"): 24} and report.rewritten_streams == 2
    before = read_flink_operator_state(src, "list-op", "buffer")
    after = read_flink_operator_state(tmp_path / "out", "list-op", "buffer")
    assert after.column("value").to_pylist() == [v + 1000 for v in before.column("value").to_pylist()]
    assert read_flink_operator_state(tmp_path / "out", "list-op", "offsets") == \
        read_flink_operator_state(src, "list-op", "offsets")


def test_incompatible_operator_state_change_writes_nothing(tmp_path: Path) -> None:
    from statemorph.errors import IncompatibleSchemaError
    from statemorph.serializers import StringSerializer
    from statemorph.state import ListStateDescriptor

    with pytest.raises(IncompatibleSchemaError, match="buffer"):
        migrate_flink_savepoint(CASES[0] / "savepoint", tmp_path / "out",
                                {"list-op": [ListStateDescriptor("buffer", StringSerializer())]})
    assert not (tmp_path / "out").exists()
    with pytest.raises(Exception, match="no keyed state and no operator state named 'nope'"):
        migrate_flink_savepoint(CASES[0] / "savepoint", tmp_path / "out",
                                {"list-op": [ListStateDescriptor("nope", StringSerializer())]})


def test_real_flink_restores_the_migrated_broadcast_state(real_flink: ModuleType, migrated: dict[str, Path]) -> None:
    """Real Flink restores each migrated savepoint with the rules registered in the new row type
    (the original is refused with that type: RowDataSerializer knows no migration of its own) and
    reads back every subtask's rules with ``note`` null, the list states unchanged."""
    items = [(migrated[c.name], c / "spec.json") for c in CASES] + [(c / "savepoint", c / "spec.json") for c in CASES]
    results = real_flink.restore(items, events_type=NOTE_TYPE, program=real_flink.OPERATOR_PROGRAM)
    for k, case in enumerate(CASES):
        ok, refused = results[k], results[len(CASES) + k]
        assert ok.ok, f"{case.name}: Flink refused the migrated savepoint: {ok.exception}: {ok.message}"
        assert ok.entries == reshaped(expected_entries(case))
        assert not refused.ok, f"{case.name}: Flink restored the unmigrated savepoint with the new type"
        assert refused.exception == "org.apache.flink.util.StateMigrationException"
        assert "broadcast state must not be incompatible" in refused.message


def test_spark_reads_operator_state(spark: Any) -> None:
    from statemorph.engine.spark import read_operator_state

    sp = CASES[0] / "savepoint"
    for uid, state in (("rules-op", "rules"), ("list-op", "buffer"), ("list-op", "offsets")):
        local = read_flink_operator_state(sp, uid, state)
        df = read_operator_state(spark, str(sp), state, operator=uid)
        assert df.columns == local.column_names
        got = sorted(json.dumps({k: (v.hex() if isinstance(v, bytes | bytearray) else v) for k, v in
                                 r.asDict(recursive=True).items()}, sort_keys=True) for r in df.collect())
        want = sorted(json.dumps({k: (v.hex() if isinstance(v, bytes) else v) for k, v in r.items()}, sort_keys=True)
                      for r in local.to_pylist())
        assert got == want


def _mutated_streams() -> list[tuple[OperatorStream, str]]:
    return [(s, c.name) for c in CASES for s in streams(c) if s.handle.states and
            any(h.offsets for h in s.handle.states)]


@pytest.mark.parametrize("seed", range(4))
def test_corrupt_streams_fail_with_a_typed_error(seed: int) -> None:
    """Flipped and truncated bytes of every real operator-state stream (plain and compressed):
    each read either succeeds or raises a StatemorphError, never anything else."""
    import random

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from statemorph.errors import StatemorphError

    originals = _mutated_streams()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(st.integers(0, len(originals) - 1), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                        min_size=1, max_size=4), st.booleans())
    def check(which: int, flips: list[tuple[int, int]], truncate: bool) -> None:
        s, _ = originals[which]
        data = bytearray(s.data)
        rng = random.Random(seed)
        for pos, value in flips:
            data[(pos + rng.randrange(len(data))) % len(data)] = value
        if truncate:
            del data[rng.randrange(len(data)):]
        try:
            for p in OperatorStream(bytes(data), s.handle, "fuzz").parts():
                assert p.count >= 0
        except StatemorphError:
            pass

    check()


# -- bootstrap ----------------------------------------------------------------------------------

OLD_EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"


def test_real_flink_restores_bootstrapped_operator_state(real_flink: ModuleType, tmp_path: Path) -> None:
    """Broadcast, list and union list state written by statemorph (the broadcast state joined to a
    bootstrapped keyed operator, the list states in an operator of their own, one inline stream
    and one file) and restored by the operator-state job: every subtask reads what was written."""
    from statemorph.engine import OperatorStateData, write_flink_savepoint, write_operator_state_savepoint
    from statemorph.engine.bootstrap import StateData
    from statemorph.serializers import IntSerializer, LongSerializer, RowDataSerializer, StringSerializer

    rules = {f"rule-{i}": {"eventId": i * 7, "metadata": None if i == 2 else
                           {"userId": i, "timestamp": 1_700_000_000_000 + i, "deviceType": "dé" if i else None}}
             for i in range(4)}
    buffers = [[5, 3, 11], [2, 8]]
    offsets = ["a:1", "b:2"]
    keyed = tmp_path / "keyed"
    # a keyed operator "rules-op" (one ignored keyed state) the broadcast state joins
    write_flink_savepoint(keyed, operator="rules-op", key_serializer=IntSerializer(), parallelism=2,
                          states={"unused": StateData(pa_table({"key": [1], "value": [1]}), LongSerializer())})
    with_rules = tmp_path / "with-rules"
    counts = write_operator_state_savepoint(
        with_rules, operator="rules-op", parallelism=2, base=keyed, inline_threshold=1,  # a file
        states={"rules": OperatorStateData("broadcast-map", RowDataSerializer(OLD_EVENTS), list(rules.values()),
                                           StringSerializer(), list(rules))})
    assert counts == {"rules": 8}
    dst = tmp_path / "bootstrapped"
    counts = write_operator_state_savepoint(
        dst, operator="list-op", parallelism=2, base=with_rules,
        states={"buffer": OperatorStateData("operator-list", LongSerializer(), buffers),
                "offsets": OperatorStateData("union-list", StringSerializer(), [[offsets[0]], [offsets[1]]])})
    assert counts == {"buffer": 5, "offsets": 2}
    assert read_flink_operator_state(dst, "list-op", "buffer").column("value").to_pylist() == [5, 3, 11, 2, 8]
    (got,) = restored(real_flink, [(dst, CASES[0] / "spec.json")])
    want = [{"state": "rules", "subtask": s, "value": rules} for s in (0, 1)]
    want += [{"state": "buffer", "value": [2, 3, 5, 8, 11]}]
    want += [{"state": "offsets", "subtask": s, "value": offsets} for s in (0, 1)]
    assert got == want


def pa_table(cols: dict[str, list[Any]]) -> Any:
    import pyarrow as pa

    return pa.table(cols)
