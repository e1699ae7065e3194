"""``check --json`` and ``migrate --json`` on a Flink savepoint: the documented shapes
(docs/cli.md) with the operators of the savepoint, and the quiet mode."""

from __future__ import annotations

import json
from pathlib import Path

from savepoint.flink.flink_cases import EVOLVED_EVENTS, case_spec, committed_cases
from savepoint.flink.format_helpers import state_operator

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


def test_inspect_shows_the_timers_namespace(capsys):
    """A timer state has no NAMESPACE_SERIALIZER of its own: its namespace is the second snapshot
    its TimerSerializerSnapshot nests (VoidNamespace for these jobs' timers), shown like any other
    state's namespace, in the text (-v) and in --json, never as None."""
    sp = str(CASE / "savepoint")
    assert main(["inspect", sp, "--json"]) == 0
    states = [s for op in json.loads(capsys.readouterr().out)["operators"] for s in op["states"]]
    timers = [s for s in states if s["kind"] == "timers"]
    assert timers, "the committed Events savepoints register Flink's two timer services"
    assert {s["namespace_type"] for s in timers} == {"VOID (not windowed)"}
    assert main(["inspect", sp, "-v"]) == 0
    text = capsys.readouterr().out
    assert "namespace       None" not in text
    assert text.count("namespace       VOID (not windowed)") == len(states)
