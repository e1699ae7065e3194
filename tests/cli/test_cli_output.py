"""The command line as scripts and people meet it: ``--json`` documents (shapes in docs/cli.md),
``--quiet`` / ``-v``, one line for a missing optional dependency (never a traceback), and carets
that point at the offending column of a type string."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli.events_savepoint import BROKEN, EVENTS, EVOLVED, schema, write_savepoint
from processes import child_env

from statemorph import serializers as S
from statemorph.cli import main


@pytest.fixture()
def savepoint(tmp_path):
    return write_savepoint(tmp_path / "sp")


def run_json(argv, capsys):
    status = main(argv)
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


# -- --json --------------------------------------------------------------------------------------

def test_inspect_json_shape(savepoint, capsys):
    status, doc, _ = run_json(["inspect", savepoint, "--json"], capsys)
    assert status == 0
    assert doc["format"] == "parquet" and doc["max_parallelism"] == 128 and doc["key_type"] == "BIGINT"
    assert doc["entries"] == 60 and doc["problems"] == {}
    by_name = {s["name"]: s for s in doc["states"]}
    assert list(by_name) == ["events", "counts"]
    events, counts = by_name["events"], by_name["counts"]
    for st in (events, counts):
        assert {"name", "kind", "key_type", "namespace_type", "value_type", "ttl", "entries", "bytes"} <= set(st)
        assert st["key_type"] == "BIGINT" and st["ttl"] is False and st["entries"] == 30
        assert st["bytes"] == sum(f["bytes"] for f in st["files"]) > 0
    assert events["kind"] == "value" and events["user_key_type"] is None
    assert events["value_type"] == ("ROW<`eventId` BIGINT, `metadata` ROW<`userId` INT, `timestamp` BIGINT, "
                                    "`deviceType` STRING>>")
    assert counts["kind"] == "map" and counts["value_type"] == "INT" and counts["user_key_type"] == "STRING"
    assert doc["bytes"] > events["bytes"] + counts["bytes"]  # plus the metadata file


@pytest.mark.parametrize(("row_type", "status", "result", "action"), [
    (EVENTS, 0, "as_is", "copy"),
    (EVOLVED, 1, "migration_needed", "migrate"),
    (BROKEN, 3, "incompatible", "incompatible"),
])
def test_check_json(savepoint, tmp_path, capsys, row_type, status, result, action):
    code, doc, _ = run_json(["check", savepoint, "--schema", schema(tmp_path, row_type), "--json"], capsys)
    assert code == status == doc["exit_status"]
    assert doc["result"] == result and doc["savepoint"] == savepoint
    states = {s["name"]: s for s in doc["states"]}
    assert states["events"]["action"] == action and states["events"]["exit_status"] == status
    assert states["events"]["entries"] == 30
    assert states["counts"]["action"] == "keep"
    if status == 1:
        assert states["events"]["reason"] == "value: metadata: added location; reordered"
    if status == 3:
        assert "metadata.userId: INT -> STRING" in states["events"]["reason"]


def test_migrate_json_reports_numbers(savepoint, tmp_path, capsys):
    out = str(tmp_path / "out")
    code, doc, err = run_json(["migrate", savepoint, "--schema", schema(tmp_path, EVOLVED), "--out", out, "--json"],
                              capsys)
    assert code == 0 == doc["exit_status"]
    assert doc["source"] == savepoint and doc["destination"] == out and doc["engine"] == "local"
    assert doc["entries_migrated"] == 30 and doc["entries_copied"] == 30 and doc["entries_skipped"] == 0
    assert doc["seconds"] >= 0 and doc["migrated_entries_per_second"] >= 0
    assert {s["name"]: (s["action"], s["entries_read"], s["entries_written"]) for s in doc["states"]} == {
        "events": ("migrate", 30, 30), "counts": ("keep", 30, 30)}
    assert err == ""  # no progress bar on a pipe


def test_json_error_document(savepoint, tmp_path, capsys):
    out = str(tmp_path / "out")
    code = main(["migrate", savepoint, "--schema", schema(tmp_path, BROKEN), "--out", out, "--json"])
    captured = capsys.readouterr()
    assert code == 3
    doc = json.loads(captured.out)
    assert doc["exit_status"] == 3 and doc["error"].startswith("1 of 2 states")
    assert any("metadata.userId: INT -> STRING" in line for line in doc["detail"])
    assert captured.err.startswith("statemorph: error: 1 of 2 states")
    assert not os.path.exists(out)


# -- --quiet and -v --------------------------------------------------------------------------------

def test_quiet_prints_nothing_and_keeps_the_status(savepoint, tmp_path, capsys):
    assert main(["check", savepoint, "--schema", schema(tmp_path, EVOLVED), "-q"]) == 1
    assert capsys.readouterr().out == ""
    assert main(["migrate", savepoint, "--schema", schema(tmp_path, EVOLVED), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert (tmp_path / "o").is_dir()
    assert main(["check", savepoint, "--schema", schema(tmp_path, BROKEN), "-q"]) == 3
    assert capsys.readouterr().out == ""


def test_quiet_still_reports_errors(savepoint, tmp_path, capsys):
    assert main(["migrate", savepoint, "--schema", schema(tmp_path, BROKEN), "--out", str(tmp_path / "o"), "-q"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("statemorph: error:")


def test_verbose_adds_detail(savepoint, tmp_path, capsys):
    main(["check", savepoint, "--schema", schema(tmp_path, EVOLVED)])
    plain = capsys.readouterr().out
    main(["check", savepoint, "--schema", schema(tmp_path, EVOLVED), "-v"])
    verbose = capsys.readouterr().out
    assert "events: new value type ROW<`eventId` BIGINT, `metadata` ROW<`deviceType` STRING" in verbose
    assert "new value type" not in plain and verbose.startswith(plain.rsplit("result:", 1)[0])
    main(["migrate", savepoint, "--schema", schema(tmp_path, EVOLVED), "--out", str(tmp_path / "o"), "-v"])
    assert "events (value): migrate, 30 entries read, 30 written, 0 skipped" in capsys.readouterr().out
    assert main(["inspect", savepoint, "-v"]) == 0
    assert "statemorph.RowDataSerializerSnapshot" in capsys.readouterr().out


def test_quiet_and_verbose_exclude_each_other(savepoint, capsys):
    with pytest.raises(SystemExit) as e:
        main(["inspect", savepoint, "-q", "-v"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err


# -- missing optional dependencies ------------------------------------------------------------------

def _without(monkeypatch, *modules: str) -> None:
    """Make ``modules`` unimportable in this process (and forget statemorph modules that hold them)."""
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)
    monkeypatch.delitem(sys.modules, "statemorph.state.rocksdb", raising=False)
    monkeypatch.delitem(sys.modules, "statemorph.state.rocksdb_bulk", raising=False)


def _one_error_line(err: str, extra: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("statemorph: error:") and f'pip install "statemorph[{extra}]"' in lines[0]
    assert "Traceback" not in err


def test_spark_engine_without_pyspark_is_one_line(monkeypatch, savepoint, tmp_path, capsys):
    _without(monkeypatch, "pyspark")
    out = tmp_path / "out"
    assert main(["migrate", savepoint, "--schema", schema(tmp_path, EVOLVED), "--out", str(out),
                 "--engine", "spark"]) == 2
    _one_error_line(capsys.readouterr().err, "spark")
    assert not out.exists()


def test_rocksdb_backend_and_avro_without_their_extras(monkeypatch):
    from statemorph.errors import MissingDependencyError

    _without(monkeypatch, "rocksdict", "fastavro")
    with pytest.raises(MissingDependencyError, match=r'pip install "statemorph\[rocksdb\]"') as e:
        from statemorph.state import EmbeddedRocksDBStateBackend  # noqa: F401
    assert isinstance(e.value, ImportError) and e.value.extra == "rocksdb"
    with pytest.raises(MissingDependencyError, match=r'pip install "statemorph\[avro\]"'):
        S.AvroSerializer('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}')


def test_jit_asked_for_without_llvmlite(monkeypatch):
    from statemorph.errors import MissingDependencyError
    from statemorph.kernels import jit

    _without(monkeypatch, "llvmlite")
    monkeypatch.delenv("STATEMORPH_JIT", raising=False)
    assert jit.enabled() is False  # not asked for: the compiled interpreter runs, as documented
    monkeypatch.setenv("STATEMORPH_JIT", "1")
    with pytest.raises(MissingDependencyError, match=r'pip install "statemorph\[jit\]"'):
        jit.enabled()


@pytest.mark.parametrize(("argv", "module", "extra"), [
    (["migrate", "SP", "--schema", "S", "--out", "OUT", "--engine", "spark"], "pyspark", "spark"),
])
def test_missing_extra_in_a_real_process(tmp_path, argv, module, extra):
    """The whole process, as a user runs it: a stand-in module that fails to import shadows the
    real one; stderr is exactly one line, the status 2."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / f"{module}.py").write_text(f"raise ImportError('No module named {module}', name={module!r})\n")
    sp = write_savepoint(tmp_path / "sp", n=3)
    argv = [a.replace("SP", sp).replace("OUT", str(tmp_path / "out")) for a in argv]
    if "S" in argv:
        argv[argv.index("S")] = schema(tmp_path, EVOLVED)
    env = child_env(str(shadow))
    done = subprocess.run([sys.executable, "-m", "statemorph", *argv], env=env, capture_output=True, text=True,
                          check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr, extra)


# -- carets ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("row_type", "token"), [
    ("ROW<eventId BIGINT, metadata ROW<userId INTT>>", "INTT"),
    ("INTT", "INTT"),
    ("ROW<a INT b INT>", "b INT"),
    ("ROW<a INT, a BIGINT>", "a BIGINT"),
    ("ROW<a DECIMAL(10, 12)>", "12"),
    ("ROW<a VARCHAR(0), b INT>", "0)"),
    ("ROW<a TIMESTAMP(12)>", "12"),
    ("ARRAY<INT", ""),  # end of input: the caret sits just past the text
])
def test_caret_points_at_the_offending_column(savepoint, tmp_path, capsys, row_type, token):
    assert main(["check", savepoint, "--schema", schema(tmp_path, row_type)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("statemorph: error:") and "does not parse" in err[0]
    text_line = next(i for i, line in enumerate(err) if line == "  " + row_type)
    caret = err[text_line + 1]
    assert caret.strip() == "^"
    column = caret.index("^") - 2
    expected = row_type.rindex(token) if token else len(row_type)
    assert column == expected, f"caret at {column}, token {token!r} at {expected}:\n" + "\n".join(err)


def test_caret_in_a_multi_line_type(savepoint, tmp_path, capsys):
    p = tmp_path / "multi.toml"
    p.write_text('[states.events]\ntype = """ROW<\n  eventId BIGINT,\n\tmetadata STRNG>"""\n', encoding="utf-8")
    assert main(["check", savepoint, "--schema", str(p)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "(line 3, column 11)" in err[0]
    i = next(i for i, line in enumerate(err) if line.endswith("metadata STRNG>"))
    text, caret = err[i], err[i + 1]
    # the caret line repeats the text's tabs and spaces up to the offending word
    before = text[:text.index("STRNG")]
    assert caret == "".join(c if c == "\t" else " " for c in before) + "^"


# -- Spark session lifecycle ----------------------------------------------------------------------------

@pytest.mark.spark
def test_spark_engine_run_has_no_error_lines(tmp_path):
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    sp = write_savepoint(tmp_path / "sp", n=5)
    out = tmp_path / "out"
    env = child_env(PYSPARK_PYTHON=sys.executable)
    done = subprocess.run([sys.executable, "-m", "statemorph", "migrate", sp, "--schema", schema(tmp_path, EVOLVED),
                           "--out", str(out), "--engine", "spark", "--master", "local[1]", "--json"],
                          env=env, capture_output=True, text=True, check=False, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no log4j, no JVM warning, no stage bar: the JVM logs to a file
    doc = json.loads(done.stdout)
    assert doc["engine"] == "spark" and doc["entries_migrated"] == 5 and out.is_dir()


def test_a_spark_tasks_typed_error_is_found_in_its_traceback_text() -> None:
    """Spark wraps a task's error in its own exception with the worker's traceback as text: the
    last ``statemorph.errors.<Class>: <message>`` line gives the class (of statemorph.errors only)
    and the message; anything else is not a task error of ours."""
    from statemorph.errors import FlinkSavepointError, error_of_task

    text = ("An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
            '  File "worker.py", line 1, in main\nstatemorph.errors.SnapshotError: inner\n\nDuring handling...\n'
            "statemorph.errors.FlinkSavepointError: sp key group 127: corrupt Snappy-framed key group\n"
            "\tat org.apache.spark.api.python.BasePythonRunner")
    e = error_of_task(RuntimeError(text))
    assert isinstance(e, FlinkSavepointError) and e.exit_code == 4
    assert str(e) == "sp key group 127: corrupt Snappy-framed key group (in a Spark task)"
    assert error_of_task(RuntimeError("statemorph.errors.check_on_error: not a class")) is None
    assert error_of_task(RuntimeError("statemorph.errors.ExitCode: an enum, not an error")) is None
    assert error_of_task(RuntimeError("builtins.ValueError: nothing of ours")) is None



def test_a_savepoint_file_spark_cannot_read_is_damage() -> None:
    """Spark's own Parquet reader failing in a task (``FAILED_READ_FILE``, a page CRC mismatch as
    the deepest cause) is a SavepointError naming the file, as the local engine reports it."""
    from statemorph.errors import SavepointError, error_of_task

    text = ("An error occurred while calling o67.parquet.\n: org.apache.spark.SparkException: Job aborted.\n"
            "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading "
            "file file:///tmp/sp/state-00000/part-00000.parquet.  SQLSTATE: KD001\n\tat org.apache.spark.X\n"
            "Caused by: org.apache.parquet.io.ParquetDecodingException: could not verify page integrity, CRC "
            "checksum verification failed\n\tat org.apache.parquet.Y")
    e = error_of_task(RuntimeError(text))
    assert type(e) is SavepointError and e.exit_code == 4
    assert str(e) == ("/tmp/sp/state-00000/part-00000.parquet: cannot be read: could not verify page integrity, "
                      "CRC checksum verification failed (in a Spark task)")
