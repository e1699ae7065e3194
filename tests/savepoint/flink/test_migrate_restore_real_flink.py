"""The story end to end, as a user runs it: a real Flink savepoint holding ``ValueState<RowData>``
of the old Events type goes through ``statemorph check`` and ``statemorph migrate`` (the CLI, in a
subprocess), and real Flink 2.3 restores the result with the evolved Events type and reads every
value: added fields null, reordered nested fields by name, every other state, TTL timestamp and
timer as the job wrote it. The unmigrated savepoint is refused by Flink (test_real_flink_generator's
negative control); here the migrated one is accepted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, case_spec, committed_cases, reshape
from savepoint.flink.format_helpers import expected, hashable, state_operator

from statemorph.savepoint.flink import FlinkSavepoint

EVENT_STATES = ("events", "ttl_events")
CASES = [c for c in committed_cases() if "events" in case_spec(c)["states"]]


def _statemorph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True, timeout=300)


def _schema(case: Path, tmp: Path) -> Path:
    op = state_operator(FlinkSavepoint(case / "savepoint"))
    states = [s for s in EVENT_STATES if s in case_spec(case)["states"]]
    text = "".join(f'[operators."{op}".states.{s}]\ntype = "{EVOLVED_EVENTS.replace(chr(34), "")}"\n' for s in states)
    path = tmp / f"{case.name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _evolved(case: Path) -> dict[tuple[Any, str], Any]:
    """What Flink must read back after the migration: the events states reshaped by field name."""
    return {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in EVENT_STATES else v
            for (k, s), v in expected(case).items()}


def test_cases_cover_the_matrix() -> None:
    specs = [case_spec(c) for c in CASES]
    assert {s["backend"] for s in specs} == {"hashmap", "rocksdb"}
    assert {s["compression"] for s in specs} == {True, False}
    assert {s["parallelism"] for s in specs} == {1, 2}
    assert {s["max_parallelism"] for s in specs} >= {128, 256}
    assert {s["key_type"] for s in specs} >= {"int", "string"}
    assert {s.get("flink", "2.3.0") for s in specs} >= {"2.3.0", "1.20.3"}


@pytest.mark.java
def test_migrated_savepoints_restore_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    items = []
    for case in CASES:
        schema, dst = _schema(case, tmp_path), tmp_path / f"{case.name}-v2"
        check = _statemorph("check", str(case / "savepoint"), "--schema", str(schema))
        assert check.returncode == 1, (case.name, check.stdout, check.stderr)
        assert "compatible after migration" in check.stdout
        run = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
        assert run.returncode == 0, (case.name, run.stdout, run.stderr)
        again = _statemorph("check", str(dst), "--schema", str(schema))
        assert again.returncode == 0, (case.name, again.stdout)
        items.append((dst, case / "spec.json"))
    results = real_flink.restore(items, events_type=EVOLVED_EVENTS)
    for case, result in zip(CASES, results, strict=True):
        assert result.ok, f"{case.name}: Flink refused the migrated savepoint: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = _evolved(case)
        assert got == want, case.name


def test_inspect_json_shape(tmp_path: Path) -> None:
    case = next(c for c in CASES if case_spec(c)["states"] != ["events"])
    out = _statemorph("inspect", str(case / "savepoint"), "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["format"] == "flink" and info["metadata_version"] in (4, 5, 6)
    op = next(o for o in info["operators"] if o["states"])
    assert set(op) >= {"name", "uid", "uid_hash", "parallelism", "max_parallelism", "states"}
    states = {s["name"]: s for s in op["states"]}
    assert set(states["events"]) >= {"name", "kind", "key_type", "namespace_type", "value_type", "ttl", "entries",
                                     "bytes"}
    assert states["events"]["value_type"].startswith("ROW<`f0` BIGINT, `f1` ROW<`userId` INT")
    assert states["totals"]["kind"] == "map" and states["recent"]["kind"] == "list"
    assert states["ttl_count"]["ttl"] and not states["count"]["ttl"]
    want = sum(1 for (_, s) in expected(case) if s == "events")
    assert states["events"]["entries"] == want


def test_migrating_a_state_statemorph_cannot_read_is_refused_by_name(tmp_path: Path) -> None:
    """Timers are not keyed states a schema can change: the error lists the states there are."""
    case = next(c for c in CASES if "timers" in case_spec(c)["states"])
    op = state_operator(FlinkSavepoint(case / "savepoint"))
    schema = tmp_path / "bad.toml"
    schema.write_text(f'[operators."{op}".states.nope]\ntype = "BIGINT"\n', encoding="utf-8")
    out = _statemorph("check", str(case / "savepoint"), "--schema", str(schema))
    assert out.returncode == 2, out.stderr
    assert "names a state the savepoint does not have" in out.stderr and "'events'" in out.stderr
    assert "Traceback" not in out.stderr


def test_incompatible_change_names_the_field_and_writes_nothing(tmp_path: Path) -> None:
    case = CASES[0]
    op = state_operator(FlinkSavepoint(case / "savepoint"))
    schema = tmp_path / "bad.toml"
    bad_type = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"
    schema.write_text(f'[operators."{op}".states.events]\ntype = "{bad_type}"\n', encoding="utf-8")
    dst = tmp_path / "out"
    out = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "metadata.userId" in out.stdout + out.stderr
    assert not dst.exists()


def test_python_api_migrates_and_reads_a_flink_savepoint(tmp_path: Path) -> None:
    """engine.migrate_savepoint on a Flink path takes the descriptors per operator; the result
    reads back with the new type, every old field kept by name and the new ones null."""
    from statemorph import engine, serializers
    from statemorph.errors import UsageError
    from statemorph.state import ValueStateDescriptor

    case = next(c for c in CASES if case_spec(c)["compression"])
    op = state_operator(FlinkSavepoint(case / "savepoint"))
    new = serializers.RowDataSerializer(EVOLVED_EVENTS)
    with pytest.raises(UsageError, match="per operator"):
        engine.migrate_savepoint(case / "savepoint", tmp_path / "bad", [ValueStateDescriptor("events", new)])
    report = engine.migrate_savepoint(case / "savepoint", tmp_path / "v2", {op: [ValueStateDescriptor("events", new)]})
    n = sum(1 for (_, s) in expected(case) if s == "events")
    assert report.migrated == {(op, "events"): n}
    table = engine.read_flink_state_table(tmp_path / "v2", op, "events")
    assert table.num_rows == n
    rows = {hashable(r["key"]): r["value"] for r in table.to_pylist()}
    for (key, state), value in expected(case).items():
        if state != "events":
            continue
        got = rows[key]
        if value is None or value["metadata"] is None:
            continue
        meta = got["f1"]
        assert got["f0"] == value["eventId"]
        assert (meta["userId"], meta["timestamp"], meta["deviceType"]) == (
            value["metadata"]["userId"], value["metadata"]["timestamp"], value["metadata"]["deviceType"])
        assert meta["location"] is None and meta["appVersion"] is None and meta["sessionId"] is None
