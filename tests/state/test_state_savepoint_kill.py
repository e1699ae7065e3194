"""SIGKILL while a savepoint is being written leaves either no savepoint or a complete, valid one
at the final path, never a partial one."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from processes import child_env

from statemorph.savepoint import read_state_table, remove_stale_temp_dirs, verify_savepoint

SLOW_WRITER = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    from statemorph.savepoint import SavepointWriter
    from statemorph.serializers import IntSerializer, LongSerializer
    I, L = IntSerializer(), LongSerializer()
    with SavepointWriter(sys.argv[1], max_parallelism=128, key_serializer=I, rows_per_file=50) as w:
        s = w.add_state("v", "value", value_serializer=L)
        for b in range(1000):
            s.write(pa.table({"key_group": pa.array([i % 128 for i in range(b * 10, b * 10 + 10)], pa.int32()),
                              "key": [I.to_bytes(i) for i in range(b * 10, b * 10 + 10)],
                              "namespace": [b"\\x00"] * 10,
                              "value": [L.to_bytes(i) for i in range(b * 10, b * 10 + 10)]}))
            if b == 5:
                print("writing", flush=True)
            time.sleep(0.01)
""")

BACKEND_WRITER = textwrap.dedent("""
    import sys
    from statemorph.serializers import IntSerializer, StringSerializer
    from statemorph.state import HashMapStateBackend, ListStateDescriptor, ValueStateDescriptor
    b = HashMapStateBackend(IntSerializer(), 128)
    v = b.get_state(ValueStateDescriptor("v", StringSerializer()))
    lst = b.get_state(ListStateDescriptor("l", IntSerializer()))
    for i in range(20000):
        b.set_current_key(i)
        v.update("x" * (i % 50))
        lst.add_all([i, i + 1])
    print("ready", flush=True)
    b.savepoint(sys.argv[1], rows_per_file=2000)
    print("done", flush=True)
""")


def spawn(script, target):
    env = child_env()
    return subprocess.Popen([sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, env=env, text=True)


def assert_absent_or_complete(target):
    if target.exists():
        meta = verify_savepoint(target)  # raises on anything partial or damaged
        return meta
    return None


def test_kill_during_write_leaves_no_savepoint(tmp_path):
    target = tmp_path / "sp"
    p = spawn(SLOW_WRITER, target)
    try:
        assert p.stdout.readline().strip() == "writing"
        temps = [x for x in tmp_path.iterdir() if x.name.startswith(".sp.statemorph-tmp-")]
        assert temps and any(temps[0].rglob("*.parquet")), "the writer should be part way"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert not target.exists()
    assert remove_stale_temp_dirs(tmp_path, "sp")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5, 1.5])
def test_kill_at_any_time_gives_nothing_or_a_valid_savepoint(tmp_path, delay):
    target = tmp_path / "sp"
    p = spawn(BACKEND_WRITER, target)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    meta = assert_absent_or_complete(target)
    if meta is not None:
        assert meta.state("v").rows == 20000 and meta.state("l").rows == 40000
        assert read_state_table(target, "l").num_rows == 40000


def test_uninterrupted_writer_completes(tmp_path):
    target = tmp_path / "sp"
    p = spawn(BACKEND_WRITER, target)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0 and out.split() == ["ready", "done"]
    assert assert_absent_or_complete(target).state("v").rows == 20000
    assert [x.name for x in tmp_path.iterdir()] == ["sp"]
