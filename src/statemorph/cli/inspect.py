"""``statemorph inspect``: what a savepoint holds (states, kinds, types, entry counts, sizes)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import ExitCode, StatemorphError
from .output import human_bytes


def _describe_snapshot(meta: Any, role: str) -> str:
    from ..schema_file import describe_serializer

    try:
        return describe_serializer(meta.snapshot(role).restore_serializer())
    except StatemorphError as e:
        return f"<unreadable: {e}>"


def cmd_inspect_flink(args: argparse.Namespace) -> int:
    """A Flink canonical savepoint: per operator its uid, uid hash and parallelism, per keyed state
    its kind and types (Flink SQL syntax where statemorph reads the snapshot), TTL and size."""
    import json

    from ..engine.flink import inspect_flink_savepoint

    info = inspect_flink_savepoint(args.savepoint)
    if args.json:
        print(json.dumps(info, indent=2))
        return ExitCode.OK
    print(f"Flink savepoint {args.savepoint}")
    print(f"  _metadata version {info['metadata_version']}, checkpoint {info['checkpoint_id']}, "
          f"{len(info['operators'])} operator(s)")
    for op in info["operators"]:
        uid = f"uid {op['uid']!r}" if op["uid"] else "no uid"
        print(f"\noperator {op['name'] or '(unnamed)'!r} ({uid}, uid hash {op['uid_hash']}): "
              f"parallelism {op['parallelism']}, max parallelism {op['max_parallelism']}")
        for st in op["states"]:
            ttl = ", TTL" if st["ttl"] else ""
            print(f"  state {st['name']!r}: {st['kind']} state{ttl}, {st['entries']:,} entries, "
                  f"{human_bytes(st['bytes'])}")
            if st["kind"] != "timers":
                print(f"    {'key type':<16}{st['key_type']}")
            print(f"    {'value type':<16}{st['value_type']}")
            if st["user_key_type"] is not None:
                print(f"    {'map key type':<16}{st['user_key_type']}")
            if args.verbose:
                print(f"    {'namespace':<16}{st['namespace_type']}")
                print(f"    {'snapshot':<16}{st['snapshot']}")
    return ExitCode.OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..savepoint import METADATA_FILE, read_metadata
    from ..savepoint.flink import is_flink_savepoint

    if is_flink_savepoint(args.savepoint):
        return cmd_inspect_flink(args)
    from ..schema_file import describe_serializer

    md = read_metadata(args.savepoint)
    try:
        key = describe_serializer(md.key_snapshot().restore_serializer())
    except StatemorphError as e:
        key = f"<unreadable: {e}>"
    total_rows = sum(s.rows for s in md.states.values())
    total_size = sum(f.size for s in md.states.values() for f in s.files)
    meta_size = os.path.getsize(os.path.join(args.savepoint, METADATA_FILE))
    print(f"savepoint {args.savepoint}")
    print(f"  format version {md.format_version}, max parallelism {md.max_parallelism}, key type {key}")
    print(f"  {len(md.states)} state(s), {total_rows:,} entries, {human_bytes(total_size + meta_size)}")
    for name, st in md.states.items():
        size = sum(f.size for f in st.files)
        print(f"\nstate {name!r}: {st.kind.value} state, {st.rows:,} entries, {len(st.files)} file(s), "
              f"{human_bytes(size)}")
        label = {"value": "value", "list": "element", "map": "map value"}[st.kind.value]
        print(f"  {label + ' type':<16}{_describe_snapshot(st, 'value_serializer')}")
        if st.user_key_serializer is not None:
            print(f"  {'map key type':<16}{_describe_snapshot(st, 'user_key_serializer')}")
        print(f"  {'namespace':<16}{_describe_snapshot(st, 'namespace_serializer')}")
        if args.verbose:
            try:
                ident = st.snapshot("value_serializer").IDENTIFIER
            except StatemorphError as e:
                ident = f"<unreadable: {e}>"
            print(f"  {'snapshot':<16}{ident}")
            for f in st.files:
                print(f"  {'file':<16}{f.path}  {f.rows:,} rows  {human_bytes(f.size)}  sha256 {f.sha256[:16]}…")
    return ExitCode.OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("inspect", help="list states, kinds, types, entry counts and sizes of a savepoint")
    s.add_argument("savepoint", metavar="SAVEPOINT")
    s.add_argument("-v", "--verbose", action="store_true", help="also show snapshot identifiers and files")
    s.add_argument("--json", action="store_true", help="print one JSON object (a Flink savepoint: see docs/cli.md)")
    s.set_defaults(func=cmd_inspect)


__all__ = ["cmd_inspect", "cmd_inspect_flink"]
