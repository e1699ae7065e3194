"""The progress bar of ``statemorph migrate`` on a real terminal: stderr is a pseudo-terminal, as in
an interactive shell. The bar shows there, and never with ``--json`` or ``--quiet``, nor when
stderr is a pipe; stdout stays exactly what the mode promises."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from processes import child_env

from statemorph import serializers as S
from statemorph.engine import write_state

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT, location STRING>>"
BAR = "migrating ["


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("progress")
    keys = list(range(500))
    table = pa.table({"key": keys, "eventId": keys,
                      "metadata": [{"userId": k, "timestamp": k, "deviceType": "phone"} for k in keys]})
    sp = write_state(d / "sp", table, name="events", key_serializer=S.LongSerializer(),
                     value_serializer=S.RowDataSerializer(EVENTS), value=["eventId", "metadata"])
    schema = d / "new.toml"
    schema.write_text(f'[states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")
    return sp, schema


def migrate_on_terminal(job: tuple[Path, Path], out: Path, *flags: str) -> tuple[int, str, str]:
    """Run migrate with stderr on a pseudo-terminal; (status, stdout, what the terminal showed)."""
    sp, schema = job
    master, slave = pty.openpty()
    cmd = [sys.executable, "-m", "statemorph", "migrate", str(sp), "--schema", str(schema), "--out", str(out),
           *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=child_env(), text=True)
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    stdout = proc.stdout.read() if proc.stdout else ""
    return proc.wait(timeout=300), stdout, shown.decode(errors="replace")


def test_bar_on_a_terminal(job: tuple[Path, Path], tmp_path: Path) -> None:
    status, stdout, shown = migrate_on_terminal(job, tmp_path / "out")
    assert status == 0, shown
    assert BAR in shown and "500/500 entries" in shown
    assert BAR not in stdout and "entries migrated" in stdout


@pytest.mark.parametrize("flag", ["--json", "-q"])
def test_no_bar_with_json_or_quiet(job: tuple[Path, Path], tmp_path: Path, flag: str) -> None:
    status, stdout, shown = migrate_on_terminal(job, tmp_path / "out", flag)
    assert status == 0, shown
    assert BAR not in shown and shown.strip() == ""
    if flag == "--json":
        assert json.loads(stdout)["exit_status"] == 0
    else:
        assert stdout == ""


def test_no_bar_on_a_pipe(job: tuple[Path, Path], tmp_path: Path) -> None:
    sp, schema = job
    proc = subprocess.run([sys.executable, "-m", "statemorph", "migrate", str(sp), "--schema", str(schema),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, env=child_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert BAR not in proc.stderr and BAR not in proc.stdout
