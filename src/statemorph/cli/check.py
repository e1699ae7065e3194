"""``statemorph check``: the dry run. The plan it prints is the one ``migrate`` executes
(:func:`statemorph.engine.plan.plan_rewrite`), so the two cannot disagree. ``--json`` prints the
per-state action and reason and the exit status (docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ExitCode
from .output import SAVEPOINT_HELP, Console, common_options

RESULTS = {ExitCode.OK: "as_is", ExitCode.MIGRATION_NEEDED: "migration_needed",
           ExitCode.INCOMPATIBLE: "incompatible"}
"""The ``result`` word of ``check --json`` per exit status."""

VERDICTS = {
    ExitCode.OK: "restorable as is (no migration needed)",
    ExitCode.MIGRATION_NEEDED: "restorable after migration (run: statemorph migrate ... --out NEW)",
    ExitCode.INCOMPATIBLE: "NOT restorable: incompatible schema change",
}


def load_descriptors(savepoint: str, schema_path: str) -> tuple[Any, Any]:
    """The savepoint's description and the new descriptors its schema file describes: for the
    Parquet form the metadata and a list of descriptors, for a Flink savepoint its operators
    (keyed state, and the operator state of the operators the file names) and the descriptors per
    operator uid."""
    from ..savepoint import read_metadata
    from ..savepoint.flink import is_flink_savepoint
    from ..savepoint.flink.description import describe_operators
    from ..savepoint.flink.native_view import open_flink_savepoint
    from ..savepoint.flink.operator_state_migrate import state_owners
    from ..schema_file import descriptors_for_operators, descriptors_for_savepoint, load_schema

    schema = load_schema(schema_path)
    if is_flink_savepoint(savepoint):
        sp = open_flink_savepoint(savepoint)
        operators = state_owners(sp, describe_operators(sp), list(schema.operators))
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


def state_document(s: Any) -> dict[str, Any]:
    """One planned state in the ``check --json`` shape (``entries`` is null where the format
    counts entries only while rewriting: Flink keyed-state files)."""
    return {"name": s.name, "kind": s.kind, "action": s.action, "outcome": s.outcome.name.lower(),
            "reason": s.reason, "entries": s.rows if s.rows >= 0 else None, "exit_status": int(s.exit_status)}


def check_document(plan: Any, schema: str) -> dict[str, Any]:
    """The ``check --json`` document of a plan (either savepoint form: a Flink plan adds its
    operators, each with the states of that operator)."""
    doc: dict[str, Any] = {"savepoint": plan.source, "schema": schema, "exit_status": int(plan.exit_status),
                           "result": RESULTS[plan.exit_status]}
    operators = getattr(plan, "operators", None)
    if operators is None:
        doc["format"] = "parquet"
        doc["key"] = state_document(plan.key) if plan.key is not None else None
    else:
        doc["format"] = "flink"
        doc["operators"] = [{"uid": op.operator.uid or None, "uid_hash": op.operator.uid_hash,
                             "exit_status": int(p.exit_status), "states": [state_document(s) for s in p.states]}
                            for op, p in operators]
    doc["states"] = [state_document(s) for s in plan.states]
    return doc


def cmd_check(args: argparse.Namespace) -> int:
    from ..schema_file import describe_serializer

    out = Console.from_args(args)
    plan, _ = plan_for(args.savepoint, args.schema)
    out.emit(check_document(plan, args.schema))
    out.say(f"check {args.savepoint} against {args.schema}")
    out.say(plan.summary)
    for s in plan.states:
        if s.new_serializer is not None:
            out.detail(f"  {s.name}: new {s.kind} type {describe_serializer(s.new_serializer)}")
    out.say(f"result: {VERDICTS[plan.exit_status]}")
    return int(plan.exit_status)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("check", parents=[common_options(json_output=True)],
                       help="dry run: can the new schema restore this savepoint? "
                            "exit 0 as is / 1 migration needed / 3 incompatible")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.add_argument("--schema", required=True, metavar="NEW.toml", help="schema file with the new state types")
    s.set_defaults(func=cmd_check)


__all__ = ["RESULTS", "VERDICTS", "check_document", "cmd_check", "load_descriptors", "plan_for"]
