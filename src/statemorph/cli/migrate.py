"""``statemorph migrate``: write a new savepoint in the new schema, with the local or Spark engine.

The plan is printed first (the same plan ``check`` prints); an incompatible state stops the run
before anything is written (exit 3). ``--on-error`` offers
:data:`statemorph.errors.MIGRATE_ON_ERROR`, the subset of the one vocabulary
(:data:`~statemorph.errors.ON_ERROR_CHOICES`) without ``null``: a stored value, list element or key
cannot be null, so an unreadable entry is either fatal or skipped (and counted in the report)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import MIGRATE_ON_ERROR, EngineError, ExitCode, UsageError
from .check import plan_for
from .output import SAVEPOINT_HELP, Console, common_options


def flink_report_document(report: Any) -> dict[str, Any]:
    """``migrate --json`` for a Flink savepoint: the report as numbers (Flink keyed-state files
    are rewritten stream by stream; entries are counted for the migrated states only)."""
    return {"source": report.source, "destination": report.destination, "engine": report.engine, "format": "flink",
            "seconds": round(report.seconds, 3), "entries_migrated": report.rows,
            "rewritten_streams": report.rewritten_streams, "carried_files": report.carried_files,
            "states": [{"operator": op, "name": st, "entries_migrated": n} for (op, st), n in report.migrated.items()],
            "exit_status": int(ExitCode.OK)}


def cmd_migrate_flink(args: argparse.Namespace, descriptors: Any, out: Console) -> int:
    """A Flink canonical savepoint: the states the plan migrates are rewritten in Flink's own
    format (keys, key groups and everything else carried over), for Flink to restore."""
    from ..engine.flink import migrate_flink_savepoint

    def run(spark: Any = None) -> Any:
        return migrate_flink_savepoint(args.savepoint, args.out, descriptors, threads=args.threads,
                                       on_error=args.on_error, spark=spark)

    report = _with_spark(args, out, run) if args.engine == "spark" else run()
    out.emit(flink_report_document(report))
    out.say(report.summary())
    out.say(f"summary: {report.rows:,} values migrated in {report.seconds:.1f}s; new Flink savepoint at {args.out} "
            f"(restore it with execution.state-recovery.path)")
    return ExitCode.OK


def cmd_migrate(args: argparse.Namespace) -> int:
    from ..savepoint.files import destination_taken, refuse_inside
    from ..savepoint.flink import is_flink_savepoint
    from ..savepoint.storage import Location

    out = Console.from_args(args)
    if args.engine == "spark":  # before any work: without the extra, one line says what to install
        from ..extras import require

        require("pyspark", "--engine spark")
    if Location.of(args.out) is None:
        if destination_taken(args.out):
            raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
        if Location.of(args.savepoint) is None:
            refuse_inside(args.out, args.savepoint)
    elif Location.open(args.out).files():  # a URI read in place (cli.main.read_in_place)
        raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
    plan, descriptors = plan_for(args.savepoint, args.schema)
    out.say(f"migrating {args.savepoint} -> {args.out} ({args.engine} engine)")
    out.say(plan.summary)
    plan.raise_if_incompatible()
    if is_flink_savepoint(args.savepoint):
        return cmd_migrate_flink(args, descriptors, out)
    bar = out.progress(plan.total_rows)
    try:
        if args.engine == "spark":
            report = _run_spark(args, descriptors, out)
        else:
            from ..engine.local import migrate_savepoint

            report = migrate_savepoint(args.savepoint, args.out, descriptors, threads=args.threads,
                                       on_error=args.on_error, progress=bar)
    finally:
        bar.finish()
    out.emit({**report.to_dict(), "exit_status": int(ExitCode.OK)})
    out.say(report.summary())
    for st in report.to_dict()["states"]:
        out.detail(f"  {st['name']} ({st['kind']}): {st['action']}, {st['entries_read']:,} entries read, "
                   f"{st['entries_written']:,} written, {st['entries_skipped']:,} skipped")
    if report.migrated:
        out.say(f"summary: {report.migrated:,} entries migrated in {report.seconds:.1f}s; new savepoint at {args.out}")
    else:
        out.say(f"summary: nothing needed migration; states copied as they are to {args.out}")
    return ExitCode.OK


def _run_spark(args: argparse.Namespace, descriptors: Any, out: Console) -> Any:
    from ..engine.spark import migrate_savepoint as spark_migrate

    return _with_spark(args, out, lambda spark: spark_migrate(spark, args.savepoint, args.out, descriptors,
                                                              on_error=args.on_error))


def _with_spark(args: argparse.Namespace, out: Console, run: Any) -> Any:
    """``run(spark)`` in a session this command starts and always stops (an unstopped session
    ends the process with the JVM's shutdown errors on stderr). A session that was already
    running in this process (``main()`` called from a notebook or a test) is used and left
    running: it belongs to its caller.

    The JVM's output (log4j, executor errors, Python workers' tracebacks) goes to a log file
    unless ``-v`` asks for Spark's INFO log (:mod:`statemorph.engine.spark_jvm`); a failure comes
    out as one statemorph error: a task's typed error or an unreadable savepoint file with its own
    status, anything else of Spark's an :class:`~statemorph.errors.EngineError` naming the log,
    which is kept for it (and removed after every other outcome)."""
    import os

    from pyspark.sql import SparkSession

    from ..engine.spark import session
    from ..engine.spark_jvm import new_log, spark_failure

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


def add_parser(sub: Any) -> None:
    s = sub.add_parser("migrate", parents=[common_options(json_output=True)],
                       help="write a new savepoint with every state in the new schema")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.add_argument("--out", required=True, metavar="DST", help="the new savepoint (must not exist)")
    s.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="local: threads on this machine (the default); spark: Spark tasks (needs the spark "
                        "extra; every executor must see SAVEPOINT and DST at the same path)")
    s.add_argument("--master", default="local[2]", help="Spark master (with --engine spark), default local[2]")
    s.add_argument("--threads", type=positive_int, default=2, help="local engine threads (default 2)")
    s.add_argument("--on-error", choices=MIGRATE_ON_ERROR, default="raise",
                   help="a value that cannot be read: stop (raise, the default), or drop that entry and report "
                        "the count (skip)")
    s.set_defaults(func=cmd_migrate)


__all__ = ["cmd_migrate", "flink_report_document", "positive_int"]
