"""What every verb shares: sizes for humans, the progress bar, the one-line error, and the
mapping from an error to the exit status (the statuses themselves are
:class:`statemorph.errors.ExitCode`, documented once there and in docs/cli.md)."""

from __future__ import annotations

import sys
import textwrap
import time
from typing import TextIO

from ..errors import ExitCode, StatemorphError


def human_bytes(n: int) -> str:
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


__all__ = ["ProgressBar", "exit_code_for", "human_bytes", "print_error"]
