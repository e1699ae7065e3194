"""Shared helpers for the Flink savepoint format tests: the committed real-Flink cases and a
decoder that turns what :class:`FlinkSavepoint` yields into the values ``expected.json`` lists."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st
from savepoint.flink.flink_cases import case_spec, committed_cases

from statemorph import serializers
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.bulk_blocks import BULK_KINDS
from statemorph.savepoint.flink.keyed_blocks import StateRun, write_key_group
from statemorph.savepoint.flink.layout import StateLayout
from statemorph.savepoint.flink.snappy import STREAM_IDENTIFIER, frame_key_group
from statemorph.types import parse_type

SOURCE_UID_HASH = "3fa48b0327e87264fb4461f7bc35084c"  # the generator's source operator (uid "records")
EVENTS_TYPE = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_FIELDS = ("eventId", ("metadata", ("userId", "timestamp", "deviceType")))
ROW_KEY_TYPE = "ROW<id INT, name STRING>"  # spec key_type "row", as Flink SQL keys its state
ROW_KEY_FIELDS = ("id", "name")


cases = committed_cases
spec = case_spec


def case_ids() -> list[str]:
    return [c.name for c in cases()]


def expected(case: Path) -> dict[tuple[Any, str], Any]:
    data = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    return {(hashable(e["key"]), e["state"]): e["value"] for e in data["entries"]}


def hashable(key: Any) -> Any:
    """Row keys are JSON objects: compare them by their canonical JSON text."""
    return json.dumps(key, sort_keys=True) if isinstance(key, dict) else key


def state_operator(sp: FlinkSavepoint) -> str:
    """The uid (or uid hash for Flink 1.20 metadata, which stores no uid) of the stateful operator."""
    ops = [op for op in sp.operators if op.uid_hash != SOURCE_UID_HASH]
    assert len(ops) == 1, [op.uid_hash for op in sp.operators]
    return ops[0].uid or ops[0].uid_hash


def _reshape(value: Any, fields: tuple[Any, ...]) -> Any:
    if value is None:
        return None
    out = {}
    for f, v in zip(fields, value, strict=True):
        if isinstance(f, tuple):
            out[f[0]] = _reshape(v, f[1])
        else:
            out[f] = v
    return out


def base_state(name: str) -> str:
    return name[4:] if name.startswith("ttl_") else name


def value_decoder(state: str) -> Any:
    """The generator's state types (ci/flink StateSet): events RowData, count Long, last String,
    recent List<Long> elements, totals Map<String, Long> values; ttl_X like X."""
    base = base_state(state)
    if base == "events":
        rows = serializers.RowDataSerializer(parse_type(EVENTS_TYPE))
        return lambda b: _reshape(rows.from_bytes(b), EVENTS_FIELDS)
    if base in ("count", "recent", "totals"):
        return serializers.LongSerializer().from_bytes
    if base == "last":
        return serializers.StringSerializer().from_bytes
    raise AssertionError(f"no decoder for state {state!r}")


def key_decoder(case: Path) -> Any:
    key_type = spec(case)["key_type"]
    if key_type == "row":
        rows = serializers.RowDataSerializer(parse_type(ROW_KEY_TYPE))
        return lambda b: hashable(_reshape(rows.from_bytes(b), ROW_KEY_FIELDS))
    if key_type == "string":
        return serializers.StringSerializer().from_bytes
    return serializers.IntSerializer().from_bytes


def read_back(case: Path, sp: FlinkSavepoint | None = None) -> dict[tuple[Any, str], Any]:
    """Every state of every key, decoded, in ``expected.json``'s shape (timers: the sorted event-time
    timestamps of the key, under the state name ``timers``)."""
    sp = sp or FlinkSavepoint(case / "savepoint")
    op = state_operator(sp)
    kdec = key_decoder(case)
    out: dict[tuple[Any, str], Any] = {}
    info = sp.inspect(count_entries=False)
    names = [s.name for o in info.operators for s in o.states if o.uid_hash != SOURCE_UID_HASH]
    for name in names:
        if name.startswith("_timer_state/processing"):
            continue
        if name.startswith("_timer_state/event"):
            timers: dict[Any, list[int]] = defaultdict(list)
            for b in sp.iter_state_batches(op, name):
                for r in b.to_pylist():
                    timers[kdec(r["key"])].append(r["timestamp"])
            for k, ts in timers.items():
                out[(k, "timers")] = sorted(ts)
            continue
        vdec = value_decoder(name)
        lists: dict[Any, Any] = {}
        for b in sp.iter_state_batches(op, name):
            for r in b.to_pylist():
                k = kdec(r["key"])
                assert r["namespace"] == b"\x00"
                if "index" in r:
                    lst = lists.setdefault(k, [])
                    assert r["index"] == len(lst)
                    lst.append(vdec(r["value"]))
                elif "user_key" in r:
                    m = lists.setdefault(k, {})
                    m[serializers.StringSerializer().from_bytes(r["user_key"])] = (
                        None if r["value"] is None else vdec(r["value"])
                    )
                else:
                    out[(k, name)] = vdec(r["value"])
        for k, v in lists.items():
            out[(k, name)] = v
    return out


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> content)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def scanned_entries(groups: list[Any]) -> list[tuple[int, bytes]]:
    """(state id, value bytes) of every entry of scanned key groups or slices
    (``key_group_scan.ScannedGroup``), in order: what two ways of scanning must agree on."""
    out = []
    for g in groups:
        view = memoryview(g.buf)
        for sid, p, n in zip(g.entry_states().tolist(), g.val_pos.tolist(), g.val_len.tolist(), strict=True):
            out.append((sid, bytes(view[p:p + n])))
    return out


def small_chunks(data: Any, chunk: int = 64) -> bytes:
    """A key group framed in Snappy chunks of ``chunk`` bytes (xerial's format allows any chunk
    up to 64 KiB): the many chunks of a large key group, in data small enough for a test. A
    compressed key group is cut for separate tasks between chunks only (its ``KeyGroupCut``'s
    pieces, the local engine's), so a key group of one chunk is one task."""
    view = memoryview(data).cast("B")
    parts = [frame_key_group(view[i:i + chunk]) for i in range(0, len(view), chunk)] or [frame_key_group(b"")]
    return bytes(parts[0]) + b"".join(bytes(memoryview(p)[len(STREAM_IDENTIFIER):]) for p in parts[1:])


N_STATES = 3
"""The states of the key groups :data:`key_group_runs` draws."""

key_group_runs = st.lists(
    st.tuples(st.integers(0, N_STATES - 1),
              st.lists(st.tuples(st.binary(min_size=1, max_size=12), st.binary(max_size=300)), min_size=1,
                       max_size=30)),
    min_size=1, max_size=6)
"""Runs of entries of one key group (state id, [(key, value)]), as hypothesis draws them."""


def key_group_bytes(spec: list[tuple[int, list[tuple[bytes, bytes]]]]) -> bytes:
    """The stored bytes of one key group holding the runs ``spec`` (keys with the run-end flag cleared)."""
    return write_key_group([StateRun(sid, [bytes([k[0] & 0x7F]) + k[1:] for k, _ in entries],
                                     [v for _, v in entries]) for sid, entries in spec])


def grown_values(values: pa.Array) -> pa.Array:
    """Each value reversed and one byte longer: a migration whose output outgrows its input."""
    return pa.array([v[::-1] + bytes([len(v) % 256]) for v in values.to_pylist()], pa.binary())


def grown_bulk_streams(case: Path) -> Iterator[tuple[Any, dict[int, tuple[StateLayout, Any]]]]:
    """Each keyed stream of the case's state operator that holds bulk states, with those states
    migrated by :func:`grown_values` (the migration both slicing tests compare cuts under)."""
    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    for _, stream in sp.keyed_streams(op):
        states = {i: (StateLayout(m, stream.header.key_serializer, op.max_parallelism, "test"), grown_values)
                  for i, m in enumerate(stream.header.states) if m.kind in BULK_KINDS}
        if states:
            yield stream, states
