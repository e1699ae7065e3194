"""``statemorph inspect``: what a savepoint holds (states, kinds, types, entry counts, sizes), in
either form (a Flink savepoint: per operator), as text or, with ``--json``, as the documented
document (docs/cli.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..engine.formats import format_of
from ..errors import ExitCode, UsageError
from ..schema_file import load_schema
from .output import SAVEPOINT_HELP, Console, common_options, human_bytes

ELEMENT_LABEL = {"value": "value", "list": "element", "map": "map value"}
"""What ``value_type`` describes per state kind (list state: the element; map state: the map value)."""

UID_METADATA_VERSION = 5
"""The first ``_metadata`` version that records uid strings (Flink 2.0)."""

NAMINGS = {"uid": "its uid", "uid_hash": "its uid hash",
           "derived_id": "a uid this savepoint does not record: its derived ID is this operator's"}
"""How ``inspect --schema`` says a schema file's name finds an operator (``named_by.by``)."""


def _shown(type_text: str | None, problems: dict[str, str], role: str) -> str:
    return type_text if type_text is not None else f"<unreadable: {problems.get(role, '')}>"


def say_flink(args: argparse.Namespace, out: Console, info: dict[str, Any]) -> None:
    """A Flink savepoint: per operator its uid, uid hash and parallelism (a native savepoint or
    checkpoint: its format and each subtask's RocksDB files, from the format's document), per keyed
    state its kind and types (Flink SQL syntax where statemorph reads the snapshot), TTL and size."""
    out.say(f"Flink {info.get('savepoint_format', 'savepoint')} {args.savepoint}")
    out.say(f"  _metadata version {info['metadata_version']}, checkpoint {info['checkpoint_id']}, "
            f"{len(info['operators'])} operator(s)")
    for op in info["operators"]:
        uid = f"uid {op['uid']!r}" if op["uid"] else "no uid"
        out.say(f"\noperator {op['name'] or '(unnamed)'!r} ({uid}, uid hash {op['uid_hash']}): "
                f"parallelism {op['parallelism']}, max parallelism {op['max_parallelism']}")
        for named in op["named_by"]:
            out.say(f"  named by [operators.{named['name']}] in {args.schema} ({NAMINGS[named['by']]})")
        if not op["uid"] and not op["named_by"] and info["metadata_version"] < UID_METADATA_VERSION:
            out.say("  Flink 1.x records no uids: a schema file may name this operator by its uid (matched by the "
                    "ID Flink derives from it; inspect --schema shows the match)")
        for sub in op.get("subtasks", []):  # a native savepoint or checkpoint: the RocksDB files each subtask needs
            out.say(f"  subtask {sub['index']}: key groups {sub['key_groups']}, RocksDB instance of "
                    f"{len(sub['files'])} file(s), {human_bytes(sub['size'])}")
            for f in sub["files"]:
                out.detail(f"    {f['local_name']:<20}{f['source']}  {human_bytes(f['size'])}")
            for name, how in sub.get("readers", {}).items():
                read = "from its SST files" if how == "sst" else f"through RocksDB ({how.removeprefix('rocksdb: ')})"
                out.detail(f"    state {name!r} is read {read}")
        for st in op["states"]:
            ttl = ", TTL" if st["ttl"] else ""
            out.say(f"  state {st['name']!r}: {st['kind']} state{ttl}, {st['entries']:,} entries, "
                    f"{human_bytes(st['bytes'])}")
            if st["kind"] != "timers":
                out.say(f"    {'key type':<16}{st['key_type']}")
            out.say(f"    {'value type':<16}{st['value_type']}")
            if st["user_key_type"] is not None:
                out.say(f"    {'map key type':<16}{st['user_key_type']}")
            out.detail(f"    {'namespace':<16}{st['namespace_type']}")
            out.detail(f"    {'snapshot':<16}{st['snapshot']}")
        for ost in op["operator_states"]:
            say_operator_state(out, ost)
    for name in info["unmatched_names"]:
        out.say(f"\n[operators.{name}] in {args.schema} names no operator of this savepoint")


def say_operator_state(out: Console, st: dict[str, Any]) -> None:
    """One operator state (list, union list, broadcast) of ``inspect_flink_savepoint``'s document."""
    counts = ", ".join("?" if n is None else f"{n:,}" for n in st["entries_per_subtask"])
    out.say(f"  operator state {st['name']!r}: {st['kind']} state ({st['mode']}), entries per subtask [{counts}]")
    if st["key_type"] is not None:
        out.say(f"    {'map key type':<16}{st['key_type']}")
    out.say(f"    {('map value type' if st['key_type'] is not None else 'element type'):<16}{st['value_type']}")
    out.detail(f"    {'snapshot':<16}{st['value_snapshot']}")


def cmd_inspect(args: argparse.Namespace) -> int:
    fmt = format_of(args.savepoint)
    names: list[str] = []
    if args.schema is not None:
        if not fmt.has_operators:
            raise UsageError(f"inspect --schema matches a schema file's [operators.<uid>] names to the operators of a "
                             f"Flink savepoint; {args.savepoint} is in {fmt.title}, which has no operators")
        names = list(load_schema(args.schema).operators)
    out = Console.from_args(args)
    doc = fmt.inspect(args.savepoint, names=names)
    out.emit(doc)
    SAY[fmt.name](args, out, doc)
    return ExitCode.OK


def say_parquet(args: argparse.Namespace, out: Console, doc: dict[str, Any]) -> None:
    """A savepoint in the Parquet form: format version, key type, per state its kind, types,
    entries and size (with ``-v`` its files)."""
    out.say(f"savepoint {args.savepoint}")
    key = _shown(doc["key_type"], doc["problems"], "key_serializer")
    out.say(f"  format version {doc['format_version']}, max parallelism {doc['max_parallelism']}, key type {key}")
    out.say(f"  {len(doc['states'])} state(s), {doc['entries']:,} entries, {human_bytes(doc['bytes'])}")
    for st in doc["states"]:
        ttl = ", TTL" if st["ttl"] else ""
        out.say(f"\nstate {st['name']!r}: {st['flink_kind'] or st['kind']} state{ttl}, {st['entries']:,} entries, "
                f"{len(st['files'])} file(s), {human_bytes(st['bytes'])}")
        if st["flink_kind"] == "timers":  # converted from Flink: timer rows have no value
            continue
        label = ELEMENT_LABEL[st["kind"]]
        out.say(f"  {label + ' type':<16}{_shown(st['value_type'], st['problems'], 'value_serializer')}")
        if st["kind"] == "map":
            out.say(f"  {'map key type':<16}{_shown(st['user_key_type'], st['problems'], 'user_key_serializer')}")
        out.say(f"  {'namespace':<16}{_shown(st['namespace_type'], st['problems'], 'namespace_serializer')}")
        out.detail(f"  {'snapshot':<16}{st['value_snapshot'] or '<unreadable>'}")
        for f in st["files"]:
            out.detail(f"  {'file':<16}{f['path']}  {f['entries']:,} rows  {human_bytes(f['bytes'])}  "
                       f"sha256 {f['sha256'][:16]}…")


SAY: dict[str, Callable[[argparse.Namespace, Console, dict[str, Any]], None]] = {
    "flink": say_flink, "parquet": say_parquet}
"""The text form of each format's ``inspect`` document (keyed by its format's ``name``)."""


def add_parser(sub: Any) -> None:
    s = sub.add_parser("inspect", parents=[common_options(json_output=True)],
                       help="list states, kinds, types, entry counts and sizes of a savepoint")
    s.add_argument("savepoint", metavar="SAVEPOINT", help=SAVEPOINT_HELP)
    s.add_argument("--schema", metavar="NEW.toml",
                   help="also show which operator each [operators.<uid>] of this schema file names, and how "
                        "(a Flink 1.x savepoint records no uids: a uid is matched by the ID Flink derives from it)")
    s.set_defaults(func=cmd_inspect)


__all__ = ["SAY", "cmd_inspect", "say_flink", "say_parquet"]
