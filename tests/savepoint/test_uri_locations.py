"""Savepoint locations given as ``file://`` URIs go through the same pyarrow.fs staging as an object
store (no server needed), and what the command prints names the URIs, never the staging paths."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.cli import main
from statemorph.engine import read_state_table, write_state
from statemorph.savepoint.storage import is_uri

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT, location STRING>>"


def test_uris_and_paths() -> None:
    assert is_uri("s3://bucket/sp") and is_uri("file:///tmp/sp") and is_uri("gs://b/p")
    assert not is_uri("/tmp/sp") and not is_uri("relative/sp") and not is_uri("odd:name")


def test_migrate_between_file_uris(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = list(range(30))
    table = pa.table({"key": keys, "eventId": keys,
                      "metadata": [{"userId": k, "timestamp": k, "deviceType": "tv"} for k in keys]})
    write_state(tmp_path / "sp", table, name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(EVENTS), value=["eventId", "metadata"])
    schema = tmp_path / "new.toml"
    schema.write_text(f'[states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    src, dst = f"file://{tmp_path}/sp", f"file://{tmp_path}/out"

    assert main(["migrate", src, "--schema", str(schema), "--out", dst, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["source"], doc["destination"]) == (src, dst)
    got = read_state_table(tmp_path / "out", "events")
    assert got.num_rows == 30 and got.column("metadata").type.get_field_index("location") == 3

    assert main(["migrate", src, "--schema", str(schema), "--out", dst]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err
    assert main(["inspect", dst]) == 0
    out = capsys.readouterr().out
    assert dst in out and "statemorph-src-" not in out
