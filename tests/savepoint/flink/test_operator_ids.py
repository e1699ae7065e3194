"""One name for an operator in every Flink version: the OperatorID statemorph derives from a uid is
Flink's (vectors from Flink's own hasher, and every operator of every committed real savepoint), and
a uid that a Flink 1.x savepoint does not record (``_metadata`` version 4 keeps no uid strings)
still finds its operator in every verb: reading, check / migrate with a schema file, inspect,
rescale and modify; the migrated 1.x savepoint restores in real Flink 1.20."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, case_spec, committed_cases, reshape
from savepoint.flink.format_helpers import expected, hashable
from snapshots.specs import decode_str

from statemorph.cli.check import plan_for
from statemorph.engine.flink import inspect_flink_savepoint, read_flink_state_table
from statemorph.engine.modify import modify_flink_savepoint
from statemorph.engine.rescale import rescale_flink_savepoint
from statemorph.errors import ExitCode, FlinkSavepointError, SavepointError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators, find_keyed_operator
from statemorph.savepoint.flink.metadata import OperatorState
from statemorph.savepoint.flink.operator_ids import find_operator, naming, operator_id
from statemorph.schema_file import SchemaFileError

ROOT = Path(__file__).resolve().parents[3]
VECTORS = [json.loads(line) for line in
           (ROOT / "tests/data/golden/operator_ids.jsonl").read_text(encoding="utf-8").splitlines() if line]
CASES = committed_cases()
V4_CASES = [c for c in CASES if case_spec(c).get("flink") == "1.20.3"]
EVENTS_V4 = next(c for c in V4_CASES if "events" in c.name)
SOURCE_UID = "records"  # the generator's source operator


@pytest.mark.parametrize("vector", VECTORS, ids=[v["case"] for v in VECTORS])
def test_operator_id_is_flinks(vector: dict[str, Any]) -> None:
    """``StreamGraphHasherV2.generateUserSpecifiedHash(uid)`` as Flink 2.3 computes it
    (ci/golden/src/golden/OperatorIds.java), for empty, block-boundary, non-ASCII, supplementary
    and lone-surrogate uids."""
    uid = decode_str(vector["uid"])
    assert uid is not None
    assert operator_id(uid).hex() == vector["operator_id"]


def test_vectors_cover_the_hash_edges() -> None:
    uids = [decode_str(v["uid"]) or "" for v in VECTORS]
    assert "" in uids and {15, 16, 17, 31, 32, 33} <= {len(u) for u in uids}
    assert any(len(u.encode("utf-8", "surrogatepass")) > len(u) for u in uids)  # multi-byte UTF-8
    assert any(ord(ch) > 0xFFFF for u in uids for ch in u)  # a surrogate pair in Java
    assert any(0xD800 <= ord(ch) < 0xE000 for u in uids for ch in u)  # a lone surrogate


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_operator_of_a_real_savepoint_has_its_uids_derived_id(case: Path) -> None:
    """Flink 2.3 records uid and ID (each operator is a vector); Flink 1.20 only the ID, which is
    the one derived from the uid its job set."""
    sp = FlinkSavepoint(case / "savepoint")
    uids = [SOURCE_UID, case_spec(case)["uid"]]
    assert sorted(op.operator_id for op in sp.operators) == sorted(operator_id(u) for u in uids)
    for op in sp.operators:
        if sp.version >= 5:
            assert op.uid in uids and op.operator_id == operator_id(op.uid)
        else:
            assert op.uid is None


def _op(uid: str | None, id_of: str) -> OperatorState:
    return OperatorState(operator_id(id_of), 1, 128, None, [], None, uid)


def test_find_operator_tries_recorded_uid_then_uid_hash_then_derived_id() -> None:
    legacy = _op(None, "events-state")  # a 1.x operator: the ID only
    hashed = _op("renamed", "old-uid")  # a 2.x operator whose ID was set apart from its uid (setUidHash)
    rival = _op(None, "renamed")  # an operator whose derived ID is the other one's recorded uid
    ops = [legacy, hashed, rival]
    assert find_operator(ops, "renamed", lambda o: o) is hashed  # the recorded uid wins
    assert naming(rival, "renamed") == "derived_id" and naming(hashed, "renamed") == "uid"
    assert find_operator(ops, legacy.uid_hash.upper(), lambda o: o) is legacy
    assert naming(legacy, legacy.uid_hash.upper()) == "uid_hash"
    assert find_operator(ops, "events-state", lambda o: o) is legacy
    assert find_operator(ops, "old-uid", lambda o: o) is hashed
    assert naming(hashed, "old-uid") == "derived_id"
    assert find_operator(ops, "unknown", lambda o: o) is None
    assert naming(legacy, "unknown") is None


def test_a_1x_savepoint_is_read_by_uid() -> None:
    sp_dir = EVENTS_V4 / "savepoint"
    sp = FlinkSavepoint(sp_dir)
    assert sp.version == 4
    op = sp.operator("events-state")
    assert op.uid is None and op.uid_hash == operator_id("events-state").hex()
    by_uid = read_flink_state_table(sp_dir, "events-state", "events", decode=False)
    assert by_uid.equals(read_flink_state_table(sp_dir, op.uid_hash, "events", decode=False))
    assert by_uid.num_rows == 300
    described = find_keyed_operator(describe_operators(sp), "events-state")
    assert described is not None and described.operator is op
    assert described.label == f"operator {op.uid_hash} (uid 'events-state', by its derived ID)"
    with pytest.raises(FlinkSavepointError, match="no operator with uid or uid hash 'events_state'"):
        sp.operator("events_state")
    with pytest.raises(SavepointError, match="uid or uid hash is 'events_state'"):
        read_flink_state_table(sp_dir, "events_state", "events")


def _schema(tmp: Path, ident: str, states: list[str]) -> Path:
    path = tmp / "evolved.toml"
    path.write_text("".join(f'[operators."{ident}".states.{s}]\ntype = "{EVOLVED_EVENTS}"\n' for s in states),
                    encoding="utf-8")
    return path


def test_a_schema_file_naming_the_uid_plans_a_1x_savepoint_like_one_naming_the_hash(tmp_path: Path) -> None:
    sp = EVENTS_V4 / "savepoint"
    by_uid, _ = plan_for(str(sp), str(_schema(tmp_path, "events-state", ["events"])))
    assert by_uid.exit_status == ExitCode.MIGRATION_NEEDED
    assert "operator 1d688a8c0c78555ff37bf9598bbe711c (uid 'events-state', by its derived ID)" in by_uid.summary
    by_hash, _ = plan_for(str(sp), str(_schema(tmp_path, operator_id("events-state").hex(), ["events"])))
    assert [s.reason for s in by_hash.states] == [s.reason for s in by_uid.states]
    with pytest.raises(SchemaFileError, match=r"\[operators.events_state\] names an operator the savepoint does not"):
        plan_for(str(sp), str(_schema(tmp_path, "events_state", ["events"])))


def _statemorph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True, timeout=300)


def test_inspect_shows_which_operator_a_uid_names(tmp_path: Path) -> None:
    sp = str(EVENTS_V4 / "savepoint")
    schema = tmp_path / "s.toml"
    schema.write_text('[operators.events-state.states.events]\ntype = "INT"\n'
                      '[operators.records.states.x]\ntype = "INT"\n'
                      '[operators.nope.states.x]\ntype = "INT"\n', encoding="utf-8")
    doc = inspect_flink_savepoint(sp, count_entries=False, names=["events-state", "records", "nope"])
    named = {op["uid_hash"]: op["named_by"] for op in doc["operators"]}
    assert named == {operator_id("events-state").hex(): [{"name": "events-state", "by": "derived_id"}],
                     operator_id("records").hex(): [{"name": "records", "by": "derived_id"}]}
    assert doc["unmatched_names"] == ["nope"]
    text = _statemorph("inspect", sp, "--schema", str(schema))
    assert text.returncode == 0, text.stderr
    assert (f"(no uid, uid hash {operator_id('events-state').hex()}): parallelism 2, max parallelism 128\n"
            f"  named by [operators.events-state] in {schema} (a uid this savepoint does not record: its derived "
            f"ID is this operator's)") in text.stdout
    assert f"[operators.nope] in {schema} names no operator of this savepoint" in text.stdout
    plain = _statemorph("inspect", sp)
    assert "Flink 1.x records no uids: a schema file may name this operator by its uid" in plain.stdout
    v6 = inspect_flink_savepoint(CASES[0] / "savepoint", count_entries=False, names=["events-state"])
    assert [op["named_by"] for op in v6["operators"]] == [[], [{"name": "events-state", "by": "uid"}]]


def test_rescale_and_modify_select_a_1x_operator_by_uid(tmp_path: Path) -> None:
    src = EVENTS_V4 / "savepoint"
    rescale_flink_savepoint(src, tmp_path / "rescaled", "events-state", max_parallelism=256, parallelism=1)
    rescaled = FlinkSavepoint(tmp_path / "rescaled").operator("events-state")
    assert (rescaled.max_parallelism, rescaled.parallelism) == (256, 1)
    modify_flink_savepoint(src, tmp_path / "modified", remove=["records"])
    kept = FlinkSavepoint(tmp_path / "modified").operators
    assert [op.operator_id for op in kept] == [operator_id("events-state")]


def _release(real_flink: ModuleType, version: str) -> ModuleType:
    """The driver, when ci/flink/setup.sh built ``version`` (CI builds 2.3 only: ci/install.sh),
    else a skip naming the flag that builds it."""
    try:
        real_flink.classpath(version)
    except real_flink.FlinkUnavailable as e:
        pytest.skip(f"real Flink {version} unavailable: {e}")
    return real_flink


@pytest.mark.java
def test_a_1x_savepoint_migrated_by_uid_restores_in_flink_120(real_flink: ModuleType, tmp_path: Path) -> None:
    """The schema file names the uid, never the hash; the result stays ``_metadata`` version 4 and
    real Flink 1.20 restores it with the evolved Events type, reading every state back."""
    flink = _release(real_flink, "1.20.3")
    items = []
    for case in V4_CASES:
        spec = case_spec(case)
        states = [s for s in ("events", "ttl_events") if s in spec["states"]]
        (tmp_path / case.name).mkdir()
        schema, dst = _schema(tmp_path / case.name, spec["uid"], states), tmp_path / f"{case.name}-v2"
        run = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
        assert run.returncode == 0, (case.name, run.stdout, run.stderr)
        assert f"uid '{spec['uid']}', by its derived ID" in run.stdout
        assert FlinkSavepoint(dst).version == 4
        items.append((dst, case / "spec.json"))
    results = flink.restore(items, events_type=EVOLVED_EVENTS, flink_version="1.20.3")
    for case, result in zip(V4_CASES, results, strict=True):
        assert result.ok, f"{case.name}: Flink 1.20 refused the migrated savepoint: {result.exception}: " \
                          f"{result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in ("events", "ttl_events") else v
                for (k, s), v in expected(case).items()}
        assert got == want, case.name


OTHER_RELEASES = ["1.19.3", "2.0.2", "2.1.3", "2.2.1"]  # no 1.18: ci/flink/README.md


@pytest.mark.java
@pytest.mark.parametrize("version", OTHER_RELEASES)
def test_every_release_takes_a_savepoint_statemorph_migrates_by_uid_and_restores_it(
        real_flink: ModuleType, version: str, tmp_path: Path) -> None:
    """Each Flink release (built with ci/flink/setup.sh --with-MAJOR.MINOR) takes a savepoint of the
    events job; the same schema file, naming the uid, migrates it; the same release restores it
    with the evolved Events type and reads every value back."""
    flink = _release(real_flink, version)
    spec = dict(case_spec(EVENTS_V4), name=f"events-{version}", flink=version, keys=40)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    flink.generate([(spec_path, tmp_path / "case")], version)
    case = tmp_path / "case"
    sp = FlinkSavepoint(case / "savepoint")
    assert {op.uid for op in sp.operators} == ({None} if version < "2" else {SOURCE_UID, "events-state"})
    dst, schema = tmp_path / "migrated", _schema(tmp_path, "events-state", ["events"])
    run = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert FlinkSavepoint(dst).version == sp.version
    [result] = flink.restore([(dst, case / "spec.json")], events_type=EVOLVED_EVENTS, flink_version=version)
    assert result.ok, f"Flink {version} refused the migrated savepoint: {result.exception}: {result.message}"
    got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
    assert got == {k: reshape(v, EVOLVED_EVENTS_FIELDS) for k, v in expected(case).items()}
    assert len(got) == 40
