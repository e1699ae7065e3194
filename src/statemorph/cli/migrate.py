"""``statemorph migrate``: write a new savepoint in the new schema, with the local or Spark engine.

The plan is printed first (the same plan ``check`` prints); an incompatible state stops the run
before anything is written (exit 3). ``--on-error`` offers
:data:`statemorph.errors.MIGRATE_ON_ERROR`, the subset of the one vocabulary
(:data:`~statemorph.errors.ON_ERROR_CHOICES`) without ``null``: a stored value, list element or key
cannot be null, so an unreadable entry is either fatal or skipped (and counted in the report)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from ..bulk.chunks import DEFAULT_THREADS
from ..engine.formats import Local, MigrateReport, OnSpark, format_of
from ..engine.spark import session
from ..engine.spark_jvm import new_log, spark_failure
from ..errors import MIGRATE_ON_ERROR, EngineError, ExitCode, UsageError
from ..extras import require
from ..savepoint.files import destination_taken, refuse_inside
from ..savepoint.storage import Location
from .check import plan_for
from .output import SAVEPOINT_HELP, Console, common_options


def cmd_migrate(args: argparse.Namespace) -> int:
    out = Console.from_args(args)
    if args.task_bytes is not None and args.engine != "spark":
        raise UsageError("--task-bytes sizes Spark tasks: it needs --engine spark")
    if args.engine == "spark":  # before any work: without the extra, one line says what to install
        require("pyspark", "--engine spark")
    if Location.of(args.out) is None:
        if destination_taken(args.out):
            raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
        if Location.of(args.savepoint) is None:
            refuse_inside(args.out, args.savepoint)
    elif Location.open(args.out).files():  # a URI read in place (cli.main.read_in_place)
        raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
    fmt = format_of(args.savepoint)
    fmt.target(args.savepoint, args.to, migrate=True)  # before planning: a form it cannot write is a usage error
    if args.to == "native" and args.engine == "spark":
        raise UsageError("--to native is written by the local engine; the spark engine writes a canonical savepoint")
    plan, descriptors = plan_for(args.savepoint, args.schema)
    out.say(f"migrating {args.savepoint} -> {args.out} ({args.engine} engine)")
    out.say(plan.summary)
    plan.raise_if_incompatible()
    bar = out.progress(plan.total_rows if fmt.reports_progress else 0)
    try:
        if args.engine == "spark":
            report = _with_spark(args, out, lambda spark: fmt.rewrite(
                args.savepoint, args.out, descriptors, on_error=args.on_error, to=args.to,
                runner=OnSpark(spark, threads=args.threads or OnSpark.threads, task_bytes=args.task_bytes)))
        else:
            report = fmt.rewrite(args.savepoint, args.out, descriptors, on_error=args.on_error, progress=bar,
                                 to=args.to, runner=Local(threads=args.threads or DEFAULT_THREADS))
    finally:
        bar.finish()
    out.emit({**report.to_dict(), "exit_status": int(ExitCode.OK)})
    out.say(report.summary())
    for line in report.details():
        out.detail(line)
    out.say(report.conclusion(args.out))
    return ExitCode.OK


def _with_spark(args: argparse.Namespace, out: Console, run: Callable[[Any], MigrateReport]) -> MigrateReport:
    """``run(spark)`` in a session this command starts and always stops (an unstopped session
    ends the process with the JVM's shutdown errors on stderr). A session that was already
    running in this process (``main()`` called from a notebook or a test) is used and left
    running: it belongs to its caller.

    The JVM's output (log4j, executor errors, Python workers' tracebacks) goes to a log file
    unless ``-v`` asks for Spark's INFO log (:mod:`statemorph.engine.spark_jvm`); a failure comes
    out as one statemorph error: a task's typed error or an unreadable savepoint file with its own
    status, anything else of Spark's an :class:`~statemorph.errors.EngineError` naming the log,
    which is kept for it (and removed after every other outcome)."""
    # pyspark is the optional spark extra: imported only once cmd_migrate required it
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()  # its JVM already prints where its caller chose
    log = None if out.verbose or active is not None else new_log()
    keep_log = False
    try:
        if active is not None:
            return run(active)
        # Spark's own stage progress bar only where ours would show and the JVM's stderr is the terminal's
        console_progress = "true" if log is None and sys.stderr.isatty() and out.human else "false"
        spark = session(args.master, conf={"spark.ui.showConsoleProgress": console_progress},
                        log_level="INFO" if out.verbose else "WARN", jvm_log=log)
        try:
            return run(spark)
        finally:
            spark.stop()
    except Exception as e:
        error = None if os.environ.get("STATEMORPH_DEBUG") == "1" else spark_failure(e, log, args.master)
        if error is None:
            raise
        keep_log = isinstance(error, EngineError)
        raise error from None
    finally:
        if log is not None and not keep_log:
            log.unlink(missing_ok=True)


def positive_int(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def byte_size(text: str) -> int:
    """A positive size in bytes: an integer, optionally followed by K, M or G (KiB, MiB, GiB)."""
    unit = text[-1:].upper() if text[-1:].isalpha() else ""
    if unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (an integer, optionally with K, M or G)")
    return positive_int(text[:len(text) - len(unit)]) * _UNITS[unit]


def add_parser(sub: Any) -> None:
    s = sub.add_parser("migrate", parents=[common_options(json_output=True)],
                       help="write a new savepoint with every state in the new schema")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.add_argument("--out", required=True, metavar="DST", help="the new savepoint (must not exist)")
    s.add_argument("--to", choices=("canonical", "native"), default=None,
                   help="what a native savepoint or retained RocksDB checkpoint is migrated into: a canonical "
                        "savepoint (the default: restores into either backend) or a native savepoint (RocksDB "
                        "backend only; unchanged column families and files carried as they are; local engine)")
    s.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="local: threads on this machine (the default); spark: Spark tasks (needs the spark "
                        "extra; every executor must see SAVEPOINT and DST at the same path)")
    s.add_argument("--master", default="local[2]", help="Spark master (with --engine spark), default local[2]")
    s.add_argument("--threads", type=positive_int, default=None,
                   help=f"worker threads: local engine, default the usable cores ({DEFAULT_THREADS} here); "
                        f"spark engine, per task, default {OnSpark.threads}")
    s.add_argument("--task-bytes", type=byte_size, default=None, metavar="SIZE",
                   help="spark engine, a Flink savepoint: the stored bytes each Spark task migrates, about (e.g. "
                        "64M); a larger key group is cut into pieces at entry boundaries, so there can be more tasks "
                        "than key groups. Default: twice Spark's default parallelism in tasks")
    s.add_argument("--on-error", choices=MIGRATE_ON_ERROR, default="raise",
                   help="a value that cannot be read: stop (raise, the default), or drop that entry and report "
                        "the count (skip)")
    s.set_defaults(func=cmd_migrate)


__all__ = ["cmd_migrate", "positive_int"]
