"""``statemorph demo``: the Events story end to end, in well under a minute.

A Flink SQL job keeps per-event state typed
``ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>``. The
next version of the job adds ``location``, ``appVersion`` and ``sessionId`` to ``metadata`` and
reorders it. Flink 2.3 refuses to restore the old savepoint (any RowData type change is
INCOMPATIBLE there). The demo builds the old savepoint in bulk (Arrow columns → ``arrow.encode``,
no Python object per entry), checks it against the new schema (and against a broken one), migrates
it with the local engine, restores the result into the RocksDB backend and reads back a sample.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import textwrap
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and pyarrow load when the demo runs, not with every CLI start
    import pyarrow as pa

OLD_TYPE = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW_TYPE = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
            "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>")
BROKEN_TYPE = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"
DEVICES = ["phone", "tablet", "desktop", "tv", "watch"]
MAX_PARALLELISM = 128


def events_table(n: int, seed: int = 7) -> pa.Table:
    """``n`` realistic Events rows as Arrow columns (keys = eventId)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    event_ids = np.arange(1, n + 1, dtype=np.int64) * 7919 + 1_000_000
    user_ids = rng.integers(1, 50_000, size=n, dtype=np.int32)
    ts = 1_700_000_000_000 + np.sort(rng.integers(0, 86_400_000, size=n, dtype=np.int64))
    devices = pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, len(DEVICES), size=n, dtype=np.int32)),
                                             pa.array(DEVICES)).cast(pa.string())
    metadata = pa.StructArray.from_arrays([pa.array(user_ids), pa.array(ts), devices],
                                          names=["userId", "timestamp", "deviceType"])
    event = pa.StructArray.from_arrays([pa.array(event_ids), metadata], names=["eventId", "metadata"])
    return pa.table({"key": pa.array(event_ids), "value": event})


def _schema_toml(row_type: str) -> str:
    return f'[states.events]\ntype = """{row_type}"""\n'


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def _done(t0: float) -> None:
    print(f"   ({time.perf_counter() - t0:.1f}s)", flush=True)


def run_demo(entries: int = 1_000_000, workdir: str | None = None, keep: bool = False) -> int:
    from ..extras import require

    # before any work: the last step restores into RocksDB; without the extra, one line says so
    require("rocksdict", "statemorph demo (it restores the migrated savepoint into RocksDB)")
    from .. import serializers
    from ..engine.local import migrate_savepoint, write_state
    from ..engine.plan import plan_rewrite
    from ..savepoint import read_metadata, read_state_table
    from ..schema_file import descriptors_for_savepoint, parse_schema
    from ..state import EmbeddedRocksDBStateBackend, ValueStateDescriptor
    from .check import cmd_check
    from .inspect import cmd_inspect

    t_start = time.perf_counter()
    base = workdir or tempfile.mkdtemp(prefix="statemorph-demo-")
    os.makedirs(base, exist_ok=True)
    old_sp, new_sp = os.path.join(base, "events-v1"), os.path.join(base, "events-v2")
    db = os.path.join(base, "rocksdb")
    for p in (old_sp, new_sp, db):
        if os.path.exists(p):
            shutil.rmtree(p)
    old_ser = serializers.RowDataSerializer(OLD_TYPE)
    key_ser = serializers.LongSerializer()
    print("statemorph demo: evolve the Events state of a Flink SQL job")
    print(f"  old type: {OLD_TYPE}\n  new type: {NEW_TYPE}")

    t = _step(f"1. build the v1 savepoint: {entries:,} events, encoded in bulk (Flink BinaryRowData bytes)")
    table = events_table(entries)
    write_state(old_sp, table, name="events", key_serializer=key_ser, value_serializer=old_ser,
                max_parallelism=MAX_PARALLELISM)
    _done(t)
    _call(cmd_inspect, savepoint=old_sp, verbose=False)

    md = read_metadata(old_sp)
    t = _step("2. dry run against the new schema (statemorph check)")
    new_toml = os.path.join(base, "events-v2.toml")
    with open(new_toml, "w", encoding="utf-8") as f:
        f.write(_schema_toml(NEW_TYPE))
    status = _call(cmd_check, savepoint=old_sp, schema=new_toml)
    print(f"   exit status {status} (0 as is / 1 migration needed / 3 incompatible)")
    broken = parse_schema(_schema_toml(BROKEN_TYPE), "broken.toml")
    bad_plan = plan_rewrite(old_sp, md, descriptors_for_savepoint(broken, md))
    print(f"   and a broken change (userId INT -> STRING) is refused: exit status {bad_plan.exit_status}")
    print(textwrap.indent(bad_plan.summary, "   "))
    _done(t)

    t = _step("3. migrate to v2 with the local engine (statemorph migrate)")
    new_schema = parse_schema(_schema_toml(NEW_TYPE), new_toml)
    descriptors = descriptors_for_savepoint(new_schema, md)
    report = migrate_savepoint(old_sp, new_sp, descriptors, threads=2)
    print("   " + report.summary())
    _done(t)

    t = _step("4. restore v2 into the RocksDB backend with the new serializer, read back a sample")
    new_ser = serializers.RowDataSerializer(NEW_TYPE)
    backend: Any = EmbeddedRocksDBStateBackend.restore(new_sp, db_path=db)
    try:
        events = backend.get_state(ValueStateDescriptor("events", new_ser))
        import numpy as np

        rng = np.random.default_rng(1)
        sample_idx = sorted(rng.choice(entries, size=min(5, entries), replace=False).tolist())
        keys = [int(table.column("key")[i].as_py()) for i in sample_idx]
        old_values = _old_values(read_state_table(old_sp, "events"), keys, key_ser, old_ser)
        checked = 0
        for k in keys:
            backend.set_current_key(k)
            new_value = events.value()
            old_value = old_values[k]
            _verify(old_value, new_value)
            checked += 1
            print(f"   key {k}:\n     v1 {tuple(old_value)}\n     v2 {tuple(new_value)}")
        print(f"   {checked} sampled entries: v2 = v1 with location, appVersion, sessionId added as NULL, "
              f"fields reordered by name")
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    _done(t)

    print(f"\ndone in {time.perf_counter() - t_start:.1f}s; savepoints in {base}"
          + ("" if keep or workdir else " (removed)"))
    if not keep and workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _call(fn: Any, **kw: Any) -> int:
    return int(fn(argparse.Namespace(**kw)))


def _old_values(table: pa.Table, keys: list[int], key_ser: Any, old_ser: Any) -> dict[int, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array([key_ser.to_bytes(k) for k in keys], pa.binary())
    hits = table.filter(pc.is_in(table.column("key"), value_set=wanted))
    out = {}
    for kb, vb in zip(hits.column("key").to_pylist(), hits.column("value").to_pylist(), strict=True):
        out[key_ser.from_bytes(kb)] = old_ser.from_bytes(vb)
    return out


def _by_name(row: tuple[Any, ...], row_type: Any) -> dict[str, Any]:
    """A row as ``{field path: value}``, nested rows flattened (``metadata.userId``)."""
    from ..types import RowType

    out: dict[str, Any] = {}
    for f, v in zip(row_type.fields, row, strict=True):
        if isinstance(f.type, RowType) and v is not None:
            out.update({f"{f.name}.{k}": x for k, x in _by_name(v, f.type).items()})
        else:
            out[f.name] = v
    return out


def _verify(old: Any, new: Any) -> None:
    """The migrated row is the old row remapped by field name, the added fields null (an internal
    check of the demo, derived from the two types rather than from a fixed permutation)."""
    from ..errors import StateMigrationError
    from ..types import parse_type

    old_fields = _by_name(tuple(old), parse_type(OLD_TYPE))
    new_fields = _by_name(tuple(new), parse_type(NEW_TYPE))
    expected = {path: old_fields.get(path) for path in new_fields}
    if new_fields != expected:
        raise StateMigrationError(f"demo self-check failed: migrated row {new_fields} != expected {expected}")


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(entries=args.entries, workdir=args.workdir, keep=args.keep)


def add_parser(sub: Any) -> None:
    from .migrate import positive_int

    s = sub.add_parser("demo", help="build the Events savepoint, check, migrate and restore it")
    s.add_argument("--entries", type=positive_int, default=1_000_000)
    s.add_argument("--workdir", default=None, help="where to put the savepoints (default: a temporary directory)")
    s.add_argument("--keep", action="store_true", help="keep the savepoints afterwards")
    s.set_defaults(func=cmd_demo)


__all__ = ["BROKEN_TYPE", "NEW_TYPE", "OLD_TYPE", "cmd_demo", "events_table", "run_demo"]
