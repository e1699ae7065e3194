"""Keys, values and expectations shared by the bootstrap tests: five states of the restore
checker's job (events RowData, count, last, recent list, totals map) built as Arrow tables, and
what real Flink must read back from them."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from statemorph import serializers as S
from statemorph.engine.bootstrap import StateData
from statemorph.types import parse_type

EVENTS = parse_type("ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>")
STATES = ["events", "count", "last", "recent", "totals"]


def _event(i: int) -> dict[str, Any]:
    meta = None if i % 7 == 0 else {"userId": i * 3, "timestamp": 1_700_000_000_000 + i,
                                    "deviceType": None if i % 5 == 0 else ("phone", "tablet", "désktop")[i % 3]}
    return {"eventId": i * 1_000_003, "metadata": meta}


def bootstrap_data(keys: list[Any], key_type: pa.DataType) -> tuple[dict[str, pa.Table], dict[tuple[str, str], Any]]:
    """The five states' tables and what the checker must read back per (state, key as JSON)."""
    n = len(keys)
    k = pa.array(keys, key_type)
    count_rows = [i for i in range(n) if i % 2 == 0]  # odd keys have no count: restored as null
    recent = [(i, j) for i in range(n) for j in range(1 + i % 3)]
    totals = [(i, f"d{j}") for i in range(n) for j in range(1 + i % 2)]
    tables = {
        "events": pa.table({"key": k, "value": pa.array([_event(i) for i in range(n)])}),
        "count": pa.table({"key": k.take(count_rows), "value": pa.array([i * i for i in count_rows], pa.int64())}),
        "last": pa.table({"key": k, "value": [("último-" if i % 4 == 1 else "v-") + str(i) for i in range(n)]}),
        "recent": pa.table({"key": k.take([i for i, _ in recent]),
                            "index": pa.array([j for _, j in recent], pa.int32()),
                            "value": pa.array([i * 100 + j for i, j in recent], pa.int64())}),
        "totals": pa.table({"key": k.take([i for i, _ in totals]), "user_key": [u for _, u in totals],
                            "value": pa.array([i + len(u) for i, u in totals], pa.int64())}),
    }
    want: dict[tuple[str, str], Any] = {}
    for i, key in enumerate(keys):
        kj = json.dumps(key, ensure_ascii=False)
        want["events", kj] = _event(i)
        want["count", kj] = i * i if i % 2 == 0 else None
        want["last", kj] = ("último-" if i % 4 == 1 else "v-") + str(i)
        want["recent", kj] = [i * 100 + j for j in range(1 + i % 3)]
        want["totals", kj] = {f"d{j}": i + 2 for j in range(1 + i % 2)}
    return tables, want


TTL_STATES = ["ttl_count", "ttl_events", "ttl_recent", "ttl_totals"]


def states_of(tables: dict[str, Any], ttl: bool = False) -> dict[str, StateData]:
    """The five states; with ``ttl`` also their TTL forms (the checker's ``ttl_*`` states) from
    the same tables, every value stamped with the bootstrap's time."""
    out = {
        "events": StateData(tables["events"], S.RowDataSerializer(EVENTS)),
        "count": StateData(tables["count"], S.LongSerializer()),
        "last": StateData(tables["last"], S.StringSerializer()),
        "recent": StateData(tables["recent"], S.LongSerializer(), kind="list"),
        "totals": StateData(tables["totals"], S.LongSerializer(), kind="map", user_key_serializer=S.StringSerializer()),
    }
    if ttl:
        for name in TTL_STATES:
            plain = out[name[4:]]
            out[name] = StateData(plain.data, plain.value_serializer, kind=plain.kind,
                                  user_key_serializer=plain.user_key_serializer, ttl=True)
    return out


def with_ttl(want: dict[tuple[str, str], Any]) -> dict[tuple[str, str], Any]:
    """What the checker reads back from the TTL forms too: the same values."""
    return {**want, **{(t, k): v for (s, k), v in want.items() for t in TTL_STATES if t[4:] == s}}


def restored_values(result: Any) -> dict[tuple[str, str], Any]:
    assert result.ok, f"Flink refused the bootstrapped savepoint: {result.exception}: {result.message}"
    return {(e["state"], json.dumps(e["key"], ensure_ascii=False)): e["value"] for e in result.entries}
