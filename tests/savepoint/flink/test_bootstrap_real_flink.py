"""Bootstrap: savepoints statemorph writes from scratch (from Arrow tables, and on Spark from
DataFrames) are restored by real Flink 2.3, and every state of every key reads back as written.

The restore checker (ci/flink) starts the spec's operator (uid, key type, max parallelism,
parallelism, backend) from the savepoint and probes exactly the bootstrapped keys (the spec's
``key_values``); its entries are compared with the rows the savepoint was made from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from bootstrap_cases import STATES, TTL_STATES, bootstrap_data, restored_values, states_of, with_ttl

from statemorph import serializers as S
from statemorph.engine import read_flink_state_table
from statemorph.engine.bootstrap import write_flink_savepoint
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.operator_ids import operator_id
from statemorph.types import parse_type


def _spec(path: Path, **fields: Any) -> Path:
    spec = {"name": path.stem, "states": STATES, **fields}
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return path


STRING_KEYS = [f"user-{i}" if i % 5 else f"clé-ü-{i}" for i in range(60)] + ["", "日本語-キー", "a" * 300]
INT_KEYS = [i * 7919 - 40000 for i in range(50)] + [-(2**31), 2**31 - 1, 0]
ROW_KEY = parse_type("ROW<id INT, name STRING>")
#: the checker's generated row keys (ci/flink/README.md, key_type row): Flink SQL keys its state by such rows
ROW_KEYS = [{"id": i * 7919 - 40000, "name": ("clé-ü-" if i % 5 == 3 else "user-") + str(i)} for i in range(40)]


@pytest.mark.spark
@pytest.mark.java
def test_real_flink_restores_bootstrapped_savepoints(real_flink, spark, tmp_path):
    """Three savepoints made from scratch, restored by real Flink in one JVM: string keys written
    locally from Arrow tables (RocksDB, max parallelism 256 so 2-byte key-group prefixes,
    parallelism 2, Snappy; every state also in its TTL form), int keys written on Spark from DataFrames (heap backend,
    parallelism 3), and BinaryRowData keys as Flink SQL has them (RocksDB, parallelism 2)."""
    uid_a, uid_b = "statemorph-bootstrapped-operator", "boot"  # 32 and 4 bytes: both murmur3 paths
    tables_a, want_a = bootstrap_data(STRING_KEYS, pa.string())
    want_a = with_ttl(want_a)
    write_flink_savepoint(tmp_path / "a", operator=uid_a, key_serializer=S.StringSerializer(),
                          states=states_of(tables_a, ttl=True), max_parallelism=256, parallelism=2, compression=True)
    tables_b, want_b = bootstrap_data(INT_KEYS, pa.int32())
    frames = {name: spark.createDataFrame(t) for name, t in tables_b.items()}
    report = write_flink_savepoint(tmp_path / "b", operator=uid_b, key_serializer=S.IntSerializer(),
                                   states=states_of(frames), max_parallelism=128, parallelism=3)
    assert report.engine == "spark" and report.entries == sum(t.num_rows for n, t in tables_b.items()
                                                              if n not in ("recent",)) + len(INT_KEYS)
    assert FlinkSavepoint(tmp_path / "a").operator(uid_a).operator_id == operator_id(uid_a)
    tables_c, want_c = bootstrap_data(ROW_KEYS, pa.struct([("id", pa.int32()), ("name", pa.string())]))
    write_flink_savepoint(tmp_path / "c", operator="sql-like", key_serializer=S.RowDataSerializer(ROW_KEY),
                          states=states_of(tables_c), max_parallelism=128, parallelism=2)

    spec_a = _spec(tmp_path / "a.json", uid=uid_a, key_type="string", key_values=STRING_KEYS, backend="rocksdb",
                   max_parallelism=256, parallelism=2, states=STATES + TTL_STATES)
    spec_b = _spec(tmp_path / "b.json", uid=uid_b, key_type="int", key_values=INT_KEYS, backend="hashmap",
                   max_parallelism=128, parallelism=3)
    spec_c = _spec(tmp_path / "c.json", uid="sql-like", key_type="row", keys=len(ROW_KEYS), backend="rocksdb",
                   max_parallelism=128, parallelism=2)
    res_a, res_b, res_c = real_flink.restore([(tmp_path / "a", spec_a), (tmp_path / "b", spec_b),
                                              (tmp_path / "c", spec_c)])
    assert restored_values(res_a) == want_a
    assert restored_values(res_b) == want_b
    assert restored_values(res_c) == want_c


def test_bootstrapped_savepoint_reads_back_locally(tmp_path):
    """The local reader sees every row the tables held (and the streams cover each subtask)."""
    tables, _ = bootstrap_data(STRING_KEYS[:20], pa.string())
    report = write_flink_savepoint(tmp_path / "sp", operator="op", key_serializer=S.StringSerializer(),
                                   states=states_of(tables), max_parallelism=64, parallelism=4)
    assert sorted(report.per_subtask) == [0, 1, 2, 3]
    sp = FlinkSavepoint(tmp_path / "sp")
    op = sp.operator("op")
    assert (op.parallelism, op.max_parallelism) == (4, 64)
    assert [st.managed_keyed.key_groups for st in op.subtasks] == [range(0, 16), range(16, 32), range(32, 48),
                                                                   range(48, 64)]
    for name, t in tables.items():
        got = read_flink_state_table(tmp_path / "sp", "op", name).drop_columns(["key_group", "namespace"])
        cols = [c for c in t.column_names]
        want = sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in t.select(cols).to_pylist())
        have = sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in got.select(cols).to_pylist())
        if name == "events":
            have = sorted(json.dumps({"key": r["key"], "value": {"eventId": r["value"]["f0"],
                                                                 "metadata": r["value"]["f1"]}},
                                     sort_keys=True, ensure_ascii=False) for r in got.to_pylist())
        assert have == want, name
