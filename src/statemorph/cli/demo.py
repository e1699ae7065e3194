"""``statemorph demo``: the Events story on a Flink savepoint, end to end, in seconds.

A Flink SQL job keeps per-event state typed
``ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>`` in the
value state ``events`` of the operator with uid ``events-state``. The next version of the job adds
``location``, ``appVersion`` and ``sessionId`` to ``metadata`` and reorders it. Flink 2.3 refuses to
restore the old savepoint (any RowData type change is INCOMPATIBLE there). The demo takes a Flink
savepoint of that job (one real Flink took, given as SAVEPOINT; otherwise it bootstraps one in
Flink's canonical format from Arrow columns), runs the verbs a user runs (``inspect``, ``check``
against the new type and against a broken one, ``migrate``), then reads the migrated state back with
statemorph's Flink reader, checks every entry against the old one and prints a few.

It needs the core install only (no extra): the migration and the read-back are the Flink savepoint
code every install has. Restoring the result in real Flink needs Flink's jars; the demo prints how.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Any

from .. import serializers
from ..engine.bootstrap import StateData, write_flink_savepoint
from ..engine.flink import read_flink_state_table
from ..engine.formats import FLINK
from ..errors import ExitCode, StateMigrationError, UsageError
from . import check as check_verb
from . import inspect as inspect_verb
from . import migrate as migrate_verb
from .migrate import positive_int

if TYPE_CHECKING:  # in annotations only
    import pyarrow as pa

OLD_TYPE = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW_TYPE = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
            "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>")
BROKEN_TYPE = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"
DEVICES = ["phone", "tablet", "desktop", "tv", "watch"]
MAX_PARALLELISM = 128
OPERATOR = "events-state"
"""The uid of the Events job's stateful operator (as in the savepoints real Flink took for the tests)."""
STATE = "events"
SHOWN_ROWS = 3


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


def schema_toml(row_type: str) -> str:
    """The schema file giving the Events state of a Flink savepoint the type ``row_type``."""
    return f'[operators.{OPERATOR}.states.{STATE}]\ntype = """{row_type}"""\n'


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def _done(t0: float) -> None:
    print(f"   ({time.perf_counter() - t0:.1f}s)", flush=True)


def bootstrap_events(path: str, entries: int) -> Any:
    """A Flink savepoint of the Events job (as Flink 2.3 writes it: parallelism 2, max parallelism
    128, Snappy-compressed key groups) holding ``entries`` events, encoded in bulk."""
    events = StateData(events_table(entries), serializers.RowDataSerializer(OLD_TYPE))
    return write_flink_savepoint(path, operator=OPERATOR, key_serializer=serializers.LongSerializer(),
                                 states={STATE: events}, max_parallelism=MAX_PARALLELISM, parallelism=2,
                                 compression=True)


def run_demo(savepoint: str | None = None, entries: int = 100_000, workdir: str | None = None,
             keep: bool = False) -> int:
    if savepoint is not None and not FLINK.claims(savepoint):
        raise UsageError(f"{savepoint}: not a Flink savepoint (no _metadata); the demo migrates a savepoint of "
                         f"the Events job (value state {STATE!r} of the operator with uid {OPERATOR!r})")
    t_start = time.perf_counter()
    base = workdir or tempfile.mkdtemp(prefix="statemorph-demo-")
    os.makedirs(base, exist_ok=True)
    new_sp = os.path.join(base, "events-v2")
    old_sp = savepoint or os.path.join(base, "events-v1")
    for p in ([new_sp] if savepoint else [old_sp, new_sp]):
        if os.path.exists(p):
            shutil.rmtree(p)
    print("statemorph demo: evolve the Events state of a Flink SQL job")
    print(f"  old type: {OLD_TYPE}\n  new type: {NEW_TYPE}")
    try:
        if savepoint is None:
            t = _step(f"0. bootstrap a Flink savepoint of the Events job: {entries:,} events "
                      f"(Flink's canonical format, encoded in bulk)")
            print("   " + bootstrap_events(old_sp, entries).summary())
            _done(t)
        t = _step("1. what the savepoint holds (statemorph inspect)")
        _call(inspect_verb, "inspect", old_sp)
        _done(t)

        t = _step("2. dry run against the new type (statemorph check)")
        new_toml, broken_toml = os.path.join(base, "events-v2.toml"), os.path.join(base, "events-broken.toml")
        for path, row_type in ((new_toml, NEW_TYPE), (broken_toml, BROKEN_TYPE)):
            with open(path, "w", encoding="utf-8") as f:
                f.write(schema_toml(row_type))
        status = _call(check_verb, "check", old_sp, "--schema", new_toml)
        print(f"   exit status {status} (0 as is / 1 migration needed / 3 incompatible)")
        print("\n   and a broken change (userId INT -> STRING) is refused:")
        status = _call(check_verb, "check", old_sp, "--schema", broken_toml)
        print(f"   exit status {status}")
        _done(t)

        t = _step("3. migrate to the new type (statemorph migrate)")
        _call(migrate_verb, "migrate", old_sp, "--schema", new_toml, "--out", new_sp, "--threads", "2")
        _done(t)

        t = _step("4. read the migrated savepoint back with statemorph's Flink reader")
        checked = show_migrated(old_sp, new_sp)
        print(f"   all {checked:,} entries: v2 = v1 with location, appVersion, sessionId added as NULL, "
              f"metadata reordered by name")
        _done(t)
        print(f"\nThe new job starts from {new_sp} with execution.state-recovery.path (or flink run -s);"
              f"\nin a checkout, ci/flink/flink.py restore does that with real Flink 2.3 (README).")
    finally:
        print(f"\ndone in {time.perf_counter() - t_start:.1f}s; savepoints in {base}"
              + ("" if keep or workdir else " (removed)"))
        if not keep and workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return ExitCode.OK


def _call(verb: Any, *argv: str) -> int:
    """Runs a verb as the command line would, parsed by the verb's own parser, so every option
    takes its own default (a demo never restates them)."""
    parser = argparse.ArgumentParser(prog="statemorph")
    verb.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv)
    return int(args.func(args))


def _leaves(table: pa.Table) -> dict[str, Any]:
    """Every leaf column of a read-back state, by field path (``value.f1.userId``)."""
    while any(str(t).startswith("struct") for t in table.schema.types):
        table = table.flatten()
    return {name: table.column(name) for name in table.column_names}


def show_migrated(old_sp: str, new_sp: str) -> int:
    """Read the Events state of both savepoints, check that every migrated entry is its old entry
    remapped by field name with the added fields null (derived from the two tables, not from a fixed
    permutation), print a few and return how many were checked."""
    old = read_flink_state_table(old_sp, OPERATOR, STATE).sort_by("key")
    new = read_flink_state_table(new_sp, OPERATOR, STATE).sort_by("key")
    verify_migrated(old, new)
    print("   (Flink's RowData snapshot keeps no top-level field names: eventId and metadata read back as f0, f1)")
    step = max(1, old.num_rows // SHOWN_ROWS)
    for i in range(0, min(old.num_rows, step * SHOWN_ROWS), step):  # same keys in the same rows (verified)
        print(f"   key {old.column('key')[i].as_py()}\n     v1 {old.column('value')[i].as_py()}\n"
              f"     v2 {new.column('value')[i].as_py()}")
    return int(old.num_rows)


def verify_migrated(old: pa.Table, new: pa.Table) -> None:
    """Both tables sorted by key: the same keys, every old field path's column unchanged, every
    new one all null; otherwise a :class:`~statemorph.errors.StateMigrationError`."""
    before, after = _leaves(old), _leaves(new)
    wrong = [path for path, col in after.items()
             if not (col.equals(before[path]) if path in before else col.null_count == len(col))]
    lost = sorted(set(before) - set(after))
    if old.num_rows != new.num_rows or wrong or lost:
        raise StateMigrationError(f"demo self-check failed: {old.num_rows:,} entries before, {new.num_rows:,} after; "
                                  f"changed: {', '.join(wrong) or 'none'}; lost: {', '.join(lost) or 'none'}")


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(savepoint=args.savepoint, entries=args.entries, workdir=args.workdir, keep=args.keep)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("demo", help="migrate a Flink savepoint of the Events job: inspect, check, migrate, read back")
    s.add_argument("savepoint", metavar="SAVEPOINT", nargs="?", default=None,
                   help=f"a Flink savepoint of the Events job (value state {STATE!r} of the operator with uid "
                        f"{OPERATOR!r}), e.g. the one real Flink took under tests/data/flink_savepoints/ in a "
                        f"checkout (default: bootstrap one with --entries events)")
    s.add_argument("--entries", type=positive_int, default=100_000,
                   help="events in the bootstrapped savepoint when no SAVEPOINT is given (default 100000)")
    s.add_argument("--workdir", default=None, help="where to put the savepoints (default: a temporary directory)")
    s.add_argument("--keep", action="store_true", help="keep the savepoints afterwards")
    s.set_defaults(func=cmd_demo)


__all__ = ["BROKEN_TYPE", "NEW_TYPE", "OLD_TYPE", "bootstrap_events", "cmd_demo", "events_table", "run_demo",
           "schema_toml", "show_migrated", "verify_migrated"]
