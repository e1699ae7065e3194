"""tests/data/golden/avro.jsonl is not Flink output: Avro Java wrote it through this project's
encoder of Flink's Avro state format (its README). Each of its values is cross-checked here with a
third Avro implementation: fastavro writes the value statemorph reads from the line's bytes, in
Avro's own binary encoding under the line's schema, and reads back the same value, so the
recorded bytes hold a datum that fastavro, too, takes as one of that schema."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import fastavro
import pytest

from statemorph.serializers import AvroSerializer

LINES = [json.loads(t) for t in (Path(__file__).parents[1] / "data" / "golden" / "avro.jsonl")
         .read_text(encoding="utf-8").splitlines() if t.strip()]


def _same(a: Any, b: Any) -> bool:
    """Equality where a NaN equals a NaN (Avro floats may hold one)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_the_file_has_lines() -> None:
    assert len(LINES) >= 15


@pytest.mark.parametrize("line", LINES, ids=[d["case"] for d in LINES])
def test_fastavro_reads_back_the_value_of_each_line(line: dict[str, Any]) -> None:
    schema = line["serializer"][len("Avro<"):-1]
    value = AvroSerializer(schema).from_bytes(bytes.fromhex(line["hex"]))
    parsed = fastavro.parse_schema(json.loads(schema))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, value)
    buf.seek(0)
    assert _same(fastavro.schemaless_reader(buf, parsed, parsed), value)
