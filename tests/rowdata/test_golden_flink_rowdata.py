"""Flink's RowDataSerializerSnapshot and the Java-serialized streams inside it, against bytes
recorded from real Flink 2.3.0 (``tests/data/golden/flink_rowdata.jsonl``, ci/golden/generate.sh).

- ``logical_type`` lines: ``InstantiationUtil.serializeObject(LogicalType)``: statemorph writes
  the same bytes for the parsed type and reads them back to an equal type;
- ``internal_serializer`` lines: ``serializeObject(InternalSerializers.create(type))`` (what the
  ArrayData / MapData snapshots embed): written byte for byte, read by the whitelisting reader;
- snapshot lines (``RowData<...>``): ``writeVersionedSnapshot`` and the envelope of Flink's
  ``RowDataSerializerSnapshot``: ``flink_snapshot_configuration()`` writes them byte for byte, and
  reading them gives the field types, nested snapshots that write back the same bytes, and a
  serializer for the row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statemorph.io import DataInputDeserializer
from statemorph.javaser import read_logical_type, read_stream, write_logical_type, write_stream
from statemorph.javaser.classes import flink_policy
from statemorph.javaser.tableser import serializer_tree
from statemorph.serializers import FlinkRowDataSerializerSnapshot, RowDataSerializer
from statemorph.types import RowType, parse_type
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

FILE = Path(__file__).resolve().parents[1] / "data" / "golden" / "flink_rowdata.jsonl"
LINES = [json.loads(line) for line in FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
TYPES = [pytest.param(c, id=c["case"]) for c in LINES if "logical_type" in c]
SERIALIZERS = [pytest.param(c, id=c["case"]) for c in LINES if "internal_serializer" in c]
SNAPSHOTS = [pytest.param(c, id=c["case"]) for c in LINES if "snapshot_hex" in c]


def test_the_vector_file_covers_the_golden_types() -> None:
    assert len(TYPES) >= 80 and len(SERIALIZERS) >= 15 and len(SNAPSHOTS) >= 14
    covered = " ".join(c.values[0]["logical_type"] for c in TYPES)
    for word in ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "CHAR(", "VARCHAR(",
                 "STRING", "BINARY(", "VARBINARY(", "BYTES", "DECIMAL(", "DATE", "TIME(", "TIMESTAMP(",
                 "TIMESTAMP_LTZ(", "ARRAY<", "MAP<", "MULTISET<", "ROW<", "NOT NULL", "'the b field'"):
        assert word in covered, word
    names = {c.values[0]["case"] for c in SNAPSHOTS}
    assert {"flink_rowdata/events_old", "flink_rowdata/events_new"} <= names


@pytest.mark.parametrize("case", TYPES)
def test_logical_type_stream_matches_flink(case: dict[str, Any]) -> None:
    t = parse_type(case["logical_type"])
    data = bytes.fromhex(case["javaser_hex"])
    assert write_logical_type(t).hex() == case["javaser_hex"]
    src = DataInputDeserializer(data)
    assert read_logical_type(src) == t
    assert src.available() == 0
    assert parse_type(case["serializable_string"]) == t  # Flink's own printing parses to the same type


@pytest.mark.parametrize("case", SERIALIZERS)
def test_internal_serializer_stream_matches_flink(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["javaser_hex"])
    assert write_stream(serializer_tree(parse_type(case["internal_serializer"]))).hex() == case["javaser_hex"]
    src = DataInputDeserializer(data)
    read_stream(src, flink_policy)
    assert src.available() == 0


def _row(case: dict[str, Any]) -> RowType:
    spec = case["serializer"]
    assert spec.startswith("RowData<") and spec.endswith(">")
    t = parse_type(spec[len("RowData<"):-1])
    assert isinstance(t, RowType)
    return t


@pytest.mark.parametrize("case", SNAPSHOTS)
def test_flink_rowdata_snapshot_matches_flink(case: dict[str, Any]) -> None:
    ser = RowDataSerializer(_row(case))
    snap = ser.flink_snapshot_configuration()
    assert write_versioned_snapshot(snap).hex() == case["snapshot_hex"]
    assert write_serializer_snapshot(snap).hex() == case["envelope_hex"]
    assert write_versioned_snapshot(FlinkRowDataSerializerSnapshot.of(ser)).hex() == case["snapshot_hex"]


@pytest.mark.parametrize("case", SNAPSHOTS)
def test_flink_rowdata_snapshot_reads_back(case: dict[str, Any]) -> None:
    row = _row(case)
    restored = read_serializer_snapshot(bytes.fromhex(case["envelope_hex"]))
    assert isinstance(restored, FlinkRowDataSerializerSnapshot)
    assert restored.field_types == row.field_types
    # Flink's bytes hold no top-level names: the restored row has Flink's generated ones
    assert restored.row_type.field_names == [f"f{i}" for i in range(row.arity)]
    assert write_versioned_snapshot(restored).hex() == case["snapshot_hex"]
    assert read_versioned_snapshot(bytes.fromhex(case["snapshot_hex"])).row_type == restored.row_type
    # the restored serializer writes the same BinaryRowData layout as the named one
    assert restored.restore_serializer().row_type.field_types == RowDataSerializer(row).row_type.field_types
    assert restored.resolve_schema_compatibility(RowDataSerializer(row)).is_compatible_as_is()
