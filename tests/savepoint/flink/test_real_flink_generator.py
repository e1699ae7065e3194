"""The committed Flink savepoints are what real Flink says they are.

Every case under tests/data/flink_savepoints was taken by real Flink (ci/flink, see the README
there); these tests run real Flink 2.3 again to prove (a) each one restores with the types it was
written with and reads back exactly the expected.json its job wrote (timers included: they fire
at the probe's final watermark), (b) Flink refuses to restore the events state with the evolved
Events row type (the negative control a statemorph migration must turn into a success), and that
the generator itself still works. The no-Java checks at the end keep the committed data honest.
"""

from __future__ import annotations

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
    case_states,
    reshape,
    state_listing_cases,
)

CASES = state_listing_cases()
EVENTS_CASES = [c for c in CASES if "events" in case_spec(c)["states"]]


@pytest.fixture(scope="module")
def restored(real_flink: ModuleType) -> dict[str, Any]:
    """Every committed case restored with its own types, in one JVM."""
    results = real_flink.restore([(c / "savepoint", c / "spec.json") for c in CASES])
    return {c.name: r for c, r in zip(CASES, results, strict=True)}


@pytest.fixture(scope="module")
def refused(real_flink: ModuleType) -> dict[str, Any]:
    """Every case with an events state restored with the evolved Events type, in one JVM."""
    results = real_flink.restore([(c / "savepoint", c / "spec.json") for c in EVENTS_CASES], EVOLVED_EVENTS)
    return {c.name: r for c, r in zip(EVENTS_CASES, results, strict=True)}


@pytest.mark.java
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_savepoint_restores_in_flink_to_exactly_what_the_job_wrote(
    case: Path, restored: dict[str, Any], real_flink: ModuleType
) -> None:
    result = restored[case.name]
    assert result.ok, f"Flink refused {case.name}: {result.exception}: {result.message}"
    assert result.entries == real_flink.expected_entries(case)


@pytest.mark.java
@pytest.mark.parametrize("case", EVENTS_CASES, ids=[c.name for c in EVENTS_CASES])
def test_flink_refuses_the_unmigrated_events_state_with_the_evolved_type(case: Path, refused: dict[str, Any]) -> None:
    result = refused[case.name]
    assert not result.ok, f"Flink restored {case.name} with the evolved type without a migration"
    assert result.exception == "org.apache.flink.util.StateMigrationException"
    assert "must not be incompatible" in result.message
    assert "RowDataSerializer" in result.message


@pytest.mark.java
def test_canonical_savepoints_switch_backend_and_parallelism(real_flink: ModuleType) -> None:
    """A canonical savepoint restores into the other backend at another parallelism, same content."""
    heap = SAVEPOINTS / "kinds-hashmap-p1"
    rocks = SAVEPOINTS / "kinds-rocksdb-p2-mp256-string"
    [to_rocks] = real_flink.restore([(heap / "savepoint", heap / "spec.json")], overrides={"backend": "rocksdb"})
    [to_heap] = real_flink.restore(
        [(rocks / "savepoint", rocks / "spec.json")], overrides={"backend": "hashmap", "parallelism": 1}
    )
    assert to_rocks.ok and to_heap.ok, (to_rocks.message, to_heap.message)
    assert to_rocks.entries == real_flink.expected_entries(heap)
    # the RocksDB job wrote a null map value, which the heap backend restores as such
    assert to_heap.entries == real_flink.expected_entries(rocks)


@pytest.mark.java
def test_generator_takes_a_savepoint_that_restores_to_its_expected_values(
    real_flink: ModuleType, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        '{"name": "fresh", "backend": "rocksdb", "compression": true, "parallelism": 2, "max_parallelism": 256,'
        ' "key_type": "string", "keys": 9, "records_per_key": 2,'
        ' "states": ["events", "recent", "totals", "ttl_count", "timers"], "uid": "fresh"}',
        encoding="utf-8",
    )
    real_flink.generate([(spec, tmp_path / "case")])
    case = tmp_path / "case"
    assert (case / "savepoint" / "_metadata").read_bytes()[:8] == bytes.fromhex("4960672d00000006")
    [result] = real_flink.restore([(case / "savepoint", case / "spec.json")])
    assert result.ok, f"{result.exception}: {result.message}"
    expected = real_flink.expected_entries(case)
    assert result.entries == expected
    assert {e["state"] for e in expected} == {"events", "recent", "totals", "ttl_count", "timers"}
    assert len(expected) == 9 * 5


def _matrix() -> list[dict[str, Any]]:
    """The whole cross product the committed set only samples: backend x compression x parallelism.

    Max parallelism (128 / 256), key type (int / string / row) and storage (inline / files) vary along it,
    so each value of each appears with both backends; every state kind is in every job.
    """
    specs = []
    combos = [(b, c, p) for b in ("hashmap", "rocksdb") for c in (False, True) for p in (1, 2)]
    for n, (backend, compression, p) in enumerate(combos):
        mp, key = (128, 256)[n % 2], ("int", "string", "row")[n // 2 % 3]
        storage = ("jobmanager", "filesystem")[n % 3 == 0]
        specs.append(
            {
                "name": f"{backend}-{'snappy' if compression else 'plain'}-p{p}-mp{mp}-{key}-{storage}",
                "backend": backend,
                "compression": compression,
                "parallelism": p,
                "max_parallelism": mp,
                "key_type": key,
                "keys": 10,
                "records_per_key": 2,
                "storage": storage,
                "inline_threshold": 256,
                "uid": "matrix",
            }
        )
    return specs


@pytest.mark.java
@pytest.mark.slow
def test_whole_matrix_takes_savepoints_that_restore_to_what_the_jobs_wrote(
    real_flink: ModuleType, tmp_path: Path
) -> None:
    pairs = []
    for spec in _matrix():
        path = tmp_path / f"{spec['name']}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        pairs.append((path, tmp_path / spec["name"]))
    real_flink.generate(pairs)
    results = real_flink.restore([(case / "savepoint", case / "spec.json") for _, case in pairs])
    for (_, case), result in zip(pairs, results, strict=True):
        assert result.ok, f"{case.name}: {result.exception}: {result.message}"
        assert result.entries == real_flink.expected_entries(case), case.name


@pytest.mark.java
def test_generator_rejects_a_bad_spec_with_the_reason(real_flink: ModuleType, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text('{"name": "bad", "backend": "memory"}', encoding="utf-8")
    with pytest.raises(real_flink.FlinkRunError, match="backend must be one of"):
        real_flink.generate([(spec, tmp_path / "case")])
    assert not (tmp_path / "case").exists()


def test_reshape_matches_fields_by_name_and_nulls_the_added_ones() -> None:
    old = {"eventId": 7, "metadata": {"userId": 3, "timestamp": 1700000000000, "deviceType": "phone"}}
    assert reshape(old, EVOLVED_EVENTS_FIELDS) == {
        "eventId": 7,
        "metadata": {
            "deviceType": "phone",
            "location": None,
            "userId": 3,
            "timestamp": 1700000000000,
            "appVersion": None,
            "sessionId": None,
        },
    }
    assert reshape({"eventId": 8, "metadata": None}, EVOLVED_EVENTS_FIELDS) == {"eventId": 8, "metadata": None}


# ----------------------------------------------------------------------------- no Java needed


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_committed_case_is_complete(case: Path) -> None:
    """expected.json has every state of every key; _metadata has the version of its Flink; files iff filesystem."""
    spec, states = case_spec(case), case_states(case)
    entries = json.loads((case / "expected.json").read_text(encoding="utf-8"))["entries"]
    assert len(entries) == spec["keys"] * len(states)
    assert [e["state"] for e in entries] == [s for s in states for _ in range(spec["keys"])]
    version = {"2.3.0": 6, "1.20.3": 4}[spec["flink"]]
    head = (case / "savepoint" / "_metadata").read_bytes()[:8]
    assert head == bytes.fromhex("4960672d") + version.to_bytes(4, "big")
    files = [p for p in (case / "savepoint").iterdir() if p.name != "_metadata"]
    assert bool(files) == (spec.get("storage") == "filesystem"), "state files exactly when filesystem storage was used"
