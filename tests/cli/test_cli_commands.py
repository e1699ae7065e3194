"""The statemorph command: argument handling, exit statuses, output, and error lines."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.cli import ProgressBar, main
from statemorph.engine.keys import key_groups
from statemorph.errors import UsageError
from statemorph.savepoint import SavepointWriter, read_state_table

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT>>"
BROKEN = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"


@pytest.fixture()
def savepoint(tmp_path):
    """A small savepoint with a RowData value state and an INT map state (bytes from the reference tier)."""
    ks, vs = S.LongSerializer(), S.RowDataSerializer(EVENTS)
    keys = list(range(50))
    common = {
        "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
        "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
        "namespace": pa.array([b"\x00"] * len(keys), pa.binary()),
    }
    path = tmp_path / "sp"
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks) as w:
        w.write_state("events", "value", pa.table({**common, "value": [
            vs.to_bytes((k, (k % 5, 1_700_000_000_000 + k, "phone"))) for k in keys]}), value_serializer=vs)
        w.write_state("counts", "map", pa.table({**common, "user_key": [S.StringSerializer().to_bytes("n")] * 50,
                                                 "value": [S.IntSerializer().to_bytes(k) for k in keys]}),
                      value_serializer=S.IntSerializer(), user_key_serializer=S.StringSerializer())
    return str(path)


def _schema(tmp_path, text, name="new.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_inspect(savepoint, capsys):
    assert main(["inspect", savepoint, "-v"]) == 0
    out = capsys.readouterr().out
    assert "max parallelism 128, key type BIGINT" in out
    assert "2 state(s), 100 entries" in out
    assert "state 'events': value state, 50 entries, 1 file(s)" in out
    assert "ROW<`eventId` BIGINT, `metadata` ROW<`userId` INT, `timestamp` BIGINT, `deviceType` STRING>>" in out
    assert "map key type    STRING" in out and "map value type  INT" in out
    assert "statemorph.RowDataSerializerSnapshot" in out


@pytest.mark.parametrize(
    ("schema", "status", "expected"),
    [
        (f"[states.events]\ntype = '''{EVENTS}'''\n", 0, "restorable as is"),
        (f"[states.events]\ntype = '''{EVOLVED}'''\n", 1, "metadata: added location; reordered"),
        (f"[states.events]\ntype = '''{BROKEN}'''\n", 3, "metadata.userId: INT -> STRING"),
        ("[states.counts]\ntype = 'BIGINT'\n", 3, "type changed from IntSerializer to LongSerializer"),
        ("[states.counts]\ntype = 'INT'\nuser_key_type = 'INT'\n", 3, "map keys cannot be migrated"),
        ("[states.counts]\ntype = 'INT'\nkind = 'value'\n", 3, "state kind changed from map to value"),
    ],
)
def test_check_exit_status(savepoint, tmp_path, capsys, schema, status, expected):
    assert main(["check", savepoint, "--schema", _schema(tmp_path, schema)]) == status
    assert expected in capsys.readouterr().out


def test_migrate_refuses_incompatible_and_writes_nothing(savepoint, tmp_path, capsys):
    before = sorted(os.listdir(tmp_path))
    out = str(tmp_path / "out")
    code = main(["migrate", savepoint, "--schema", _schema(tmp_path, f"[states.events]\ntype = '''{BROKEN}'''\n"),
                 "--out", out])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("statemorph: error: 1 of 2 states")
    assert "state 'events': value: metadata.userId: INT -> STRING" in err
    assert "Traceback" not in err
    assert not os.path.exists(out)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["new.toml"])


def test_migrate_as_is_copies(savepoint, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main(["migrate", savepoint, "--schema", _schema(tmp_path, f"[states.events]\ntype = '''{EVENTS}'''\n"),
                 "--out", out]) == 0
    text = capsys.readouterr().out
    assert "nothing needed migration" in text
    for state in ("events", "counts"):
        assert read_state_table(out, state).equals(read_state_table(savepoint, state))


def test_migrate_existing_destination(savepoint, tmp_path, capsys):
    schema = _schema(tmp_path, f"[states.events]\ntype = '''{EVENTS}'''\n")
    assert main(["migrate", savepoint, "--schema", schema, "--out", savepoint]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["inspect", "/nonexistent/sp"], "does not exist"),
        (["check", "/nonexistent/sp", "--schema", "/nonexistent/s.toml"], "cannot read schema file"),
    ],
)
def test_user_mistakes_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("statemorph: error:") and message in err and "Traceback" not in err


def test_bad_schema_file(savepoint, tmp_path, capsys):
    assert main(["check", savepoint, "--schema", _schema(tmp_path, "[states.events]\ntype = 'ROW<x INTT>'\n")]) == 2
    err = capsys.readouterr().err
    assert "statemorph: error:" in err and "does not parse" in err


def test_damaged_savepoint(savepoint, tmp_path, capsys):
    with open(os.path.join(savepoint, "_metadata.json"), "w") as f:
        f.write("{not json")
    assert main(["inspect", savepoint]) == 4
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["check", "sp"], ["migrate", "sp", "--schema", "s.toml"],
                                  ["migrate", "a", "--schema", "s", "--out", "b", "--threads", "0"],
                                  ["migrate", "a", "--schema", "s", "--out", "b", "--engine", "spark", "--task-bytes",
                                   "64Q"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "usage: statemorph" in capsys.readouterr().err


def test_task_bytes_sizes_spark_tasks_only(savepoint, tmp_path, capsys):
    """``--task-bytes`` is read as a size (``64M``, ``1k``) and refused, with the usage status,
    without the Spark engine it sizes."""
    from statemorph.cli.migrate import byte_size

    assert (byte_size("64M"), byte_size("1k"), byte_size("1_000")) == (64 << 20, 1024, 1000)
    schema = _schema(tmp_path, "[states.events]\ntype = 'BIGINT'\n")
    assert main(["migrate", savepoint, "--schema", schema, "--out", str(tmp_path / "o"), "--task-bytes", "1M"]) == 2
    assert "--task-bytes sizes Spark tasks: it needs --engine spark" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_progress_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    bar = ProgressBar(200, stream)
    bar("events", 100)
    bar("events", 100)
    bar.finish()
    text = stream.getvalue()
    assert "100.0%" in text and "200/200 entries" in text and text.endswith("\n")


def test_progress_bar_is_silent_on_a_pipe():
    stream = io.StringIO()
    bar = ProgressBar(10, stream)
    bar("s", 10)
    bar.finish()
    assert stream.getvalue() == "" and bar.done == 10


def test_bench_passes_extra_arguments_to_pytest(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr("subprocess.call", lambda cmd, env=None: calls.append((cmd, env)) or 0)
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    assert main(["bench", "--dir", str(bench_dir), "--full", "-k", "local"]) == 0
    cmd, env = calls[0]
    assert cmd[-2:] == ["-k", "local"] and "--benchmark-only" in cmd
    assert env["STATEMORPH_SCALE_N"] == "10000000"


def test_bench_without_benchmarks_dir(tmp_path, capsys):
    assert main(["bench", "--dir", str(tmp_path / "nope")]) == 2
    assert "benchmark directory" in capsys.readouterr().err


def test_version(capsys):
    import statemorph

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"statemorph {statemorph.__version__}")


def test_python_dash_m_runs_the_same_command():
    import subprocess
    import sys

    from processes import child_env

    done = subprocess.run([sys.executable, "-m", "statemorph", "check"], env=child_env(), capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2 and "usage: statemorph check" in done.stderr


def test_bench_finds_the_checkout_benchmarks(monkeypatch, tmp_path):
    import statemorph
    from statemorph.cli.bench import find_benchmarks

    checkout = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)  # no ./benchmarks here: the checkout's folder, if any, is used
    if Path(statemorph.__file__).resolve().is_relative_to(checkout / "src"):
        found = find_benchmarks(None)
        assert os.path.isfile(os.path.join(found, "conftest.py"))
        assert os.path.samefile(os.path.dirname(found), checkout)
    else:  # an installed package (CI) has no checkout beside it: one typed line pointing at --dir
        with pytest.raises(UsageError, match="--dir"):
            find_benchmarks(None)
    monkeypatch.chdir(checkout)  # ./benchmarks is found from the checkout root either way
    assert os.path.samefile(find_benchmarks(None), checkout / "benchmarks")


def _corrupt_savepoint(tmp_path):
    ks, vs = S.LongSerializer(), S.RowDataSerializer(EVENTS)
    keys = list(range(10))
    values = [vs.to_bytes((k, (k, 1_700_000_000_000, "phone"))) for k in keys]
    values[4] = values[4][:9]  # truncated in the middle of the row
    path = tmp_path / "bad"
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks) as w:
        w.write_state("events", "value", pa.table({
            "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
            "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
            "namespace": pa.array([b"\x00"] * len(keys), pa.binary()),
            "value": pa.array(values, pa.binary())}), value_serializer=vs)
    return str(path)


def test_migrate_data_error_exit_5_or_skip(tmp_path, capsys):
    bad = _corrupt_savepoint(tmp_path)
    schema = _schema(tmp_path, f"[states.events]\ntype = '''{EVOLVED}'''\n")
    assert main(["migrate", bad, "--schema", schema, "--out", str(tmp_path / "out")]) == 5
    err = capsys.readouterr().err
    assert err.startswith("statemorph: error:") and "row 4" in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "out")
    assert main(["migrate", bad, "--schema", schema, "--out", str(tmp_path / "out2"), "--on-error", "skip"]) == 0
    assert "1 unreadable entries dropped" in capsys.readouterr().out
    assert read_state_table(str(tmp_path / "out2"), "events").num_rows == 9


def test_on_error_choices_come_from_the_one_vocabulary():
    from statemorph.cli.main import build_parser
    from statemorph.engine import ColumnDecoder, ColumnMigrator
    from statemorph.errors import DECODE_COLUMN_ON_ERROR, MIGRATE_ON_ERROR, ON_ERROR_CHOICES
    from statemorph.serializers import IntSerializer

    assert ON_ERROR_CHOICES == ("raise", "skip", "null")
    assert MIGRATE_ON_ERROR == ("raise", "skip") and DECODE_COLUMN_ON_ERROR == ("raise", "null")
    args = ["migrate", "SP", "--schema", "S", "--out", "OUT", "--on-error"]
    assert build_parser().parse_args([*args, "skip"]).on_error == "skip"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*args, "null"])
    with pytest.raises(ValueError, match=r"on_error must be one of \('raise', 'skip'\)"):
        ColumnMigrator(IntSerializer(), IntSerializer(), on_error="null")
    with pytest.raises(ValueError, match=r"on_error must be one of \('raise', 'null'\)"):
        ColumnDecoder(IntSerializer(), on_error="skip")


def test_every_verb_is_exported_by_the_cli_package():
    """Each verb's module (cli/<verb>.py with a ``cmd_<verb>``) is named by ``statemorph.cli``."""
    import importlib
    import pkgutil

    import statemorph.cli as cli

    verbs = [m.name for m in pkgutil.iter_modules(cli.__path__)
             if hasattr(importlib.import_module(f"statemorph.cli.{m.name}"), f"cmd_{m.name}")]
    assert {"convert", "schema"} <= set(verbs)
    assert [v for v in verbs if f"cmd_{v}" not in cli.__all__] == []
