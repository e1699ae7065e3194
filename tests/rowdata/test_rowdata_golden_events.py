"""The issue's Events example against real Flink bytes: migrating Flink's old-schema rows gives
exactly the bytes Flink 2.3 writes for the same rows in the new schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statemorph.migration import migrate_bytes
from statemorph.serializers import RowDataSerializer
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "rowdata.jsonl"


def _cases(prefix: str) -> dict[str, dict[str, object]]:
    if not GOLDEN.exists():
        return {}
    out = {}
    for line in GOLDEN.read_text().splitlines():
        case = json.loads(line)
        if case["case"].startswith(prefix):
            out[case["case"].rsplit("/", 1)[1]] = case
    return out


OLD = _cases("rowdata/events_old/")
NEW = _cases("rowdata/events_new/")
PAIRS = sorted(set(OLD) & set(NEW))


def _type(case: dict[str, object]) -> str:
    spec = str(case["serializer"])
    assert spec.startswith("RowData<") and spec.endswith(">")
    return spec[len("RowData<"):-1]


@pytest.mark.skipif(not PAIRS, reason="golden rowdata vectors not generated")
@pytest.mark.parametrize("index", PAIRS)
def test_flink_old_rows_migrate_to_flink_new_bytes(index: str) -> None:
    old, new = OLD[index], NEW[index]
    old_s, new_s = RowDataSerializer(_type(old)), RowDataSerializer(_type(new))
    snap = read_versioned_snapshot(write_versioned_snapshot(old_s.snapshot_configuration()))
    compat = snap.resolve_schema_compatibility(new_s)
    assert compat.is_compatible_after_migration()
    assert compat.reason == "metadata: added location, appVersion, sessionId; reordered"
    migrated = migrate_bytes(snap, new_s, bytes.fromhex(str(old["hex"])))
    assert migrated.hex() == new["hex"]
