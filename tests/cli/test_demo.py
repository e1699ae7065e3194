"""``statemorph demo`` (what ``ci/demo.sh`` runs): the Events story on a Flink savepoint with the core
install alone. On the savepoint real Flink took (the committed one ci/demo.sh passes) it inspects,
checks (exit 1, and exit 3 for a broken type), migrates and reads back every entry; without a
savepoint it bootstraps one in Flink's format first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from processes import child_env
from savepoint.flink.flink_cases import EVOLVED_EVENTS_FIELDS, reshape
from savepoint.flink.format_helpers import expected

from statemorph.cli import main
from statemorph.cli.demo import NEW_TYPE, OLD_TYPE, OPERATOR, STATE, verify_migrated
from statemorph.engine.flink import read_flink_state_table
from statemorph.errors import StateMigrationError

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy"
EXTRAS = ("rocksdict", "pyspark", "fastavro", "avro", "llvmlite")
"""What the extras bring: the demo (ci/demo.sh installs statemorph without extras) needs none."""


def test_demo_migrates_the_real_flink_savepoint_with_the_core_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for module in EXTRAS:  # the extras' modules fail to import, as on a core install
        (shadow / f"{module}.py").write_text(f"raise ImportError('No module named {module}', name={module!r})\n")
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, "-m", "statemorph", "demo", str(CASE / "savepoint"), "--workdir", str(work)],
                          env=child_env(str(shadow)), capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "state 'events': value state, 600 entries" in out  # inspect
    assert "exit status 1 (0 as is / 1 migration needed / 3 incompatible)" in out  # check
    assert "metadata.userId: INT -> STRING" in out and "exit status 3" in out  # the broken type is refused
    assert "600 values migrated" in out and "all 600 entries: v2 = v1" in out
    assert out.count("\n     v2 {'f0': ") == 3  # a few rows printed
    assert done.stderr == ""
    # what the demo wrote is what Flink must read after the evolution, entry by entry
    new = read_flink_state_table(work / "events-v2", OPERATOR, STATE).to_pylist()
    got = {row["key"]: {"eventId": row["value"]["f0"], "metadata": row["value"]["f1"]} for row in new}
    want = {key: reshape(value, EVOLVED_EVENTS_FIELDS) for (key, state), value in expected(CASE).items()
            if state == STATE}
    assert got == want
    assert (CASE / "savepoint" / "_metadata").is_file()  # the source is only read


def test_demo_bootstraps_a_flink_savepoint_without_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--entries", "500", "--workdir", str(tmp_path), "--keep"]) == 0
    out = capsys.readouterr().out
    assert "500 entries in 2 keyed-state streams" in out and "all 500 entries: v2 = v1" in out
    assert (tmp_path / "events-v1" / "_metadata").is_file() and (tmp_path / "events-v2" / "_metadata").is_file()


def test_demo_removes_its_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert main(["demo", "--entries", "20"]) == 0
    assert "(removed)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_demo_refuses_what_is_no_flink_savepoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path)]) == 2
    assert "not a Flink savepoint" in capsys.readouterr().err


def test_the_self_check_catches_a_wrong_migration() -> None:
    """The demo's check is derived from the two tables: a changed, lost or non-null added field fails it."""
    import pyarrow as pa

    from statemorph import serializers as S

    old_row = (7, (3, 1_700_000_000_000, "phone"))
    new_row = (7, ("phone", None, 3, 1_700_000_000_000, None, None))

    def table(row_type: str, row: tuple) -> pa.Table:
        from statemorph import arrow

        ser = S.RowDataSerializer(row_type)
        return pa.table({"key": [1], "value": arrow.decode(pa.array([ser.to_bytes(row)], pa.binary()), ser)})

    old = table(OLD_TYPE, old_row)
    verify_migrated(old, table(NEW_TYPE, new_row))
    for wrong in ((7, ("tv", None, 3, 1_700_000_000_000, None, None)),
                  (7, ("phone", "here", 3, 1_700_000_000_000, None, None))):
        with pytest.raises(StateMigrationError, match="demo self-check failed"):
            verify_migrated(old, table(NEW_TYPE, wrong))
