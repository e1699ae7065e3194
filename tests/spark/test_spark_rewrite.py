"""Savepoint rewrites on Spark local[2]: same plan and same savepoint as the local engine."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.engine import IdentityTransform
from statemorph.engine import migrate_savepoint as local_migrate
from statemorph.engine.keys import key_groups
from statemorph.engine.spark import migrate_savepoint
from statemorph.errors import IncompatibleSchemaError
from statemorph.savepoint import SavepointWriter, read_metadata
from statemorph.state.descriptors import ValueStateDescriptor

from .savepoints import assert_same_savepoint

pytestmark = pytest.mark.spark


@pytest.fixture()
def savepoint(tmp_path):
    ks = S.LongSerializer()
    keys = list(range(2000))
    with SavepointWriter(tmp_path / "sp", max_parallelism=128, key_serializer=ks, rows_per_file=700) as w:
        w.write_state("ints", "value", pa.table({
            "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
            "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
            "namespace": pa.array([b"\x00"] * len(keys), pa.binary()),
            "value": pa.array([S.IntSerializer().to_bytes(k * 3) for k in keys], pa.binary()),
        }), value_serializer=S.IntSerializer())
    return str(tmp_path / "sp")


def test_identity_rewrite_equals_local(spark, savepoint, tmp_path):
    ident = lambda plan: IdentityTransform()  # noqa: E731
    r_spark = migrate_savepoint(spark, savepoint, tmp_path / "s", [], transform=ident)
    local_migrate(savepoint, tmp_path / "l", [], transform=ident)
    assert r_spark.engine == "spark" and r_spark.rows == {"ints": 2000}
    assert_same_savepoint(str(tmp_path / "s"), str(tmp_path / "l"))
    assert_same_savepoint(str(tmp_path / "s"), savepoint)
    assert sorted(os.listdir(tmp_path / "s")) == ["_metadata.json", "state-00000"]  # no Spark leftovers


def test_copy_and_refusal(spark, savepoint, tmp_path):
    migrate_savepoint(spark, savepoint, tmp_path / "c", [ValueStateDescriptor("ints", S.IntSerializer())])
    assert [f.sha256 for f in read_metadata(tmp_path / "c").states["ints"].files] == \
           [f.sha256 for f in read_metadata(savepoint).states["ints"].files]
    with pytest.raises(IncompatibleSchemaError, match="IntSerializer to LongSerializer"):
        migrate_savepoint(spark, savepoint, tmp_path / "x", [ValueStateDescriptor("ints", S.LongSerializer())])
    assert not os.path.exists(tmp_path / "x")
