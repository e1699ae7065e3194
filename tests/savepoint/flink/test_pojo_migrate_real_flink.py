"""A POJO gaining a field, the one schema change real Flink migrates itself on restore, done both ways.

Real Flink takes a savepoint of ``ValueState<Profile>`` (``{long id; String name; int count}``,
ci/flink/src/savepoints/PojoJobs.java) with the RocksDB and the heap backend. Then:

- **the peer**: real Flink starts from it with version 2 of the class (plus ``double score``),
  migrates every value on restore, reads every key back and takes a new savepoint;
- **statemorph**: ``statemorph check`` says "migrate", ``statemorph migrate`` (the CLI) writes
  the new savepoint, and real Flink restores that with version 2 and reads every key back.

Both must read what the job wrote, with ``score`` 0.0 (what ``new Profile()`` leaves in a primitive
double). statemorph's savepoint must be the one Flink would have written itself after migrating:
the serializer snapshot of ``profile`` is byte for byte the one in Flink's new savepoint (so Flink
resolves it COMPATIBLE_AS_IS and migrates nothing), and so is every key's value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.format_helpers import expected

from statemorph.engine.flink import migrate_flink_savepoint, plan_flink_savepoint, read_flink_state_table
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators, find_keyed_operator
from statemorph.schema_file import descriptors_for_operators, load_schema

UID = "state-op"
STATE = "profile"
KEYS = 60
SPECS = {
    "pojo-rocksdb-p2": {"backend": "rocksdb", "parallelism": 2},
    "pojo-hashmap-p1": {"backend": "hashmap", "parallelism": 1, "max_parallelism": 256},
}
SCHEMA = f"""\
[operators.{UID}.states.{STATE}]
serializer = "pojo"
type = "ROW<id BIGINT NOT NULL, name STRING, `count` INT NOT NULL, score DOUBLE NOT NULL>"
"""

pytestmark = pytest.mark.java


def _statemorph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def cases(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Version-1 savepoints real Flink took, one directory per backend (savepoint/, spec.json, expected.json)."""
    root = tmp_path_factory.mktemp("pojo")
    pairs = []
    for name, fields in SPECS.items():
        spec = root / f"{name}.json"
        spec.write_text(json.dumps({"name": name, "key_type": "long", "keys": KEYS, "records_per_key": 3, **fields}))
        pairs.append((spec, root / name))
    real_flink.pojo_generate(pairs, pojo=1)
    return {out.name: out for _, out in pairs}


def _with_score(case: Path) -> dict[tuple[Any, str], Any]:
    """What version 2 must read: the job's values, and the added primitive double at 0.0."""
    want = {k: {**v, "score": 0.0} for k, v in expected(case).items()}
    assert len(want) == KEYS and sum(v["name"] is None for v in want.values()) == KEYS // 5
    return want


def _entries(entries: list[dict[str, Any]]) -> dict[tuple[Any, str], Any]:
    return {(e["key"], e["state"]): e["value"] for e in entries}


def _value_snapshot(savepoint: Path) -> bytes:
    op = find_keyed_operator(describe_operators(FlinkSavepoint(savepoint)), UID)
    return op.states[STATE].snapshot_bytes("value_serializer")


def _values_by_key(savepoint: Path) -> list[tuple[bytes, bytes]]:
    table = read_flink_state_table(savepoint, UID, STATE, decode=False)
    return sorted(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))


def test_statemorph_migrates_what_flink_restores_with_the_new_class(
    real_flink: ModuleType, cases: dict[str, Path], tmp_path: Path
) -> None:
    schema = tmp_path / "profile-v2.toml"
    schema.write_text(SCHEMA, encoding="utf-8")
    items = []
    for name, case in cases.items():
        check = _statemorph("check", str(case / "savepoint"), "--schema", str(schema))
        assert check.returncode == 1, (name, check.stdout, check.stderr)
        assert "migrate (compatible after migration): value: fields added: score" in check.stdout
        out = tmp_path / f"{name}-v2"
        run = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(out))
        assert run.returncode == 0, (name, run.stdout, run.stderr)
        assert f"{KEYS} values migrated" in run.stdout
        ops = describe_operators(FlinkSavepoint(out))
        again = plan_flink_savepoint(out, descriptors_for_operators(load_schema(schema), ops))
        assert [s.action for s in again.states] == ["copy"], again.summary
        items.append((out, case / "spec.json"))
    for (name, case), result in zip(cases.items(), real_flink.pojo_restore(items, pojo=2), strict=True):
        assert result.ok, f"{name}: Flink refused statemorph's savepoint: {result.exception}: {result.message}"
        assert _entries(result.entries) == _with_score(case), name


def test_flink_migrates_on_restore_to_the_same_savepoint(
    real_flink: ModuleType, cases: dict[str, Path], tmp_path: Path
) -> None:
    """The peer: Flink itself restores version 1 with version 2, reads the same values and writes
    the savepoint statemorph writes (same snapshot bytes, same value bytes per key)."""
    schema = tmp_path / "profile-v2.toml"
    schema.write_text(SCHEMA, encoding="utf-8")
    for name, case in cases.items():
        cycle = real_flink.pojo_restore_savepoint(
            case / "savepoint", case / "spec.json", tmp_path / f"{name}-flink", probe_keys=KEYS, stride=1, pojo=2
        )
        assert cycle.probed == KEYS and _entries(cycle.entries) == _with_score(case), name
        flink_v2 = tmp_path / f"{name}-flink" / "savepoint"
        ours = tmp_path / f"{name}-statemorph"
        ops = describe_operators(FlinkSavepoint(case / "savepoint"))
        migrate_flink_savepoint(case / "savepoint", ours, descriptors_for_operators(load_schema(schema), ops))
        assert _value_snapshot(ours) == _value_snapshot(flink_v2), name
        assert _value_snapshot(case / "savepoint") != _value_snapshot(flink_v2)
        assert _values_by_key(ours) == _values_by_key(flink_v2), name
