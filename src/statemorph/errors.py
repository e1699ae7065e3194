"""Typed errors. Every failure a user can cause has its own class, so callers can tell
corrupt bytes from an incompatible schema from a programming mistake."""

from __future__ import annotations


class StatemorphError(Exception):
    """Base of every error statemorph raises on purpose."""


class StateFormatError(StatemorphError, ValueError):
    """Bytes do not follow the format they claim to follow (corrupt, truncated, hostile)."""


class TruncatedDataError(StateFormatError):
    """A read ran past the end of the available bytes."""

    def __init__(self, message: str, offset: int = -1, needed: int = 0, available: int = 0) -> None:
        super().__init__(message)
        self.offset = offset
        self.needed = needed
        self.available = available


class MalformedDataError(StateFormatError):
    """Bytes are present but invalid: bad lengths, invalid encodings, bad flags, trailing garbage."""


class SnapshotError(StateFormatError):
    """A serializer snapshot cannot be read: unknown identifier, unsupported version, corrupt content."""


class UnknownSnapshotError(SnapshotError):
    """The snapshot identifier is not in the registry (never resolved by importing by name)."""


class UnsupportedVersionError(SnapshotError):
    """The snapshot (or file) was written in a version this library cannot read."""


class SerializationError(StatemorphError, ValueError):
    """A value cannot be written by a serializer (wrong type, out of range, null where not allowed)."""


class TypeParseError(StatemorphError, ValueError):
    """A logical type string does not parse; the message points at the offending position."""

    def __init__(self, message: str, text: str = "", position: int = -1) -> None:
        if position >= 0 and text:
            pointer = " " * position + "^"
            message = f"{message} at position {position}\n  {text}\n  {pointer}"
        super().__init__(message)
        self.text = text
        self.position = position


class IncompatibleSchemaError(StatemorphError):
    """A new serializer cannot read or migrate the old state. `reason` names the field paths."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class StateMigrationError(StatemorphError):
    """Migrating a state failed; the old state is left untouched."""


class SavepointError(StatemorphError):
    """A savepoint directory is missing, partial, damaged or written in an unknown format."""


class FlinkSavepointError(SavepointError):
    """A Flink savepoint (``_metadata`` and its state files) is damaged, hostile or not readable
    by statemorph; the message names the file, the offset and the field."""


class NotCanonicalSavepointError(FlinkSavepointError):
    """The directory holds a native savepoint or a checkpoint (incremental, changelog or
    file-merging handles, unaligned channel state): only canonical savepoints carry state in
    Flink's backend-neutral format, so this one cannot be read or rewritten."""


class SavepointPathError(FlinkSavepointError):
    """A state handle points outside the savepoint directory, or at something that is not a
    regular file (a FIFO, a device, a directory, a symlink leaving the directory)."""
