"""The serial fraction a Flink migration reports when asked (issue 22, item 3): the wall time
outside the workers' section plus the ordered writes inside it, over the process's CPU time."""

from __future__ import annotations

import time
from pathlib import Path

from savepoint.flink.flink_cases import EVOLVED_EVENTS, ROOT

from statemorph.bulk.serial_clock import PARALLEL, WRITE, SerialClock, timed
from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor

CASE = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy" / "savepoint"


def test_the_clock_counts_what_runs_outside_the_parallel_stages_and_the_writes() -> None:
    with SerialClock() as clock:
        time.sleep(0.02)  # serial
        with timed(PARALLEL):
            time.sleep(0.05)  # the workers' time: not serial
            with timed(WRITE):
                time.sleep(0.02)  # the ordered write: serial
    assert timed(WRITE).__class__.__name__ == "nullcontext"  # nobody measures: nothing is timed
    assert 0.04 <= clock.serial <= clock.wall - 0.05 + 0.001
    assert clock.seconds[PARALLEL] >= 0.07 and clock.seconds[WRITE] >= 0.02
    assert clock.to_dict()["serial_s"] == round(clock.serial, 4)


def test_a_parallel_stage_on_a_thread_inside_one_is_counted_once() -> None:
    """Streams rewritten at once each mark their parallel stage on a thread of their own, in a
    copy of the run's context: only the run's own stage counts; their writes do."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    def stream() -> None:
        with timed(PARALLEL):
            time.sleep(0.05)
            with timed(WRITE):
                time.sleep(0.01)

    with SerialClock() as clock:
        with timed(PARALLEL), ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(contextvars.copy_context().run, stream) for _ in range(2)]:
                f.result()
    assert clock.seconds[PARALLEL] < 0.1  # one stage of about 0.06 s, not two
    assert clock.seconds[WRITE] >= 0.02  # both writes


def test_a_migration_reports_its_serial_fraction_only_when_asked(tmp_path: Path) -> None:
    descriptors = {"events-state": [ValueStateDescriptor("events", RowDataSerializer(EVOLVED_EVENTS))]}
    plain = migrate_flink_savepoint(CASE, tmp_path / "plain", descriptors, threads=2)
    assert plain.timings is None and "timings" not in plain.to_dict()
    report = migrate_flink_savepoint(CASE, tmp_path / "timed", descriptors, threads=2, timings=True)
    t = report.timings
    assert t is not None and report.to_dict()["timings"] == t
    assert t["parallel_s"] > 0 and 0 < t["write_s"] <= t["parallel_s"] <= t["wall_s"]
    assert abs(t["serial_s"] - (t["wall_s"] - t["parallel_s"] + t["write_s"])) < 1e-3
    # a small savepoint's run is mostly planning, fsync and rename: serial, and waiting, not CPU
    assert t["cpu_s"] > 0 and abs(t["serial_fraction"] - t["serial_s"] / t["cpu_s"]) < 0.01 * t["serial_fraction"]
    same = [p.name for p in (tmp_path / "plain").iterdir()]
    assert sorted(same) == sorted(p.name for p in (tmp_path / "timed").iterdir())
    for name in same:  # measuring changes nothing written
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "timed" / name).read_bytes()
