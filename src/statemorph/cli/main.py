"""The ``statemorph`` command: parse the arguments, run one verb, turn its outcome into an exit
status. Each verb lives in its own module of this package; the exit statuses are
:class:`statemorph.errors.ExitCode`, the one table (its docstrings say what each means and why;
docs/cli.md documents it; ``--help`` lists it from the enum).

An expected error prints one ``statemorph: error:`` line plus the detail, never a traceback
(``STATEMORPH_DEBUG=1`` re-raises it). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from importlib.metadata import PackageNotFoundError, version

from .. import __version__
from ..engine.formats import format_of
from ..errors import ExitCode, StatemorphError, UsageError
from ..savepoint.storage import is_uri, local_destination, local_source
from . import bench, check, convert, demo, inspect, migrate, schema
from .output import error_document, exit_code_for, print_error, shown


def _version() -> str:
    try:
        installed = version("statemorph")
    except PackageNotFoundError:
        return __version__
    return __version__ if installed == __version__ else f"{__version__} (installed distribution {installed})"


def _fail(args: argparse.Namespace, message: str, status: int) -> int:
    """An expected error: one ``statemorph: error:`` line (plus detail) on stderr and, with
    ``--json``, the error document on stdout, so a script reading stdout always gets JSON."""
    message = shown(message, getattr(args, "locations", {}))
    print_error(message)
    if getattr(args, "json", False):
        print(json.dumps(error_document(message, status), indent=2, ensure_ascii=False))
    return status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="statemorph",
        description="Inspect, check and migrate savepoints whose state schema changed (Flink-compatible bytes).",
        epilog="exit status: " + ", ".join(f"{int(c)} {c.name.lower().replace('_', ' ')}" for c in ExitCode)
               + " (docs/cli.md)",
    )
    p.add_argument("--version", action="version", version=f"statemorph {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for verb in (inspect, check, migrate, convert, schema, demo, bench):
        verb.add_parser(sub)
    return p


def read_in_place(args: argparse.Namespace) -> bool:
    """Whether the verb reads and writes its URIs in place instead of staging them: ``migrate
    --engine spark`` of a savepoint whose format says its Spark tasks read the source and write
    the result's files under ``--out`` themselves (a Flink savepoint: key-group ranges;
    :mod:`statemorph.savepoint.storage`, direct access)."""
    uris = [w for w in (getattr(args, "savepoint", None), getattr(args, "out", None))
            if isinstance(w, str) and is_uri(w)]
    return (bool(uris) and args.command == "migrate" and getattr(args, "engine", "local") == "spark"
            and format_of(args.savepoint).spark_reads_in_place)


@contextmanager
def staged_locations(args: argparse.Namespace) -> Iterator[None]:
    """A verb's SAVEPOINT and ``--out`` given as URIs (``s3://...``) become local paths for the
    verb's run: the source is copied in, the result published when the verb succeeds
    (:mod:`statemorph.savepoint.storage`). ``args.locations`` maps each local path back to its URI, so
    what the verb prints names the URIs. A verb that handles URIs itself (:func:`read_in_place`)
    gets them as they are."""
    args.locations = {}
    if read_in_place(args):
        yield
        return
    with ExitStack() as stack:
        for attr, stage in (("out", local_destination), ("savepoint", local_source)):  # refuse a taken --out first
            where = getattr(args, attr, None)
            if isinstance(where, str) and is_uri(where):
                master = getattr(args, "master", "local")
                if getattr(args, "engine", "local") == "spark" and not master.startswith("local"):
                    raise UsageError(f"{where}: with --engine spark on a cluster, give a path every executor "
                                     f"sees; URIs of statemorph's Parquet form are staged on this machine (local "
                                     f"masters only; a Flink savepoint's URIs are read and written in place)")
                local = stack.enter_context(stage(where))
                args.locations[local] = where
                setattr(args, attr, local)
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; its exit status. Stdout closed early by its reader (``statemorph inspect SP
    | head``) ends the run quietly with :attr:`ExitCode.BROKEN_PIPE`, for every verb."""
    try:
        status = _run_verb(argv)
        sys.stdout.flush()  # a closed pipe shows here at the latest, not in the interpreter's exit
    except BrokenPipeError:
        return _stdout_closed()
    return status


def _stdout_closed() -> int:
    """Stdout's reader went away: point stdout at the null device, so the interpreter's final
    flush of what is still buffered cannot fail again (Python's documented handling of SIGPIPE),
    and answer :attr:`ExitCode.BROKEN_PIPE` (a shell's status for a writer stopped by SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (captured in a test): nothing to flush later
        pass
    return ExitCode.BROKEN_PIPE


def _run_verb(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.pytest_args = extra
    debug = os.environ.get("STATEMORPH_DEBUG") == "1"
    try:
        with staged_locations(args):
            return int(args.func(args))
    except StatemorphError as e:
        if debug:
            raise
        return _fail(args, str(e), exit_code_for(e))
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        if debug:
            raise
        return _fail(args, f"{e.strerror or e}: {e.filename}", exit_code_for(e))
    except KeyboardInterrupt:
        print("statemorph: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def use_process_defaults() -> None:
    """Settings for a ``statemorph`` process (the console script, ``python -m statemorph``), never
    for a program that calls :func:`main` or the library in its own process.

    Arrow's jemalloc pool unless ``ARROW_DEFAULT_MEMORY_POOL`` names one: with mimalloc, Arrow's
    default, the pages of the buffers freed after each key-group slice are kept, so a long run's
    peak memory crept up with its entry count (10% more for 50 M Events entries than for 5 M on a
    Flink savepoint); with jemalloc it stays within 2% (benchmarks/RESULTS.md, "Memory and the
    entry count"). Arrow builds without jemalloc keep their default."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:
        pass


def run() -> int:
    """The console script's entry point: :func:`use_process_defaults`, then :func:`main`."""
    use_process_defaults()
    return main()


__all__ = ["ExitCode", "build_parser", "main", "run", "use_process_defaults"]
