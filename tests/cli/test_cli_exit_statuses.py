"""One exit-status table (``statemorph.errors.ExitCode``) for every verb: the same kind of failure
gives the same status whichever verb meets it, and under ``-q`` / ``--json`` stderr is exactly one
``statemorph: error:`` line. Also: stdout closed early by its reader is no traceback."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli.events_savepoint import EVOLVED, schema, write_savepoint
from processes import child_env

from statemorph.cli import main
from statemorph.errors import ExitCode, NotCanonicalSavepointError, UnsupportedStateError
from statemorph.io import DataOutputSerializer

FLINK_SP = Path(__file__).parents[1] / "data" / "flink_savepoints" / "events-hashmap-p1" / "savepoint"
FLINK_SCHEMA = ("[operators.events-state.states.events]\n"
                "type = 'ROW<f0 BIGINT, f1 ROW<userId INT, `timestamp` BIGINT, deviceType STRING, x INT>>'\n")


def only_error_line(err: str, *needles: str) -> str:
    """``err`` is one ``statemorph: error:`` line holding every needle, and nothing else but
    statemorph's own indented detail lines under it (the states an incompatible plan names)."""
    lines = err.splitlines()
    assert lines and lines[0].startswith("statemorph: error: "), err
    assert all(line.startswith("  ") for line in lines[1:]), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


def verbs(sp: str, tmp_path: Path, schema_file: str) -> dict[str, list[str]]:
    """Every verb that reads a savepoint, quiet, on ``sp``."""
    return {"inspect": ["inspect", sp, "-q"], "check": ["check", sp, "--schema", schema_file, "-q"],
            "migrate": ["migrate", sp, "--schema", schema_file, "--out", str(tmp_path / "out"), "-q"],
            "convert": ["convert", sp, "--out", str(tmp_path / "out"), "-q"]}


@pytest.mark.parametrize("where", ["empty", "above a Flink savepoint", "above a Parquet savepoint"])
def test_a_folder_that_is_no_savepoint_is_a_usage_error_for_every_verb(tmp_path, capsys, where):
    """Not damage (4): nothing says a savepoint was there. The line names both metadata files."""
    folder = tmp_path / "folder"
    folder.mkdir()
    if where == "above a Flink savepoint":
        (folder / "savepoint").mkdir()
        (folder / "savepoint" / "_metadata").write_bytes((FLINK_SP / "_metadata").read_bytes())
    elif where == "above a Parquet savepoint":
        write_savepoint(folder / "sp", n=2)
    for verb, argv in verbs(str(folder), tmp_path, schema(tmp_path, EVOLVED)).items():
        assert main(argv) == ExitCode.USAGE, verb
        captured = capsys.readouterr()
        assert captured.out == ""
        only_error_line(captured.err, f"{folder} is not a savepoint", "_metadata ", "_metadata.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["_metadata", "_metadata.json"])
def test_a_fifo_as_metadata_is_the_same_status_for_every_verb(tmp_path, capsys, name):
    """A FIFO named like a metadata file claims that form and is refused unread (never waited on)."""
    sp = tmp_path / "sp"
    sp.mkdir()
    os.mkfifo(sp / name)
    for verb, argv in verbs(str(sp), tmp_path, schema(tmp_path, EVOLVED)).items():
        assert main(argv) == ExitCode.DAMAGED_SAVEPOINT, verb
        only_error_line(capsys.readouterr().err, f"{name}:", "FIFO")


def test_a_missing_parent_of_out_is_a_usage_error(tmp_path, capsys):
    """Checked before anything is written, for both forms and both writing verbs: status 2, not 4."""
    parquet = write_savepoint(tmp_path / "sp", n=3)
    flink_schema = tmp_path / "flink.toml"
    flink_schema.write_text(FLINK_SCHEMA, encoding="utf-8")
    out = str(tmp_path / "no" / "such" / "out")
    for argv in (["migrate", parquet, "--schema", schema(tmp_path, EVOLVED), "--out", out, "--json"],
                 ["migrate", str(FLINK_SP), "--schema", str(flink_schema), "--out", out, "--json"],
                 ["convert", str(FLINK_SP), "--out", out, "--json"]):
        assert main(argv) == ExitCode.USAGE, argv
        captured = capsys.readouterr()
        only_error_line(captured.err, "parent directory", "does not exist")
        assert json.loads(captured.out)["exit_status"] == ExitCode.USAGE
    assert not (tmp_path / "no").exists()


def _unknown_snapshot() -> bytes:
    out = DataOutputSerializer()
    out.write_utf("com.example.NotRegistered$Snapshot")
    out.write_int(1)
    return out.get_copy_of_buffer()


@pytest.mark.parametrize(("snapshot", "status", "reason"), [
    (_unknown_snapshot(), ExitCode.UNSUPPORTED, "unsupported state"),
    (b"\x00\x40trunc", ExitCode.INCOMPATIBLE, "value serializer snapshot"),
], ids=["unknown", "damaged"])
def test_an_unreadable_value_snapshot_is_one_status_whatever_the_serializer_line(tmp_path, capsys, snapshot, status,
                                                                                reason):
    """``serializer = "auto"`` and an explicit family answer alike for a value snapshot statemorph
    cannot read: one of a class it does not know is an opaque state's, carried but never given a
    new type (unsupported, 7); a damaged one makes the state incompatible (3), the plan naming the
    snapshot. Neither blames the schema file."""
    sp = Path(write_savepoint(tmp_path / "sp", n=3))
    doc = json.loads((sp / "_metadata.json").read_text())
    doc["states"][0]["value_serializer"] = base64.b64encode(snapshot).decode()
    (sp / "_metadata.json").write_text(json.dumps(doc))
    auto = schema(tmp_path, EVOLVED, "auto.toml")
    explicit = tmp_path / "explicit.toml"
    explicit.write_text(f"[states.events]\nserializer = 'rowdata'\ntype = '''{EVOLVED}'''\n", encoding="utf-8")
    for schema_file in (auto, str(explicit)):
        assert main(["check", str(sp), "--schema", schema_file, "--json"]) == status
        captured = capsys.readouterr()
        if status == ExitCode.UNSUPPORTED:  # refused before a plan: the error's one line
            only_error_line(captured.err, reason)
        else:  # the plan names the snapshot
            assert captured.err == ""
            state = json.loads(captured.out)["states"][0]
            assert state["action"] == "incompatible" and reason in state["reason"]
        assert main(["migrate", str(sp), "--schema", schema_file, "--out", str(tmp_path / "out"), "-q"]) == status
        only_error_line(capsys.readouterr().err, reason if status == ExitCode.UNSUPPORTED else "cannot be restored")
    assert not (tmp_path / "out").exists()


def test_the_table_keeps_its_numbers():
    """Scripts test these numbers: 0-6 as before, new statuses after them."""
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 130, 141]
    assert UnsupportedStateError("x").exit_code == ExitCode.UNSUPPORTED == 7
    assert NotCanonicalSavepointError("x").exit_code == ExitCode.UNSUPPORTED
    documented = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert f"\n| {int(code)} |" in documented, f"docs/cli.md does not document exit status {int(code)}"


@pytest.mark.parametrize("argv", [["inspect", "SP"], ["inspect", "SP", "--json"], ["inspect", "FLINK"],
                                  ["check", "SP", "--schema", "S", "--json"]])
def test_stdout_closed_by_its_reader_is_no_traceback(tmp_path, argv):
    """``statemorph inspect SP | head``: the reader is gone before the first line; the command
    stops quietly with the shell's status for SIGPIPE."""
    sp = write_savepoint(tmp_path / "sp", n=3)
    argv = [sp if a == "SP" else str(FLINK_SP) if a == "FLINK" else schema(tmp_path, EVOLVED) if a == "S" else a
            for a in argv]
    proc = subprocess.Popen([sys.executable, "-m", "statemorph", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env(), cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before reading anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == ExitCode.BROKEN_PIPE, err
    assert err == "", err
