"""Check statemorph against byte vectors recorded from real Flink 2.3.0 (ci/golden/generate.sh).

Fully data-driven: every line of every ``tests/data/golden/*.jsonl`` file is one test case, so new
vector lines from the same generator are picked up without code changes. Line kinds:

- value lines: ``to_bytes(value) == hex`` and ``from_bytes(hex) == value`` (NaN-aware,
  RowKind-aware, dict order = byte order);
- snapshot lines: ``write_versioned_snapshot(ser.snapshot_configuration()) == snapshot_hex``;
  reading those bytes back restores a serializer that writes the same snapshot (and, when no
  user class is involved, equals the original);
- compat lines: the old serializer's snapshot, written and read back, judges the new serializer
  with the result Flink 2.3 gave (``newSnapshot.resolveSchemaCompatibility(oldSnapshot)``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from snapshots.specs import World, mismatch, parse_spec, without_classes

from statemorph.errors import StateFormatError
from statemorph.migration import migrate_bytes
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

HERE = Path(__file__).parent
RESULTS = {
    "COMPATIBLE_AS_IS": "is_compatible_as_is",
    "COMPATIBLE_AFTER_MIGRATION": "is_compatible_after_migration",
    "COMPATIBLE_WITH_RECONFIGURED_SERIALIZER": "is_compatible_with_reconfigured_serializer",
    "INCOMPATIBLE": "is_incompatible",
}


# Vector files with a test module of their own: flink_rowdata.jsonl holds Flink's
# RowDataSerializerSnapshot, which statemorph writes through ``flink_snapshot_configuration()``
# (``snapshot_configuration()`` keeps the field names Flink's format drops); see
# test_golden_flink_rowdata.py. operator_ids.jsonl holds uid -> OperatorID pairs: test_operator_ids.py.
OWN_TESTS = {"flink_rowdata", "operator_ids"}


def _load() -> dict[str, list[Any]]:
    kinds: dict[str, list[Any]] = {"value": [], "snapshot": [], "compat": [], "migration": []}
    for path in sorted((HERE.parent / "data" / "golden").glob("*.jsonl")):
        if path.stem in OWN_TESTS:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            case = json.loads(line)
            if "new_hex" in case:
                kind = "migration"
            elif "result" in case:
                kind = "compat"
            elif "snapshot_hex" in case:
                kind = "snapshot"
            elif "hex" in case:
                kind = "value"
            else:
                continue  # a generator *input* line (no Flink output yet), e.g. my_cases.jsonl
            kinds[kind].append(pytest.param(case, id=f"{path.stem}:{case['case']}"))
            case["_where"] = f"{path.name}:{n}"
    return kinds


CASES = _load()


def test_vector_files_are_present_and_well_formed() -> None:
    assert len(CASES["value"]) >= 300
    assert len(CASES["snapshot"]) >= 30
    assert len(CASES["compat"]) >= 15
    assert len(CASES["migration"]) >= 15
    for kind, required in (
        ("value", {"serializer", "value", "hex"}),
        ("snapshot", {"serializer", "snapshot_hex", "envelope_hex"}),
        ("compat", {"old", "new", "result"}),
        ("migration", {"old", "new", "result", "old_value", "old_hex", "new_value", "new_hex"}),
    ):
        for p in CASES[kind]:
            case = p.values[0]
            assert required <= case.keys(), case["_where"]
            if kind in ("compat", "migration"):
                assert case["result"] in RESULTS, case["_where"]
            else:
                parse_spec(case["serializer"])  # every SPEC parses


@pytest.mark.parametrize("case", CASES["value"])
def test_write_matches_flink(case: dict[str, Any]) -> None:
    world = World()
    ser = world.serializer(case["serializer"])
    value = world.value(case["serializer"], case["value"])
    assert ser.to_bytes(value).hex() == case["hex"], f"{case['_where']}: {case['serializer']} value {value!r}"


WRITTEN = [p for p in CASES["value"] if "written" in p.values[0]]


@pytest.mark.parametrize("case", WRITTEN)
def test_write_of_unnormalised_input_matches_flink(case: dict[str, Any]) -> None:
    """``written`` is the generator's input where Flink normalised it on the way (0.1 as a FLOAT,
    a lone surrogate in StringData, nanoseconds of a TIMESTAMP(3)); writing it gives ``hex`` too."""
    world = World()
    ser = world.serializer(case["serializer"])
    value = world.value(case["serializer"], case["written"])
    assert ser.to_bytes(value).hex() == case["hex"], f"{case['_where']}: {case['serializer']} input {value!r}"


@pytest.mark.parametrize("case", CASES["value"])
def test_read_matches_flink(case: dict[str, Any]) -> None:
    world = World()
    ser = world.serializer(case["serializer"])
    expected = world.value(case["serializer"], case["value"])
    got = ser.from_bytes(bytes.fromhex(case["hex"]))
    bad = mismatch(expected, got)
    assert bad is None, f"{case['_where']}: {case['serializer']}: {bad}"


@pytest.mark.parametrize("case", CASES["value"])
def test_serializer_restored_from_snapshot_reads_and_writes_flink_bytes(case: dict[str, Any]) -> None:
    """Migration reads old bytes with ``snapshot.restore_serializer()``, which has no user classes:
    enum constants come back as names, POJOs as dicts. It must still read and write Flink's bytes."""
    world = World()
    ser = world.serializer(case["serializer"])
    restored = read_versioned_snapshot(write_versioned_snapshot(ser.snapshot_configuration())).restore_serializer()
    data = bytes.fromhex(case["hex"])
    expected = without_classes(world.value(case["serializer"], case["value"]), world)
    bad = mismatch(expected, restored.from_bytes(data))
    assert bad is None, f"{case['_where']}: restored {case['serializer']}: {bad}"
    assert restored.to_bytes(expected).hex() == case["hex"], f"{case['_where']}: restored {case['serializer']}"


@pytest.mark.parametrize("case", CASES["snapshot"])
def test_snapshot_matches_flink(case: dict[str, Any]) -> None:
    ser = World().serializer(case["serializer"])
    got = write_versioned_snapshot(ser.snapshot_configuration()).hex()
    assert got == case["snapshot_hex"], f"{case['_where']}: snapshot of {case['serializer']}"


@pytest.mark.parametrize("case", CASES["snapshot"])
def test_snapshot_envelope_matches_flink(case: dict[str, Any]) -> None:
    """``writeSerializerSnapshot``: the top-level form (``i32 2 ‖ VERSIONED``) in state meta data."""
    ser = World().serializer(case["serializer"])
    assert write_serializer_snapshot(ser.snapshot_configuration()).hex() == case["envelope_hex"], case["_where"]
    restored = read_serializer_snapshot(bytes.fromhex(case["envelope_hex"]))
    assert write_versioned_snapshot(restored).hex() == case["snapshot_hex"], case["_where"]


@pytest.mark.parametrize("case", CASES["snapshot"])
def test_snapshot_restores(case: dict[str, Any]) -> None:
    spec = parse_spec(case["serializer"])
    blob = bytes.fromhex(case["snapshot_hex"])
    restored = read_versioned_snapshot(blob).restore_serializer()
    assert write_versioned_snapshot(restored.snapshot_configuration()) == blob, case["_where"]
    if not spec.has_user_classes():
        # Enum / POJO serializers restored without their Python class are a different flavour
        # (constant names, dicts) by design; everything else restores to an equal serializer.
        assert restored == World().serializer(spec), case["_where"]


@pytest.mark.parametrize("case", CASES["compat"])
def test_compatibility_matches_flink(case: dict[str, Any]) -> None:
    old_ser = World().serializer(case["old"])
    new_ser = World().serializer(case["new"])  # a separate world: classes may have changed
    old_snap = read_versioned_snapshot(write_versioned_snapshot(old_ser.snapshot_configuration()))
    result = old_snap.resolve_schema_compatibility(new_ser)
    verdict = {name: getattr(result, method)() for name, method in RESULTS.items()}
    assert verdict[case["result"]], (
        f"{case['_where']}: {case['old']} -> {case['new']}: Flink says {case['result']}, got {result!r}"
    )
    assert sum(verdict.values()) == 1, f"{case['_where']}: ambiguous result {result!r}"


@pytest.mark.parametrize("case", CASES["migration"])
def test_migration_matches_flink_restore(case: dict[str, Any]) -> None:
    """One old value through a schema change: ``migrate_bytes`` must produce the bytes Flink 2.3's
    restore writes (old bytes read by the restored old serializer, written by the new one)."""
    old_world, new_world = World(), World()
    old_ser = old_world.serializer(case["old"])
    new_ser = new_world.serializer(case["new"])
    old_value = old_world.value(case["old"], case["old_value"])
    where = f"{case['_where']}: {case['old']} -> {case['new']}"
    assert old_ser.to_bytes(old_value).hex() == case["old_hex"], where
    prior = read_versioned_snapshot(write_versioned_snapshot(old_ser.snapshot_configuration()))
    compat = prior.resolve_schema_compatibility(new_ser)
    assert getattr(compat, RESULTS[case["result"]])(), where
    assert migrate_bytes(prior, new_ser, bytes.fromhex(case["old_hex"])).hex() == case["new_hex"], where
    # RECONFIGURED keeps the bytes; they are read by the reconfigured serializer (old enum order).
    reader = compat.get_reconfigured_serializer() if compat.is_compatible_with_reconfigured_serializer() else new_ser
    bad = mismatch(new_world.value(case["new"], case["new_value"]), reader.from_bytes(bytes.fromhex(case["new_hex"])))
    assert bad is None, f"{where}: {bad}"


def _cuts(n: int) -> list[int]:
    """Strict prefix lengths to try: all of them for short values, a spread for long ones."""
    if n <= 40:
        return list(range(n))
    return sorted({0, 1, 2, 3, 4, 5, 7, 8, 9, n // 3, n // 2, n - 9, n - 8, n - 5, n - 4, n - 2, n - 1})


@pytest.mark.parametrize("case", CASES["value"])
def test_cut_or_padded_flink_bytes_raise_typed_errors(case: dict[str, Any]) -> None:
    """Every strict prefix of real Flink bytes is truncated data (the formats are prefix-free), and
    a trailing byte is malformed: both must raise a StateFormatError, never IndexError & co."""
    ser = World().serializer(case["serializer"])
    data = bytes.fromhex(case["hex"])
    for cut in _cuts(len(data)):
        with pytest.raises(StateFormatError):
            ser.from_bytes(data[:cut])
    with pytest.raises(StateFormatError):
        ser.from_bytes(data + b"\x00")
