"""Row values: a tuple that also carries Flink's ``RowKind`` (the changelog flag that both the
flink-core Row format and BinaryRowData store in their header)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any


class RowKind(enum.IntEnum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short_string(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


class Row(tuple):  # type: ignore[type-arg]
    """A tuple of field values with a ``kind``. Equal to a plain tuple with the same fields, so
    ``serializer.from_bytes(b) == (7, (3, 'x'))`` holds; the kind shows in ``repr`` only when it
    is not INSERT. Plain tuples are accepted everywhere a row is, as INSERT rows."""

    kind: RowKind

    def __new__(cls, fields: Iterable[Any] = (), kind: RowKind = RowKind.INSERT) -> Row:
        self = super().__new__(cls, fields)
        self.kind = RowKind(kind)
        return self

    def __repr__(self) -> str:
        body = tuple.__repr__(self)
        return body if self.kind is RowKind.INSERT else f"{self.kind.short_string}{body}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Row, (tuple(self), self.kind))


def row_kind_of(value: Any) -> RowKind:
    """The kind of a row value; plain tuples are INSERT."""
    return value.kind if isinstance(value, Row) else RowKind.INSERT


__all__ = ["Row", "RowKind", "row_kind_of"]
