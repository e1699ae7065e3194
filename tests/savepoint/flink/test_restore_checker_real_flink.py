"""The restore checker proves what it claims (issue 24 item 10): it reads every key the savepoint
holds, not the keys its spec lists; it fails on a keyed state the job does not register and on an
operator the job does not have, where Flink alone would drop them; and it renders DECIMAL,
TIMESTAMP, TIMESTAMP_LTZ, ARRAY, MAP, MULTISET and nested ROW values, so statemorph's migration of
those types is checked by real Flink reading them back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import SAVEPOINTS, case_spec, reshape
from savepoint.flink.format_helpers import expected, hashable

pytestmark = pytest.mark.java

#: A heap and a RocksDB case (the RocksDB one with row keys and two subtasks).
CASES = [SAVEPOINTS / "kinds-hashmap-p1", SAVEPOINTS / "kinds-rocksdb-p2-rowkey"]

#: An events row type with every type the checker once could not render, nested ones included.
RICH = ("ROW<eventId BIGINT NOT NULL, amount DECIMAL(12, 3), big DECIMAL(30, 6), at TIMESTAMP(3),"
        " atNanos TIMESTAMP(9), seen TIMESTAMP_LTZ(6), tags ARRAY<STRING>, scores MAP<STRING, INT>,"
        " bag MULTISET<BIGINT>, detail ROW<onDay DATE, payload BYTES, rates ARRAY<DECIMAL(5, 2)>,"
        " byKey MAP<INT, TIMESTAMP(6)>>>")
#: RICH after a schema change: a field added at the top and in the nested row, the nested row reordered.
RICH_EVOLVED = ("ROW<eventId BIGINT NOT NULL, amount DECIMAL(12, 3), big DECIMAL(30, 6), at TIMESTAMP(3),"
                " atNanos TIMESTAMP(9), seen TIMESTAMP_LTZ(6), tags ARRAY<STRING>, scores MAP<STRING, INT>,"
                " bag MULTISET<BIGINT>, detail ROW<byKey MAP<INT, TIMESTAMP(6)>, onDay DATE, note STRING,"
                " payload BYTES, rates ARRAY<DECIMAL(5, 2)>>, origin STRING>")
RICH_EVOLVED_FIELDS: tuple[Any, ...] = (
    "eventId", "amount", "big", "at", "atNanos", "seen", "tags", "scores", "bag",
    ("detail", ("byKey", "onDay", "note", "payload", "rates")), "origin")


def _got(entries: list[dict[str, Any]]) -> dict[tuple[Any, str], Any]:
    return {(hashable(e["key"]), e["state"]): e["value"] for e in entries}


def _chain(result: Any) -> str:
    return " | ".join([str(result.exception), str(result.message), *result.chain])


def test_every_key_of_the_savepoint_is_read_whatever_keys_the_spec_lists(real_flink: ModuleType) -> None:
    """The spec lists one key (and for the int case a key the savepoint lacks): the checker still
    reports every key the savepoint holds, exactly. Probing only the spec's keys, it reported one."""
    items = [(c / "savepoint", c / "spec.json") for c in CASES]
    for overrides in ({"keys": 1}, {"key_values": [123456789]}):
        if "key_values" in overrides:
            items = items[:1]  # explicit keys are for int and string key types
        results = real_flink.restore(items, overrides=overrides)
        for (savepoint, _), result in zip(items, results, strict=True):
            case = savepoint.parent
            assert result.ok, (case.name, _chain(result))
            got = _got(result.entries)
            assert got == expected(case), (case.name, overrides)
            assert len({k for k, _ in got}) == case_spec(case)["keys"] > 1


def test_a_keyed_state_the_job_does_not_register_fails_the_check(real_flink: ModuleType) -> None:
    """Flink restores a savepoint holding a state no descriptor asks for and drops it; the checker
    refuses it, naming the state."""
    items = [(c / "savepoint", c / "spec.json") for c in CASES]
    fewer = [s for s in case_spec(CASES[0])["states"] if s != "last"]
    for result in real_flink.restore(items, overrides={"states": fewer}):
        assert not result.ok
        assert "keyed state 'last'" in result.message and "does not register" in result.message, _chain(result)


def test_an_operator_the_job_does_not_have_fails_the_check(real_flink: ModuleType, tmp_path: Path) -> None:
    """A savepoint with one more operator (operator state, uid ``tally-op``) than the checker's job:
    Flink refuses to map its state (the checker no longer ignores unclaimed state). The same job
    without it restores to what it wrote."""
    pairs = []
    for name, extra in (("plain", {}), ("extra-operator", {"extra_uid": "tally-op"})):
        spec = tmp_path / f"{name}.json"
        spec.write_text(json.dumps({"name": name, "keys": 4, "records_per_key": 2, "states": ["count", "last"],
                                    **extra}), encoding="utf-8")
        pairs.append((spec, tmp_path / name))
    real_flink.generate(pairs)
    plain, extra = real_flink.restore([(out / "savepoint", out / "spec.json") for _, out in pairs])
    assert plain.ok and _got(plain.entries) == expected(tmp_path / "plain"), _chain(plain)
    assert not extra.ok
    assert "Cannot map checkpoint/savepoint state for operator" in _chain(extra), _chain(extra)


def _statemorph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def rich(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Savepoints whose events states hold every rich type (heap p1, RocksDB p2 with Snappy)."""
    base = tmp_path_factory.mktemp("rich")
    pairs = []
    for name, extra in (("rich-hashmap-p1", {}),
                        ("rich-rocksdb-p2", {"backend": "rocksdb", "parallelism": 2, "compression": True})):
        spec = base / f"{name}.json"
        spec.write_text(json.dumps({"name": name, "keys": 12, "records_per_key": 2, "events_type": RICH,
                                    "states": ["events", "ttl_events", "count"], **extra}), encoding="utf-8")
        pairs.append((spec, base / name))
    real_flink.generate(pairs)
    return [out for _, out in pairs]


def test_rich_types_restore_to_what_the_job_wrote(real_flink: ModuleType, rich: list[Path]) -> None:
    results = real_flink.restore([(c / "savepoint", c / "spec.json") for c in rich])
    for case, result in zip(rich, results, strict=True):
        assert result.ok, (case.name, _chain(result))
        want = expected(case)
        assert _got(result.entries) == want, case.name
        rows = [v for (_, s), v in want.items() if s == "events" and v is not None]
        # the values are there to compare: decimals with their scale, nanoseconds, collections, nulls
        assert any(r["big"] is not None and r["big"].count(".") == 1 and len(r["big"].split(".")[1]) == 6
                   for r in rows)
        assert any(r["atNanos"] is not None and len(r["atNanos"].rsplit(".", 1)[-1]) == 9 for r in rows)
        assert any(r["scores"] for r in rows) and any(r["bag"] for r in rows) and any(r["tags"] == [] for r in rows)
        assert any(r["detail"] is None for r in rows) and any(r["detail"] and r["detail"]["byKey"] for r in rows)


def test_rich_types_migrated_by_statemorph_restore_in_real_flink(
        real_flink: ModuleType, rich: list[Path], tmp_path: Path) -> None:
    """statemorph migrates the rich events states to RICH_EVOLVED; Flink restores the result with
    that type and reads every value back, matched by field name, added fields null."""
    items = []
    for case in rich:
        schema = tmp_path / f"{case.name}.toml"
        schema.write_text("".join(f"[operators.state-op.states.{s}]\ntype = '''{RICH_EVOLVED}'''\n"
                                  for s in ("events", "ttl_events")), encoding="utf-8")
        dst = tmp_path / f"{case.name}-v2"
        run = _statemorph("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))
        assert run.returncode == 0, (case.name, run.stdout, run.stderr)
        items.append((dst, case / "spec.json"))
    results = real_flink.restore(items, events_type=RICH_EVOLVED)
    for case, result in zip(rich, results, strict=True):
        assert result.ok, (case.name, _chain(result))
        want = {(k, s): reshape(v, RICH_EVOLVED_FIELDS) if s in ("events", "ttl_events") else v
                for (k, s), v in expected(case).items()}
        assert _got(result.entries) == want, case.name
