"""The ``statemorph`` command: inspect, check, migrate savepoints; a demo; the benchmark suite.

Exit statuses: ``check`` answers 0 (restorable as is), 1 (migration needed) or 2 (incompatible);
every other command answers 0 on success, 1 when the work itself failed (corrupt data part way),
2 for a user mistake (bad arguments, missing or damaged savepoint, bad schema file, incompatible
schema). A user mistake prints one ``statemorph: error:`` line plus the detail, never a traceback
(``STATEMORPH_DEBUG=1`` shows it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .errors import (
    IncompatibleSchemaError,
    SavepointError,
    StatemorphError,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# -- output helpers -----------------------------------------------------------------------------

def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


class ProgressBar:
    """A one-line progress bar on a terminal (redrawn at most 10 times a second); on a pipe or a
    file it stays silent so logs are not flooded, and the summary line tells the result."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "migrating") -> None:
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)()) and self.total > 0
        self._last = 0.0
        self._t0 = time.perf_counter()

    def __call__(self, state: str, rows: int) -> None:
        self.done += rows
        now = time.perf_counter()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            self._draw(state)

    def _draw(self, state: str) -> None:
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        width = 30
        filled = int(frac * width)
        rate = self.done / max(time.perf_counter() - self._t0, 1e-9)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {frac:6.1%} "
                          f"{self.done:,}/{self.total:,} entries {rate:,.0f}/s  {state[:24]:<24}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# -- commands -------------------------------------------------------------------------------------

def _describe_snapshot(meta: Any, role: str) -> str:
    from .schema_file import describe_serializer

    try:
        return describe_serializer(meta.snapshot(role).restore_serializer())
    except StatemorphError as e:
        return f"<unreadable: {e}>"


def cmd_inspect(args: argparse.Namespace) -> int:
    from .savepoint.format import METADATA_FILE
    from .savepoint.reader import read_metadata
    from .schema_file import describe_serializer

    md = read_metadata(args.savepoint)
    try:
        key = describe_serializer(md.key_snapshot().restore_serializer())
    except StatemorphError as e:
        key = f"<unreadable: {e}>"
    total_rows = sum(s.rows for s in md.states.values())
    total_size = sum(f.size for s in md.states.values() for f in s.files)
    meta_size = os.path.getsize(os.path.join(args.savepoint, METADATA_FILE))
    print(f"savepoint {args.savepoint}")
    print(f"  format version {md.format_version}, max parallelism {md.max_parallelism}, key type {key}")
    print(f"  {len(md.states)} state(s), {total_rows:,} entries, {_human_bytes(total_size + meta_size)}")
    for name, st in md.states.items():
        size = sum(f.size for f in st.files)
        print(f"\nstate {name!r}: {st.kind.value} state, {st.rows:,} entries, {len(st.files)} file(s), "
              f"{_human_bytes(size)}")
        label = {"value": "value", "list": "element", "map": "map value"}[st.kind.value]
        print(f"  {label + ' type':<16}{_describe_snapshot(st, 'value_serializer')}")
        if st.user_key_serializer is not None:
            print(f"  {'map key type':<16}{_describe_snapshot(st, 'user_key_serializer')}")
        print(f"  {'namespace':<16}{_describe_snapshot(st, 'namespace_serializer')}")
        if args.verbose:
            try:
                ident = st.snapshot("value_serializer").IDENTIFIER
            except StatemorphError as e:
                ident = f"<unreadable: {e}>"
            print(f"  {'snapshot':<16}{ident}")
            for f in st.files:
                print(f"  {'file':<16}{f.path}  {f.rows:,} rows  {_human_bytes(f.size)}  sha256 {f.sha256[:16]}…")
    return EXIT_OK


def _load_descriptors(savepoint: str, schema_path: str) -> tuple[Any, list[Any]]:
    from .savepoint.reader import read_metadata
    from .schema_file import descriptors_for_savepoint, load_schema

    schema = load_schema(schema_path)
    md = read_metadata(savepoint)
    return md, descriptors_for_savepoint(schema, md)


def cmd_check(args: argparse.Namespace) -> int:
    from .engine.plan import plan_rewrite

    md, descriptors = _load_descriptors(args.savepoint, args.schema)
    plan = plan_rewrite(args.savepoint, md, descriptors)
    print(f"check {args.savepoint} against {args.schema}")
    print(plan.summary())
    verdict = {0: "restorable as is (no migration needed)", 1: "restorable after migration "
               "(run: statemorph migrate ... --out NEW)", 2: "NOT restorable: incompatible schema change"}
    print(f"result: {verdict[plan.exit_status]}")
    return plan.exit_status


def cmd_migrate(args: argparse.Namespace) -> int:
    from .engine.plan import MIGRATE, plan_rewrite

    md, descriptors = _load_descriptors(args.savepoint, args.schema)
    if os.path.exists(args.out):
        raise SavepointError(f"--out {args.out} already exists; savepoints are never overwritten")
    plan = plan_rewrite(args.savepoint, md, descriptors)
    print(f"migrating {args.savepoint} -> {args.out} ({args.engine} engine)")
    print(plan.summary())
    plan.raise_if_incompatible()
    bar = ProgressBar(plan.total_rows)
    t0 = time.perf_counter()
    try:
        if args.engine == "spark":
            from .spark import migrate_savepoint as spark_migrate
            from .spark import session

            report = spark_migrate(session(args.master), args.savepoint, args.out, descriptors,
                                   on_error=args.on_error)
        else:
            from .engine import migrate_savepoint

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
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from .engine.demo import run_demo

    return run_demo(entries=args.entries, workdir=args.workdir, keep=args.keep)


def cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    root = args.dir
    if not os.path.isdir(root):
        raise SavepointError(f"benchmark directory {root!r} not found: run from a statemorph source checkout "
                             f"or pass --dir")
    cmd = [sys.executable, "-m", "pytest", root, "--benchmark-only", "-q", "-p", "no:cacheprovider",
           "--benchmark-columns=min,median,mean,ops,rounds", "--benchmark-sort=name"]
    env = dict(os.environ)
    if args.full:
        env["STATEMORPH_SCALE_N"] = "10000000"
    cmd += args.pytest_args
    print("running:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env)


# -- parser and entry point -----------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="statemorph",
        description="Inspect, check and migrate savepoints whose state schema changed (Flink-compatible bytes).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("inspect", help="list states, kinds, types, entry counts and sizes of a savepoint")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("-v", "--verbose", action="store_true", help="also show snapshot identifiers and files")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("check", help="dry run: can the new schema restore this savepoint? "
                                     "exit 0 as is / 1 migration needed / 2 incompatible")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("migrate", help="write a new savepoint with every state in the new schema")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.add_argument("--out", required=True, metavar="DST", help="the new savepoint (must not exist)")
    s.add_argument("--engine", choices=("local", "spark"), default="local")
    s.add_argument("--master", default="local[2]", help="Spark master (with --engine spark), default local[2]")
    s.add_argument("--threads", type=_positive_int, default=2, help="local engine threads (default 2)")
    s.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="a value that cannot be read: stop (default), or drop that entry and report the count")
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("demo", help="build the Events savepoint, check, migrate and restore it")
    s.add_argument("--entries", type=_positive_int, default=1_000_000)
    s.add_argument("--workdir", default=None, help="where to put the savepoints (default: a temporary directory)")
    s.add_argument("--keep", action="store_true", help="keep the savepoints afterwards")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("bench", help="run the benchmark suite and print the table (extra arguments go to pytest)")
    s.add_argument("--dir", default="benchmarks", help="benchmark directory (default ./benchmarks)")
    s.add_argument("--full", action="store_true", help="include the 10-million-entry scale benchmarks")
    s.set_defaults(func=cmd_bench, pytest_args=[])  # any other arguments go to pytest (e.g. -k local)
    return p


def _positive_int(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def _error(message: str) -> None:
    first, _, rest = message.partition("\n")
    print(f"statemorph: error: {first}", file=sys.stderr)
    for line in rest.splitlines():
        print(f"  {line.strip()}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.pytest_args = extra
    debug = os.environ.get("STATEMORPH_DEBUG") == "1"
    try:
        return int(args.func(args))
    except IncompatibleSchemaError as e:
        if debug:
            raise
        _error(str(e))
        return EXIT_USAGE
    except StatemorphError as e:
        if debug:
            raise
        _error(str(e))
        # a savepoint/schema/type problem is the user's input; anything else failed mid-way
        from .errors import StateMigrationError

        return EXIT_FAILED if isinstance(e, StateMigrationError) else EXIT_USAGE
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        if debug:
            raise
        _error(f"{e.strerror or e}: {e.filename}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("statemorph: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
