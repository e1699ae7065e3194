"""What every verb shares: the common options (``--quiet``, ``-v``, ``--json``) and the
:class:`Console` that honours them, sizes for humans, the progress bar, the one-line error, and the
mapping from an error to the exit status (the statuses themselves are
:class:`statemorph.errors.ExitCode`, documented once there and in docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from typing import Any, TextIO

from ..errors import ExitCode, StatemorphError


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


SAVEPOINT_HELP = ("a Flink savepoint (a directory with _metadata) or a statemorph savepoint in the Parquet "
                  "form; a path or a URI (s3://, gs://, hdfs://, abfs://, file://)")
"""What SAVEPOINT means on every verb that reads one (``--help``)."""


def common_options(json_output: bool) -> argparse.ArgumentParser:
    """The options every verb takes after its name (a parent parser): ``-q`` / ``-v``, and
    ``--json`` on the verbs whose result has a documented JSON shape (docs/cli.md)."""
    p = argparse.ArgumentParser(add_help=False)
    level = p.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true",
                       help="print nothing but errors (and the --json document); no progress bar")
    level.add_argument("-v", "--verbose", action="store_true", help="print more detail")
    if json_output:
        p.add_argument("--json", action="store_true",
                       help="print the result as one JSON document on stdout (shape: docs/cli.md)")
    return p


class Console:
    """Where a verb's words go. Human text goes to stdout unless ``--quiet`` or ``--json``;
    detail only with ``-v``; with ``--json``, stdout carries exactly one JSON document. Verbs
    called with a bare Namespace (the demo calls ``inspect`` and ``check``) get the defaults."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False, json_output: bool = False,
                 locations: dict[str, str] | None = None) -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.json = json_output
        self.locations = locations or {}

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Console:
        return cls(quiet=bool(getattr(args, "quiet", False)), verbose=bool(getattr(args, "verbose", False)),
                   json_output=bool(getattr(args, "json", False)), locations=getattr(args, "locations", None))

    @property
    def human(self) -> bool:
        return not (self.quiet or self.json)

    def say(self, text: str = "") -> None:
        if self.human:
            print(shown(text, self.locations), flush=True)

    def detail(self, text: str) -> None:
        if self.human and self.verbose:
            print(shown(text, self.locations), flush=True)

    def emit(self, document: dict[str, Any]) -> None:
        """The ``--json`` document (printed only in JSON mode)."""
        if self.json:
            print(shown(json.dumps(document, indent=2, ensure_ascii=False), self.locations, json_text=True), flush=True)

    def progress(self, total: int, label: str = "migrating") -> ProgressBar:
        """A bar on stderr when it is a terminal, never with ``--quiet`` or ``--json`` (a script
        that asked for JSON may still have a terminal on stderr: it gets the document only)."""
        return ProgressBar(total, label=label, quiet=not self.human)


class ProgressBar:
    """A one-line progress bar on a terminal (redrawn at most 10 times a second); on a pipe or a
    file, or with ``--quiet``, it stays silent so logs are not flooded, and the summary tells the
    result."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "migrating",
                 quiet: bool = False) -> None:
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.enabled = (not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
                        and self.total > 0)
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


def shown(text: str, locations: dict[str, str], *, json_text: bool = False) -> str:
    """``text`` with each local staging path of a URI savepoint replaced by the URI the user gave
    (``locations``: local path -> URI; ``json_text``: ``text`` is JSON, paths appear escaped)."""
    for local, uri in locations.items():
        if json_text:
            local, uri = json.dumps(local)[1:-1], json.dumps(uri)[1:-1]
        text = text.replace(local, uri)
    return text


def print_error(message: str) -> None:
    """One ``statemorph: error:`` line, then the detail lines indented (never a traceback). The
    detail keeps its own relative indentation: a caret under a type string must stay in its column."""
    first, _, rest = message.partition("\n")
    print(f"statemorph: error: {first}", file=sys.stderr)
    for line in textwrap.dedent(rest).splitlines():
        print(f"  {line.rstrip()}", file=sys.stderr)


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit status for an error a verb let through: each statemorph error class names its own;
    a missing or unreadable input file is a usage error."""
    if isinstance(error, StatemorphError):
        return error.exit_code
    return ExitCode.USAGE


def error_document(message: str, status: int) -> dict[str, Any]:
    """The ``--json`` document of a run that ended in an expected error (also printed on stderr)."""
    first, _, rest = message.partition("\n")
    return {"error": first, "detail": textwrap.dedent(rest).splitlines(), "exit_status": int(status)}


__all__ = ["Console", "ProgressBar", "common_options", "error_document", "exit_code_for", "human_bytes",
           "print_error", "shown"]
