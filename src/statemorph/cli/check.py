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


def load_descriptors(savepoint: str, schema_path: str) -> tuple[Any, Any]:
    """The savepoint's description and the new descriptors its schema file describes: for the
    Parquet form the metadata and a list of descriptors, for a Flink savepoint its keyed
    operators and the descriptors per operator uid."""
    from ..savepoint import read_metadata
    from ..savepoint.flink import FlinkSavepoint, is_flink_savepoint
    from ..savepoint.flink.description import describe_operators
    from ..schema_file import descriptors_for_operators, descriptors_for_savepoint, load_schema

    schema = load_schema(schema_path)
    if is_flink_savepoint(savepoint):
        operators = describe_operators(FlinkSavepoint(savepoint))
        return operators, descriptors_for_operators(schema, operators)
    md = read_metadata(savepoint)
    return md, descriptors_for_savepoint(schema, md)


def plan_for(savepoint: str, schema_path: str) -> tuple[Any, Any]:
    """The plan ``check`` prints and ``migrate`` executes, in either savepoint form, and the
    descriptors it was made from."""
    from ..engine.flink import plan_flink_savepoint
    from ..engine.plan import plan_rewrite
    from ..savepoint.flink import is_flink_savepoint

    md, descriptors = load_descriptors(savepoint, schema_path)
    if is_flink_savepoint(savepoint):
        return plan_flink_savepoint(savepoint, descriptors), descriptors
    return plan_rewrite(savepoint, md, descriptors), descriptors


def cmd_check(args: argparse.Namespace) -> int:
    plan, _ = plan_for(args.savepoint, args.schema)
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


__all__ = ["VERDICTS", "cmd_check", "load_descriptors", "plan_for"]
