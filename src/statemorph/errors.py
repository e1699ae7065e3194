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


ON_ERROR_CHOICES = ("raise", "skip", "null")
"""What a bulk operation does with a value it cannot read: ``raise`` the typed error (it names
the row and field path), ``skip`` the entry, or write ``null`` in its place. Skipped and nulled
entries are counted in the operation's report, never silently lost."""


def check_on_error(on_error: str, choices: tuple[str, ...] = ON_ERROR_CHOICES) -> str:
    """``on_error`` if it is one of ``choices`` (a subset of :data:`ON_ERROR_CHOICES` where an
    operation cannot offer every policy), else a :class:`ValueError` naming them."""
    if on_error not in choices:
        raise ValueError(f"on_error must be one of {choices}, got {on_error!r}")
    return on_error
