"""The JVM behind a Spark session, as the ``statemorph`` command shows it: where its output goes,
and its failures as statemorph errors (statuses of :class:`statemorph.errors.ExitCode`).

Spark's JVM writes to the file descriptors it inherits: log4j's console lines, the JVM's own
warnings, an executor's ``ERROR`` log with the Java stack of a failed task, and, through the
JVM, the stderr of every Python worker (a task's full traceback). Dozens to hundreds of lines
would come before statemorph's one ``statemorph: error:`` line, and with ``-q`` / ``--json``
nothing but statemorph's lines may be printed. So the command starts the JVM with its stdout and
stderr on a log file (:func:`jvm_output`); the file is kept only when the failure is the
engine's own (it is named in the error line), and removed otherwise.

A failure becomes one error (:func:`spark_failure`): a task's typed statemorph error or a
savepoint file Spark could not read (:func:`statemorph.errors.error_of_task`), else an
:class:`~statemorph.errors.EngineError` with the JVM's own reason (a bad ``--master``, a JVM
that cannot start, a lost executor) on one line.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import EngineError, StatemorphError, error_of_task

_JAVA_REASON = re.compile(r"^(?:Exception in thread \"[^\"]*\" )?(?:Caused by: )?(?:: )?"
                          r"((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)): (.+)$", re.MULTILINE)
"""A Java exception line: ``org.apache.spark.SparkException: Master must ...`` (also after
``Exception in thread "main"`` and Py4J's ``: `` prefix)."""

LOG_TAIL = 1 << 16
"""How much of the end of the JVM's log is searched for the reason of a failure."""


def new_log() -> Path:
    """A fresh file for one run's JVM output (in the temporary directory)."""
    fd, name = tempfile.mkstemp(prefix="statemorph-spark-", suffix=".log")
    os.close(fd)
    return Path(name)


@contextmanager
def jvm_output(log: Path | None) -> Iterator[None]:
    """While the block runs, this process's stdout and stderr (file descriptors 1 and 2) are
    ``log``, so a JVM started inside it (and every Python worker it starts later) writes there
    for its whole life; ours are restored when the block ends. ``None`` leaves them as they are
    (``-v``: Spark's INFO log on the terminal)."""
    if log is None:
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def is_spark_failure(error: BaseException) -> bool:
    """Whether ``error`` is Spark's or Py4J's (a failed job, a gateway that did not start)."""
    return type(error).__module__.split(".")[0] in ("pyspark", "py4j")


def java_reason(text: str) -> str:
    """The last Java exception line in ``text`` (``Class: message``, its message only), or ``""``."""
    found = _JAVA_REASON.findall(text)
    return found[-1][1].strip() if found else ""


def _log_tail(log: Path | None) -> str:
    if log is None or not log.is_file():
        return ""
    with open(log, "rb") as f:
        f.seek(max(log.stat().st_size - LOG_TAIL, 0))
        return f.read().decode("utf-8", "replace")


def spark_failure(error: BaseException, log: Path | None, master: str) -> StatemorphError | None:
    """The statemorph error for a failure that came out of Spark, or ``None`` when ``error`` is
    not Spark's (a bug, which keeps its traceback)."""
    task_error = error_of_task(error)
    if task_error is not None or not is_spark_failure(error):
        return task_error
    text = str(error)
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    reason = java_reason(text) or java_reason(_log_tail(log)) or first
    where = f"; Spark's log: {log}" if log is not None else ""
    if "JAVA_GATEWAY_EXITED" in text:
        return EngineError(f"Spark did not start (--master {master}): {reason}{where}")
    return EngineError(f"Spark failed: {reason[:500]}{where}")


__all__ = ["LOG_TAIL", "is_spark_failure", "java_reason", "jvm_output", "new_log", "spark_failure"]
