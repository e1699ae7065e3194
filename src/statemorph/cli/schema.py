"""``statemorph schema``: the schema file of a savepoint as it is, every state with its kind,
serializer family and type (``RAW('<class>')`` with ``serializer = "opaque"`` for a state
statemorph cannot decode), so a user edits the states that change instead of writing the file.
Checked against the same savepoint the file is a no-op (``statemorph check`` exit 0)."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine.formats import format_of
from ..errors import ExitCode
from ..schema_file import render_schema
from .output import SAVEPOINT_HELP


def schema_text(savepoint: str) -> str:
    """The schema file of ``savepoint`` (in its format's sections)."""
    return render_schema(format_of(savepoint).schema_sections(savepoint), savepoint)


def cmd_schema(args: argparse.Namespace) -> int:
    print(schema_text(args.savepoint), end="")
    return ExitCode.OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("schema", help="print the schema file of a savepoint as it is (edit it, then check / migrate)")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.set_defaults(func=cmd_schema)


__all__ = ["cmd_schema", "schema_text"]
