"""``statemorph migrate``: write a new savepoint in the new schema, with the local or Spark engine.

The plan is printed first (the same plan ``check`` prints); an incompatible state stops the run
before anything is written (exit 3). ``--on-error`` uses the one vocabulary of
:data:`statemorph.errors.ON_ERROR_CHOICES`; ``null`` is not offered because a stored value, list
element or key cannot be null, so an unreadable entry is either fatal or skipped (and counted in
the report)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..errors import ON_ERROR_CHOICES, ExitCode, UsageError
from .check import load_descriptors
from .output import ProgressBar

MIGRATE_ON_ERROR = tuple(c for c in ON_ERROR_CHOICES if c != "null")


def cmd_migrate(args: argparse.Namespace) -> int:
    from ..engine.plan import MIGRATE, plan_rewrite
    from ..savepoint.files import destination_taken, refuse_inside

    md, descriptors = load_descriptors(args.savepoint, args.schema)
    if destination_taken(args.out):
        raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
    refuse_inside(args.out, args.savepoint)
    plan = plan_rewrite(args.savepoint, md, descriptors)
    print(f"migrating {args.savepoint} -> {args.out} ({args.engine} engine)")
    print(plan.summary)
    plan.raise_if_incompatible()
    bar = ProgressBar(plan.total_rows)
    t0 = time.perf_counter()
    try:
        if args.engine == "spark":
            from ..engine.spark import migrate_savepoint as spark_migrate
            from ..engine.spark import session

            report = spark_migrate(session(args.master), args.savepoint, args.out, descriptors,
                                   on_error=args.on_error)
        else:
            from ..engine.local import migrate_savepoint

            report = migrate_savepoint(args.savepoint, args.out, descriptors, threads=args.threads,
                                       on_error=args.on_error, progress=bar)
    finally:
        bar.finish()
    migrated = sum(s.rows for s in plan.states if s.action == MIGRATE)
    elapsed = time.perf_counter() - t0
    print(report.summary())
    if migrated:
        print(f"summary: {migrated:,} entries migrated in {elapsed:.1f}s; new savepoint at {args.out}")
    else:
        print(f"summary: nothing needed migration; states copied as they are to {args.out}")
    return ExitCode.OK


def positive_int(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def add_parser(sub: Any) -> None:
    s = sub.add_parser("migrate", help="write a new savepoint with every state in the new schema")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.add_argument("--out", required=True, metavar="DST", help="the new savepoint (must not exist)")
    s.add_argument("--engine", choices=("local", "spark"), default="local")
    s.add_argument("--master", default="local[2]", help="Spark master (with --engine spark), default local[2]")
    s.add_argument("--threads", type=positive_int, default=2, help="local engine threads (default 2)")
    s.add_argument("--on-error", choices=MIGRATE_ON_ERROR, default="raise",
                   help="a value that cannot be read: stop (raise, the default), or drop that entry and report "
                        "the count (skip)")
    s.set_defaults(func=cmd_migrate)


__all__ = ["MIGRATE_ON_ERROR", "cmd_migrate", "positive_int"]
