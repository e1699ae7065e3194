"""Bootstrap and rescale on Spark write, by key-group ranges (several tasks per subtask stream,
each stream assembled from its parts on the executors), the same streams as the local engine."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.engine import StateData, rescale_flink_savepoint, write_flink_savepoint
from statemorph.savepoint.flink import FlinkSavepoint

pytestmark = pytest.mark.spark
N = 400


def _streams(path: Path, uid: str) -> list[bytes]:
    sp = FlinkSavepoint(path)
    return [stream.source.read_at(0, stream.source.size, "stream") for _, stream in sp.keyed_streams(sp.operator(uid))]


def _states(data: dict[str, pa.Table]) -> dict[str, StateData]:
    return {"count": StateData(data["count"], S.LongSerializer()),
            "recent": StateData(data["recent"], S.LongSerializer(), kind="list", ttl=True),
            "totals": StateData(data["totals"], S.StringSerializer(), kind="map",
                                user_key_serializer=S.IntSerializer()),
            "_timer_state/event_user-timers": StateData(data["timers"], None, kind="timers")}


def test_spark_bootstrap_and_rescale_equal_local(spark, tmp_path):
    keys = [f"k{i}" for i in range(N)]
    data = {
        "count": pa.table({"key": keys, "value": pa.array(range(N), pa.int64())}),
        "recent": pa.table({"key": [k for k in keys for _ in range(2)], "index": pa.array([0, 1] * N, pa.int32()),
                            "value": pa.array(range(2 * N), pa.int64()),
                            "ttl_timestamp": pa.array([1_700_000_000_000 + i for i in range(2 * N)], pa.int64())}),
        "totals": pa.table({"key": keys, "user_key": pa.array(range(N), pa.int32()),
                            "value": [None if i % 5 == 0 else f"v{i}" for i in range(N)]}),
        "timers": pa.table({"key": keys, "timestamp": pa.array([1_700_000_000_000 - i for i in range(N)], pa.int64())}),
    }
    frames = {n: spark.createDataFrame(t) for n, t in data.items()}
    kw = {"operator": "op", "key_serializer": S.StringSerializer(), "max_parallelism": 64, "parallelism": 3,
          "compression": True}
    local = write_flink_savepoint(tmp_path / "local", states=_states(data), **kw)
    dist = write_flink_savepoint(tmp_path / "spark", states=_states(frames), tasks=7, **kw)
    assert (local.engine, dist.engine) == ("local", "spark")
    assert dist.per_subtask == local.per_subtask and sum(local.per_subtask.values()) == 4 * N
    assert _streams(tmp_path / "spark", "op") == _streams(tmp_path / "local", "op")
    assert not (tmp_path / "spark" / ".parts").exists()

    rescale_flink_savepoint(tmp_path / "local", tmp_path / "r-local", "op", max_parallelism=300, parallelism=4)
    rescale_flink_savepoint(tmp_path / "local", tmp_path / "r-spark", "op", max_parallelism=300, parallelism=4,
                            spark=spark, tasks=5)
    assert _streams(tmp_path / "r-spark", "op") == _streams(tmp_path / "r-local", "op")
