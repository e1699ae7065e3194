"""``statemorph check``: the dry run. The plan it prints is the one ``migrate`` executes
(:func:`statemorph.engine.plan.plan_rewrite`), so the two cannot disagree."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitCode

VERDICTS = {
    ExitCode.OK: "restorable as is (no migration needed)",
    ExitCode.MIGRATION_NEEDED: "restorable after migration (run: statemorph migrate ... --out NEW)",
    ExitCode.INCOMPATIBLE: "NOT restorable: incompatible schema change",
}


def load_descriptors(savepoint: str, schema_path: str) -> tuple[Any, list[Any]]:
    """The savepoint's metadata and the new descriptors its schema file describes."""
    from ..savepoint import read_metadata
    from ..schema_file import descriptors_for_savepoint, load_schema

    schema = load_schema(schema_path)
    md = read_metadata(savepoint)
    return md, descriptors_for_savepoint(schema, md)


def cmd_check(args: argparse.Namespace) -> int:
    from ..engine.plan import plan_rewrite

    md, descriptors = load_descriptors(args.savepoint, args.schema)
    plan = plan_rewrite(args.savepoint, md, descriptors)
    print(f"check {args.savepoint} against {args.schema}")
    print(plan.summary)
    print(f"result: {VERDICTS[plan.exit_status]}")
    return plan.exit_status


def add_parser(sub: Any) -> None:
    s = sub.add_parser("check", help="dry run: can the new schema restore this savepoint? "
                                     "exit 0 as is / 1 migration needed / 3 incompatible")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.set_defaults(func=cmd_check)


__all__ = ["VERDICTS", "cmd_check", "load_descriptors"]
