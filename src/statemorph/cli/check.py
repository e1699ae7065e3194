"""``statemorph check``: the dry run. The plan it prints is the one ``migrate`` executes
(:func:`statemorph.engine.plan.plan_rewrite`), so the two cannot disagree. ``--json`` prints the
per-state action and reason and the exit status (docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine.formats import Descriptors, SavepointPlan, format_of
from ..engine.plan import StatePlan
from ..errors import ExitCode
from ..schema_file import load_schema
from ..typeutils import describe_serializer
from .output import SAVEPOINT_HELP, Console, common_options

RESULTS = {ExitCode.OK: "as_is", ExitCode.MIGRATION_NEEDED: "migration_needed",
           ExitCode.INCOMPATIBLE: "incompatible"}
"""The ``result`` word of ``check --json`` per exit status."""

VERDICTS = {
    ExitCode.OK: "restorable as is (no migration needed)",
    ExitCode.MIGRATION_NEEDED: "restorable after migration (run: statemorph migrate ... --out NEW)",
    ExitCode.INCOMPATIBLE: "NOT restorable: incompatible schema change",
}


def plan_for(savepoint: str, schema_path: str) -> tuple[SavepointPlan, Descriptors]:
    """The plan ``check`` prints and ``migrate`` executes, in the savepoint's format
    (:func:`~statemorph.engine.formats.format_of`), and the descriptors it was made from. The
    schema file is read first: a wrong schema path is reported before the savepoint is looked at."""
    schema = load_schema(schema_path)
    return format_of(savepoint).plan(savepoint, schema)


def state_document(s: StatePlan) -> dict[str, Any]:
    """One planned state in the ``check --json`` shape (``entries`` is null where the format
    counts entries only while rewriting: Flink keyed-state files)."""
    return {"name": s.name, "kind": s.kind, "action": s.action, "outcome": s.outcome.name.lower(),
            "reason": s.reason, "entries": s.rows if s.rows >= 0 else None, "exit_status": int(s.exit_status)}


def check_document(plan: SavepointPlan, schema: str) -> dict[str, Any]:
    """The ``check --json`` document of a plan (its format adds its own fields: the key check of
    the Parquet form, the operators of a Flink savepoint, each with its states)."""
    doc: dict[str, Any] = {"savepoint": plan.source, "schema": schema, "exit_status": int(plan.exit_status),
                           "result": RESULTS[plan.exit_status]}
    doc.update(plan.check_fields(state_document))
    doc["states"] = [state_document(s) for s in plan.states]
    return doc


def cmd_check(args: argparse.Namespace) -> int:
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


__all__ = ["RESULTS", "VERDICTS", "check_document", "cmd_check", "plan_for"]
