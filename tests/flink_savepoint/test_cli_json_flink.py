"""``check --json`` and ``migrate --json`` on a Flink savepoint: the documented shapes
(docs/cli.md) with the operators of the savepoint, and the quiet mode."""

from __future__ import annotations

import json
from pathlib import Path

from flink_savepoint.flink_cases import EVOLVED_EVENTS, case_spec, committed_cases
from flink_savepoint.format_helpers import state_operator

from statemorph.cli import main
from statemorph.savepoint.flink import FlinkSavepoint

CASE = next(c for c in committed_cases() if "events" in case_spec(c)["states"])


def _schema(tmp_path: Path) -> tuple[str, str]:
    op = state_operator(FlinkSavepoint(CASE / "savepoint"))
    path = tmp_path / "v2.toml"
    path.write_text(f'[operators."{op}".states.events]\ntype = "{EVOLVED_EVENTS}"\n', encoding="utf-8")
    return op, str(path)


def test_check_json_on_a_flink_savepoint(tmp_path, capsys):
    op, schema = _schema(tmp_path)
    assert main(["check", str(CASE / "savepoint"), "--schema", schema, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "flink" and doc["result"] == "migration_needed" and doc["exit_status"] == 1
    (operator,) = doc["operators"]
    assert op in (operator["uid"], operator["uid_hash"]) and operator["exit_status"] == 1
    events = next(s for s in operator["states"] if s["name"] == "events")
    assert events["action"] == "migrate" and "metadata" in events["reason"]
    assert events["entries"] is None or events["entries"] >= 0
    assert [s["name"] for s in doc["states"]] == [s["name"] for s in operator["states"]]


def test_migrate_json_on_a_flink_savepoint(tmp_path, capsys):
    _, schema = _schema(tmp_path)
    dst = tmp_path / "v2"
    assert main(["migrate", str(CASE / "savepoint"), "--schema", schema, "--out", str(dst), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "flink" and doc["destination"] == str(dst) and doc["exit_status"] == 0
    assert doc["entries_migrated"] == sum(s["entries_migrated"] for s in doc["states"]) > 0
    assert {s["name"] for s in doc["states"]} == {"events"} and doc["rewritten_streams"] >= 1
    assert main(["check", str(dst), "--schema", schema, "-q"]) == 0
    assert capsys.readouterr().out == ""
