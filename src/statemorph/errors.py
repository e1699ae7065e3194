"""Typed errors, the exit statuses of the command line, and the ``on_error`` vocabulary.

Every failure a user can cause has its own class, so callers can tell corrupt bytes from an
incompatible schema from a programming mistake; each class says which exit status the
``statemorph`` command answers for it (:class:`ExitCode`, the ONE set, documented here and in
docs/cli.md). Anything that is not a :class:`StatemorphError` is a bug and keeps its traceback.
"""

from __future__ import annotations

import enum
import re
import unicodedata


class ExitCode(enum.IntEnum):
    """The exit statuses of ``statemorph`` (every verb, every engine) and of a plan's or check's
    ``exit_status``: the one table (docs/cli.md documents it). Scripts test these numbers, so 0-6
    keep their meaning and new statuses come after them. Each status is who has to act: the user's
    arguments (2), the savepoint's bytes (4, 5), the output's file system (6), statemorph itself
    (7), the cluster (8)."""

    OK = 0
    """Done; for ``check``: the savepoint restores as is."""
    MIGRATION_NEEDED = 1
    """``check`` only: the savepoint restores after ``statemorph migrate``."""
    USAGE = 2
    """Bad arguments or input files (argparse's status), a missing file, a bad schema file, a
    path that is not a savepoint (:class:`NotASavepointError`: a wrong path is the same mistake
    whether nothing or something else is there, so it is not a status of its own), an ``--out``
    that exists or whose parent folder does not (:class:`DestinationError`)."""
    INCOMPATIBLE = 3
    """The new schema cannot restore the savepoint (nothing was written)."""
    DAMAGED_SAVEPOINT = 4
    """The savepoint is missing parts or damaged: bad metadata, a checksum mismatch, a truncated
    or hostile file, a file that is not a regular file inside the savepoint."""
    DATA_ERROR = 5
    """A stored value could not be read or migrated (corrupt bytes part way through the data)."""
    OUTPUT_ERROR = 6
    """The output cannot be written (disk full, file too large, read-only file system, permission
    denied); nothing half-written is left behind."""
    UNSUPPORTED = 7
    """The savepoint is intact but holds what this version cannot read or write: a native
    savepoint or a checkpoint instead of a canonical savepoint, a state whose serializer statemorph
    cannot decode. Not damage (4): the same input works with Flink, and may with a later version."""
    ENGINE_ERROR = 8
    """The execution engine failed, not the savepoint: Spark or its JVM cannot start, a bad
    ``--master``, a lost executor. Nothing was written."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C), as a shell reports SIGINT."""
    BROKEN_PIPE = 141
    """Stdout was closed early by its reader (``statemorph inspect SP | head``), as a shell reports
    SIGPIPE; nothing more is printed."""


ON_ERROR_CHOICES = ("raise", "skip", "null")
"""What a bulk operation does with a value it cannot read: ``raise`` the typed error (it names
the row and field path), ``skip`` the entry, or write ``null`` in its place. Skipped and nulled
entries are counted in the operation's report, never silently lost. The one vocabulary: an
operation that cannot offer every choice offers one of the subsets below, derived from it."""

MIGRATE_ON_ERROR = tuple(c for c in ON_ERROR_CHOICES if c != "null")
"""What a savepoint migration offers (``statemorph migrate --on-error``, the engines,
``ColumnMigrator``): a stored value, list element or key cannot be null, so an unreadable entry
is either fatal or skipped (and counted in the report)."""

DECODE_COLUMN_ON_ERROR = tuple(c for c in ON_ERROR_CHOICES if c != "skip")
"""What decoding one column of a batch in place offers (``ColumnDecoder``): the batch keeps its
rows (a row dropped from one column would leave the others misaligned), so a bad value is fatal
or null."""


class StatemorphError(Exception):
    """Base of every error statemorph raises on purpose."""

    exit_code: ExitCode = ExitCode.USAGE


class LocatedError(StatemorphError):
    """An error about one value that, in bulk work, also says where it is: ``row`` (index in the
    input array, -1 outside bulk work), ``field_path`` (dotted path inside the value, ``""`` for
    the value itself) and ``code`` (the kernel's status code, -1 when raised by Python code)."""

    def __init__(self, message: str = "", *, row: int = -1, field_path: str = "", code: int = -1) -> None:
        super().__init__(message)
        self.row = row
        self.field_path = field_path
        self.code = code

    def at(self, row: int, field_path: str = "", code: int = -1) -> LocatedError:
        """Record where the error happened (a bulk operation knows the row the value came from)."""
        self.row = row
        self.field_path = field_path
        self.code = code
        return self


class StateFormatError(LocatedError, ValueError):
    """Bytes do not follow the format they claim to follow (corrupt, truncated, hostile)."""

    exit_code = ExitCode.DATA_ERROR


class TruncatedDataError(StateFormatError):
    """A read ran past the end of the available bytes."""

    def __init__(self, message: str, offset: int = -1, needed: int = 0, available: int = 0, *, row: int = -1,
                 field_path: str = "", code: int = -1) -> None:
        super().__init__(message, row=row, field_path=field_path, code=code)
        self.offset = offset
        self.needed = needed
        self.available = available


class MalformedDataError(StateFormatError):
    """Bytes are present but invalid: bad lengths, invalid encodings, bad flags, trailing garbage."""


class UnrepresentableValueError(StateFormatError):
    """Valid bytes holding a value that Arrow cannot hold, so bulk decode (``statemorph.arrow``)
    refuses the entry, naming the field path, where the per-value API (``from_bytes``) reads it: a
    null MAP / MULTISET key (an Arrow map key is never null) or a nested ROW whose RowKind is not
    INSERT (an Arrow struct has no row kind). Refused rather than dropped: a decode that changed
    the value would be silent data loss. docs/bulk.md lists these limits."""


class SnapshotError(StateFormatError):
    """A serializer snapshot cannot be read: unknown identifier, unsupported version, corrupt content."""


class UnknownSnapshotError(SnapshotError):
    """The snapshot identifier is not in the registry (never resolved by importing by name)."""


class UnsupportedVersionError(SnapshotError):
    """The snapshot (or file) was written in a version this library cannot read."""


class JavaSerializationError(SnapshotError):
    """A Java object serialization stream inside a Flink snapshot is truncated, corrupt, or holds
    a class statemorph does not accept (only a whitelisted family is read; nothing is
    instantiated). ``offset`` is where the problem was found."""

    def __init__(self, message: str, offset: int = -1) -> None:
        super().__init__(message)
        self.offset = offset


class SerializationError(LocatedError, ValueError):
    """A value cannot be written by a serializer (wrong type, out of range, null where not allowed)."""

    exit_code = ExitCode.DATA_ERROR


class TypeParseError(StatemorphError, ValueError):
    """A logical type string does not parse; the message points at the offending position."""

    def __init__(self, message: str, text: str = "", position: int = -1) -> None:
        if position >= 0 and text:
            message = f"{message} {_point_at(text, position)}"
        super().__init__(message)
        self.text = text
        self.position = position


def _point_at(text: str, position: int) -> str:
    """``at position N``, then the line of ``text`` holding it and a caret under that column (both
    indented two spaces). A type spread over several lines (a TOML multi-line string) shows its own
    line and says which; tabs are kept in the padding and wide (East Asian) characters count two
    columns, so the caret lands under the offending character on a terminal."""
    position = min(position, len(text))
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    line = text[start:end if end >= 0 else len(text)].rstrip("\r")
    column = position - start
    where = f"at position {position}"
    if start > 0 or end >= 0:
        where += f" (line {text.count(chr(10), 0, position) + 1}, column {column + 1})"
    pad = "".join("\t" if c == "\t" else "  " if unicodedata.east_asian_width(c) in "WF" else " "
                  for c in line[:column])
    return f"{where}\n  {line}\n  {pad}^"


class IncompatibleSchemaError(StatemorphError):
    """A new serializer cannot read or migrate the old state. `reason` names the field paths."""

    exit_code = ExitCode.INCOMPATIBLE

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class StateMigrationError(StatemorphError):
    """Migrating a state failed; the old state is left untouched."""

    exit_code = ExitCode.DATA_ERROR


class SavepointError(StatemorphError):
    """A savepoint directory is missing, partial, damaged or written in an unknown format."""

    exit_code = ExitCode.DAMAGED_SAVEPOINT


class UnsafeFileError(SavepointError):
    """A path in a savepoint is not a regular file inside the savepoint directory (a FIFO, a
    device, a socket, a directory, a symlink leading out, the same file listed twice). Refused
    before anything is read from it."""


class SavepointNotFoundError(SavepointError):
    """There is no savepoint at the given path (a user mistake, not damage)."""

    exit_code = ExitCode.USAGE


class NotASavepointError(SavepointNotFoundError):
    """The path is a directory (or file) with neither Flink's ``_metadata`` nor statemorph's
    ``_metadata.json``: an empty folder, ``/etc``, the folder above a savepoint. A usage error
    (2), like a path that does not exist, not damage (4): nothing says a savepoint was ever there,
    and a script must not report a wrong path as a broken savepoint."""

    @classmethod
    def at(cls, path: object) -> NotASavepointError:
        """The one message for every verb and both forms: what the path lacks."""
        return cls(f"{path} is not a savepoint: it has neither Flink's _metadata nor statemorph's _metadata.json")


class UnsupportedError(StatemorphError):
    """The input is intact but holds something this version of statemorph cannot read or write
    (:attr:`ExitCode.UNSUPPORTED`)."""

    exit_code = ExitCode.UNSUPPORTED


class UnsupportedStateError(UnsupportedError):
    """A state whose values statemorph cannot decode (a serializer it has no reader for, an
    opaque custom serializer). The message names the operator, the state and the serializer."""


class EngineError(StatemorphError):
    """The execution engine failed, not the savepoint (Spark or its JVM cannot start, a bad
    ``--master``, a lost executor); one line with the engine's own reason, no JVM stack."""

    exit_code = ExitCode.ENGINE_ERROR


class MissingDependencyError(StatemorphError, ImportError):
    """An optional dependency a feature needs is not installed; the message names the extra that
    brings it (``pip install "statemorph[spark]"``). Also an ImportError, so code that probes for
    an optional feature with ``except ImportError`` keeps working."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, module: str = "", extra: str = "") -> None:
        super().__init__(message)
        self.module = module
        self.extra = extra


class UsageError(StatemorphError):
    """The request itself is wrong (an output that already exists, a missing benchmark folder)."""

    exit_code = ExitCode.USAGE


class FlinkSavepointError(SavepointError):
    """A Flink savepoint (``_metadata`` and its state files) is damaged, hostile or not readable
    by statemorph; the message names the file, the offset and the field."""


class NotCanonicalSavepointError(FlinkSavepointError):
    """The directory holds a native savepoint or a checkpoint (incremental, changelog or
    file-merging handles, unaligned channel state, a hashmap backend's key groups) where a
    canonical savepoint is needed: only canonical savepoints carry state in Flink's
    backend-neutral format. Native savepoints and RocksDB checkpoints are read by
    ``savepoint.flink.native`` (inspect, read_state, convert); the rest cannot be read or
    rewritten. Unsupported (7), not damaged: Flink restores it as it is."""

    exit_code = ExitCode.UNSUPPORTED


class SavepointPathError(FlinkSavepointError, UnsafeFileError):
    """A state handle points outside the savepoint directory, or at something that is not a
    regular file (a FIFO, a device, a directory, a symlink leaving the directory)."""


def check_on_error(on_error: str, choices: tuple[str, ...] = ON_ERROR_CHOICES) -> str:
    """``on_error`` if it is one of ``choices`` (a subset of :data:`ON_ERROR_CHOICES` where an
    operation cannot offer every policy), else a :class:`ValueError` naming them."""
    if on_error not in choices:
        raise ValueError(f"on_error must be one of {choices}, got {on_error!r}")
    return on_error


class DestinationError(UsageError, SavepointError):
    """The destination given for a new savepoint (``--out``) cannot be one: it already exists
    (savepoints are never overwritten) or its parent folder does not exist. A usage error (2),
    checked before anything is written, so neither damage (4) nor an output failure (6); also a
    :class:`SavepointError`, as the writers raised before."""


class DestinationBusyError(UsageError):
    """Another statemorph run is writing the same destination right now (it holds the claim)."""


class OutputError(StatemorphError):
    """Writing the output failed in the file system (no space, file-size limit, read-only file
    system, permission denied). The message is one line naming the path; everything the run had
    written was removed."""

    exit_code = ExitCode.OUTPUT_ERROR


_TASK_ERROR = re.compile(r"^statemorph\.errors\.(\w+): (.*)$", re.MULTILINE)
_UNREADABLE_FILE = re.compile(r"error while reading file (?:file:)?(.+?)\.?(?:\s+SQLSTATE\b.*)?$", re.MULTILINE)
_JAVA_CAUSE = re.compile(r"^Caused by: [\w.$]+: (.+)$", re.MULTILINE)


def error_of_task(failure: BaseException) -> StatemorphError | None:
    """The statemorph error a Spark task failed with, as the driver's exception shows it, or ``None``.

    Spark hands the driver a ``PythonException`` / ``Py4JJavaError`` holding the worker's
    traceback as text, so a task's typed error would reach the user as a wall of JVM and Python
    frames. Its last ``statemorph.errors.<Class>: <message>`` line names the class; only classes of
    this module that derive from :class:`StatemorphError` are taken (nothing is looked up
    anywhere else), rebuilt with the message and no arguments beyond it, for its exit status.

    A savepoint file Spark's own Parquet reader could not read in a task (a page CRC mismatch, a
    truncated file: ``FAILED_READ_FILE``) is a :class:`SavepointError` naming the file and the
    deepest Java cause, as the local engine reports it (damaged, 4)."""
    text = str(failure)
    found = _TASK_ERROR.findall(text)
    if not found:
        unreadable = _UNREADABLE_FILE.search(text)
        if unreadable is None:
            return None
        path = re.sub(r"^//(?=/)", "", unreadable.group(1).strip())
        causes = _JAVA_CAUSE.findall(text)
        return SavepointError(f"{path}: cannot be read: {causes[-1].strip() if causes else 'unreadable'} "
                              f"(in a Spark task)")
    name, message = found[-1]
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, StatemorphError)):
        return None
    error = cls.__new__(cls)
    Exception.__init__(error, f"{message} (in a Spark task)")
    return error
