"""RowData rows with MAP fields: decode and migrate with the compiled kernels, where every map's
keys are checked for duplicates (hashes of their canonical bytes, sorted; a map whose keys may
repeat goes to the reference). Small maps (4 STRING keys, the common case) and large ones (200 INT
keys: the sort path). Numbers are reported, never asserted.

Entries: ``STATEMORPH_BENCH_N`` / 10 small-map rows (default 200,000) and / 200 large-map rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from statemorph import arrow, kernels, serializers

from .conftest import N, record

SMALL_OLD = "ROW<id BIGINT, attrs MAP<STRING, BIGINT>>"
SMALL_NEW = "ROW<id BIGINT, attrs MAP<STRING, BIGINT>, note STRING>"
LARGE_OLD = "ROW<id BIGINT, counts MAP<INT, DOUBLE>>"
LARGE_NEW = "ROW<id BIGINT, counts MAP<INT, DOUBLE>, note STRING>"
KEYS = ["device", "app-version", "country", "a-longer-attribute-name"]


@dataclass
class MapRows:
    n: int
    old: Any
    new: Any
    blobs: pa.BinaryArray


def _small(n: int) -> MapRows:
    old = serializers.RowDataSerializer(SMALL_OLD)
    rng = np.random.default_rng(11)
    vals = rng.integers(0, 1 << 40, (n, len(KEYS)))
    ids = pa.array(np.arange(n, dtype=np.int64))
    offsets = pa.array(np.arange(0, (n + 1) * len(KEYS), len(KEYS), dtype=np.int32))
    attrs = pa.MapArray.from_arrays(offsets, pa.array(KEYS * n), pa.array(vals.ravel()))
    struct = pa.StructArray.from_arrays([ids, attrs], ["id", "attrs"])
    return MapRows(n, old, serializers.RowDataSerializer(SMALL_NEW), arrow.encode(struct, old))


def _large(n: int, size: int = 200) -> MapRows:
    old = serializers.RowDataSerializer(LARGE_OLD)
    rng = np.random.default_rng(13)
    distinct = rng.integers(0, 1 << 20, (n, 1)) + np.arange(size) * 4099  # distinct keys in each map
    keys = rng.permuted(distinct, axis=1).astype(np.int32).ravel()
    offsets = pa.array(np.arange(0, (n + 1) * size, size, dtype=np.int32))
    counts = pa.MapArray.from_arrays(offsets, pa.array(keys), pa.array(rng.random(n * size)))
    struct = pa.StructArray.from_arrays([pa.array(np.arange(n, dtype=np.int64)), counts], ["id", "counts"])
    return MapRows(n, old, serializers.RowDataSerializer(LARGE_NEW), arrow.encode(struct, old))


@pytest.fixture(scope="module", params=["small", "large"])
def rows(request: pytest.FixtureRequest) -> MapRows:
    return _small(max(N // 10, 1000)) if request.param == "small" else _large(max(N // 200, 100))


def test_map_decode_native(benchmark: Any, rows: MapRows) -> None:
    out = benchmark.pedantic(arrow.decode, args=(rows.blobs, rows.old), rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == rows.n
    record(f"map decode native ({rows.old.row_type.fields[1].type})", benchmark, rows.n, tier=kernels.TIER)


@pytest.mark.parametrize("to", ["as-is", "field-added"])
def test_map_migrate_native(benchmark: Any, rows: MapRows, to: str) -> None:
    new = rows.old if to == "as-is" else rows.new
    snap = rows.old.snapshot_configuration()
    out = benchmark.pedantic(arrow.migrate, args=(rows.blobs, snap, new), rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == rows.n
    record(f"map migrate {to} native ({rows.old.row_type.fields[1].type})", benchmark, rows.n, tier=kernels.TIER)
