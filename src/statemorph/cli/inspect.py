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


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..savepoint import METADATA_FILE, read_metadata
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
    s.set_defaults(func=cmd_inspect)


__all__ = ["cmd_inspect"]
