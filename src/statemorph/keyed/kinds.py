"""The three kinds of keyed state. A kind is part of a state's identity in every savepoint format
(and of every descriptor), so it lives below both the backends and the formats."""

from __future__ import annotations

import enum


class StateKind(str, enum.Enum):
    """The three keyed state kinds; the string values are what savepoint metadata stores."""

    VALUE = "value"
    LIST = "list"
    MAP = "map"


__all__ = ["StateKind"]
