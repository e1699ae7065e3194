"""The small Parquet-form savepoint the CLI tests run the verbs on (a RowData ``events`` value
state and an INT ``counts`` map state), its row types, and a schema file naming a new events type."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from statemorph import serializers as S
from statemorph.engine.keys import key_groups
from statemorph.savepoint import SavepointWriter

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT>>"
BROKEN = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"


def write_savepoint(path: Path, n: int = 30) -> str:
    """A RowData value state ``events`` and an INT map state ``counts`` keyed by BIGINT."""
    ks, vs = S.LongSerializer(), S.RowDataSerializer(EVENTS)
    keys = list(range(n))
    common = {
        "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
        "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
        "namespace": pa.array([b"\x00"] * n, pa.binary()),
    }
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks) as w:
        w.write_state("events", "value", pa.table({**common, "value": [
            vs.to_bytes((k, (k % 5, 1_700_000_000_000 + k, "phone"))) for k in keys]}), value_serializer=vs)
        w.write_state("counts", "map", pa.table({**common, "user_key": [S.StringSerializer().to_bytes("n")] * n,
                                                 "value": [S.IntSerializer().to_bytes(k) for k in keys]}),
                      value_serializer=S.IntSerializer(), user_key_serializer=S.StringSerializer())
    return str(path)


def schema(tmp_path, row_type: str, name: str = "new.toml") -> str:
    p = tmp_path / name
    p.write_text(f"[states.events]\ntype = '''{row_type}'''\n", encoding="utf-8")
    return str(p)
