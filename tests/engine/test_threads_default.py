"""Thread counts default to the usable cores, and the plan's machine code is compiled before the
workers start (issue 22)."""

from __future__ import annotations

import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from statemorph import bulk, kernels, serializers
from statemorph.bulk import chunks
from statemorph.cli.main import build_parser
from statemorph.engine import flink, flink_ranges, local
from statemorph.engine.flink_ranges import value_migration
from statemorph.engine.formats import Local
from statemorph.kernels import jit

EVENTS_OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_NEW = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT, app STRING>>"


def test_usable_cores_follow_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert chunks.usable_cores() == 3
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert chunks.usable_cores() == 16
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert chunks.usable_cores() == 1


def test_thread_counts_default_to_the_usable_cores() -> None:
    assert chunks.DEFAULT_THREADS == chunks.usable_cores()
    assert Local().threads == chunks.DEFAULT_THREADS
    for fn in (flink.migrate_flink_savepoint, flink.read_flink_state_table, flink_ranges.read_flink_state,
               local.read_state):
        assert inspect.signature(fn).parameters["threads"].default == chunks.DEFAULT_THREADS, fn.__name__
    args = build_parser().parse_args(["migrate", "a", "--schema", "s", "--out", "b"])
    assert args.threads is None  # resolved by the engine: the usable cores locally, per task on Spark


@pytest.mark.skipif(not kernels.native_available() or not jit.enabled(), reason="needs the native tier and llvmlite")
def test_the_plan_is_compiled_before_the_workers_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    jit._compile.cache_clear()
    so, sn = serializers.RowDataSerializer(EVENTS_OLD), serializers.RowDataSerializer(EVENTS_NEW)
    compiled_on: list[int] = []
    compile_ = jit._compile

    def counted(*args: object) -> object:
        before = compile_.cache_info().misses
        out = compile_(*args)
        if compile_.cache_info().misses > before:
            compiled_on.append(threading.get_ident())
        return out

    monkeypatch.setattr(jit, "_compile", counted)
    migrate = value_migration(so.snapshot_configuration(), sn)
    assert compiled_on == [threading.get_ident()]  # compiled here, once
    arr = pa.array([so.to_bytes((i, (i, i * 10, "d" * (i % 4)))) for i in range(2000)], pa.binary())
    with ThreadPoolExecutor(max_workers=2) as pool:
        outs = list(pool.map(migrate, [arr, arr, arr]))
    assert compiled_on == [threading.get_ident()]  # no worker compiled it again
    assert all(o.equals(outs[0]) for o in outs) and len(outs[0]) == 2000
