"""Spark: Events migration equals the local engine; read_state, write_state and the UDFs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.cli.demo import NEW_TYPE, OLD_TYPE, events_table
from statemorph.engine import migrate_savepoint as local_migrate
from statemorph.engine import write_state as local_write
from statemorph.engine.spark import decode_udf, migrate_savepoint, migrate_udf, read_state, write_state
from statemorph.migration import migrate_bytes
from statemorph.savepoint import read_metadata
from statemorph.savepoint import read_state_table as raw_state_table
from statemorph.state import ValueStateDescriptor

from .savepoints import assert_same_savepoint

pytestmark = pytest.mark.spark
N = 5000


@pytest.fixture(scope="module")
def events_sp(tmp_path_factory):
    path = tmp_path_factory.mktemp("events") / "v1"
    local_write(path, events_table(N), name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD_TYPE))
    return str(path)


def test_events_migration_equals_local(spark, events_sp, tmp_path):
    descs = [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))]
    report = migrate_savepoint(spark, events_sp, tmp_path / "spark", descs)
    local_migrate(events_sp, tmp_path / "local", descs)
    assert report.rows == {"events": N}
    assert_same_savepoint(str(tmp_path / "spark"), str(tmp_path / "local"))


def test_read_state_is_typed(spark, events_sp):
    df = read_state(spark, events_sp, "events")
    assert df.columns == ["key", "eventId", "metadata"]
    assert [f.name for f in df.schema["metadata"].dataType.fields] == ["userId", "timestamp", "deviceType"]
    rows = {r["key"]: r for r in df.collect()}
    src = events_table(N).to_pylist()
    assert len(rows) == N
    for e in src[:50]:
        got = rows[e["key"]]
        assert got["eventId"] == e["value"]["eventId"]
        assert got["metadata"].asDict() == e["value"]["metadata"]


def test_write_state_from_dataframe(spark, events_sp, tmp_path):
    """A savepoint bootstrapped on Spark from flat columns equals the one built locally."""
    src = events_table(N)
    flat = pa.table({"key": src.column("key"), "eventId": src.column("value").combine_chunks().field("eventId"),
                     "metadata": src.column("value").combine_chunks().field("metadata")})
    df = spark.createDataFrame(flat.to_pandas())
    write_state(spark, df, tmp_path / "boot", name="events", key_serializer=S.LongSerializer(),
                value_serializer=S.RowDataSerializer(OLD_TYPE), value=["eventId", "metadata"])
    assert_same_savepoint(str(tmp_path / "boot"), events_sp)


def test_udfs_on_arrow_batches_and_as_pandas_udfs(spark, events_sp):
    raw = raw_state_table(events_sp, "events").slice(0, 300)
    old_snap = read_metadata(events_sp).states["events"].snapshot("value_serializer")
    new = S.RowDataSerializer(NEW_TYPE)
    expected = [migrate_bytes(old_snap, new, v) for v in raw.column("value").to_pylist()]
    df = spark.createDataFrame(raw.select(["key", "value"]).to_pandas())
    mig = migrate_udf(old_snap, new)
    via_arrow = df.mapInArrow(mig, mig.output_schema(df.schema)).collect()
    via_pandas = df.withColumn("value", mig("value")).collect()
    by_key = dict(zip(raw.column("key").to_pylist(), expected, strict=True))
    for rows in (via_arrow, via_pandas):
        assert {r["key"]: bytes(r["value"]) for r in rows} == {k: v for k, v in by_key.items()}
    dec = decode_udf(new)
    decoded = df.withColumn("value", mig("value")).select(dec("value").alias("event")).collect()
    assert {r["event"]["metadata"]["location"] for r in decoded} == {None}
    assert len(decoded) == 300


def test_cli_migrate_with_spark_engine(spark, events_sp, tmp_path, capsys):
    from statemorph.cli import main

    schema = tmp_path / "new.toml"
    schema.write_text(f'[states.events]\ntype = """{NEW_TYPE}"""\n', encoding="utf-8")
    assert main(["migrate", events_sp, "--schema", str(schema), "--out", str(tmp_path / "v2"),
                 "--engine", "spark"]) == 0
    out = capsys.readouterr().out
    assert "with the spark engine" in out and f"summary: {N:,} entries migrated" in out
    assert spark.range(3).count() == 3  # the caller's session was used and is still running
    local_migrate(events_sp, tmp_path / "local", [ValueStateDescriptor("events", S.RowDataSerializer(NEW_TYPE))])
    assert_same_savepoint(str(tmp_path / "v2"), str(tmp_path / "local"))
