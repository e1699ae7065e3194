"""The benchmark's large Flink savepoint is not taken with real Flink (too slow on a small machine,
see benchmarks/flink_savepoint.py) but written by statemorph's keyed-state writer from a real
savepoint as template. This proves, at 200,000 keys (STATEMORPH_BENCH_FLINK_PROOF_N), that real
Flink 2.3 restores a savepoint built that way, compressed and not, and reads back every key's
value as built; and that the same savepoint, migrated by statemorph, is restored with the
evolved Events type."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, ROOT, reshape

from statemorph.engine import migrate_flink_savepoint
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor

N = int(os.environ.get("STATEMORPH_BENCH_FLINK_PROOF_N", "200000"))


def _builder() -> ModuleType:
    """benchmarks/flink_savepoint.py, loaded by path (benchmarks is not an installed package)."""
    name = "statemorph_bench_flink_savepoint"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "flink_savepoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _want(builder: ModuleType, n: int) -> dict[int, Any]:
    idx = np.arange(n, dtype=np.int64)
    keys = builder.int_keys(idx).tolist()
    rows = builder.events_struct(idx).to_pylist()
    return dict(zip(keys, rows, strict=True))


@pytest.mark.java
def test_real_flink_restores_the_built_benchmark_savepoint(real_flink: ModuleType, tmp_path: Path) -> None:
    builder = _builder()
    built = [builder.build(tmp_path / "cache", N, compressed) for compressed in (True, False)]
    migrated = tmp_path / "migrated"
    migrate_flink_savepoint(built[0].path, migrated,
                            {builder.UID: [ValueStateDescriptor(builder.STATE, RowDataSerializer(EVOLVED_EVENTS))]})
    as_built = real_flink.restore([(b.path, b.path.parent / "spec.json") for b in built])
    evolved = real_flink.restore([(migrated, built[0].path.parent / "spec.json")], events_type=EVOLVED_EVENTS)
    want = _want(builder, N)
    for b, result in zip(built, as_built, strict=True):
        assert result.ok, f"{b.path}: Flink refused the built savepoint: {result.exception}: {result.message}"
        got = {e["key"]: e["value"] for e in result.entries if e["state"] == builder.STATE}
        assert got == want, b.path
    assert evolved[0].ok, f"Flink refused the migrated savepoint: {evolved[0].exception}: {evolved[0].message}"
    got = {e["key"]: e["value"] for e in evolved[0].entries if e["state"] == builder.STATE}
    assert got == {k: reshape(v, EVOLVED_EVENTS_FIELDS) for k, v in want.items()}
