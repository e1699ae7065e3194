"""The Events value state the write-fault tests write, shared with the child processes they start
(a child imports it as ``savepoint.event_entries`` with ``tests/`` on its path)."""

from __future__ import annotations

import os

import pyarrow as pa

from statemorph import serializers as S
from statemorph.engine.keys import key_groups

L = S.LongSerializer()
EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT>>"
OLD, NEW = S.RowDataSerializer(EVENTS), S.RowDataSerializer(EVOLVED)


def entries(n: int, payload: int) -> pa.Table:
    """``n`` value-state rows whose values carry ``payload`` incompressible characters each."""
    keys = list(range(n))
    return pa.table({
        "key_group": key_groups(pa.array(keys, pa.int64()), L, 128),
        "key": pa.array([L.to_bytes(k) for k in keys], pa.binary()),
        "namespace": pa.array([b"\x00"] * n, pa.binary()),
        "value": pa.array([OLD.to_bytes((k, (k, 1_700_000_000_000 + k, os.urandom(payload // 2).hex())))
                           for k in keys], pa.binary())})
