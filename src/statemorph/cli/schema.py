"""``statemorph schema``: the schema file of a savepoint as it is, every state with its kind,
serializer family and type (``RAW('<class>')`` with ``serializer = "opaque"`` for a state
statemorph cannot decode), so a user edits the states that change instead of writing the file.
Checked against the same savepoint the file is a no-op (``statemorph check`` exit 0)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from ..errors import ExitCode
from .output import SAVEPOINT_HELP


def schema_text(savepoint: str) -> str:
    """The schema file of ``savepoint`` (either form)."""
    from ..savepoint import read_metadata
    from ..savepoint.flink import FlinkSavepoint, is_flink_savepoint
    from ..savepoint.flink.description import describe_operators
    from ..schema_file import render_schema, toml_key

    sections: list[tuple[str, Mapping[str, Any]]]
    if is_flink_savepoint(savepoint):
        sections = [(f"operators.{toml_key(op.ident)}.states", op.states)
                    for op in describe_operators(FlinkSavepoint(savepoint))]
    else:
        sections = [("states", read_metadata(savepoint).states)]
    return render_schema(sections, savepoint)


def cmd_schema(args: argparse.Namespace) -> int:
    print(schema_text(args.savepoint), end="")
    return ExitCode.OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("schema", help="print the schema file of a savepoint as it is (edit it, then check / migrate)")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.set_defaults(func=cmd_schema)


__all__ = ["cmd_schema", "schema_text"]
